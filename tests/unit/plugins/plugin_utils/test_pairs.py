# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""pairs: several TP=2 pairs in one inventory. Today's one-pair inventory is valid without pair groups;
spark_pair<N> child groups give the pair list router_config takes; every problem is refused at once, naming
the hosts and the fix."""


import copy
import os

import yaml

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import pairs as pm
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import router_config

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
PROFILE = {'master_port': 29501, 'api': {'host': '127.0.0.1', 'port': 8000},
           'serve_args': {'served-model-name': 'deepseek-v4-flash'}}


def _host(n, rank, subnet=100, profile='balanced', **extra):
    hv = {'ds4_node_rank': rank, 'ds4_fabric_ip': '192.168.%d.%d' % (subnet, n), 'ds4_fabric_prefix': 24,
          'ansible_host': '192.0.2.%d' % n, 'ds4_profile': profile, 'ds4_profile_config': copy.deepcopy(PROFILE)}
    hv.update(extra)
    return hv


def _inventory(npairs=2):
    groups, hostvars = {'spark': [], 'all': []}, {}
    for p in range(1, npairs + 1):
        head, worker = 'spark%d' % (2 * p - 1), 'spark%d' % (2 * p)
        groups['spark_pair%d' % p] = [head, worker]
        groups['spark'] += [head, worker]
        hostvars[head] = _host(2 * p - 1, 0, subnet=100 + p)
        hostvars[worker] = _host(2 * p, 1, subnet=100 + p)
    return groups, hostvars


def _errors(groups, hostvars):
    pairs, errors = pm.validate_pairs(groups, hostvars)
    assert errors and pairs == []
    return errors


def test_todays_inventory_is_one_pair_without_router():
    groups = {'spark': ['spark1', 'spark2'], 'all': ['spark1', 'spark2']}
    hostvars = {'spark1': _host(10, 0), 'spark2': _host(11, 1)}
    pairs, errors = pm.validate_pairs(groups, hostvars)
    assert errors == []
    assert pairs == [{'name': 'spark', 'index': 0, 'head': 'spark1', 'worker': 'spark2', 'hosts': ['spark1', 'spark2'],
                      'api_host': '192.0.2.10', 'api_port': 8000, 'served_model': 'deepseek-v4-flash',
                      'profile': 'balanced', 'master_port': 29501, 'fabric_network': '192.168.100.0/24'}]
    assert not pm.router_needed(pairs)


def test_the_sample_site_inventory_is_one_pair():
    with open(os.path.join(REPO, 'inventories', 'sample-site', 'hosts.yml')) as handle:
        inv = yaml.safe_load(handle)
    hosts = sorted(inv['spark']['hosts'])
    hostvars = {}
    for h in hosts:
        with open(os.path.join(REPO, 'inventories', 'sample-site', 'host_vars', h + '.yml')) as handle:
            hostvars[h] = dict(yaml.safe_load(handle), ansible_host=inv['spark']['hosts'][h]['ansible_host'],
                               ds4_profile='balanced', ds4_profile_config=PROFILE)
    pairs, errors = pm.validate_pairs({'spark': hosts}, hostvars)
    assert errors == [] and [p['name'] for p in pairs] == ['spark']


def test_four_sparks_two_pairs_feed_the_router():
    groups, hostvars = _inventory(2)
    pairs, errors = pm.validate_pairs(groups, hostvars)
    assert errors == []
    assert [(p['name'], p['head'], p['worker'], p['api_host'], p['fabric_network']) for p in pairs] == [
        ('spark_pair1', 'spark1', 'spark2', '192.0.2.1', '192.168.101.0/24'),
        ('spark_pair2', 'spark3', 'spark4', '192.0.2.3', '192.168.102.0/24')]
    assert pm.router_needed(pairs)
    plan = router_config.plan(pairs, {})
    assert plan['errors'] == [] and plan['worker_urls'] == ['http://192.0.2.1:8000', 'http://192.0.2.3:8000']


def test_named_pairs_and_site_override_of_the_port():
    groups, hostvars = _inventory(2)
    groups['spark_pair_east'] = groups.pop('spark_pair1')
    hostvars['spark3']['ds4_site_overrides'] = {'api': {'port': 8100}}
    pairs, errors = pm.validate_pairs(groups, hostvars)
    assert errors == []
    assert [(p['name'], p['api_port']) for p in pairs] == [('spark_pair2', 8100), ('spark_pair_east', 8000)]


def test_pair_without_one_head_and_one_worker():
    groups, hostvars = _inventory(2)
    hostvars['spark4']['ds4_node_rank'] = 0
    errors = _errors(groups, hostvars)
    assert any(e.startswith('spark_pair2: spark3 rank 0, spark4 rank 0; a pair is exactly one head') and
               'set ds4_node_rank 0 on one host of spark_pair2 and 1 on the other' in e for e in errors), errors
    groups, hostvars = _inventory(2)
    groups['spark_pair2'].append('spark5')
    groups['spark'].append('spark5')
    hostvars['spark5'] = _host(5, 1, subnet=102)
    errors = _errors(groups, hostvars)
    assert any('spark_pair2: spark3 rank 0, spark4 rank 1, spark5 rank 1' in e and 'put two Sparks in spark_pair2' in e
               for e in errors), errors


def test_host_in_two_pairs_and_host_in_no_pair():
    groups, hostvars = _inventory(2)
    groups['spark_pair2'] = ['spark2', 'spark4']
    errors = _errors(groups, hostvars)
    assert any(e.startswith('spark2 is in spark_pair1 and spark_pair2; a Spark belongs to one pair') for e in errors), errors
    assert any(e.startswith('spark3 is in spark but in no pair group') for e in errors), errors
    # the shared host is not reported a second time as a port clash
    assert not any('used by pairs' in e for e in errors), errors


def test_pair_host_outside_spark():
    groups, hostvars = _inventory(2)
    groups['spark'].remove('spark4')
    errors = _errors(groups, hostvars)
    assert any(e.startswith('spark4 (in spark_pair2) is not in group spark') for e in errors), errors


def test_fabric_addresses_of_one_pair_in_two_subnets():
    groups, hostvars = _inventory(2)
    hostvars['spark2']['ds4_fabric_ip'] = '192.168.200.2'
    errors = _errors(groups, hostvars)
    assert any(e.startswith('spark_pair1: fabric addresses in two subnets (spark1 192.168.101.1/24, spark2 '
                            '192.168.200.2/24)') for e in errors), errors
    hostvars['spark2']['ds4_fabric_ip'] = None
    errors = _errors(groups, hostvars)
    assert any('spark2 has no valid fabric address' in e for e in errors), errors


def test_master_port_clash_between_pairs_sharing_a_machine():
    groups, hostvars = _inventory(2)
    hostvars['spark3']['ansible_host'] = hostvars['spark1']['ansible_host']
    hostvars['spark3']['ds4_site_overrides'] = {'api': {'port': 8100}}
    errors = _errors(groups, hostvars)
    assert any(e.startswith('192.0.2.1: master port 29501 used by pairs spark_pair1 and spark_pair2 on the same '
                            'machine (spark1, spark3)') and 'ds4_site_overrides.master_port' in e for e in errors), errors
    assert not any('API port' in e for e in errors), errors
    hostvars['spark3']['ds4_site_overrides'] = {'master_port': 29600}
    errors = _errors(groups, hostvars)
    assert any('API port 8000 used by pairs spark_pair1 and spark_pair2' in e for e in errors), errors
    hostvars['spark3']['ds4_site_overrides'] = {'master_port': 29600, 'api': {'port': 8100}}
    assert pm.validate_pairs(groups, hostvars)[1] == []


def test_replicas_of_one_model_running_different_profiles():
    groups, hostvars = _inventory(2)
    for h in ('spark3', 'spark4'):
        hostvars[h]['ds4_profile'] = 'latency'
    errors = _errors(groups, hostvars)
    assert any(e.startswith('replicas of deepseek-v4-flash run different profiles (spark_pair1 balanced, '
                            'spark_pair2 latency)') for e in errors), errors
    # a different served model on the other pair is another model, not a replica
    hostvars['spark3']['ds4_site_overrides'] = {'serve_args': {'served-model-name': 'ds4-latency'}}
    hostvars['spark4']['ds4_site_overrides'] = {'serve_args': {'served-model-name': 'ds4-latency'}}
    pairs, errors = pm.validate_pairs(groups, hostvars)
    assert errors == [] and [p['served_model'] for p in pairs] == ['deepseek-v4-flash', 'ds4-latency']
    # ...which one router refuses to front
    assert any('served models' in e for e in router_config.check_pairs(pairs))


def test_empty_spark_and_all_errors_at_once():
    assert pm.validate_pairs({}, {}) == ([], ['group spark: no host. Fix: list the Sparks under spark (one pair: spark1, spark2)'])
    groups, hostvars = _inventory(3)
    hostvars['spark2']['ds4_node_rank'] = 0
    hostvars['spark6']['ds4_fabric_ip'] = '10.0.0.6'
    errors = _errors(groups, hostvars)
    assert len([e for e in errors if e.startswith('spark_pair')]) == 2


def test_router_plan_defaults_to_the_first_head_and_its_address():
    groups, hostvars = _inventory(2)
    pairs, errors = pm.validate_pairs(groups, hostvars)
    assert errors == []
    plan, errs = pm.router_plan(pairs, hostvars)
    assert errs == []
    assert plan == {'enabled': True, 'host': 'spark1', 'hosts': ['spark1'], 'address': '192.0.2.1',
                    'addresses': ['192.0.2.1'], 'vip': None, 'vrrp_hosts': [], 'port': pm.DEFAULT_ROUTER_PORT,
                    'endpoint': 'http://192.0.2.1:%d' % pm.DEFAULT_ROUTER_PORT,
                    'workers': ['http://192.0.2.1:8000', 'http://192.0.2.3:8000']}
    assert [p['index'] for p in pairs] == [0, 1]
    assert pm.pair_of(pairs, 'spark4')['name'] == 'spark_pair2'


def test_router_plan_one_pair_only_when_asked():
    groups = {'spark': ['spark1', 'spark2']}
    hostvars = {'spark1': _host(10, 0), 'spark2': _host(11, 1)}
    pairs, dummy = pm.validate_pairs(groups, hostvars)
    assert pm.router_plan(pairs, hostvars)[0]['enabled'] is False
    assert pm.router_plan(pairs, hostvars, enabled='auto')[0]['enabled'] is False
    assert pm.router_plan(pairs, hostvars, enabled=True)[0]['enabled'] is True


def test_router_plan_refusals_name_the_variable_and_the_fix():
    groups, hostvars = _inventory(2)
    pairs, dummy = pm.validate_pairs(groups, hostvars)
    errs = pm.router_plan(pairs, hostvars, enabled='yes')[1]
    assert errs and errs[0].startswith("ds4_router_enabled = 'yes'") and 'Fix' in errs[0]
    errs = pm.router_plan(pairs, hostvars, host='spark9')[1]
    assert errs and "ds4_router_host: 'spark9' is not a Spark" in errs[0]
    named = dict(hostvars, spark1=dict(hostvars['spark1'], ansible_host='spark1.lab'))
    errs = pm.router_plan(pairs, named)[1]
    assert errs and 'ds4_router_address' in errs[0] and "'spark1.lab'" in errs[0] and 'host_vars/spark1.yml' in errs[0]
    named['spark1']['ds4_router_address'] = '10.0.0.5'
    plan, errs = pm.router_plan(pairs, named)
    assert errs == [] and plan['addresses'] == ['10.0.0.5']
    errs = pm.router_plan(pairs, hostvars, port=8000)[1]
    assert errs and 'ds4_router_port = 8000 is already used on spark1' in errs[0]


def test_more_than_two_sparks_without_pair_groups_are_refused_with_the_shape_to_use():
    groups = {'spark': ['spark1', 'spark2', 'spark3']}
    hostvars = {'spark1': _host(10, 0), 'spark2': _host(11, 1), 'spark3': _host(12, 0)}
    errors = _errors(groups, hostvars)
    assert 'group spark holds 3 hosts' in errors[0] and 'spark_pair<N>' in errors[0]


def test_a_shipped_recipe_chosen_by_name_gives_the_pairs_served_name_and_port():
    """Recipes are collection data: a host with only ds4_profile (no ds4_profile_config in its vars, as every shipped
    inventory now) gets its served name and API port from the recipe the config role resolves (the router's pair
    list needs both), and ds4_model's checkpoint changes the served name the same way."""
    groups, hostvars = _inventory()
    for hv in hostvars.values():
        del hv['ds4_profile_config']
    for name in ('spark3', 'spark4'):
        hostvars[name]['ds4_profile'] = 'dspark-c16'
    pairs, errors = pm.validate_pairs(groups, hostvars)
    assert errors == []
    expected = [('deepseek-v4-flash', 8000), ('deepseek-v4-flash-dspark', 8888)]
    assert [(p['served_model'], p['api_port']) for p in pairs] == expected
    for name in ('spark1', 'spark2'):
        hostvars[name]['ds4_model'] = 'deepseek-v4-flash-0731'
        hostvars[name]['ds4_profile'] = 'upstream-0731-dspark'
    pairs, errors = pm.validate_pairs(groups, hostvars)
    assert errors == [] and pairs[0]['served_model'] == 'deepseek-v4-flash-0731', (pairs, errors)


