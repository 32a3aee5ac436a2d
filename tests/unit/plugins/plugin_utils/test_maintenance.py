# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""maintenance.yml's pure parts (plugins/plugin_utils/maintenance.py): every bad setting refused naming the variable,
the value and the fix; the package plan of a node (the collection's holds released for the upgrade only, a hold
placed by someone else left alone, a named package that could not be upgraded refused); what changed; a run that
would reboot the only router refused unless allowed; and the playbook's plan: the order of its steps."""


import os

import pytest
import yaml

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.maintenance import (
    changed_packages, dpkg_state, front_outages, input_errors, node_plan)

REPO = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..')
GOOD = {'packages': [], 'upgrade': 'full', 'reboot': True, 'reboot_command': [], 'reboot_timeout': 900, 'kit': True,
        'allow_front_outage': False}
DEFAULTS = ['docker-ce', 'containerd.io', 'nvidia-container-toolkit', 'nvidia-driver-*']
# dpkg-query -W -f '${Package} ${Version} ${Status}\n' on a node: docker-ce and the driver held by the collection,
# mlnx-tools held by hand, ds4-dummy installed, an old package removed (config files only)
DPKG = '\n'.join([
    'docker-ce 5:28.1.1-1~ubuntu.24.04~noble hold ok installed',
    'containerd.io 1.7.27-1 install ok installed',
    'nvidia-driver-580-open 580.95.05-0ubuntu1 hold ok installed',
    'mlnx-tools 24.10-0.2410068 hold ok installed',
    'ds4-dummy 1.0 install ok installed',
    'old-thing 0.1 deinstall ok config-files',
    'half',
])


def test_good_settings_pass():
    assert input_errors(GOOD) == []
    assert input_errors(dict(GOOD, packages=['docker-ce', 'nvidia-container-toolkit'], upgrade='safe', reboot='false',
                             reboot_command=['ipmitool', '-H', '{host}-bmc', 'chassis', 'power', 'cycle'])) == []


@pytest.mark.parametrize('key, value, words', [
    ('packages', 'docker-ce', "ds4_maintenance_packages='docker-ce' is not a list of package names. Fix:"),
    ('packages', ['nvidia-*'], "ds4_maintenance_packages: 'nvidia-*' is not a Debian package name"),
    ('packages', ['docker-ce', 'docker-ce'], 'ds4_maintenance_packages lists docker-ce twice. Fix: list it once'),
    ('upgrade', 'dist', "ds4_maintenance_upgrade='dist' is not one of full, safe. Fix: full"),
    ('reboot', 'maybe', "ds4_maintenance_reboot='maybe' is not a boolean. Fix: true or false"),
    ('kit', 3, 'ds4_maintenance_kit=3 is not a boolean'),
    ('allow_front_outage', 'sure', "ds4_maintenance_allow_front_outage='sure' is not a boolean"),
    ('reboot_command', 'ipmitool power cycle', "ds4_maintenance_reboot_command='ipmitool power cycle' is not a list of words"),
    ('reboot_command', ['docker', 'restart', '{node}'], "ds4_maintenance_reboot_command: '{node}' names {node}, which is not one of {host}"),
    ('reboot_command', ['docker', ''], "ds4_maintenance_reboot_command: '' is not a non-empty string"),
    ('reboot_timeout', 30, 'ds4_maintenance_reboot_timeout=30 is not a number of seconds between 60 and 7200. Fix: e.g. 900'),
    ('reboot_timeout', 'long', "ds4_maintenance_reboot_timeout='long' is not a number of seconds"),
    ('reboot_timeout', True, 'ds4_maintenance_reboot_timeout=True is not a number of seconds'),
])
def test_bad_settings_refused_naming_the_variable_the_value_and_the_fix(key, value, words):
    errors = input_errors(dict(GOOD, **{key: value}))
    assert len(errors) == 1 and errors[0].startswith(words), errors


PAIRS = [{'name': 'spark_pair1', 'hosts': ['spark1', 'spark2']}, {'name': 'spark_pair2', 'hosts': ['spark3', 'spark4']}]


