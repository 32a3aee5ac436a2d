# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nccl_fabric role's glue (nccl_preflight): per-node env from fixture sysfs trees, every
failure message, the jumbo ping verdict and the all-reduce verdict on real-format NCCL lines."""


import importlib.util
import os
import shutil

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._fabric import nccl_preflight as npf

_MAKER = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "sysfs", "make_fixtures.py")
_SPEC = importlib.util.spec_from_file_location("ds4_sysfs_fixtures_role", _MAKER)
_MOD = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_MOD)
_DEVICE_LOG = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fabric", "device-run-2026-11-22.log")

HCAS = ["rocep1s0f1", "roceP2p1s0f1"]
FABRIC_ENV = {"NCCL_NET": "IB", "NCCL_IB_DISABLE": "0", "NCCL_CROSS_NIC": "1", "NCCL_CUMEM_ENABLE": "0", "NCCL_IGNORE_CPU_AFFINITY": "1"}


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    return _MOD.build(str(tmp_path_factory.mktemp("sysfs")))


def ips(last):
    return {"enp1s0f1np1": ["192.168.100.%d" % last], "enP2p1s0f1np1": ["192.168.101.%d" % last], "enP7s7": ["10.0.0.%d" % last]}


def eff(host, role, ip, ifname="enp1s0f1np1", hcas=None, gid=None, env=None):
    return {"host": host, "role": role, "profile": "balanced",
            "fabric": {"ip": ip, "ifname": ifname, "rdma_hcas": HCAS if hcas is None else hcas, "gid_index": gid},
            "env": env if env is not None else {"NCCL_IB_DISABLE": "0", "OMP_NUM_THREADS": "8", "VLLM_HOST_IP": ip},
            "per_node_env": ["VLLM_HOST_IP"]}


def run(root, effective, last, **kw):
    params = {"sysfs_root": root, "ipv4_by_ifname": ips(last), "effective": effective, "expected_mtu": 9000,
              "fabric_env": FABRIC_ENV, "gid_index": "auto", "exact_match": True}
    params.update(kw)
    return npf.fabric_facts(params, True)


def env_of(result):
    lines = [l for l in result["env_file"].splitlines() if l and not l.startswith("#")]
    return dict(l.split("=", 1) for l in lines), lines


def test_both_nodes_get_correct_different_env_files(trees):
    a, _wa = run(trees[0], eff("spark1", "head", "192.168.100.10"), 10)
    b, _wb = run(trees[1], eff("spark2", "worker", "192.168.100.11"), 11)
    env_a, lines_a = env_of(a)
    env_b, lines_b = env_of(b)
    # NCCL_IB_GID_INDEX is not pinned unless the inventory asks: NCCL picks the RoCE v2 GID itself
    # (node A's is 3, node B's 5; a pinned index drifts after a reboot, vllm-ops 2.3 C)
    assert "NCCL_IB_GID_INDEX" not in env_a and "NCCL_IB_GID_INDEX" not in env_b
    assert a["env_sources"]["NCCL_IB_GID_INDEX"] == "unset" and "NCCL_IB_GID_INDEX=unset" in a["env_file"]
    assert env_a["VLLM_HOST_IP"] == "192.168.100.10" and env_b["VLLM_HOST_IP"] == "192.168.100.11"
    for env in (env_a, env_b):
        assert env["NCCL_SOCKET_IFNAME"] == "=enp1s0f1np1"
        assert env["GLOO_SOCKET_IFNAME"] == env["TP_SOCKET_IFNAME"] == "enp1s0f1np1"
        assert env["NCCL_IB_HCA"] == "=rocep1s0f1,roceP2p1s0f1"
        assert env["NCCL_NET"] == "IB" and env["NCCL_IB_DISABLE"] == "0" and env["NCCL_CROSS_NIC"] == "1"
        assert env["NCCL_CUMEM_ENABLE"] == "0" and env["NCCL_IGNORE_CPU_AFFINITY"] == "1"
        assert "OMP_NUM_THREADS" not in env  # only NCCL_* from the profile
    assert len(lines_a) == len(set(l.split("=", 1)[0] for l in lines_a))  # no duplicate names
    assert a["env_file"] != b["env_file"]
    assert a["findings"] == [] and b["findings"] == [] and a["disagreements"] == []
    assert a["fabric"]["gid_index_by_hca"] == {"rocep1s0f1": 3, "roceP2p1s0f1": 3}


def test_gid_index_pinned_only_when_the_inventory_asks(trees):
    r, _w = run(trees[1], eff("spark2", "worker", "192.168.100.11", gid=5), 11)
    assert env_of(r)[0]["NCCL_IB_GID_INDEX"] == "5" and r["env_sources"]["NCCL_IB_GID_INDEX"] == "inventory"
    a, _wa = run(trees[0], eff("spark1", "head", "192.168.100.10"), 10, gid_index="discover")
    b, _wb = run(trees[1], eff("spark2", "worker", "192.168.100.11"), 11, gid_index="discover")
    assert env_of(a)[0]["NCCL_IB_GID_INDEX"] == "3" and env_of(b)[0]["NCCL_IB_GID_INDEX"] == "5"
    assert a["env_sources"]["NCCL_IB_GID_INDEX"] == "discovery"
    r, _w = run(trees[0], eff("spark1", "head", "192.168.100.10"), 10, gid_index="inventory")
    assert "NCCL_IB_GID_INDEX" not in env_of(r)[0] and r["errors"] == []


def test_discovery_fills_values_the_inventory_leaves_out(trees):
    e = eff("spark1", "head", None, ifname=None, hcas=[])
    r, _w = run(trees[0], e, 10, fabric_ip="192.168.100.10")
    env, _l = env_of(r)
    assert env["VLLM_HOST_IP"] == "192.168.100.10" and env["NCCL_IB_HCA"] == "=rocep1s0f1,roceP2p1s0f1"
    assert r["env_sources"]["NCCL_IB_HCA"] == "discovery" and r["errors"] == []


def test_inventory_wins_and_disagreements_warn_with_both_values(trees):
    r, warns = run(trees[1], eff("spark2", "worker", "192.168.100.11", gid=3, hcas=["rocep1s0f1"]), 11)
    env, _l = env_of(r)
    assert env["NCCL_IB_GID_INDEX"] == "3" and env["NCCL_IB_HCA"] == "=rocep1s0f1"
    assert "ds4_nccl_ib_gid_index: inventory says 3, discovery found 5 on this node; using the inventory value" in warns
    assert any(w.startswith("ds4_rdma_hcas: inventory says ['rocep1s0f1'], discovery found ['rocep1s0f1', 'roceP2p1s0f1']") for w in warns)
    r2, warns2 = run(trees[1], eff("spark2", "worker", "192.168.100.11", gid=3), 11, gid_index="discover")
    assert env_of(r2)[0]["NCCL_IB_GID_INDEX"] == "5"
    assert "ds4_nccl_ib_gid_index: inventory says 3, discovery found 5 on this node; using the discovery value" in warns2


def test_gid_unset_by_choice_and_conflict(trees):
    r, _w = run(trees[0], eff("spark1", "head", "192.168.100.10"), 10, gid_index="unset")
    assert "NCCL_IB_GID_INDEX" not in env_of(r)[0] and r["errors"] == []
    r, _w = run(trees[0], eff("spark1", "head", "192.168.100.10", gid=3), 10, gid_index="unset")
    assert "remove ds4_nccl_ib_gid_index from host_vars" in r["errors"][0]


def test_profile_value_wins_with_warning(trees):
    e = eff("spark1", "head", "192.168.100.10", env={"NCCL_CROSS_NIC": "0", "NCCL_IB_QPS_PER_CONNECTION": "4"})
    r, warns = run(trees[0], e, 10)
    env, _l = env_of(r)
    assert env["NCCL_CROSS_NIC"] == "0" and env["NCCL_IB_QPS_PER_CONNECTION"] == "4"
    assert "NCCL_CROSS_NIC: the profile sets 0, the nccl_fabric role would set 1; the profile value is used" in warns


def test_exact_match_off(trees):
    r, _w = run(trees[0], eff("spark1", "head", "192.168.100.10"), 10, exact_match=False)
    env = env_of(r)[0]
    assert env["NCCL_SOCKET_IFNAME"] == "enp1s0f1np1" and env["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1"


def test_no_source_is_an_error(trees):
    r, _w = run(trees[0], eff("spark1", "head", "10.9.9.9", ifname=None, hcas=[]), 10)
    assert "NCCL_SOCKET_IFNAME: neither the inventory (ds4_fabric_ifname) nor discovery found a value" in r["errors"]


def _copy(tree, tmp_path):
    dst = str(tmp_path / "sys")
    shutil.copytree(tree, dst, symlinks=True)
    return dst


def _checks(result):
    return dict((f["check"], f["finding"] + " | " + f["fix"]) for f in result["findings"])


def test_failure_fabric_ip_not_cx7(trees):
    r, _w = run(trees[0], eff("spark1", "head", "10.0.0.10", ifname="enP7s7"), 10)
    msg = _checks(r)["fabric_ip_not_cx7"]
    assert "fabric IP 10.0.0.10 is on enP7s7, which is not a ConnectX-7 netdev" in msg
    assert "move the fabric IP to the cabled CX-7 port" in msg


def test_failure_link_down_and_mtu_low(trees, tmp_path):
    root = _copy(trees[0], tmp_path)
    with open(os.path.join(root, "class", "net", "enp1s0f1np1", "operstate"), "w") as fh:
        fh.write("down\n")
    with open(os.path.join(root, "class", "net", "enp1s0f1np1", "mtu"), "w") as fh:
        fh.write("1500\n")
    r, _w = run(root, eff("spark1", "head", "192.168.100.10"), 10)
    c = _checks(r)
    assert "enp1s0f1np1 (fabric IP 192.168.100.10) is down" in c["link_down"]
    assert "enp1s0f1np1 MTU is 1500, expected 9000" in c["mtu_low"] and "set mtu: 9000" in c["mtu_low"]


def test_failure_dev_infiniband_missing(trees):
    r, _w = npf.fabric_facts({"sysfs_root": trees[0], "ipv4_by_ifname": ips(10), "effective": eff("spark1", "head", "192.168.100.10"),
                              "expected_mtu": 9000, "fabric_env": FABRIC_ENV}, False)
    assert r["dev_infiniband_present"] is False
    assert "/dev/infiniband does not exist: NCCL would fall back to TCP sockets" in _checks(r)["dev_infiniband_missing"]


def test_failure_twins_disagree_on_gid_index(trees, tmp_path):
    root = _copy(trees[0], tmp_path)
    gids = os.path.join(root, "class", "infiniband", "roceP2p1s0f1", "ports", "1", "gids")
    attrs = os.path.join(root, "class", "infiniband", "roceP2p1s0f1", "ports", "1", "gid_attrs")
    # move the twin's RoCE v2 IPv4 GID from index 3 to index 4
    with open(os.path.join(gids, "3")) as fh:
        gid = fh.read()
    with open(os.path.join(gids, "4"), "w") as fh:
        fh.write(gid)
    for sub, val in (("types", "RoCE v2\n"), ("ndevs", "enP2p1s0f1np1\n")):
        with open(os.path.join(attrs, sub, "4"), "w") as fh:
            fh.write(val)
    with open(os.path.join(gids, "3"), "w") as fh:
        fh.write(_MOD.ZERO_GID + "\n")
    r, _w = run(root, eff("spark1", "head", "192.168.100.10"), 10, gid_index="discover")
    assert "RoCE v2 IPv4 GID index differs between the twins: roceP2p1s0f1=4, rocep1s0f1=3" in _checks(r)["gid_index_differs_between_twins"]
    # unset (the default): NCCL picks each HCA's own RoCE v2 GID, so differing indexes are fine
    r, _w = run(root, eff("spark1", "head", "192.168.100.10"), 10)
    assert r["findings"] == []


def test_failure_twin_without_ipv4_has_no_roce_v2_gid(tmp_path):
    root = _MOD.build_twin_without_ipv4(str(tmp_path))
    no_twin_ip = {"enp1s0f1np1": ["192.168.100.10"], "enP7s7": ["10.0.0.10"]}
    r, _w = run(root, eff("spark1", "head", "192.168.100.10"), 10, ipv4_by_ifname=no_twin_ip)
    c = _checks(r)
    assert list(c) == ["hca_no_roce_v2_gid"], c
    msg = c["hca_no_roce_v2_gid"]
    assert "RoCE twin roceP2p1s0f1 (twin 2 of 2, netdev enP2p1s0f1np1: no IPv4 address) in NCCL_IB_HCA has no RoCE v2 IPv4 GID" in msg
    assert "give enP2p1s0f1np1 its own static IPv4" in msg and "remove roceP2p1s0f1 from ds4_rdma_hcas" in msg
    # only the HCAs NCCL_IB_HCA lists are checked
    r, _w = run(root, eff("spark1", "head", "192.168.100.10", hcas=["rocep1s0f1"]), 10, ipv4_by_ifname=no_twin_ip)
    assert r["findings"] == []


def test_failure_twin_mtu_low_and_unknown_hca(trees, tmp_path):
    root = _copy(trees[0], tmp_path)
    with open(os.path.join(root, "class", "net", "enP2p1s0f1np1", "mtu"), "w") as fh:
        fh.write("1500\n")
    r, _w = run(root, eff("spark1", "head", "192.168.100.10"), 10)
    c = _checks(r)
    assert list(c) == ["hca_mtu_low"], c
    assert "RoCE twin roceP2p1s0f1 (twin 2 of 2, netdev enP2p1s0f1np1) MTU is 1500, expected at least 9000" in c["hca_mtu_low"]
    assert "set mtu: 9000 on enP2p1s0f1np1" in c["hca_mtu_low"]
    r, _w = run(trees[0], eff("spark1", "head", "192.168.100.10", hcas=["rocep1s0f1", "mlx5_9"]), 10)
    msg = _checks(r)["hca_missing"]
    assert "NCCL_IB_HCA lists mlx5_9 (twin 2 of 2) but this node has no such RDMA device" in msg
    assert "roceP2p1s0f1 (enP2p1s0f1np1)" in msg and "ds4_rdma_hcas" in msg


def _set_mtu(root, mtus):
    for ifname, mtu in mtus.items():
        with open(os.path.join(root, "class", "net", ifname, "mtu"), "w") as fh:
            fh.write("%d\n" % mtu)


def _mtu_warnings(warnings):
    return [w for w in warnings if "MTU" in w]


def test_mtu_1500_unset_is_accepted_with_one_warning(trees, tmp_path):
    """NVIDIA's connect-two-Sparks netplan: both twins at 1500, nccl_fabric_expected_mtu unset."""
    root = _copy(trees[0], tmp_path)
    _set_mtu(root, {"enp1s0f1np1": 1500, "enP2p1s0f1np1": 1500})
    r, w = run(root, eff("spark1", "head", "192.168.100.10"), 10, expected_mtu=None, min_busbw_gbps=18.0)
    assert r["findings"] == []
    assert len(_mtu_warnings(w)) == 1 and w == _mtu_warnings(w), w
    msg = w[0]
    assert "enp1s0f1np1 MTU 1500, enP2p1s0f1np1 MTU 1500" in msg
    assert "RDMA MTU of 1024 instead of the 4096" in msg and "no measured NCCL busbw" in msg
    assert "nccl_fabric_min_busbw_gbps=18.0 GB/s) decides" in msg and "nccl_fabric_expected_mtu: 9000" in msg
    assert r["mtu_policy"] == {"strict": False, "minimum": 1500, "ping_mtu": 1500, "warning": msg,
                               "below_jumbo": [["enp1s0f1np1", 1500], ["enP2p1s0f1np1", 1500]]}
    # without the all-reduce preflight the warning says nothing measures it
    _r, w = run(root, eff("spark1", "head", "192.168.100.10"), 10, expected_mtu=None)
    assert "nccl_fabric_preflight is off: nothing measures it" in w[0]


