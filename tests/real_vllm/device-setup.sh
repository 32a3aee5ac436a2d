# shellcheck shell=bash
# Sourced by device-starvation.sh and device-canary.sh (TEST CODE ONLY): vLLM 0.26.0 from the carries into $SITE
# unless it already imports there (tests/real_vllm/README.md "Running"), the GPU named, the tiny model made unless
# $MODEL exists. Needs PY, XFER, S (the script's start, $SECONDS) and a `finish` function (tar what there is) from
# the caller; on a failure it calls finish and exits 1. With BACKEND other than real it does nothing.
SITE=${SITE:-/tmp/site}
STASH=${STASH:-/root/stash}
MODEL=${MODEL:-/tmp/model}
if [ "${BACKEND:-real}" = real ]; then
  export PYTHONPATH=$SITE
  # installed = vllm and a dependency only the c2 wheels bring (fastapi) import: the tar and the pip step both ran
  if "$PY" -c 'import vllm, fastapi' 2>/dev/null; then
    echo "vLLM already installed in $SITE"
  else
    (
      set -e
      cp "$XFER/c2/vllm.tar.xz.part1" "$STASH/"
      cat "$STASH/vllm.tar.xz.part0" "$STASH/vllm.tar.xz.part1" > /tmp/vllm.tar.xz
      echo "$(cat "$XFER/c2/vllm.tar.xz.sha256")  /tmp/vllm.tar.xz" | sha256sum -c
      mkdir -p "$SITE" && tar xJf /tmp/vllm.tar.xz -C "$SITE"
      "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" --upgrade "$XFER"/c2/*.whl
      "$PY" -c "import vllm, fastapi; print('vllm', getattr(vllm, '__version__', '?'))"
    ) || { echo "install failed after $((SECONDS-S)) s"; finish; exit 1; }
  fi
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader
  if [ ! -f "$MODEL/config.json" ]; then
    "$PY" tests/real_vllm/make_model.py "$MODEL" || { echo "make_model failed"; finish; exit 1; }
  fi
fi
