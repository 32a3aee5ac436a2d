# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling operations go pair by pair in pair order.

Ansible runs the includes of a looped include_tasks in the order the first host's results list them. With a host
condition on the include (`when: inventory_hostname in ds4_rolling_pair['hosts']`), each pair's hosts had only their
own pair's item, so the pair whose host answered first went first: CI saw switch.yml drain and switch spark_pair2
before spark_pair1. So every looped include of the per-pair task files carries no host condition (every host gets
every pair's item, in pair order), and the per-pair file itself acts on the pair's hosts only."""


import glob
import os

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
PER_PAIR = ('rolling.yml', 'switch_pair.yml')
INCLUDE = ('include_tasks', 'ansible.builtin.include_tasks')


def _tasks(node):
    """Every task dict in a playbook / task file (plays, blocks, rescue, always)."""
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, list):
            stack.extend(cur)
        elif isinstance(cur, dict):
            yield cur
            for key in ('tasks', 'pre_tasks', 'post_tasks', 'handlers', 'block', 'rescue', 'always'):
                if isinstance(cur.get(key), list):
                    stack.extend(cur[key])


def _looped_per_pair_includes():
    found = []
    for path in sorted(glob.glob(os.path.join(REPO, 'playbooks', '*.yml')) + glob.glob(os.path.join(REPO, 'playbooks', 'tasks', '*.yml'))):
        with open(path) as fh:
            doc = yaml.safe_load(fh)
        for task in _tasks(doc):
            target = next((task[k] for k in INCLUDE if k in task), None)
            if isinstance(target, str) and os.path.basename(target) in PER_PAIR and 'loop' in task:
                found.append((os.path.relpath(path, REPO), task))
    return found


def test_the_per_pair_includes_are_found():
    files = sorted(set(p for p, _t in _looped_per_pair_includes()))
    assert files == ['playbooks/ack.yml', 'playbooks/maintenance.yml', 'playbooks/restart.yml', 'playbooks/rollback.yml', 'playbooks/switch.yml']


@pytest.mark.parametrize('path,task', _looped_per_pair_includes(), ids=lambda v: v if isinstance(v, str) else v.get('name'))
def test_no_looped_per_pair_include_has_a_host_condition(path, task):
    when = task.get('when')
    conds = when if isinstance(when, list) else ([when] if when else [])
    assert not any('inventory_hostname' in str(c) for c in conds), (path, task['name'], when)
    assert task.get('loop_control', {}).get('loop_var') == 'ds4_rolling_pair', (path, task['name'])


def test_the_per_pair_file_takes_the_pair_hosts_itself():
    with open(os.path.join(REPO, 'playbooks', 'tasks', 'rolling.yml')) as fh:
        top = yaml.safe_load(fh)
    assert len(top) == 1 and 'block' in top[0], 'rolling.yml is one block (its condition covers its rescue too)'
    assert "inventory_hostname in ds4_rolling_pair['hosts']" in top[0]['when']


def test_every_include_of_the_rolling_file_names_its_directory():
    """rolling.yml includes validate.yml and rollback.yml, which are playbooks in playbooks/ as well as task files in
    playbooks/tasks/. Ansible resolves an include against the directories of the includes above it: included as
    `rolling.yml` from tasks/switch_pair.yml it found playbooks/validate.yml ("conflicting action statements: hosts,
    gather_facts": switch.yml failed after its first pair's deploy). Included as `tasks/rolling.yml`, every include in
    it resolves in playbooks/tasks/."""
    targets = []
    for path in glob.glob(os.path.join(REPO, 'playbooks', '*.yml')) + glob.glob(os.path.join(REPO, 'playbooks', 'tasks', '*.yml')):
        with open(path) as fh:
            doc = yaml.safe_load(fh)
        for task in _tasks(doc):
            target = next((task[k] for k in INCLUDE if k in task), None)
            if isinstance(target, str) and os.path.basename(target) == 'rolling.yml':
                targets.append((os.path.relpath(path, REPO), target))
    assert len(targets) >= 6, targets
    assert all(t == 'tasks/rolling.yml' for _p, t in targets), targets
