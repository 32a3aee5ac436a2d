#!/usr/bin/env bash
# Print the path of a Python >= 3.12 interpreter that actually runs (the controller venv needs
# it: ansible-core 2.21). A pyenv shim on PATH is not enough: `command -v python3.12` finds
# /root/.pyenv/shims/python3.12 even when the global pyenv version is 3.11, and the shim then
# fails with "pyenv: python3.12: command not found" (this broke CI once). Every candidate is
# therefore executed before it is chosen. Exits 1 with a message when none works.
# First choice: the distribution-built Python that tests/harness/distro-python.sh unpacked under .cache/ (optimized;
# pyenv's builds here are not: ~25 % more CPU for the same ansible-playbook run). Only looked at, never fetched here.
set -uo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cands=()
distro="${DS4_DISTRO_PYTHON_DIR:-$REPO_ROOT/.cache/distro-python}/usr/bin/python3.13"
[[ -x $distro ]] && cands+=("$distro")
for name in python3.12 python3.13; do
  p=$(command -v "$name" 2>/dev/null) && cands+=("$p")
done
for root in "${PYENV_ROOT:-$HOME/.pyenv}" /root/.pyenv; do
  for p in "$root"/versions/3.12.*/bin/python3.12 "$root"/versions/3.13.*/bin/python3.13; do
    [[ -x "$p" ]] && cands+=("$p")
  done
done
for p in "${cands[@]}"; do
  if "$p" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; then
    echo "$p"
    exit 0
  fi
done
echo "find-python: no working Python >= 3.12 (tried: ${cands[*]:-nothing}); install python3.12 (e.g. pyenv install 3.12) and rerun" >&2
exit 1
