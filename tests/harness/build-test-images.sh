#!/usr/bin/env bash
# Build the small inner test images of the Molecule scenario `image` (role dgxspark.ds4.container_image).
# No registry, no network: a root filesystem is cut out of the node image `ds4-node:bookworm` (busybox-static
# for /bin/sh, Debian's python3.11 with its stdlib and libraries, about 30 MB) and `docker import`ed, then
# variants are built FROM it with the legacy builder (COPY only):
#   ds4-test/vllm:unpatched  mxfp4.py = tests/fixtures/mxfp4/unpatched.py.txt, no DeepGEMM, build-metadata.yaml,
#                            vllm-0.22.0.dist-info in python3's dist-packages (the version container_image reads)
#   ds4-test/vllm:double     mxfp4.py = double_patched.py.txt, a deep_gemm package (fixture), build-metadata.yaml, the same dist-info
#   ds4-test/vllm:impostor   different content (planted on the worker under the effective tag by the scenario)
#   ds4-test/vllm:venv       vLLM in a venv, the b12x layout: /opt/venv/bin/vllm (#!/opt/venv/bin/python3) on PATH after
#                            the system python3, which has no vllm (vllm/__init__.py + mxfp4.py unpatched, no DeepGEMM),
#                            built twice: v1 and a newer v2 under the same tag (digest pinning: the tag moves); no
#                            dist-info: its version is the package's __version__ (0.22.0+venv.v1, 0.22.0+venv.v2)
# Output (not in .cache/images/inner itself, so the shared prepare does not load them on every node):
#   .cache/images/inner/image-test/ds4-test-vllm.tar   (unpatched + double; the head loads it: source=load)
#   .cache/images/inner/image-test/ds4-test-impostor.tar
#   .cache/images/inner/image-test/ds4-test-venv-v1.tar, ds4-test-venv-v2.tar (ds4-test/vllm:venv, old and new)
# Cached by a content hash of the fixtures, this script and the node image ID (rebuilt when they change or
# DS4_FORCE_BUILD=1). Env: DS4_NODE_IMAGE (default ds4-node:bookworm), DS4_CACHE_DIR (default <repo>/.cache).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BASE="${DS4_NODE_IMAGE:-ds4-node:bookworm}"
OUT_DIR="${DS4_CACHE_DIR:-${REPO_ROOT}/.cache}/images/inner/image-test"
FIX="${REPO_ROOT}/tests/fixtures/mxfp4"
SELF="${REPO_ROOT}/tests/harness/$(basename "${BASH_SOURCE[0]}")"
MXFP4=/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/quantization/mxfp4.py
LABEL="org.dgxspark.ds4.test-image-key"

start=$(date +%s.%N)
elapsed() { awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }
log() { echo "build-test-images: $*" >&2; }

docker image inspect "$BASE" >/dev/null 2>&1 || { log "base image ${BASE} missing: run tests/harness/build-node-image.sh first"; exit 1; }
base_id=$(docker image inspect -f '{{.Id}}' "$BASE")
INSTALL_DIST="${REPO_ROOT}/tests/vllm_sim/install_dist.py"
TEST_VLLM_VERSION=0.22.0  # the balanced profile's declared version (the scenario's config plays keep it)
key=$( { sha256sum "$FIX"/unpatched.py.txt "$FIX"/double_patched.py.txt "$SELF" "${REPO_ROOT}/tests/harness/slim-rootfs.sh" "$INSTALL_DIST" \
         | cut -d' ' -f1; echo "$base_id"; } | sha256sum | cut -c1-16)
if [[ "${DS4_FORCE_BUILD:-0}" != 1 && -s "$OUT_DIR/ds4-test-vllm.tar" && -s "$OUT_DIR/ds4-test-impostor.tar" && -s "$OUT_DIR/ds4-test-venv-v2.tar" \
      && "$(cat "$OUT_DIR/key" 2>/dev/null)" == "$key" ]]; then
  log "test images (key ${key}) up to date, nothing to do ($(elapsed) s)"
  exit 0
fi

work=$(mktemp -d /var/tmp/ds4-test-images.XXXXXX)
trap 'rm -rf --one-file-system "$work"' EXIT

# 1. Minimal rootfs from the node image: busybox (sh, tar), python3.11 + stdlib (no test suite) + its libraries.
# shellcheck source=tests/harness/slim-rootfs.sh
. "${REPO_ROOT}/tests/harness/slim-rootfs.sh"
slim_rootfs_import "$BASE" ds4-test/rootfs:base "${LABEL}=${key}" "$work"

