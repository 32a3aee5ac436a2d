# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for fabric_discovery on fixture sysfs trees built by tests/fixtures/sysfs/make_fixtures.py."""


import importlib.util
import os
import shutil

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._fabric import fabric_discovery as fd

_MAKER = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "sysfs", "make_fixtures.py")
_SPEC = importlib.util.spec_from_file_location("ds4_sysfs_fixtures", _MAKER)
_MOD = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_MOD)
NODE_A = NODE_B = None  # set by the sysfs_trees fixture before any test runs


@pytest.fixture(scope="module", autouse=True)
def sysfs_trees(tmp_path_factory):
    """Build node_a/node_b once per module in a pytest-managed temp dir."""
    global NODE_A, NODE_B  # pylint: disable=global-statement
    NODE_A, NODE_B = _MOD.build(str(tmp_path_factory.mktemp("sysfs")))
    yield NODE_A, NODE_B


IPS_A = {"enp1s0f1np1": ["192.168.100.10"], "enP2p1s0f1np1": ["192.168.101.10"], "enP7s7": ["192.168.1.11"], "lo": ["127.0.0.1"]}
IPS_B = {"enp1s0f1np1": ["192.168.100.11"], "enP2p1s0f1np1": ["192.168.101.11"], "enP7s7": ["192.168.1.12"]}


@pytest.fixture
def node_a_copy(tmp_path):
    dst = str(tmp_path / "sys")
    shutil.copytree(NODE_A, dst, symlinks=True)
    return dst


def _write(root, ifname, name, value):
    with open(os.path.join(root, "class", "net", ifname, name), "w") as fh:
        fh.write(value + "\n")


def test_fixture_uses_relative_symlinks():
    link = os.path.join(NODE_A, "class", "net", "enp1s0f1np1")
    assert os.path.islink(link)
    assert not os.readlink(link).startswith("/")
    assert os.path.islink(os.path.join(link, "device"))


def test_gid_to_ipv4():
    assert fd.gid_to_ipv4("0000:0000:0000:0000:0000:ffff:c0a8:640a") == "192.168.100.10"
    assert fd.gid_to_ipv4("fe80:0000:0000:0000:5e25:73ff:fe0a:1001") is None
    assert fd.gid_to_ipv4("") is None


def test_node_a_discovery():
    d = fd.discover(NODE_A, IPS_A, "192.168.100.10")
    assert d["cx7_netdevs"] == ["enP2p1s0f0np0", "enP2p1s0f1np1", "enp1s0f0np0", "enp1s0f1np1"]
    assert "enP7s7" in d["netdevs"] and d["netdevs"]["enP7s7"]["is_cx7"] is False
    assert "lo" not in d["netdevs"]
    assert d["hcas"] == {"rocep1s0f0": "enp1s0f0np0", "rocep1s0f1": "enp1s0f1np1",
                         "roceP2p1s0f0": "enP2p1s0f0np0", "roceP2p1s0f1": "enP2p1s0f1np1"}
    assert d["ports"] == [
        {"pci_function": "01:00.0", "netdevs": ["enp1s0f0np0", "enP2p1s0f0np0"], "hcas": ["rocep1s0f0", "roceP2p1s0f0"], "up": False},
        {"pci_function": "01:00.1", "netdevs": ["enp1s0f1np1", "enP2p1s0f1np1"], "hcas": ["rocep1s0f1", "roceP2p1s0f1"], "up": True},
    ]
    assert d["fabric_ifname"] == "enp1s0f1np1"
    assert d["fabric_is_cx7"] is True
    assert d["fabric_hcas"] == ["rocep1s0f1", "roceP2p1s0f1"]
    assert d["fabric_twin_ifnames"] == ["enp1s0f1np1", "enP2p1s0f1np1"]
    assert d["fabric_gid_index"] == 3
    fab = d["netdevs"]["enp1s0f1np1"]
    assert (fab["operstate"], fab["speed_mbps"], fab["mtu"]) == ("up", 200000, 9000)
    assert fab["pci_address"] == "0000:01:00.1"
    assert fab["hca"] == "rocep1s0f1"
    assert d["netdevs"]["enp1s0f0np0"]["operstate"] == "down"
    assert d["netdevs"]["enp1s0f0np0"]["speed_mbps"] == -1


