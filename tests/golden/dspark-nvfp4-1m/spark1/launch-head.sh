#!/usr/bin/env bash
# launch-head.sh: dgxspark.ds4 launch script for spark1 (head, node rank 0 of 2), profile dspark-nvfp4-1m.
# Rendered by dgxspark.ds4.effective_config; do not edit. Change the inventory and re-render.
# Recipe: seed 003 (003_55b1aeac4ec54a2e.txt) 'Runtime' 2026-06-30: DSpark, nvfp4_ds_mla KV, 1048576 ctx x 6 seqs
# Secrets (API keys, HF tokens) never appear here; they come from a 0600 env file.
set -euo pipefail

# Environment common to both nodes (base + profile + site overrides).
export HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export VLLM_USE_B12X_MOE=1
export VLLM_USE_B12X_WO_PROJECTION=1
export VLLM_DSPARK_GPU_REJECTED_CONTEXT_MASK=1
export VLLM_DSPARK_CONFIDENCE_SCHEDULER=off
export VLLM_DSPARK_LOCAL_ARGMAX=1
export VLLM_DSPARK_REPLICATE_MARKOV_W1=1
export VLLM_DSPARK_FUSED_MARKOV_ARGMAX=0
export VLLM_DSPARK_REFERENCE_KV_QUANT_DEQUANT=0
export VLLM_DSV4_B12X_COMPRESSED_MLA=0
export VLLM_DSV4_DSPARK_DEFER_TARGET_CAPTURE=0
export B12X_W4A16_TC_DECODE=0
export VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0
export VLLM_CACHE_ROOT=/cache/vllm
export TRITON_CACHE_DIR=/cache/triton
export TORCHINDUCTOR_CACHE_DIR=/cache/torchinductor
export FLASHINFER_WORKSPACE_BASE=/cache/flashinfer

# Per-node environment, from host_vars/spark1.yml (never one global value).
export VLLM_HOST_IP=192.168.100.10
export NCCL_SOCKET_IFNAME=enp1s0f1np1
export GLOO_SOCKET_IFNAME=enp1s0f1np1
export TP_SOCKET_IFNAME=enp1s0f1np1
export NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1

# Head: serves the API on 127.0.0.1:8888; start it after the worker.
exec vllm serve \
  /cache/huggingface/fraserprice/DeepSeek-V4-Flash-DSpark \
  --host 127.0.0.1 \
  --port 8888 \
  --tensor-parallel-size 2 \
  --pipeline-parallel-size 1 \
  --distributed-executor-backend mp \
  --served-model-name deepseek-v4-flash-dspark \
  --kv-cache-dtype nvfp4_ds_mla \
  --block-size 256 \
  --max-model-len 1048576 \
  --max-num-seqs 6 \
  --max-num-batched-tokens 8192 \
  --gpu-memory-utilization 0.8 \
  --speculative-config '{"method":"dspark","num_speculative_tokens":5}' \
  --generation-config vllm \
  --override-generation-config '{"temperature":0.6,"top_p":0.95,"top_k":40,"repetition_penalty":1.05}' \
  --default-chat-template-kwargs '{"thinking":false,"enable_thinking":false}' \
  --nnodes 2 \
  --node-rank 0 \
  --master-addr 192.168.100.10 \
  --master-port 29501
