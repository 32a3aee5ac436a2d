# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""host_hardening's opt-in package holds: the lists are checked, naming the variable, the value and the fix;
the role holds nothing by default and uses ansible.builtin.dpkg_selections."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.dgxspark.ds4.plugins.module_utils.package_holds import hold_errors

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


def test_role_holds_nothing_by_default_and_uses_dpkg_selections():
    with open(os.path.join(ROLE, 'defaults', 'main.yml')) as fh:
        defaults = yaml.safe_load(fh)
    assert defaults['host_hardening_hold_packages'] == [] and defaults['host_hardening_unhold_packages'] == []
    with open(os.path.join(ROLE, 'tasks', 'packages.yml')) as fh:
        tasks = yaml.safe_load(fh)
    selections = [t['ansible.builtin.dpkg_selections'] for t in tasks if 'ansible.builtin.dpkg_selections' in t]
    assert sorted(s['selection'] for s in selections) == ['hold', 'install']
    with open(os.path.join(ROLE, 'tasks', 'converge.yml')) as fh:
        converge = yaml.safe_load(fh)
    assert any(t.get('ansible.builtin.import_tasks') == 'packages.yml' for t in converge)
    with open(os.path.join(ROLE, 'tasks', 'preflight.yml')) as fh:
        preflight = fh.read()
    assert 'dgxspark.ds4.package_hold_errors' in preflight
