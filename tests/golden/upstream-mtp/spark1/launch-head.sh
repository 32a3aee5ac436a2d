#!/usr/bin/env bash
# launch-head.sh: dgxspark.ds4 launch script for spark1 (head, node rank 0 of 2), profile upstream-mtp.
# Rendered by dgxspark.ds4.effective_config; do not edit. Change the inventory and re-render.
# Recipe: seed 000 'production profile' shape (131072 ctx x 8 seqs, MTP 2) on upstream vLLM 0.33.0 with NVIDIA's published loading and allocator defaults (field notes 2026-11)
# Secrets (API keys, HF tokens) never appear here; they come from a 0600 env file.
set -euo pipefail

# Environment common to both nodes (base + profile + site overrides).
export HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export NCCL_IB_DISABLE=0
export NCCL_IGNORE_CPU_AFFINITY=1
export OMP_NUM_THREADS=8
export VLLM_CACHE_ROOT=/root/.cache/vllm
export TRITON_CACHE_DIR=/root/.triton/cache
export TORCHINDUCTOR_CACHE_DIR=/root/.cache/torchinductor
export FLASHINFER_WORKSPACE_BASE=/root

# Per-node environment, from host_vars/spark1.yml (never one global value).
export VLLM_HOST_IP=192.168.100.10
export NCCL_SOCKET_IFNAME=enp1s0f1np1
export GLOO_SOCKET_IFNAME=enp1s0f1np1
export TP_SOCKET_IFNAME=enp1s0f1np1
export NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1

# Head: serves the API on 127.0.0.1:8000; start it after the worker.
exec vllm serve \
  /models/DeepSeek-V4-Flash \
  --host 127.0.0.1 \
  --port 8000 \
  --tensor-parallel-size 2 \
  --pipeline-parallel-size 1 \
  --distributed-executor-backend mp \
  --served-model-name deepseek-v4-flash \
  --kv-cache-dtype fp8 \
  --block-size 256 \
  --enable-prefix-caching \
  --enable-chunked-prefill \
  --max-model-len 131072 \
  --max-num-seqs 8 \
  --max-num-batched-tokens 16384 \
  --gpu-memory-utilization 0.9 \
  --speculative-config '{"method":"mtp","num_speculative_tokens":2}' \
  --load-format instanttensor \
  --tokenizer-mode deepseek_v4 \
  --tool-call-parser deepseek_v4 \
  --enable-auto-tool-choice \
  --reasoning-parser deepseek_v4 \
  --default-chat-template-kwargs '{"thinking":true}' \
  --nnodes 2 \
  --node-rank 0 \
  --master-addr 192.168.100.10 \
  --master-port 29501
