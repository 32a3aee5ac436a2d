# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Several TP=2 pairs in one inventory: which hosts form which pair, refused when they cannot.

Pure logic (no Ansible). Input: the inventory's groups (``groups``: group name -> host names, as
Ansible's magic variable gives them) and each host's variables (``hostvars``). The group ``spark``
holds every Spark; with more than two, each pair is a child group named ``spark_pair<N>`` or
``spark_pair_<name>`` (``PAIR_GROUP_RE``) holding one head (``ds4_node_rank: 0``) and one worker
(``ds4_node_rank: 1``). ``spark`` without such child groups is one pair (today's inventories:
spark1 + spark2), served without a router.

Refused, every problem at once, each naming the hosts and the fix: a pair without exactly one head and
one worker, a host in two pairs, a ``spark`` host in no pair (or a pair host outside ``spark``), the
fabric addresses of one pair in two subnets, a master port or API port used by two pairs on one
machine (same ``ansible_host``), replicas of one served model running different profiles.

Returns the pair list ``router_config.py`` takes: name, index, head, worker, hosts, api_host (the head's
``ansible_host``, else its inventory name), api_port (the port clients use on the head: the proxy's when
the API is exposed), served_model, profile, master_port, fabric_network. ``dgxspark.ds4.effective_config``
calls ``validate_pairs`` first, computes each host's configuration within its own pair and publishes
``pair_of`` / ``pairs`` / ``router_plan`` in ``ds4_effective``.
"""


import ipaddress
import re
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._security.tls_plan import is_ip
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import catalogue, keepalived_render

PAIR_GROUP_RE = re.compile(r'^spark_pair(\d+|_[A-Za-z0-9_]+)$')
DEFAULT_MASTER_PORT = 29501
DEFAULT_API_PORT = 8000
# the API proxy in front of vllm-router on its host (clients' endpoint with more than one pair)
DEFAULT_ROUTER_PORT = 8080


def _recipe_layer(hv: dict[str, Any]) -> dict[str, Any] | None:
    """The host's recipe layer as the config role resolves it (catalogue.resolve: the user's own ds4_profile_config,
    else the shipped recipe ds4_profile names, with ds4_model's checkpoint); None when it cannot be resolved (the
    config check names why)."""
    layer, _choice, _errors, _warnings = catalogue.resolve({key: hv.get(key) for key in (
        'ds4_profile', 'ds4_profile_config', 'ds4_model', 'ds4_model_revisions')})
    return layer if isinstance(layer, dict) else None


def _layered(layers: tuple[Any, ...], *path: str) -> Any:
    """A profile-layer value: ds4_site_overrides wins over the recipe layer (None when neither has it)."""
    for node in layers:
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None:
            return node
    return None


def host_facts(name: str, hv: dict[str, Any]) -> dict[str, Any]:
    """What pair validation reads of one host."""
    layers = (hv.get('ds4_site_overrides'), _recipe_layer(hv))
    served = _layered(layers, 'serve_args', 'served-model-name')
    if isinstance(served, list):
        served = served[0] if served else None
    if served is None:
        served = _layered(layers, 'model', 'serve_arg') or _layered(layers, 'model', 'name')
    master = _layered(layers, 'master_port')
    api_port = _layered(layers, 'api', 'port')
    return {
        'host': name,
        'rank': hv.get('ds4_node_rank'),
        'fabric_ip': hv.get('ds4_fabric_ip'),
        'fabric_prefix': hv.get('ds4_fabric_prefix'),
        'machine': hv.get('ansible_host') or name,
        'profile': hv.get('ds4_profile'),
        'served_model': served,
        'master_port': DEFAULT_MASTER_PORT if master is None else master,
        'api_port': DEFAULT_API_PORT if api_port is None else api_port,
    }


def _network(fact: dict[str, Any]) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_interface('%s/%s' % (fact['fabric_ip'], fact['fabric_prefix'])).network
    except (ValueError, TypeError):
        return None


def pair_groups(groups: dict[str, Any] | None) -> list[str]:
    return sorted(g for g in (groups or {}) if PAIR_GROUP_RE.match(g))


def _check_pair(name: str, hosts: list[str], facts: dict[str, dict[str, Any]]) -> tuple[list[str], dict[str, Any] | None]:
    errors: list[str] = []
    ranks = dict((h, facts[h]['rank']) for h in hosts)
    heads = [h for h in hosts if ranks[h] == 0]
    workers = [h for h in hosts if ranks[h] == 1]
    others = [h for h in hosts if ranks[h] not in (0, 1)]
    if len(hosts) != 2 or len(heads) != 1 or len(workers) != 1:
        errors.append('%s: %s; a pair is exactly one head (ds4_node_rank: 0) and one worker (ds4_node_rank: 1). '
                      'Fix: %s' % (name, ', '.join('%s rank %r' % (h, ranks[h]) for h in hosts) or 'no host',
                                   'put two Sparks in %s and set ds4_node_rank 0 on one and 1 on the other'
                                   % name if len(hosts) != 2 else
                                   'set ds4_node_rank 0 on one host of %s and 1 on the other%s'
                                   % (name, (' (%s: not 0 or 1)' % ', '.join(others)) if others else '')))
    nets = dict((h, _network(facts[h])) for h in hosts)
    bad = [h for h in hosts if nets[h] is None]
    for host in bad:
        errors.append('%s: %s has no valid fabric address (ds4_fabric_ip %r, ds4_fabric_prefix %r). Fix: set both in '
                      'host_vars/%s.yml' % (name, host, facts[host]['fabric_ip'], facts[host]['fabric_prefix'], host))
    distinct = sorted(set(str(n) for n in nets.values() if n is not None))
    if len(distinct) > 1:
        errors.append('%s: fabric addresses in two subnets (%s); the two ranks of a pair talk over one CX-7 link. '
                      'Fix: give both hosts of %s addresses in one subnet'
                      % (name, ', '.join('%s %s/%s' % (h, facts[h]['fabric_ip'], facts[h]['fabric_prefix'])
                                         for h in hosts), name))
    profiles = sorted(set(str(facts[h]['profile']) for h in hosts))
    if len(profiles) > 1:
        errors.append('%s: its hosts run different profiles (%s). Fix: one ds4_profile per pair'
                      % (name, ', '.join('%s %s' % (h, facts[h]['profile']) for h in hosts)))
    if errors:
        return errors, None
    head, worker = heads[0], workers[0]
    hf = facts[head]
    return [], {'name': name, 'head': head, 'worker': worker, 'hosts': [head, worker], 'api_host': hf['machine'],
                'api_port': hf['api_port'], 'served_model': hf['served_model'], 'profile': hf['profile'],
                'master_port': hf['master_port'], 'fabric_network': distinct[0]}


def validate_pairs(groups: dict[str, Any] | None, hostvars: dict[str, Any] | None) -> tuple[list[dict[str, Any]], list[str]]:
    """(pairs, errors): the pair list (sorted by name) and every problem (empty when valid)."""
    groups = groups or {}
    hostvars = hostvars or {}
    spark = list(groups.get('spark') or [])
    if not spark:
        return [], ['group spark: no host. Fix: list the Sparks under spark (one pair: spark1, spark2)']
    names = pair_groups(groups)
    members = dict((g, list(groups.get(g) or [])) for g in names)
    all_hosts = sorted(set(spark) | set(h for hs in members.values() for h in hs))
    facts = dict((h, host_facts(h, hostvars.get(h) or {})) for h in all_hosts)
    errors: list[str] = []
    if not names:
        if len(spark) > 2:
            return [], ['group spark holds %d hosts (%s) but no pair group; with more than two Sparks each pair is a '
                        'child group of spark named spark_pair<N> with one head (ds4_node_rank: 0) and one worker '
                        '(ds4_node_rank: 1). Fix: e.g. spark: {children: {spark_pair1: {hosts: {%s: {}, %s: {}}}, '
                        'spark_pair2: {hosts: {...}}}}' % (len(spark), ', '.join(spark), spark[0], spark[1])]
        members = {'spark': list(spark)}
        names = ['spark']
    else:
        where: dict[str, list[str]] = {}
        for g in names:
            for h in members[g]:
                where.setdefault(h, []).append(g)
        for h in sorted(where):
            if len(where[h]) > 1:
                errors.append('%s is in %s; a Spark belongs to one pair. Fix: keep it in one of them'
                              % (h, ' and '.join(where[h])))
            if h not in spark:
                errors.append('%s (in %s) is not in group spark. Fix: make %s a child group of spark'
                              % (h, where[h][0], where[h][0]))
        for h in sorted(set(spark) - set(where)):
            errors.append('%s is in spark but in no pair group (%s). Fix: add it to one of them, or a new '
                          'spark_pair<N> with its partner' % (h, ', '.join(names)))
    pairs: list[dict[str, Any]] = []
    for g in names:
        errs, pair = _check_pair(g, list(members[g]), facts)
        errors.extend(errs)
        if pair:
            pair['index'] = len(pairs)
            pairs.append(pair)
    errors.extend(_cross_pair_errors(pairs, facts))
    return (pairs if not errors else []), errors


def _cross_pair_errors(pairs: list[dict[str, Any]], facts: dict[str, dict[str, Any]]) -> list[str]:
    errors: list[str] = []
    # ports on one machine: two inventory hosts with the same ansible_host are one machine
    for port_key, what in (('master_port', 'master port'), ('api_port', 'API port')):
        used: dict[tuple[Any, Any], dict[str, set[str]]] = {}
        for pair in pairs:
            for h in (pair['hosts'] if port_key == 'master_port' else [pair['head']]):
                port = facts[h][port_key] if port_key == 'master_port' else pair['api_port']
                used.setdefault((facts[h]['machine'], port), {}).setdefault(pair['name'], set()).add(h)
        for (machine, port), by_pair in sorted(used.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
            hosts = set(h for hs in by_pair.values() for h in hs)
            if len(by_pair) > 1 and len(hosts) > 1:  # one host in two pairs is reported above
                errors.append('%s: %s %s used by pairs %s on the same machine (%s). Fix: give each pair on it its own '
                              '%s (ds4_site_overrides.%s)' % (machine, what, port, ' and '.join(sorted(by_pair)),
                                                              ', '.join(sorted(hosts)), what,
                                                              'master_port' if port_key == 'master_port' else 'api.port'))
    by_model: dict[Any, list[dict[str, Any]]] = {}
    for pair in pairs:
        by_model.setdefault(pair['served_model'], []).append(pair)
    for model in sorted(by_model, key=str):
        replicas = by_model[model]
        profiles = sorted(set(str(p['profile']) for p in replicas))
        if len(profiles) > 1:
            errors.append('replicas of %s run different profiles (%s); a router spreads one model over replicas that '
                          'must answer alike. Fix: the same ds4_profile on every pair serving %s'
                          % (model, ', '.join('%s %s' % (p['name'], p['profile']) for p in replicas), model))
    return errors


def pair_of(pairs: list[dict[str, Any]], host: str) -> dict[str, Any] | None:
    """The pair holding `host` (None when it is in none)."""
    for pair in pairs:
        if host in pair['hosts']:
            return pair
    return None


def router_needed(pairs: list[dict[str, Any]], enabled: Any = None) -> bool:
    """A router when there is more than one pair, or when asked (ds4_router_enabled: true)."""
    if enabled is None or str(enabled).lower() == 'auto':
        return len(pairs) > 1
    return bool(enabled)


def _router_hosts(pairs: list[dict[str, Any]], host: Any, hosts: Any, vip: Any) -> tuple[list[Any], list[str]]:
    """(router hosts, errors): ds4_router_hosts with a VIP (default the heads of the first two pairs), else the one
    ds4_router_host (default the first pair's head)."""
    heads = [p['head'] for p in pairs]
    listed = hosts not in (None, '', [])
    if listed and (isinstance(hosts, str) or not isinstance(hosts, (list, tuple))):
        return [], ['ds4_router_hosts = %r: must be a list of Sparks (the router hosts). Fix: e.g. [%s]'
                    % (hosts, ', '.join(heads[:2]))]
    if vip in (None, ''):
        if listed and len(hosts) > 1:
            return [], ['ds4_router_hosts = %r: several routers need the clients\' one address that moves between '
                        'them. Fix: set ds4_router_vip (a free address/prefix of the client network), or name one '
                        'host (ds4_router_host)' % (list(hosts),)]
        chosen = hosts[0] if listed else (host if host not in (None, '') else (heads[0] if heads else None))
        return [chosen], []
    if host not in (None, '') and not (listed and hosts[0] == host):
        return [], ['ds4_router_host = %r with ds4_router_vip set: the routers are ds4_router_hosts (default the heads of '
                    'the first two pairs, %s). Fix: remove ds4_router_host, or list the hosts in ds4_router_hosts'
                    % (host, ', '.join(heads[:2]))]
    chosen = list(hosts) if listed else heads[:2]
    if len(chosen) < 2 or len(set(chosen)) != len(chosen):
        return [], ['ds4_router_hosts = %r (ds4_router_vip set): the address moves between two or more distinct '
                    'router hosts%s. Fix: name two Sparks, best the heads of two pairs (%s)'
                    % (chosen, '' if listed else ', by default the heads of the first two pairs; the inventory has %d '
                       'pair(s)' % len(pairs), ', '.join(heads[:2]) or '?')]
    return chosen, []


def router_plan(pairs: list[dict[str, Any]], hostvars: dict[str, Any], enabled: Any = None, host: Any = None, port: Any = None,
                hosts: Any = None, vip: Any = None, vrrp_auth_pass: Any = None,
                scheme: str = 'http') -> tuple[dict[str, Any], list[str]]:
    """(plan, errors): where the routers run and how the heads let them in.

    enabled: ds4_router_enabled (None/'auto' = more than one pair); host: ds4_router_host (one router, default the
    first pair's head); hosts: ds4_router_hosts (with vip: the router hosts, default the heads of the first two
    pairs); vip: ds4_router_vip (address/prefix the router hosts hold by VRRP: the clients' one address); port:
    ds4_router_port (the router front on each router host; default DEFAULT_ROUTER_PORT); vrrp_auth_pass: role
    dgxspark.ds4.router's router_vrrp_auth_pass, required with a VIP (checked here, before any host changes; never
    repeated in a message). Each router host's address
    is its ds4_router_address (host or group variable), else its ansible_host, which must then be an IP.
    plan: enabled, host (the first router host), hosts, address (the first's), addresses (one per router host),
    vip (address/prefix or None), vrrp_hosts ([{host, address}] with a VIP: role dgxspark.ds4.router's
    router_vrrp_hosts), port, endpoint (what clients use), workers (one URL per pair, in pair order); scheme: https when
    the fronts serve TLS (ds4_tls), in the endpoint and the workers' URLs."""
    errors: list[str] = []
    if enabled is not None and not isinstance(enabled, bool) and str(enabled).lower() != 'auto':
        errors.append('ds4_router_enabled = %r: must be true, false or auto (a router when there is more than one '
                      'pair). Fix: remove it or set true/false' % (enabled,))
        enabled = None
    on = router_needed(pairs, enabled)
    heads = [p['head'] for p in pairs]
    chosen, host_errors = _router_hosts(pairs, host, hosts, vip) if on else ([host or (heads[0] if heads else None)], [])
    plan = {'enabled': on, 'host': chosen[0] if chosen else None, 'hosts': chosen, 'address': None, 'addresses': [],
            'vip': None, 'vrrp_hosts': [], 'port': DEFAULT_ROUTER_PORT if port is None else port, 'endpoint': None,
            'workers': ['%s://%s:%s' % (scheme, p['api_host'], p['api_port']) for p in pairs]}
    if not on:
        return plan, errors
    errors.extend(host_errors)
    all_hosts = [h for p in pairs for h in p['hosts']]
    var = 'ds4_router_hosts' if len(chosen) > 1 or hosts not in (None, '', []) else 'ds4_router_host'
    for name in chosen:
        if name not in all_hosts:
            errors.append('%s: %r is not a Spark of group spark (%s). Fix: name one of them, or remove it for the '
                          'default (%s)' % (var, name, ', '.join(all_hosts), heads[0] if heads else '?'))
    if errors:
        return plan, errors
    addresses: list[str | None] = []
    for name in chosen:
        hv = hostvars.get(name) or {}
        addr = hv.get('ds4_router_address') or hv.get('ansible_host')
        if not is_ip(addr):
            errors.append('ds4_router_address = %r: the heads let the router on %s in by its address, and %s has no IP '
                          'ansible_host (%r). Fix: set ds4_router_address (host_vars/%s.yml) to the IP %s reaches the '
                          'heads from' % (hv.get('ds4_router_address'), name, name, hv.get('ansible_host'), name, name))
        addresses.append(str(addr) if is_ip(addr) else None)
    seen: dict[str | None, str] = {}
    for name, addr in zip(chosen, addresses):
        if addr is not None and addr in seen:
            errors.append('ds4_router_address = %r on both %s and %s: each router host needs its own address (the heads '
                          'let each in, VRRP talks between them). Fix: set ds4_router_address in host_vars of each '
                          'router host, not in group_vars' % (addr, seen[addr], name))
        seen.setdefault(addr, name)
    if isinstance(plan['port'], bool) or not isinstance(plan['port'], int) or not 1 <= plan['port'] <= 65535:
        errors.append('ds4_router_port = %r: must be a port 1-65535 (the router front on %s). Fix: e.g. %d'
                      % (plan['port'], ', '.join(chosen), DEFAULT_ROUTER_PORT))
    else:
        for name in chosen:
            for p in pairs:
                if name in p['hosts'] and plan['port'] in (p['api_port'], p['master_port']):
                    errors.append('ds4_router_port = %r is already used on %s by pair %s (API, vLLM or master port). '
                                  'Fix: pick another port, e.g. %d' % (plan['port'], name, p['name'], DEFAULT_ROUTER_PORT))
    if vip not in (None, ''):
        taken: dict[str, str] = {}
        for name in sorted(hostvars):
            hv = hostvars[name] or {}
            for key in ('ansible_host', 'ds4_router_address', 'ds4_fabric_ip'):
                if is_ip(hv.get(key)):
                    taken.setdefault(str(hv.get(key)), '%s (%s)' % (name, key))
        errors.extend(keepalived_render.vip_errors(vip, list(zip(chosen, addresses)), taken))
        why = keepalived_render.auth_pass_error(vrrp_auth_pass)
        if why:
            errors.append('router_vrrp_auth_pass (%s): with ds4_router_vip the router hosts authenticate their VRRP '
                          'adverts with it; %s. Fix: set router_vrrp_auth_pass in group_vars/spark (vault it)'
                          % ('not set' if vrrp_auth_pass in (None, '') else 'value not shown', why))
        iface = keepalived_render.parse_vip(vip)[0]
        if not errors and iface is not None:  # no error: vip_errors parsed the VIP
            plan['vip'] = iface.with_prefixlen
            plan['vrrp_hosts'] = [{'host': h, 'address': a} for h, a in zip(chosen, addresses)]
    plan['addresses'] = addresses
    plan['address'] = addresses[0] if addresses else None
    front = str(plan['vip']).split('/', 1)[0] if plan['vip'] else plan['address']
    plan['endpoint'] = '%s://%s:%s' % (scheme, front, plan['port']) if front else None
    return plan, errors
