#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r'''
---
module: fabric_facts
short_description: Discover a DGX Spark's ConnectX-7 RoCE fabric and compute its per-node NCCL env
version_added: "0.1.0"
description:
  - Reads sysfs (under O(sysfs_root)) for the ConnectX-7 netdevs, their RoCE HCAs (both PCIe twins of a port),
    link state, speed, MTU and the RoCE v2 IPv4 GID index; finds the netdev holding the fabric IP from the
    IPv4 addresses given in O(interface_facts) or O(ipv4_by_ifname); reports whether O(dev_infiniband) exists.
  - Compares discovery with the inventory values in O(effective) (C(ds4_effective.fabric)); inventory wins,
    every disagreement is returned and emitted as a warning naming both values.
  - Runs the fabric checks and returns them as RV(findings); it never fails because of a finding (the role decides).
  - Computes the node's network env (RV(env), RV(env_file)) from inventory + discovery; writes nothing.
  - Logic lives in C(plugins/module_utils/_fabric/fabric_discovery.py) and C(nccl_preflight.py).
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Read-only (sysfs reads and pings); runs the same in check mode.
  diff_mode:
    support: none
    details: Changes nothing, so there is nothing to diff.
options:
  sysfs_root:
    description: Root of the sysfs tree; point it at a fixture tree on test hosts.
    type: path
    default: /sys
  interface_facts:
    description: Mapping of interface name to its Ansible interface fact (C(ipv4), C(ipv4_secondaries)).
    type: dict
  ipv4_by_ifname:
    description: Mapping of interface name to a list of IPv4 addresses; overrides O(interface_facts) when given.
    type: dict
  fabric_ip:
    description: IPv4 used to find the fabric netdev and GID; default C(effective.fabric.ip).
    type: str
  effective:
    description: The host's C(ds4_effective) fact (reads C(fabric), C(env), C(per_node_env), C(host), C(role), C(profile)).
    type: dict
    default: {}
  expected_mtu:
    description:
      - Lowest acceptable MTU of the fabric netdev and of every HCA twin's netdev, and the size of the ping (strict).
      - Omitted (null) accepts 1500 and 9000 alike; an MTU below 9000 gives one warning that names the expected
        throughput difference and leaves the verdict to the all-reduce busbw gate (O(min_busbw_gbps)); the ping is
        9000 bytes when the fabric netdev has at least 9000, else 1500.
    type: int
  min_busbw_gbps:
    description: The all-reduce busbw gate the warning of an MTU below 9000 names; omitted = the preflight is off.
    type: float
  dev_infiniband:
    description: Path whose presence proves the RDMA devices exist.
    type: path
    default: /dev/infiniband
  fabric_env:
    description: The role's fabric NCCL values (a profile value for the same name wins and is reported).
    type: dict
    default: {}
  gid_index:
    description:
      - Where C(NCCL_IB_GID_INDEX) comes from. C(auto) the inventory's value when set, else unset (NCCL picks the
        RoCE v2 GID itself; pinned indexes drift after reboots); C(discover) pin the discovered index (warns when the
        inventory differs); C(inventory) the same as C(auto); C(unset) never written.
    type: str
    choices: [auto, discover, inventory, unset]
    default: auto
  exact_match:
    description: Prefix C(NCCL_SOCKET_IFNAME) and C(NCCL_IB_HCA) with C(=) (NCCL exact name match).
    type: bool
    default: true
  peers:
    description:
      - Fabric IPs of the other nodes. Each gets C(ping -M do -s <MTU - 28> -c <ping_count>) (MTU as O(expected_mtu) says), a
        full-size non-fragmented packet that proves the MTU end to end. Failures are in RV(ping_findings).
    type: list
    elements: str
    default: []
  ping_count:
    description: Echo requests per peer.
    type: int
    default: 3
'''

EXAMPLES = r'''
- name: Discover the fabric
  dgxspark.ds4.fabric_facts:
    effective: "{{ ansible_facts['ds4_effective'] }}"
    interface_facts: "{{ dict(ansible_facts['interfaces'] | zip(ansible_facts['interfaces'] | map('replace', '-', '_') | map('extract', ansible_facts))) }}"
    fabric_env:
      NCCL_NET: IB
  register: fabric
'''

RETURN = r'''
discovered:
  description: Full discovery (see fabric_discovery.discover).
  returned: always
  type: dict
fabric:
  description: Summary of the fabric port (ip, ifname, is_cx7, hcas, twin_ifnames, gid_index, gid_index_by_hca, mtu, operstate, speed_mbps).
  returned: always
  type: dict
disagreements:
  description: Inventory values that differ from discovery.
  returned: always
  type: list
  elements: dict
  sample: [{key: ds4_fabric_ifname, inventory: eth0, discovered: enp1s0f1np1}]
findings:
  description: Failed checks, each with check, finding and fix; empty when all pass.
  returned: always
  type: list
  elements: dict
dev_infiniband_present:
  description: Whether O(dev_infiniband) exists.
  returned: always
  type: bool
env:
  description: Ordered [name, value] pairs of the node's network env.
  returned: always
  type: list
  elements: list
env_sources:
  description: Where each value came from (inventory, discovery, profile, role, unset).
  returned: always
  type: dict
env_file:
  description: The env as docker --env-file text.
  returned: always
  type: str
ping_findings:
  description: Failed jumbo pings (check C(jumbo_ping), finding with the ping output, fix).
  returned: always
  type: list
  elements: dict
pings:
  description: Per peer, the argv and rc of the ping.
  returned: always
  type: list
  elements: dict
mtu_policy:
  description: How the MTU was judged (strict, minimum, ping_mtu, below_jumbo [[ifname, mtu]], warning).
  returned: always
  type: dict
errors:
  description: Values neither the inventory nor discovery could provide, or conflicting settings.
  returned: always
  type: list
  elements: str
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._fabric.nccl_preflight import fabric_facts, ping_args, ping_finding


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type='path', default='/sys'),
            interface_facts=dict(type='dict'),
            ipv4_by_ifname=dict(type='dict'),
            fabric_ip=dict(type='str'),
            effective=dict(type='dict', default={}),
            expected_mtu=dict(type='int'),
            min_busbw_gbps=dict(type='float'),
            dev_infiniband=dict(type='path', default='/dev/infiniband'),
            fabric_env=dict(type='dict', default={}),
            gid_index=dict(type='str', default='auto', choices=['auto', 'discover', 'inventory', 'unset']),
            exact_match=dict(type='bool', default=True),
            peers=dict(type='list', elements='str', default=[]),
            ping_count=dict(type='int', default=3),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not os.path.isdir(os.path.join(p['sysfs_root'], 'class', 'net')):
        module.fail_json(msg='sysfs_root=%s has no class/net: not a sysfs tree; fix nccl_fabric_sysfs_root' % p['sysfs_root'])
    result, warnings = fabric_facts(p, os.path.exists(p['dev_infiniband']))
    pings, ping_findings = [], []
    for peer in p['peers']:
        argv = ping_args(peer, result['mtu_policy']['ping_mtu'], p['ping_count'])
        rc, out, err = module.run_command(argv)
        pings.append({'peer': peer, 'cmd': argv, 'rc': rc, 'stdout': out, 'stderr': err})
        finding = ping_finding(rc, out, err, peer, result['mtu_policy']['ping_mtu'], dict(result['env']).get('GLOO_SOCKET_IFNAME'))
        if finding:
            ping_findings.append(finding)
    for w in warnings:
        module.warn(w)
    module.exit_json(changed=False, pings=pings, ping_findings=ping_findings, **result)


if __name__ == '__main__':
    main()
