# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The clients' one address on two (or more) router hosts: keepalived's VRRP configuration, rendered from
structured input. Pure Python, no Ansible imports (unit-tested with plain pytest).

One VRRP instance holds the VIP (``ds4_router_vip``, address/prefix) on the router host that is MASTER. Every
router host starts ``state BACKUP`` with ``nopreempt``: a host that comes back never takes the address back
(nothing moves when it returns); priorities by the order of the router hosts only decide who wins when both
start at once. Adverts are unicast between the router hosts' own addresses (``unicast_src_ip``/``unicast_peer``:
no multicast on the client network), every ``advert_int`` (1 s): a BACKUP takes the address 3 adverts plus a
skew after the last one it heard (about 3.5 s). A ``vrrp_script`` asks the local router front (and through it
the router) for ``/liveness`` every second (not ``/health``: vllm-router answers it 503 as soon as one listed
worker is unhealthy): a router or front that stops answering puts its host in FAULT, which gives the address away
although the host lives.

``vip_errors`` is the inventory check (``pairs.router_plan``, before any host changes); ``render`` the file the
router role writes (checked on the host with ``keepalived -t -f`` before it replaces the old one).
"""


import ipaddress
import re
from collections.abc import Iterable
from typing import Any

INSTANCE = 'dgxspark_ds4_router'
SCRIPT = 'dgxspark_ds4_router_front'
# VRRP v2 PASS authentication: keepalived uses the first 8 characters only.
AUTH_PASS_RE = re.compile(r'^[A-Za-z0-9_.:+=@%/-]{1,8}$')
IFNAME_RE = re.compile(r'^[A-Za-z0-9_.:@-]{1,15}$')
NAME_RE = re.compile(r'^[A-Za-z0-9_.-]{1,64}$')
TOP_PRIORITY = 150
PRIORITY_STEP = 10


class KeepalivedError(Exception):
    def __init__(self, errors: Iterable[str]) -> None:
        self.errors = list(errors)
        super(KeepalivedError, self).__init__('\n'.join(self.errors))


def parse_vip(value: Any) -> tuple[ipaddress.IPv4Interface | None, str | None]:
    """(ipaddress.IPv4Interface, None) or (None, why): the VIP must be written address/prefix, IPv4, a host
    address of its network (not the network or broadcast address)."""
    text = str(value or '').strip()
    if '/' not in text:
        return None, 'must be address/prefix on the client network (e.g. 192.0.2.100/24)'
    try:
        iface = ipaddress.ip_interface(text)
    except ValueError:
        return None, 'not an address/prefix'
    if iface.version != 4:
        return None, 'IPv4 only (one VRRP v2 instance)'
    net = iface.network
    if net.prefixlen < 31 and iface.ip in (net.network_address, net.broadcast_address):
        return None, 'is the network or broadcast address of %s' % net
    if iface.ip.is_loopback or iface.ip.is_multicast or iface.ip.is_unspecified or iface.ip.is_link_local:
        return None, 'not a unicast address of a client network'
    return iface, None


def auth_pass_error(value: Any) -> str | None:
    """Why `value` cannot be the VRRP PASS secret (None when it can); never repeats the value."""
    if not AUTH_PASS_RE.match(str(value or '')):
        return ('1-8 characters of letters, digits and _.:+=@%/- (VRRP PASS authentication uses 8 characters), the '
                'same on every router host')
    return None


def priority(index: int) -> int:
    """The VRRP priority of the router host at `index` in the router host list (the first one highest)."""
    return max(TOP_PRIORITY - PRIORITY_STEP * index, 1)


def vip_errors(vip: Any, router_addresses: list[tuple[str, str | None]], taken: dict[str, str]) -> list[str]:
    """The inventory check of ds4_router_vip. router_addresses: [(host, address)] of the router hosts;
    taken: {address: host} of every address a Spark already uses (ansible_host, router and fabric addresses)."""
    iface, why = parse_vip(vip)
    if iface is None:
        return ['ds4_router_vip = %r: %s. Fix: set ds4_router_vip to a free address of the router hosts\' client '
                'network with its prefix, e.g. 192.0.2.100/24' % (vip, why)]
    errors = []
    outside = [(h, a) for h, a in router_addresses
               if a is None or ipaddress.ip_address(str(a)) not in iface.network]
    if outside:
        errors.append('ds4_router_vip = %r: the router hosts %s are not in its network %s; VRRP moves the address '
                      'between hosts of one client network. Fix: a free address of the network the router hosts\' '
                      'addresses are in (ds4_router_address / ansible_host), with that network\'s prefix'
                      % (vip, ', '.join('%s (%s)' % (h, a) for h, a in outside), iface.network))
    owner = taken.get(str(iface.ip))
    if owner:
        errors.append('ds4_router_vip = %r: %s is already the address of %s; the VIP must be an address no host '
                      'has. Fix: pick a free address of %s' % (vip, iface.ip, owner, iface.network))
    return errors


def validate(spec: dict[str, Any]) -> list[str]:
    """Errors of a render spec (see render)."""
    errors = []
    iface, why = parse_vip(spec.get('vip'))
    if iface is None:
        errors.append('vip = %r: %s' % (spec.get('vip'), why))
    src = spec.get('unicast_src_ip')
    peers = spec.get('unicast_peers') or []
    addrs = []
    for label, value in [('unicast_src_ip', src)] + [('unicast_peers entry', p) for p in peers]:
        try:
            addr = ipaddress.ip_address(str(value))
        except ValueError:
            errors.append('%s = %r: not an IP address' % (label, value))
            continue
        if iface is not None and addr not in iface.network:
            errors.append('%s = %s: not in the VIP\'s network %s' % (label, addr, iface.network))
        if iface is not None and addr == iface.ip:
            errors.append('%s = %s: is the VIP itself' % (label, addr))
        addrs.append(str(addr))
    if not peers:
        errors.append('unicast_peers is empty: VRRP needs the other router hosts')
    if len(set(addrs)) != len(addrs):
        errors.append('unicast_src_ip and unicast_peers repeat an address (%s)' % ', '.join(addrs))
    if not IFNAME_RE.match(str(spec.get('interface') or '')):
        errors.append('interface = %r: not a network interface name' % (spec.get('interface'),))
    vrid = spec.get('virtual_router_id')
    if isinstance(vrid, bool) or not isinstance(vrid, int) or not 1 <= vrid <= 255:
        errors.append('virtual_router_id = %r: an integer 1-255, the same on every router host and unique on the '
                      'client network' % (vrid,))
    prio = spec.get('priority')
    if isinstance(prio, bool) or not isinstance(prio, int) or not 1 <= prio <= 254:
        errors.append('priority = %r: an integer 1-254' % (prio,))
    for key, low in (('advert_int', 1), ('check_interval', 1), ('check_timeout', 1), ('check_fall', 1),
                     ('check_rise', 1)):
        value = spec.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            errors.append('%s = %r: an integer >= %d' % (key, value, low))
    why = auth_pass_error(spec.get('auth_pass'))
    if why:
        errors.append('auth_pass: %s' % why)
    check = spec.get('check_command') or []
    if not check or not all(isinstance(w, str) and w and '"' not in w and '\n' not in w for w in check) \
            or not str(check[0]).startswith('/'):
        errors.append('check_command = %r: an absolute path and its arguments, no quotes' % (check,))
    if not NAME_RE.match(str(spec.get('name') or '')):
        errors.append('name = %r: letters, digits, _ . - (the host name, keepalived\'s router_id)' % (spec.get('name'),))
    if not NAME_RE.match(str(spec.get('script_user') or '')):
        errors.append('script_user = %r: a user name' % (spec.get('script_user'),))
    return errors


def render(spec: dict[str, Any]) -> str:
    """spec: name (this host: keepalived's router_id), interface, vip (address/prefix), virtual_router_id, priority,
    advert_int, unicast_src_ip, unicast_peers (list), auth_pass, check_command (argv list), check_interval, check_timeout,
    check_fall, check_rise, script_user. Returns the text of keepalived.conf; raises KeepalivedError."""
    errors = validate(spec)
    vip = parse_vip(spec['vip'])[0]
    if errors or vip is None:  # validate() names a bad vip: never None here without an error
        raise KeepalivedError(errors)
    lines = [
        '# dgxspark.ds4 (role dgxspark.ds4.router): the clients\' one address %s on the router hosts (VRRP).' % vip,
        '# Rendered by Ansible from plugins/plugin_utils/keepalived_render.py; do not edit.',
        'global_defs {',
        '    router_id %s' % spec['name'],
        '    script_user %s' % spec['script_user'],
        '    enable_script_security',
        '}',
        '',
        '# the local router front answers /liveness through to vllm-router; failing: FAULT, the address goes',
        'vrrp_script %s {' % SCRIPT,
        '    script "%s"' % ' '.join(spec['check_command']),
        '    interval %d' % spec['check_interval'],
        '    timeout %d' % spec['check_timeout'],
        '    fall %d' % spec['check_fall'],
        '    rise %d' % spec['check_rise'],
        '}',
        '',
        'vrrp_instance %s {' % INSTANCE,
        '    # BACKUP everywhere with nopreempt: a host that comes back does not take the address back',
        '    state BACKUP',
        '    nopreempt',
        '    interface %s' % spec['interface'],
        '    virtual_router_id %d' % spec['virtual_router_id'],
        '    priority %d' % spec['priority'],
        '    advert_int %d' % spec['advert_int'],
        '    unicast_src_ip %s' % spec['unicast_src_ip'],
        '    unicast_peer {',
    ]
    lines += ['        %s' % p for p in spec['unicast_peers']]
    lines += [
        '    }',
        '    authentication {',
        '        auth_type PASS',
        '        auth_pass %s' % spec['auth_pass'],
        '    }',
        '    virtual_ipaddress {',
        '        %s dev %s' % (vip.with_prefixlen, spec['interface']),
        '    }',
        '    track_script {',
        '        %s' % SCRIPT,
        '    }',
        '}',
    ]
    return '\n'.join(lines) + '\n'


def interface_of(address: str, addr_json: list[dict[str, Any]] | None) -> str | None:
    """The interface carrying `address` in `ip -j -4 addr show` output (parsed list); None when none does."""
    for link in addr_json or []:
        for info in link.get('addr_info') or []:
            if str(info.get('local')) == str(address):
                return link.get('ifname')
    return None


def host_config(spec: dict[str, Any], addr_json: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What the router role writes on one router host: {'errors', 'interface', 'priority', 'text'}.

    spec as for render, with ``hosts`` ([{host, address}] of every router host, in priority order) in place of
    unicast_src_ip, unicast_peers and priority: this host (``name``) sends from its own address to the others,
    with the priority of its place in the list. An empty ``interface`` is discovered as the one carrying this host's
    address in ``addr_json`` (``ip -j -4 addr show``, parsed). Errors name the role variable and the fix."""
    spec = dict(spec)
    hosts = spec.pop('hosts', None) or []
    names = [str(h.get('host')) for h in hosts]
    me = str(spec.get('name'))
    out: dict[str, Any] = {'errors': [], 'interface': None, 'priority': None, 'text': None}
    if me not in names:
        out['errors'].append('router_vrrp_hosts = %r does not list %s, where keepalived is configured. Fix: run the '
                             'router role with VRRP on the router hosts only (ds4_router_hosts)' % (names, me))
        return out
    index = names.index(me)
    spec['unicast_src_ip'] = hosts[index].get('address')
    spec['unicast_peers'] = [h.get('address') for i, h in enumerate(hosts) if i != index]
    spec['priority'] = out['priority'] = priority(index)
    if not spec.get('interface'):
        found = interface_of(spec['unicast_src_ip'], addr_json)
        if found is None:
            out['errors'].append('router_vrrp_interface is empty and no interface of %s carries its router address %s '
                                 '(ds4_router_address, else ansible_host). Fix: set router_vrrp_interface to the '
                                 'interface on the client network, or ds4_router_address to an address of this host'
                                 % (me, spec['unicast_src_ip']))
            return out
        spec['interface'] = found
    out['interface'] = spec['interface']
    try:
        out['text'] = render(spec)
    except KeepalivedError as exc:
        out['errors'] = ['router_vrrp (keepalived on %s): %s' % (me, e) for e in exc.errors]
    return out
