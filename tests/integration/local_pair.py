# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A two-node test inventory on this machine (ansible_connection local, the balanced profile, valid per-node fabric
values) and a playbook runner over it: the operations playbooks' integration tests (test_ops_sim.py,
test_benchy_sim.py) point them at a simulator with ds4_endpoint_url."""


import json
import os
import subprocess
import sys

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.dirname(sys.executable)


def inventory(tmp_path, site=None):
    """<tmp_path>/inventory: spark1 (head) and spark2 (worker), local connection; site -> group_vars/spark/site.yml."""
    inv = tmp_path / "inventory"
    (inv / "group_vars" / "spark").mkdir(parents=True, exist_ok=True)
    # the recipe, picked the one way (ds4_profile in the site's group vars): the sample site's, balanced
    (inv / "group_vars" / "spark" / "profile.yml").write_text(yaml.safe_dump({"ds4_profile": "balanced"}))
    if site is not None:
        (inv / "group_vars" / "spark" / "site.yml").write_text(yaml.safe_dump(site))
    hosts = {}
    for name, rank, ip in (("spark1", 0, "192.168.100.10"), ("spark2", 1, "192.168.100.11")):
        hosts[name] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "ds4_node_rank": rank,
                       "ds4_fabric_ip": ip, "ds4_fabric_prefix": 24, "ds4_fabric_ifname": "enp1s0f1np1",
                       "ds4_rdma_hcas": ["rocep1s0f1", "roceP2p1s0f1"]}
    (inv / "hosts.yml").write_text(yaml.safe_dump({"spark": {"hosts": hosts}}))
    return str(inv)


def run_playbook(tmp_path, name, extra, site=None):
    """ansible-playbook playbooks/<name> over inventory(tmp_path, site) with extra vars; (rc, output)."""
    env = dict(os.environ)
    env.update(ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_RETRY_FILES_ENABLED="0", ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
               PATH=BIN + os.pathsep + env.get("PATH", ""))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inventory(tmp_path, site),
                           os.path.join(REPO, "playbooks", name), "-e", json.dumps(extra)],
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=300, check=False)
    return proc.returncode, proc.stdout
