# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A misspelt variable with the collection's prefix is refused by the config role (real ansible-playbook,
playbooks/render.yml, which touches no host), naming the variable, where it was set and the closest known name.

The case behind it (a misspelt variable silently ignored): ``ds4_node_memory_gb: 96`` (for ``ds4_node_memory_gib``) on a 96 GB node was
ignored and the node got the 128 GiB cap (gpu-memory-utilization 0.90 passes); the control run shows that the
real name does reach the check (0.90 is refused above the 0.78 cap of a 96 GiB node).
"""

import os
import shutil
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.dirname(sys.executable)


def _inventory(tmp_path):
    """A copy of the shipped sample site inventory (recipe balanced)."""
    inv = tmp_path / "inv"
    shutil.copytree(os.path.join(REPO, "inventories", "sample-site"), str(inv), symlinks=False)
    return inv


def _append(path, text):
    with open(str(path), "a") as f:
        f.write("\n" + text + "\n")


def _render(tmp_path, inv, *extra):
    env = dict(os.environ)
    env.update(ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_RETRY_FILES_ENABLED="0")
    cmd = [os.path.join(BIN, "ansible-playbook"), "-i", str(inv), os.path.join(REPO, "playbooks", "render.yml"),
           "-e", "ds4_render_dir=%s" % (tmp_path / "render")]
    for e in extra:
        cmd += ["-e", e]
    proc = subprocess.run(cmd, cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    return proc.returncode, proc.stdout


def test_misspelt_variables_are_refused_with_origin_and_suggestion(tmp_path):
    inv = _inventory(tmp_path)
    _append(inv / "group_vars" / "spark" / "site.yml", "ds4_node_memory_gb: 96")
    _append(inv / "host_vars" / "spark2.yml", "vllm_service_config_dri: /srv/ds4")
    rc, out = _render(tmp_path, inv, "ds4_ready_timout=60", "vllm_service_api_kye=sk-secret-test-value")
    assert rc != 0, out
    assert "configuration refused (4 error(s)); nothing was changed on any host" in out, out
    assert not (tmp_path / "render").exists(), "the render play ran after a refusal"
    # group_vars: both hosts, file and line, the real name
    assert ("- ds4_node_memory_gb = 96 (set in inv/group_vars/spark/site.yml:" in out), out
    assert "rename it to ds4_node_memory_gib" in out, out
    # host_vars: only that host
    assert '- [host spark2] vllm_service_config_dri = "/srv/ds4" (set in inv/host_vars/spark2.yml:' in out, out
    assert "rename it to vllm_service_config_dir" in out, out
    # extra vars
    assert '- ds4_ready_timout = "60" (set in extra vars (-e))' in out, out
    assert "rename it to ds4_ready_timeout" in out, out
    # a value that looks like a secret is not printed
    assert "- vllm_service_api_kye = (value not shown) (set in extra vars (-e))" in out, out
    assert "sk-secret-test-value" not in out, out


def test_control_the_real_name_reaches_the_memory_cap(tmp_path):
    inv = _inventory(tmp_path)
    _append(inv / "host_vars" / "spark2.yml", "ds4_node_memory_gib: 96")
    rc, out = _render(tmp_path, inv, '{"ds4_extra_known_vars": ["ds4_not_ours"]}', "ds4_not_ours=1")
    assert rc != 0, out
    assert "unknown variable" not in out, out
    assert "above the safe cap 0.78 for a 96 GiB node (ds4_node_memory_gib)" in out, out
