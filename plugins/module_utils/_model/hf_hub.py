# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Download a pinned Hugging Face snapshot into a plain directory (the head's model dir).

* The revision must be a 40-hex commit: a branch or tag (``main``) re-resolves on the
  hub and silently starts another 150 GB download when upstream moves.
* The token is read by huggingface_hub from ``HF_TOKEN`` in the environment; it is
  never an argument, never returned.
* Fast backends: ``hf_xet`` is used by huggingface_hub automatically when installed;
  ``hf_transfer`` only when ``HF_HUB_ENABLE_HF_TRANSFER=1`` is set before import, which
  :func:`prepare_backend` does when the package is importable.
* Space: hub sizes minus what is already in the directory, against ``statvfs``.

huggingface_hub is imported lazily (only the head needs it). No Ansible imports.
"""

from __future__ import annotations


import importlib
import os
import re
import time
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._model.drop_caches import drop_behind
from ansible_collections.dgxspark.ds4.plugins.module_utils._model.model_sync import (
    DEFAULT_EXCLUDES, Listing, Runner, SyncError, _run, free_bytes, human, local_listing, nearest_existing)

PINNED_RE = re.compile(r'^[0-9a-f]{40}$')


def is_pinned(revision: Any) -> bool:
    return bool(revision) and bool(PINNED_RE.match(str(revision)))


def check_revision(revision: Any, allow_unpinned: bool) -> str | None:
    """Return a warning (or None); raise :class:`SyncError` for an unpinned revision not acknowledged."""
    if is_pinned(revision):
        return None
    shown = 'null' if revision is None else repr(str(revision))
    msg = ('revision=%s is not a pinned 40-hex commit: a branch or tag (or no revision = main) re-resolves on the hub '
           'and silently downloads again when upstream moves' % shown)
    if not allow_unpinned:
        raise SyncError(msg + '; set the model revision to the commit sha (huggingface.co/<repo>/commits) '
                        'or acknowledge with allow_unpinned=true')
    return msg + ' (acknowledged with allow_unpinned)'


def importable(name: str) -> bool:
    try:
        importlib.import_module(name)
        return True
    except Exception:
        return False


def prepare_backend(env: Any, have_hf_transfer: bool, have_hf_xet: bool) -> str:
    """Set the environment for the fastest installed backend; return its name."""
    if have_hf_xet:
        return 'hf_xet'
    if have_hf_transfer:
        env['HF_HUB_ENABLE_HF_TRANSFER'] = '1'
        return 'hf_transfer'
    return 'http'


def _field(sibling: Any, key: str) -> Any:
    """A field of a sibling: a dict's key, or an object's attribute (None when absent)."""
    return sibling.get(key) if isinstance(sibling, dict) else getattr(sibling, key, None)


def siblings_metadata(siblings: Any) -> list[dict[str, Any]]:
    """Serialise ``model_info(files_metadata=True).siblings`` for model_manifest's ``hub_metadata``."""
    out: list[dict[str, Any]] = []
    for s in siblings or []:
        lfs = _field(s, 'lfs')
        if lfs is not None and not isinstance(lfs, dict):
            lfs = {'sha256': getattr(lfs, 'sha256', None), 'size': getattr(lfs, 'size', None)}
        size = _field(s, 'size')
        if size is None and lfs:
            size = lfs.get('size')
        entry: dict[str, Any] = {'rfilename': _field(s, 'rfilename'), 'size': size}
        if lfs and lfs.get('sha256'):
            entry['lfs'] = {'sha256': lfs['sha256']}
        out.append(entry)
    return sorted(out, key=lambda e: e['rfilename'])


def bytes_needed(meta: list[dict[str, Any]], have: Listing) -> int:
    """Bytes still to download: hub size minus the local size of the same file (never negative)."""
    need = 0
    for e in meta:
        size = e.get('size') or 0
        local = have.get(e['rfilename'])
        need += max(0, size - (local[0] if local else 0))
    return need


def download(repo_id: str, revision: Any, local_dir: str, allow_unpinned: bool = False, max_workers: int = 8,
             reserve: int = 0, check_mode: bool = False, hub: Any = None, runner: Runner | None = None) -> dict[str, Any]:
    """Resolve metadata, check space, snapshot_download, then drop the page cache behind the files it wrote
    (``drop_caches.drop_behind``: a 149 GB download beside a live pair does not fill it). Returns a result dict;
    raises SyncError."""
    started = time.time()
    warning = check_revision(revision, allow_unpinned)
    backend = prepare_backend(os.environ, importable('hf_transfer'), importable('hf_xet'))
    if hub is None:
        try:
            hub = importlib.import_module('huggingface_hub')
        except ImportError:
            raise SyncError('huggingface_hub is not installed for %s on the head; install it (pip install huggingface_hub) '
                            'or use a local model directory' % os.environ.get('_', 'python'))
    try:
        info = hub.HfApi().model_info(repo_id, revision=revision, files_metadata=True)
    except Exception as e:
        raise SyncError('cannot read %s@%s from the hub (%s: %s); check the repo id, revision and HF token'
                        % (repo_id, revision, type(e).__name__, str(e)[:400]))
    meta = siblings_metadata(info.siblings)
    before = local_listing(local_dir, DEFAULT_EXCLUDES)
    need = bytes_needed(meta, before)
    free = free_bytes(local_dir)
    result: dict[str, Any] = dict(repo_id=repo_id, revision=revision, resolved_revision=getattr(info, 'sha', None), backend=backend,
                                  hub_metadata=meta, bytes_total=sum(e.get('size') or 0 for e in meta), bytes_needed=need,
                                  free_bytes=free, fs=nearest_existing(local_dir), warning=warning, bytes_downloaded=0,
                                  files_downloaded=[], changed=need > 0)
    if need + reserve > free:
        raise SyncError('not enough disk space on the head for %s: need %s (%d bytes: model %s minus %s already there), '
                        'free %s (%d bytes) on the file system of %s'
                        % (local_dir, human(need + reserve), need + reserve, human(result['bytes_total']),
                           human(result['bytes_total'] - need), human(free), free, result['fs']), **result)
    if check_mode:
        return result
    if not os.path.isdir(local_dir):
        os.makedirs(local_dir)
    hub.snapshot_download(repo_id=repo_id, revision=result['resolved_revision'] or revision, local_dir=local_dir,
                          max_workers=max_workers)
    after = local_listing(local_dir, DEFAULT_EXCLUDES)
    changed_files = sorted(r for r in after if before.get(r, (None,))[0] != after[r][0])
    warning = drop_behind(runner or _run, local_dir, changed_files)
    result.update(files_downloaded=changed_files, changed=bool(changed_files), drop_behind_warnings=[warning] if warning else [],
                  bytes_downloaded=sum(after[r][0] - (before[r][0] if r in before else 0) for r in changed_files),
                  duration_s=round(time.time() - started, 3))
    return result
