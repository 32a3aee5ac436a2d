# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action for dgxspark.ds4.service_preflight: the module's one read of the node (plugins/module_utils/_service/
service_preflight.py, ``preflight``) directly in the node's Python where the connection pipelines and the Python is
known, as converge_state's direct runs (no module build or upload), else through the module. vllm_service's preflight
runs it on every node of a pair whose role runs (a launch flag, a recipe, an image changed): a module run costs a
node about 0.17 CPU-s, most of it importing ansible.module_utils.basic, a direct run about 0.05."""


from ansible_collections.dgxspark.ds4.plugins.action import converge_state as direct_action
from ansible_collections.dgxspark.ds4.plugins.module_utils._service import service_preflight

_MODULE = 'dgxspark.ds4.service_preflight'


class ActionModule(direct_action.ActionModule):
    """service_preflight's run: direct where converge_state's _direct_or_module allows, else the module."""

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(direct_action.ActionModule, self).run(tmp, task_vars)  # ActionBase.run: the task's own setup
        del tmp
        res, dummy = self._direct_or_module(task_vars, _MODULE, service_preflight.ARGUMENT_SPEC, 'preflight',
                                            required_by=service_preflight.REQUIRED_BY)
        result.update(res)
        return result
