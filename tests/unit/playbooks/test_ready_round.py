# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The two ranks' readiness waits meet on the controller under one round (dgxspark.ds4.vllm_ready's `round`):
tasks/ready.yml's first task draws one per host and run of the file, and the wait takes the pair head's, the same on
both ranks. Shown with ansible-playbook on two local hosts, the file's own tasks run twice in one play, the second time
for the pair's hosts only with another host first in the play (as a rolling operation runs it: a run_once task would
be skipped there)."""


import json
import os
import subprocess
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')

pytestmark = pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason='ansible-playbook not next to the test interpreter')


def _round_tasks():
    with open(os.path.join(REPO, 'playbooks', 'tasks', 'ready.yml')) as handle:
        tasks = yaml.safe_load(handle)
    wait = [t for t in tasks if 'dgxspark.ds4.vllm_ready' in t]
    assert len(wait) == 1, wait
    setting = [t for t in tasks[:tasks.index(wait[0])] if 'ds4_ready_round' in (t.get('ansible.builtin.set_fact') or {})]
    assert len(setting) == 1 and 'run_once' not in setting[0], tasks
    return setting[0], wait[0]['dgxspark.ds4.vllm_ready']['round']


def test_both_ranks_get_their_heads_round_and_the_next_run_of_the_file_a_new_one(tmp_path):
    setting, wait_round = _round_tasks()
    keep = {'name': 'Keep', 'ansible.builtin.shell': 'echo "%s" >> %s/{{ inventory_hostname }}' % (wait_round, tmp_path),
            'changed_when': False}
    pair = {'ds4_effective': {'pair': {'head': 'head', 'hosts': ['head', 'worker']}}}
    play = [{'hosts': 'all', 'gather_facts': False, 'vars': pair, 'tasks': [
        setting, keep,
        {'name': 'The pair only, another host first (a rolling operation)', 'when': "inventory_hostname != 'other'",
         'block': [setting, keep]}]}]
    (tmp_path / 'play.yml').write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1')
    proc = subprocess.run([PLAYBOOK, '-i', 'other,head,worker,', '-c', 'local', '-e', 'ansible_python_interpreter=%s' % sys.executable,
                           str(tmp_path / 'play.yml')], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    head = (tmp_path / 'head').read_text().split()
    worker = (tmp_path / 'worker').read_text().split()
    assert head == worker and len(head) == 2 and len(set(head)) == 2 and all(len(r) == 16 for r in head), (head, worker)
