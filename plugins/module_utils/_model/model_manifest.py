# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Build and check a manifest (relative path, size, sha256) of a model directory.

* ``quick``: names and sizes only (a stat per file: seconds for 150 GB).
* ``full``: sha256 of every file, files hashed in parallel by a thread pool with
  large ``readinto`` reads; hashlib releases the GIL while hashing, so a full check
  is bounded by disk read speed, not by one core.
* ``full`` with ``changed_since`` (a listing ``{relpath: [size, mtime_ns]}`` of the last
  verified state, as every check returns in ``listing``): only the files new or changed
  since (another size or mtime) are hashed; the others are compared by size. A file
  rewritten under the same identity (same size, new mtime) is hashed before anything
  trusts it, in seconds rather than the minutes of a whole-model hash.
* The reference comes from the hub's metadata (``lfs.sha256`` + size per file) when
  given, else from a manifest built on the head; non-LFS files the hub gives no
  sha256 for are checked by size unless a head manifest supplies their sha256.

Pure logic, no Ansible imports.
"""

from __future__ import annotations


import fnmatch
import hashlib
import json
import os
import re
import time

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

FORMAT = 'dgxspark.ds4/model-manifest'
VERSION = 1
DEFAULT_EXCLUDES = ['.cache/**', '*.lock', '*.incomplete']
READ_SIZE = 8 * 1024 * 1024
_SHA_RE = re.compile(r'^[0-9a-f]{64}$')
LIST_LIMIT = 10


class ManifestError(Exception):
    """A failure with a message for the user, plus result fields."""

    def __init__(self, msg: str, **fields: Any) -> None:
        super(ManifestError, self).__init__(msg)
        self.msg = msg
        self.fields = fields


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


# ---------------------------------------------------------------- scanning

def _excluded(relpath: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(relpath, pat) for pat in patterns)


def _dir_excluded(reldir: str, patterns: Iterable[str]) -> bool:
    for pat in patterns:
        if pat.endswith('/**') and fnmatch.fnmatchcase(reldir, pat[:-3]):
            return True
    return False


def scan(root: str, excludes: Iterable[str] | None = None, skip: Iterable[str] | None = None,
         mtimes: dict[str, int] | None = None) -> tuple[dict[str, int], list[dict[str, str]]]:
    """Return ``(sizes, unreadable)``: ``{relpath: size}`` of regular files under ``root``; ``mtimes`` (a dict,
    optional) receives ``{relpath: st_mtime_ns}``.

    Relative paths use ``/``.  File symlinks are followed (Hugging Face cache snapshots
    are symlinks into ``blobs/``); directory symlinks are not.  ``skip`` is a set of
    absolute paths to leave out (the manifest file itself when it lives in ``root``).
    """
    if not os.path.isdir(root):
        raise ManifestError('path=%s is not a directory' % root)
    excludes = list(DEFAULT_EXCLUDES if excludes is None else excludes)
    skipped = set(os.path.abspath(s) for s in (skip or ()))
    sizes: dict[str, int] = {}
    unreadable: list[dict[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        reldir = os.path.relpath(dirpath, root)
        reldir = '' if reldir == '.' else reldir.replace(os.sep, '/')
        keep = []
        for name in sorted(dirnames):
            rel = reldir + '/' + name if reldir else name
            if not _dir_excluded(rel, excludes):
                keep.append(name)
        dirnames[:] = keep
        for name in filenames:
            rel = reldir + '/' + name if reldir else name
            full = os.path.join(dirpath, name)
            if _excluded(rel, excludes) or os.path.abspath(full) in skipped:
                continue
            try:
                st = os.stat(full)
            except OSError as exc:
                unreadable.append(dict(name=rel, error=str(exc)))
                continue
            if os.path.isdir(full):
                continue
            sizes[rel] = st.st_size
            if mtimes is not None:
                mtimes[rel] = st.st_mtime_ns
    return sizes, unreadable


# ---------------------------------------------------------------- hashing

def hash_file(path: str, read_size: int = READ_SIZE, evict: bool = False) -> tuple[str, int]:
    """sha256 of one file, read sequentially in ``read_size`` chunks into one reused buffer."""
    digest = hashlib.sha256()
    buf = bytearray(read_size)
    view = memoryview(buf)
    total = 0
    with open(path, 'rb', buffering=0) as handle:
        fd = handle.fileno()
        if hasattr(os, 'posix_fadvise'):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        while True:
            num = handle.readinto(buf)
            if not num:
                break
            digest.update(view[:num])
            total += num
        if evict and hasattr(os, 'posix_fadvise'):
            # do not leave the weights in the page cache (GB10 counts it against vLLM)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    return digest.hexdigest(), total


def hash_files(root: str, names: Iterable[str], workers: int | None = None, read_size: int = READ_SIZE,
               evict: bool = False) -> tuple[dict[str, str], list[dict[str, str]], int]:
    """Hash ``names`` (relative) under ``root`` in a thread pool.

    Returns ``(digests, errors, bytes_read)``; largest files are started first so
    the pool drains evenly.
    """
    workers = workers or default_workers()
    digests: dict[str, str] = {}
    errors: list[dict[str, str]] = []
    bytes_read = 0
    paths: list[tuple[int, str, str]] = []
    for name in names:
        full = os.path.join(root, *name.split('/'))
        try:
            size = os.path.getsize(full)
        except OSError:
            size = 0
        paths.append((size, name, full))
    paths.sort(key=lambda item: (-item[0], item[1]))
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(paths) or 1))) as pool:
        futures = [(name, pool.submit(hash_file, full, read_size, evict)) for dummy, name, full in paths]
        for name, future in futures:
            try:
                digest, num = future.result()
            except (IOError, OSError) as exc:
                errors.append(dict(name=name, error=str(exc)))
                continue
            digests[name] = digest
            bytes_read += num
    return digests, errors, bytes_read


# ---------------------------------------------------------------- manifests

def new_manifest(files: dict[str, dict[str, Any]], source: str) -> dict[str, Any]:
    return {'format': FORMAT, 'version': VERSION, 'source': source,
            'files': dict((k, files[k]) for k in sorted(files))}


def dumps(manifest: dict[str, Any]) -> str:
    """Deterministic text (sorted keys, no timestamps) so rebuilding an unchanged dir changes nothing."""
    return json.dumps(manifest, indent=2, sort_keys=True, separators=(',', ': ')) + '\n'


def _entry(name: str, size: Any, sha: Any, option: str) -> dict[str, Any]:
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ManifestError('%s: entry %r has size %r; expected a non-negative integer' % (option, name, size))
    if sha is not None:
        sha = str(sha).lower()
        if not _SHA_RE.match(sha):
            raise ManifestError('%s: entry %r has sha256 %r; expected 64 hex digits or null' % (option, name, sha))
    if not name or name.startswith('/') or '..' in name.split('/'):
        raise ManifestError('%s: entry %r is not a relative path inside the model directory' % (option, name))
    return {'size': size, 'sha256': sha}


def load_manifest(data: Any, option: str = 'manifest_content') -> dict[str, Any]:
    """Normalise a manifest given as our format, a JSON string, ``{path: {size, sha256}}`` or a list."""
    if isinstance(data, (bytes, bytearray)):
        data = data.decode('utf-8')
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise ManifestError('%s is not valid JSON: %s' % (option, exc))
    source = 'manifest'
    if isinstance(data, dict) and 'files' in data:
        if data.get('format', FORMAT) != FORMAT:
            raise ManifestError('%s has format %r; expected %r' % (option, data.get('format'), FORMAT))
        source = data.get('source', source)
        data = data['files']
    files: dict[str, dict[str, Any]] = {}
    if isinstance(data, dict):
        for name, item in data.items():
            if not isinstance(item, dict):
                raise ManifestError('%s: entry %r is not a mapping with size and sha256' % (option, name))
            files[name] = _entry(name, item.get('size'), item.get('sha256'), option)
    elif isinstance(data, list):
        for item in data:
            if not isinstance(item, dict) or 'path' not in item:
                raise ManifestError('%s: list entries need path, size and sha256; got %r' % (option, item))
            files[item['path']] = _entry(item['path'], item.get('size'), item.get('sha256'), option)
    else:
        raise ManifestError('%s must be a manifest mapping or list; got %s' % (option, type(data).__name__))
    return new_manifest(files, source)


def manifest_from_hub(meta: Any, option: str = 'hub_metadata') -> dict[str, Any]:
    """Convert ``model_info(files_metadata=True).siblings`` (or the hub API JSON) to a manifest.

    LFS files carry ``lfs.sha256``; other files get ``sha256: null`` (size only).
    """
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError as exc:
            raise ManifestError('%s is not valid JSON: %s' % (option, exc))
    if isinstance(meta, dict):
        meta = meta.get('siblings')
    if not isinstance(meta, list) or not meta:
        raise ManifestError('%s must be the list of siblings from model_info(repo, revision=..., files_metadata=True) '
                            '(or a mapping with "siblings"); got %s' % (option, type(meta).__name__))
    files: dict[str, dict[str, Any]] = {}
    for sib in meta:
        if not isinstance(sib, dict):
            raise ManifestError('%s: sibling %r is not a mapping' % (option, sib))
        name = sib.get('rfilename') or sib.get('path')
        if not name:
            raise ManifestError('%s: sibling without rfilename: %r' % (option, sib))
        lfs = sib.get('lfs') or {}
        size = sib.get('size')
        if size is None:
            size = lfs.get('size')
        if size is None:
            raise ManifestError('%s: %s has no size; fetch the metadata with files_metadata=True' % (option, name))
        files[name] = _entry(name, size, lfs.get('sha256'), option)
    return new_manifest(files, 'hub')


def merge_head(reference: dict[str, Any], head: dict[str, Any]) -> dict[str, Any]:
    """Fill sha256 the hub does not give (non-LFS files) from the head's manifest when sizes agree."""
    files: dict[str, dict[str, Any]] = {}
    for name, entry in reference['files'].items():
        entry = dict(entry)
        other = head['files'].get(name)
        if entry['sha256'] is None and other and other['sha256'] and other['size'] == entry['size']:
            entry['sha256'] = other['sha256']
        files[name] = entry
    return new_manifest(files, reference['source'] + '+head')


