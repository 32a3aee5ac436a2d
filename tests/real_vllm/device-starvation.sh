#!/usr/bin/env bash
# The starvation scenario (real-vllm-on-device notes, Part 1b) on the GPU machine, one engine per config, one GPU:
#   bash tests/real_vllm/device-starvation.sh 256:0 256:224        (CONFIG = budget:threshold, threshold 0 = flag off)
# Per config: start `vllm serve` (TP 1, CUDA_VISIBLE_DEVICES=0), wait for /health, run the scenario, the optional
# bench_mixed hook, stop the engine. Everything ends up in $OUT/starv.tgz (starv/starvation_b<B>_t<T>.json,
# starv/bench_mixed_b<B>_t<T>.json, starv/driver_b<B>_t<T>.log); this script's own lines go to stdout.
# vLLM is installed from the carries (README "Running") unless $SITE already imports it; $MODEL is made
# unless it exists. A config that no longer fits before DEADLINE_S (default 560 s after the start; a call may run
# 600 s) is skipped and said so.
# Env: DEADLINE_S (560), MIN_CONFIG_S (150: a config needs this much left to start), XFER (.xfer), SITE (/tmp/site),
#      STASH (/root/stash: call 1 left part0 there), MODEL (/tmp/model),
#      LONG_TOKENS (250000; sim 0 = driver.py's sim default per budget), BENCH_MIXED (1: run the hook), BACKEND (real; sim = dry run on any machine:
#      no install, no model, the simulator instead of vLLM).
set -uo pipefail
S=$SECONDS
DEADLINE_S=${DEADLINE_S:-560}
MIN_CONFIG_S=${MIN_CONFIG_S:-150}
XFER=${XFER:-.xfer}
BACKEND=${BACKEND:-real}
BENCH_MIXED=${BENCH_MIXED:-1}
OUT=${OUT:-/tmp/starv-out}
if [ "$BACKEND" = sim ]; then LONG_TOKENS=${LONG_TOKENS:-0}; else LONG_TOKENS=${LONG_TOKENS:-250000}; fi
PY=${PYTHON:-python3}
R="$OUT/starv"
mkdir -p "$R"

if [ $# -eq 0 ]; then
  echo "usage: $0 BUDGET:THRESHOLD ... (e.g. 256:0 256:224 8192:0 8192:7168)"; exit 2
fi
for cfg in "$@"; do
  case "$cfg" in
    *[!0-9:]*|:*|*:|*:*:*|"") echo "bad config '$cfg': want BUDGET:THRESHOLD, e.g. 256:224"; exit 2 ;;
    *:*) ;;
    *) echo "bad config '$cfg': want BUDGET:THRESHOLD, e.g. 256:224"; exit 2 ;;
  esac
done

finish() {
  tar czf "$OUT/starv.tgz" --exclude=.work -C "$OUT" starv && rm -rf "$R"
  ls -la "$OUT"
}

# shellcheck source=tests/real_vllm/device-setup.sh
. "$(dirname "${BASH_SOURCE[0]}")/device-setup.sh"
echo "setup took $((SECONDS-S)) s"

gpu_idle() {   # real: wait (at most 30 s) until the GPU's memory is given back by the last engine
  [ "$BACKEND" = real ] || return 0
  for _i in $(seq 30); do
    used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | tr -dc 0-9)
    [ -n "$used" ] && [ "$used" -lt 2048 ] && return 0
    sleep 1
  done
  echo "GPU 0 still has ${used:-?} MiB in use"
}

i=0
for cfg in "$@"; do
  B=${cfg%%:*}; T=${cfg##*:}
  LEFT=$((DEADLINE_S-(SECONDS-S)))
  if [ "$LEFT" -lt "$MIN_CONFIG_S" ]; then
    echo "SKIPPED budget $B threshold $T: ${LEFT} s left before DEADLINE_S=$DEADLINE_S (needs MIN_CONFIG_S=$MIN_CONFIG_S)"
    continue
  fi
  gpu_idle
  LEFT=$((DEADLINE_S-(SECONDS-S)))
  if [ "$LEFT" -lt "$MIN_CONFIG_S" ]; then
    echo "SKIPPED budget $B threshold $T: ${LEFT} s left after waiting for the GPU (needs MIN_CONFIG_S=$MIN_CONFIG_S)"
    continue
  fi
  PORT=()
  [ "$BACKEND" = real ] && PORT=(--port-base $((8000+10*i)))
  MIX=()
  [ "$BENCH_MIXED" = 1 ] && MIX=(--bench-mixed)
  echo "config budget $B threshold $T: start at $((SECONDS-S)) s, ${LEFT} s left"
  timeout -s INT -k 20 $((LEFT+5)) "$PY" tests/real_vllm/driver.py --backend "$BACKEND" --ranks 1 --model "$MODEL" \
    --out "$R" --budget "$B" --threshold "$T" --long-tokens "$LONG_TOKENS" --deadline-s "$((LEFT-15))" \
    ${PORT[@]+"${PORT[@]}"} ${MIX[@]+"${MIX[@]}"} > "$R/driver_b${B}_t${T}.log" 2>&1
  echo "config budget $B threshold $T: driver rc=$? at $((SECONDS-S)) s"
  tail -5 "$R/driver_b${B}_t${T}.log"
  i=$((i+1))
done
echo "all done after $((SECONDS-S)) s"
finish
