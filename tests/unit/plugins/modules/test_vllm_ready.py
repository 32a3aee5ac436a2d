# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_ready module (one poll; HTTP checks) with mocked systemctl/docker/journalctl."""


import socket

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.ds4.plugins.modules import vllm_ready as mod


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


CALLS = []


def _run_command(self, cmd, **kwargs):
    CALLS.append(cmd)
    if cmd[0] == "systemctl":
        return 0, ("ActiveState=active\nSubState=running\nNRestarts=1\nMainPID=4242\nExecMainStatus=0\nResult=success\n"
                   "InactiveExitTimestamp=@1795335400\n"), ""
    if cmd[0] == "docker":
        return 0, '"c0ffee" true "2026-11-22T08:16:57Z" 0\n', ""
    if cmd[0] == "journalctl":
        return 0, ("(APIServer pid=7) INFO 11-22 08:16:58 [kv_cache_utils.py:1087] GPU KV cache size: 611,712 tokens\n"
                   "-- cursor: s=1;i=2\n"), ""
    raise AssertionError(cmd)


def _exit(self, **kwargs):
    raise ExitJson(kwargs)


def _fail(self, **kwargs):
    raise FailJson(kwargs)


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    del CALLS[:]
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", _run_command)


def run(args):
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as info:
            mod.main()
    return info.type, info.value.args[0]


def test_one_poll_refused_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))  # bound, not listening, like vLLM while it loads
    port = s.getsockname()[1]
    try:
        kind, res = run({"unit": "dgxspark-ds4-head.service", "container_name": "dgxspark-ds4-head", "api_host": "0.0.0.0",
                         "api_port": port, "checks": True})
    finally:
        s.close()
    assert kind is ExitJson and res["changed"] is False
    assert res["status"]["n_restarts"] == 1 and res["status"]["main_pid"] == 4242
    assert res["status"]["container"]["running"] is True and res["status"]["container"]["id"] == "c0ffee"
    assert res["lines"] == ["(APIServer pid=7) INFO 11-22 08:16:58 [kv_cache_utils.py:1087] GPU KV cache size: 611,712 tokens"]
    assert res["cursor"] == "s=1;i=2" and res["api_port"] == "refused" and "http" not in res
    journal = [c for c in CALLS if c[0] == "journalctl"][0]
    assert "--since" in journal and "@1795335400" in journal  # the lines of the unit's current run


def test_cursor_is_followed():
    kind, res = run({"unit": "u.service", "cursor": "s=0;i=1"})
    journal = [c for c in CALLS if c[0] == "journalctl"][0]
    assert journal[journal.index("--after-cursor") + 1] == "s=0;i=1"
    assert "api_port" not in res and res["status"]["container"] is None


def test_check_mode_polls_nothing():
    kind, res = run({"unit": "u.service", "_ansible_check_mode": True})
    assert kind is ExitJson and res["changed"] is False and "would poll" in res["msg"] and CALLS == []


def test_status_false_reads_only_the_journal_after_the_cursor():
    """The action's HTTP-check run right after its own poll (status=false): no systemctl, no docker inspect, the
    journal after that poll's cursor; without a cursor it is refused by name."""
    kind, res = run({"unit": "u.service", "container_name": "c", "cursor": "s=0;i=1", "status": False})
    assert kind is ExitJson and res["status"] == {} and res["cursor"] == "s=1;i=2"
    assert [c[0] for c in CALLS] == ["journalctl"]
    assert CALLS[0][CALLS[0].index("--after-cursor") + 1] == "s=0;i=1"
    kind, res = run({"unit": "u.service", "status": False})
    assert kind is FailJson and "status=false needs cursor" in res["msg"]


