# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: package_hold_plan
short_description: Which installed packages host_hardening holds and which it releases
version_added: 0.2.0
description:
  - From the output of C(dpkg-query -W -f '${Package} ${Status}\n'), the installed packages matching
    C(host_hardening_hold_default_packages) (names or patterns) plus C(host_hardening_hold_packages), less
    C(host_hardening_unhold_packages), are held; with O(release) the whole set is released instead.
  - Packages that are not installed are never given to dpkg (it cannot hold them; the selection would never settle).
  - The logic is in C(plugins/plugin_utils/package_holds.py).
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.package_holds
options:
  _input:
    description: Output of C(dpkg-query -W -f '${Package} ${Status}\n').
    type: str
    required: true
  release:
    description: C(host_hardening_release_holds).
    type: bool
    default: false
'''

EXAMPLES = r'''
- name: Hold the planned packages
  ansible.builtin.dpkg_selections:
    name: "{{ item }}"
    selection: hold
  loop: "{{ (dpkg.stdout | dgxspark.ds4.package_hold_plan(['docker-ce', 'nvidia-driver-*']))['hold'] }}"
'''

RETURN = r'''
_value:
  description: The plan.
  type: dict
  contains:
    installed:
      description: Installed package names.
      type: list
      elements: str
    hold:
      description: Installed packages to hold.
      type: list
      elements: str
    release:
      description: Installed packages whose hold is released.
      type: list
      elements: str
    defaults_absent:
      description: Entries of the default set that match no installed package (skipped).
      type: list
      elements: str
'''

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.package_holds import hold_plan, installed_packages


def package_hold_plan(dpkg_query, defaults=None, hold=None, unhold=None, release=False):
    installed = installed_packages(dpkg_query)
    plan = hold_plan(defaults, hold, unhold, installed, bool(release))
    plan['installed'] = installed
    return plan


class FilterModule(object):
    def filters(self):
        return {'package_hold_plan': package_hold_plan}
