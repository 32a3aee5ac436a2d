# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 27 items 2 and 3 in the collection's nftables table: Prometheus and Grafana open only to the monitoring
networks (not the API clients), and the loopback ports owned (chain output, by socket owner)."""

import os
import shutil
import subprocess

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._security import nft_ruleset as n

PROM = {'port': 9090, 'allow': 'monitoring', 'name': 'prometheus'}
GRAFANA = {'port': 3000, 'allow': 'loopback', 'name': 'grafana'}
OWNED_RULE = 'oif "lo" tcp dport { 8001, 29000, 30000 } meta skuid != { 0, 33, 100 } reject with tcp reset'


def spec(**kw):
    s = dict(table='dgxspark_ds4', family='inet', api_port=8000, upstream_port=8001, master_port=29501,
             allowed_networks=['10.77.0.1/32'], fabric_addresses=['10.77.0.11', '10.77.0.12'],
             self_address='10.77.0.11', ephemeral_ports='32768-60999')
    s.update(kw)
    return s


def rules(text):
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith('#')]


def test_prometheus_follows_the_monitoring_networks_not_the_api_clients():
    lines = rules(n.render_ruleset(spec(service_ports=[PROM], monitoring_networks=['10.77.0.20/32', 'fd00::/64'])))
    reject = lines.index('tcp dport 9090 reject with tcp reset')
    assert lines.index('tcp dport 9090 ip saddr @monitoring_clients_v4 accept') < reject
    assert lines.index('tcp dport 9090 ip6 saddr @monitoring_clients_v6 accept') < reject
    assert not [ln for ln in lines if 'dport 9090' in ln and 'api_clients' in ln]
    assert 'elements = { 10.77.0.20/32 }' in lines and 'elements = { fd00::/64 }' in lines


def test_prometheus_loopback_only_when_no_monitoring_networks_even_with_api_clients():
    lines = rules(n.render_ruleset(spec(service_ports=[PROM])))
    assert [ln for ln in lines if 'dport 9090' in ln] == ['tcp dport 9090 reject with tcp reset']
    assert not [ln for ln in lines if 'monitoring_clients' in ln]


def test_loopback_service_port_is_rejected_from_everyone_but_loopback():
    lines = rules(n.render_ruleset(spec(service_ports=[GRAFANA], monitoring_networks=['10.77.0.20/32'])))
    assert [ln for ln in lines if 'dport 3000' in ln] == ['tcp dport 3000 reject with tcp reset']
    assert lines.index('iif "lo" accept') < lines.index('tcp dport 3000 reject with tcp reset')


def test_bad_monitoring_network_refused_naming_it():
    with pytest.raises(n.RulesetError) as exc:
        n.render_ruleset(spec(monitoring_networks=['10.77.0.300/32']))
    assert "monitoring_networks entry '10.77.0.300/32': not an IP network" in exc.value.errors


def test_owned_ports_in_an_output_chain_by_socket_owner():
    text = n.render_ruleset(spec(owned_ports=[30000, 8001, 29000, 8001], owner_uids=[100, 0, 33]))
    lines = rules(text)
    out = lines.index('chain output {')
    assert lines[out + 1] == 'type filter hook output priority filter; policy accept;'
    assert lines[out + 2] == OWNED_RULE
    # the input chain is unchanged by it: the table without owned ports is the same up to the output chain
    plain = n.expected_listing(spec())
    owned = n.expected_listing(spec(owned_ports=[8001], owner_uids=[0]))
    assert owned[2:owned.index('chain output {')] == plain[2:-1]
    assert n.ruleset_digest(spec(owned_ports=[8001], owner_uids=[0])) != n.ruleset_digest(spec())
    one_owner = n.ruleset_digest(spec(owned_ports=[8001], owner_uids=[0]))
    assert one_owner != n.ruleset_digest(spec(owned_ports=[8001], owner_uids=[0, 33]))


def test_one_owned_port_or_owner_rendered_bare_as_nft_lists_it():
    # nft prints a one-element anonymous set without braces: the rendered line must be the listed one, or every
    # run would see a difference and the load would be refused
    lines = rules(n.render_ruleset(spec(owned_ports=[8001], owner_uids=[0])))
    assert 'oif "lo" tcp dport 8001 meta skuid != 0 reject with tcp reset' in lines
    lines = rules(n.render_ruleset(spec(owned_ports=[8001], owner_uids=[0, 33])))
    assert 'oif "lo" tcp dport 8001 meta skuid != { 0, 33 } reject with tcp reset' in lines


def test_no_owned_ports_no_output_chain():
    assert 'chain output' not in n.render_ruleset(spec(owned_ports=[], owner_uids=[0, 33]))
    assert n.render_ruleset(spec(owned_ports=[], owner_uids=[])) == n.render_ruleset(spec())


@pytest.mark.parametrize('owned, uids, needle', [
    ([8001], [33], 'must include 0'),
    ([0], [0], 'owned_ports = [0]: must be a list of integer ports'),
    ([8001], ['www-data'], "owner_uids = ['www-data']: must be a list of integer user ids"),
    ([8001], [-1], 'must be a list of integer user ids'),
])
def test_bad_owned_ports_or_owners_refused(owned, uids, needle):
    with pytest.raises(n.RulesetError) as exc:
        n.render_ruleset(spec(owned_ports=owned, owner_uids=uids))
    assert needle in str(exc.value)


def test_the_output_chain_is_part_of_the_compared_listing():
    s = spec(owned_ports=[8001, 29000, 30000], owner_uids=[0, 33, 100])
    expected = n.expected_listing(s)
    assert OWNED_RULE in expected
    # the output chain flushed by hand (nft flush chain inet dgxspark_ds4 output) is a difference
    flushed = [ln for ln in expected if ln != OWNED_RULE]
    assert n.listing_differences(expected, flushed) == ['-' + OWNED_RULE]


@pytest.mark.skipif(shutil.which('nft') is None and not os.environ.get('CI'), reason='nft not installed (CI=true makes this a failure)')
def test_nft_parses_the_rendered_output_chain(tmp_path):
    path = tmp_path / 'ruleset.nft'
    path.write_text(n.render_ruleset(spec(owned_ports=[8001, 29000, 30000], owner_uids=[0, 33, 100],
                                          service_ports=[PROM, GRAFANA], monitoring_networks=['10.77.0.20/32'])))
    proc = subprocess.run(['nft', '-c', '-f', str(path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    if proc.returncode != 0 and 'Operation not permitted' in proc.stdout and not os.environ.get('CI'):
        pytest.skip('nft -c needs CAP_NET_ADMIN here (CI runs as root: there it is a failure)')
    assert proc.returncode == 0, proc.stdout
