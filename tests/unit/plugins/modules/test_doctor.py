# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ds4_doctor main() with mocked commands: catalogue findings per node, and secrets redacted everywhere."""


import json

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.ds4.plugins.modules import ds4_doctor as mod


class ExitJson(Exception):
    pass


JOURNAL = "\n".join([
    "2026-11-22T07:50:01+0000 spark1 systemd[1]: Starting dgxspark-ds4-head.service - dgxspark.ds4 vLLM head...",
    "2026-11-22T07:50:05+0000 spark1 dgxspark-ds4-head[800]: vllm serve: error: argument --default-chat-template-kwargs: invalid loads "
    "value: '{thinking:true}'",
    "2026-11-22T08:00:00+0000 spark1 systemd[1]: Started dgxspark-ds4-head.service - dgxspark.ds4 vLLM head.",
    "2026-11-22T08:00:01+0000 spark1 dgxspark-ds4-head[901]: (APIServer pid=1) INFO 11-22 08:00:01 [utils.py:328] non-default args: "
    "{'model': '/models/ds4', 'api_key': ['sk-live-999'], 'max_num_batched_tokens': 8192}",
    "2026-11-22T08:00:09+0000 spark1 dgxspark-ds4-head[901]: (EngineCore_DP0 pid=2) ERROR 11-22 08:00:09 [core.py:1] ValueError: Free memory "
    "on device cuda:0 (95.2/119.67 GiB) on startup is less than desired GPU memory utilization (0.9, 107.7 GiB). Decrease GPU "
    "memory utilization or reduce GPU memory used by other processes.",
])
KERNEL = "2026-11-22T08:00:10+0000 spark1 kernel: NVRM: nvAssertOkFailedNoLog: Assertion failed: NV_ERR_NO_MEMORY\nother line"


def _run_command(self, cmd, **kwargs):
    if cmd[0] == "systemctl":
        return 0, "LoadState=loaded\nActiveState=failed\nSubState=failed\nNRestarts=3\nResult=exit-code\n", ""
    if cmd[0] == "journalctl" and "-k" in cmd:
        return 0, KERNEL, ""
    if cmd[0] == "journalctl":
        return 0, JOURNAL if "dgxspark-ds4-head.service" in cmd else "", ""
    if cmd[0].endswith("docker"):
        return 1, "", "No such object"
    return 0, "", ""


def _exit(self, **kwargs):
    raise ExitJson(kwargs)


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", _run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: "/usr/bin/" + name if name == "docker" else None)


def test_doctor_diagnoses_and_redacts(tmp_path):
    (tmp_path / "secrets-head.env").write_text(u"VLLM_API_KEY=sk-live-999\nHF_TOKEN=hf_abcdefghijklmnopqrstuvwx\n")
    (tmp_path / "nccl.env").write_text(u"NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1\n")
    args = {"role": "head", "node": "spark1", "config_dir": str(tmp_path), "ports": [29501, 8000], "secrets": ["sk-live-999"]}
    with patch_module_args(args):
        with pytest.raises(ExitJson) as info:
            mod.main()
    res = info.value.args[0]
    assert res["changed"] is False
    ids = [f["id"] for f in res["findings"]]
    assert "free-memory-below-utilization" in ids and "nv-err-no-memory" in ids
    assert any(v.startswith("spark1: ") and "Free memory" in v for v in res["verdicts"])
    assert res["verdicts"][-1].startswith("(earlier run) spark1: a JSON-valued flag")
    assert [f["earlier_run"] for f in res["findings"]].count(True) == 1
    dump = json.dumps(res)
    assert "sk-live-999" not in dump and "hf_abcdefghijklmnopqrstuvwx" not in dump
    assert "NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1" in res["evidence"]["env_files"]
    assert "max_num_batched_tokens': 8192" in res["evidence"]["journal_dgxspark-ds4-head.service"]
    assert res["units"]["dgxspark-ds4-head.service"]["NRestarts"] == "3"
    assert "NV_ERR_NO_MEMORY" in res["evidence"]["kernel"] and "other line" not in res["evidence"]["kernel"]


def test_doctor_reads_the_units_journal_not_docker_logs(tmp_path, monkeypatch):
    """The unit's journal is the one copy of vLLM's log (container log driver none): the doctor never asks docker logs,
    even with the container present, and still finds the causes in the journal."""
    calls = []

    def run(self, cmd, **kwargs):
        calls.append(list(cmd))
        if cmd[0].endswith("docker") and cmd[1:2] == ["inspect"]:
            return 0, "c0ffee running=true exit=0 started=2026-11-22T08:00:00Z oom=false image=sha256:abc", ""
        return _run_command(self, cmd, **kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run)
    with patch_module_args({"role": "head", "node": "spark1", "config_dir": str(tmp_path)}):
        with pytest.raises(ExitJson) as info:
            mod.main()
    res = info.value.args[0]
    assert any(c[0] == "journalctl" and "dgxspark-ds4-head.service" in c for c in calls)
    assert res["container_image"] == "sha256:abc"  # the container was found (the old code read its docker logs here)
    assert not [c for c in calls if c[0].endswith("docker") and "logs" in c], calls
    assert "container_log" not in res["evidence"]
    assert "free-memory-below-utilization" in [f["id"] for f in res["findings"]]


def test_doctor_leads_with_a_crash_of_the_previous_boot(tmp_path):
    hold = tmp_path / "crash-hold.json"
    hold.write_text(json.dumps({
        "incident": "3f2a9c1b7d4e", "after_crash": "hold", "held": True,
        "evidence": "/var/lib/dgxspark-ds4/evidence/crash-20251124T150000Z-3f2a9c1b7d4e",
        "findings": [{"node": "spark1", "id": "gsp-timeout", "cause": "the GPU's GSP firmware stopped answering",
                      "fix": "apply the mxfp4 per-layer tensor release", "source": "seed 000",
                      "line": "NVRM: Xid (PCI:000f:01:00): 119, pid=2981, name=VLLM::Worker, Timeout after 6s of waiting for RPC "
                              "response from GPU0 GSP!"}]}))
    args = {"role": "head", "node": "spark1", "config_dir": str(tmp_path), "crash_hold": str(hold)}
    with patch_module_args(args):
        with pytest.raises(ExitJson) as info:
            mod.main()
    verdicts = info.value.args[0]["verdicts"]
    assert verdicts[0] == ("spark1: previous boot crashed, pair HELD (not started): incident 3f2a9c1b7d4e, "
                           "vllm_service_after_crash hold")
    assert verdicts[2] == "  fix: apply the mxfp4 per-layer tensor release"
    assert verdicts[3].endswith("release: ansible-playbook playbooks/ack.yml")
