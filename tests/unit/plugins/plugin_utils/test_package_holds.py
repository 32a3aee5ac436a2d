# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""host_hardening's package holds: the lists are checked, naming the variable, the value and the fix; the
first-week set (driver, Docker, NVIDIA container toolkit) is held by default as far as it is installed (absent
packages are skipped, never given to dpkg); host_hardening_release_holds releases the set; ansible.builtin.dpkg_selections."""


import os

import pytest
import yaml

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.package_holds import hold_errors, hold_plan, installed_packages

ROLE = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'roles', 'host_hardening')
INSTALLED = ['docker-ce', 'containerd.io', 'nvidia-container-toolkit', 'nvidia-driver-580-open']


def test_valid_lists():
    assert hold_errors(['docker-ce', 'nvidia-container-toolkit'], ['containerd.io'], INSTALLED) == []
    assert hold_errors([], [], None) == [] and hold_errors(None, None, []) == []


@pytest.mark.parametrize('hold, unhold, installed, expected', [
    ('docker-ce', [], None, "host_hardening_hold_packages='docker-ce' is not a list of package names"),
    (['nvidia-*'], [], None, "host_hardening_hold_packages: 'nvidia-*' is not a Debian package name"),
    (['Docker-CE'], [], None, "'Docker-CE' is not a Debian package name"),
    (['docker-ce', 'docker-ce'], [], None, 'host_hardening_hold_packages lists docker-ce twice'),
    (['docker-ce'], ['docker-ce'], None, 'docker-ce are in both host_hardening_hold_packages and host_hardening_unhold_packages'),
    ([], {'a': 1}, None, "host_hardening_unhold_packages={'a': 1} is not a list"),
    (['nvidia-driver-570-open'], [], INSTALLED, 'host_hardening_hold_packages: nvidia-driver-570-open not installed on this node'),
])
def test_bad_lists_name_the_variable_value_and_fix(hold, unhold, installed, expected):
    errors = hold_errors(hold, unhold, installed)
    assert len(errors) == 1 and expected in errors[0], errors
    assert 'Fix:' in errors[0]


def _defaults():
    with open(os.path.join(ROLE, 'defaults', 'main.yml')) as fh:
        return yaml.safe_load(fh)


def test_role_holds_the_first_week_set_by_default_and_uses_dpkg_selections():
    defaults = _defaults()
    assert defaults['host_hardening_hold_packages'] == [] and defaults['host_hardening_unhold_packages'] == []
    assert defaults['host_hardening_release_holds'] is False
    for name in ('docker-ce', 'containerd.io', 'nvidia-container-toolkit', 'libnvidia-container1', 'nvidia-driver-*'):
        assert name in defaults['host_hardening_hold_default_packages'], name
    assert hold_errors([], [], None, defaults['host_hardening_hold_default_packages']) == []
    with open(os.path.join(ROLE, 'tasks', 'packages.yml')) as fh:
        tasks = yaml.safe_load(fh)
    selections = [t for t in tasks if 'ansible.builtin.dpkg_selections' in t]
    assert sorted(t['ansible.builtin.dpkg_selections']['selection'] for t in selections) == ['hold', 'install']
    loops = sorted(t['loop'] for t in selections)
    assert loops == ["{{ __host_hardening_hold_plan['hold'] }}", "{{ __host_hardening_hold_plan['release'] }}"]
    with open(os.path.join(ROLE, 'tasks', 'converge.yml')) as fh:
        converge = yaml.safe_load(fh)
    assert any(t.get('ansible.builtin.import_tasks') == 'packages.yml' for t in converge)
    with open(os.path.join(ROLE, 'tasks', 'preflight.yml')) as fh:
        preflight = fh.read()
    assert 'dgxspark.ds4.package_hold_errors' in preflight and 'dpkg-query' in preflight
    with open(os.path.join(ROLE, 'vars', 'main.yml')) as fh:
        assert 'dgxspark.ds4.package_hold_plan' in fh.read()


# dpkg-query -W -f '${Package} ${Status}\n' as on a DGX OS node (one held already, one removed with its config kept)
DPKG = """docker-ce install ok installed
docker-ce-cli hold ok installed
containerd.io install ok installed
nvidia-container-toolkit install ok installed
nvidia-driver-580-open install ok installed
nvidia-driver-570-open deinstall ok config-files
nginx install ok installed
"""


def test_installed_packages_from_dpkg_query():
    assert installed_packages(DPKG) == ['containerd.io', 'docker-ce', 'docker-ce-cli', 'nginx', 'nvidia-container-toolkit',
                                        'nvidia-driver-580-open']
    assert installed_packages('') == [] and installed_packages(None) == []


def test_hold_plan_holds_the_installed_part_and_names_the_rest():
    installed = installed_packages(DPKG)
    plan = hold_plan(_defaults()['host_hardening_hold_default_packages'], [], [], installed)
    assert plan['hold'] == ['containerd.io', 'docker-ce', 'docker-ce-cli', 'nvidia-container-toolkit', 'nvidia-driver-580-open']
    assert plan['release'] == []
    # not installed: never given to dpkg, named once (a Debian test node with docker.io only gets docker.io held)
    assert 'nvidia-container-toolkit-base' in plan['defaults_absent'] and 'docker.io' in plan['defaults_absent']
    assert 'nvidia-driver-*' not in plan['defaults_absent']
    debian = hold_plan(_defaults()['host_hardening_hold_default_packages'], [], [], ['docker.io', 'nginx', 'containerd'])
    assert debian['hold'] == ['containerd', 'docker.io'] and debian['release'] == []


def test_hold_plan_unhold_and_release():
    installed = installed_packages(DPKG)
    defaults = ['docker-ce', 'docker-ce-cli', 'nvidia-driver-*']
    plan = hold_plan(defaults, ['nginx'], ['docker-ce-cli', 'not-installed'], installed)
    assert plan == {'hold': ['docker-ce', 'nginx', 'nvidia-driver-580-open'], 'release': ['docker-ce-cli'], 'defaults_absent': []}
    # the maintenance path: the whole set released, nothing held; names not installed never reach dpkg
    plan = hold_plan(defaults, ['nginx'], ['not-installed'], installed, release=True)
    assert plan['hold'] == [] and plan['release'] == ['docker-ce', 'docker-ce-cli', 'nginx', 'nvidia-driver-580-open']
    assert hold_plan([], [], [], installed) == {'hold': [], 'release': [], 'defaults_absent': []}


@pytest.mark.parametrize('defaults, expected', [
    ('docker-ce', "host_hardening_hold_default_packages='docker-ce' is not a list of package names or patterns"),
    (['Docker*'], "host_hardening_hold_default_packages: 'Docker*' is not a Debian package name or a pattern"),
    ([3], "host_hardening_hold_default_packages: 3 is not a Debian package name or a pattern"),
])
def test_bad_default_set_names_the_variable(defaults, expected):
    errors = hold_errors([], [], None, defaults)
    assert len(errors) == 1 and expected in errors[0] and 'Fix:' in errors[0], errors