def test_mtu_1500_refused_when_9000_is_set(trees, tmp_path):
    root = _copy(trees[0], tmp_path)
    _set_mtu(root, {"enp1s0f1np1": 1500, "enP2p1s0f1np1": 1500})
    r, w = run(root, eff("spark1", "head", "192.168.100.10"), 10, expected_mtu=9000, min_busbw_gbps=18.0)
    c = _checks(r)
    assert list(c) == ["mtu_low", "hca_mtu_low"], c
    assert "enp1s0f1np1 MTU is 1500, expected 9000" in c["mtu_low"]
    assert _mtu_warnings(w) == [] and r["mtu_policy"]["strict"] and r["mtu_policy"]["ping_mtu"] == 9000


def test_mtu_9000_unset_no_warning_and_a_9000_ping(trees):
    r, w = run(trees[0], eff("spark1", "head", "192.168.100.10"), 10, expected_mtu=None, min_busbw_gbps=18.0)
    assert r["findings"] == [] and w == []
    assert r["mtu_policy"] == {"strict": False, "minimum": 1500, "ping_mtu": 9000, "below_jumbo": [], "warning": None}


def test_mtu_unset_mixed_twins_and_below_1500(trees, tmp_path):
    root = _copy(trees[0], tmp_path)
    _set_mtu(root, {"enP2p1s0f1np1": 1500})
    r, w = run(root, eff("spark1", "head", "192.168.100.10"), 10, expected_mtu=None)
    # the fabric netdev keeps 9000: the ping stays 9000 (a peer left at 1500 is caught); the twin is named
    assert r["findings"] == [] and r["mtu_policy"]["ping_mtu"] == 9000
    assert len(w) == 1 and "enP2p1s0f1np1 MTU 1500." in w[0] and "enp1s0f1np1 MTU" not in w[0]
    _set_mtu(root, {"enp1s0f1np1": 1280})
    r, w = run(root, eff("spark1", "head", "192.168.100.10"), 10, expected_mtu=None)
    assert "enp1s0f1np1 MTU is 1280, expected 1500" in _checks(r)["mtu_low"]
    # an explicit 1500 is strict too: no warning
    _set_mtu(root, {"enp1s0f1np1": 1500})
    r, w = run(root, eff("spark1", "head", "192.168.100.10"), 10, expected_mtu=1500)
    assert r["findings"] == [] and w == [] and r["mtu_policy"]["ping_mtu"] == 1500


