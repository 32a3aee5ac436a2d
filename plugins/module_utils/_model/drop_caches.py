# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Drop the kernel page cache and report MemAvailable before and after.

Pure logic (of Ansible only ansible-core's size converter, human_to_bytes): the module ``dgxspark.ds4.drop_caches``
is a thin wrapper and the unit tests drive these functions against a fake proc root.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ansible.module_utils.common.text.formatters import human_to_bytes

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe


LEVELS = (1, 2, 3)
LEVEL_MEANING = {
    1: 'page cache',
    2: 'reclaimable slab objects (dentries and inodes)',
    3: 'page cache and reclaimable slab objects',
}

# IEC suffixes are powers of 1024, SI suffixes powers of 1000.  Bare K/M/G/T are
# refused on purpose: "100G" is read both ways in the wild.
# Bytes and the binary units go through ansible-core's human_to_bytes (KiB as its K: powers of 1024). It reads KB, MB,
# GB, TB as powers of 1024 too and knows no KiB spelling, so the decimal units (powers of 1000) are multiplied here,
# and a bare K/M/G/T, which could be either, is refused.
_BINARY = {'': 'B', 'b': 'B', 'kib': 'K', 'mib': 'M', 'gib': 'G', 'tib': 'T'}
_DECIMAL = {'kb': 1000, 'mb': 1000 ** 2, 'gb': 1000 ** 3, 'tb': 1000 ** 4}
_SIZE_RE = re.compile(r'^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$')


class DropCachesError(Exception):
    """A failure with a message meant for the user, plus result fields."""

    def __init__(self, msg: str, **fields: Any) -> None:
        super(DropCachesError, self).__init__(msg)
        self.msg = msg
        self.fields = fields


def parse_size(value: Any, option: str = 'min_available') -> int | None:
    """Return a byte count for an int or a string like ``100GiB``, ``1.5 TB``, ``4096``."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise DropCachesError('%s=%r is not a size; give bytes (e.g. 107374182400) or a number with a unit '
                              '(KiB, MiB, GiB, TiB or kB, MB, GB, TB)' % (option, value))
    if isinstance(value, int):
        if value < 0:
            raise DropCachesError('%s=%d must not be negative' % (option, value))
        return value
    match = _SIZE_RE.match(str(value))
    unit = match.group(2).lower() if match else None
    if not match or unit not in _BINARY and unit not in _DECIMAL:
        raise DropCachesError('%s=%r is not a size I can read; give bytes (e.g. 107374182400) or a number with one of '
                              'the units B, KiB, MiB, GiB, TiB (powers of 1024) or kB, MB, GB, TB (powers of 1000); '
                              'bare K/M/G/T are refused as ambiguous' % (option, value))
    if unit in _DECIMAL:
        return int(float(match.group(1)) * _DECIMAL[unit])
    return int(human_to_bytes(match.group(1), default_unit=_BINARY[unit]))


def human_bytes(num: float | None) -> str:
    """Format a byte count as GiB/MiB for messages (exact bytes are in the result)."""
    if num is None:
        return 'unknown'
    sign = '-' if num < 0 else ''
    num = abs(num)
    for unit, size in (('TiB', 1024 ** 4), ('GiB', 1024 ** 3), ('MiB', 1024 ** 2), ('KiB', 1024)):
        if num >= size:
            return '%s%.2f %s' % (sign, num / float(size), unit)
    return '%s%d B' % (sign, num)


def meminfo_path(proc_root: str) -> str:
    return os.path.join(proc_root, 'meminfo')


def drop_caches_path(proc_root: str) -> str:
    return os.path.join(proc_root, 'sys', 'vm', 'drop_caches')


def read_mem_available(proc_root: str) -> int:
    """MemAvailable from <proc_root>/meminfo, in bytes."""
    path = meminfo_path(proc_root)
    try:
        text, values = node_probe.read_meminfo(path, in_bytes=True)
    except (IOError, OSError) as exc:
        raise DropCachesError('cannot read %s: %s (is proc_root=%s right?)' % (path, exc, proc_root))
    if 'MemAvailable' in values:
        return values['MemAvailable']
    if any(line.startswith('MemAvailable:') for line in text.splitlines()):
        raise DropCachesError('cannot parse the MemAvailable line of %s' % path)
    raise DropCachesError('%s has no MemAvailable line (kernel older than 3.14?)' % path)


def writable_reason(path: str) -> str | None:
    """None when ``path`` looks writable, else a sentence saying why not (used by check mode)."""
    if not os.path.exists(path):
        return '%s does not exist' % path
    if os.access(path, os.W_OK):
        return None
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as exc:
        return _oserror_reason(path, exc)
    os.close(fd)
    return None


def _oserror_reason(path: str, exc: OSError) -> str:
    if exc.errno == errno.EROFS:
        return ('%s is on a read-only file system (a container sharing the host kernel mounts /proc/sys read-only); '
                'drop caches on the host instead' % path)
    if exc.errno in (errno.EACCES, errno.EPERM):
        return '%s is not writable by this user (%s); run with become: true' % (path, os.strerror(exc.errno))
    if exc.errno == errno.ENOENT:
        return '%s does not exist' % path
    return 'cannot write %s: %s' % (path, exc)


def drop_caches(proc_root: str = '/proc', level: int = 3, do_sync: bool = True, min_available: Any = None,
                skip_if_readonly: bool = False, check_mode: bool = False,
                sync_fn: Callable[[], None] | None = None) -> dict[str, Any]:
    """Sync, write ``level`` to drop_caches and measure MemAvailable around it.

    Returns a result dict (``changed``, ``mem_available_before`` ...).  Raises
    DropCachesError with the numbers when something fails.
    """
    if level not in LEVELS:
        raise DropCachesError('level=%r is not valid; use 1 (page cache), 2 (slab) or 3 (both)' % (level,))
    min_bytes = parse_size(min_available)
    sync_fn = sync_fn or os.sync
    target = drop_caches_path(proc_root)
    before = read_mem_available(proc_root)
    result: dict[str, Any] = dict(
        changed=False, skipped=False, reason=None, level=level, path=target,
        mem_available_before=before, mem_available_after=None, freed_bytes=None,
        min_available_bytes=min_bytes, min_available_met=None, synced=False,
    )

    if not os.path.exists(target):
        raise DropCachesError('%s does not exist; is proc_root=%s a proc file system?' % (target, proc_root), **result)
    if check_mode:
        reason = writable_reason(target)
        if reason is not None:
            return _readonly(result, reason, skip_if_readonly)
        result['changed'] = True
        result['reason'] = 'check mode: would sync and write %d (%s) to %s' % (level, LEVEL_MEANING[level], target)
        return result

    if do_sync:
        sync_fn()
        result['synced'] = True
    try:
        # O_WRONLY without O_CREAT: never create a file under a wrong proc_root.
        fd = os.open(target, os.O_WRONLY)
        try:
            os.write(fd, ('%d\n' % level).encode('ascii'))
        finally:
            os.close(fd)
    except (IOError, OSError) as exc:
        return _readonly(result, _oserror_reason(target, exc), skip_if_readonly)
    result['changed'] = True

    after = read_mem_available(proc_root)
    result['mem_available_after'] = after
    result['freed_bytes'] = after - before
    if min_bytes is not None:
        result['min_available_met'] = after >= min_bytes
        if after < min_bytes:
            raise DropCachesError(
                'MemAvailable is %s (%d bytes) after dropping caches (%s before, %s freed), below min_available=%s '
                '(%d bytes); something other than the page cache holds the memory (another GPU process, /dev/shm '
                'segments, a container still stopping)' % (
                    human_bytes(after), after, human_bytes(before), human_bytes(after - before),
                    min_available, min_bytes),
                **result)
    return result


def _readonly(result: dict[str, Any], reason: str, skip_if_readonly: bool) -> dict[str, Any]:
    result['reason'] = reason
    if skip_if_readonly:
        result['skipped'] = True
        return result
    raise DropCachesError('cannot drop caches: %s (set skip_if_readonly: true to treat this as ok)' % reason, **result)


# ---------------------------------------------------------------- drop-behind
# A download or copy beside a live pair must not leave what it wrote (up to the whole model, ~149 GB) in the page
# cache, which on GB10 unified memory is memory the running vLLM competes with (seed 000 blames page-cache
# pressure for launch failures). Each file written (or read for a copy) is flushed and its pages dropped
# (`sync -d`: fdatasync; `dd iflag=nocache count=0`: POSIX_FADV_DONTNEED of the whole file): only these files'
# pages, never the whole cache, so it is safe beside a live pair and on test hosts sharing a kernel.
# The same shell command runs on this host and, over ssh, on the worker.

def drop_behind_command(root: str, names: Iterable[str]) -> str:
    """Shell command flushing and dropping the cached pages of ``names`` (relative) under ``root``."""
    quoted = ' '.join(shlex.quote(name) for name in names)
    return ('cd %s && sync -d -- %s && for f in %s; do dd if="$f" iflag=nocache count=0 status=none || exit 1; done'
            % (shlex.quote(root), quoted, quoted))


def drop_behind(run: Callable[[list[str]], tuple[int, str, str]], root: str, names: Iterable[str],
                ssh: Sequence[str] | None = None) -> str | None:
    """Run :func:`drop_behind_command` locally (``sh -c``) or over the ssh prefix ``ssh``; ``run(argv)`` returns
    ``(rc, out, err)``. Returns None, or a warning naming the host and the error (a copy is not failed for it)."""
    names = sorted(set(names))
    if not names:
        return None
    command = drop_behind_command(root, names)
    argv = list(ssh) + [command] if ssh else ['sh', '-c', command]
    rc, out, err = run(argv)
    if rc != 0:
        return ('dropping the page cache behind %d file(s) under %s on %s failed (rc=%d): %s; they stay cached until '
                'the kernel reclaims them' % (len(names), root, ssh[-1] if ssh else 'this host', rc,
                                              (err or out).strip()[-300:]))
    return None
