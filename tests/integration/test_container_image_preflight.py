# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""container_image's preflight refuses the new inputs' bad values (mxfp4 path / Python, DeepGEMM resolve argv,
prune keep files) naming the variable, the value and the fix; the defaults pass those checks (real
ansible-playbook on localhost, only tasks/preflight.yml, nothing changes)."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.dirname(sys.executable)
PLAY = """
- hosts: localhost
  gather_facts: false
  connection: local
  tasks:
    - name: Preflight only
      ansible.builtin.import_role:
        name: dgxspark.ds4.container_image
        tasks_from: preflight
"""


def _preflight(tmp_path, extra):
    (tmp_path / "play.yml").write_text(PLAY)
    env = dict(os.environ)
    env.update(ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_RETRY_FILES_ENABLED="0")
    cmd = [os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", str(tmp_path / "play.yml"),
           "-e", json.dumps(extra)]
    proc = subprocess.run(cmd, cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    return proc.returncode, proc.stdout


@pytest.mark.parametrize("extra, needle", [
    ({"container_image_mxfp4_path": "vllm/mxfp4.py"},
     "container_image_mxfp4_path=vllm/mxfp4.py is not an absolute path of a .py file in the image: set it to mxfp4.py"),
    ({"container_image_python": "venv/bin/python3"},
     "container_image_python=venv/bin/python3 is not an absolute path nor python/python3 on the image PATH: set the Python"),
    ({"container_image_deepgemm_probe": []},
     "container_image_deepgemm_probe=[] must be a non-empty argv"),
    ({"container_image_deepgemm_resolve": []},
     "container_image_deepgemm_resolve=[] must be a non-empty argv"),
    ({"container_image_prune_keep_files": ["etc/unit"]},
     "container_image_prune_keep_files=['etc/unit'] must be a list of absolute paths"),
])
def test_bad_new_inputs_are_refused_naming_variable_value_and_fix(tmp_path, extra, needle):
    rc, out = _preflight(tmp_path, extra)
    assert rc != 0 and needle in out, out


def test_defaults_pass_the_new_checks(tmp_path):
    rc, out = _preflight(tmp_path, {})
    assert rc != 0  # no ds4_effective / head on localhost: refused for that, not for the new inputs
    assert "ds4_effective is not set" in out, out
    for name in ("container_image_mxfp4_path", "container_image_python", "container_image_deepgemm_resolve",
                 "container_image_prune_keep_files"):
        assert name not in out, out
    rc, out = _preflight(tmp_path, {"container_image_deepgemm_ref": "0" * 40, "container_image_deepgemm_resolve": [],
                                    "container_image_mxfp4_fix": False, "container_image_python": ""})
    assert "container_image_deepgemm_resolve" not in out and "container_image_python" not in out, out