def test_ipv4_from_interface_facts():
    facts = {"eth0": {"device": "eth0", "ipv4": {"address": "10.77.0.11"}, "ipv4_secondaries": [{"address": "10.77.0.99"}]},
             "lo": {"device": "lo", "ipv4": {"address": "127.0.0.1"}}, "docker0": {"device": "docker0"}, "bad": "x"}
    assert npf.ipv4_from_interface_facts(facts) == {"eth0": ["10.77.0.11", "10.77.0.99"], "lo": ["127.0.0.1"]}


def test_ping_args_and_verdicts():
    assert npf.ping_args("10.77.0.12", 9000) == ["ping", "-M", "do", "-s", "8972", "-c", "3", "-W", "2", "10.77.0.12"]
    assert npf.ping_finding(0, "3 received", "", "10.77.0.12", 9000) is None
    too_long = npf.ping_finding(1, "PING 10.77.0.12 (10.77.0.12) 9188(9216) bytes of data.\n3 packets transmitted, 0 received, +3 errors",
                                "ping: local error: message too long, mtu=9000", "10.77.0.12", 9216, "eth0")
    assert "peer 10.77.0.12 not reachable over the fabric with ping -M do -s 9188" in too_long["finding"]
    assert "does not fit the path MTU" in too_long["finding"] and "mtu=9000" in too_long["finding"]
    assert "set mtu: 9216 on the fabric netdev (eth0) of BOTH nodes" in too_long["fix"]
    lost = npf.ping_finding(1, "3 packets transmitted, 0 received, 100% packet loss", "", "10.77.0.12", 9000)
    assert "no reply to a 9000-byte non-fragmented ping" in lost["finding"]
    other = npf.ping_finding(2, "", "ping: connect: Network is unreachable", "10.77.0.12", 9000)
    assert "ping failed (rc=2)" in other["finding"] and "ip route get 10.77.0.12" in other["fix"]


