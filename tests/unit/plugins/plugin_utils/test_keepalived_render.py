# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""keepalived_render: the VRRP configuration of the router hosts (the clients' one address), its checks and the
interface discovery."""


import pytest

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import keepalived_render as kr

SPEC = {
    'name': 'spark1', 'interface': 'eth0', 'vip': '10.77.0.100/24', 'virtual_router_id': 51,
    'priority': kr.priority(0), 'advert_int': 1, 'unicast_src_ip': '10.77.0.11', 'unicast_peers': ['10.77.0.13'],
    'auth_pass': 's3cret', 'check_command': ['/usr/local/libexec/dgxspark-ds4/router/vrrp-check', '8080'],
    'check_interval': 1, 'check_timeout': 1, 'check_fall': 2, 'check_rise': 2, 'script_user': 'nobody',
}
ADDR_JSON = [
    {'ifname': 'lo', 'addr_info': [{'local': '127.0.0.1', 'prefixlen': 8}]},
    {'ifname': 'eth0', 'addr_info': [{'local': '10.77.0.11', 'prefixlen': 24}]},
]


def _block(text, name):
    """The lines of the block `name {` ... matching `}` (one level)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == name + ' {')
    depth, out = 0, []
    for line in lines[start:]:
        depth += line.count('{') - line.count('}')
        out.append(line.strip())
        if depth == 0:
            return out
    raise AssertionError('unterminated %s' % name)


def test_both_hosts_backup_nopreempt_unicast_and_the_tracked_front():
    text = kr.render(SPEC)
    inst = _block(text, 'vrrp_instance %s' % kr.INSTANCE)
    for line in ('state BACKUP', 'nopreempt', 'interface eth0', 'virtual_router_id 51', 'priority 150', 'advert_int 1',
                 'unicast_src_ip 10.77.0.11', '10.77.0.13', 'auth_type PASS', 'auth_pass s3cret',
                 '10.77.0.100/24 dev eth0', kr.SCRIPT):
        assert line in inst, line
    assert 'state MASTER' not in text
    script = _block(text, 'vrrp_script %s' % kr.SCRIPT)
    assert 'script "/usr/local/libexec/dgxspark-ds4/router/vrrp-check 8080"' in script
    timing = ('interval', 'timeout', 'fall', 'rise')
    assert ['interval 1', 'timeout 1', 'fall 2', 'rise 2'] == [s for s in script if s.split()[0] in timing]
    assert 'enable_script_security' in _block(text, 'global_defs')
    assert kr.render(SPEC) == text  # deterministic: written (and keepalived reloaded) only on change


def test_priorities_by_order_of_the_router_hosts():
    assert [kr.priority(i) for i in range(3)] == [150, 140, 130]
    assert kr.priority(1000) == 1


def test_every_bad_input_at_once():
    bad = dict(SPEC, vip='10.77.0.100', unicast_src_ip='10.78.0.11', unicast_peers=[], interface='eth 0',
               virtual_router_id=0, priority=255, advert_int=0, auth_pass='longer-than-8', check_command=['vrrp-check'],
               name='', script_user='a b')
    with pytest.raises(kr.KeepalivedError) as exc:
        kr.render(bad)
    text = '\n'.join(exc.value.errors)
    for part in ('vip = ', 'unicast_peers is empty', 'interface = ', 'virtual_router_id = 0', 'priority = 255',
                 'advert_int = 0', 'auth_pass', 'check_command', 'name = ', 'script_user'):
        assert part in text, part


def test_addresses_outside_the_vip_network_or_repeated():
    errs = kr.validate(dict(SPEC, unicast_peers=['10.78.0.13', '10.77.0.100', '10.77.0.11']))
    assert any("unicast_peers entry = 10.78.0.13: not in the VIP's network 10.77.0.0/24" in e for e in errs)
    assert any('10.77.0.100: is the VIP itself' in e for e in errs)
    assert any('repeat an address' in e for e in errs)


def test_parse_vip():
    assert str(kr.parse_vip('10.77.0.100/24')[0]) == '10.77.0.100/24'
    assert kr.parse_vip('10.77.0.255/24')[1].startswith('is the network or broadcast')
    assert kr.parse_vip('127.0.0.5/8')[1].startswith('not a unicast')
    assert kr.parse_vip('nonsense/24')[1] == 'not an address/prefix'
    assert kr.parse_vip(None)[1].startswith('must be address/prefix')


HOSTS = [{'host': 'spark1', 'address': '10.77.0.11'}, {'host': 'spark3', 'address': '10.77.0.13'}]


def _host_spec(**kw):
    spec = dict((k, v) for k, v in SPEC.items() if k not in ('unicast_src_ip', 'unicast_peers', 'priority'))
    spec.update(hosts=HOSTS, interface='')
    spec.update(kw)
    return spec


def test_host_config_each_router_host_sends_to_the_others_with_the_priority_of_its_place():
    one = kr.host_config(_host_spec(), ADDR_JSON)
    assert one['errors'] == [] and one['interface'] == 'eth0' and one['priority'] == 150
    assert 'unicast_src_ip 10.77.0.11' in one['text'] and 'interface eth0' in one['text']
    assert _block(one['text'], 'unicast_peer') == ['unicast_peer {', '10.77.0.13', '}']
    addr3 = [{'ifname': 'ens1', 'addr_info': [{'local': '10.77.0.13', 'prefixlen': 24}]}]
    three = kr.host_config(_host_spec(name='spark3'), addr3)
    assert three['errors'] == [] and three['priority'] == 140 and three['interface'] == 'ens1'
    assert 'unicast_src_ip 10.77.0.13' in three['text'] and '10.77.0.100/24 dev ens1' in three['text']
    assert _block(three['text'], 'unicast_peer') == ['unicast_peer {', '10.77.0.11', '}']
    # an override wins over discovery
    out = kr.host_config(_host_spec(interface='bond0'), ADDR_JSON)
    assert out['interface'] == 'bond0' and '10.77.0.100/24 dev bond0' in out['text']


def test_host_config_names_the_variable_and_the_fix():
    out = kr.host_config(_host_spec(), [{'ifname': 'eth0', 'addr_info': [{'local': '10.77.0.99'}]}])
    assert out['text'] is None and len(out['errors']) == 1
    assert out['errors'][0].startswith('router_vrrp_interface is empty and no interface of spark1 carries')
    assert 'Fix: set router_vrrp_interface' in out['errors'][0]
    out = kr.host_config(_host_spec(auth_pass=''), ADDR_JSON)
    assert out['text'] is None and out['errors'][0].startswith('router_vrrp (keepalived on spark1): auth_pass')
    out = kr.host_config(_host_spec(name='spark2'), ADDR_JSON)
    assert out['text'] is None and "does not list spark2" in out['errors'][0]
