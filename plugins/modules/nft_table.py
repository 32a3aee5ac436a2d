#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: nft_table
short_description: The collection's own nftables table (API, master port, inter-node ports), rendered, persisted and loaded
version_added: 0.1.0
description:
  - Renders the ruleset of one nftables table from structured options (logic in
    C(plugins/module_utils/_security/nft_ruleset.py)), writes it to O(path) and loads it with C(nft -f) only when the file
    changed or the live table differs from it.
  - The live table (C(nft list table), normalised) is compared with what the rendered file defines, rule by rule
    and set element by set element, not only the sha256 the table's comment carries; a chain flushed, one rule
    deleted or added by hand, or the table deleted is a difference and reloads the table (RV(live_differences)).
    After a load the live table must equal the rendered one, or the module fails naming the lines that differ.
  - The file is one atomic transaction touching only C(table <family> <table>) (create if missing, delete,
    redefine); nothing else is ever flushed, so a user's own tables and Docker's chains stay as they are.
  - The ruleset is checked with C(nft -c -f) before the file is replaced.
  - With O(state=absent) the table is deleted (if present) and the file removed.
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Reads the file and the live table; does not write or load.
  diff_mode:
    support: full
options:
  state:
    description: V(present) renders, writes and loads; V(absent) deletes the table and the file.
    type: str
    choices: [present, absent]
    default: present
  table:
    description: Table name (owned by the collection; nothing else is touched).
    type: str
    default: dgxspark_ds4
  family:
    description: Table family (C(inet) covers IPv4 and IPv6).
    type: str
    choices: [inet]
    default: inet
  path:
    description: Where the ruleset file is written (mode 0644, root); the boot unit loads it.
    type: path
    default: /etc/dgxspark-ds4/nftables.conf
  api_port:
    description: The API port clients use. Open only to O(allowed_networks) (and loopback).
    type: int
  upstream_port:
    description: vLLM's loopback port behind the proxy; rejected from anything but loopback. Omit when not proxied.
    type: int
  master_port:
    description: The TCPStore port of the rendezvous; open only to O(fabric_addresses) (and loopback).
    type: int
  allowed_networks:
    description: CIDRs allowed to reach O(api_port). Empty = loopback only.
    type: list
    elements: str
    default: []
  fabric_addresses:
    description: The fabric IPv4 addresses of every node of the pair.
    type: list
    elements: str
    default: []
  self_address:
    description: This node's fabric IPv4 address (the ephemeral-port rule is scoped to it).
    type: str
  ephemeral_ports:
    description: Port range (C(low-high)) of the inter-node ephemeral sockets on the fabric address; empty = no rule.
    type: str
  service_ports:
    description:
      - Further TCP ports the collection opens (role C(dgxspark.ds4.monitoring) - Prometheus, the node exporter).
      - Each is open only to its set, rejected for everyone else; loopback is always allowed.
    type: list
    elements: dict
    default: []
    suboptions:
      port:
        description: TCP port.
        type: int
        required: true
      allow:
        description:
          - V(clients) = O(allowed_networks) (none = loopback only); V(monitoring) = O(monitoring_networks) (none =
            loopback only); V(fabric) = O(fabric_addresses); V(loopback) = nobody but loopback.
        type: str
        required: true
        choices: [clients, monitoring, fabric, loopback]
      name:
        description: What listens there (a comment in the ruleset).
        type: str
        default: service
  monitoring_networks:
    description: CIDRs allowed to reach the V(monitoring) service ports (Prometheus). Empty = loopback only.
    type: list
    elements: str
    default: []
  owned_ports:
    description:
      - Loopback TCP ports only the sockets of O(owner_uids) may connect to (chain C(output), C(oif "lo"), C(meta skuid)) -
        vLLM's port, vllm-router's admin and metrics ports. Empty = no output chain.
    type: list
    elements: int
    default: []
  owner_uids:
    description: The user ids allowed on O(owned_ports); must include 0 (root) when O(owned_ports) is set.
    type: list
    elements: int
    default: []
  served_ports:
    description:
      - Ports the collection's services listen on beyond O(api_port), O(upstream_port), O(master_port) and
        O(owned_ports) (the node exporter, Prometheus, the router's front), answered only by O(server_uids).
    type: list
    elements: int
    default: []
  server_uids:
    description:
      - User ids (or C(low-high) ranges, e.g. systemd's DynamicUser range C(61184-65519)) whose sockets alone may answer
        on the served ports (chain C(output)) - a SYN-ACK from any other socket, or from none (a SYN cookie), is dropped,
        so a local user listening on a served port while its service is down completes no handshake. Must include
        C(0). Also restricts the master port and the inter-node ports to root's sockets. Empty = no such rules.
    type: list
    elements: str
    default: []
  vrrp_peers:
    description:
      - The other router hosts' IPv4 addresses (role C(dgxspark.ds4.router) with C(ds4_router_vip)) - VRRP (IP protocol
        112) is accepted from them and dropped from anyone else. Empty = no VRRP rule.
    type: list
    elements: str
    default: []
  nft_bin:
    description: The nft binary. Default found on PATH (C(/usr/sbin/nft)).
    type: path
"""

EXAMPLES = r"""
- name: Firewall table of the pair
  dgxspark.ds4.nft_table:
    api_port: 8000
    upstream_port: 8001
    master_port: 29501
    allowed_networks: [192.168.1.0/24]
    fabric_addresses: [192.168.100.10, 192.168.100.11]
    self_address: 192.168.100.10
    ephemeral_ports: 32768-60999
    monitoring_networks: [192.168.1.50/32]
    service_ports:
      - {port: 9090, allow: monitoring, name: prometheus}
      - {port: 9100, allow: fabric, name: node exporter}
      - {port: 3000, allow: loopback, name: grafana}
    owned_ports: [8001]
    owner_uids: [0, 33]
    served_ports: [9090, 9100]
    server_uids: ["0", "111"]
"""

RETURN = r"""
digest:
  description: sha256 of the rendered table body (also in the live table's comment).
  type: str
  returned: state=present
file_changed:
  description: Whether the ruleset file was (or in check mode would be) rewritten.
  type: bool
  returned: always
loaded:
  description: Whether C(nft -f) ran (or in check mode would run).
  type: bool
  returned: always
live_before:
  description: The digest found in the live table before this run (null when the table was absent or differs in format).
  type: str
  returned: always
live_differences:
  description:
    - The lines by which the live table differed from the rendered one before this run (C(-) rendered but not live,
      C(+) live but not rendered; normalised C(nft list table) lines). Empty when they were equal.
  type: list
  elements: str
  returned: state=present
  sample: ["-tcp dport 29501 reject with tcp reset"]
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._security.nft_ruleset import (
    RulesetError,
    expected_listing,
    listing_differences,
    live_digest,
    normalise_listing,
    render_ruleset,
    ruleset_digest,
)


def _read(path):
    try:
        with open(path, 'r') as f:
            return f.read()
    except (IOError, OSError):
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', choices=['present', 'absent'], default='present'),
            table=dict(type='str', default='dgxspark_ds4'),
            family=dict(type='str', choices=['inet'], default='inet'),
            path=dict(type='path', default='/etc/dgxspark-ds4/nftables.conf'),
            api_port=dict(type='int'),
            upstream_port=dict(type='int'),
            master_port=dict(type='int'),
            allowed_networks=dict(type='list', elements='str', default=[]),
            fabric_addresses=dict(type='list', elements='str', default=[]),
            self_address=dict(type='str'),
            ephemeral_ports=dict(type='str'),
            service_ports=dict(type='list', elements='dict', default=[], options=dict(
                port=dict(type='int', required=True),
                allow=dict(type='str', required=True, choices=['clients', 'monitoring', 'fabric', 'loopback']),
                name=dict(type='str', default='service'),
            )),
            monitoring_networks=dict(type='list', elements='str', default=[]),
            owned_ports=dict(type='list', elements='int', default=[]),
            owner_uids=dict(type='list', elements='int', default=[]),
            served_ports=dict(type='list', elements='int', default=[]),
            server_uids=dict(type='list', elements='str', default=[]),
            vrrp_peers=dict(type='list', elements='str', default=[]),
            nft_bin=dict(type='path'),
        ),
        required_if=[('state', 'present', ('api_port', 'master_port'))],
        supports_check_mode=True,
    )
    p = module.params
    nft = p['nft_bin'] or module.get_bin_path('nft', required=True, opt_dirs=['/usr/sbin', '/sbin'])
    ident = [p['family'], p['table']]
    rc, out, err = module.run_command([nft, 'list', 'table'] + ident)
    live_present = rc == 0
    before_digest = live_digest(out) if live_present else None
    existing = _read(p['path'])

    if p['state'] == 'absent':
        changed = live_present or existing is not None
        if changed and not module.check_mode:
            if live_present:
                rc, out, err = module.run_command([nft, 'delete', 'table'] + ident)
                if rc != 0:
                    module.fail_json(msg='nft delete table %s failed: %s' % (' '.join(ident), (err or out).strip()))
            if existing is not None:
                os.unlink(p['path'])
        module.exit_json(changed=changed, file_changed=existing is not None, loaded=False, live_before=before_digest,
                         diff={'before': existing or '', 'after': ''})

    spec = dict(table=p['table'], family=p['family'], api_port=p['api_port'], upstream_port=p['upstream_port'],
                master_port=p['master_port'], allowed_networks=p['allowed_networks'],
                fabric_addresses=p['fabric_addresses'], self_address=p['self_address'],
                ephemeral_ports=p['ephemeral_ports'], service_ports=p['service_ports'], vrrp_peers=p['vrrp_peers'],
                monitoring_networks=p['monitoring_networks'], owned_ports=p['owned_ports'], owner_uids=p['owner_uids'],
                served_ports=p['served_ports'], server_uids=p['server_uids'])
    try:
        content = render_ruleset(spec)
        expected = expected_listing(spec)
    except RulesetError as exc:
        module.fail_json(msg='dgxspark.ds4.nft_table: bad input:\n- ' + '\n- '.join(exc.errors), errors=exc.errors)
    digest = ruleset_digest(spec)
    file_changed = existing != content
    # The live rules themselves, not only the digest comment (a flushed chain keeps the comment).
    live_differences = listing_differences(expected, normalise_listing(out) if live_present else [])
    need_load = file_changed or bool(live_differences)
    result = dict(changed=file_changed or need_load, file_changed=file_changed, loaded=need_load, digest=digest,
                  live_before=before_digest, live_differences=live_differences, path=p['path'],
                  diff={'before': existing or '', 'after': content, 'before_header': p['path'], 'after_header': p['path']})
    if module.check_mode or not result['changed']:
        module.exit_json(**result)

    dest_dir = os.path.dirname(p['path']) or '.'
    if not os.path.isdir(dest_dir):
        module.fail_json(msg='directory %s does not exist (the role creates it)' % dest_dir)
    fd, tmp = tempfile.mkstemp(prefix='.nftables.', dir=dest_dir)
    try:
        with os.fdopen(fd, 'w') as f:
            f.write(content)
        os.chmod(tmp, 0o644)
        rc, out, err = module.run_command([nft, '-c', '-f', tmp])
        if rc != 0:
            module.fail_json(msg='nft -c refused the rendered ruleset (file not replaced): %s' % (err or out).strip(),
                             ruleset=content)
        if file_changed:
            module.atomic_move(tmp, p['path'])
            tmp = None
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
    rc, out, err = module.run_command([nft, '-f', p['path']])
    if rc != 0:
        module.fail_json(msg='nft -f %s failed: %s' % (p['path'], (err or out).strip()), **result)
    rc, out, err = module.run_command([nft, 'list', 'table'] + ident)
    after = live_digest(out) if rc == 0 else None
    if after != digest:
        module.fail_json(msg='after nft -f, table %s carries digest %s, expected %s (does this kernel keep table comments? '
                             'Linux >= 5.10 needed)' % (' '.join(ident), after, digest), **result)
    still = listing_differences(expected, normalise_listing(out))
    if still:
        module.fail_json(msg='after nft -f %s, the live table %s still differs from the rendered one (- rendered, + live): %s. '
                             'Something else rewrites this table (another tool or a service reloading its own copy); '
                             'only the collection may manage it.' % (p['path'], ' '.join(ident), '; '.join(still)),
                         live_after=still, **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
