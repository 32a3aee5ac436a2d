# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drift repaired, never recorded, through Ansible: a throwaway role uses dgxspark.ds4._converge exactly as the deploy
roles do (probe -> begin -> change -> record, with the converge_state action plugin passing the probe's observation
to the record). A managed file edited by hand, then a run of the role that does not restore it: the record step
fails naming the file, and the last good record is kept aside (the module-level tests cover the repair)."""


import json
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')

pytestmark = pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason='ansible-playbook not next to the test interpreter')

ROLE_VARS = '''__cvtest_converge_inputs:
  cvtest_content: "{{ cvtest_content }}"
__cvtest_converge_checks:
  files:
    - "{{ cvtest_path }}"
'''
ROLE_MAIN = '''- name: Converge state | Probe and decide
  ansible.builtin.include_role:
    name: dgxspark.ds4._converge
  vars:
    _converge_role: cvtest
- name: Preflight, change, record
  ansible.builtin.include_tasks: converge.yml
  when: __converge_needed['cvtest']
'''
ROLE_CONVERGE = '''- name: Converge state | Move the record aside
  ansible.builtin.include_role:
    name: dgxspark.ds4._converge
    tasks_from: begin
  vars:
    _converge_role: cvtest
- name: Render the managed file (a role that "runs and changes nothing" when cvtest_repairs is false)
  ansible.builtin.copy:
    dest: "{{ cvtest_path }}"
    content: "{{ cvtest_content }}"
    mode: "0644"
  when: cvtest_repairs | bool
- name: Converge state | Record
  ansible.builtin.include_role:
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
  roles:
    - cvtest
'''


def _run(tmp_path, repairs, *extra):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_ROLES_PATH=str(tmp_path / 'roles'))
    argv = [PLAYBOOK, '-i', 'localhost,', '-c', 'local', '-e', 'ansible_python_interpreter=%s' % sys.executable,
            '-e', 'cvtest_repairs=%s' % repairs, str(tmp_path / 'play.yml')] + list(extra)
    proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    return proc.returncode, ' '.join(proc.stdout.split())


def _throwaway_role(tmp_path, role_vars):
    """Write the cvtest role and its play; (managed file, state dir)."""
    for sub, text in (('vars', role_vars), ('tasks', ROLE_MAIN)):
        os.makedirs(str(tmp_path / 'roles' / 'cvtest' / sub))
        (tmp_path / 'roles' / 'cvtest' / sub / 'main.yml').write_text(text)
    (tmp_path / 'roles' / 'cvtest' / 'tasks' / 'converge.yml').write_text(ROLE_CONVERGE)
    managed, state = tmp_path / 'managed.conf', tmp_path / 'state'
    (tmp_path / 'play.yml').write_text(PLAY.format(state=state, managed=managed))
    return managed, state


def test_a_role_that_ran_for_drift_and_left_it_fails_and_keeps_the_last_record(tmp_path):
    managed, state = _throwaway_role(tmp_path, ROLE_VARS)
    rc, out = _run(tmp_path, True)
    assert rc == 0, out[-2000:]
    assert os.listdir(str(state)) == ['cvtest.json']
    managed.write_text(u'flushed\n')
    rc, out = _run(tmp_path, False)
    assert rc != 0, out[-2000:]
    assert 'cvtest: runs (file %s: recorded sha1:' % managed in out
    assert ('cvtest ran because what it manages differed from the record of its last run (same inputs), and left it as '
            'it found it: file %s: recorded sha1:' % managed) in out, out[-2000:]
    assert os.listdir(str(state)) == ['cvtest.json.running']
    assert managed.read_text() == u'flushed\n'


SECRET_VARS = '''__cvtest_converge_inputs:
  cvtest_content: "{{ cvtest_content }}"
  cvtest_api_key: "{{ cvtest_api_key }}"
__cvtest_converge_checks:
  files:
    - "{{ cvtest_path }}"
'''


def test_a_secret_input_reaches_no_output_not_even_as_its_plain_hash(tmp_path):
    """-v shows the probe's result (its per-input hashes): a secret input's is an HMAC under the node's own salt,
    never the secret nor its plain hash; the run after is as recorded, and a changed secret is named."""
    from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import converge_state as cs
    dummy, state = _throwaway_role(tmp_path, SECRET_VARS)
    secret = 'vrrp-pw1'
    outputs = []
    for value in (secret, secret, 'vrrp-pw2'):
        rc, out = _run(tmp_path, True, '-vv', '-e', 'cvtest_api_key=%s' % value)
        assert rc == 0, out[-2000:]
        outputs.append(out)
    assert sorted(os.listdir(str(state))) == ['.salt', 'cvtest.json']
    for out in outputs:
        assert secret not in out and cs.value_hash(secret) not in out and cs.value_hash('vrrp-pw2') not in out
    # -vv does show the probe's per-input hashes: the secret's is there, salted
    salted = re.search(r'cvtest_api_key: ([0-9a-f]{16})', outputs[0])
    assert salted and salted.group(1) != cs.value_hash(secret), outputs[0][-3000:]
    assert 'cvtest: as recorded' in outputs[1], outputs[1][-2000:]
    assert 'cvtest: runs' in outputs[2] and 'cvtest_api_key' in outputs[2], outputs[2][-2000:]


def test_the_direct_probe_returns_what_the_module_returns(tmp_path):
    """A probe goes straight to the node's Python (no module upload) when the connection pipelines and the interpreter
    is known; with pipelining off it runs the module. Both run converge_state.probe on the node: the same result for
    the same node, first as recorded, then with the managed file drifted; -vvv shows which way each one went."""
    managed, dummy = _throwaway_role(tmp_path, SECRET_VARS)
    (tmp_path / 'roles' / 'cvtest' / 'tasks' / 'probe.yml').write_text(ROLE_MAIN.split('- name: Preflight', maxsplit=1)[0])
    rc, out = _run(tmp_path, True, '-e', 'cvtest_api_key=vrrp-pw1')
    assert rc == 0, out[-2000:]
    show = tmp_path / 'show.yml'
    show.write_text(PLAY.format(state=tmp_path / 'state', managed=managed).replace(
        '  roles:\n    - cvtest\n',
        '    cvtest_api_key: vrrp-pw1\n'
        '  tasks:\n'
        '    - name: Probe\n'
        '      ansible.builtin.include_role:\n'
        '        name: cvtest\n'
        '        tasks_from: probe\n'
        '    - name: Keep the result\n'
        '      ansible.builtin.copy:\n'
        '        content: "{{ _converge_probe | dict2items | rejectattr(\'key\', \'in\', [\'invocation\']) | items2dict'
        ' | to_json }}"\n'
        '        dest: "{{ probe_out }}"\n'
        '        mode: "0600"\n'))
    results = {}
    for drifted in (False, True):
        if drifted:
            managed.write_text(u'edited by hand\n')
        for way, extra_env in (('direct', {}), ('module', {'ANSIBLE_PIPELINING': 'false'})):
            argv = [PLAYBOOK, '-i', 'localhost,', '-c', 'local', '-e', 'ansible_python_interpreter=%s' % sys.executable, '-vvv',
                    '-e', 'probe_out=%s' % (tmp_path / ('probe-%s-%s.json' % (way, drifted))), str(show)]
            env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1',
                       ANSIBLE_ROLES_PATH=str(tmp_path / 'roles'), **extra_env)
            proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,  # the probe alone
                                  universal_newlines=True, timeout=300, check=False)
            rc, out = proc.returncode, proc.stdout
            assert rc == 0, out[-3000:]
            # -vvv: the direct probe's command line (its bootstrap), or the module's upload
            assert ('import json, os, sys' in out) == (way == 'direct'), (way, out[-4000:])
            assert ('AnsiballZ_converge_state' in out) == (way == 'module'), (way, out[-4000:])
            results[(drifted, way)] = json.loads((tmp_path / ('probe-%s-%s.json' % (way, drifted))).read_text())
    for drifted in (False, True):
        direct, module = results[(drifted, 'direct')], results[(drifted, 'module')]
        assert direct == module, (drifted, direct, module)
        assert direct['current'] is not drifted and direct['seen']['files'] and direct['inputs']['cvtest_api_key'], direct
    assert results[(False, 'direct')]['reasons'] == [] and results[(False, 'direct')]['published'] == {}
    assert ['file %s: recorded sha1:' % managed in r for r in results[(True, 'direct')]['reasons']] == [True]


TWICE_VARS = '''__cvtest_converge_inputs: >-
  {{ dict(query('ansible.builtin.varnames', '^cvtest_') | zip(query('ansible.builtin.vars', *query('ansible.builtin.varnames', '^cvtest_')))) }}
__cvtest_converge_checks:
  files:
    - "{{ cvtest_path }}"
'''
# The role sets a result under its own prefix as it runs (the deploy roles do: container_image_ref, ...).
TWICE_RESULT = '''- name: A result under the role's own prefix
  ansible.builtin.set_fact:
    cvtest_rendered: "{{ cvtest_content | length }}"
'''


def test_a_role_included_twice_in_one_run_does_not_take_its_first_runs_result_for_an_input(tmp_path):
    """The inputs are every cvtest_* variable; the role's own set_fact cvtest_rendered (known_vars.role_results, read
    from its task files) is not one: the second include in the same playbook run finds the role as recorded. An option
    changed between the includes still runs it (the options are compared)."""
    managed, dummy = _throwaway_role(tmp_path, TWICE_VARS)
    converge = tmp_path / 'roles' / 'cvtest' / 'tasks' / 'converge.yml'
    converge.write_text(ROLE_CONVERGE.replace('- name: Converge state | Record', TWICE_RESULT + '- name: Converge state | Record'))
    (tmp_path / 'play.yml').write_text(PLAY.format(state=tmp_path / 'state', managed=managed).replace(
        '  roles:\n    - cvtest\n',
        '  tasks:\n'
        '    - name: First\n'
        '      ansible.builtin.include_role:\n'
        '        name: cvtest\n'
        '    - name: Second, as the first left it\n'
        '      ansible.builtin.include_role:\n'
        '        name: cvtest\n'
        '    - name: Third, an input changed\n'
        '      ansible.builtin.include_role:\n'
        '        name: cvtest\n'
        '      vars:\n'
        '        cvtest_content: "other\\n"\n'))
    rc, out = _run(tmp_path, True)
    assert rc == 0, out[-3000:]
    decisions = re.findall(r"msg: 'cvtest: (runs \([^)]*\)|as recorded)", out)
    assert decisions == ['runs (cvtest has no converge record on this node (first run, or the last run of the role failed)',
                         'as recorded', 'runs (inputs changed: cvtest_content)'], (decisions, out[-3000:])