def _vip_inventory(npairs=2, **router_address):
    groups, hostvars = _inventory(npairs)
    for host, addr in router_address.items():
        hostvars[host]['ds4_router_address'] = addr
    return pm.validate_pairs(groups, hostvars)[0], hostvars


def test_a_vip_puts_a_router_on_the_heads_of_the_first_two_pairs():
    pairs, hostvars = _vip_inventory(3)
    plan, errs = pm.router_plan(pairs, hostvars, vrrp_auth_pass='s3cret', vip='192.0.2.100/24')
    assert errs == []
    assert plan['hosts'] == ['spark1', 'spark3'] and plan['host'] == 'spark1'
    assert plan['addresses'] == ['192.0.2.1', '192.0.2.3'] and plan['address'] == '192.0.2.1'
    assert plan['vip'] == '192.0.2.100/24'
    assert plan['vrrp_hosts'] == [{'host': 'spark1', 'address': '192.0.2.1'}, {'host': 'spark3', 'address': '192.0.2.3'}]
    assert plan['endpoint'] == 'http://192.0.2.100:%d' % pm.DEFAULT_ROUTER_PORT
    # listed by hand: any two Sparks, in that order (the first one's VRRP priority highest)
    plan, errs = pm.router_plan(pairs, hostvars, vrrp_auth_pass='s3cret', vip='192.0.2.100/24', hosts=['spark5', 'spark1'])
    assert errs == [] and plan['hosts'] == ['spark5', 'spark1'] and plan['addresses'] == ['192.0.2.5', '192.0.2.1']