def test_gid_table_has_v1_v2_and_skips_empty_entries():
    gids = fd.discover(NODE_A, IPS_A)["netdevs"]["enp1s0f1np1"]["gids"]
    assert [(g["index"], g["type"], g["ipv4"]) for g in gids] == [
        (0, "IB/RoCE v1", None), (1, "RoCE v2", None), (2, "IB/RoCE v1", "192.168.100.10"), (3, "RoCE v2", "192.168.100.10")]
    assert all(g["ndev"] == "enp1s0f1np1" for g in gids)


def test_node_b_gid_index_differs():
    a = fd.discover(NODE_A, IPS_A, "192.168.100.10")
    b = fd.discover(NODE_B, IPS_B, "192.168.100.11")
    assert (a["fabric_gid_index"], b["fabric_gid_index"]) == (3, 5)
    # the twin's own IPv4 GID is found at its own index
    assert b["netdevs"]["enP2p1s0f1np1"]["roce_v2_ipv4_gid_index"] == 5
    # IPv6 global GIDs on node B are RoCE v2 but not IPv4: not chosen
    types = [(g["index"], g["type"], g["ipv4"]) for g in b["netdevs"]["enp1s0f1np1"]["gids"]]
    assert (3, "RoCE v2", None) in types


def test_fabric_ip_inferred_when_single_up_cx7_ip():
    d = fd.discover(NODE_A, {"enp1s0f1np1": ["192.168.100.10"], "enP7s7": ["192.168.1.11"]})
    assert d["fabric_ip"] == "192.168.100.10"
    assert d["fabric_ifname"] == "enp1s0f1np1"
    # two CX-7 IPs: ambiguous, not guessed
    assert fd.discover(NODE_A, IPS_A)["fabric_ip"] is None


def test_hca_found_through_class_infiniband_when_netdev_link_missing(node_a_copy):
    dev = os.path.realpath(os.path.join(node_a_copy, "class", "net", "enp1s0f1np1", "device"))
    shutil.move(os.path.join(dev, "infiniband"), os.path.join(dev, "infiniband.moved"))
    ib_dir = os.path.join(node_a_copy, "class", "infiniband", "rocep1s0f1")
    os.remove(ib_dir)
    os.makedirs(os.path.join(ib_dir, "device", "net", "enp1s0f1np1"))
    d = fd.discover(node_a_copy, IPS_A, "192.168.100.10")
    assert d["netdevs"]["enp1s0f1np1"]["hca"] == "rocep1s0f1"


def test_checks_pass_on_healthy_nodes():
    assert fd.checks(fd.discover(NODE_A, IPS_A, "192.168.100.10")) == []
    assert fd.checks(fd.discover(NODE_B, IPS_B, "192.168.100.11")) == []


def test_check_fabric_ip_on_lan_nic():
    d = fd.discover(NODE_A, IPS_A, "192.168.1.11")
    assert d["fabric_ifname"] == "enP7s7"
    out = fd.checks(d)
    assert [c["check"] for c in out] == ["fabric_ip_not_cx7"]
    assert out[0]["finding"] == ("fabric IP 192.168.1.11 is on enP7s7, which is not a ConnectX-7 netdev "
                                 "(CX-7 netdevs: enP2p1s0f0np0, enP2p1s0f1np1, enp1s0f0np0, enp1s0f1np1)")
    assert "ds4_fabric_ifname" in out[0]["fix"]