def test_the_only_router_on_a_pair_node_is_refused_unless_allowed():
    router = {'enabled': True, 'hosts': ['spark1'], 'vip': None}
    assert front_outages(PAIRS, ['spark1'], None) == ['spark_pair1']
    errors = input_errors(GOOD, PAIRS, router)
    assert len(errors) == 1 and 'the only router (spark1) runs on a node of spark_pair1 and there is no VIP' in errors[0]
    assert errors[0].startswith('ds4_maintenance_allow_front_outage=False') and 'Fix: ds4_router_vip' in errors[0]
    assert input_errors(dict(GOOD, allow_front_outage=True), PAIRS, router) == []
    # no reboot: the router stays up
    assert input_errors(dict(GOOD, reboot=False), PAIRS, router) == []
    # a VIP: the address moves to the other router host first
    assert input_errors(GOOD, PAIRS, {'enabled': True, 'hosts': ['spark1', 'spark3'], 'vip': '10.0.0.100/24'}) == []
    # a router on a host outside every pair, or no router
    assert input_errors(GOOD, PAIRS, {'enabled': True, 'hosts': ['gateway'], 'vip': None}) == []
    assert input_errors(GOOD, PAIRS[:1], {'enabled': False, 'hosts': [], 'vip': None}) == []


def test_dpkg_state_reads_version_want_and_state():
    state = dpkg_state(DPKG)
    assert state['docker-ce'] == {'version': '5:28.1.1-1~ubuntu.24.04~noble', 'want': 'hold', 'installed': True}
    assert state['old-thing']['installed'] is False and 'half' not in state


def test_the_collections_holds_are_released_a_hand_made_hold_left_alone():
    plan = node_plan(DPKG, DEFAULTS, [], [], [], 'spark1')
    # held now and in the collection's set: released for the upgrade, held again after it
    assert plan['release'] == ['docker-ce', 'nvidia-driver-580-open']
    # containerd.io is in the set but not held now (released by hand, or never held): nothing to release or restore
    assert plan['held_elsewhere'] == ['mlnx-tools'] and plan['errors'] == []
    assert plan['versions']['ds4-dummy'] == '1.0' and 'old-thing' not in plan['versions'] and plan['changed'] == []
    # host_hardening_unhold_packages takes a package out of the set: its hold is then someone else's
    plan = node_plan(DPKG, DEFAULTS, [], ['docker-ce'], [], 'spark1')
    assert plan['release'] == ['nvidia-driver-580-open'] and plan['held_elsewhere'] == ['docker-ce', 'mlnx-tools']
    # host_hardening_hold_packages adds one: the hand-made hold becomes the collection's
    plan = node_plan(DPKG, DEFAULTS, ['mlnx-tools'], [], [], 'spark1')
    assert plan['release'] == ['docker-ce', 'mlnx-tools', 'nvidia-driver-580-open'] and plan['held_elsewhere'] == []


def test_a_named_package_held_elsewhere_or_not_installed_is_refused():
    plan = node_plan(DPKG, DEFAULTS, [], [], ['docker-ce', 'mlnx-tools', 'ds4-dummy', 'no-such-thing'], 'spark2')
    assert len(plan['errors']) == 2, plan['errors']
    held, missing = plan['errors']
    assert held.startswith('ds4_maintenance_packages: mlnx-tools is held on spark2 by a hold the collection did not place')
    assert 'Fix: add it to host_hardening_hold_packages' in held and 'apt-mark unhold mlnx-tools' in held
    assert missing.startswith('ds4_maintenance_packages: no-such-thing is not installed on spark2')


def test_what_changed():
    before = node_plan(DPKG, DEFAULTS, [], [], [], 'spark1')['versions']
    after_text = DPKG.replace('ds4-dummy 1.0', 'ds4-dummy 2.0') + '\nnew-dep 0.3 install ok installed'
    after = node_plan(after_text, DEFAULTS, [], [], [], 'spark1', before)
    assert after['changed'] == [{'name': 'ds4-dummy', 'from': '1.0', 'to': '2.0'}, {'name': 'new-dep', 'from': '', 'to': '0.3'}]
    assert changed_packages({'a': '1'}, {}) == [{'name': 'a', 'from': '1', 'to': ''}] and changed_packages({}, {}) == []


def _tasks(path):
    with open(os.path.join(REPO, path)) as handle:
        return yaml.safe_load(handle)