def test_without_a_vip_one_router_as_before():
    pairs, hostvars = _vip_inventory(2)
    plan, errs = pm.router_plan(pairs, hostvars, host='spark3')
    assert errs == [] and plan['hosts'] == ['spark3'] and plan['vip'] is None
    errs = pm.router_plan(pairs, hostvars, hosts=['spark1', 'spark3'])[1]
    assert len(errs) == 1 and errs[0].startswith("ds4_router_hosts = ['spark1', 'spark3']: several routers")
    assert 'Fix: set ds4_router_vip' in errs[0]


def test_vip_refusals_name_the_variable_the_value_and_the_fix():
    pairs, hostvars = _vip_inventory(2)
    cases = [
        ('192.0.2.100', "ds4_router_vip = '192.0.2.100': must be address/prefix"),
        ('192.0.2.0/24', 'network or broadcast address'),
        ('fd00::100/64', 'IPv4 only'),
        ('10.9.9.100/24', 'the router hosts spark1 (192.0.2.1), spark3 (192.0.2.3) are not in its network 10.9.9.0/24'),
        ('192.0.2.4/24', '192.0.2.4 is already the address of spark4 (ansible_host)'),
        ('192.0.2.1/24', '192.0.2.1 is already the address of spark1'),
    ]
    for vip, text in cases:
        errs = pm.router_plan(pairs, hostvars, vrrp_auth_pass='s3cret', vip=vip)[1]
        assert len(errs) == 1 and text in errs[0] and errs[0].startswith('ds4_router_vip = %r' % vip), (vip, errs)
        assert 'Fix:' in errs[0]
    # a fabric address is an address a host has, too
    hostvars['spark2']['ds4_fabric_ip'] = '192.0.2.200'
    errs = pm.router_plan(pairs, hostvars, vrrp_auth_pass='s3cret', vip='192.0.2.200/24')[1]
    assert errs and 'spark2 (ds4_fabric_ip)' in errs[0]