IB_LOG = """spark1:2195:2195 [0] NCCL INFO NCCL version 2.27.7+cuda13.0
spark1:2195:2195 [0] NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.10<0>
spark1:2195:2195 [0] NCCL INFO Using network IB
spark1:2195:2195 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'rocep1s0f1'
spark1:2195:2230 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0
spark1:2195:2195 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 0
#       size         count      type   redop    root     time   algbw   busbw  #wrong
#        (B)    (elements)                                 (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    312.4    3.36    3.36       0
  1073741824     268435456     float     sum      -1  48923.1   21.95   21.95       0
"""


def test_judge_ib_ok_and_low_busbw():
    v = npf.judge(IB_LOG, 0, 18.0, 2)
    assert v["ok"] and v["transport"] == "IB" and v["busbw_gbps"] == 21.95 and len(v["rows"]) == 2
    assert v["summary"] == "transport=IB hcas=rocep1s0f1,roceP2p1s0f1 busbw=21.95 GB/s at 1073741824 bytes (both_twins)"
    low = npf.judge(IB_LOG.replace("21.95   21.95", "11.20   11.20"), 0, 18.0, 2)
    assert not low["ok"] and "busbw 11.20 GB/s at 1073741824 bytes is below 18.00 GB/s (one_twin)" in low["failures"]