# ---------------------------------------------------------------- compare

def compare(expected_files: dict[str, dict[str, Any]], sizes: dict[str, int], digests: dict[str, str] | None = None,
            hashed: set[str] | None = None) -> dict[str, Any]:
    """Compare the reference with what is on disk.

    ``digests`` maps relpath -> sha256 for files that were hashed; ``hashed`` is the
    set of names a full check wanted to hash.
    """
    missing: list[str] = []
    truncated: list[dict[str, Any]] = []
    size_mismatch: list[dict[str, Any]] = []
    sha_mismatch: list[dict[str, Any]] = []
    size_only: list[str] = []
    for name in sorted(expected_files):
        entry = expected_files[name]
        if name not in sizes:
            missing.append(name)
            continue
        actual = sizes[name]
        if actual < entry['size']:
            truncated.append(dict(name=name, expected_size=entry['size'], actual_size=actual))
            continue
        if actual != entry['size']:
            size_mismatch.append(dict(name=name, expected_size=entry['size'], actual_size=actual))
            continue
        if digests is None:
            continue
        if entry['sha256'] is None:
            size_only.append(name)
            continue
        if hashed is not None and name in hashed and name in digests and digests[name] != entry['sha256']:
            sha_mismatch.append(dict(name=name, expected_sha256=entry['sha256'], actual_sha256=digests[name]))
    extra = sorted(n for n in sizes if n not in expected_files)
    return dict(missing=missing, extra=extra, truncated=truncated, size_mismatch=size_mismatch,
                sha256_mismatch=sha_mismatch, size_only=size_only)


