#!/usr/bin/env bash
# Two ranks of roles/nccl_fabric/files/ds4_allreduce.py on ONE host with two GPUs (device machine).
# On one host NCCL uses P2P/NVLink or SHM, not NET/IB: this proves the program and the parsing,
# not the Spark fabric. Output: $OUT/device-run.log (both ranks, NCCL_DEBUG=INFO INIT,NET).
set -uo pipefail
OUT=${OUT:-/tmp/ds4-allreduce-out}
mkdir -p "$OUT"
log=$OUT/device-run.log
prog=roles/nccl_fabric/files/ds4_allreduce.py
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_CUMEM_ENABLE=0 NCCL_IGNORE_CPU_AFFINITY=1 PYTHONUNBUFFERED=1
{
  echo "# date: $(date -u +%FT%TZ)"
  nvidia-smi -L
  nvidia-smi topo -m || true
  python3 -c 'import torch; print("# torch", torch.__version__, "gpus", torch.cuda.device_count())'
} >"$log" 2>&1
python3 "$prog" --rank 1 --world-size 2 --master-addr 127.0.0.1 --master-port 29511 --local-rank 1 >"$OUT/rank1.log" 2>&1 &
pid1=$!
python3 "$prog" --rank 0 --world-size 2 --master-addr 127.0.0.1 --master-port 29511 --local-rank 0 >"$OUT/rank0.log" 2>&1
rc0=$?
wait "$pid1"
rc1=$?
{
  echo "# ===== rank 0 (rc=$rc0) ====="
  cat "$OUT/rank0.log"
  echo "# ===== rank 1 (rc=$rc1) ====="
  cat "$OUT/rank1.log"
} >>"$log"
# Parse with the collection's own parser (same code the role uses).
python3 - "$log" >"$OUT/parse.txt" 2>&1 <<'PY'
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("nccl_log", "plugins/module_utils/_fabric/nccl_log.py")
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
text = open(sys.argv[1]).read()
log = m.parse_log(text)
print("# parse_log:", json.dumps({k: log[k] for k in ("nccl_version", "transport", "hca_names", "channels", "connected", "warnings")}))
print("# summarize:", json.dumps(m.summarize(text, expected_hcas=0)))
PY
cat "$OUT/parse.txt" >>"$log"
cat "$log"
exit $((rc0 | rc1))
