#!/usr/bin/env bash
# Print the path of a distribution-built Python for the controller venv, fetching it first when it is not there yet:
# Debian 13 (trixie)'s python3.13, from Debian's archive, unpacked under .cache/distro-python.
#
# Why: the CI machine (Debian 12) has no Python >= 3.12 of its own (ansible-core 2.21 needs one), only pyenv's
# 3.12.1/3.13.0, built without --enable-optimizations (no PGO, no LTO, libpython shared). A distribution's Python
# is built with them, as the Python of an operator's controller is (DGX OS = Ubuntu 24.04's python3.12): the same
# ansible-playbook runs took 20-27 % less CPU on it (docs/measurements.md, twenty-seventh session), and CI is bound
# by its two CPUs.
#
# How: apt-get with a private state directory (this machine's apt configuration and package database untouched)
# downloads python3.13-venv and what it depends on from trixie, verified with Debian's archive keyring; each package
# is unpacked (dpkg-deb -x, nothing installed) under the folder; patchelf points the interpreter at the unpacked
# glibc's loader and libraries (trixie's glibc is newer than bookworm's), so nothing else on this machine loads
# them; sysconfig's wheel directory is pointed at the unpacked pip wheel, so `python -m venv` installs pip as usual.
# Needs apt-get, dpkg-deb and patchelf (tests/harness/bootstrap.sh installs it); not root.
#
# Exits 1 with the reason on stderr when any step fails (then find-python.sh falls back to the other candidates).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${DS4_DISTRO_PYTHON_DIR:-$REPO_ROOT/.cache/distro-python}"
PY="$OUT/usr/bin/python3.13"
SUITE=trixie
MIRROR=http://deb.debian.org/debian
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
log() { echo "distro-python: $*" >&2; }

works() { [[ -x $PY ]] && "$PY" -c 'import ssl, sqlite3, ctypes, lzma, bz2, venv, ensurepip, sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }

if works; then
  echo "$PY"
  exit 0
fi

for tool in apt-get dpkg-deb patchelf; do
  command -v "$tool" >/dev/null 2>&1 || { log "$tool is missing (tests/harness/bootstrap.sh installs patchelf)"; exit 1; }
done
[[ -r $KEYRING ]] || { log "$KEYRING is missing (package debian-archive-keyring)"; exit 1; }

work="$OUT.apt"
rm -rf "$OUT" "$work"
mkdir -p "$work/etc/apt/sources.list.d" "$work/etc/apt/preferences.d" "$work/etc/apt/apt.conf.d" \
  "$work/lists/partial" "$work/archives/partial" "$work/dpkg"
: >"$work/dpkg/status"
echo "deb [signed-by=$KEYRING] $MIRROR $SUITE main" >"$work/etc/apt/sources.list"
apt_opts=(-o "Dir::Etc=$work/etc/apt" -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives"
          -o "Dir::State::status=$work/dpkg/status" -o "Dir::Cache=$work" -o Debug::NoLocking=1
          -o APT::Install-Recommends=false -o "APT::Architecture=$(dpkg --print-architecture)")
if ! apt-get -qq "${apt_opts[@]}" update >"$work/apt.log" 2>&1 \
   || ! apt-get -qq "${apt_opts[@]}" install -y --download-only python3.13-venv >>"$work/apt.log" 2>&1; then
  tail -n 5 "$work/apt.log" >&2
  log "could not fetch python3.13-venv from $MIRROR $SUITE"
  exit 1
fi
mkdir -p "$OUT"
for deb in "$work"/archives/*.deb; do
  dpkg-deb -x "$deb" "$OUT"
done
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo "$(uname -m)-linux-gnu")
loader=""
for candidate in "$OUT"/usr/lib*/ld-linux*.so.* "$OUT"/usr/lib/"$triplet"/ld-linux*.so.*; do
  [[ -e $candidate ]] && { loader=$candidate; break; }
done
[[ -n $loader ]] || { log "no dynamic loader among the unpacked packages"; exit 1; }
# RPATH (not RUNPATH): it also applies to what the interpreter's extension modules load (_ssl -> libssl -> libc)
patchelf --set-interpreter "$loader" --force-rpath --set-rpath "$OUT/usr/lib/$triplet:$OUT/lib/$triplet" "$PY"
# `python -m venv` runs ensurepip, which Debian points at /usr/share/python-wheels (this machine's, bookworm's pip)
for data in "$OUT"/usr/lib/python3.13/_sysconfigdata_*.py; do
  sed -i "s|'WHEEL_PKG_DIR': '/usr/share/python-wheels/\\?'|'WHEEL_PKG_DIR': '$OUT/usr/share/python-wheels/'|" "$data"
  grep -q "'WHEEL_PKG_DIR': '$OUT/usr/share/python-wheels/'" "$data" \
    || { log "could not point WHEEL_PKG_DIR in $data at the unpacked wheels"; exit 1; }
done
rm -rf "$work"
if ! works; then
  "$PY" -c 'import ssl, sqlite3, ctypes, lzma, bz2, venv, ensurepip' >&2 || true
  log "the unpacked $PY does not run"
  exit 1
fi
# Byte-compile the standard library, as Debian's postinst does at install (py3compile): unpacked, it has no
# __pycache__, and where PYTHONDONTWRITEBYTECODE is set (it is on the machines this suite runs on) every Python process
# compiled the modules it imports from source again (~0.25 CPU-s of each ansible-playbook run, measured: the
# converge benchmark's floor fell from 1.13 to 0.86 CPU-s once they were there). Not fatal: only slower without them.
"$PY" -m compileall -q -j 0 -x '/(test|tests|idlelib|lib2to3)/' "$OUT/usr/lib/python3.13" >/dev/null 2>&1 \
  || log "could not byte-compile $OUT/usr/lib/python3.13 (each run compiles what it imports instead)"
log "$("$PY" -V) from Debian $SUITE in $OUT"
echo "$PY"
