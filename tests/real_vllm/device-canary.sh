#!/usr/bin/env bash
# The quality canary's classification on real vLLM signals (tests/real_vllm/canary_real.py), on the GPU machine:
#   bash tests/real_vllm/device-canary.sh                 (phases 1,2,3; PHASES=1,2 for the first engine only)
# Engine b256_t0: phase 1 (idle: gibberish answers -> failure), phase 2 (the canary behind a 250,000-token prefill,
# request timeout 5 s -> inconclusive); engine b256_t224: phase 3 (the same prefill with
# --long-prefill-token-threshold 224: answered, gibberish -> failure). Everything ends up in $OUT/canary.tgz
# (canary/phase<N>.json, canary/engine_<cfg>.json, canary/summary.json, canary/canary_real.log); this script's own
# lines and the summary go to stdout.
# vLLM is installed from the carries (tests/real_vllm/README.md "Running") unless $SITE already imports it; $MODEL is
# made unless it exists (device-setup.sh, shared with device-starvation.sh).
# Env: DEADLINE_S (540: the whole run, this script's setup included), XFER (.xfer), SITE (/tmp/site),
#      STASH (/root/stash), MODEL (/tmp/model), PHASES (1,2,3), LONG_TOKENS (0: real 250000, sim 72000),
#      REQUEST_TIMEOUT_S (5), BACKEND (real; sim = dry run on any machine: no install, no model, the simulator).
set -uo pipefail
S=$SECONDS
DEADLINE_S=${DEADLINE_S:-540}
XFER=${XFER:-.xfer}
BACKEND=${BACKEND:-real}
PHASES=${PHASES:-1,2,3}
LONG_TOKENS=${LONG_TOKENS:-0}
REQUEST_TIMEOUT_S=${REQUEST_TIMEOUT_S:-5}
OUT=${OUT:-/tmp/canary-out}
PY=${PYTHON:-python3}
R="$OUT/canary"
mkdir -p "$R"

finish() {
  rm -rf "$R/.work"
  tar czf "$OUT/canary.tgz" -C "$OUT" canary && rm -rf "$R"
  ls -la "$OUT"
}

# shellcheck source=tests/real_vllm/device-setup.sh
. "$(dirname "${BASH_SOURCE[0]}")/device-setup.sh"
if [ "$BACKEND" = real ]; then
  # an engine left by an earlier call still holding the GPU: wait (at most 30 s) for its memory to be given back
  for _i in $(seq 30); do
    used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | tr -dc 0-9)
    [ -n "$used" ] && [ "$used" -lt 2048 ] && break
    sleep 1
  done
fi
echo "setup took $((SECONDS-S)) s"

LEFT=$((DEADLINE_S-(SECONDS-S)))
timeout -s INT -k 20 $((LEFT+5)) "$PY" tests/real_vllm/canary_real.py --backend "$BACKEND" --model "$MODEL" --out "$R" \
  --phases "$PHASES" --long-tokens "$LONG_TOKENS" --request-timeout-s "$REQUEST_TIMEOUT_S" --deadline-s "$((LEFT-25))" \
  > "$R/canary_real.log" 2>&1
rc=$?
echo "canary_real rc=$rc at $((SECONDS-S)) s"
grep -E '^(PHASE|  \{|SKIPPED|SUMMARY|engine|phase)' "$R/canary_real.log" | cut -c1-1500
[ "$rc" = 0 ] || tail -20 "$R/canary_real.log"
echo "all done after $((SECONDS-S)) s"
finish
