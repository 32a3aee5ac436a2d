# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/module_utils/_node/node_probe.py with a fake run(argv) callable: the argv each probe runs, and what it
makes of systemctl / docker / journalctl output and /proc/meminfo."""


import json
import socket

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe as np


class FakeRun(object):
    """run(argv) -> (rc, out, err) from a table keyed by argv[0]; records every argv."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        return self.answers[argv[0]]


SHOW = ("ActiveState=active\nSubState=running\nResult=success\nNRestarts=2\nMainPID=4242\nExecMainStatus=0\n"
        "InactiveExitTimestamp=Sun 2026-11-22 08:16:56.827396 UTC\nExecMainExitTimestamp=n/a\n")


def test_unit_probe_argv_and_state():
    run = FakeRun({"systemctl": (0, SHOW, "")})
    shown = np.probe_unit(run, "dgxspark-ds4-head.service", np.READY_UNIT_PROPS, "us+utc")
    assert run.calls == [["systemctl", "show", "dgxspark-ds4-head.service", "--timestamp=us+utc", "-p",
                          "ActiveState,SubState,Result,NRestarts,MainPID,ExecMainStatus,InactiveExitTimestamp,ExecMainExitTimestamp"]]
    assert shown.rc == 0 and shown.out == SHOW and shown.value["NRestarts"] == "2"
    st = np.unit_state(shown.value, "dgxspark-ds4-head.service")
    assert st.pop("since") == pytest.approx(1795335416.827396)
    assert st == {"unit": "dgxspark-ds4-head.service", "active_state": "active", "sub_state": "running", "n_restarts": 2,
                  "main_pid": 4242, "exec_main_status": 0, "result": "success", "exit_time": None, "container": None}
    # no timestamp style, another systemctl binary (vllm_status: get_bin_path)
    assert np.unit_show_argv("u.service", ("ActiveState",), systemctl="/bin/systemctl") == [
        "/bin/systemctl", "show", "u.service", "-p", "ActiveState"]


def test_unit_state_edge_cases():
    st = np.unit_state(np.parse_unit_show("ActiveState=active\nMainPID=0\nNRestarts=x\nInactiveExitTimestamp=@1795335400\n"))
    assert st["main_pid"] is None and st["n_restarts"] is None and st["since"] == 1795335400.0
    assert np.unit_state(np.parse_unit_show("ActiveState=failed\nMainPID=0\n"))["main_pid"] == 0
    assert np.epoch("") is None and np.epoch("n/a") is None and np.epoch("@x") is None and np.epoch("yesterday") is None
    assert np.parse_unit_show(" Key = v=w \nnoise\n") == {"Key": "v=w"}


def test_container_probe_state_summary_and_full_document():
    run = FakeRun({"docker": (0, '"c0ffee" true "2026-11-22T08:16:57Z" 0 "sha256:abc" "vllm/vllm-openai:v0.27.1"\n', "")})
    got = np.probe_container(run, "dgxspark-ds4-head")
    assert run.calls[0] == ["docker", "inspect", "--type", "container", "--format", np.CONTAINER_STATE_FORMAT, "dgxspark-ds4-head"]
    assert got.value == {"id": "c0ffee", "running": True, "started_at": "2026-11-22T08:16:57Z", "exit_code": 0,
                         "image_id": "sha256:abc", "image_ref": "vllm/vllm-openai:v0.27.1"}
    gone = np.probe_container(FakeRun({"docker": (1, "", "Error: No such container: x")}), "x")
    assert gone.value is None and gone.rc == 1 and "No such container" in gone.err
    assert np.parse_container_state("") is None and np.parse_container_state("a b c d") is None

    summary = np.parse_container_summary("sha256:abc running=false exit=137 started=2026-11-22T08:16:57Z oom=true "
                                         "image=sha256:def\n")
    assert summary == {"id": "sha256:abc", "running": "false", "exit": "137", "started": "2026-11-22T08:16:57Z",
                       "oom": "true", "image": "sha256:def"}
    run = FakeRun({"/usr/bin/docker": (0, "id1 running=true image=sha256:1\n", "")})
    got = np.probe_container(run, "c", "/usr/bin/docker", np.CONTAINER_SUMMARY_FORMAT, np.parse_container_summary)
    assert got.value["image"] == "sha256:1" and got.value["exit"] == "" and run.calls[0][-1] == "c"

    doc = json.dumps([{"Image": "sha256:img", "Config": {"Image": "vllm:x"}, "RestartCount": 0,
                       "State": {"Running": True, "Status": "running", "StartedAt": "2026-11-22T08:16:57Z"}}])
    run = FakeRun({"docker": (0, doc, "")})
    got = np.probe_container(run, "c", fmt=None, parse=np.parse_container_inspect)
    assert run.calls[0] == ["docker", "inspect", "--type", "container", "c"]
    assert got.value == {"exists": True, "running": True, "status": "running", "started_at": "2026-11-22T08:16:57Z",
                         "image_id": "sha256:img", "image_ref": "vllm:x", "restart_count": 0}
    assert np.parse_container_inspect("[]")["exists"] is False and np.parse_container_inspect("not json")["status"] == "absent"


