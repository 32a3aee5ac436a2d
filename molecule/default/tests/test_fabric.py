# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""testinfra: nccl.env per node from fixture discovery and the jumbo-frame ping over ds4-fabric
(MTU 9000). The fixtures' RoCE v2 IPv4 GID is 3 on spark1 and 5 on spark2; no host pins
ds4_nccl_ib_gid_index, so NCCL_IB_GID_INDEX stays unset (NCCL picks RoCE v2 itself).

MTU policy (nccl_fabric_expected_mtu): the role's preflight and discovery run again on the converged pair against a
copy of each node's fixture with both twins at MTU 1500 (NVIDIA's connect-two-Sparks netplan): unset, it passes with
one warning and a 1500-byte ping; 9000 set, it is refused naming mtu_low. Only preflight.yml and discover.yml run
(they change nothing and record nothing), so the converged pair and its converge record stay as they are."""


import json
import os
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
from ds4_drill import INVENTORY, PROJECT, node, run_playbook  # noqa: E402  pylint: disable=wrong-import-position


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


MTU1500_ROOT = '/var/lib/ds4-test/sysfs-mtu1500'
MTU_WARNING = '[WARNING]: fabric MTU below 9000: enp1s0f1np1 MTU 1500, enP2p1s0f1np1 MTU 1500.'
DISCOVERY_PLAY = """---
- name: Effective config
  ansible.builtin.import_playbook: %s/playbooks/config_play.yml

- name: nccl_fabric preflight and discovery only (they change nothing)
  hosts: spark
  gather_facts: false
  become: true
  tasks:
    - name: Preflight
      ansible.builtin.include_role:
        name: dgxspark.ds4.nccl_fabric
        tasks_from: preflight
    - name: Discovery, checks, full-size ping
      ansible.builtin.include_role:
        name: dgxspark.ds4.nccl_fabric
        tasks_from: discover
"""


@pytest.fixture(scope='module')
def mtu1500_discovery():
    """Each node's fixture copied with both twins at MTU 1500; runs the role's preflight + discovery with the given
    nccl_fabric_expected_mtu (None = unset) -> (rc, output folded to one line)."""
    for name, tree in (('spark1', 'node_a'), ('spark2', 'node_b')):
        node(name, 'sh', '-c', 'rm -rf {r}/{t} && mkdir -p {r} && cp -a /var/lib/ds4-test/sysfs/{t} {r}/{t} && '
                               'for i in enp1s0f1np1 enP2p1s0f1np1; do echo 1500 > {r}/{t}/class/net/$i/mtu; done'
             .format(r=MTU1500_ROOT, t=tree))
        assert node(name, 'cat', '%s/%s/class/net/enP2p1s0f1np1/mtu' % (MTU1500_ROOT, tree)) == '1500'
    fd, play = tempfile.mkstemp(suffix='.yml', prefix='ds4-mtu-')
    with os.fdopen(fd, 'w') as fh:
        fh.write(DISCOVERY_PLAY % PROJECT)

    def run(expected_mtu):
        extra = {'nccl_fabric_sysfs_root': MTU1500_ROOT + "/node_{{ 'a' if ds4_node_rank | int == 0 else 'b' }}"}
        if expected_mtu is not None:
            extra['nccl_fabric_expected_mtu'] = expected_mtu
        rc, out = run_playbook(play, extra)
        return rc, out, ' '.join(out.split())
    yield run
    os.unlink(play)
    for name in ('spark1', 'spark2'):
        node(name, 'rm', '-rf', MTU1500_ROOT)


@pytest.mark.skipif(not INVENTORY, reason='runs inside molecule verify only')
def test_mtu_1500_unset_passes_with_one_warning(mtu1500_discovery):
    rc, out, flat = mtu1500_discovery(None)
    assert rc == 0, out[-3000:]
    # identical on both nodes, so Ansible shows it once for the run; no other MTU warning
    assert flat.count(MTU_WARNING) == 1, flat[-3000:]
    assert flat.count('[WARNING]: fabric MTU') == 1
    assert 'nccl_fabric_preflight is off: nothing measures it on this run' in flat
    assert flat.count('full-size ping (MTU 1500, the fabric netdev MTU) ok to') == 2, flat[-3000:]
    assert 'Fabric checks failed' not in flat


@pytest.mark.skipif(not INVENTORY, reason='runs inside molecule verify only')
def test_mtu_1500_refused_when_9000_is_expected(mtu1500_discovery):
    rc, out, flat = mtu1500_discovery(9000)
    assert rc != 0, out[-3000:]
    assert 'Fabric checks failed on spark1: [mtu_low] enp1s0f1np1 MTU is 1500, expected 9000' in flat, flat[-3000:]
    assert '[hca_mtu_low] RoCE twin roceP2p1s0f1 (twin 2 of 2, netdev enP2p1s0f1np1) MTU is 1500, expected at least 9000' in flat
    assert '[WARNING]: fabric MTU' not in flat
