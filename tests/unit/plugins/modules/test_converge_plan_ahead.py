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
    state = dict(calls=[], views=[], facts={}, differs=(), published={})
    monkeypatch.setattr(ActionBase, 'run', lambda self, tmp=None, task_vars=None: {})
    monkeypatch.setattr(action, 'load_extra_vars', lambda loader: {})
    monkeypatch.setattr(action.ActionModule, '_discover_interpreter', lambda self, task_vars: {})
    monkeypatch.setattr(action.ActionModule, '_direct_interpreter', lambda self, task_vars: '/usr/bin/python3')

    def view(self, role, task_vars, extra_vars, published):
        state['views'].append((role, sorted(published)))
        return {'role': role}

    def probed(probes):
        return dict((p['role'], {'current': p['role'] not in state['differs'], 'digest': 'd-%s' % p['role'],
                                 'reasons': ['inputs changed: x']}) for p in probes)

    def node(self, interpreter, args, task_vars):
        """converge_state.plan's answers: the records' published facts (state['published'] where set) and, with
        `expect` equal to them, the probes sent with it"""
        state['calls'].append(args)
        if args['phase'] == 'published':
            published = dict((role, state['published'].get(role, {'%s_published' % role: role})) for role in args['roles'])
            if args.get('expect') is not None and args['expect'] == published:
                return {'published': published, 'roles': probed(args['probe'])}
            return {'published': published}
        return {'roles': probed(args['roles'])}
    kept = state['kept'] = {}
    monkeypatch.setattr(action.template_cache, 'recalled_json', kept.get)
    monkeypatch.setattr(action.template_cache, 'keep_json', kept.__setitem__)
    monkeypatch.setattr(action.ActionModule, '_role_view', view)
    monkeypatch.setattr(action.ActionModule, '_node', node)
    monkeypatch.setattr(action.ActionModule, '_set', lambda self, result, facts, host_facts=None: state['facts'].update(facts))

    def run(args, task_vars, differs=(), published=None, memo=False):
        """memo: keep what the controller kept of earlier runs (else each run starts without)"""
        state.update(calls=[], views=[], facts={}, differs=differs, published=published or {})
        if not memo:
            kept.clear()
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


def test_a_plan_after_one_on_the_same_node_probes_in_one_call_when_the_records_publish_the_same(plan):
    """The controller keeps the records' published facts each plan found on a node; the next plan there templates the
    probes with them and sends them with its first call, which runs them when the records still publish exactly those:
    one node call, the same plan, the same views and facts as two calls give. Records that publish otherwise: the node
    answers them only, the probes are templated again with them and probed in a second call, and what is kept follows."""
    host = {'inventory_hostname': 'spark1'}
    two = plan({'roles': FRONT, 'ahead': AHEAD}, host)
    assert [c['phase'] for c in two[1]] == ['published', 'probe'] and 'expect' not in two[1][0]
    one = plan({'roles': FRONT, 'ahead': AHEAD}, host, memo=True)
    assert [c['phase'] for c in one[1]] == ['published'] and one[1][0]['expect'] == dict(
        (role, {'%s_published' % role: role}) for role in FRONT + FRONTS)
    assert [p['role'] for p in one[1][0]['probe']] == FRONT + FRONTS
    assert one[0] == two[0] and one[2] == two[2] and one[3]['msg'] == two[3]['msg']
    # another host: what this one kept is not its own
    other = plan({'roles': FRONT, 'ahead': AHEAD}, {'inventory_hostname': 'spark2'}, memo=True)
    assert [c['phase'] for c in other[1]] == ['published', 'probe']
    # the records publish otherwise now: templated twice (with what was kept, then with the records), two calls, the
    # plan as the records make it; kept from now on
    moved = {'vllm_service': {'vllm_service_published': 'moved'}}
    again = plan({'roles': FRONT, 'ahead': AHEAD}, host, published=moved, memo=True)
    assert [c['phase'] for c in again[1]] == ['published', 'probe'] and 'expect' in again[1][0]
    assert again[2][len(FRONT + FRONTS):] == [('host_hardening', []), ('vllm_service', ['host_hardening_published']),
                                              ('router', ['host_hardening_published', 'vllm_service_published']),
                                              ('api_proxy', ['host_hardening_published', 'router_published',
                                                             'vllm_service_published'])]
    assert again[0]['vllm_service_published'] == 'moved'
    last = plan({'roles': FRONT, 'ahead': AHEAD}, host, published=moved, memo=True)
    assert [c['phase'] for c in last[1]] == ['published'] and last[0] == again[0]
    # a role differs: the same plan from one call as from two
    differs = plan({'roles': FRONT, 'ahead': AHEAD}, host, differs=('vllm_service',), published=moved, memo=True)
    assert [c['phase'] for c in differs[1]] == ['published'] and differs[0]['__converge_plan']['current'] is False
    assert differs[0]['__fronts_ahead'] is None
