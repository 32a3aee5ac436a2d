#!/usr/bin/env bash
# Build the Molecule node image `ds4-node:bookworm`: Debian 12 with systemd as PID 1,
# python3 and its own Docker engine (for the inner vLLM container).
#
# Cached: .cache/images/node-image-<key>.tar.zst (docker save | zstd), key = hash of the
# package list, the mirror/suite and this script. A second run loads the cache (or skips
# entirely when the image with that key is already in `docker images`).
#
# Env: DS4_NODE_IMAGE (default ds4-node:bookworm), DS4_CACHE_DIR (default <repo>/.cache),
#      DS4_DEBIAN_MIRROR (default http://deb.debian.org/debian), DS4_FORCE_BUILD=1 to rebuild.
# Needs root, debootstrap, zstd and a running docker daemon (tests/harness/bootstrap.sh).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
IMAGE="${DS4_NODE_IMAGE:-ds4-node:bookworm}"
CACHE_DIR="${DS4_CACHE_DIR:-${REPO_ROOT}/.cache}/images"
MIRROR="${DS4_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm
PACKAGES=(systemd systemd-sysv dbus python3 procps iproute2 iputils-ping sudo docker.io
          busybox-static nftables kmod ca-certificates
          # node-to-node transfers (image stream, model sync) and the community.docker modules
          openssh-server openssh-client rsync python3-requests
          # roles api_proxy (nginx from apt, as on DGX OS) and firewall (nft, already above);
          # curl for the security scenario's client container
          nginx curl
          # role monitoring (the distribution's Prometheus and node exporter, as apt installs them on DGX OS)
          prometheus prometheus-node-exporter
          # role router (python3 -m venv for vllm-router's venv, as apt installs it on DGX OS; keepalived for the
          # clients' one address with two routers, ds4_router_vip)
          python3-venv keepalived
          # maintenance.yml (ansible.builtin.apt needs python3-apt, installed on DGX OS / Ubuntu by default)
          python3-apt)

start=$(date +%s.%N)
elapsed() { awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }
log() { echo "build-node-image: $*" >&2; }

include_list=$(IFS=,; echo "${PACKAGES[*]}")
# tests/harness/node-python: the bytecode cache for Ansible's zip payloads (ds4_zipcache.py says why), in the key too.
NODE_PYTHON="${REPO_ROOT}/tests/harness/node-python"
key=$( { echo "$SUITE $MIRROR $include_list"; cat "${BASH_SOURCE[0]}" "$NODE_PYTHON"/ds4_zipcache.py "$NODE_PYTHON"/ds4_zipcache.pth; } \
       | sha256sum | cut -c1-16)
cache_file="${CACHE_DIR}/node-image-${key}.tar.zst"
label="org.dgxspark.ds4.node-image-key"

if [[ "${DS4_FORCE_BUILD:-0}" != 1 ]]; then
  current=$(docker image inspect -f "{{ index .Config.Labels \"${label}\" }}" "$IMAGE" 2>/dev/null || true)
  if [[ "$current" == "$key" ]]; then
    log "image ${IMAGE} (key ${key}) already present, nothing to do ($(elapsed) s)"
    exit 0
  fi
  if [[ -s "$cache_file" ]]; then
    log "loading ${IMAGE} from cache ${cache_file}"
    zstd -q -dc "$cache_file" | docker load -q >/dev/null
    current=$(docker image inspect -f "{{ index .Config.Labels \"${label}\" }}" "$IMAGE" 2>/dev/null || true)
    if [[ "$current" == "$key" ]]; then
      log "loaded from cache in $(elapsed) s"
      exit 0
    fi
    log "cache ${cache_file} did not provide ${IMAGE} with key ${key} (saved under another name?): building"
  fi
fi

[[ $(id -u) -eq 0 ]] || { log "must run as root (debootstrap); got uid $(id -u)"; exit 1; }
command -v debootstrap >/dev/null || { log "debootstrap missing: run tests/harness/bootstrap.sh first"; exit 1; }

mkdir -p "$CACHE_DIR"
work=$(mktemp -d /var/tmp/ds4-node-rootfs.XXXXXX)
cleanup() { rm -rf --one-file-system "$work"; }
trap cleanup EXIT
rootfs="$work/rootfs"

log "debootstrap ${SUITE} (minbase) into ${rootfs} with: ${include_list}"
debootstrap --variant=minbase --include="$include_list" "$SUITE" "$rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2; log "debootstrap failed"; exit 1; }
t_deb=$(elapsed)
log "debootstrap done at ${t_deb} s"

# Inner dockerd: systemd cgroup driver (inner containers stay under the node's cgroup) and
# overlay2 explicitly, so a /var/lib/docker on overlay fails loudly instead of falling back to vfs.
mkdir -p "$rootfs/etc/docker"
printf '%s\n' '{"exec-opts": ["native.cgroupdriver=systemd"], "storage-driver": "overlay2"}' >"$rootfs/etc/docker/daemon.json"
# Slim down: apt lists, caches, docs and man pages are not needed in a test node.
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
       "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/*
# No getty on a console that does not exist; the machine-id is generated at boot.
rm -f "$rootfs"/etc/systemd/system/getty.target.wants/getty@tty1.service
# Installed, not enabled: apt enables Prometheus (:9090) and the node exporter (:9100, every address) at install;
# the scenarios that do not turn monitoring on must not have them listening, and the monitoring role enables
# both itself (with its own listen addresses) where it is on.
find "$rootfs"/etc/systemd/system -name 'prometheus*.service' -path '*.wants/*' -delete
find "$rootfs"/etc/systemd/system -name 'prometheus-node-exporter*.timer' -path '*.wants/*' -delete
: >"$rootfs/etc/machine-id"
install -m 0644 "$NODE_PYTHON"/ds4_zipcache.py "$NODE_PYTHON"/ds4_zipcache.pth "$rootfs/usr/lib/python3/dist-packages/"
echo "ds4-node" >"$rootfs/etc/hostname"

log "docker import as ${IMAGE}"
tar -C "$rootfs" --numeric-owner -c . | docker import \
  -c 'CMD ["/lib/systemd/systemd"]' -c 'ENV container=docker' \
  -c "LABEL ${label}=${key}" - "$IMAGE" >/dev/null
t_imp=$(elapsed)
log "imported at ${t_imp} s"

# CI (CI=true) builds in a fresh clone whose .cache nothing reads again: no cache there (docker save | zstd of ~200 MB,
# ~12 s of the CPU the suite's other lanes need).
if [[ "${CI:-}" == true ]]; then
  log "CI=true: no cache written; total $(elapsed) s (debootstrap ${t_deb} s, import at ${t_imp} s)"
  exit 0
fi
docker save "$IMAGE" | zstd -q -T0 -3 -o "${cache_file}.tmp"
mv -f "${cache_file}.tmp" "$cache_file"
# Keep only the current key in the cache.
find "$CACHE_DIR" -maxdepth 1 -name 'node-image-*.tar.zst' ! -name "node-image-${key}.tar.zst" -delete
log "cached ${cache_file} ($(du -h "$cache_file" | cut -f1)); total $(elapsed) s (debootstrap ${t_deb} s, import at ${t_imp} s)"
