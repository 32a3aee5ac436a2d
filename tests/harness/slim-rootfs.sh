#!/usr/bin/env bash
# Sourced by build-test-images.sh and build-sim-image.sh (no registry, no network): cut a minimal root filesystem
# out of the node image and `docker import` it.
#   slim_rootfs_import BASE TAG LABEL_ARG WORKDIR [EXTRA_BINARY ...]
# The rootfs holds busybox (sh and the usual applets), Debian's python3.11 with its stdlib (no test suite) and the
# libraries of python3.11 and of every EXTRA_BINARY (e.g. /bin/bash), about 30 MB; PATH=/usr/local/bin:/usr/bin:/bin.
# LABEL_ARG is a `key=value` label given to the imported image.
slim_rootfs_import() {
  local base=$1 tag=$2 label=$3 work=$4
  shift 4
  local extra="$*"
  # shellcheck disable=SC2016  # expanded inside the node image's shell
  docker run --rm --network none -e EXTRA="$extra" "$base" sh -c '
    set -e
    libs=$(for b in /usr/bin/python3.11 $EXTRA; do ldd "$b"; done | awk "/=>/ {print \$3} /ld-linux/ {print \$1}" | sort -u)
    tar -ch --exclude=/usr/lib/python3.11/test --exclude=/usr/lib/python3.11/idlelib \
      --exclude=/usr/lib/python3.11/ensurepip --exclude=/usr/lib/python3.11/lib2to3 --exclude="*/__pycache__" \
      /bin/busybox /usr/bin/python3.11 /usr/lib/python3.11 $EXTRA $libs 2>/dev/null' >"$work/rootfs.tar"
  rm -rf "$work/rootfs"
  mkdir -p "$work/rootfs"
  tar -C "$work/rootfs" -xf "$work/rootfs.tar"
  rm -f "$work/rootfs.tar"
  local app
  for app in sh ls cat mkdir rm cp mv echo tar grep test true false env sleep readlink dirname basename id printf \
             head tail wc sed awk sort uniq cut tr ps kill date chmod ln touch find xargs; do
    [[ -e "$work/rootfs/bin/$app" ]] || ln -sf /bin/busybox "$work/rootfs/bin/$app"
  done
  mkdir -p "$work/rootfs/usr/local/bin" "$work/rootfs/tmp" "$work/rootfs/etc" "$work/rootfs/root"
  chmod 1777 "$work/rootfs/tmp"
  ln -sf python3.11 "$work/rootfs/usr/bin/python3"
  [[ -e "$work/rootfs/usr/bin/env" ]] || ln -sf /bin/busybox "$work/rootfs/usr/bin/env"
  [[ -e "$work/rootfs/lib64/ld-linux-x86-64.so.2" || -e "$work/rootfs/lib/ld-linux-aarch64.so.1" ]] \
    || echo "slim-rootfs: warning: no dynamic loader copied" >&2
  tar -C "$work/rootfs" --numeric-owner -c . | docker import -c 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
    -c 'CMD ["/bin/sh"]' -c "LABEL ${label}" - "$tag" >/dev/null
  docker run --rm --network none "$tag" python3 -c 'import sys; print(sys.version)' >/dev/null
}
