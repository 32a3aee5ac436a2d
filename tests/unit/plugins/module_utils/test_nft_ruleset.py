# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's nftables table, rendered from structured input (API exposure: who reaches which port)."""

import re

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._security import nft_ruleset as n


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


# `nft list table inet dgxspark_ds4` as nftables 1.0.6 (Debian 12) printed it after loading
# render_ruleset(LISTED_SPEC): tabs, the file's comments gone, a long element list wrapped.
LISTED_SPEC = dict(allowed_networks=['10.%d.0.0/16' % i for i in range(6)] + ['fd00::/64'])
NFT_LISTING = '''table inet dgxspark_ds4 {
\tcomment "dgxspark.ds4 sha256:7c023bc8b01e620aae76448bfe43930242f4d1ed678df635cf15feb8e17c90e8"
\tset api_clients_v4 {
\t\ttype ipv4_addr
\t\tflags interval
\t\telements = { 10.0.0.0/16, 10.1.0.0/16,
\t\t\t     10.2.0.0/16, 10.3.0.0/16,
\t\t\t     10.4.0.0/16, 10.5.0.0/16 }
\t}

\tset api_clients_v6 {
\t\ttype ipv6_addr
\t\tflags interval
\t\telements = { fd00::/64 }
\t}

\tset fabric_v4 {
\t\ttype ipv4_addr
\t\telements = { 192.168.100.11, 192.168.100.10 }
\t}

\tchain input {
\t\ttype filter hook input priority filter; policy accept;
\t\tiif "lo" accept
\t\tct state established,related accept
\t\ttcp dport 8000 ip saddr @api_clients_v4 accept
\t\ttcp dport 8000 ip6 saddr @api_clients_v6 accept
\t\ttcp dport 8000 reject with tcp reset
\t\ttcp dport 29501 ip saddr @fabric_v4 accept
\t\ttcp dport 29501 reject with tcp reset
\t\tip daddr 192.168.100.10 tcp dport 32768-60999 ip saddr @fabric_v4 accept
\t\tip daddr 192.168.100.10 tcp dport 32768-60999 reject with tcp reset
\t}
}
'''


def test_live_listing_equals_the_rendered_table():
    """Indentation, wrapped and reordered set elements and the file's comments are not differences."""
    assert n.listing_differences(n.expected_listing(spec(**LISTED_SPEC)), n.normalise_listing(NFT_LISTING)) == []


def test_flushed_chain_and_deleted_rule_are_differences_even_with_the_digest_comment():
    expected = n.expected_listing(spec(**LISTED_SPEC))
    flushed = re.sub(r'(policy accept;\n).*?(\n\t\})', r'\1\2', NFT_LISTING, flags=re.S)
    assert n.live_digest(flushed) == n.ruleset_digest(spec(**LISTED_SPEC))
    diff = n.listing_differences(expected, n.normalise_listing(flushed))
    assert '-iif "lo" accept' in diff and '-tcp dport 29501 reject with tcp reset' in diff
    assert len(diff) == 9
    deleted = NFT_LISTING.replace('\t\ttcp dport 8000 reject with tcp reset\n', '')
    assert n.listing_differences(expected, n.normalise_listing(deleted)) == ['-tcp dport 8000 reject with tcp reset']
    other_set = NFT_LISTING.replace('192.168.100.11, ', '192.168.100.99, ')
    assert n.listing_differences(expected, n.normalise_listing(other_set)) == [
        '-elements = { 192.168.100.10, 192.168.100.11 }', '+elements = { 192.168.100.10, 192.168.100.99 }']
    assert n.listing_differences(expected, []) == ['-' + line for line in expected]


def test_host_prefixes_are_listed_as_bare_addresses():
    """nftables 1.0.6 lists the interval set of ['10.77.0.20/32', '10.77.0.1', 'fd00::5/128', '10.1.0.0/16'] as
    `elements = { 10.1.0.0/16, 10.77.0.1,\\n 10.77.0.20 }` and `{ fd00::5 }` (the security scenario's /32 clients)."""
    s = spec(allowed_networks=['10.77.0.20/32', '10.77.0.1', 'fd00::5/128', '10.1.0.0/16'])
    live = n.normalise_listing(re.sub(r'elements = \{[^}]*\}', 'LIVE', n.render_ruleset(s), count=2)
                               .replace('LIVE', 'elements = { 10.1.0.0/16, 10.77.0.1,\n\t\t\t     10.77.0.20 }', 1)
                               .replace('LIVE', 'elements = { fd00::5 }', 1))
    expected = n.expected_listing(s)
    assert 'elements = { 10.1.0.0/16, 10.77.0.1, 10.77.0.20 }' in expected and 'elements = { fd00::5 }' in expected
    assert n.listing_differences(expected, live[live.index('table inet dgxspark_ds4 {'):]) == []
