# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One directory per model revision, and the stable path switched to it atomically.

Layout, for the profile's ``model.host_dir`` ``/srv/dgxspark-ds4/models/DeepSeek-V4-Flash``::

    /srv/dgxspark-ds4/models/DeepSeek-V4-Flash            -> DeepSeek-V4-Flash.revs/<revision>  (symlink)
    /srv/dgxspark-ds4/models/DeepSeek-V4-Flash.revs/<revision>/     the files of one revision
    /srv/dgxspark-ds4/models/DeepSeek-V4-Flash.revs/<previous>/     kept until pruned

* The revisions live beside ``host_dir`` (same parent, so the same file system: adopting a flat
  directory is a ``rename``, no byte is copied) and the link target is relative (the tree can be moved).
* The unit mounts ``host_dir`` (the stable path). Docker resolves the link when it creates the container
  (``docker run --rm`` per start), so a running pair keeps the files it started on while a new revision
  is fetched, and the next start serves the new one.
* ``prepare``: adopt a flat directory found at ``host_dir`` (a deployment from before this layout, or the
  user's own copy) by renaming it into ``.revs/<revision it holds>``; create the directory of the wanted
  revision. A flat directory holding a symlink that leads outside it (a Hugging Face hub cache snapshot, whose
  files link into ``../../blobs/``) is refused before anything changes: the rename would break the links (and
  the user's hub cache), and the container, which mounts only ``host_dir``, could not follow them anyway.
  A ``host_dir`` that is a mount point cannot be renamed: it is kept and served as it is (mode ``flat``: no
  revision directories, no switch).
* ``switch``: point ``host_dir`` at the wanted revision by creating a temporary link and ``rename``-ing it
  over ``host_dir`` (atomic: a start sees the old or the new revision, never a mix). Nothing happens when it
  already points there.
* ``prune``: remove revision directories other than the one ``host_dir`` points to (and ``keep``).

Pure logic, no Ansible imports.
"""

from __future__ import annotations


import hashlib
import os
import re
import shutil
from collections.abc import Iterable
from typing import Any

REVS_SUFFIX = '.revs'
UNPINNED = 'unpinned'
_KEY_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$')


class RevisionError(Exception):
    """A failure with a message for the user, plus result fields."""

    def __init__(self, msg: str, **fields: Any) -> None:
        super(RevisionError, self).__init__(msg)
        self.msg = msg
        self.fields = fields


def revision_key(revision: Any) -> str:
    """Directory name of a revision: the commit sha (or a safe ref name); ``unpinned`` when there is none."""
    if revision in (None, ''):
        return UNPINNED
    text = str(revision)
    if _KEY_RE.match(text) and not text.endswith(('.tmp', REVS_SUFFIX)):
        return text
    return 'rev-' + hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]


def layout(host_dir: Any, revision: Any) -> dict[str, str]:
    """Paths of the layout for ``host_dir`` and ``revision``."""
    if not isinstance(host_dir, str) or not host_dir.startswith('/') or host_dir.rstrip('/') == '':
        raise RevisionError('path=%r: the model host_dir must be an absolute path below /' % (host_dir,))
    host_dir = os.path.normpath(host_dir)
    parent, name = os.path.split(host_dir)
    key = revision_key(revision)
    revs = os.path.join(parent, name + REVS_SUFFIX)
    return dict(host_dir=host_dir, parent=parent, name=name, key=key, revs_dir=revs,
                rev_dir=os.path.join(revs, key), link_target=name + REVS_SUFFIX + '/' + key)


def _tree_bytes(path: str) -> int:
    total = 0
    for dirpath, _dirnames, filenames in os.walk(path):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def inspect(lay: dict[str, str]) -> dict[str, Any]:
    """What is at ``host_dir`` now.

    ``kind``: ``absent``, ``link`` (``target``; ``current`` = the revision when it points into ``.revs/``),
    ``dir`` (a flat directory; ``mount`` when it is a mount point or on another device than its parent),
    ``other`` (a file, a link elsewhere or a dangling link: refused). ``revisions``: the directories in ``.revs/``.
    """
    host_dir = lay['host_dir']
    out: dict[str, Any] = dict(kind='absent', target=None, current=None, mount=False, revisions=[])
    if os.path.isdir(lay['revs_dir']):
        out['revisions'] = sorted(n for n in os.listdir(lay['revs_dir'])
                                  if os.path.isdir(os.path.join(lay['revs_dir'], n)) and not n.startswith('.'))
    if os.path.islink(host_dir):
        target = os.readlink(host_dir)
        out['target'] = target
        prefix = lay['name'] + REVS_SUFFIX + '/'
        resolved = os.path.normpath(os.path.join(lay['parent'], target))
        if target.startswith(prefix) and '/' not in target[len(prefix):] and os.path.isdir(resolved):
            out.update(kind='link', current=target[len(prefix):])
        else:
            out['kind'] = 'other'
        return out
    if os.path.isdir(host_dir):
        out['kind'] = 'dir'
        try:
            out['mount'] = os.path.ismount(host_dir) or os.stat(host_dir).st_dev != os.stat(lay['parent']).st_dev
        except OSError:
            out['mount'] = True
        return out
    if os.path.lexists(host_dir):
        out['kind'] = 'other'
    return out


def _free_name(revs_dir: str, key: str, existing: list[str]) -> str:
    if key not in existing and not os.path.lexists(os.path.join(revs_dir, key)):
        return key
    n = 1
    while True:
        cand = '%s.adopted-%d' % (key, n)
        if cand not in existing and not os.path.lexists(os.path.join(revs_dir, cand)):
            return cand
        n += 1


def _link_leading_outside(top: str) -> tuple[str, str] | None:
    """The first symlink under ``top`` whose target lies outside ``top`` (``(link, target)``), else None.

    Not following links (``os.walk(followlinks=False)``); a link to a directory is checked, never descended. The
    target is resolved from the link's own directory, through any further links (``realpath``)."""
    real_top = os.path.realpath(top)
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                continue
            resolved = os.path.realpath(path)
            if resolved != real_top and not resolved.startswith(real_top.rstrip('/') + '/'):
                return path, os.readlink(path)
    return None


# What a model download holds at its top (Hugging Face snapshots, `hf download --local-dir`): one of these is needed
# for a flat directory to be adopted as a revision.
MODEL_FILE_RE = re.compile(r'^(config\.json|.*\.(safetensors|gguf|bin|pt|pth)|.*\.safetensors\.index\.json|tokenizer.*\.json)$')


def _foreign_content(top: str) -> str | None:
    """Why ``top`` is not one model's download (so it must not be adopted, renamed or ever pruned), else None.

    A shared models folder holds other models in sub-directories (each with its own config.json or weights file at
    its top); a system or user directory holds no model file at its top. An empty directory is nothing to lose."""
    try:
        entries = os.listdir(top)
    except OSError as exc:
        return 'cannot be read (%s)' % exc
    if not entries:
        return None
    if not any(MODEL_FILE_RE.match(e) for e in entries):
        return ('holds no model file at its top (config.json, *.safetensors, ...): %s' % ', '.join(sorted(entries)[:5])
                + (', ...' if len(entries) > 5 else ''))
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        if dirpath != top and 'config.json' in filenames and any(MODEL_FILE_RE.match(f) and f != 'config.json' for f in filenames):
            return 'holds another model in %s' % os.path.relpath(dirpath, top)
        if dirpath.count(os.sep) - top.count(os.sep) >= 3:
            dirnames[:] = []
    return None


def plan_prepare(lay: dict[str, str], state: dict[str, Any], adopt_revision: Any = None) -> dict[str, Any]:
    """Decide what ``prepare`` does. Returns a dict: ``mode`` (``revisions`` or ``flat``), ``rev_dir`` (where
    the wanted revision's files go), ``adopt`` (``{'from', 'to', 'revision'}`` or None), ``mkdir`` (paths to
    create), ``warnings``."""
    warnings: list[str] = []
    if state['kind'] == 'other':
        raise RevisionError('%s is %s, not a directory or a link into %s: move it away (nothing was changed)'
                            % (lay['host_dir'], 'a link to %s' % state['target'] if state['target'] else 'a file',
                               lay['revs_dir']))
    if state['kind'] == 'dir' and state['mount']:
        warnings.append('%s is a mount point (or another file system than its parent): it cannot be moved into %s, '
                        'so it is served in place as it is (no revision directories; a revision change rewrites it '
                        'in place, not atomically). Mount the parent instead to get atomic revision switches.'
                        % (lay['host_dir'], lay['revs_dir']))
        return dict(mode='flat', rev_dir=lay['host_dir'], adopt=None, mkdir=[], warnings=warnings)
    adopt = None
    existing = list(state['revisions'])
    if state['kind'] == 'dir':
        outside = _link_leading_outside(lay['host_dir'])
        if outside:
            raise RevisionError(
                'ds4_effective.model.host_dir=%s holds a symlink leading outside it: %s -> %s (a Hugging Face hub cache '
                'snapshot, whose files are links into ../../blobs/?). It is not adopted: renaming it into %s would break '
                'those links (and your hub cache), and the container, which mounts only host_dir, cannot follow links out '
                'of it. Fix: set model_cache_source=local and model_cache_local_dir=%s (the role copies it into the '
                'revision directory as regular files, rsync --copy-links), and set model.host_dir '
                '(ds4_site_overrides.model.host_dir) to a separate directory outside the hub cache. Nothing was changed.'
                % (lay['host_dir'], outside[0], outside[1], lay['revs_dir'], lay['host_dir']),
                link=outside[0], target=outside[1])
        foreign = _foreign_content(lay['host_dir'])
        if foreign:
            raise RevisionError(
                'ds4_effective.model.host_dir=%s %s. It is not adopted: the collection would rename it into %s, serve it as '
                'a revision and, with pruning on, remove it later with everything in it. Nothing was changed. Fix: set '
                'model.host_dir (ds4_site_overrides.model.host_dir) to a directory of its own (e.g. %s/DeepSeek-V4-Flash), '
                'or, to serve this copy, model_cache_source=local and model_cache_local_dir=%s (copied into the '
                'revision directory, left as it is)' % (lay['host_dir'], foreign, lay['revs_dir'], lay['host_dir'], lay['host_dir']),
                foreign=foreign)
        held = revision_key(adopt_revision) if adopt_revision not in (None, '') else lay['key']
        name = _free_name(lay['revs_dir'], held, existing)
        adopt = dict(frm=lay['host_dir'], to=os.path.join(lay['revs_dir'], name), revision=name)
        existing.append(name)
    mkdir: list[str] = []
    if not os.path.isdir(lay['revs_dir']):
        mkdir.append(lay['revs_dir'])
    if lay['key'] not in existing:
        mkdir.append(lay['rev_dir'])
    return dict(mode='revisions', rev_dir=lay['rev_dir'], adopt=adopt, mkdir=mkdir, warnings=warnings)


def prepare(lay: dict[str, str], adopt_revision: Any = None, check_mode: bool = False) -> dict[str, Any]:
    """Adopt a flat directory, create the wanted revision's directory. Returns a result dict."""
    state = inspect(lay)
    p = plan_prepare(lay, state, adopt_revision)
    changed = bool(p['adopt'] or p['mkdir'])
    result: dict[str, Any] = dict(mode=p['mode'], rev_dir=p['rev_dir'], revs_dir=lay['revs_dir'], key=lay['key'],
                                  current=state['current'], adopted=None, created=p['mkdir'], warnings=p['warnings'], changed=changed,
                                  previous=[r for r in state['revisions'] if r != lay['key']])
    if p['adopt']:
        result['adopted'] = dict(p['adopt'])
        result['previous'] = sorted(set(result['previous'] + [p['adopt']['revision']]) - set([lay['key']]))
    if check_mode or not changed:
        return result
    if not os.path.isdir(lay['revs_dir']):
        os.makedirs(lay['revs_dir'], 0o755)
    if p['adopt']:
        # The stable path keeps serving the same files: renamed (a running container's bind mount follows the
        # inode), then linked at once (a start in between would make Docker create an empty directory there).
        os.rename(p['adopt']['frm'], p['adopt']['to'])
        _link(lay, lay['name'] + REVS_SUFFIX + '/' + p['adopt']['revision'])
        result['current'] = p['adopt']['revision']
    if lay['key'] not in os.listdir(lay['revs_dir']):
        os.makedirs(lay['rev_dir'], 0o755)
    return result


def _link(lay: dict[str, str], target: str) -> None:
    """Point ``host_dir`` at ``target`` atomically: a temporary link renamed over it."""
    tmp = os.path.join(lay['parent'], '.%s.tmp-%d' % (lay['name'], os.getpid()))
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    try:
        os.rename(tmp, lay['host_dir'])
    except OSError:
        os.unlink(tmp)
        raise


def switch(lay: dict[str, str], check_mode: bool = False) -> dict[str, Any]:
    """Point ``host_dir`` at the wanted revision. Returns ``{changed, from, to, mode}``."""
    state = inspect(lay)
    if state['kind'] == 'dir':
        if state['mount']:
            return dict(changed=False, mode='flat', frm=None, to=None, current=None, previous=[])
        raise RevisionError('%s is still a flat directory: run prepare first (it is moved into %s)'
                            % (lay['host_dir'], lay['revs_dir']))
    if state['kind'] == 'other':
        raise RevisionError('%s is %s: refusing to replace it' % (lay['host_dir'], 'a link to %s' % state['target']
                                                                  if state['target'] else 'not a link'))
    if not os.path.isdir(lay['rev_dir']) and not check_mode:
        raise RevisionError('%s does not exist: fetch and verify the revision before switching' % lay['rev_dir'])
    previous = [r for r in state['revisions'] if r != lay['key']]
    if state['kind'] == 'link' and state['target'] == lay['link_target']:
        return dict(changed=False, mode='revisions', frm=lay['key'], to=lay['key'], current=lay['key'], previous=previous)
    result = dict(changed=True, mode='revisions', frm=state['current'], to=lay['key'], current=lay['key'],
                  previous=previous)
    if not check_mode:
        _link(lay, lay['link_target'])
    return result


def plan_prune(lay: dict[str, str], state: dict[str, Any], keep: Iterable[Any] | None = None) -> list[str]:
    """Revision directories to remove: all but the one ``host_dir`` points to and ``keep``."""
    if state['kind'] != 'link':
        raise RevisionError('%s is not a link into %s (it is %s): nothing is proven served, nothing is pruned'
                            % (lay['host_dir'], lay['revs_dir'], state['kind']))
    kept = set(revision_key(k) for k in (keep or ())) | set([state['current']])
    return [r for r in state['revisions'] if r not in kept]


def prune(lay: dict[str, str], keep: Iterable[Any] | None = None, check_mode: bool = False) -> dict[str, Any]:
    """Remove the revisions :func:`plan_prune` names. Returns ``{changed, removed, bytes_freed, current}``."""
    state = inspect(lay)
    names = plan_prune(lay, state, keep)
    sizes = dict((n, _tree_bytes(os.path.join(lay['revs_dir'], n))) for n in names)
    result: dict[str, Any] = dict(changed=bool(names), removed=names, bytes_freed=sum(sizes.values()), current=state['current'],
                                  kept=[r for r in state['revisions'] if r not in names])
    if not check_mode:
        for name in names:
            shutil.rmtree(os.path.join(lay['revs_dir'], name))
    return result
