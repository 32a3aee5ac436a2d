# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action plugins validate their options with validate_argument_spec, and vllm_ready takes the unit,
container and docker CLI that the config role published (ds4_effective.service). Real ansible-playbook on
localhost; vllm_ready runs in check mode, where it polls nothing and says what it would check."""

import json
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.dirname(sys.executable)

PLAY = """
- name: Action plugin options
  hosts: localhost
  gather_facts: false
  vars:
    ds4_effective:
      role: %(role)s
      unit_name: vllm-%(role)s.service
      serve_args: {served-model-name: m, max-model-len: 4096}
      api: {host: 127.0.0.1, port: 8000}
      service: {unit_name: vllm-%(role)s.service, container_name: vllm-c-%(role)s, docker_bin: /opt/bin/docker}
  tasks:
    - name: Readiness (check mode)
      dgxspark.ds4.vllm_ready: %(args)s
      check_mode: true
      register: r
    - name: Show
      ansible.builtin.debug:
        msg: "CHECKS={{ r.would_check | join(' | ') }}"
"""


def _play(tmp_path, role="head", args=None):
    path = tmp_path / "play.yml"
    path.write_text(PLAY % {"role": role, "args": json.dumps(args or {})})
    env = dict(os.environ)
    env.update(ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_RETRY_FILES_ENABLED="0", ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), str(path)], cwd=str(tmp_path), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=120, check=False)
    return proc.returncode, proc.stdout


def _checks(out):
    return [ln for ln in out.splitlines() if "CHECKS=" in ln][-1]


def test_vllm_ready_uses_the_published_unit_and_container(tmp_path):
    rc, out = _play(tmp_path, "head", {"timeout": 5})
    assert rc == 0, out
    checks = _checks(out)
    assert "unit vllm-head.service state" in checks, checks
    assert "container vllm-c-head" in checks, checks
    assert "GET /v1/models: id m, max_model_len 4096" in checks, checks


def test_vllm_ready_refuses_a_bad_option_type(tmp_path):
    rc, out = _play(tmp_path, "head", {"api_port": "not-a-port"})
    assert rc != 0, out
    assert "api_port" in out and "int" in out, out


def test_vllm_ready_refuses_an_unknown_option(tmp_path):
    rc, out = _play(tmp_path, "worker", {"unit_nmae": "x.service"})
    assert rc != 0, out
    assert "unit_nmae" in out, out