def _names(items: list[Any], limit: int = LIST_LIMIT, fmt: Callable[[Any], str] | None = None) -> str:
    shown = [fmt(i) if fmt else i for i in items[:limit]]
    more = len(items) - limit
    return ', '.join(shown) + (' and %d more' % more if more > 0 else '')


def describe(diff: dict[str, Any], unreadable: list[dict[str, str]] | None = None) -> str:
    """One line naming every problem by file (first 10 per kind)."""
    parts: list[str] = []
    if diff['missing']:
        parts.append('%d missing: %s' % (len(diff['missing']), _names(diff['missing'])))
    if diff['truncated']:
        parts.append('%d truncated: %s' % (len(diff['truncated']), _names(
            diff['truncated'], fmt=lambda d: '%s (%d of %d bytes)' % (d['name'], d['actual_size'], d['expected_size']))))
    if diff['size_mismatch']:
        parts.append('%d larger than expected: %s' % (len(diff['size_mismatch']), _names(
            diff['size_mismatch'], fmt=lambda d: '%s (%d bytes, expected %d)' % (d['name'], d['actual_size'], d['expected_size']))))
    if diff['sha256_mismatch']:
        parts.append('%d sha256 mismatch: %s' % (len(diff['sha256_mismatch']), _names(
            diff['sha256_mismatch'],
            fmt=lambda d: '%s (%s..., expected %s...)' % (d['name'], d['actual_sha256'][:12], d['expected_sha256'][:12]))))
    if diff['extra']:
        parts.append('%d extra: %s' % (len(diff['extra']), _names(diff['extra'])))
    if unreadable:
        parts.append('%d unreadable: %s' % (len(unreadable), _names(
            unreadable, fmt=lambda d: '%s (%s)' % (d['name'], d['error']))))
    return '; '.join(parts)


def mismatch_count(diff: dict[str, Any], unreadable: list[dict[str, str]] | None = None) -> int:
    return (len(diff['missing']) + len(diff['extra']) + len(diff['truncated']) + len(diff['size_mismatch'])
            + len(diff['sha256_mismatch']) + len(unreadable or []))


# ---------------------------------------------------------------- entry points

def changed_names(listing: dict[str, Any], since: dict[str, Any] | None) -> list[str]:
    """Names of ``listing`` (``{relpath: [size, mtime_ns]}``) new or changed (size or mtime) since ``since``."""
    since = since or {}
    return sorted(name for name, entry in listing.items() if list(since.get(name) or []) != list(entry))


