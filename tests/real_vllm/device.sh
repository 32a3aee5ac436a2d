#!/usr/bin/env bash
# Second call on the GPU machine (README "Re-recording"): reassemble and install vLLM 0.26.0 from the two
# carries, make the tiny model, run every scenario on real vLLM, tar the traces into $OUT/real.tgz.
#   call 1 (carry .xfer/c1): mkdir -p /root/stash && cp .xfer/c1/vllm.tar.xz.part0 /root/stash/
#   call 2 (carry .xfer/c2): bash tests/real_vllm/device.sh
# XFER: where the carries lie (default .xfer, relative to the repository root the command runs in).
set -euo pipefail
S=$SECONDS
XFER=${XFER:-.xfer}
cp "$XFER/c2/vllm.tar.xz.part1" /root/stash/
cat /root/stash/vllm.tar.xz.part0 /root/stash/vllm.tar.xz.part1 > /tmp/vllm.tar.xz
echo "$(cat "$XFER/c2/vllm.tar.xz.sha256")  /tmp/vllm.tar.xz" | sha256sum -c
mkdir -p /tmp/site && tar xJf /tmp/vllm.tar.xz -C /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$XFER"/c2/*.whl
export PYTHONPATH=/tmp/site
python3 -c "import vllm, llama_benchy; print('vllm', vllm.__version__)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 tests/real_vllm/make_model.py /tmp/model
mkdir -p "$OUT/r"
echo "setup took $((SECONDS-S)) s"
LEFT=$((575-(SECONDS-S)))
set +e
timeout $((LEFT+15)) python3 tests/real_vllm/driver.py --backend real --model /tmp/model --out "$OUT/r" \
  --deadline-s "$LEFT" > "$OUT/r/driver.log" 2>&1
echo "driver rc=$? after $((SECONDS-S)) s"
tail -30 "$OUT/r/driver.log"
tar czf "$OUT/real.tgz" -C "$OUT" r && rm -rf "$OUT/r"
ls -la "$OUT"
