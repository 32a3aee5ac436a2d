#!/usr/bin/env bash
# launch-worker.sh: dgxspark.ds4 launch script for spark2 (worker, node rank 1 of 2), profile conservative.
# Rendered by dgxspark.ds4.effective_config; do not edit. Change the inventory and re-render.
# Recipe: seed 002 (002_f507b8c32a3f3564.txt) 'The Config': 96 GB nodes, 200K ctx x 2 seqs, PIECEWISE, util 0.78
# Secrets (API keys, HF tokens) never appear here; they come from a 0600 env file.
set -euo pipefail

# Environment common to both nodes (base + profile + site overrides).
export HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export TORCH_CUDA_ARCH_LIST=12.1a
export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
export VLLM_TRITON_MLA_SPARSE=1
export VLLM_USE_FLASHINFER_SAMPLER=1
export FLASHINFER_DISABLE_VERSION_CHECK=1
export TILELANG_CLEANUP_TEMP_FILES=1
export DG_JIT_USE_NVRTC=0
export DG_JIT_NVCC_COMPILER=/usr/local/cuda/bin/nvcc
export OMP_NUM_THREADS=8
export NCCL_IB_DISABLE=0
export NCCL_IGNORE_CPU_AFFINITY=1
export VLLM_CACHE_ROOT=/root/.cache/vllm
export TRITON_CACHE_DIR=/root/.triton/cache
export TORCHINDUCTOR_CACHE_DIR=/root/.cache/torchinductor
export FLASHINFER_WORKSPACE_BASE=/root

# Per-node environment, from host_vars/spark2.yml (never one global value).
export VLLM_HOST_IP=192.168.100.11
export NCCL_SOCKET_IFNAME=enp1s0f1np1
export GLOO_SOCKET_IFNAME=enp1s0f1np1
export TP_SOCKET_IFNAME=enp1s0f1np1
export NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1

# Worker: --headless (no API server, no TCPStore bind); start it before the head.
exec vllm serve \
  /models/DeepSeek-V4-Flash \
  --host 127.0.0.1 \
  --port 8000 \
  --tensor-parallel-size 2 \
  --pipeline-parallel-size 1 \
  --distributed-executor-backend mp \
  --served-model-name deepseek-v4-flash \
  --max-model-len 200000 \
  --max-num-seqs 2 \
  --max-num-batched-tokens 8192 \
  --gpu-memory-utilization 0.78 \
  --kv-cache-dtype fp8 \
  --block-size 256 \
  --enable-prefix-caching \
  --enable-expert-parallel \
  --compilation-config '{"cudagraph_mode":"PIECEWISE"}' \
  --speculative-config '{"method":"deepseek_mtp","num_speculative_tokens":2}' \
  --disable-custom-all-reduce \
  --trust-remote-code \
  --load-format safetensors \
  --tokenizer-mode deepseek_v4 \
  --tool-call-parser deepseek_v4 \
  --enable-auto-tool-choice \
  --reasoning-parser deepseek_v4 \
  --enable-flashinfer-autotune \
  --nnodes 2 \
  --node-rank 1 \
  --master-addr 192.168.100.10 \
  --master-port 29501 \
  --headless
