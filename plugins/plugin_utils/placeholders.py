# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shipped placeholder addresses: an inventory that still holds them is refused before any connection.

Pure Python (no Ansible imports).  The shipped inventories/sample-site/hosts.yml gives the Sparks
documentation addresses (RFC 5737 TEST-NET ranges): they route nowhere, so a deploy against them
would only die on "ssh: connect to host 192.0.2.10 port 22: No route to host" after several tasks.
The config check (the dgxspark.ds4.effective_config action, on the controller) refuses them first
and names the file to fill in.  The fabric addresses shipped in host_vars (192.168.100.10/11 on
enp1s0f1np1) are NVIDIA's connect-two-Sparks netplan defaults, which real pairs use as they are:
they are not placeholders and are not refused here; a TEST-NET fabric address is.

  PLACEHOLDER_NETWORKS: (network, name) rules as data
  CHECKED_VARS: the variables holding an address the playbooks connect to or bind
  placeholder_network(value) -> (network, name) | None
  placeholder_errors(hostvars, hosts, where=None) -> [error line]
"""


import ipaddress
from collections.abc import Callable, Iterable
from typing import Any

# RFC 5737 documentation ranges (never routed on the Internet or a LAN).
PLACEHOLDER_NETWORKS = (
    (ipaddress.IPv4Network('192.0.2.0/24'), 'TEST-NET-1'),
    (ipaddress.IPv4Network('198.51.100.0/24'), 'TEST-NET-2'),
    (ipaddress.IPv4Network('203.0.113.0/24'), 'TEST-NET-3'),
)

# variable -> (what it must hold, the file the shipped layout sets it in)
CHECKED_VARS = (
    ('ansible_host', 'the management address Ansible connects to over ssh', 'inventories/sample-site/hosts.yml'),
    ('ds4_fabric_ip', 'the ConnectX-7 fabric address of this node', 'inventories/sample-site/host_vars/<host>.yml'),
    ('ds4_router_address', 'the address the router host reaches the pair heads from', 'group_vars/spark of your inventory'),
)

SHIPPED_HOSTS_FILE = 'inventories/sample-site/hosts.yml'


def placeholder_network(value: Any) -> tuple[ipaddress.IPv4Network, str] | None:
    """(network, name) of the documentation range holding value, or None (not an IPv4 literal, or a real one)."""
    try:
        addr = ipaddress.IPv4Address(str(value).strip())
    except ValueError:
        return None
    for net, name in PLACEHOLDER_NETWORKS:
        if addr in net:
            return net, name
    return None


def placeholder_errors(hostvars: dict[str, Any], hosts: Iterable[str],
                       where: Callable[[str, str], str | None] | None = None) -> list[str]:
    """Error lines for every placeholder address of hosts.

    hostvars: {host: {var: value}}; where: optional callable (host, var) -> 'path[:line]' where Ansible read
    the value (the message names that file; without it, the file of the shipped layout)."""
    errors = []
    for host in hosts:
        hv = hostvars.get(host) or {}
        for var, what, default_file in CHECKED_VARS:
            value = hv.get(var)
            if value is None:
                continue
            hit = placeholder_network(value)
            if hit is None:
                continue
            net, name = hit
            target = (where(host, var) if where else None) or default_file.replace('<host>', host)
            errors.append('[host %s] %s = "%s": a shipped placeholder (%s %s, an RFC 5737 documentation range that routes '
                          'nowhere), not %s. Fix: fill in %s with the real address of %s.'
                          % (host, var, value, name, net, what, target, host))
    return errors
