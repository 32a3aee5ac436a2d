# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""placeholders: RFC 5737 documentation addresses are refused with the variable, the value and the file to fill in;
real addresses, host names and the shipped fabric defaults (NVIDIA's netplan) pass."""


import os

import pytest
import yaml

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import placeholders as ph

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))


@pytest.mark.parametrize('value,name', [('192.0.2.10', 'TEST-NET-1'), ('192.0.2.255', 'TEST-NET-1'), ('198.51.100.0', 'TEST-NET-2'),
                                        ('203.0.113.77', 'TEST-NET-3'), (' 203.0.113.1 ', 'TEST-NET-3')])
def test_documentation_ranges_are_placeholders(value, name):
    assert ph.placeholder_network(value)[1] == name


@pytest.mark.parametrize('value', ['192.0.3.1', '192.168.100.10', '10.77.0.2', '198.51.101.1', 'spark1.lan', '', '2001:db8::1'])
def test_other_values_are_not(value):
    assert ph.placeholder_network(value) is None


def test_errors_name_host_variable_value_and_file():
    hv = {'spark1': {'ansible_host': '192.0.2.10', 'ds4_fabric_ip': '192.168.100.10'},
          'spark2': {'ansible_host': 'spark2.lan', 'ds4_fabric_ip': '198.51.100.11', 'ds4_router_address': '203.0.113.9'}}
    errors = ph.placeholder_errors(hv, ['spark1', 'spark2'])
    assert errors == [
        '[host spark1] ansible_host = "192.0.2.10": a shipped placeholder (TEST-NET-1 192.0.2.0/24, an RFC 5737 documentation '
        'range that routes nowhere), not the management address Ansible connects to over ssh. Fix: fill in '
        'inventories/sample-site/hosts.yml with the real address of spark1.',
        '[host spark2] ds4_fabric_ip = "198.51.100.11": a shipped placeholder (TEST-NET-2 198.51.100.0/24, an RFC 5737 '
        'documentation range that routes nowhere), not the ConnectX-7 fabric address of this node. Fix: fill in '
        'inventories/sample-site/host_vars/spark2.yml with the real address of spark2.',
        '[host spark2] ds4_router_address = "203.0.113.9": a shipped placeholder (TEST-NET-3 203.0.113.0/24, an RFC 5737 '
        'documentation range that routes nowhere), not the address the router host reaches the pair heads from. Fix: fill '
        'in group_vars/spark of your inventory with the real address of spark2.']


def test_where_names_the_file_ansible_read():
    errors = ph.placeholder_errors({'a': {'ansible_host': '192.0.2.1'}}, ['a'], lambda h, v: 'inv/hosts.yml:4' if v == 'ansible_host' else None)
    assert errors[0].endswith('Fix: fill in inv/hosts.yml:4 with the real address of a.')


def test_shipped_inventory_is_refused_and_only_for_its_placeholders():
    """The shipped hosts.yml holds placeholders; the shipped fabric addresses (NVIDIA's netplan defaults) do not."""
    with open(os.path.join(REPO, 'inventories', 'sample-site', 'hosts.yml')) as handle:
        hosts = yaml.safe_load(handle)['spark']['hosts']
    hv = {}
    for h in hosts:
        with open(os.path.join(REPO, 'inventories', 'sample-site', 'host_vars', '%s.yml' % h)) as handle:
            hv[h] = dict(yaml.safe_load(handle), ansible_host=hosts[h]['ansible_host'])
    errors = ph.placeholder_errors(hv, sorted(hv))
    assert [e.split(' = ')[0] for e in errors] == ['[host spark1] ansible_host', '[host spark2] ansible_host']


def test_molecule_inventory_has_no_placeholder():
    """The Molecule scenarios deploy through the same config check: their inventory must pass it."""
    found = []
    for root, _dirs, files in os.walk(os.path.join(REPO, 'molecule')):
        for name in files:
            if not name.endswith(('.yml', '.yaml')):
                continue
            with open(os.path.join(root, name)) as handle:
                for word in handle.read().replace('"', ' ').replace("'", ' ').split():
                    if ph.placeholder_network(word.rstrip(',')):
                        found.append((name, word))
    assert found == []
