# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark.ds4.converge_plan's plan made ahead (playbooks/tasks/deploy.yml): the first plan also plans the router and
the API proxy in its two node calls when every role in front is as recorded, templated after those roles' published
facts; the plan after readiness takes it without a node call only when every host of the pair kept one for the same
roles, and sets what its own node calls would have set. The node's answers are faked here (the node side is
converge_state.plan / probe, tested in test_converge_state.py); on the converged pairs, molecule's no-op and changed-input
tests run it for real."""


import pytest

from ansible.plugins.action import ActionBase

from ansible_collections.dgxspark.ds4.plugins.action import converge_plan as action
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge.plan_spec import ARGUMENT_SPEC
from .module_harness import bare_action

FRONT = ['host_hardening', 'vllm_service']
FRONTS = ['router', 'api_proxy']


@pytest.fixture
def plan(monkeypatch):
    """run(args, task_vars, differs=()) -> (the facts set, the node calls, the views templated); differs: the roles the
    fake node finds not as recorded."""
    plugin = bare_action(action.ActionModule)
    plugin._loader = None
    state = dict(calls=[], views=[], facts={}, differs=())
    monkeypatch.setattr(ActionBase, 'run', lambda self, tmp=None, task_vars=None: {})
    monkeypatch.setattr(action, 'load_extra_vars', lambda loader: {})
    monkeypatch.setattr(action.ActionModule, '_discover_interpreter', lambda self, task_vars: {})
    monkeypatch.setattr(action.ActionModule, '_direct_interpreter', lambda self, task_vars: '/usr/bin/python3')

    def view(self, role, task_vars, extra_vars, published):
        state['views'].append((role, sorted(published)))
        return {'role': role}

    def node(self, interpreter, args, task_vars):
        state['calls'].append(args)
        if args['phase'] == 'published':
            return {'published': dict((role, {'%s_published' % role: role}) for role in args['roles'])}
        return {'roles': dict((p['role'], {'current': p['role'] not in state['differs'], 'digest': 'd-%s' % p['role'],
                                           'reasons': ['inputs changed: x']}) for p in args['roles'])}
    monkeypatch.setattr(action.ActionModule, '_role_view', view)
    monkeypatch.setattr(action.ActionModule, '_node', node)
    monkeypatch.setattr(action.ActionModule, '_set', lambda self, result, facts, host_facts=None: state['facts'].update(facts))

    def run(args, task_vars, differs=()):
        state.update(calls=[], views=[], facts={}, differs=differs)
        full = dict((name, spec.get('default')) for name, spec in ARGUMENT_SPEC.items())
        full.update(args)
        monkeypatch.setattr(action.ActionModule, 'validate_argument_spec', lambda self, argument_spec: (None, full))
        result = plugin.run(task_vars=dict(task_vars))
        return state['facts'], state['calls'], state['views'], result
    return run


AHEAD = {'roles': FRONTS, 'fact': '__fronts_ahead'}


def test_the_first_plan_plans_the_fronts_ahead_in_its_two_node_calls_when_every_role_in_front_is_as_recorded(plan):
    facts, calls, views, result = plan({'roles': FRONT, 'ahead': AHEAD}, {'inventory_hostname': 'spark1'})
    assert [c['phase'] for c in calls] == ['published', 'probe']
    assert calls[0]['roles'] == FRONT + FRONTS and [p['role'] for p in calls[1]['roles']] == FRONT + FRONTS
    # each templated after the roles before it published their records, the fronts after every role in front
    assert views == [('host_hardening', []), ('vllm_service', ['host_hardening_published']),
                     ('router', ['host_hardening_published', 'vllm_service_published']),
                     ('api_proxy', ['host_hardening_published', 'router_published', 'vllm_service_published'])]
    assert facts['__converge_plan']['current'] is True and result['current'] is True
    kept = facts['__fronts_ahead']
    assert kept['plan'] == {'current': True, 'order': FRONTS, 'prefix': 2, 'skippable': FRONTS,
                            'digests': {'router': 'd-router', 'api_proxy': 'd-api_proxy'}}
    assert kept['published'] == {'router_published': 'router', 'api_proxy_published': 'api_proxy'}
    # the fronts' facts are not set yet: the plan after readiness sets them
    assert 'router_published' not in facts and facts['__converge_needed'] == {'host_hardening': False, 'vllm_service': False}
    assert facts['__converge_ran'] is False


@pytest.mark.parametrize('differs', [('vllm_service',), ('host_hardening',)])
def test_nothing_is_kept_ahead_when_a_role_in_front_differs(plan, differs):
    facts, dummy, dummy, result = plan({'roles': FRONT, 'ahead': AHEAD}, {'inventory_hostname': 'spark1'}, differs)
    assert facts['__fronts_ahead'] is None and result['current'] is False
    assert facts['__converge_plan']['skippable'] == ([] if differs == ('host_hardening',) else ['host_hardening'])


def test_nothing_is_kept_ahead_when_nothing_is_planned(plan):
    facts, calls, dummy, result = plan({'roles': FRONT, 'ahead': AHEAD, 'full': True}, {'inventory_hostname': 'spark1'})
    assert calls == [] and facts['__fronts_ahead'] is None and 'ds4_converge_full' in result['msg']


def _kept(plan, host):
    facts, dummy, dummy, dummy = plan({'roles': FRONT, 'ahead': AHEAD}, {'inventory_hostname': host},
                                      ('api_proxy',) if host == 'spark2' else ())
    return facts['__fronts_ahead']


def test_the_later_plan_takes_what_every_host_of_the_pair_kept_without_a_node_call(plan):
    kept = dict((host, _kept(plan, host)) for host in ('spark1', 'spark2'))
    planned = {'roles': FRONTS, 'fact': '__converge_plan_fronts',
               'planned': {'fact': '__fronts_ahead', 'hosts': ['spark1', 'spark2']}}
    hostvars = dict((host, {'__fronts_ahead': kept[host]}) for host in kept)
    needed = {'host_hardening': False, 'vllm_service': False}
    facts, calls, views, result = plan(planned, {'inventory_hostname': 'spark1', 'hostvars': hostvars,
                                                 '__converge_needed': needed})
    assert calls == [] and views == []
    assert facts['__converge_plan_fronts'] == kept['spark1']['plan']
    assert facts['router_published'] == 'router' and facts['api_proxy_published'] == 'api_proxy'
    assert facts['__converge_needed'] == dict(needed, router=False, api_proxy=False) and facts['__converge_ran'] is False
    assert 'planned before readiness' in result['msg']
    # spark2 kept its own: the router as recorded, the proxy not (it runs: not in __converge_needed as false)
    facts, calls, dummy, result = plan(planned, {'inventory_hostname': 'spark2', 'hostvars': hostvars,
                                                 '__converge_needed': needed})
    assert calls == [] and facts['__converge_plan_fronts']['skippable'] == ['router'] and result['current'] is False
    assert facts['__converge_needed'] == dict(needed, router=False) and result['differ'] == {'api_proxy': ['inputs changed: x']}


@pytest.mark.parametrize('hostvars', [
    {'spark1': {}, 'spark2': {}},                                          # no plan made ahead (not planned)
    {'spark1': {'__fronts_ahead': 'KEPT'}, 'spark2': {'__fronts_ahead': None}},  # voided on spark2: something ran there
    {'spark1': {'__fronts_ahead': 'KEPT'}},                                # spark2 not in hostvars
])
def test_the_later_plan_probes_itself_unless_every_host_of_the_pair_kept_one(plan, hostvars):
    kept = _kept(plan, 'spark1')
    hostvars = dict((h, dict((k, kept if v == 'KEPT' else v) for k, v in hv.items())) for h, hv in hostvars.items())
    facts, calls, dummy, dummy = plan({'roles': FRONTS, 'fact': '__converge_plan_fronts',
                                       'planned': {'fact': '__fronts_ahead', 'hosts': ['spark1', 'spark2']}},
                                      {'inventory_hostname': 'spark1', 'hostvars': hostvars})
    assert [c['phase'] for c in calls] == ['published', 'probe'] and facts['__converge_plan_fronts']['current'] is True


def test_the_later_plan_probes_itself_for_other_roles_than_were_planned_ahead(plan):
    kept = _kept(plan, 'spark1')
    facts, calls, dummy, dummy = plan({'roles': ['api_proxy'], 'fact': '__converge_plan_fronts',
                                       'planned': {'fact': '__fronts_ahead', 'hosts': ['spark1']}},
                                      {'inventory_hostname': 'spark1', 'hostvars': {'spark1': {'__fronts_ahead': kept}}})
    assert len(calls) == 2 and facts['__converge_plan_fronts']['order'] == ['api_proxy']
