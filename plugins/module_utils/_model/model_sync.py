# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Copy a model directory from the head to the worker in parallel rsync streams.

Runs on the head. The destination is reached with an ssh command prefix (the
``peer_access_ssh`` list of roles/peer_access, whose last element is ``[user@]host``)
or is a local directory when the prefix is empty.

* ``plan``: compare the source listing with the destination's (size + mtime, like
  rsync's quick check). Files missing, of another size or mtime, or named in
  ``force`` are copied whole; files shorter than the source (an interrupted copy)
  are resumed with ``--append-verify`` (rsync checks the whole file afterwards and
  resends it if the kept part differs). Identical files are skipped.
* A file the destination already holds in full (``replace``) is never rewritten in place:
  rsync writes a temporary copy under ``.cache/`` of the destination and renames it over the
  old one when complete, so a copy that fails half-way leaves the destination's file as it
  was (only missing files are written ``--inplace --partial``, to resume).
* Drop-behind: the files copied leave the page cache on both ends once the copy is done
  (``drop_caches.drop_behind``): a 149 GB copy beside a live pair does not fill it.
* ``balance``: split the files across N streams, largest first, onto the stream
  with the fewest bytes (so 46 x 3.2 GB shards finish together).
* Space: bytes still to write (source size minus what is already there, per file)
  against ``statvfs`` of the destination's file system.

