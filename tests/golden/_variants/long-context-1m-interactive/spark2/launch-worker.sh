#!/usr/bin/env bash
# launch-worker.sh: dgxspark.ds4 launch script for spark2 (worker, node rank 1 of 2), profile long-context-1m.
# Rendered by dgxspark.ds4.effective_config; do not edit. Change the inventory and re-render.
# Recipe: seed 001 (001_9dfc0859543564c6.txt) 'Docker Compose Configuration': b12x image, 1M ctx x 6 seqs
# Deviation from the seed (a collection setting), ds4_interactive_long_prompts: --long-prefill-token-threshold 7168 (7/8 of --max-num-batched-tokens 8192; the seed runs vLLM's default, 0): a request that arrives during a long prefill gets its first token within about one engine step, the long prompt prefills slightly slower
# Secrets (API keys, HF tokens) never appear here; they come from a 0600 env file.
set -euo pipefail

# Environment common to both nodes (base + profile + site overrides).
export HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export HF_HOME=/cache/huggingface
export VLLM_CACHE_ROOT=/cache/vllm
export TRITON_CACHE_DIR=/cache/triton
export TORCHINDUCTOR_CACHE_DIR=/cache/torchinductor
export FLASHINFER_WORKSPACE_BASE=/cache/flashinfer
export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
export VLLM_USE_B12X_MOE=1
export VLLM_SPARSE_INDEXER_MAX_LOGITS_MB=256
export TORCH_CUDA_ARCH_LIST=12.1a
export FLASHINFER_CUDA_ARCH_LIST=12.1a
export NCCL_NET=IB
export NCCL_IB_DISABLE=0
export NCCL_CROSS_NIC=1
export NCCL_CUMEM_ENABLE=0
export NCCL_IGNORE_CPU_AFFINITY=1
export NCCL_DEBUG=WARN

# Per-node environment, from host_vars/spark2.yml (never one global value).
export VLLM_HOST_IP=192.168.100.11
export NCCL_SOCKET_IFNAME=enp1s0f1np1
export GLOO_SOCKET_IFNAME=enp1s0f1np1
export TP_SOCKET_IFNAME=enp1s0f1np1
export NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1

# Worker: --headless (no API server, no TCPStore bind); start it before the head.
exec /usr/local/bin/dsv4-vllm-entrypoint serve \
  /models/DeepSeek-V4-Flash \
  --host 127.0.0.1 \
  --port 8000 \
  --tensor-parallel-size 2 \
  --pipeline-parallel-size 1 \
  --distributed-executor-backend mp \
  --served-model-name deepseek-v4-flash \
  --trust-remote-code \
  --kv-cache-dtype fp8 \
  --block-size 256 \
  --max-model-len 1000000 \
  --max-num-seqs 6 \
  --max-num-batched-tokens 8192 \
  --gpu-memory-utilization 0.82 \
  --enable-prefix-caching \
  --speculative-config '{"method":"mtp","num_speculative_tokens":2}' \
  --tokenizer-mode deepseek_v4 \
  --tool-call-parser deepseek_v4 \
  --enable-auto-tool-choice \
  --reasoning-parser deepseek_v4 \
  --reasoning-config '{"reasoning_parser":"deepseek_v4","reasoning_start_str":"","reasoning_end_str":""}' \
  --default-chat-template-kwargs '{"thinking":true,"reasoning_effort":"high"}' \
  --enable-flashinfer-autotune \
  --long-prefill-token-threshold 7168 \
  --nnodes 2 \
  --node-rank 1 \
  --master-addr 192.168.100.10 \
  --master-port 25000 \
  --headless
