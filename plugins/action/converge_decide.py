# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark.ds4.converge_decide: whether a deploy role runs, its facts and the line that says why, in one task.

Controller only. It does what three tasks of the internal role dgxspark.ds4._converge did (a set_fact of the probe,
a set_fact of the decision, a set_fact loop of the published facts) plus the debug line, so a no-op deploy forks
three fewer workers per role and node (module_utils/_converge/converge_state.decide holds the rule). The facts are set as
set_fact sets them (ephemeral host facts, the same precedence); the line is printed as ansible.builtin.debug prints
its msg.
"""


from ansible.plugins.action import ActionBase

from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import converge_state as cs

try:  # ansible-core 2.21: set_fact's own mechanism (non-persistent facts), ActionBase.register_host_variables and its
    from ansible.plugins.action import VariableLayer  # public VariableLayer
except ImportError:  # pragma: no cover - ansible-core 2.20 (see the module's notes)
    VariableLayer = None

_ARG_SPEC = dict(
    role=dict(type='str', required=True),
    probe=dict(type='dict', required=True),
    pair_current=dict(type='list', elements='bool', required=True),
    full=dict(type='bool', default=False),
    roles=dict(type='list', elements='str', default=[]),
    needed=dict(type='dict', default={}),
)


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        dummy, args = self.validate_argument_spec(argument_spec=_ARG_SPEC)
        needed, facts, line = cs.decide(args['role'], args['probe'], args['pair_current'], full=args['full'],
                                        roles=args['roles'], needed=args['needed'])
        if VariableLayer is not None:
            self.register_host_variables({}, VariableLayer.CACHEABLE_FACT)  # no legacy ansible_facts registration
            self.register_host_variables(facts, VariableLayer.EPHEMERAL_FACT)
        else:  # pragma: no cover
            result['ansible_facts'] = facts
        result.update(changed=False, runs=needed[args['role']], msg=line, _ansible_verbose_always=True)
        return result
