# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the real fabric_facts and nccl_allreduce main() with mocked exit_json/fail_json/run_command."""


import importlib.util
import os

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.ds4.plugins.modules import fabric_facts as ff
from ansible_collections.dgxspark.ds4.plugins.modules import nccl_allreduce as ar

_MAKER = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "sysfs", "make_fixtures.py")
_SPEC = importlib.util.spec_from_file_location("ds4_sysfs_fixtures_mod", _MAKER)
_MOD = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_MOD)
_DEVICE_LOG = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fabric", "device-run-2026-11-22.log")


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


CALLS = []
WARNS = []


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    del CALLS[:]
    del WARNS[:]

    def _exit(self, **kwargs):
        raise ExitJson(kwargs)

    def _fail(self, **kwargs):
        raise FailJson(kwargs)

    def _run(self, argv, **kwargs):
        CALLS.append(argv)
        return RESPONSES[argv[0]]

    monkeypatch.setattr(basic.AnsibleModule, 'exit_json', _exit)
    monkeypatch.setattr(basic.AnsibleModule, 'fail_json', _fail)
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', _run)
    monkeypatch.setattr(basic.AnsibleModule, 'warn', lambda self, w: WARNS.append(w))


RESPONSES = {}


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    return _MOD.build(str(tmp_path_factory.mktemp("sysfs")))


def run(mod, args):
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as info:
            mod.main()
    return info.type, info.value.args[0]


def _eff(ip, rank):
    return {"host": "spark%d" % (rank + 1), "role": "head" if rank == 0 else "worker", "profile": "balanced",
            "fabric": {"ip": ip, "ifname": "eth0", "rdma_hcas": ["rocep1s0f1", "roceP2p1s0f1"], "gid_index": None},
            "env": {"NCCL_IB_DISABLE": "0"}, "per_node_env": []}


def test_fabric_facts_on_fixture_with_jumbo_ping(trees, tmp_path):
    RESPONSES["ping"] = (0, "3 packets transmitted, 3 received, 0% packet loss", "")
    kind, res = run(ff, {"sysfs_root": trees[1], "effective": _eff("10.77.0.12", 1), "fabric_ip": "192.168.100.11",
                         "ipv4_by_ifname": {"enp1s0f1np1": ["192.168.100.11"], "enP2p1s0f1np1": ["192.168.101.11"]},
                         "dev_infiniband": str(tmp_path), "peers": ["10.77.0.11"], "fabric_env": {"NCCL_NET": "IB"}})
    assert kind is ExitJson and res["changed"] is False
    # NCCL_IB_GID_INDEX unset by default (NCCL picks RoCE v2 itself); the header says so
    assert "NCCL_IB_GID_INDEX=" not in res["env_file"].replace("NCCL_IB_GID_INDEX=unset", "")
    assert "VLLM_HOST_IP=10.77.0.12\n" in res["env_file"]
    assert "NCCL_SOCKET_IFNAME==eth0\n" in res["env_file"] and "NCCL_NET=IB\n" in res["env_file"]
    assert CALLS == [["ping", "-M", "do", "-s", "8972", "-c", "3", "-W", "2", "10.77.0.11"]]
    assert res["ping_findings"] == [] and res["findings"] == [] and res["dev_infiniband_present"] is True
    assert {"key": "ds4_fabric_ifname", "inventory": "eth0", "discovered": "enp1s0f1np1"} in res["disagreements"]
    assert any("ds4_fabric_ifname: inventory says eth0, discovery found enp1s0f1np1" in w for w in WARNS)


def test_fabric_facts_ping_failure_is_reported(trees, tmp_path):
    RESPONSES["ping"] = (1, "3 packets transmitted, 0 received, +3 errors, 100% packet loss", "ping: local error: message too long, mtu=1500")
    kind, res = run(ff, {"sysfs_root": trees[0], "effective": _eff("192.168.100.10", 0), "peers": ["192.168.100.11"],
                         "ipv4_by_ifname": {"enp1s0f1np1": ["192.168.100.10"]}, "dev_infiniband": str(tmp_path / "nope")})
    assert kind is ExitJson
    assert res["ping_findings"][0]["check"] == "jumbo_ping" and "mtu=1500" in res["ping_findings"][0]["finding"]
    assert [f["check"] for f in res["findings"]] == ["dev_infiniband_missing"]


def test_fabric_facts_rejects_a_non_sysfs_root(tmp_path):
    kind, res = run(ff, {"sysfs_root": str(tmp_path)})
    assert kind is FailJson and "has no class/net: not a sysfs tree; fix nccl_fabric_sysfs_root" in res["msg"]


def test_nccl_allreduce_parses_the_device_run():
    with open(_DEVICE_LOG) as fh:
        RESPONSES["docker"] = (0, fh.read(), "")
    kind, res = run(ar, {"image": "img", "program": "/p.py", "env_file": "/e.env", "rank": 0, "master_addr": "127.0.0.1"})
    assert kind is ExitJson and res["changed"] is False and res["ok"] is False
    assert res["transport"] == "Socket" and res["busbw_gbps"] > 100
    assert CALLS[0][:3] == ["docker", "run", "--rm"]


def test_nccl_allreduce_container_failure_is_shown():
    RESPONSES["docker"] = (1, "", "docker: Error response from daemon: could not select device driver \"\" with capabilities: [[gpu]].")
    kind, res = run(ar, {"image": "img", "program": "/p.py", "env_file": "/e.env", "rank": 1, "master_addr": "10.0.0.1"})
    assert kind is ExitJson and not res["ok"]
    assert res["failures"][0].startswith("the preflight container exited 1 (last lines: docker: Error response")


def test_nccl_allreduce_check_mode_runs_nothing():
    kind, res = run(ar, {"image": "img", "program": "/p.py", "env_file": "/e.env", "rank": 0, "master_addr": "10.0.0.1", "_ansible_check_mode": True})
    assert kind is ExitJson and res["skipped_run"] is True and CALLS == []
