# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm_service's preflight as it is (real ansible-playbook on localhost, only tasks/preflight.yml, nothing changes):
its one read of the node (dgxspark.ds4.service_preflight) and its one refusal, which names every problem at once,
each with its variable, value and fix - a docker CLI that is not there, a device that is not there, a path given to
the role that differs from what the config play published, the pair guard without the peer key - and lets a node
with none of them through. The docker CLI is a stand-in script (it answers `image inspect` and `info`); systemd is
whatever this machine has (no unit of the collection exists here, so no drop-in is found)."""

import json
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.dirname(sys.executable)
PLAY = """
- hosts: localhost
  gather_facts: false
  connection: local
  tasks:
    - name: Preflight only
      ansible.builtin.import_role:
        name: dgxspark.ds4.vllm_service
        tasks_from: preflight
"""
IMAGE_ID = "sha256:" + "ab" * 32
DOCKER = """#!/bin/sh
case "$1 $2" in
  "image inspect") [ "$5" = "ds4-vllm-sim:test" ] && echo %s && exit 0; echo "Error: No such image: $5" >&2; exit 1 ;;
  "info --format") echo '{"runc":{"path":"runc"}}' ;;
esac
""" % IMAGE_ID


def _effective(tmp_path, role, docker, devices):
    return {
        "role": role, "node_rank": 0 if role == "head" else 1, "nnodes": 2, "unit_name": "dgxspark-ds4-%s.service" % role,
        "service": {"config_dir": "/etc/dgxspark-ds4", "state_dir": "/var/lib/dgxspark-ds4",
                    "unit_dir": "/etc/systemd/system", "docker_bin": docker,
                    "unit_name": "dgxspark-ds4-%s.service" % role, "container_name": "dgxspark-ds4-%s" % role,
                    "devices": devices, "cache_volumes": {},
                    "restart_pending_path": str(tmp_path / ("restart-pending-%s" % role))},
        "compile_cache": {"custom_ops_all": False, "host_dir": None},
        "image": {"ref": "ds4-vllm-sim:test"}, "container": {}, "node_memory_gib": 128,
        "pair": {"hosts": ["localhost"], "name": "spark"},
    }


def _preflight(tmp_path, extra):
    (tmp_path / "play.yml").write_text(PLAY)
    env = dict(os.environ)
    env.update(ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_RETRY_FILES_ENABLED="0")
    cmd = [os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", str(tmp_path / "play.yml"), "-e", json.dumps(extra)]
    proc = subprocess.run(cmd, cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    return proc.returncode, " ".join(proc.stdout.split())


def _docker(tmp_path):
    path = tmp_path / "docker"
    path.write_text(DOCKER)
    os.chmod(str(path), 0o755)
    return str(path)


def test_every_problem_is_named_at_once_with_its_fix(tmp_path):
    gone, device = str(tmp_path / "docker-gone"), str(tmp_path / "infiniband" / "uverbs0")
    rc, out = _preflight(tmp_path, {
        "ds4_effective": _effective(tmp_path, "head", gone, [device + ":" + device]),
        "vllm_service_docker_bin": gone, "vllm_service_gpu": False,
        # given to the role, not to the inventory the config play published from
        "vllm_service_config_dir": "/opt/ds4"})
    assert rc != 0, out
    refusal = out[out.index("localhost: "):]
    assert ("vllm_service_config_dir = \"/opt/ds4\" differs from ds4_effective.service.config_dir = \"/etc/dgxspark-ds4\""
            in refusal and "Fix: set vllm_service_config_dir in the inventory" in refusal), out
    assert "vllm_service_docker_bin=%s does not exist or is not executable on localhost" % gone in refusal, out
    assert "Fix: install Docker or set vllm_service_docker_bin" in refusal, out
    assert "%s does not exist on localhost but is passed to the container (ds4_effective.container.devices)" % device in refusal
    assert "Fix: load the RDMA driver (mlx5_ib)" in refusal, out
    assert "peer_access_ssh_options / peer_access_ssh_targets facts are missing" in refusal, out
    assert "then leaves the other one hanging). Nothing was written or restarted." in refusal, out
    # the image is not looked up through a CLI that is not there (its problem is the CLI's)
    assert "Image ds4-vllm-sim:test is not present" not in out, out


def test_a_missing_image_is_named_with_the_clis_answer(tmp_path):
    docker = _docker(tmp_path)
    effective = _effective(tmp_path, "worker", docker, [])
    effective["image"]["ref"] = "vllm/vllm-openai:gone"
    rc, out = _preflight(tmp_path, {"ds4_effective": effective, "vllm_service_docker_bin": docker,
                                    "vllm_service_gpu": True})
    assert rc != 0, out
    assert ("Image vllm/vllm-openai:gone is not present on localhost (Error: No such image: vllm/vllm-openai:gone). "
            "Fix: run the container_image role first") in out, out
    assert "vllm_service_gpu = true but Docker on localhost has no 'nvidia' runtime (has: ['runc'])" in out, out


def test_a_node_with_nothing_wrong_passes(tmp_path):
    docker = _docker(tmp_path)
    device = tmp_path / "uverbs0"
    device.write_text(u"")
    rc, out = _preflight(tmp_path, {"ds4_effective": _effective(tmp_path, "worker", docker, [str(device)]),
                                    "vllm_service_docker_bin": docker, "vllm_service_gpu": False})
    assert rc == 0, out
    assert "Refuse what is wrong on this node" in out and "failed=0" in out, out
