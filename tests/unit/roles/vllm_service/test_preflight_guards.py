# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm_service's preflight refuses bad boot-forensics, memory-guard and evidence-pruning input before anything changes: the
preflight tasks, taken from roles/vllm_service/tasks/preflight.yml as they are, run by ansible-playbook on the
controller; a marker task after them stands for the first change on a host and must never run after a refusal."""

from __future__ import absolute_import, division, print_function

import os
import subprocess
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
TASKS = os.path.join(REPO, 'roles', 'vllm_service', 'tasks', 'preflight.yml')
NAMES = ('Preflight | Memory guard settings (PSI levels, polls, sources; plugins/module_utils/memory_guard.py)',
         'Preflight | What the pair does at boot after a crash (vllm_service_after_crash)',
         'Preflight | The boot forensics source (vllm_service_forensics_source, _file)',
         'Preflight | Evidence pruning settings are whole numbers >= 1')

pytestmark = pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason='ansible-playbook not next to the test interpreter')


def _run(tmp_path, **overrides):
    with open(os.path.join(REPO, 'roles', 'vllm_service', 'defaults', 'main.yml')) as handle:
        defaults = yaml.safe_load(handle)
    keys = [k for k in defaults if k.startswith(('vllm_service_memory_guard', 'vllm_service_forensics', 'vllm_service_after',
                                                 'vllm_service_evidence_keep', 'vllm_service_evidence_max_age_days'))]
    variables = dict((k, defaults[k]) for k in keys)
    variables.update(overrides, role_path=os.path.join(REPO, 'roles', 'vllm_service'))
    with open(TASKS) as handle:
        tasks = [t for t in yaml.safe_load(handle) if t['name'] in NAMES]
    assert len(tasks) == len(NAMES)
    marker = {'name': 'first change', 'ansible.builtin.copy': {'dest': str(tmp_path / 'changed'), 'content': 'x\n',
                                                               'mode': '0644'}}
    path = tmp_path / 'play.yml'
    path.write_text(yaml.safe_dump([{'hosts': 'localhost', 'gather_facts': False, 'vars': variables,
                                     'tasks': tasks + [marker]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1')
    argv = [PLAYBOOK, '-i', 'localhost,', '-c', 'local', '-e', 'ansible_python_interpreter=%s' % sys.executable, str(path)]
    proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=300, check=False)
    return proc.returncode, ' '.join(proc.stdout.split()), (tmp_path / 'changed').exists()


def test_the_defaults_and_a_shipped_fallback_recipe_pass(tmp_path):
    rc, out, changed = _run(tmp_path, vllm_service_after_crash='fallback:latency')
    assert rc == 0 and changed, out[-2000:]


@pytest.mark.parametrize('overrides,expected', [
    ({'vllm_service_after_crash': 'restart'}, 'vllm_service_after_crash = "restart": must be hold, start or fallback:<recipe>'),
    ({'vllm_service_after_crash': 'fallback:no-such-recipe'}, 'vllm_service_after_crash = "fallback:no-such-recipe"'),
    ({'vllm_service_forensics_source': 'file', 'vllm_service_forensics_file': 'relative.log'},
     'vllm_service_forensics_file = "relative.log"'),
    # the old per-node-size MemFree table (its gate sat inside the kernel's reclaim band): refused, naming the replacement
    ({'vllm_service_memory_guard_thresholds': [{'node_gb': 128, 'gate_free_gib': 2.0, 'stop_free_gib': 1.0,
                                                'gate_psi_some_avg10': 10, 'stop_psi_full_avg10': 25}]},
     'vllm_service_memory_guard_thresholds is no longer read'),
    ({'vllm_service_memory_guard_gate_psi_some_avg10': 150}, 'vllm_service_memory_guard_gate_psi_some_avg10 = 150'),
    ({'vllm_service_memory_guard_stop_polls': 0}, 'Fix: set vllm_service_memory_guard_stop_polls'),
    ({'vllm_service_evidence_keep': 0}, 'vllm_service_evidence_keep=0 (directories kept per kind)'),
    ({'vllm_service_evidence_keep': '5 dirs'}, 'vllm_service_evidence_keep="5 dirs"'),
    ({'vllm_service_evidence_max_age_days': 2.5}, 'vllm_service_evidence_max_age_days=2.5 (days)'),
])
def test_bad_input_is_refused_naming_the_variable_before_any_change(tmp_path, overrides, expected):
    rc, out, changed = _run(tmp_path, **overrides)
    assert rc != 0 and not changed, out[-2000:]
    assert expected in out, out[-2000:]
