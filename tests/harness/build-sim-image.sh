#!/usr/bin/env bash
# Build the inner test image `ds4-vllm-sim:test`: the node image `ds4-node:bookworm` plus the vLLM
# SIMULATOR (tests/vllm_sim, a stand-in for vLLM; test code, never deployed to real nodes) at
# /opt/vllm_sim, with /usr/local/bin/vllm and /usr/local/bin/dsv4-vllm-entrypoint pointing at it.
# The simulator parses `vllm serve` argv with vLLM's own flag schema: the collection's
# plugins/plugin_utils/vllm_schema.py and vllm_schemas/*.json are copied to /opt/vllm_sim/vllm_schema/
# (plain Python, no Ansible). The image carries the vLLM version it stands in for where a real vLLM image
# has it: a `vllm` package with __version__ and its vllm-<version>.dist-info in python3's site-packages
# (tests/vllm_sim/install_dist.py; DS4_SIM_VLLM_VERSION, default 0.27.1; also the label
# org.dgxspark.ds4.vllm-version). dgxspark.ds4.container_image reads it from there, and so does the simulator.
# Variants: ds4-vllm-sim:slower and :next for upgrade.yml's tests (see below), and
# ds4-vllm-sim:vllm-<major.minor> FROM that image with only the version changed (one small layer),
# one per version in DS4_SIM_VLLM_VARIANTS (default: every version with a flag schema), for tests that deploy a
# profile declaring another vLLM (the image must carry the declared minor, or container_image refuses it).
#
# No registry, no network: legacy builder, FROM the locally built node image, COPY only.
# Output: the image in `docker images` and `docker save` at .cache/images/inner/ds4-vllm-sim.tar
# (loaded into the Molecule nodes' inner Docker engines).
# Cached by a content hash of tests/vllm_sim/ + the flag schemas + this script + the declared version
# (image label org.dgxspark.ds4.vllm-sim-key):
# rebuilds only when they change (or DS4_FORCE_BUILD=1).
#
# Env: DS4_SIM_IMAGE (default ds4-vllm-sim:test), DS4_NODE_IMAGE (default ds4-node:bookworm),
#      DS4_SIM_VLLM_VERSION (default 0.27.1), DS4_SIM_VLLM_VARIANTS (space-separated versions; default every
#      plugins/plugin_utils/vllm_schemas/vllm-<version>.json), DS4_CACHE_DIR (default <repo>/.cache), DS4_FORCE_BUILD=1.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
IMAGE="${DS4_SIM_IMAGE:-ds4-vllm-sim:test}"
BASE="${DS4_NODE_IMAGE:-ds4-node:bookworm}"
OUT_DIR="${DS4_CACHE_DIR:-${REPO_ROOT}/.cache}/images/inner"
TAR="${OUT_DIR}/ds4-vllm-sim.tar"
SRC="${REPO_ROOT}/tests/vllm_sim"
SCHEMA_SRC="${REPO_ROOT}/plugins/plugin_utils"
SIM_VLLM_VERSION="${DS4_SIM_VLLM_VERSION:-0.27.1}"
SIM_VLLM_VARIANTS="${DS4_SIM_VLLM_VARIANTS-$(find "$SCHEMA_SRC/vllm_schemas" -maxdepth 1 -name 'vllm-*.json' -printf '%f\n' \
  | sed 's/^vllm-//; s/[.]json$//' | LC_ALL=C sort -V | tr '\n' ' ')}"
LABEL="org.dgxspark.ds4.vllm-sim-key"

start=$(date +%s.%N)
elapsed() { awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }
log() { echo "build-sim-image: $*" >&2; }

docker image inspect "$BASE" >/dev/null 2>&1 || {
  log "base image ${BASE} missing: run tests/harness/build-node-image.sh first"; exit 1; }
base_id=$(docker image inspect -f '{{.Id}}' "$BASE")

# Content key: every file of the simulator (path + bytes, caches excluded), this script, the base image ID.
SELF="${REPO_ROOT}/tests/harness/$(basename "${BASH_SOURCE[0]}")"
key=$( { (cd "$SRC" && find . -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | LC_ALL=C sort -z \
          | xargs -0 sha256sum)
          (cd "$SCHEMA_SRC" && find vllm_schema.py vllm_schemas -type f -name '*.py' -o -type f -name '*.json' \
             | LC_ALL=C sort | xargs sha256sum)
          sha256sum "$SELF" "${REPO_ROOT}/tests/harness/slim-rootfs.sh" | cut -d' ' -f1; echo "$base_id"
          echo "vllm ${SIM_VLLM_VERSION} variants ${SIM_VLLM_VARIANTS}"; } \
        | sha256sum | cut -c1-16)

current=$(docker image inspect -f "{{ index .Config.Labels \"${LABEL}\" }}" "$IMAGE" 2>/dev/null || true)
if [[ "${DS4_FORCE_BUILD:-0}" != 1 && "$current" == "$key" && -s "$TAR" && -s "${TAR}.key" && "$(cat "${TAR}.key")" == "$key" ]]; then
  log "image ${IMAGE} (key ${key}) and ${TAR} up to date, nothing to do ($(elapsed) s)"
  exit 0
