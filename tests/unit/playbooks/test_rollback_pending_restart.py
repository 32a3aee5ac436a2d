# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A rollback records the pending restart before it swaps the config set (playbooks/tasks/rollback.yml): stopped
between the swap and the restart, it leaves the restored set's files on the nodes and the replaced set running, and
the next deploy, finding the files as it would write them, restarts only because of the marker. The marker is the one
vllm_service's restart contract reads and clears (ds4_effective.service.restart_pending_path, one definition).
Shown by hand on the converged replicas scenario (docs/measurements.md, thirty-sixth session): a rollback killed right
after the swap, then site.yml: without the marker no restart and readiness failed on the running set's max_model_len."""


import os

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
PENDING = "{{ ds4_effective['service']['restart_pending_path'] }}"


def _load(*parts):
    with open(os.path.join(REPO, *parts)) as handle:
        return yaml.safe_load(handle)


def test_the_marker_is_written_before_the_swap_and_is_the_one_the_restart_contract_reads():
    tasks = _load('playbooks', 'tasks', 'rollback.yml')
    marks = [i for i, t in enumerate(tasks)
             if [f.get('path') for f in (t.get('dgxspark.ds4.file_set') or {}).get('files', [])] == [PENDING]]
    swaps = [i for i, t in enumerate(tasks) if (t.get('dgxspark.ds4.config_set') or {}).get('state') == 'swapped']
    assert len(marks) == 1 and len(swaps) == 1 and marks[0] < swaps[0], (marks, swaps)
    assert 'when' not in tasks[marks[0]]
    role_vars = _load('roles', 'vllm_service', 'vars', 'main.yml')
    assert role_vars['_vllm_service_pending_path'] == PENDING
    # the restart contract reads the marker (vars/main.yml _vllm_service_state): where rollback.yml includes restart.yml
    # alone, with its own read at its start (after the swap), else the preflight's read of the same role run (which runs
    # under the restart tags too)
    restart = _load('roles', 'vllm_service', 'tasks', 'restart.yml')
    own = [t for t in restart if 'dgxspark.ds4.service_preflight' in t]
    assert len(own) == 1 and own[0] is restart[0] and own[0]['register'] == '_vllm_service_restart_node'
    assert own[0]['dgxspark.ds4.service_preflight']['paths'] == ['{{ _vllm_service_unit_path }}', '{{ _vllm_service_pending_path }}']
    assert own[0]['when'] == 'not (_vllm_service_after_preflight | bool)'
    assert role_vars['_vllm_service_after_preflight'] is False
    assert role_vars['_vllm_service_state'] == (
        "{{ _vllm_service_node if _vllm_service_after_preflight | bool else _vllm_service_restart_node }}")
    preflight = _load('roles', 'vllm_service', 'tasks', 'preflight.yml')
    looks = [t for t in preflight if 'dgxspark.ds4.service_preflight' in t]
    assert len(looks) == 1 and '_vllm_service_pending_path' in str(looks[0]['dgxspark.ds4.service_preflight']['paths'])
    assert looks[0]['register'] == '_vllm_service_node'
    assert {'vllm_service_restart', 'vllm_service_force_restart'} <= set(looks[0]['tags'])
    converge = _load('roles', 'vllm_service', 'tasks', 'converge.yml')
    assert [t['vars'] for t in converge if t.get('ansible.builtin.import_tasks') == 'restart.yml'] == [
        {'_vllm_service_after_preflight': True}]
    rollback_includes = [t['ansible.builtin.include_role'] for t in tasks if 'ansible.builtin.include_role' in t]
    assert {'name': 'dgxspark.ds4.vllm_service', 'rolespec_validate': False, 'tasks_from': 'restart.yml'} in rollback_includes
    plan = [t for t in restart if t.get('name') == "Restart | This rank's part of the plan"]
    assert "_vllm_service_state['paths'][_vllm_service_pending_path]" in plan[0]['ansible.builtin.set_fact']['_vllm_service_self']['pending']
