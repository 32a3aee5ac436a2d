# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The skip of a role found as recorded is `meta: end_role` (decided in the controller's main process, no worker per
node), and ansible-core's end_role skips the role's tasks only up to the first role end it meets: a role statically
imported inside the rest of the role (import_role) brings its own, and the host would go on with the tasks after it.
So every deploy role ends with `end_role` when not needed and includes (never imports) the _converge steps in
converge.yml. Checked on the files, and shown through Ansible on a throwaway role both ways."""


import os
import subprocess
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
ROLES = os.path.join(REPO, 'roles')
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
IMPORTS = ('ansible.builtin.import_tasks', 'import_tasks')
ROLE_IMPORTS = ('ansible.builtin.import_role', 'import_role')


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle) or []


def _static_role_imports(path, seen=None):
    """Every import_role reachable from a task file through static imports (blocks included): [(file, task name)]."""
    seen = set() if seen is None else seen
    if path in seen:
        return []
    seen.add(path)
    found = []
    stack = list(_load(path))
    while stack:
        task = stack.pop(0)
        for key in ('block', 'rescue', 'always'):
            stack.extend(task.get(key) or [])
        for name in ROLE_IMPORTS:
            if name in task:
                found.append((os.path.relpath(path, REPO), task.get('name')))
        for name in IMPORTS:
            if name in task:
                target = task[name] if isinstance(task[name], str) else task[name].get('file')
                found.extend(_static_role_imports(os.path.join(os.path.dirname(path), target), seen))
    return found


def _converge_roles():
    """The roles whose tasks/main.yml probes with dgxspark.ds4._converge."""
    out = []
    for role in sorted(os.listdir(ROLES)):
        path = os.path.join(ROLES, role, 'tasks', 'main.yml')
        if role != '_converge' and os.path.exists(path):
            tasks = _load(path)
            if any((t.get('ansible.builtin.import_role') or {}).get('name') == 'dgxspark.ds4._converge' for t in tasks):
                out.append((role, tasks))
    return out


def test_every_deploy_role_ends_as_recorded_with_end_role_and_imports_no_role_after_it():
    roles = _converge_roles()
    assert len(roles) >= 9, [r for r, _t in roles]
    ended = []
    for role, tasks in roles:
        metas = [i for i, t in enumerate(tasks) if t.get('ansible.builtin.meta') == 'end_role']
        if not metas:
            # the router publishes where it listens after its converge on every run (tasks/endpoint.yml): an
            # end_role would skip that too, so it keeps the include
            assert role == 'router', role
            continue
        ended.append(role)
        assert len(metas) == 1, role
        meta = tasks[metas[0]]
        assert meta.get('when') == "not __converge_needed['%s']" % role, (role, meta)
        assert meta.get('tags') == ['always'], (role, meta)
        rest = tasks[metas[0] + 1:]
        assert [t.get('ansible.builtin.import_tasks') for t in rest] == ['converge.yml'], (role, rest)
        assert _static_role_imports(os.path.join(ROLES, role, 'tasks', 'converge.yml')) == [], role
        # both _converge steps are there, as includes
        with open(os.path.join(ROLES, role, 'tasks', 'converge.yml')) as handle:
            text = handle.read()
        assert text.count('ansible.builtin.include_role:\n    name: dgxspark.ds4._converge\n    tasks_from: ') == 2, role
    assert len(ended) >= 8, ended


ROLE_VARS = '''__cvtest_converge_inputs:
  cvtest_content: "{{ cvtest_content }}"
__cvtest_converge_checks:
  files:
    - "{{ cvtest_path }}"
'''
ROLE_MAIN = '''- name: Converge state | Probe and decide
  ansible.builtin.import_role:
    name: dgxspark.ds4._converge
  vars:
    _converge_role: cvtest
- name: Converge state | As recorded - the role ends here
  ansible.builtin.meta: end_role
  when: not __converge_needed['cvtest']
  tags: [always]
- name: Preflight, change, record
  ansible.builtin.import_tasks: converge.yml
'''
ROLE_CONVERGE = '''- name: Converge state | Move the record aside
  ansible.builtin.{verb}:
    name: dgxspark.ds4._converge
    tasks_from: begin
  vars:
    _converge_role: cvtest
- name: The change
  ansible.builtin.copy:
    dest: "{{{{ cvtest_path }}}}"
    content: "{{{{ cvtest_content }}}}"
    mode: "0644"
- name: Say the change ran
  ansible.builtin.debug:
    msg: CVTEST-CHANGE-RAN
- name: Converge state | Record
  ansible.builtin.{verb}:
    name: dgxspark.ds4._converge
    tasks_from: record
  vars:
    _converge_role: cvtest
'''
PLAY = '''- hosts: localhost
  gather_facts: false
  module_defaults:
    dgxspark.ds4.converge_state:
      state_dir: {state}
  vars:
    cvtest_path: {managed}
    cvtest_content: "rules\\n"
  tasks:
    - name: The role
      ansible.builtin.include_role:
        name: cvtest
    - name: After the role
      ansible.builtin.debug:
        msg: CVTEST-AFTER-ROLE
'''


def _role(tmp_path, verb):
    for sub, text in (('vars', ROLE_VARS), ('tasks', ROLE_MAIN)):
        os.makedirs(str(tmp_path / 'roles' / 'cvtest' / sub))
        (tmp_path / 'roles' / 'cvtest' / sub / 'main.yml').write_text(text)
    (tmp_path / 'roles' / 'cvtest' / 'tasks' / 'converge.yml').write_text(ROLE_CONVERGE.format(verb=verb))
    (tmp_path / 'play.yml').write_text(PLAY.format(state=tmp_path / 'state', managed=tmp_path / 'managed.conf'))


def _run(tmp_path):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_ROLES_PATH=str(tmp_path / 'roles'))
    argv = [PLAYBOOK, '-i', 'localhost,', '-c', 'local', '-e', 'ansible_python_interpreter=%s' % sys.executable,
            str(tmp_path / 'play.yml')]
    proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    return proc.returncode, ' '.join(proc.stdout.split())


@pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason='ansible-playbook not next to the test interpreter')
@pytest.mark.parametrize('verb,skipped', [('include_role', True), ('import_role', False)])
def test_end_role_skips_the_whole_role_only_when_the_converge_steps_are_included(tmp_path, verb, skipped):
    """First run: the role runs and records. Second run, as recorded: with the steps included the role ends at once
    (its change does not run, the play goes on after it); with them imported, end_role stops at the imported role's
    end and the change runs again: the layout the file check above enforces."""
    _role(tmp_path, verb)
    rc, out = _run(tmp_path)
    assert rc == 0, out[-2000:]
    assert 'cvtest: runs' in out and 'CVTEST-CHANGE-RAN' in out and 'CVTEST-AFTER-ROLE' in out, out[-2000:]
    rc, out = _run(tmp_path)
    assert 'cvtest: as recorded' in out, out[-2000:]
    if skipped:
        assert rc == 0, out[-2000:]
        assert 'CVTEST-CHANGE-RAN' not in out and 'CVTEST-AFTER-ROLE' in out, out[-2000:]
    else:
        assert 'CVTEST-CHANGE-RAN' in out, out[-2000:]
