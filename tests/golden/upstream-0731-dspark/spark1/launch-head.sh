#!/usr/bin/env bash
# launch-head.sh: dgxspark.ds4 launch script for spark1 (head, node rank 0 of 2), profile upstream-0731-dspark.
# Rendered by dgxspark.ds4.effective_config; do not edit. Change the inventory and re-render.
# Recipe: field notes 2026-11 (NVIDIA deepseek-v4-flash-0731 recipe, field defaults) + vllm-ops notes peer compose (0731 TP=2, upstream vLLM): DSpark k=5, fp8_ds_mla KV, 1M context
# Secrets (API keys, HF tokens) never appear here; they come from a 0600 env file.
set -euo pipefail

# Environment common to both nodes (base + profile + site overrides).
export HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export NCCL_NET=IB
export NCCL_IB_DISABLE=0
export NCCL_CROSS_NIC=1
export NCCL_CUMEM_ENABLE=0
export NCCL_IGNORE_CPU_AFFINITY=1
export NCCL_NVLS_ENABLE=0
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
  /models/DeepSeek-V4-Flash-0731 \
  --host 127.0.0.1 \
  --port 8000 \
  --tensor-parallel-size 2 \
  --pipeline-parallel-size 1 \
  --distributed-executor-backend mp \
  --served-model-name deepseek-v4-flash-0731 \
  --kv-cache-dtype fp8_ds_mla \
  --block-size 256 \
  --max-model-len 1048576 \
  --max-num-seqs 12 \
  --gpu-memory-utilization 0.88 \
  --speculative-config '{"method":"dspark","num_speculative_tokens":5}' \
  --load-format instanttensor \
  --tokenizer-mode deepseek_v4 \
  --tool-call-parser deepseek_v4 \
  --enable-auto-tool-choice \
  --reasoning-parser deepseek_v4 \
  --nnodes 2 \
  --node-rank 0 \
  --master-addr 192.168.100.10 \
  --master-port 25000
