#!/usr/bin/env bash
# Prepare a bare Debian 12 machine (as root) for `make test`. Idempotent: every step is
# skipped when already done.
# Runs as root on CI; a developer with everything installed can run it as any user.
#   1. apt packages: docker.io debootstrap zstd shellcheck git make prometheus (promtool)
#      prometheus-node-exporter (the monitoring role's rule and render tests), nftables and
#      util-linux's unshare (nft_table against a real ruleset in a private netns), rsync (model_sync),
#      nginx (`nginx -t` on the rendered proxy files; installed with a policy-rc.d that refuses service
#      starts, so nothing listens on port 80 afterwards, and disabled where systemd runs)
#   2. a running dockerd (started in the background when `docker info` fails: no systemd as
#      PID 1 on the CI VM), waited for
#   3. the controller's Python: Debian 13's python3.13 unpacked under .cache/distro-python
#      (tests/harness/distro-python.sh: optimized, unlike pyenv's builds on this machine; needs patchelf), else the
#      first working Python >= 3.12 (tests/harness/find-python.sh)
#   4. the controller venv (.venv) and the .collections symlink (make venv collection-link)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO_ROOT"
log() { echo "bootstrap: $*" >&2; }

need_root() {
  [[ $(id -u) -eq 0 ]] && return 0
  log "$1 needs root; got uid $(id -u). Run: sudo $0"
  exit 1
}

# 1. apt packages (binary -> package)
declare -A want=([dockerd]=docker.io [debootstrap]=debootstrap [zstd]=zstd [shellcheck]=shellcheck
                 [git]=git [make]=make [promtool]=prometheus [prometheus-node-exporter]=prometheus-node-exporter
                 [nft]=nftables [rsync]=rsync [unshare]=util-linux [nginx]=nginx [patchelf]=patchelf)
missing=()
for bin in "${!want[@]}"; do
  command -v "$bin" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v "$bin" >/dev/null 2>&1 || missing+=("${want[$bin]}")
done
if ((${#missing[@]})); then
  need_root "apt-get install ${missing[*]}"
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # The tests only run `nginx -t`: no package may start a service here (nginx's postinst would bind port 80).
  # invoke-rc.d asks policy-rc.d; exit 101 = "action forbidden". One already present (a container image's) is kept.
  policy_rc=""
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    policy_rc=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' >"$policy_rc"
    chmod 0755 "$policy_rc"
    trap 'rm -f "$policy_rc"' EXIT
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [[ -n $policy_rc ]]; then rm -f "$policy_rc"; trap - EXIT; fi
  if [[ " ${missing[*]} " == *" nginx "* ]] && command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
    systemctl disable --now nginx >/dev/null 2>&1 || true
  fi
else
  log "apt packages present"
fi

# 2. dockerd
if ! docker info >/dev/null 2>&1; then
  need_root "starting dockerd"
  if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
    log "starting docker.service"
    systemctl start docker
  else
    log "starting dockerd in the background (log: /var/log/dockerd.log)"
    nohup dockerd >/var/log/dockerd.log 2>&1 &
  fi
  for _ in $(seq 1 120); do
    docker info >/dev/null 2>&1 && break
    sleep 0.5
  done
  docker info >/dev/null 2>&1 || { tail -n 20 /var/log/dockerd.log >&2 || true; log "dockerd did not answer within 60 s"; exit 1; }
fi
log "dockerd answers"

# 3. the controller's Python (a fetch that fails leaves the other candidates, said here)
bash "$REPO_ROOT/tests/harness/distro-python.sh" >/dev/null \
  || log "Debian's python3.13 could not be set up (above); the controller venv uses the first other Python >= 3.12"
# 4. controller venv and collection link
py=$(bash "$REPO_ROOT/tests/harness/find-python.sh") || exit 1
log "controller Python: $py ($("$py" -V 2>&1))"
make --no-print-directory venv PY="$py"
make --no-print-directory collection-link
log "ready: $("$REPO_ROOT/.venv/bin/ansible" --version | head -n 1)"