def test_journal_after_a_cursor_since_a_start_and_kernel():
    run = FakeRun({"journalctl": (0, "line 1\nline 2\n-- cursor: s=2;i=9\n", "")})
    got = np.probe_journal(run, "u.service", cursor="s=1;i=1", since=1795335400.5, max_lines=50)
    assert run.calls[0] == ["journalctl", "-u", "u.service", "-o", "cat", "--no-pager", "--show-cursor", "-n", "50",
                            "--after-cursor", "s=1;i=1"]  # the cursor wins over since
    assert got.value == (["line 1", "line 2"], "s=2;i=9")
    run = FakeRun({"journalctl": (0, "-- No entries --\n", "")})
    got = np.probe_journal(run, "u.service", since=1795335400.5)
    assert run.calls[0][-2:] == ["--since", "@1795335400"]
    assert got.value == ([], "")  # no new cursor: the old one stays
    assert np.probe_journal(FakeRun({"journalctl": (0, "", "")}), "u", cursor="keep").value == ([], "keep")
    assert "--since" not in np.journal_argv("u")
    assert np.journal_argv(kernel=True, output="short-iso", lines=3000) == [
        "journalctl", "-k", "-o", "short-iso", "--no-pager", "-n", "3000"]


MEMINFO = """MemTotal:       130598440 kB
MemFree:         1234567 kB
MemAvailable:   120000000 kB
Cached:          5000000 kB
HugePages_Total:       0
Broken:          lots kB
Bare
"""


def test_meminfo(tmp_path):
    values = np.parse_meminfo(MEMINFO)
    assert values["MemTotal"] == 130598440 and values["HugePages_Total"] == 0
    assert "Broken" not in values and "Bare" not in values
    in_bytes = np.parse_meminfo(MEMINFO, in_bytes=True)
    assert in_bytes["MemAvailable"] == 120000000 * 1024 and in_bytes["HugePages_Total"] == 0
    path = tmp_path / "meminfo"
    path.write_text(MEMINFO)
    text, parsed = np.read_meminfo(str(path))
    assert text == MEMINFO and parsed == values
    with pytest.raises((IOError, OSError)):
        np.read_meminfo(str(tmp_path / "absent"))


def test_probe_host_and_tcp_state():
    assert np.probe_host("0.0.0.0") == "127.0.0.1" and np.probe_host(None) == "127.0.0.1" and np.probe_host("::") == "127.0.0.1"
    assert np.probe_host("10.0.0.5") == "10.0.0.5"
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    try:
        assert np.tcp_state("127.0.0.1", port) == "refused"
        s.listen(1)
        assert np.tcp_state("127.0.0.1", port) == "open"
    finally:
        s.close()


def test_poll_command_is_built_from_the_same_argv():
    cmd = np.poll_command("dgxspark-ds4-head.service", "dgxspark-ds4-head", "", "0.0.0.0", 8000, 100, "/usr/bin/docker")
    assert ("systemctl show dgxspark-ds4-head.service --timestamp=us+utc -p "
            "ActiveState,SubState,Result,NRestarts,MainPID,ExecMainStatus,InactiveExitTimestamp,ExecMainExitTimestamp 2>&1") in cmd
    assert ("/usr/bin/docker inspect --type container --format '%s' dgxspark-ds4-head 2>/dev/null" % np.CONTAINER_STATE_FORMAT) in cmd
    assert "timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/8000'" in cmd
    assert ('since=$(systemctl show -P InactiveExitTimestamp --timestamp=unix dgxspark-ds4-head.service 2>/dev/null); '
            'if [ -n "$since" ]; then journalctl -u dgxspark-ds4-head.service -o cat --no-pager --show-cursor -n 100 '
            '--since "$since"; else journalctl -u dgxspark-ds4-head.service -o cat --no-pager --show-cursor -n 100; fi 2>&1') in cmd
    snap = np.parse_poll("@@ds4-ready@@show\n" + SHOW + "@@ds4-ready@@docker\n\"c1\" false \"t\" 137\n"
                         "@@ds4-ready@@port\ntimeout\nrc=124\n@@ds4-ready@@journal\nbye\n-- cursor: s=9\n", "u", "s=8")
    assert snap["status"]["n_restarts"] == 2 and snap["status"]["container"]["exit_code"] == 137
    assert snap["api_port"] == "timeout" and snap["lines"] == ["bye"] and snap["cursor"] == "s=9"
    weird = np.parse_poll("@@ds4-ready@@port\nbash: no route\nrc=1\n", "u", "c")
    assert weird["api_port"].startswith("error: bash: no route") and weird["cursor"] == "c" and weird["lines"] == []


