# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action for dgxspark.ds4.file_set: no node call where a read-only look earlier in this run already found every file
exactly as it would be written.

The option ``seen`` is what dgxspark.ds4.converge_state's probe found at these paths at the start of the role
(``seen.files``: ``sha1:<hex>:<mode>:<uid>:<gid>``, or ``absent``). Where each file's content (its SHA-1), mode, owner
and group equal that, the module would change nothing: the task ends unchanged on the controller, without a module run
on the node (~0.35 s of a deploy per task, docs/measurements.md). Anything else (no ``seen``, a path it does not hold, a
content, mode or owner that differs, an owner given by a name other than root) runs the module, which reads the files
itself and writes what differs. A file changed on the node between the probe and this task (another actor, within the
same role run) is then not repaired by this run; the next run's probe sees it and runs the role.

Where the module would run: directly in the node's Python instead (module_utils/_converge/file_set.py ``write``, the
function the module calls, through the connection as converge_state's direct runs: no module build or upload) where
converge_state's ``_direct_interpreter`` allows it, the task is not delegated and every path is absolute as written
(the module's argument handling expands ``~``); else the module.
"""


from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.dgxspark.ds4.plugins.action import converge_state as direct_action
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import converge_state as cs
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import file_set

_MODULE = 'dgxspark.ds4.file_set'


def _numeric_id(value):
    """root or a number -> the id; another name -> None (its id is the node's to say, not the controller's)."""
    text = str(value)
    if text == 'root':
        return 0
    return int(text) if text.isdigit() else None


def as_seen(files, seen):
    """Whether every file of file_set's `files` is exactly as `seen` (path -> converge_state's observation) says: the
    observation converge_state.observe_file would give the file once written (content, mode, owner and group). An empty
    `files` is never 'as seen' (the module refuses it)."""
    if not files or not isinstance(seen, dict):
        return False
    for item in files:
        content = item.get('content')
        try:
            mode = int(str(item.get('mode')), 8)
        except ValueError:
            return False
        uid, gid = _numeric_id(item.get('owner', 'root')), _numeric_id(item.get('group', 'root'))
        if not isinstance(content, str) or uid is None or gid is None:
            return False
        wanted = cs.file_observation(to_bytes(content, errors='surrogate_or_strict'), mode, uid, gid)
        if seen.get(item.get('path')) != wanted:
            return False
    return True


class ActionModule(direct_action.ActionModule):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(direct_action.ActionModule, self).run(tmp, task_vars)  # ActionBase.run: the task's own setup
        del tmp
        args = dict(self._task.args)
        seen = args.pop('seen', None)
        if seen is not None and not args.get('remove') and as_seen(args.get('files'), seen):
            result.update(changed=False, changed_paths=[],
                          msg='every file as the read-only look of this run found it (seen): no node call')
            return result
        files, remove = args.get('files') or [], args.get('remove') or []
        absolute = (isinstance(files, list) and isinstance(remove, list)
                    and all(isinstance(item, dict) and str(item.get('path', '')).startswith('/') for item in files)
                    and all(str(path).startswith('/') for path in remove))
        # seen is the action's alone (the module does not read it): neither run gets it
        res, dummy = self._direct_or_module(task_vars, _MODULE, file_set.ARGUMENT_SPEC, 'write', module_args=args,
                                            direct_ok=absolute, drop=('seen',))
        diff = res.pop('diff', None)
        if diff and self._task.diff:
            res['diff'] = diff
        result.update(res)
        return result