# 2. Variants (legacy builder, COPY only, no network).
variant() {  # name mxfp4-fixture with-deepgemm
  local name=$1 fixture=$2 deepgemm=$3 ctx="$work/ctx-$1"
  mkdir -p "$ctx"
  cp "$FIX/$fixture" "$ctx/mxfp4.py"
  cat >"$ctx/build-metadata.yaml" <<META
# Test fixture in the shape of seed 000's /workspace/build-metadata.yaml
build_date: "2026-05-27T21:40:38Z"
vllm_commit: 48cebd4ad65d0b8263474dff1eb6ef83cb4fcc23
build_args:
  vllm_ref: main
  vllm_prs: "41834"
variant: ${name}
META
  python3 "$INSTALL_DIST" "$TEST_VLLM_VERSION" "$ctx/site" >/dev/null
  {
    echo "FROM ds4-test/rootfs:base"
    echo "COPY mxfp4.py ${MXFP4}"
    echo "COPY site/vllm-${TEST_VLLM_VERSION}.dist-info /usr/local/lib/python3.11/dist-packages/vllm-${TEST_VLLM_VERSION}.dist-info"
    echo "COPY build-metadata.yaml /workspace/build-metadata.yaml"
    if [[ "$deepgemm" == yes ]]; then
      mkdir -p "$ctx/deep_gemm"; echo "__version__ = 'fixture'" >"$ctx/deep_gemm/__init__.py"
      echo "COPY deep_gemm /usr/local/lib/python3.11/dist-packages/deep_gemm"
    fi
    echo "LABEL org.opencontainers.image.title=\"ds4 test image (${name})\" org.dgxspark.ds4.test-variant=${name} ${LABEL}=${key}"
  } >"$ctx/Dockerfile"
  DOCKER_BUILDKIT=0 docker build --network none -q -t "ds4-test/vllm:${name}" "$ctx" >/dev/null
}
variant unpatched unpatched.py.txt no
variant double double_patched.py.txt yes
# The impostor: a different image (busybox only) that the scenario plants on the worker under the effective tag.
mkdir -p "$work/impostor/bin"
cp "$work/rootfs/bin/busybox" "$work/impostor/bin/"; ln -sf busybox "$work/impostor/bin/sh"
echo impostor >"$work/impostor/IMPOSTOR"
tar -C "$work/impostor" --numeric-owner -c . | docker import -c 'CMD ["/bin/sh"]' - ds4-test/vllm:impostor >/dev/null

# vLLM in a venv (the b12x layout): python3 on PATH is the system one (no vllm); the venv's vllm command (its #!
# names the venv's python3) is on PATH after it. Only the venv's python3 finds vllm; built twice under one tag.
venv_variant() {  # version
  local ctx="$work/ctx-venv-$1" site=/opt/venv/lib/python3.11/site-packages
  mkdir -p "$ctx/vllm/model_executor/layers/quantization"
  echo "__version__ = '${TEST_VLLM_VERSION}+venv.$1'" >"$ctx/vllm/__init__.py"
  cp "$FIX/unpatched.py.txt" "$ctx/vllm/model_executor/layers/quantization/mxfp4.py"
  printf '#!/opt/venv/bin/python3\nimport vllm\nprint(vllm.__version__)\n' >"$ctx/vllm-command"
  chmod 0755 "$ctx/vllm-command"
  cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM ds4-test/rootfs:base
RUN ["/usr/bin/python3", "-m", "venv", "--without-pip", "/opt/venv"]
COPY vllm ${site}/vllm
COPY vllm-command /opt/venv/bin/vllm
ENV PATH=/usr/local/bin:/usr/bin:/bin:/opt/venv/bin
LABEL org.opencontainers.image.title="ds4 test image (venv $1)" org.dgxspark.ds4.test-variant=venv-$1 ${LABEL}=${key}
DOCKERFILE
  DOCKER_BUILDKIT=0 docker build --network none -q -t ds4-test/vllm:venv "$ctx" >/dev/null
  docker run --rm --network none --entrypoint vllm ds4-test/vllm:venv >/dev/null \
    || { log "venv $1: the vllm command does not run with the venv's python3"; exit 1; }
  if docker run --rm --network none --entrypoint python3 ds4-test/vllm:venv -c 'import vllm' 2>/dev/null; then
    log "venv $1: python3 on PATH imports vllm; the image must keep it in the venv only"; exit 1
  fi
}
mkdir -p "$OUT_DIR"
venv_variant v1
docker save -o "$OUT_DIR/ds4-test-venv-v1.tar.tmp" ds4-test/vllm:venv
venv_variant v2
docker save -o "$OUT_DIR/ds4-test-venv-v2.tar.tmp" ds4-test/vllm:venv
mv -f "$OUT_DIR/ds4-test-venv-v1.tar.tmp" "$OUT_DIR/ds4-test-venv-v1.tar"
mv -f "$OUT_DIR/ds4-test-venv-v2.tar.tmp" "$OUT_DIR/ds4-test-venv-v2.tar"
docker save -o "$OUT_DIR/ds4-test-vllm.tar.tmp" ds4-test/vllm:unpatched ds4-test/vllm:double
docker save -o "$OUT_DIR/ds4-test-impostor.tar.tmp" ds4-test/vllm:impostor
mv -f "$OUT_DIR/ds4-test-vllm.tar.tmp" "$OUT_DIR/ds4-test-vllm.tar"
mv -f "$OUT_DIR/ds4-test-impostor.tar.tmp" "$OUT_DIR/ds4-test-impostor.tar"
echo "$key" >"$OUT_DIR/key"
log "built ds4-test/vllm:{unpatched,double,impostor,venv v1/v2} -> ${OUT_DIR} ($(du -sh "$OUT_DIR" | cut -f1)) in $(elapsed) s"