def check(root: str, reference: dict[str, Any], mode: str = 'quick', workers: int | None = None,
          excludes: Iterable[str] | None = None, skip: Iterable[str] | None = None, evict: bool = True,
          read_size: int = READ_SIZE, changed_since: Any = None) -> dict[str, Any]:
    """Check ``root`` against ``reference`` (a loaded manifest). Returns a result dict, with ``listing``
    (``{relpath: [size, mtime_ns]}``: the state checked) and, in full mode, ``hashed_files``. With ``changed_since``
    (full mode), only the files changed since that listing are hashed."""
    if mode not in ('quick', 'full'):
        raise ManifestError('mode=%s is not a check mode; use quick or full' % mode)
    if changed_since is not None and not isinstance(changed_since, dict):
        raise ManifestError('changed_since must be a mapping relpath -> [size, mtime_ns] (a check\'s listing); got %s'
                            % type(changed_since).__name__)
    started = time.time()
    mtimes: dict[str, int] = {}
    sizes, unreadable = scan(root, excludes, skip, mtimes)
    listing = dict((name, [sizes[name], mtimes[name]]) for name in sizes)
    expected = reference['files']
    digests: dict[str, str] | None = None
    hashed: set[str] = set()
    errors: list[dict[str, str]] = []
    bytes_read = 0
    if mode == 'full':
        hashed = set(n for n, e in expected.items() if e['sha256'] and sizes.get(n) == e['size'])
        if changed_since is not None:
            hashed &= set(changed_names(listing, changed_since))
        digests, errors, bytes_read = hash_files(root, sorted(hashed), workers, read_size, evict)
        unreadable = unreadable + errors
        hashed -= set(e['name'] for e in errors)
    diff = compare(expected, sizes, digests if mode == 'full' else None, hashed)
    result = _result(diff, unreadable, mode, reference, sizes, bytes_read, len(hashed), workers, started)
    result['listing'] = listing
    if mode == 'full':
        result['hashed_files'] = sorted(hashed)
    return result


def build(root: str, hub: dict[str, Any] | None = None, workers: int | None = None, excludes: Iterable[str] | None = None,
          skip: Iterable[str] | None = None, evict: bool = True, read_size: int = READ_SIZE) -> dict[str, Any]:
    """Build a manifest of ``root``.

    Without ``hub``: every local file, hashed.  With ``hub`` (a manifest from
    ``manifest_from_hub``): the hub's names, sizes and LFS sha256; sha256 of the other
    files comes from hashing the local (head) copy.  Local files that differ from the
    hub are reported like a quick check.
    """
    started = time.time()
    sizes, unreadable = scan(root, excludes, skip)
    if hub is None:
        digests, errors, bytes_read = hash_files(root, sorted(sizes), workers, read_size, evict)
        unreadable = unreadable + errors
        files = dict((n, {'size': sizes[n], 'sha256': digests[n]}) for n in digests)
        manifest = new_manifest(files, 'local')
        diff = compare(manifest['files'], dict((n, sizes[n]) for n in digests))
        hashed = len(digests)
    else:
        todo = sorted(n for n, e in hub['files'].items() if e['sha256'] is None and sizes.get(n) == e['size'])
        digests, errors, bytes_read = hash_files(root, todo, workers, read_size, evict)
        unreadable = unreadable + errors
        files = {}
        for name, entry in hub['files'].items():
            files[name] = {'size': entry['size'], 'sha256': entry['sha256'] or digests.get(name)}
        manifest = new_manifest(files, 'hub+head')
        diff = compare(hub['files'], sizes)
        hashed = len(digests)
    result = _result(diff, unreadable, 'build', manifest, sizes, bytes_read, hashed, workers, started)
    result['manifest'] = manifest
    return result


def _result(diff: dict[str, Any], unreadable: list[dict[str, str]], mode: str, reference: dict[str, Any], sizes: dict[str, int],
            bytes_read: int, hashed: int, workers: int | None, started: float) -> dict[str, Any]:
    duration = max(time.time() - started, 1e-9)
    problems = mismatch_count(diff, unreadable)
    result: dict[str, Any] = dict(diff)
    result.update(
        mode=mode,
        ok=problems == 0,
        mismatches=problems,
        unreadable=unreadable,
        files_expected=len(reference['files']),
        files_found=len(sizes),
        bytes_expected=sum(e['size'] for e in reference['files'].values()),
        bytes_found=sum(sizes.values()),
        files_hashed=hashed,
        bytes_hashed=bytes_read,
        workers=workers or default_workers(),
        duration_s=round(duration, 3),
        hash_throughput_mib_s=round(bytes_read / duration / 1048576.0, 1) if bytes_read else None,
        reference_source=reference.get('source'),
        problems=describe(diff, unreadable),
    )
    return result