def test_vip_router_host_refusals():
    pairs, hostvars = _vip_inventory(1 + 1)
    one_pair = pairs[:1]
    errs = pm.router_plan(one_pair, hostvars, enabled=True, vrrp_auth_pass='s3cret', vip='192.0.2.100/24')[1]
    assert errs and "ds4_router_hosts = ['spark1'] (ds4_router_vip set)" in errs[0] and '1 pair(s)' in errs[0]
    errs = pm.router_plan(pairs, hostvars, vrrp_auth_pass='s3cret', vip='192.0.2.100/24', hosts=['spark1', 'spark1'])[1]
    assert errs and 'two or more distinct router hosts' in errs[0]
    errs = pm.router_plan(pairs, hostvars, vrrp_auth_pass='s3cret', vip='192.0.2.100/24', host='spark3')[1]
    assert errs and errs[0].startswith("ds4_router_host = 'spark3' with ds4_router_vip set")
    errs = pm.router_plan(pairs, hostvars, vrrp_auth_pass='s3cret', vip='192.0.2.100/24', hosts='spark1')[1]
    assert errs and errs[0].startswith("ds4_router_hosts = 'spark1': must be a list")
    errs = pm.router_plan(pairs, hostvars, vrrp_auth_pass='s3cret', vip='192.0.2.100/24', hosts=['spark1', 'spark9'])[1]
    assert errs and "ds4_router_hosts: 'spark9' is not a Spark" in errs[0]


