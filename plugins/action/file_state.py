# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action for dgxspark.ds4.file_state: the module's one look at a set of paths, without a module upload where it can.

The look is module_utils/_converge/converge_state.py's ``files`` (the function the module calls): where converge_state's
action runs its probes directly (``_direct_interpreter`` decides, ``_probe_directly`` sends the source and the
arguments through the connection to the node's Python), it runs there directly too; otherwise, and for a path that is
not absolute as written (the module's own argument handling expands ``~``), through the module. A no-op
deploy looks at every host's TLS material first (roles/api_proxy/tasks/tls_look.yml): on the nodes a module run costs
about 0.17 CPU-s (importing ansible.module_utils.basic from the module's zip), a direct run about 0.05.
"""


from ansible_collections.dgxspark.ds4.plugins.action import converge_state as probe_action

_ARG_SPEC = dict(paths=dict(type='list', elements='str', required=True))


class ActionModule(probe_action.ActionModule):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(probe_action.ActionModule, self).run(tmp, task_vars)  # ActionBase.run: the task's own setup
        dummy, args = self.validate_argument_spec(argument_spec=_ARG_SPEC)
        result.update(self._look_files(args['paths'], task_vars))
        return result
