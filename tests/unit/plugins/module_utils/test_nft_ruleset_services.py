# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""service_ports of the collection's nftables table (monitoring: Prometheus to the allowed networks, loopback
only when none; the node exporter to the fabric addresses only)."""

import os
import re

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._security import nft_ruleset as n

PROM = {'port': 9090, 'allow': 'clients', 'name': 'prometheus'}
NODE = {'port': 9100, 'allow': 'fabric', 'name': 'node exporter'}


def spec(**kw):
    s = dict(table='dgxspark_ds4', family='inet', api_port=8000, upstream_port=None, master_port=29501,
             allowed_networks=[], fabric_addresses=['192.168.100.11', '192.168.100.10'], self_address='192.168.100.10',
             ephemeral_ports='32768-60999')
    s.update(kw)
    return s


def rules(text):
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith('#')]


def test_no_service_ports_leaves_the_table_and_digest_as_before():
    assert n.render_ruleset(spec(service_ports=[])) == n.render_ruleset(spec())
    assert n.ruleset_digest(spec(service_ports=None)) == n.ruleset_digest(spec())


def test_prometheus_loopback_only_without_allowed_networks():
    lines = rules(n.render_ruleset(spec(service_ports=[PROM, NODE])))
    assert 'tcp dport 9090 reject with tcp reset' in lines
    assert not [ln for ln in lines if 'dport 9090' in ln and 'accept' in ln]
    assert lines.index('iif "lo" accept') < lines.index('tcp dport 9090 reject with tcp reset')


def test_prometheus_open_to_the_allowed_networks_only():
    lines = rules(n.render_ruleset(spec(allowed_networks=['10.1.0.0/16', '2001:db8::/64'], service_ports=[PROM])))
    reject = lines.index('tcp dport 9090 reject with tcp reset')
    assert lines.index('tcp dport 9090 ip saddr @api_clients_v4 accept') < reject
    assert lines.index('tcp dport 9090 ip6 saddr @api_clients_v6 accept') < reject


def test_node_exporter_open_to_the_fabric_addresses_only():
    lines = rules(n.render_ruleset(spec(allowed_networks=['10.1.0.0/16'], service_ports=[NODE])))
    assert lines.index('tcp dport 9100 ip saddr @fabric_v4 accept') < lines.index('tcp dport 9100 reject with tcp reset')
    assert not [ln for ln in lines if 'dport 9100' in ln and 'api_clients' in ln]


def test_service_ports_change_the_digest():
    assert n.ruleset_digest(spec(service_ports=[PROM])) != n.ruleset_digest(spec())
    assert n.ruleset_digest(spec(service_ports=[PROM])) != n.ruleset_digest(spec(service_ports=[dict(PROM, allow='fabric')]))


@pytest.mark.parametrize('entry, needle', [
    ({'port': 0, 'allow': 'fabric'}, 'integer port'),
    ({'port': 8000, 'allow': 'clients'}, 'already used'),
    ({'port': 29501, 'allow': 'fabric'}, 'already used'),
    ({'port': 9100, 'allow': 'anyone'}, 'allow must be one of clients, monitoring, fabric, loopback'),
    ({'port': 9100, 'allow': 'fabric', 'name': 'x"; accept'}, 'name must be'),
    ('9100', 'must be a mapping'),
])
def test_bad_service_ports_refused(entry, needle):
    with pytest.raises(n.RulesetError) as err:
        n.render_ruleset(spec(service_ports=[entry]))
    assert needle in str(err.value)


def test_duplicate_service_port_refused():
    with pytest.raises(n.RulesetError, match='already used'):
        n.render_ruleset(spec(service_ports=[NODE, dict(NODE, name='again')]))


def test_every_service_port_name_the_firewall_role_writes_is_accepted():
    """The names roles/firewall/vars/main.yml gives its service ports (node exporter, Prometheus, the router's
    front) pass the module's own check: a name with parentheses once stopped site.yml on the router's host."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, '..', '..', '..', '..', 'roles', 'firewall', 'vars', 'main.yml')) as handle:
        names = re.findall(r"'name': '([^']*)'", handle.read())
    assert len(names) >= 3, names
    for name in names:
        errors = []
        n._services({'service_ports': [{'port': 9999, 'allow': 'clients', 'name': name}]}, errors)
        assert errors == [], (name, errors)