def test_each_router_host_needs_its_own_address():
    pairs, hostvars = _vip_inventory(2, spark1='10.0.0.5', spark3='10.0.0.5')
    errs = pm.router_plan(pairs, hostvars, vrrp_auth_pass='s3cret', vip='10.0.0.100/24')[1]
    assert errs and "ds4_router_address = '10.0.0.5' on both spark1 and spark3" in errs[0]
    assert 'host_vars of each router host' in errs[0]
    pairs, hostvars = _vip_inventory(2, spark1='10.0.0.5', spark3='10.0.0.7')
    plan, errs = pm.router_plan(pairs, hostvars, vrrp_auth_pass='s3cret', vip='10.0.0.100/24')
    assert errs == [] and plan['addresses'] == ['10.0.0.5', '10.0.0.7']


def test_a_vip_needs_the_vrrp_secret_and_never_prints_it():
    pairs, hostvars = _vip_inventory(2)
    errs = pm.router_plan(pairs, hostvars, vip='192.0.2.100/24')[1]
    assert len(errs) == 1 and errs[0].startswith('router_vrrp_auth_pass (not set): with ds4_router_vip')
    assert 'Fix: set router_vrrp_auth_pass in group_vars/spark' in errs[0]
    errs = pm.router_plan(pairs, hostvars, vip='192.0.2.100/24', vrrp_auth_pass='toolong-secret')[1]
    assert len(errs) == 1 and '(value not shown)' in errs[0] and 'toolong' not in errs[0]
    # without a VIP it is not needed
    assert pm.router_plan(pairs, hostvars)[1] == []
