# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The two ranks' readiness waits meet on the controller under one round (dgxspark.ds4.vllm_ready): without a `round`
option (tasks/ready.yml gives none, and draws none in a task of its own) each rank's round is the task's file and line
with how many times its host has run the task in this run (readiness_pair.wait_round): the same on both ranks, new for
every run of the file. Shown with ansible-playbook on three local hosts running the file twice in one play, the second
time for the pair's hosts only with another host first (as a rolling operation runs it), through an action that takes
its round as vllm_ready does."""


import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import readiness_pair

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')

# An action that takes its round as vllm_ready's does (readiness_pair.wait_round under the run's local temporary
# directory, keyed by its task's path) and writes it to a file per host.
PROBE = '''
from ansible import constants as C
from ansible.plugins.action import ActionBase
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.readiness_pair import wait_round


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        host = task_vars['inventory_hostname']
        with open('%s/%s' % (self._task.args['out'], host), 'a') as handle:
            handle.write(wait_round(C.DEFAULT_LOCAL_TMP, self._task.get_path(), host) + '\\n')
        result['changed'] = False
        return result
'''


def test_the_wait_takes_no_drawn_round_and_marks_the_compile_cache_except_after_a_rollback():
    with open(os.path.join(REPO, 'playbooks', 'tasks', 'ready.yml')) as handle:
        tasks = yaml.safe_load(handle)
    assert [list(t)[1] if list(t)[0] == 'name' else list(t)[0] for t in tasks] == ['dgxspark.ds4.vllm_ready'], tasks
    args = tasks[0]['dgxspark.ds4.vllm_ready']
    assert 'round' not in args and args['mark_compile_cache'] == '{{ ds4_ready_launch is not defined }}', args


def test_a_hosts_nth_run_of_a_task_is_its_nth_round(tmp_path):
    base = str(tmp_path)
    first = [readiness_pair.wait_round(base, 'ready.yml:19', host) for host in ('head', 'other', 'worker')]
    second = [readiness_pair.wait_round(base, 'ready.yml:19', host) for host in ('worker', 'head')]
    assert first[0] == first[2] == 'ready.yml:19-1' and second == ['ready.yml:19-2'] * 2
    assert readiness_pair.wait_round(base, 'restart.yml:40', 'head') == 'restart.yml:40-1'


pytestmark = pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason='ansible-playbook not next to the test interpreter')


def test_both_ranks_meet_under_one_round_and_the_next_run_of_the_file_gets_a_new_one(tmp_path):
    out = tmp_path / 'rounds'
    out.mkdir()
    plugins = tmp_path / 'action_plugins'
    plugins.mkdir()
    (plugins / 'round_probe.py').write_text(PROBE)
    (tmp_path / 'wait.yml').write_text(json.dumps([{'name': 'Wait', 'round_probe': {'out': str(out)}}]))
    play = [{'hosts': 'all', 'gather_facts': False, 'tasks': [
        {'name': 'Every host', 'ansible.builtin.include_tasks': 'wait.yml'},
        {'name': 'The pair only, another host first (a rolling operation)', 'ansible.builtin.include_tasks': 'wait.yml',
         'when': "inventory_hostname != 'other'"}]}]
    (tmp_path / 'play.yml').write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_ACTION_PLUGINS=str(plugins))
    proc = subprocess.run([PLAYBOOK, '-i', 'other,head,worker,', '-c', 'local', '-e', 'ansible_python_interpreter=%s' % sys.executable,
                           str(tmp_path / 'play.yml')], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    head = (out / 'head').read_text().split()
    worker = (out / 'worker').read_text().split()
    other = (out / 'other').read_text().split()
    assert head == worker and len(head) == 2 and len(set(head)) == 2 and other == head[:1], (head, worker, other)
    assert head[0].endswith('wait.yml:1-1') and head[1].endswith('wait.yml:1-2'), head