fi

ctx=$(mktemp -d /var/tmp/ds4-vllm-sim-ctx.XXXXXX)
trap 'rm -rf --one-file-system "$ctx"' EXIT
# The simulator needs python3 (stdlib only) and bash (its launcher, the collection's launch scripts): a slim rootfs
# cut from the node image (about 30 MB) instead of the whole node image (about 800 MB), so loading it into every
# node of every Molecule scenario is quick.
# shellcheck source=tests/harness/slim-rootfs.sh
. "${REPO_ROOT}/tests/harness/slim-rootfs.sh"
SLIM="ds4-vllm-sim-base:${key}"
slim_rootfs_import "$BASE" "$SLIM" "${LABEL}-base=${key}" "$ctx" /bin/bash
rm -rf "$ctx/rootfs"
mkdir -p "$ctx/vllm_sim"
(cd "$SRC" && tar --exclude='__pycache__' --exclude='*.pyc' -cf - .) | tar -C "$ctx/vllm_sim" -xf -
mkdir -p "$ctx/vllm_sim/vllm_schema/vllm_schemas"
cp "$SCHEMA_SRC/vllm_schema.py" "$ctx/vllm_sim/vllm_schema/"
cp "$SCHEMA_SRC"/vllm_schemas/vllm-*.json "$ctx/vllm_sim/vllm_schema/vllm_schemas/"
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM ${SLIM}
COPY vllm_sim /opt/vllm_sim
RUN ["/bin/sh", "-c", "chmod 0755 /opt/vllm_sim/bin/vllm && ln -sf /opt/vllm_sim/bin/vllm /usr/local/bin/vllm && ln -sf /opt/vllm_sim/bin/vllm /usr/local/bin/dsv4-vllm-entrypoint && python3 -m compileall -q /opt/vllm_sim && /usr/local/bin/vllm --version"]
RUN PYTHONPATH=/opt python3 -c "import sys; from vllm_sim import schema; s, v, why = schema.lookup('${SIM_VLLM_VERSION}'); sys.exit(why)"
RUN python3 /opt/vllm_sim/install_dist.py ${SIM_VLLM_VERSION} >/dev/null && [ "\$(/usr/local/bin/vllm --version)" = "${SIM_VLLM_VERSION}" ]
LABEL ${LABEL}=${key} org.dgxspark.ds4.note="vLLM SIMULATOR for tests only; never deploy" org.dgxspark.ds4.vllm-version=${SIM_VLLM_VERSION}
ENV PYTHONUNBUFFERED=1
CMD ["/usr/local/bin/vllm", "--help"]
DOCKERFILE

log "building ${IMAGE} FROM ${BASE} (key ${key}, legacy builder, no network)"
DOCKER_BUILDKIT=0 docker build --network none -q -t "$IMAGE" "$ctx" >/dev/null
docker rmi "$SLIM" >/dev/null 2>&1 || true  # only its layer, kept by ${IMAGE}
tags=("$IMAGE")
for version in $SIM_VLLM_VARIANTS; do
  tag="${IMAGE%%:*}:vllm-$(echo "$version" | cut -d. -f1-2)"
  DOCKER_BUILDKIT=0 docker build --network none -q -t "$tag" - >/dev/null <<VARIANT
FROM ${IMAGE}
RUN python3 /opt/vllm_sim/install_dist.py ${version} >/dev/null && [ "\$(/usr/local/bin/vllm --version)" = "${version}" ]
LABEL org.dgxspark.ds4.vllm-version=${version}
VARIANT
  tags+=("$tag")
done
# upgrade.yml's tests (molecule/replicas): `slower` serves at half the decode and prefill rates (the simulator reads
# /opt/vllm_sim/image-settings.json: an image that silently changed behaviour), `next` is the same simulator under
# another image ID (an equal image); both one small layer FROM the image.
for variant in 'slower={"tokens_per_s_factor": 0.5, "prefill_tokens_per_s_factor": 0.5}' 'next={}'; do
  tag="${IMAGE%%:*}:${variant%%=*}"
  DOCKER_BUILDKIT=0 docker build --network none -q -t "$tag" - >/dev/null <<VARIANT
FROM ${IMAGE}
RUN printf '%s\n' '${variant#*=}' >/opt/vllm_sim/image-settings.json
LABEL org.dgxspark.ds4.sim-variant=${variant%%=*}
VARIANT
  tags+=("$tag")
done
log "built ${tags[*]} at $(elapsed) s"

mkdir -p "$OUT_DIR"
docker save -o "${TAR}.tmp" "${tags[@]}"
mv -f "${TAR}.tmp" "$TAR"
echo "$key" >"${TAR}.key"
log "saved ${TAR} ($(du -h "$TAR" | cut -f1)) at $(elapsed) s"
