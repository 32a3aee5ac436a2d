# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""End to end through Ansible: playbooks/render.yml with the action plugin (controller only)."""
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
import shutil
import subprocess
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')

pytestmark = pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason='ansible-playbook not next to the test interpreter')


def _run(inventory, *extra):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1', ANSIBLE_FORCE_COLOR='0')
    return subprocess.run([PLAYBOOK, os.path.join(REPO, 'playbooks', 'render.yml'), '-i', inventory] + list(extra),
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)


def _copy_inventory(profile, dest):
    shutil.copytree(os.path.join(REPO, 'inventories', profile), str(dest), symlinks=False)
    return str(dest)


def test_render_writes_golden_scripts(tmp_path):
    out = tmp_path / 'out'
    res = _run(os.path.join(REPO, 'inventories', 'dspark-c16'), '-e', 'ds4_render_dir=%s' % out)
    assert res.returncode == 0, res.stdout + res.stderr
    for host, script in (('spark1', 'launch-head.sh'), ('spark2', 'launch-worker.sh')):
        got = (out / 'dspark-c16' / host / script)
        with open(os.path.join(REPO, 'tests', 'golden', 'dspark-c16', host, script)) as f:
            assert got.read_text() == f.read()
        assert os.access(str(got), os.X_OK)
        assert (out / 'dspark-c16' / host / 'nccl.env').exists()
        assert (out / 'dspark-c16' / host / 'effective.json').exists()
    assert '%s/dspark-c16/spark1/' % out in res.stdout


def test_broken_inventory_fails_before_any_write(tmp_path):
    inv = _copy_inventory('balanced', tmp_path / 'inv')
    hv = os.path.join(inv, 'host_vars', 'spark2.yml')
    with open(hv) as f:
        data = yaml.safe_load(f)
    del data['ds4_fabric_ip']
    with open(hv, 'w') as f:
        yaml.safe_dump(data, f)
    with open(os.path.join(inv, 'hosts.yml')) as f:
        hosts = yaml.safe_load(f)
    hosts['spark']['hosts']['spark3'] = {'ansible_host': '192.0.2.12'}
    with open(os.path.join(inv, 'hosts.yml'), 'w') as f:
        yaml.safe_dump(hosts, f)
    out = tmp_path / 'out'
    res = _run(inv, '-e', 'ds4_render_dir=%s' % out)
    text = res.stdout + res.stderr
    assert res.returncode != 0
    assert '[host spark2] ds4_fabric_ip = null' in text
    assert "groups['spark'] = [\"spark1\", \"spark2\", \"spark3\"]" in text
    assert 'nothing was changed on any host' in text
    assert not out.exists()
