# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module dgxspark.ds4.compile_cache run by ansible-playbook on localhost: check says cold (seed 002's warning on a
96 GiB node), present writes the marker with the running container's image (a stand-in docker CLI answers
`docker inspect`), a second present is no change, check mode writes nothing, and check then says warm."""

import json
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.dirname(sys.executable)
IMG = "sha256:" + "c" * 64
STEP = """
    - name: %(name)s
      dgxspark.ds4.compile_cache:
        path: "{{ cache }}"
        state: %(state)s
        image_id: "%(img)s"
        launch_digest: 0123456789abcdef
        custom_ops_all: true
        node_memory_gib: 96
        container: dgxspark-ds4-head
        docker: "{{ docker }}"
      check_mode: %(check)s
      register: %(name)s
"""
PLAY = ("""
- hosts: localhost
  gather_facts: false
  connection: local
  tasks:
""" + STEP % dict(name="cold", state="check", img=IMG, check="false") + """
    - name: vLLM writes a compiled artifact
      ansible.builtin.copy:
        content: "# compiled"
        dest: "{{ cache }}/1517964802/rank_0_0/backbone/computation_graph.py"
        mode: "0644"
""" + STEP % dict(name="unmarked", state="check", img=IMG, check="false")
        + STEP % dict(name="in_check_mode", state="present", img=IMG, check="true") + """
    - name: Marker after check mode
      ansible.builtin.stat:
        path: "{{ cache }}/.dgxspark-ds4-compiled-by.json"
      register: after_check_mode
""" + STEP % dict(name="marked", state="present", img=IMG, check="false")
        + STEP % dict(name="again", state="present", img=IMG, check="false")
        + STEP % dict(name="warm", state="check", img=IMG, check="false")
        + STEP % dict(name="other", state="check", img="sha256:" + "d" * 64, check="false") + """
    - name: Results
      ansible.builtin.copy:
        content: "{{ dict(cold=cold, unmarked=unmarked, in_check_mode=in_check_mode, after_check_mode=after_check_mode,
                          marked=marked, again=again, warm=warm, other=other) | to_json }}"
        dest: "{{ result }}"
        mode: "0644"
""")


def test_cold_then_marked_after_readiness_then_warm(tmp_path):
    docker = tmp_path / "docker"
    docker.write_text('#!/bin/sh\n[ "$1" = inspect ] && [ "$4" = dgxspark-ds4-head ] && echo "%s dgxspark-ds4/vllm:0123" '
                      '&& exit 0\necho "unexpected: $*" >&2; exit 1\n' % IMG)
    docker.chmod(0o755)
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "torch_compile_cache" / "1517964802" / "rank_0_0" / "backbone").mkdir(parents=True)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_RETRY_FILES_ENABLED="0")
    extra = {"cache": str(tmp_path / "torch_compile_cache"), "docker": str(docker),
             "result": str(tmp_path / "result.json"), "ansible_python_interpreter": sys.executable}
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", str(tmp_path / "play.yml"),
                           "-e", json.dumps(extra)], cwd=str(tmp_path), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout
    r = json.loads((tmp_path / "result.json").read_text())
    assert r["cold"]["state"] == "empty" and not r["cold"]["changed"]
    assert 'Seed 002: "The crash was caused by custom_ops: ["all"]' in r["cold"]["warning"]
    assert r["unmarked"]["state"] == "unmarked" and r["unmarked"]["warning"]
    assert r["in_check_mode"]["changed"] and not r["after_check_mode"]["stat"]["exists"]
    assert r["marked"]["changed"] and r["marked"]["marker"] == {
        "image_id": IMG, "image_ref": "dgxspark-ds4/vllm:0123", "launch_digest": "0123456789abcdef",
        "written_by": "dgxspark.ds4 after the pair passed readiness"}
    assert not r["again"]["changed"]
    assert r["warm"]["state"] == "warm" and r["warm"]["warm"] and r["warm"]["warning"] is None
    assert r["other"]["state"] == "other-image" and r["other"]["warning"]