def test_check_fabric_ip_absent():
    out = fd.checks(fd.discover(NODE_A, IPS_A, "192.168.100.99"))
    assert [c["check"] for c in out] == ["fabric_ip_missing"]
    assert "192.168.100.99" in out[0]["finding"]


def test_check_link_down_and_mtu(node_a_copy):
    _write(node_a_copy, "enp1s0f1np1", "operstate", "down")
    _write(node_a_copy, "enp1s0f1np1", "mtu", "1500")
    out = fd.checks(fd.discover(node_a_copy, IPS_A, "192.168.100.10"))
    assert [c["check"] for c in out] == ["link_down", "mtu_low"]
    assert out[0]["finding"] == "enp1s0f1np1 (fabric IP 192.168.100.10) is down"
    assert out[1]["finding"] == "enp1s0f1np1 MTU is 1500, expected 9000"
    assert "mtu: 9000" in out[1]["fix"]
    # a lower expectation accepts 1500
    assert [c["check"] for c in fd.checks(fd.discover(node_a_copy, IPS_A, "192.168.100.10"), expected_mtu=1500)] == ["link_down"]


def test_check_twin_down(node_a_copy):
    _write(node_a_copy, "enP2p1s0f1np1", "operstate", "down")
    out = fd.checks(fd.discover(node_a_copy, IPS_A, "192.168.100.10"))
    assert [c["check"] for c in out] == ["twin_link_down"]
    assert "enP2p1s0f1np1" in out[0]["finding"]


def test_check_dev_infiniband_missing():
    out = fd.checks(fd.discover(NODE_A, IPS_A, "192.168.100.10"), dev_infiniband_present=False)
    assert [c["check"] for c in out] == ["dev_infiniband_missing"]
    assert "--device /dev/infiniband" in out[0]["fix"]


def test_check_no_roce_v2_gid(node_a_copy):
    gdir = os.path.join(node_a_copy, "class", "infiniband", "rocep1s0f1", "ports", "1", "gid_attrs", "types")
    with open(os.path.join(gdir, "3"), "w") as fh:
        fh.write("IB/RoCE v1\n")
    d = fd.discover(node_a_copy, IPS_A, "192.168.100.10")
    assert d["fabric_gid_index"] is None
    assert [c["check"] for c in fd.checks(d)] == ["no_roce_v2_gid"]


def test_compare_reports_disagreements_only():
    d = fd.discover(NODE_B, IPS_B, "192.168.100.11")
    inv_ok = {"ds4_fabric_ifname": "enp1s0f1np1", "ds4_rdma_hcas": ["roceP2p1s0f1", "rocep1s0f1"],
              "ds4_nccl_ib_gid_index": "5", "ds4_fabric_ip": "192.168.100.11"}
    assert fd.compare(inv_ok, d) == []
    inv_bad = {"ds4_fabric_ifname": "enp1s0f0np0", "ds4_rdma_hcas": "rocep1s0f0", "ds4_nccl_ib_gid_index": 3, "ds4_fabric_ip": None}
    assert fd.compare(inv_bad, d) == [
        {"key": "ds4_fabric_ifname", "inventory": "enp1s0f0np0", "discovered": "enp1s0f1np1"},
        {"key": "ds4_rdma_hcas", "inventory": "rocep1s0f0", "discovered": ["rocep1s0f1", "roceP2p1s0f1"]},
        {"key": "ds4_nccl_ib_gid_index", "inventory": 3, "discovered": 5},
    ]


def test_missing_sysfs_root_discovers_nothing(tmp_path):
    d = fd.discover(str(tmp_path / "nope"), IPS_A, "192.168.100.10")
    assert d["netdevs"] == {} and d["cx7_netdevs"] == []
    assert d["fabric_ifname"] == "enp1s0f1np1"  # from the facts; sysfs does not know it as CX-7
    assert [c["check"] for c in fd.checks(d)] == ["fabric_ip_not_cx7"]
