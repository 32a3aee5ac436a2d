# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Harness checks for the default scenario: both node containers play a DGX Spark.

systemd is PID 1, the inner Docker engine answers, and the two nodes reach each other over
ds4-fabric with 9000-byte frames, on the addresses the test inventory declares.
Role-specific checks live beside this file as test_<role>.py.
"""

import os

import testinfra.utils.ansible_runner

RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"])
testinfra_hosts = RUNNER.get_hosts("spark")

# ICMP payload that fills a 9000-byte MTU exactly: 9000 - 20 (IPv4) - 8 (ICMP).
JUMBO_PAYLOAD = 8972


def _var(host, name):
    """An inventory variable of this host as Ansible templates it (the test inventory derives addresses from
    molecule_net; testinfra's get_variables() gives the raw text)."""
    return host.ansible("ansible.builtin.debug", "msg={{ %s }}" % name, check=False)["msg"]


def _peer_ip(host):
    peers = host.ansible("ansible.builtin.debug",
                         "msg={{ groups['spark'] | difference([inventory_hostname]) | map('extract', hostvars, "
                         "'ds4_fabric_ip') | list }}", check=False)["msg"]
    assert len(peers) == 1, "expected exactly one peer of %s in group spark, got %s" % (host.backend.get_hostname(), peers)
    return peers[0]


def test_systemd_is_pid1_and_running(host):
    assert host.file("/proc/1/comm").content_string.strip() == "systemd"
    state = host.run("systemctl is-system-running")
    failed = host.run("systemctl --failed --no-legend --plain").stdout
    assert state.stdout.strip() == "running", "system state %r, failed units:\n%s" % (state.stdout.strip(), failed)


def test_inner_docker_engine_answers(host):
    docker = host.service("docker")
    assert docker.is_running
    info = host.run("docker info --format '{{.Driver}} {{.CgroupDriver}}'")
    assert info.rc == 0, info.stderr
    # overlay2 on the tmpfs /var/lib/docker (never vfs), inner containers under the node's cgroup.
    assert info.stdout.split() == ["overlay2", "systemd"]


def test_fabric_address_matches_inventory(host):
    ifname = _var(host, "ds4_fabric_ifname")
    addr = host.run("ip -o -4 addr show dev %s" % ifname)
    assert addr.rc == 0, addr.stderr
    assert "inet %s/%s " % (_var(host, "ds4_fabric_ip"), _var(host, "ds4_fabric_prefix")) in addr.stdout
    mtu = host.file("/sys/class/net/%s/mtu" % ifname).content_string.strip()
    assert mtu == "9000"


def test_jumbo_ping_to_peer_without_fragmentation(host):
    peer = _peer_ip(host)
    ping = host.run("ping -M do -s %d -c 1 -W 2 %s" % (JUMBO_PAYLOAD, peer))
    assert ping.rc == 0, ping.stdout + ping.stderr
    assert "1 received" in ping.stdout


def test_oversized_ping_is_refused(host):
    """Control for the test above: one byte more must not fit, so the MTU really is 9000."""
    ping = host.run("ping -M do -s %d -c 1 -W 2 %s" % (JUMBO_PAYLOAD + 1, _peer_ip(host)))
    assert ping.rc != 0
    assert "message too long" in (ping.stdout + ping.stderr).lower()
