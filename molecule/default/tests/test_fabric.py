# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""testinfra: nccl.env per node from fixture discovery and the jumbo-frame ping over ds4-fabric
(MTU 9000). The fixtures' RoCE v2 IPv4 GID is 3 on spark1 and 5 on spark2; no host pins
ds4_nccl_ib_gid_index, so NCCL_IB_GID_INDEX stays unset (NCCL picks RoCE v2 itself)."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json

import pytest


def _node(host):
    """This node's rank, role, fabric IP and its peer's fabric IP, from the inventory."""
    v = host.ansible.get_variables()
    rank = int(v["ds4_node_rank"])
    peers = host.ansible("ansible.builtin.debug",
                         "msg={{ groups['spark'] | difference([inventory_hostname]) | map('extract', hostvars, 'ds4_fabric_ip') | list }}",
                         check=False)["msg"]
    # templated by Ansible: the test inventory derives the address from molecule_net (get_variables() is raw text)
    ip = host.ansible("ansible.builtin.debug", "msg={{ ds4_fabric_ip }}", check=False)["msg"]
    return {"rank": rank, "role": "head" if rank == 0 else "worker", "ip": ip, "peer": peers[0]}


def _env(host):
    text = host.file("/etc/dgxspark-ds4/nccl.env").content_string
    return dict(l.split("=", 1) for l in text.splitlines() if l and not l.startswith("#")), text


def test_env_file_mode_and_owner(host):
    f = host.file("/etc/dgxspark-ds4/nccl.env")
    assert f.is_file and f.user == "root" and f.mode == 0o644


def test_env_file_per_node_values(host):
    node = _node(host)
    env, text = _env(host)
    assert env["VLLM_HOST_IP"] == node["ip"]
    assert "NCCL_IB_GID_INDEX" not in env
    assert env["NCCL_SOCKET_IFNAME"] == "=eth0"
    assert env["GLOO_SOCKET_IFNAME"] == env["TP_SOCKET_IFNAME"] == "eth0"
    assert env["NCCL_IB_HCA"] == "=rocep1s0f1,roceP2p1s0f1"
    for key, value in (("NCCL_NET", "IB"), ("NCCL_IB_DISABLE", "0"), ("NCCL_CROSS_NIC", "1"),
                       ("NCCL_CUMEM_ENABLE", "0"), ("NCCL_IGNORE_CPU_AFFINITY", "1")):
        assert env[key] == value
    assert "NCCL_IB_GID_INDEX=unset" in text


def test_env_files_differ_between_nodes(host):
    node = _node(host)
    env, _t = _env(host)
    assert env["VLLM_HOST_IP"] != node["peer"]


def test_nccl_env_reaches_the_running_rank(host):
    """nccl_fabric's restart marker was consumed by vllm_service, and the rank runs with this node's
    nccl.env: its HCAs, and no pinned GID index."""
    node = _node(host)
    assert not host.file("/var/lib/dgxspark-ds4/restart-pending-%s" % node["role"]).exists
    running = json.loads(host.check_output("docker inspect -f '{{json .Config.Env}}' dgxspark-ds4-%s" % node["role"]))
    assert "NCCL_IB_HCA==rocep1s0f1,roceP2p1s0f1" in running and "VLLM_HOST_IP=%s" % node["ip"] in running
    assert not [e for e in running if e.startswith("NCCL_IB_GID_INDEX=")], running


def test_jumbo_ping_over_the_fabric(host):
    cmd = host.run("ping -M do -s 8972 -c 3 -W 2 %s" % _node(host)["peer"])
    assert cmd.rc == 0, cmd.stdout + cmd.stderr


@pytest.mark.parametrize("size", [8973])
def test_oversize_ping_is_refused(host, size):
    """Proves -M do really forbids fragmentation on this path (the check would catch a 1500 MTU)."""
    cmd = host.run("ping -M do -s %d -c 1 -W 2 %s" % (size, _node(host)["peer"]))
    assert cmd.rc != 0 and "message too long" in (cmd.stdout + cmd.stderr)
