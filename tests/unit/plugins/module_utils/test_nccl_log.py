# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for nccl_log on real-format NCCL_DEBUG=INFO lines (vllm-ops.md §3.3)."""


import os

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._fabric import nccl_log

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "logs")


def _read(name):
    with open(os.path.join(FIXTURES, name)) as fh:
        return fh.read()


def test_ib_log_parsed():
    log = nccl_log.parse_log(_read("nccl_ib_two_twins.log"))
    assert log["nccl_version"] == "2.27.7+cuda13.0"
    assert log["transport"] == "IB"
    assert log["hca_names"] == ["rocep1s0f1", "roceP2p1s0f1"]
    assert log["hcas"][1] == {"index": 1, "name": "roceP2p1s0f1", "port": 1, "link": "RoCE"}
    assert log["relaxed_ordering"] is True
    assert (log["oob_ifname"], log["oob_ip"]) == ("enp1s0f1np1", "192.168.100.16")
    assert log["gdr"] == 0
    assert log["gdr_by_hca"] == {"rocep1s0f1": False, "roceP2p1s0f1": False}
    assert log["channels"] == {"NET/IB": 4}
    assert log["no_ib_device"] is False
    assert log["warnings"] == []
    assert log["connected"] == ["rings", "trees"]


def test_socket_log_parsed():
    log = nccl_log.parse_log(_read("nccl_socket_fallback.log"))
    assert log["transport"] == "Socket"
    assert log["no_ib_device"] is True
    assert log["hca_names"] == []
    assert log["socket_devices"] == [{"index": 0, "ifname": "enp1s0f1np1", "ip": "192.168.100.16"}]
    assert log["channels"] == {"NET/Socket": 2}


def test_transport_inferred_from_channels_without_using_network_line():
    lines = ["h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",
             "h:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA"]
    log = nccl_log.parse_log(lines)
    assert log["transport"] == "IB"
    assert log["channels"] == {"NET/IB/GDRDMA": 2}


def test_vllm_nccl_version_used_when_nccl_banner_absent():
    assert nccl_log.parse_log(["(Worker pid=1) INFO [pynccl.py:111] vLLM is using nccl==2.27.7"])["nccl_version"] == "2.27.7"


def test_single_hca_line():
    log = nccl_log.parse_log(["h:1:1 [0] NCCL INFO NET/IB : Using [0]rocep1s0f0:1/RoCE [RO]; OOB enp1s0f0np0:192.168.100.10<0>",
                              "h:1:1 [0] NCCL INFO Using network IB"])
    assert log["hca_names"] == ["rocep1s0f0"]
    assert log["oob_ifname"] == "enp1s0f0np0"


def test_warnings_collected():
    log = nccl_log.parse_log(["spark2:212:389 [0] misc/ibvwrap.cc:196 NCCL WARN Call to ibv_reg_mr_iova2 failed with error "
                              "Cannot allocate memory"])
    assert log["warnings"] == ["Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory"]


def test_rows_parsed_with_nccl_tests_extra_columns():
    rows = nccl_log.parse_rows(_read("nccl_ib_two_twins.log"))
    assert [r["size_bytes"] for r in rows] == [1048576, 16777216, 268435456, 1073741824]
    assert rows[-1] == {"size_bytes": 1073741824, "count": 268435456, "type": "float", "redop": "sum", "root": -1,
                        "time_us": 48923.1, "algbw_gbps": 21.95, "busbw_gbps": 21.95}


def test_rows_skip_comments_and_noise():
    rows = nccl_log.parse_rows("#  size count type redop root time algbw busbw\n"
                               "# 1073741824 268435456 float sum -1 1.0 2.0 3.0\n"
                               "NCCL INFO Using network IB\n"
                               "  4096  1024  float  sum  -1  30.5  0.13  0.13\n")
    assert len(rows) == 1
    assert rows[0]["time_us"] == 30.5


@pytest.mark.parametrize("busbw,expected", [
    (21.96, "both_twins"), (18.0, "both_twins"), (15.0, "degraded"), (11.2, "one_twin"), (10.0, "one_twin"),
    (9.99, "socket_speed"), (2.0, "socket_speed"), (None, "unknown"),
])
def test_classify(busbw, expected):
    assert nccl_log.classify_busbw(busbw) == expected


def test_summary_ok_on_both_twins():
    s = nccl_log.summarize(_read("nccl_ib_two_twins.log"))
    assert s["ok"] is True
    assert s["failures"] == []
    assert s["transport"] == "IB"
    assert s["hcas"] == ["rocep1s0f1", "roceP2p1s0f1"]
    assert s["hca_count"] == 2
    assert s["largest_size_bytes"] == 1073741824
    assert s["busbw_gbps"] == 21.95
    assert s["bandwidth_class"] == "both_twins"
    assert s["summary"] == "transport=IB hcas=rocep1s0f1,roceP2p1s0f1 busbw=21.95 GB/s at 1073741824 bytes (both_twins)"


def test_summary_fails_on_socket_fallback_with_figures():
    s = nccl_log.summarize(_read("nccl_socket_fallback.log"))
    assert s["ok"] is False
    assert s["transport"] == "Socket"
    assert s["failures"] == [
        "NCCL transport is Socket, not IB (NET/IB : No device found)",
        "NCCL uses 0 HCA(s) -, expected 2 (both RoCE twins in NCCL_IB_HCA)",
        "busbw 2.31 GB/s at 1073741824 bytes is below 18.00 GB/s (socket_speed)",
    ]


def test_summary_one_twin_fails_hca_and_threshold():
    log = ["h:1:1 [0] NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.10<0>",
           "h:1:1 [0] NCCL INFO Using network IB"]
    rows = ["   268435456      67108864     float     sum      -1  23301.2   11.52   11.52"]
    s = nccl_log.summarize(log, rows)
    assert s["bandwidth_class"] == "one_twin"
    assert s["failures"] == ["NCCL uses 1 HCA(s) rocep1s0f1, expected 2 (both RoCE twins in NCCL_IB_HCA)",
                             "busbw 11.52 GB/s at 268435456 bytes is below 18.00 GB/s (one_twin)"]
    # a lower threshold and no HCA expectation pass the same figures
    assert nccl_log.summarize(log, rows, threshold_gbps=10.0, expected_hcas=None)["ok"] is True


def test_summary_without_rows():
    s = nccl_log.summarize(["h:1:1 [0] NCCL INFO Using network IB"], [], expected_hcas=None)
    assert s["ok"] is False
    assert s["failures"] == ["no all-reduce result rows found"]
    assert s["busbw_gbps"] is None
