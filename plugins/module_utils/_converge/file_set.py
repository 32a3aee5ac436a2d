# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark.ds4.file_set on the node: write a set of files, each only where it differs.

The module (plugins/modules/file_set.py, which documents it) and its action's direct run (plugins/action/file_set.py:
this file's source through the connection to the node's Python, no module upload) both call ``write``. A deploy that
changes a launch flag writes the launch script, the deployment evidence, the pair guard's settings and the pending-
restart marker: a module run each cost every node about 0.17 CPU-s, most of it importing ansible.module_utils.basic; a
direct run about 0.05 (issue 47, docs/measurements.md).

Python standard library only.
"""

from __future__ import annotations

import grp
import os
import pwd
import shlex
import tempfile
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

# the direct run's runner (node_probe's: LC_ALL=C, no pager, as a module runs a command); the module passes its own
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.node_probe import run_command

Runner = Callable[[List[str]], Tuple[int, str, str]]
# The module's options (plugins/modules/file_set.py documents them), validated the same way by its action's direct run.
ARGUMENT_SPEC: Dict[str, Any] = dict(
    files=dict(type='list', elements='dict', default=[], options=dict(
        path=dict(type='path', required=True), content=dict(type='str', required=True),
        mode=dict(type='str', required=True), owner=dict(type='str', default='root'),
        group=dict(type='str', default='root'), validate=dict(type='str'), diff=dict(type='bool', default=True))),
    remove=dict(type='list', elements='path', default=[]),
    seen=dict(type='dict'),
)


def _id(value: str, table: Callable[[str], Any], kind: str) -> int:
    if value.isdigit():
        return int(value)
    try:
        return int(table(value)[2])
    except KeyError:
        raise ValueError('no %s named %s on this node' % (kind, value))


def _read(path: str) -> Optional[bytes]:
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def problem(item: Mapping[str, Any]) -> Optional[str]:
    """What is wrong with one entry of files (before anything is written), or None."""
    path = item['path']
    if not path.startswith('/'):
        return 'path must be absolute, got %s' % path
    try:
        mode = int(item['mode'], 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o7777:
        return '%s: mode must be octal (0644), got %s' % (path, item['mode'])
    if item.get('validate') is not None and '%s' not in item['validate']:
        return '%s: validate must contain %%s (the new content\'s path), got %s' % (path, item['validate'])
    return None


def write_one(item: Mapping[str, Any], run: Runner, check_mode: bool) -> Tuple[bool, Optional[Dict[str, str]]]:
    """(changed, diff) for one file; writes unless in check mode."""
    path, data = item['path'], item['content'].encode('utf-8', 'surrogateescape')
    mode = int(item['mode'], 8)
    uid, gid = _id(item['owner'], pwd.getpwnam, 'user'), _id(item['group'], grp.getgrnam, 'group')
    before = _read(path)
    content_differs = before != data
    if before is not None:
        st = os.stat(path)
        meta_differs = (st.st_mode & 0o7777, st.st_uid, st.st_gid) != (mode, uid, gid)
    else:
        meta_differs = True
    if not content_differs and not meta_differs:
        return False, None
    diff = None
    if content_differs:
        shown = item.get('diff', True)
        diff = {'before_header': path if before is not None else '%s (absent)' % path, 'after_header': path,
                'before': (before.decode('utf-8', 'surrogateescape') if before is not None else '') if shown
                else ('(content hidden: %d bytes)\n' % len(before) if before is not None else ''),
                'after': item['content'] if shown else '(content hidden: %d bytes)\n' % len(data)}
    if check_mode:
        return True, diff
    if not content_differs:
        os.chmod(path, mode)
        os.chown(path, uid, gid)
        return True, diff
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix='.%s.' % os.path.basename(path), dir=directory)
    tmp_left: Optional[str] = tmp
    try:
        with os.fdopen(fd, 'wb') as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fchown(handle.fileno(), uid, gid)
            os.fsync(handle.fileno())
        if item.get('validate') is not None:
            argv = [tmp if word == '%s' else word.replace('%s', tmp) for word in shlex.split(item['validate'])]
            rc, out, err = run(argv)
            if rc != 0:
                raise RuntimeError('%s: refused by its validate command (exit %d): %s'
                                   % (path, rc, (err.strip() or out.strip())[-2000:]))
        os.rename(tmp, path)
        tmp_left = None
    finally:
        if tmp_left is not None and os.path.exists(tmp_left):
            os.unlink(tmp_left)
    return True, diff


def remove_one(path: str, check_mode: bool) -> Tuple[bool, Optional[Dict[str, str]]]:
    """(changed, diff) for one path of remove: a file or link removed where it exists; a directory is refused."""
    if not os.path.lexists(path):
        return False, None
    if os.path.isdir(path) and not os.path.islink(path):
        raise ValueError('%s is a directory, not a file to remove' % path)
    size = os.lstat(path).st_size
    diff = {'before_header': path, 'after_header': '%s (absent)' % path,
            'before': '(removed: %d bytes)\n' % size, 'after': ''}
    if not check_mode:
        os.unlink(path)
    return True, diff


def write(params: Mapping[str, Any], run: Runner = run_command, check_mode: bool = False) -> Dict[str, Any]:
    """The module's result: changed, changed_paths and diff (a list, one per changed file whose content differs and
    per path removed; the caller keeps it only in diff mode); failed and msg when an entry is refused (nothing written)
    or a write fails (the files before it stay written, named). The paths of `remove` go after every file is written."""
    problems = [p for p in (problem(item) for item in params.get('files') or []) if p]
    problems.extend('remove: path must be absolute, got %s' % path for path in params.get('remove') or []
                    if not path.startswith('/'))
    if not params.get('files') and not params.get('remove'):
        problems.append('nothing to write or remove (files and remove are both empty)')
    if problems:
        return {'failed': True, 'changed': False, 'changed_paths': [],
                'msg': 'file_set: %s. Nothing was written.' % '; '.join(problems)}
    changed_paths: List[str] = []
    diffs: List[Dict[str, str]] = []
    steps: List[Tuple[str, Any]] = [('write', item) for item in params.get('files') or []]
    steps.extend(('remove', path) for path in params.get('remove') or [])
    for kind, item in steps:
        try:
            changed, diff = write_one(item, run, check_mode) if kind == 'write' else remove_one(item, check_mode)
        except (OSError, ValueError, RuntimeError) as exc:
            return {'failed': True, 'changed': bool(changed_paths), 'changed_paths': changed_paths,
                    'msg': 'file_set: %s. Written before it: %s.' % (exc, ', '.join(changed_paths) or 'none')}
        if changed:
            changed_paths.append(item['path'] if kind == 'write' else item)
            if diff:
                diffs.append(diff)
    return {'changed': bool(changed_paths), 'changed_paths': changed_paths, 'diff': diffs}
