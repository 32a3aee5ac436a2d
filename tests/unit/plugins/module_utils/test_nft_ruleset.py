# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's nftables table, rendered from structured input (API exposure: who reaches which port)."""
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils import nft_ruleset as n


def spec(**kw):
    s = dict(table='dgxspark_ds4', family='inet', api_port=8000, upstream_port=None, master_port=29501,
             allowed_networks=[], fabric_addresses=['192.168.100.11', '192.168.100.10'], self_address='192.168.100.10',
             ephemeral_ports='32768-60999')
    s.update(kw)
    return s


def rules(text):
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith('#')]


def test_touches_only_its_own_table():
    text = n.render_ruleset(spec())
    lines = rules(text)
    assert lines[:3] == ['table inet dgxspark_ds4', 'delete table inet dgxspark_ds4', 'table inet dgxspark_ds4 {']
    assert not [ln for ln in lines if 'flush' in ln]
    assert len(re.findall(r'^(table|delete table) ', text, re.M)) == 3
    assert all(re.match(r'^(table|delete table) inet dgxspark_ds4', ln) for ln in re.findall(r'^\S.*$', text, re.M)
               if not ln.startswith(('#', '}')))


def test_loopback_only_api_and_fabric_only_master_port():
    lines = rules(n.render_ruleset(spec()))
    i = lines.index('iif "lo" accept')
    assert lines[i + 1] == 'ct state established,related accept'
    assert 'tcp dport 8000 reject with tcp reset' in lines
    assert not [ln for ln in lines if 'dport 8000' in ln and 'accept' in ln]
    assert 'elements = { 192.168.100.10, 192.168.100.11 }' in lines
    assert lines.index('tcp dport 29501 ip saddr @fabric_v4 accept') < lines.index('tcp dport 29501 reject with tcp reset')
    assert 'ip daddr 192.168.100.10 tcp dport 32768-60999 ip saddr @fabric_v4 accept' in lines
    assert 'ip daddr 192.168.100.10 tcp dport 32768-60999 reject with tcp reset' in lines
    assert 'type filter hook input priority filter; policy accept;' in lines


def test_allowed_networks_v4_v6_and_upstream_port():
    lines = rules(n.render_ruleset(spec(allowed_networks=['10.77.0.20/32', '2001:db8::/64', '10.77.0.1'], upstream_port=8001)))
    assert 'elements = { 10.77.0.1/32, 10.77.0.20/32 }' in lines
    assert 'elements = { 2001:db8::/64 }' in lines
    accept4 = lines.index('tcp dport 8000 ip saddr @api_clients_v4 accept')
    accept6 = lines.index('tcp dport 8000 ip6 saddr @api_clients_v6 accept')
    assert max(accept4, accept6) < lines.index('tcp dport 8000 reject with tcp reset')
    assert 'tcp dport 8001 reject with tcp reset' in lines


def test_no_ephemeral_rule_when_disabled():
    text = n.render_ruleset(spec(ephemeral_ports=None))
    assert '32768' not in text


def test_digest_in_comment_and_stable():
    a = n.render_ruleset(spec())
    assert n.render_ruleset(spec()) == a
    d = n.ruleset_digest(spec())
    assert 'comment "dgxspark.ds4 sha256:%s"' % d in a
    assert n.live_digest('table inet dgxspark_ds4 {\n\tcomment "dgxspark.ds4 sha256:%s"\n}' % d) == d
    assert n.live_digest('table inet dgxspark_ds4 {\n}') is None
    assert n.ruleset_digest(spec(allowed_networks=['10.0.0.0/8'])) != d


@pytest.mark.parametrize('bad, needle', [
    (dict(table='x-y'), 'table'),
    (dict(family='ip'), 'family'),
    (dict(api_port=0), 'api_port'),
    (dict(master_port='29501'), 'master_port'),
    (dict(allowed_networks=['lan']), 'allowed_networks'),
    (dict(fabric_addresses=[]), 'fabric_addresses is empty'),
    (dict(fabric_addresses=['fe80::1']), 'IPv4'),
    (dict(self_address='192.168.100.99'), 'self_address'),
    (dict(ephemeral_ports='1024'), 'ephemeral_ports'),
    (dict(ephemeral_ports='60999-32768'), 'ephemeral_ports'),
])
def test_refusals(bad, needle):
    with pytest.raises(n.RulesetError) as exc:
        n.render_ruleset(spec(**bad))
    assert any(needle in e for e in exc.value.errors), exc.value.errors
