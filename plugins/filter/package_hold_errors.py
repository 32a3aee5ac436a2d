# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: package_hold_errors
short_description: Check host_hardening's package hold lists
version_added: 0.1.0
description:
  - Returns the problems of C(host_hardening_hold_packages) and C(host_hardening_unhold_packages), each naming the
    variable, the value and the fix; an empty list when both are valid.
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: The packages to hold.
    type: list
    elements: str
    required: true
  unhold:
    description: The packages whose hold is released.
    type: list
    elements: str
    default: []
  installed:
    description: Installed package names; omitted = not checked.
    type: list
    elements: str
  defaults:
    description: C(host_hardening_hold_default_packages) (names or patterns); omitted = not checked.
    type: list
    elements: str
'''

EXAMPLES = r'''
- name: Check the hold lists
  ansible.builtin.assert:
    that: errors | length == 0
    fail_msg: "{{ errors | join('; ') }}"
  vars:
    errors: "{{ ['docker-ce'] | dgxspark.ds4.package_hold_errors([], ansible_facts['packages'].keys() | list) }}"
'''

RETURN = r'''
_value:
  description: Problems, one sentence each.
  type: list
  elements: str
'''

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.package_holds import hold_errors


def package_hold_errors(hold, unhold=None, installed=None, defaults=None):
    return hold_errors(hold, unhold, installed, defaults)


class FilterModule(object):
    def filters(self):
        return {'package_hold_errors': package_hold_errors}
