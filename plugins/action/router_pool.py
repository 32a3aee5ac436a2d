# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action for dgxspark.ds4.router_pool: the module's run (plugins/module_utils/_node/router_pool_spec.py, ``pool``)
directly in the node's Python where the connection pipelines and the Python is known, as converge_state's direct runs
(no module build or upload; the task's environment, e.g. SSL_CERT_FILE, goes with it as with a module), else through
the module. The deploy's verify runs it once per deploy on the router hosts: a module run there took 0.26-0.31 s of a
no-op site.yml (docs/measurements.md)."""


from ansible.module_utils.common.parameters import remove_values

from ansible_collections.dgxspark.ds4.plugins.action import converge_state as direct_action
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import router_pool_spec

_MODULE = 'dgxspark.ds4.router_pool'


class ActionModule(direct_action.ActionModule):
    """router_pool's run: direct where converge_state's _direct_or_module allows, else the module."""

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(direct_action.ActionModule, self).run(tmp, task_vars)  # ActionBase.run: the task's own setup
        del tmp
        # delegated (the drains, status.yml): the module, whose run finds the delegate's Python itself
        res, args = self._direct_or_module(task_vars, _MODULE, router_pool_spec.ARGUMENT_SPEC, 'pool')
        if args is None:
            result.update(res)
            return result
        # as AnsibleModule does for its no_log options: a key's value never shows in the result (an error text included)
        secrets = set(str(args[name]) for name, spec in router_pool_spec.ARGUMENT_SPEC.items()
                      if spec.get('no_log') and args.get(name))
        res = remove_values(res, secrets) if secrets else res
        if not res.get('failed') and self._task.diff:
            res['diff'] = router_pool_spec.diff(args['router_url'], res['workers_before'], res['workers_after'])
        result.update(res)
        return result
