# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm_status main() reads the unit and the container through the node probe (mocked systemctl / docker):
the argv it runs and the row it builds, and a missing container reads as absent."""


import json

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import ops_status
from ansible_collections.dgxspark.ds4.plugins.modules import vllm_status as mod
from .module_harness import ExitJson, FailJson, patch_exit

CALLS = []
CONTAINER = {"present": True}
DOC = [{"Image": "sha256:0123456789abcdef", "Config": {"Image": "vllm:test"}, "RestartCount": 0,
        "State": {"Running": True, "Status": "running", "StartedAt": "2026-11-22T08:00:00Z"}}]


def _run_command(self, cmd, **kwargs):
    CALLS.append(list(cmd))
    if cmd[0].endswith("systemctl"):
        return 0, "ActiveState=active\nSubState=running\nNRestarts=1\nMainPID=42\n", ""
    if cmd[0].endswith("docker"):
        if CONTAINER["present"]:
            return 0, json.dumps(DOC), ""
        return 1, "[]", "Error: No such container: c"
    raise AssertionError(cmd)


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    del CALLS[:]
    CONTAINER["present"] = True
    patch_exit(monkeypatch)
    monkeypatch.setattr(AnsibleModule, "get_bin_path", lambda self, name, *a, **k: "/usr/bin/" + name)
    monkeypatch.setattr(AnsibleModule, "run_command", _run_command)


def run(args):
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as info:
            mod.main()
    return info.type, info.value.args[0]


def test_unit_and_container_through_the_probe():
    kind, res = run({"role": "worker", "node": "spark2", "unit": "dgxspark-ds4-worker.service", "container": "dgxspark-ds4-worker"})
    assert kind is ExitJson and res["changed"] is False
    assert CALLS[0] == ["/usr/bin/systemctl", "show", "dgxspark-ds4-worker.service", "-p", ",".join(ops_status.UNIT_PROPS)]
    assert CALLS[1] == ["/usr/bin/docker", "inspect", "--type", "container", "dgxspark-ds4-worker"]
    row = res["row"]
    assert row["unit"] == "active/running (1 restarts)" and row["container"] == "running" and row["image"] == "0123456789ab"
    assert row["healthy"] is True and res["msg"] == "worker active/running (1 restarts), container running, endpoint -"


def test_missing_container_is_absent():
    CONTAINER["present"] = False
    kind, res = run({"role": "worker", "unit": "u.service", "container": "c"})
    assert res["row"]["container"] == "absent" and res["row"]["healthy"] is False
