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

Returns the pair list ``router_config.py`` takes: name, head, worker, hosts, api_host (the head's
``ansible_host``, else its inventory name), api_port, served_model, profile, master_port,
fabric_network. Not wired into ``dgxspark.ds4.config`` yet (roles/router/README.md says how it will be).
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import ipaddress
import re

PAIR_GROUP_RE = re.compile(r'^spark_pair(\d+|_[A-Za-z0-9_]+)$')
DEFAULT_MASTER_PORT = 29501
DEFAULT_API_PORT = 8000


def _layered(hv, *path):
    """A profile-layer value: ds4_site_overrides wins over ds4_profile_config (None when neither has it)."""
    for layer in ('ds4_site_overrides', 'ds4_profile_config'):
        node = hv.get(layer)
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None:
            return node
    return None


def host_facts(name, hv):
    """What pair validation reads of one host."""
    served = _layered(hv, 'serve_args', 'served-model-name')
    if isinstance(served, list):
        served = served[0] if served else None
    if served is None:
        served = _layered(hv, 'model', 'serve_arg') or _layered(hv, 'model', 'name')
    master = _layered(hv, 'master_port')
    api_port = _layered(hv, 'api', 'port')
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


def _network(fact):
    try:
        return ipaddress.ip_interface('%s/%s' % (fact['fabric_ip'], fact['fabric_prefix'])).network
    except (ValueError, TypeError):
        return None


def pair_groups(groups):
    return sorted(g for g in (groups or {}) if PAIR_GROUP_RE.match(g))


def _check_pair(name, hosts, facts):
    errors = []
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


def validate_pairs(groups, hostvars):
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
    errors = []
    if not names:
        members = {'spark': sorted(spark)}
        names = ['spark']
    else:
        where = {}
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
    pairs = []
    for g in names:
        errs, pair = _check_pair(g, sorted(members[g]), facts)
        errors.extend(errs)
        if pair:
            pairs.append(pair)
    errors.extend(_cross_pair_errors(pairs, facts))
    return (pairs if not errors else []), errors


def _cross_pair_errors(pairs, facts):
    errors = []
    # ports on one machine: two inventory hosts with the same ansible_host are one machine
    for port_key, what in (('master_port', 'master port'), ('api_port', 'API port')):
        used = {}
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
    by_model = {}
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


def router_needed(pairs):
    """A router only when there is more than one pair."""
    return len(pairs) > 1
