# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's own nftables table, rendered from structured input.

Pure Python (no Ansible imports), unit-tested with plain pytest.

The file is one atomic `nft -f` transaction that touches ONLY `table <family> <name>`:

    table inet dgxspark_ds4          # create it if missing (no-op otherwise)
    delete table inet dgxspark_ds4   # drop our previous version
    table inet dgxspark_ds4 { ... }  # the new one

so loading it never flushes anything else (a user's tables and Docker's chains stay). The
table carries a comment with the sha256 of its own body. The module compares the LIVE table
(`nft list table`, normalised by `normalise_listing`) with what the rendered file defines
(`expected_listing`), rule by rule: a table deleted, a chain flushed, one rule deleted or added by
hand all differ and reload it, whatever the comment says; after the load the two must be equal.

Policy (vllm-ops 2.2, 6): the chain's policy is accept (the host's other services are not our
business); it rejects, for new TCP connections from anywhere but loopback:
  - api_port from outside allowed_networks (none = loopback only);
  - upstream_port (vLLM behind the proxy) from anything but loopback;
  - master_port (TCPStore, listens on all interfaces) from outside the fabric addresses;
  - the ephemeral range on this node's fabric address (ZMQ MessageQueue, Gloo, NCCL sockets) from
    outside the fabric addresses;
  - each of service_ports (e.g. Prometheus, the node exporter: role dgxspark.ds4.monitoring) from
    outside its allowed set: "clients" = allowed_networks (none = loopback only), "monitoring" =
    monitoring_networks (none = loopback only), "fabric" = the fabric addresses, "loopback" = nobody else;
  - with vrrp_peers (the other router hosts holding the clients' one address, role dgxspark.ds4.router):
    VRRP (IP protocol 112) from anyone else (dropped: VRRP has no reset).

Loopback ports owned (chain output): with owned_ports (vLLM's loopback port, vllm-router's admin and metrics
ports), a connection to any of them over "lo" (127.0.0.1, ::1 or one of the host's own addresses) from a socket
whose owner is not in owner_uids (root, the proxy's user, Prometheus' user) is reset. vLLM's container runs with
--network host, so its socket is in the host's namespace and the client's SYN passes this hook with the client's uid.

Ports answered by their services only (chain output), with server_uids: nftables cannot stop a local user from
listening on a port while its service is down (vLLM restarting, the router stopped, the node exporter upgraded), and
a connection to that port would then hand the squatter the request and its `Authorization: Bearer` key. Every TCP
packet with SYN set leaving one of the served ports (the API, vLLM's port behind the proxy, the master port,
owned_ports, served_ports) must come from a socket of server_uids (root; Prometheus' user; systemd's DynamicUser
range for vllm-router): anything else is dropped, so the squatter's SYN-ACK never leaves and no handshake completes.
The rule accepts the servers' SYN-ACKs and drops every other one, rather than dropping a socket owner's that is not
a server: a SYN cookie (which the kernel sends when a listener's queue is full, and a squatter controls its own
queue) leaves with no socket at all, so a "!= servers" rule would let it through and the handshake complete. The
price: under a SYN flood these ports answer only from their listen queues, no cookies (docs/security.md, "Ports no
local user can take over", names the tests that load these rules into a real kernel).

The ranks' control plane (chain output), with server_uids: the master port (TCPStore, unauthenticated pickle) and,
with ephemeral_ports, the inter-node ports on the fabric addresses take connections from root's sockets only (the
ranks run as root in their containers); another local user is reset, over loopback or the fabric. Both rules match
new connections only (`ct state new`): the inter-node range is also where every local client's own ports lie, and a
server's replies to a client on this node's fabric address go there.
"""

from __future__ import annotations


import difflib
import hashlib
import ipaddress
import re
from typing import Any

NAME_RE = re.compile(r'^[A-Za-z][A-Za-z0-9_]{0,31}$')
SERVICE_NAME_RE = re.compile(r'^[A-Za-z0-9 _.-]{1,40}$')
SERVICE_ALLOW = ('clients', 'monitoring', 'fabric', 'loopback')
FAMILIES = ('inet',)
COMMENT_PREFIX = 'dgxspark.ds4 sha256:'


class RulesetError(Exception):
    def __init__(self, errors: list[str]) -> None:
        self.errors = list(errors)
        super(RulesetError, self).__init__('\n'.join(self.errors))


def _port_ok(p: Any) -> bool:
    return isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= 65535


def _range(value: Any, errors: list[str], var: str) -> tuple[int, int] | None:
    if value in (None, '', False):
        return None
    m = re.match(r'^\s*(\d+)\s*[-:]\s*(\d+)\s*$', str(value))
    if not m:
        errors.append('%s = %r: must be "low-high", e.g. 32768-60999' % (var, value))
        return None
    lo, hi = int(m.group(1)), int(m.group(2))
    if not (1 <= lo <= hi <= 65535):
        errors.append('%s = %r: need 1 <= low <= high <= 65535' % (var, value))
        return None
    return lo, hi


def _nets(values: Any, errors: list[str], var: str) -> tuple[list[str], list[str]]:
    v4: list[str] = []
    v6: list[str] = []
    for item in values or []:
        try:
            net = ipaddress.ip_network(str(item), strict=False)
        except ValueError:
            errors.append('%s entry %r: not an IP network' % (var, item))
            continue
        (v4 if net.version == 4 else v6).append(str(net))
    return sorted(set(v4), key=ipaddress.ip_network), sorted(set(v6), key=ipaddress.ip_network)


def _addrs(values: Any, errors: list[str], var: str) -> list[str]:
    out: list[str] = []
    for item in values or []:
        try:
            ip = ipaddress.ip_address(str(item))
        except ValueError:
            errors.append('%s entry %r: not an IP address' % (var, item))
            continue
        if ip.version != 4:
            errors.append('%s entry %r: IPv4 only' % (var, item))
            continue
        if str(ip) not in out:
            out.append(str(ip))
    return sorted(out, key=ipaddress.ip_address)


def validate(spec: dict[str, Any]) -> list[str]:
    """Errors for a spec; see render_ruleset."""
    errors: list[str] = []
    if not NAME_RE.match(str(spec.get('table', ''))):
        errors.append('table = %r: letters, digits and _ (max 32), starting with a letter' % (spec.get('table'),))
    if spec.get('family', 'inet') not in FAMILIES:
        errors.append('family = %r: only inet (IPv4 + IPv6 in one table)' % (spec.get('family'),))
    for key in ('api_port', 'master_port'):
        if not _port_ok(spec.get(key)):
            errors.append('%s = %r: must be an integer port' % (key, spec.get(key)))
    if spec.get('upstream_port') is not None and not _port_ok(spec.get('upstream_port')):
        errors.append('upstream_port = %r: must be an integer port or null' % (spec.get('upstream_port'),))
    _nets(spec.get('allowed_networks'), errors, 'allowed_networks')
    _nets(spec.get('monitoring_networks'), errors, 'monitoring_networks')
    fab = _addrs(spec.get('fabric_addresses'), errors, 'fabric_addresses')
    if not fab:
        errors.append('fabric_addresses is empty: the master port and inter-node ports would be closed to the peer')
    self_addr = _addrs([spec['self_address']] if spec.get('self_address') else [], errors, 'self_address')
    if self_addr and self_addr[0] not in fab:
        errors.append('self_address %s is not among fabric_addresses %s' % (self_addr[0], fab))
    _range(spec.get('ephemeral_ports'), errors, 'ephemeral_ports')
    _services(spec, errors)
    _addrs(spec.get('vrrp_peers'), errors, 'vrrp_peers')
    _owned(spec, errors)
    _servers(spec, errors)
    return errors


def _owned(spec: dict[str, Any], errors: list[str]) -> tuple[list[int], list[int]]:
    """(sorted owned ports, sorted owner uids) from owned_ports / owner_uids; errors appended."""
    ports = spec.get('owned_ports') or []
    uids = spec.get('owner_uids') or []
    if not isinstance(ports, list) or not all(_port_ok(p) for p in ports):
        errors.append('owned_ports = %r: must be a list of integer ports' % (ports,))
        return [], []
    if not isinstance(uids, list) or not all(isinstance(u, int) and not isinstance(u, bool) and 0 <= u < 2 ** 32
                                             for u in uids):
        errors.append('owner_uids = %r: must be a list of integer user ids' % (uids,))
        return [], []
    if ports and 0 not in uids:
        errors.append('owner_uids = %r: must include 0 (root: the collection\'s own checks, the pair guard, the router '
                      'pool keeper reach these ports)' % (uids,))
        return [], []
    return sorted(set(ports)), sorted(set(uids))


def _uid_element(item: Any) -> tuple[int, int] | None:
    """A server_uids entry as (low, high): an integer user id, or "low-high" (a range, e.g. systemd's DynamicUser
    61184-65519); None when it is neither."""
    if isinstance(item, int) and not isinstance(item, bool):
        return (item, item) if 0 <= item < 2 ** 32 else None
    m = re.match(r'^(\d+)(?:-(\d+))?$', str(item).strip())
    if not m:
        return None
    lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
    return (lo, hi) if lo <= hi < 2 ** 32 and (m.group(2) is None or lo < hi) else None


def _servers(spec: dict[str, Any], errors: list[str]) -> tuple[list[int], list[str]]:
    """(sorted served ports, server uid elements as nft prints them) from api_port, upstream_port, master_port,
    owned_ports, served_ports and server_uids; ([], []) without server_uids. errors appended."""
    uids = spec.get('server_uids') or []
    extra = spec.get('served_ports') or []
    if not isinstance(extra, list) or not all(_port_ok(p) for p in extra):
        errors.append('served_ports = %r: must be a list of integer ports' % (extra,))
        return [], []
    if not uids:
        return [], []
    if not isinstance(uids, list):
        errors.append('server_uids = %r: must be a list of user ids or "low-high" ranges' % (uids,))
        return [], []
    elements: list[tuple[int, int]] = []
    for item in uids:
        element = _uid_element(item)
        if element is None:
            errors.append('server_uids entry %r: must be a user id or a "low-high" range of them' % (item,))
            return [], []
        elements.append(element)
    if not any(lo == 0 for lo, dummy in elements):
        errors.append('server_uids = %r: must include 0 (root: vLLM\'s ranks, the proxy, the TCPStore)' % (uids,))
        return [], []
    ports = set(extra) | set(p for p in spec.get('owned_ports') or [] if _port_ok(p))
    ports |= set(p for p in (spec.get('api_port'), spec.get('upstream_port'), spec.get('master_port')) if _port_ok(p))
    printed = ['%d' % lo if lo == hi else '%d-%d' % (lo, hi) for lo, hi in sorted(set(elements))]
    return sorted(ports), printed


def _services(spec: dict[str, Any], errors: list[str]) -> list[tuple[int, str, str]]:
    """service_ports entries: {port, allow: clients|monitoring|fabric|loopback, name}; errors appended."""
    out: list[tuple[int, str, str]] = []
    taken = set(p for p in (spec.get('api_port'), spec.get('upstream_port'), spec.get('master_port')) if p is not None)
    seen: set[int] = set()
    entries = spec.get('service_ports') or []
    if not isinstance(entries, list):
        errors.append('service_ports = %r: must be a list of {port, allow, name}' % (entries,))
        return out
    for item in entries:
        if not isinstance(item, dict):
            errors.append('service_ports entry %r: must be a mapping {port, allow, name}' % (item,))
            continue
        port: Any = item.get('port')  # free-form YAML: an int port once _port_ok
        allow, name = item.get('allow'), str(item.get('name') or 'service')
        if not _port_ok(port):
            errors.append('service_ports entry %r: port must be an integer port' % (item,))
            continue
        if port in taken or port in seen:
            errors.append('service_ports entry %r: port %d is already used by another rule' % (item, port))
            continue
        if allow not in SERVICE_ALLOW:
            errors.append('service_ports entry %r: allow must be one of %s' % (item, ', '.join(SERVICE_ALLOW)))
            continue
        if not SERVICE_NAME_RE.match(name):
            errors.append('service_ports entry %r: name must be letters, digits, space, _ . - (max 40)' % (item,))
            continue
        seen.add(port)
        out.append((port, allow, name))
    return out


def _anonymous(values: list[Any]) -> str:
    """An anonymous set as `nft list` prints it: one element bare, several in braces (the live table is compared
    with the rendered one line by line)."""
    return str(values[0]) if len(values) == 1 else '{ %s }' % ', '.join(str(v) for v in values)


def _body(spec: dict[str, Any]) -> tuple[str, str]:
    errors: list[str] = []
    table = spec['table']
    api = spec['api_port']
    up = spec.get('upstream_port')
    master = spec['master_port']
    v4, v6 = _nets(spec.get('allowed_networks'), errors, 'allowed_networks')
    mon = _nets(spec.get('monitoring_networks'), errors, 'monitoring_networks')
    fab = _addrs(spec.get('fabric_addresses'), errors, 'fabric_addresses')
    eph = _range(spec.get('ephemeral_ports'), errors, 'ephemeral_ports')
    self_addr = spec.get('self_address')
    lines = _set_lines('api_clients', v4, v6) + _set_lines('monitoring_clients', mon[0], mon[1])
    lines += ['    set fabric_v4 {', '        type ipv4_addr', '        elements = { %s }' % ', '.join(fab), '    }', '']
    lines += [
        '    chain input {',
        '        type filter hook input priority filter; policy accept;',
        '        iif "lo" accept',
        '        ct state established,related accept',
        '        # API port %d: %s' % (api, ('allowed networks ' + ', '.join(v4 + v6)) if (v4 or v6) else 'loopback only'),
    ]
    if v4:
        lines.append('        tcp dport %d ip saddr @api_clients_v4 accept' % api)
    if v6:
        lines.append('        tcp dport %d ip6 saddr @api_clients_v6 accept' % api)
    lines.append('        tcp dport %d reject with tcp reset' % api)
    if up is not None and up != api:
        lines.append('        # vLLM behind the proxy (port %d): loopback only' % up)
        lines.append('        tcp dport %d reject with tcp reset' % up)
    lines += [
        '        # master port %d (TCPStore, all interfaces): the fabric addresses only' % master,
        '        tcp dport %d ip saddr @fabric_v4 accept' % master,
        '        tcp dport %d reject with tcp reset' % master,
    ]
    client_sets = {'clients': ('api_clients', v4, v6), 'monitoring': ('monitoring_clients', mon[0], mon[1])}
    for port, allow, name in _services(spec, errors):
        if allow in client_sets:
            set_name, s4, s6 = client_sets[allow]
            who = ('%s networks %s' % ('allowed' if allow == 'clients' else 'monitoring', ', '.join(s4 + s6))
                   if (s4 or s6) else 'loopback only')
            lines.append('        # %s port %d: %s' % (name, port, who))
            if s4:
                lines.append('        tcp dport %d ip saddr @%s_v4 accept' % (port, set_name))
            if s6:
                lines.append('        tcp dport %d ip6 saddr @%s_v6 accept' % (port, set_name))
        elif allow == 'fabric':
            lines.append('        # %s port %d: the fabric addresses only' % (name, port))
            lines.append('        tcp dport %d ip saddr @fabric_v4 accept' % port)
        else:
            lines.append('        # %s port %d: loopback only' % (name, port))
        lines.append('        tcp dport %d reject with tcp reset' % port)
    vrrp = _addrs(spec.get('vrrp_peers'), errors, 'vrrp_peers')
    if vrrp:
        lines += [
            '        # VRRP (the clients\' one address): the other router hosts only',
            '        ip protocol vrrp ip saddr %s accept' % _anonymous(vrrp),
            '        ip protocol vrrp drop',
        ]
    if eph and self_addr:
        lines += [
            '        # ephemeral inter-node ports on this node\'s fabric address (ZMQ, Gloo, NCCL sockets)',
            '        ip daddr %s tcp dport %d-%d ip saddr @fabric_v4 accept' % (self_addr, eph[0], eph[1]),
            '        ip daddr %s tcp dport %d-%d reject with tcp reset' % (self_addr, eph[0], eph[1]),
        ]
    lines += ['    }']
    ports, uids = _owned(spec, errors)
    served, servers = _servers(spec, errors)
    output: list[str] = []
    if ports:
        output += [
            '        # loopback ports owned (vLLM, vllm-router admin/metrics): sockets of uid %s only'
            % ', '.join(str(u) for u in uids),
            '        oif "lo" tcp dport %s meta skuid != %s reject with tcp reset' % (_anonymous(ports), _anonymous(uids)),
        ]
    if served:
        output += [
            '        # the ranks\' control plane (TCPStore master port; inter-node ports on the fabric addresses): root only',
            '        tcp dport %d ct state new meta skuid != 0 reject with tcp reset' % master,
        ]
        if eph:
            # new connections only (both rules): the range holds every local client's own ports, and a server's
            # replies to a client on this node's fabric address (nginx's worker, the node exporter) go to one of them
            output.append('        ip daddr @fabric_v4 tcp dport %d-%d ct state new meta skuid != 0 reject with tcp reset' % eph)
        output += [
            '        # ports the collection\'s services listen on: SYN-ACKs from their sockets only (uid %s); a local user'
            % ', '.join(servers),
            '        # listening on one while its service is down completes no handshake, receives nothing',
            '        tcp sport %s tcp flags syn meta skuid %s accept' % (_anonymous(served), _anonymous(servers)),
            '        tcp sport %s tcp flags syn drop' % _anonymous(served),
        ]
    if output:
        lines += ['', '    chain output {', '        type filter hook output priority filter; policy accept;'] + output
        lines += ['    }']
    return '\n'.join(lines) + '\n', table


def _set_lines(name: str, v4: list[str], v6: list[str]) -> list[str]:
    """The named interval sets <name>_v4 / <name>_v6 (only those with elements)."""
    lines: list[str] = []
    for suffix, kind, nets in (('v4', 'ipv4_addr', v4), ('v6', 'ipv6_addr', v6)):
        if nets:
            lines += ['    set %s_%s {' % (name, suffix), '        type %s' % kind, '        flags interval',
                      '        elements = { %s }' % ', '.join(nets), '    }', '']
    return lines


def ruleset_digest(spec: dict[str, Any]) -> str:
    """sha256 of the table body (what the live table's comment must carry)."""
    body, _t = _body(spec)
    return hashlib.sha256(body.encode('utf-8')).hexdigest()


def _table_block(spec: dict[str, Any], body: str, digest: str) -> str:
    """The `table ... { comment; body }` block, as rendered into the file."""
    fam = spec.get('family', 'inet')
    return ('table %s %s {\n    comment "%s%s"\n\n' % (fam, spec['table'], COMMENT_PREFIX, digest)) + body + '}\n'


def render_ruleset(spec: dict[str, Any]) -> str:
    """spec: table, family (inet), api_port, upstream_port (or None), master_port, allowed_networks,
    fabric_addresses (both nodes), self_address (this node's fabric IP), ephemeral_ports ("lo-hi" or None),
    service_ports (optional list of {port, allow: clients|monitoring|fabric|loopback, name}), monitoring_networks
    (optional CIDRs: the "monitoring" set), vrrp_peers (optional IPv4 addresses: VRRP accepted from them only),
    owned_ports / owner_uids (optional: loopback ports only these socket owners may connect to; uid 0 required),
    server_uids (optional: user ids or "low-high" ranges whose sockets alone may answer on the served ports - the API,
    upstream, master and owned ports and served_ports; uid 0 required; also restricts the control plane to root).
    Returns the text of the file loaded with `nft -f`."""
    errors = validate(spec)
    if errors:
        raise RulesetError(errors)
    body, table = _body(spec)
    digest = hashlib.sha256(body.encode('utf-8')).hexdigest()
    fam = spec.get('family', 'inet')
    head = [
        '#!/usr/sbin/nft -f',
        '# dgxspark.ds4 host firewall (role dgxspark.ds4.firewall); rendered by Ansible, do not edit.',
        '# Touches only table %s %s: create-if-missing, delete, redefine -- one atomic transaction.' % (fam, table),
        '# Nothing else is flushed. Loaded at boot by dgxspark-ds4-firewall.service.',
        'table %s %s' % (fam, table),
        'delete table %s %s' % (fam, table),
    ]
    return '\n'.join(head) + '\n' + _table_block(spec, body, digest)


def live_digest(listing: str | None) -> str | None:
    """The sha256 in the comment of `nft list table ...` output, or None."""
    m = re.search(r'comment\s+"%s([0-9a-f]{64})"' % re.escape(COMMENT_PREFIX), listing or '')
    return m.group(1) if m else None


_ELEMENTS_RE = re.compile(r'elements\s*=\s*\{([^}]*)\}', re.S)


def _element(item: str) -> str:
    """A set element as nft prints it: a host prefix (/32, /128) is printed as the bare address."""
    try:
        net = ipaddress.ip_network(item, strict=False)
    except ValueError:
        return item
    return str(net.network_address) if net.prefixlen == net.max_prefixlen else str(net)


def normalise_listing(text: str | None) -> list[str]:
    """Lines of an nftables table as `nft list table` prints it or as the file defines it, compared as text:
    comments (`# ...`), blank lines and indentation dropped, runs of blanks collapsed, set elements
    (which nft may print in hash order or wrapped over several lines, a host prefix as its bare address)
    sorted on one line."""
    def _sorted_elements(match: re.Match[str]) -> str:
        items = sorted(_element(item.strip()) for item in match.group(1).replace('\n', ' ').split(',') if item.strip())
        return 'elements = { %s }' % ', '.join(items)

    text = '\n'.join(line for line in (text or '').splitlines() if not line.strip().startswith('#'))
    text = _ELEMENTS_RE.sub(_sorted_elements, text)
    return [' '.join(line.split()) for line in text.splitlines() if line.strip()]


def expected_listing(spec: dict[str, Any]) -> list[str]:
    """What `nft list table <family> <table>` prints once the rendered file is loaded (normalised lines)."""
    errors = validate(spec)
    if errors:
        raise RulesetError(errors)
    body, dummy = _body(spec)
    return normalise_listing(_table_block(spec, body, hashlib.sha256(body.encode('utf-8')).hexdigest()))


def listing_differences(expected: list[str], live: list[str]) -> list[str]:
    """Differences between the expected and the live normalised listings, as unified-diff lines
    (`-` rendered but not live, `+` live but not rendered); empty when they are equal."""
    if expected == live:
        return []
    return [line for line in difflib.unified_diff(expected, live, 'rendered', 'live', n=0, lineterm='')
            if line[:1] in '-+' and not line.startswith(('---', '+++'))]