def test_vrrp_from_the_other_router_hosts_only():
    lines = rules(n.render_ruleset(spec(vrrp_peers=['10.77.0.13'])))
    accept = lines.index('ip protocol vrrp ip saddr 10.77.0.13 accept')  # one peer: bare, as nft lists it
    assert accept < lines.index('ip protocol vrrp drop')
    assert lines.index('iif "lo" accept') < accept
    # no VRRP peers (one router, no VIP): no VRRP rule, the same table as before
    assert n.render_ruleset(spec(vrrp_peers=[])) == n.render_ruleset(spec())
    assert not [ln for ln in rules(n.render_ruleset(spec())) if 'vrrp' in ln]
    assert n.ruleset_digest(spec(vrrp_peers=['10.77.0.13'])) != n.ruleset_digest(spec())


def test_bad_vrrp_peer_refused():
    with pytest.raises(n.RulesetError) as exc:
        n.render_ruleset(spec(vrrp_peers=['spark3', 'fd00::3']))
    assert "vrrp_peers entry 'spark3': not an IP address" in exc.value.errors
    assert "vrrp_peers entry 'fd00::3': IPv4 only" in exc.value.errors


def test_served_ports_answered_by_their_servers_only_and_the_control_plane_root_only():
    """server_uids: every port the collection serves (API, upstream, master, owned, served_ports) answers only from
    the listed uids (accept, then drop: a SYN cookie has no socket), and the master and inter-node ports take root's
    connections only. Without server_uids none of it (the switch firewall_owned_ports off)."""
    text = n.render_ruleset(spec(upstream_port=8001, owned_ports=[8001, 30000], owner_uids=[0, 33], served_ports=[9100],
                                 server_uids=['61184-65519', '0', '111', 111]))
    lines = rules(text)
    out = lines[lines.index('chain output {'):]
    assert out[2:] == [
        'oif "lo" tcp dport { 8001, 30000 } meta skuid != { 0, 33 } reject with tcp reset',
        'tcp dport 29501 ct state new meta skuid != 0 reject with tcp reset',
        'ip daddr @fabric_v4 tcp dport 32768-60999 ct state new meta skuid != 0 reject with tcp reset',
        'tcp sport { 8000, 8001, 9100, 29501, 30000 } tcp flags syn meta skuid { 0, 111, 61184-65519 } accept',
        'tcp sport { 8000, 8001, 9100, 29501, 30000 } tcp flags syn drop',
        '}', '}',
    ], out
    # the accept must come before the drop, and after the clients' rule (a non-owner's SYN to an owned port is reset)
    plain = rules(n.render_ruleset(spec(upstream_port=8001, owned_ports=[8001], owner_uids=[0, 33])))
    assert not [ln for ln in plain if 'sport' in ln or 'meta skuid != 0' in ln]


@pytest.mark.parametrize('uids,word', [
    (['33'], 'must include 0'),
    (['0', 'www-data'], "'www-data'"),
    (['0', '65519-61184'], "'65519-61184'"),
    (['0', '-1'], "'-1'"),
    (['0', '4294967296'], "'4294967296'"),
    ('0', 'must be a list'),
])
def test_bad_server_uids_are_refused_naming_the_entry(uids, word):
    errors = n.validate(spec(server_uids=uids))
    assert len(errors) == 1 and word in errors[0] and 'server_uids' in errors[0], errors


def test_bad_served_ports_are_refused():
    errors = n.validate(spec(served_ports=[9100, 70000], server_uids=['0']))
    assert len(errors) == 1 and errors[0].startswith('served_ports = [9100, 70000]'), errors