def _names(tasks):
    out = []
    for task in tasks:
        out.append(task.get('name', ''))
        for key in ('block', 'always'):
            out.extend(_names(task.get(key) or []))
    return out


def test_the_plan_of_maintenance_yml_refuses_first_then_one_pair_at_a_time_through_rolling():
    plays = _tasks('playbooks/maintenance.yml')
    assert plays[0]['ansible.builtin.import_playbook'] == 'config_play.yml'
    checks, rolling = plays[1], plays[2]
    # the checks change nothing: read-only commands, facts and asserts only
    for task in checks['tasks']:
        module = [k for k in task if k.startswith('ansible.builtin.')][0]
        assert module in ('ansible.builtin.assert', 'ansible.builtin.stat', 'ansible.builtin.set_fact', 'ansible.builtin.debug',
                          'ansible.builtin.command', 'ansible.builtin.include_role'), module
        if module == 'ansible.builtin.command':
            assert task['changed_when'] is False and task['check_mode'] is False and task['ansible.builtin.command']['argv'][0] == 'dpkg-query'
        if module == 'ansible.builtin.include_role':
            # one CA per site: the fronts' TLS look, which only reads (file_state), asserts and sets a fact
            assert task[module] == {'name': 'dgxspark.ds4.api_proxy', 'rolespec_validate': False, 'tasks_from': 'tls_look'}
            look = _tasks('roles/api_proxy/tasks/tls_look.yml')
            assert [[k for k in t if '.' in k and k != 'name'][0] for t in look] == [
                'dgxspark.ds4.file_state', 'ansible.builtin.import_tasks']
            assert look[1]['ansible.builtin.import_tasks'] == 'tls_decide.yml'
            decide = _tasks('roles/api_proxy/tasks/tls_decide.yml')
            assert [[k for k in t if '.' in k and k != 'name'][0] for t in decide] == [
                'ansible.builtin.assert', 'ansible.builtin.set_fact']
    include = rolling['tasks'][0]
    assert include['ansible.builtin.include_tasks'] == 'tasks/rolling.yml' and include['vars']['ds4_rolling_action'] == 'maintain'
    assert include['loop'] == '{{ ds4_ops_rolling_pairs }}' and 'when' not in include
    assert rolling['any_errors_fatal'] is True


def test_the_plan_of_a_pair_in_order():
    names = _names(_tasks('playbooks/tasks/maintain.yml'))
    order = ['Maintain | The kit on the pair before', 'Maintain | Hand the address to the other router host',
             'Maintain | Stop the head first, then the worker', 'Maintain | Release the collection\'s holds',
             'Maintain | Upgrade every package', 'Maintain | Hold them again', 'Maintain | What changed on this node',
             'Maintain | Reboot this node from itself', 'Maintain | Power-cycle this node from the controller',
             'Maintain | Wait until systemd finished booting', 'Maintain | Hold the pair out of this pair\'s rebooted routers',
             'Maintain | The deploy sequence with the fabric re-qualified', 'Maintain | The kit on the pair after',
             'Maintain | A regression stops the run with the pair out of rotation']
    positions = [next(i for i, n in enumerate(names) if n.startswith(step)) for step in order]
    assert positions == sorted(positions), list(zip(order, positions))
    tasks = _tasks('playbooks/tasks/maintain.yml')
    packages = [t for t in tasks if t.get('name', '').startswith('Maintain | Packages')][0]
    # the holds come back whatever happens to the upgrade
    assert [t['name'] for t in packages['always']] == ['Maintain | Hold them again (whatever happened above)']
    deploy = [t for t in tasks if t.get('ansible.builtin.include_tasks') == 'deploy.yml'][0]
    assert deploy['vars'] == {'ds4_rolling': True, 'ds4_converge_roles': ['nccl_fabric']}
    stop = [t for t in tasks if t.get('name', '').startswith('Maintain | Stop the head first')][0]
    assert stop['ansible.builtin.systemd_service'] == {'name': "{{ item['unit'] }}", 'state': 'stopped', 'enabled': False}
    # once, from the pair's head: run_once would take the play's first host, which may be in another pair
    assert 'run_once' not in stop and stop['when'] == "inventory_hostname == ds4_rolling_pair['head']"
    assert 'selectattr(\'role\', \'eq\', \'head\')' in stop['loop'].split('+')[0]