def test_poll_command_widened_reads_since_the_wait_began():
    """A widened re-read (readiness found no cause in its polls) asks for the whole journal since a time, not the
    current run and not after the cursor."""
    cmd = np.poll_command("u.service", None, "", None, None, 100, since=1795588012.7)
    assert cmd.endswith("journalctl -u u.service -o cat --no-pager --show-cursor -n 100 --since @1795588012 2>&1")
    assert "InactiveExitTimestamp --timestamp=unix" not in cmd


def _run_poll(tmp_path, marker, docker_words):
    """poll_command run by sh with stand-ins for systemctl, docker and journalctl (the real cat and test)."""
    import os
    import subprocess
    stubs = tmp_path / 'bin'
    stubs.mkdir(exist_ok=True)
    for name, out in (('systemctl', SHOW), ('docker', docker_words + '\n'), ('journalctl', 'hello\n-- cursor: s=2\n')):
        (stubs / name).write_text('#!/bin/sh\nprintf %%s %s\n' % json.dumps(out).replace('\\n', '\n'))
        (stubs / name).chmod(0o755)
    cmd = np.poll_command("u.service", "dgxspark-ds4-head", "s=1", None, None, marker=marker)
    out = subprocess.run(['sh', '-c', cmd], env=dict(os.environ, PATH='%s:%s' % (stubs, os.environ['PATH'])),
                         capture_output=True, text=True, check=True).stdout
    return np.parse_poll(out, "u.service", "s=1")


def test_a_poll_reads_the_compile_cache_marker_and_the_container_image(tmp_path):
    """vllm_ready's polls carry the compile cache's marker and the container's image, so tasks/ready.yml marks the
    cache only when compile_cache state=present would write: the marker as written, none yet, no cache directory."""
    from ansible_collections.dgxspark.ds4.plugins.module_utils._image import compile_cache
    cache = tmp_path / 'torch_compile_cache'
    cache.mkdir()
    marker = str(cache / compile_cache.MARKER)
    words = '"c1" true "2026-12-05T04:50:00Z" 0 "sha256:abc" "ds4-vllm-sim:test"'
    # a marker as state=present writes it for this image and launch
    (cache / compile_cache.MARKER).write_text(compile_cache.marker_content('sha256:abc', 'ds4-vllm-sim:test', 'd1'))
    snap = _run_poll(tmp_path, marker, words)
    container = snap['status']['container']
    assert (container['image_id'], container['image_ref'], container['running']) == ('sha256:abc', 'ds4-vllm-sim:test', True)
    assert snap['lines'] == ['hello'] and snap['cursor'] == 's=2'
    assert compile_cache.marker_matches(snap['marker'], container['image_id'], container['image_ref'], 'd1')
    # another launch digest, another image: a write is due
    assert not compile_cache.marker_matches(snap['marker'], 'sha256:abc', 'ds4-vllm-sim:test', 'd2')
    assert not compile_cache.marker_matches(snap['marker'], 'sha256:def', 'ds4-vllm-sim:test', 'd1')
    # the same record in other whitespace (no final newline: the journal's section after it still parses) needs no
    # write; an unreadable one does
    (cache / compile_cache.MARKER).write_text(json.dumps(json.loads(compile_cache.marker_content('sha256:abc', 'ds4-vllm-sim:test', 'd1'))))
    snap = _run_poll(tmp_path, marker, words)
    assert compile_cache.marker_matches(snap['marker'], 'sha256:abc', 'ds4-vllm-sim:test', 'd1') and snap['lines'] == ['hello']
    (cache / compile_cache.MARKER).write_text('{"image_id": "sha256:abc", ')
    assert not compile_cache.marker_matches(_run_poll(tmp_path, marker, words)['marker'], 'sha256:abc', 'ds4-vllm-sim:test', 'd1')
    # no marker in an existing cache directory: due; no directory at all: nothing to mark (NO_DIR)
    (cache / compile_cache.MARKER).unlink()
    snap = _run_poll(tmp_path, marker, words)
    assert snap['marker'] == '' and not compile_cache.marker_matches(snap['marker'], 'sha256:abc', 'ds4-vllm-sim:test', 'd1')
    cache.rmdir()
    assert _run_poll(tmp_path, marker, words)['marker'] == np.NO_DIR
    # an older docker answer (four words) parses, without the image
    assert np.parse_container_state('"c1" true "t" 0') == {"id": "c1", "running": True, "started_at": "t", "exit_code": 0,
                                                           "image_id": None, "image_ref": None}