def test_judge_rank1_needs_no_rows():
    text = "\n".join(l for l in IB_LOG.splitlines() if "NCCL" in l)
    assert npf.judge(text, 1, 18.0, 2)["ok"]
    assert "no all-reduce result rows found" in npf.judge(text, 0, 18.0, 2)["failures"]


def test_judge_socket_from_the_device_run():
    """The real two-GPU run (tests/fabric/device-run-2026-11-22.log): one host, no HCA -> NCCL's
    network module is Socket (data went over P2P/IPC); the verdict must refuse it with the figures."""
    with open(_DEVICE_LOG) as fh:
        text = fh.read()
    v = npf.judge(text, 0, 18.0, 2)
    assert v["transport"] == "Socket" and not v["ok"]
    assert "NCCL transport is Socket, not IB (NET/IB : No device found)" in v["failures"]
    assert "NCCL uses 0 HCA(s) -, expected 2 (both RoCE twins in NCCL_IB_HCA)" in v["failures"]
    assert v["largest_size_bytes"] == 1073741824 and v["busbw_gbps"] > 100  # NVLink on the device machine
    assert [r["size_bytes"] for r in v["rows"]] == [1048576, 4194304, 16777216, 67108864, 268435456, 1073741824]


def test_docker_argv_matches_the_service_container():
    argv = npf.docker_argv("img:1", "/usr/local/libexec/dgxspark-ds4/ds4_allreduce.py", 1, 2, "192.168.100.10", 29511,
                           "/etc/dgxspark-ds4/nccl.env", name="dgxspark-ds4-allreduce-1")
    text = " ".join(argv)
    for part in ("--network host", "--ipc host", "--ulimit memlock=-1:-1", "--gpus all", "--device /dev/infiniband",
                 "--env-file /etc/dgxspark-ds4/nccl.env", "-e NCCL_DEBUG=INFO", "-e NCCL_DEBUG_SUBSYS=INIT,NET",
                 "/usr/local/libexec/dgxspark-ds4/ds4_allreduce.py:/ds4_allreduce.py:ro",
                 "img:1 /ds4_allreduce.py --rank 1 --world-size 2 --master-addr 192.168.100.10 --master-port 29511"):
        assert part in text
    assert "--gpus" not in npf.docker_argv("i", "/p", 0, 2, "a", 1, "/e", gpus=False, rdma_devices=False)


def test_docker_argv_runs_the_image_python_found_by_container_image():
    """A venv image (b12x: /opt/env/bin) runs the program with its own Python, not python3 on the image's PATH."""
    argv = npf.docker_argv("img:1", "/p", 0, 2, "a", 1, "/e", python="/opt/env/bin/python3")
    assert argv[argv.index("--entrypoint") + 1] == "/opt/env/bin/python3"
    assert argv[argv.index("img:1") + 1] == "/ds4_allreduce.py"
    assert npf.docker_argv("img:1", "/p", 0, 2, "a", 1, "/e")[argv.index("--entrypoint") + 1] == "python3"