def test_the_actions_direct_run_gives_the_modules_result(tmp_path):
    """The action's run without a module upload (converge_state's direct run, entry checks: ready_checks.py with
    node_probe, vllm_client and readiness_http, whose `from package import module` the bootstrap serves; python3 -I, the
    collection not importable) returns what the module returns for the same options, with the same commands run; its
    defaults are the module's."""
    import json
    import os
    import subprocess
    import sys
    from ansible_collections.dgxspark.ds4.plugins.action import converge_state as action
    from ansible_collections.dgxspark.ds4.plugins.module_utils._readiness.vllm_ready_spec import ARGUMENT_SPEC
    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "calls"
    for name in ("systemctl", "docker", "journalctl"):
        rc, out, err = _run_command(None, [name])
        (fake / name).write_text("#!%s\nimport sys\nopen(%r, 'a').write(' '.join(sys.argv[:1] and [%r] + sys.argv[1:]) + '\\n')\n"
                                 "sys.stdout.write(%r)\n" % (sys.executable, str(log), name, out))
        os.chmod(str(fake / name), 0o755)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))  # bound, not listening: the port is refused, no HTTP check runs
    port = s.getsockname()[1]
    env = dict(os.environ, PATH="%s:%s" % (fake, os.environ["PATH"]))
    cases = [{"unit": "dgxspark-ds4-head.service", "container_name": "dgxspark-ds4-head", "api_host": "0.0.0.0",
              "api_port": port, "checks": True},
             {"unit": "u.service", "container_name": "c", "cursor": "s=0;i=1", "status": False}]
    try:
        for args in cases:
            del CALLS[:]
            kind, module = run(args)
            assert kind is ExitJson
            if log.exists():
                log.unlink()
            params = dict((k, v.get("default")) for k, v in ARGUMENT_SPEC.items())
            params.update(args)
            proc = subprocess.run([sys.executable, "-I", "-c", action._PROBE_BOOT], input=action.direct_payload(params, "checks"),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False,
                                  cwd=str(tmp_path), env=env)
            assert proc.returncode == 0, proc.stderr
            direct = json.loads(proc.stdout)
            assert direct == json.loads(json.dumps(module)), (direct, module)
            assert log.read_text().splitlines() == [" ".join(c) for c in CALLS]
    finally:
        s.close()
    assert module["cursor"] == "s=1;i=2" and module["status"] == {} and direct["lines"] == module["lines"] != []


def test_the_heads_first_poll_runs_here_with_the_checks_after_it(monkeypatch):
    """The action's first poll on the head (option poll: its own poll command) runs here through /bin/sh, one node call
    for the poll and the checks: its output goes back as it is (the action parses it as it parses its own polls), the
    unit, the container and the journal are not read a second time, and the HTTP checks run after it only when it found
    the API port open."""
    from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe
    from ansible_collections.dgxspark.ds4.plugins.module_utils._readiness import ready_checks
    http = []
    monkeypatch.setattr(ready_checks, "http_checks", lambda host, port, **kw: http.append((host, port, kw)) or {"ok": True})
    mark = node_probe._MARK
    polled = {}

    def sh(self, cmd, **kwargs):
        CALLS.append(cmd)
        return 0, polled["out"], ""

    monkeypatch.setattr(basic.AnsibleModule, "run_command", sh)
    poll = node_probe.poll_command("u.service", "c", "", "127.0.0.1", 8001)
    for port, checked in (("open\nrc=0", True), ("bash: connect: Connection refused\nrc=1", False)):
        del CALLS[:], http[:]
        polled["out"] = ("%sshow\nActiveState=active\nSubState=running\n%sdocker\n%sport\n%s\n%sjournal\n"
                         "INFO Application startup complete.\n-- cursor: s=1;i=2\n" % (mark, mark, mark, port, mark))
        kind, res = run({"unit": "u.service", "container_name": "c", "api_host": "127.0.0.1", "api_port": 8001,
                         "checks": True, "status": False, "poll": poll})
        assert kind is ExitJson and CALLS == [["/bin/sh", "-c", poll]]
        assert res["poll"] == {"rc": 0, "stdout": polled["out"], "stderr": ""} and "status" not in res
        snap = node_probe.parse_poll(res["poll"]["stdout"], "u.service")
        assert snap["api_port"] == ("open" if checked else "refused") and snap["cursor"] == "s=1;i=2"
        assert ("http" in res) is checked and [h[:2] for h in http] == [("127.0.0.1", 8001)] * int(checked), (res, http)
