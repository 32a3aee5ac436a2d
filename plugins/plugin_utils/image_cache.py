# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The derived-image cache of dgxspark.ds4.container_image (pure logic, no Ansible imports).

A derived image (mxfp4 fix, DeepGEMM) is not reproducible: a rebuild clones DeepGEMM again and writes new
layers, so it gets a new image ID, the ID flows into vllm_service's unit and both ranks restart. So the head
keeps each derived image as a ``docker save`` tarball, keyed by the content hash of the build inputs (the
rendered Dockerfile, base image ID and DeepGEMM commit included, and the patched mxfp4.py): ``<key>.tar``
under ``container_image_cache_dir``, with an index::

    {"version": 1, "entries": [{"key": "<64 hex>", "id": "sha256:...", "ref": "<repo>:<key[:16]>",
                                "tarball": "<key>.tar" | null}, ...]}      # oldest first, the current last

``docker load`` gives back the same image ID (the ID is the digest of the image config, which the tarball
carries). Decisions:

* ``plan``: what to do for the current key -- ``keep`` (the tag gives the recorded ID), ``tag`` (the recorded
  ID is still in Docker, e.g. untagged by ``docker rmi -f`` while a container uses it), ``load`` (restore the
  tarball), ``build`` (no record for these inputs, or ``container_image_rebuild=true``) or ``refuse`` (the
  recorded image is gone and a rebuild would change its ID: says so and names ``container_image_rebuild``).
* ``record``: the index after this run -- the current key last, the one before kept for rollback, older
  entries dropped with their tarballs; whether the tarball must be (re)written; not written when the disk lacks
  room for it (said, never fatal: the restore is then not available for this key).
"""


from typing import Any
import re

INDEX_VERSION = 1
# Entries kept: the current key and the previous one (rollback.yml's image comes back without a rebuild).
KEEP = 2
# Free space asked for beyond the tarball's size (the filesystem also holds the journal and the model cache).
HEADROOM = 1.10
_KEY = re.compile(r'^[0-9a-f]{64}$')


def _entries(index: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not isinstance(index, dict):
        return []
    return [e for e in index.get('entries') or [] if isinstance(e, dict) and e.get('key')]


def _entry(index: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
    found = [e for e in _entries(index) if e['key'] == key]
    return found[-1] if found else None


def tarball_name(key: str) -> str:
    """``<key>.tar``; refuses anything but a sha256 hex key (it becomes a file name on the head)."""
    if not _KEY.match(key or ''):
        raise ValueError('derived-image cache key %r is not a sha256 hex digest' % (key,))
    return '%s.tar' % key


def _tag_id(images: list[dict[str, Any]] | None, ref: str) -> str | None:
    for img in images or []:
        if ref in (img.get('RepoTags') or []):
            return img.get('Id')
    return None


def plan(index: dict[str, Any] | None, key: str, ref: str, images: list[dict[str, Any]] | None, tarball_present: bool,
         rebuild: bool, cache_dir: str) -> dict[str, Any]:
    """What to do so that ``ref`` gives the derived image of ``key``. ``images``: docker image infos of the ref and
    of the recorded IDs (absent ones simply missing). Returns ``{action, id, message}``; ``id`` is the image ID the
    ref must give afterwards (None for a build)."""
    tarball = '%s/%s' % (cache_dir.rstrip('/'), tarball_name(key))
    entry = _entry(index, key)
    now = _tag_id(images, ref)
    recorded = entry.get('id') if entry else None
    if rebuild:
        return {'action': 'build', 'id': None,
                'message': 'container_image_rebuild=true: %s is built again%s; a new image ID restarts both ranks. '
                           'Leave container_image_rebuild off afterwards.' % (
                               ref, ' (it was %s)' % recorded if recorded else '')}
    if entry is None:
        if now:
            return {'action': 'keep', 'id': now,
                    'message': '%s is %s (no cache entry for these inputs yet: recorded now)' % (ref, now)}
        return {'action': 'build', 'id': None,
                'message': '%s: first build for these inputs (key %s)' % (ref, key[:16])}
    if now == recorded:
        return {'action': 'keep', 'id': recorded, 'message': '%s is the recorded %s' % (ref, recorded)}
    if any(img.get('Id') == recorded for img in images or []):
        return {'action': 'tag', 'id': recorded,
                'message': '%s gave %s; the recorded %s is still in Docker: tagged again, nothing rebuilt, no restart' % (
                    ref, now or 'nothing', recorded)}
    if tarball_present and entry.get('tarball'):
        return {'action': 'load', 'id': recorded,
                'message': '%s gave %s; restoring the recorded %s from %s (docker load keeps the ID): nothing rebuilt, '
                           'no restart' % (ref, now or 'nothing', recorded, tarball)}
    return {'action': 'refuse', 'id': recorded,
            'message': 'The derived image %s (recorded %s for these build inputs) is %s and %s is missing, so it '
                       'cannot be restored. Building it again gives a new image ID (DeepGEMM cloned again, new layers) '
                       'and restarts both ranks. Fix: -e container_image_rebuild=true to rebuild it (once), or put the '
                       'tarball back (docker load -i <tarball> restores the same ID).' % (
                           ref, recorded, 'replaced by %s' % now if now else 'gone', tarball)}


def record(index: dict[str, Any] | None, key: str, ref: str, image_id: str, tarball_present: bool, free_bytes: int | None = None,
           size_bytes: int | None = None) -> dict[str, Any]:
    """The index after this run and what to do on disk: ``{index, save, remove, message}``. ``save``: write
    ``<key>.tar`` (absent, or the entry's ID changed after a rebuild); ``remove``: tarball names of dropped keys."""
    name = tarball_name(key)
    old = _entry(index, key)
    same = old is not None and old.get('id') == image_id and bool(old.get('tarball')) and bool(tarball_present)
    save = not same
    message = ''
    if save and free_bytes is not None and size_bytes is not None and float(free_bytes) < float(size_bytes) * HEADROOM:
        save = False
        gib = 1073741824.0
        message = ('not saving %s (%s, %.1f GiB): %.1f GiB free where the cache is, %.1f GiB needed; the derived image '
                   'cannot be restored after a docker rmi / docker system prune -a until there is room '
                   '(container_image_cache_dir)' % (ref, image_id, float(size_bytes) / gib, float(free_bytes) / gib,
                                                    float(size_bytes) * HEADROOM / gib))
    current = {'key': key, 'id': image_id, 'ref': ref, 'tarball': name if (same or save) else None}
    others = [e for e in _entries(index) if e['key'] != key]
    kept = others[-(KEEP - 1):] if KEEP > 1 else []
    dropped = [e for e in others if e not in kept]
    remove = sorted(set(e['tarball'] for e in dropped if e.get('tarball')) - set([name]))
    return {'index': {'version': INDEX_VERSION, 'entries': kept + [current]}, 'save': save, 'remove': remove,
            'message': message}