Pure logic, no Ansible imports.
"""

from __future__ import annotations


import fnmatch
import os
import re
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._model.drop_caches import drop_behind

DEFAULT_EXCLUDES = ['.cache/**', '*.lock', '*.incomplete']
# Where a replacement is written before it is renamed over the destination's file (excluded like the hub's .cache).
TEMP_DIR = '.cache/dgxspark-ds4-sync'
_STATS_RE = re.compile(r'^Total bytes sent:\s*([0-9,.]+)', re.M)
LIST_LIMIT = 10
# run(argv) -> (rc, stdout, stderr)
Runner = Callable[[list[str]], tuple[int, str, str]]
Listing = dict[str, tuple[int, int]]


class SyncError(Exception):
    """A failure with a message for the user, plus result fields."""

    def __init__(self, msg: str, **fields: Any) -> None:
        super(SyncError, self).__init__(msg)
        self.msg = msg
        self.fields = fields


def human(n: float) -> str:
    n = float(n)
    for unit in ('B', 'KiB', 'MiB', 'GiB', 'TiB'):
        if abs(n) < 1024 or unit == 'TiB':
            return '%.1f %s' % (n, unit) if unit != 'B' else '%d B' % n
        n /= 1024.0
    return '%d B' % n  # pragma: no cover


def _excluded(relpath: str, patterns: Iterable[str]) -> bool:
    for pat in patterns:
        if fnmatch.fnmatchcase(relpath, pat):
            return True
        if pat.endswith('/**') and fnmatch.fnmatchcase(relpath, pat[:-3] + '/*'):
            return True
    return False


def local_listing(root: str, excludes: list[str] | None = None, follow: bool = True) -> Listing:
    """``{relpath: (size, int mtime)}`` of regular files under ``root``.

    ``follow``: symlinks to files count as the file they point to (the source: a Hugging Face hub cache
    snapshot is symlinks into ``../../blobs/``). ``follow=False`` (a destination) leaves symlinks out, so a
    link there is not taken for a copy and is replaced by the file.
    """
    excludes = DEFAULT_EXCLUDES if excludes is None else excludes
    out: Listing = {}
    if not os.path.isdir(root):
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = '' if rel_dir == '.' else rel_dir.replace(os.sep, '/') + '/'
        dirnames[:] = sorted(d for d in dirnames if not _excluded(rel_dir + d, excludes))
        for name in filenames:
            rel = rel_dir + name
            if _excluded(rel, excludes):
                continue
            if not follow and os.path.islink(os.path.join(dirpath, name)):
                continue
            try:
                st = os.stat(os.path.join(dirpath, name))
            except OSError:
                continue
            if not os.path.isfile(os.path.join(dirpath, name)):
                continue
            out[rel] = (st.st_size, int(st.st_mtime))
    return out


def nearest_existing(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path) and path != os.path.dirname(path):
        path = os.path.dirname(path)
    return path


def free_bytes(path: str) -> int:
    """Bytes available to an unprivileged writer on the file system that holds (or will hold) ``path``."""
    st = os.statvfs(nearest_existing(path))
    return st.f_bavail * st.f_frsize


def remote_listing_script(dest: str) -> str:
    """Shell script for the destination: first line ``<avail bytes> <fs path>``, then NUL-separated listing.

    Regular files only (``find -type f`` without ``-L``): a symlink on the destination is no copy of the
    model (a link into a hub cache's ``blobs/`` there is dangling) and is replaced by the file.
    """
    q = shlex.quote(dest)
    return ('d=%s; while [ ! -e "$d" ]; do d=$(dirname "$d"); done; '
            'echo "$(stat -f -c "%%a %%S" "$d") $d"; '
            'if [ -d %s ]; then cd %s && find . -type f -printf "%%P\\0%%s\\0%%T@\\0"; fi' % (q, q, q))


def parse_remote_listing(text: str, excludes: list[str] | None = None) -> tuple[int, str, Listing]:
    """Parse the output of :func:`remote_listing_script`: ``(free_bytes, fs_path, {rel: (size, mtime)})``."""
    excludes = DEFAULT_EXCLUDES if excludes is None else excludes
    head, _sep, rest = text.partition('\n')
    parts = head.strip().split(' ', 2)
    try:
        free = int(parts[0]) * int(parts[1])
    except (ValueError, IndexError):
        raise SyncError('could not read free space on the destination from %r' % head[:200])
    fs_path = parts[2] if len(parts) > 2 else ''
    fields = rest.split('\0')
    out: Listing = {}
    for i in range(0, len(fields) - 2, 3):
        rel, size, mtime = fields[i], fields[i + 1], fields[i + 2]
        if not rel or _excluded(rel, excludes):
            continue
        out[rel] = (int(size), int(float(mtime)))
    return free, fs_path, out


def plan(src: Listing, dst: Listing, force: Iterable[str] | None = None) -> dict[str, Any]:
    """Decide what to do per file. ``src``/``dst``: ``{rel: (size, mtime)}``.

    Returns a dict: ``whole`` (copy the whole file), ``replace`` (those of ``whole`` the destination holds in full:
    written aside and renamed, never in place), ``append`` (resume: destination
    shorter than the source), ``skip`` (identical by size + mtime), ``extra``
    (only on the destination; reported, never deleted), ``bytes_needed`` (bytes
    the destination's file system must hold: what is missing, plus the whole size of each file replaced,
    written aside before the old copy goes), ``bytes_total``.
    """
    force = set(force or ())
    whole: list[str] = []
    append: list[str] = []
    skip: list[str] = []
    needed = 0
    for rel in sorted(src):
        size, mtime = src[rel]
        have = dst.get(rel)
        if have is not None and (rel in force or have[0] != size or have[1] != mtime) and have[0] >= size:
            # held in full: the new copy is written aside before the old one goes, so it needs its whole size
            whole.append(rel)
            needed += size
        elif rel in force or have is None:
            whole.append(rel)
            needed += size if have is None else max(0, size - have[0])
        elif have[0] < size:
            append.append(rel)
            needed += size - have[0]
        else:
            skip.append(rel)
    extra = sorted(set(dst) - set(src))
    replace = [rel for rel in whole if rel in dst and dst[rel][0] >= src[rel][0]]
    return dict(whole=whole, replace=replace, append=append, skip=skip, extra=extra, bytes_needed=needed,
                bytes_total=sum(s for s, _m in src.values()),
                bytes_to_send=sum(src[r][0] for r in whole) + sum(src[r][0] - dst[r][0] for r in append))


def balance(names: Iterable[str], sizes: dict[str, int], streams: int) -> list[list[str]]:
    """Split ``names`` into at most ``streams`` lists of about equal bytes (largest first)."""
    streams = max(1, int(streams))
    bins: list[list[Any]] = [[0, i, []] for i in range(streams)]
    for name in sorted(names, key=lambda n: (-sizes[n], n)):
        target = min(bins, key=lambda b: (b[0], b[1]))
        target[0] += sizes[name]
        target[2].append(name)
    return [sorted(b[2]) for b in bins if b[2]]


def split_ssh(ssh: list[str] | None) -> tuple[str | None, str | None]:
    """``(rsh string, [user@]host)`` from an ssh command prefix list (last element = destination)."""
    if not ssh:
        return None, None
    if len(ssh) < 2:
        raise SyncError('ssh=%r: need a command and a destination, e.g. [ssh, -i, KEY, root@10.0.0.2]' % (ssh,))
    return ' '.join(shlex.quote(a) for a in ssh[:-1]), ssh[-1]


def rsync_argv(rsync: str, src: str, dest: str, files_from: str, mode: str, ssh: list[str] | None = None) -> list[str]:
    """argv of one rsync stream. ``mode``: ``whole`` (a missing file: in place, resumable), ``append`` (resume a
    shorter one) or ``replace`` (a file the destination holds: written under TEMP_DIR, renamed when complete).

    ``--copy-links``: the listing follows symlinks (a Hugging Face hub cache snapshot is symlinks into
    ``../../blobs/``), so the copy must too: the destination gets regular files with the bytes, never the
    links (``-a`` alone copies a link as a link, dangling on the worker).
    """
    argv = [rsync, '-a', '--copy-links', '--stats', '--from0', '--files-from=%s' % files_from]
    if mode == 'replace':
        argv += ['--whole-file', '--ignore-times', '--temp-dir=%s' % os.path.join(dest, TEMP_DIR)]
    elif mode == 'append':
        argv += ['--inplace', '--partial', '--append-verify']
    else:
        argv += ['--inplace', '--partial', '--whole-file', '--ignore-times']
    rsh, host = split_ssh(ssh)
    target = dest.rstrip('/') + '/'
    if rsh:
        argv += ['-e', rsh]
        target = '%s:%s' % (host, target)
    argv += [src.rstrip('/') + '/', target]
    return argv


def parse_bytes_sent(stdout: str | None) -> int:
    m = _STATS_RE.search(stdout or '')
    return int(re.sub(r'[,.]', '', m.group(1))) if m else 0


def run_streams(jobs: list[list[list[str]]]) -> tuple[int, list[str]]:
    """Run rsync jobs (lists of argv run one after the other per stream) in parallel.

    ``jobs``: list of lists of argv. Returns ``(bytes_sent, errors)``.
    """
    procs: list[Iterator[list[str]]] = []
    sent = 0
    errors: list[str] = []
    for chain in jobs:
        procs.append(iter(chain))
    running: list[tuple[Iterator[list[str]], list[str], subprocess.Popen[str]]] = []

    def start(it: Iterator[list[str]]) -> tuple[Iterator[list[str]], list[str], subprocess.Popen[str]] | None:
        argv = next(it, None)
        if argv is None:
            return None
        # N rsync streams must run at once; AnsibleModule.run_command runs one process and waits for it.
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,  # pylint: disable=ansible-bad-function
                                universal_newlines=True)
        return (it, argv, proc)

    for it in procs:
        p = start(it)
        if p:
            running.append(p)
    while running:
        nxt = []
        for it, argv, proc in running:
            out, err = proc.communicate()
            sent += parse_bytes_sent(out)
            if proc.returncode != 0:
                errors.append('rsync exited %d: %s' % (proc.returncode, (err or out or '').strip()[-800:]))
            p = start(it)
            if p:
                nxt.append(p)
        running = nxt
    return sent, errors


def sync(src: str, dest: str, ssh: list[str] | None = None, streams: int = 4, force: Iterable[str] | None = None,
         excludes: list[str] | None = None, check_mode: bool = False, reserve: int = 0, rsync: str = 'rsync',
         runner: Runner | None = None, drop_behind_copied: bool = True) -> dict[str, Any]:
    """Plan and (unless ``check_mode``) copy. Returns a result dict; raises :class:`SyncError`."""
    started = time.time()
    excludes = DEFAULT_EXCLUDES if excludes is None else excludes
    if not os.path.isdir(src):
        raise SyncError('src=%s is not a directory on this host (the head): download or place the model there first' % src)
    runner = runner or _run
    src_list = local_listing(src, excludes)
    if not src_list:
        raise SyncError('src=%s holds no files: nothing to copy' % src)
    where = ssh[-1] if ssh else 'this host (local copy)'
    if ssh:
        split_ssh(ssh)
        rc, out, err = runner(list(ssh) + [remote_listing_script(dest)])
        if rc != 0:
            raise SyncError('listing %s:%s over ssh failed (rc=%d): %s' % (where, dest, rc, (err or out).strip()[-800:]))
        free, fs_path, dst_list = parse_remote_listing(out, excludes)
    else:
        if os.path.realpath(src) == os.path.realpath(dest):
            raise SyncError('src and dest are the same directory (%s)' % src)
        fs_path = nearest_existing(dest)
        free = free_bytes(dest)
        dst_list = local_listing(dest, excludes, follow=False)
    p = plan(src_list, dst_list, force)
    result: dict[str, Any] = dict(src=src, dest=dest, dest_host=where, files_total=len(src_list), bytes_total=p['bytes_total'],
                                  files_copied=p['whole'], files_replaced=p['replace'], files_resumed=p['append'], files_skipped=len(p['skip']),
                                  extra=p['extra'], bytes_needed=p['bytes_needed'], bytes_to_send=p['bytes_to_send'],
                                  dest_free_bytes=free, dest_fs=fs_path, bytes_copied=0, bytes_sent=0, streams_used=0,
                                  changed=bool(p['whole'] or p['append']))
    if p['bytes_needed'] + reserve > free:
        raise SyncError('not enough disk space on %s for %s: need %s (%d bytes: model %s minus %s already there%s), '
                        'free %s (%d bytes) on the file system of %s; free space there or change the model host_dir'
                        % (where, dest, human(p['bytes_needed'] + reserve), p['bytes_needed'] + reserve,
                           human(p['bytes_total']), human(p['bytes_total'] - p['bytes_needed']),
                           ', plus reserve %s' % human(reserve) if reserve else '', human(free), free, fs_path),
                        **result)
    if check_mode or not result['changed']:
        result['duration_s'] = round(time.time() - started, 3)
        return result
    sizes = dict((r, v[0]) for r, v in src_list.items())
    tmpdir = tempfile.mkdtemp(prefix='ds4-model-sync-')
    try:
        if ssh:
            rc, out, err = runner(list(ssh) + ['mkdir -p %s' % shlex.quote(os.path.join(dest, TEMP_DIR))])
            if rc != 0:
                raise SyncError('mkdir -p %s on %s failed: %s' % (dest, where, (err or out).strip()), **result)
        elif not os.path.isdir(os.path.join(dest, TEMP_DIR)):
            os.makedirs(os.path.join(dest, TEMP_DIR))
        todo = p['whole'] + p['append']
        mode_of = dict([(r, 'whole') for r in p['whole']] + [(r, 'replace') for r in p['replace']]
                       + [(r, 'append') for r in p['append']])
        jobs: list[list[list[str]]] = []
        for i, part in enumerate(balance(todo, sizes, streams)):
            chain: list[list[str]] = []
            for mode in ('append', 'whole', 'replace'):
                names = [r for r in part if mode_of[r] == mode]
                if not names:
                    continue
                list_file = os.path.join(tmpdir, 'stream%d-%s' % (i, mode))
                with open(list_file, 'w') as f:
                    f.write('\0'.join(names) + '\0')
                chain.append(rsync_argv(rsync, src, dest, list_file, mode, ssh))
            jobs.append(chain)
        copy_started = time.time()
        sent, errors = run_streams(jobs)
        copy_s = max(time.time() - copy_started, 1e-9)
    finally:
        for name in os.listdir(tmpdir):
            os.unlink(os.path.join(tmpdir, name))
        os.rmdir(tmpdir)
    result.update(streams_used=len(jobs), bytes_sent=sent, copy_s=round(copy_s, 3),
                  throughput_mib_s=round(p['bytes_to_send'] / copy_s / 1048576.0, 1))
    if errors:
        raise SyncError('copy to %s:%s failed in %d of %d streams (rerun to resume): %s'
                        % (where, dest, len(errors), len(jobs), ' | '.join(errors)), **result)
    # Post-check: every copied file now has the source's size on the destination.
    if ssh:
        rc, out, err = runner(list(ssh) + [remote_listing_script(dest)])
        after = parse_remote_listing(out, excludes)[2] if rc == 0 else {}
    else:
        after = local_listing(dest, excludes, follow=False)
    short = [r for r in todo if after.get(r, (None,))[0] != sizes[r]]
    if short:
        raise SyncError('after the copy %d file(s) on %s differ in size from the head: %s'
                        % (len(short), where, ', '.join(short[:LIST_LIMIT])), **result)
    result['bytes_copied'] = p['bytes_to_send']
    if drop_behind_copied:
        # the copies on the destination, and the source files rsync read, leave the page cache
        warnings = [drop_behind(runner, dest, todo, ssh), drop_behind(runner, src, todo)]
        result['drop_behind_warnings'] = [w for w in warnings if w]
    result['duration_s'] = round(time.time() - started, 3)
    return result


def _run(argv: list[str]) -> tuple[int, str, str]:
    # Pure module_utils (no AnsibleModule here, unit-tested without Ansible): plain subprocess.
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # pylint: disable=ansible-bad-function
    out, err = proc.communicate()
    return proc.returncode, out.decode('utf-8', 'surrogateescape'), err.decode('utf-8', 'replace')
