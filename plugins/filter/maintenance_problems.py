# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: maintenance_problems
short_description: What is wrong with the settings of maintenance.yml
version_added: 0.2.0
description:
  - Each problem names the variable, the value and the fix; an empty list when the settings are valid.
  - Checks C(ds4_maintenance_packages) (exact Debian package names, each once), C(ds4_maintenance_upgrade)
    (C(full) or C(safe)), C(ds4_maintenance_reboot) and C(ds4_maintenance_kit) (booleans),
    C(ds4_maintenance_reboot_command) (a list of words; only the placeholders C({host}) and C({name})) and
    C(ds4_maintenance_reboot_timeout) (60 to 7200 seconds).
  - With O(pairs) and O(router), a run that would reboot the only router (a router host among a pair's nodes and no
    VIP) is refused unless C(ds4_maintenance_allow_front_outage).
  - The logic is in C(plugins/plugin_utils/maintenance.py).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: The settings without their C(ds4_maintenance_) prefix (packages, upgrade, reboot, reboot_command,
      reboot_timeout, kit, allow_front_outage).
    type: dict
    required: true
  pairs:
    description: C(ds4_effective.pairs) (name, hosts).
    type: list
    elements: dict
  router:
    description: C(ds4_effective.router) (enabled, hosts, vip).
    type: dict
'''

EXAMPLES = r'''
- name: Refuse bad maintenance settings before any host changes
  ansible.builtin.assert:
    that: _problems | length == 0
    fail_msg: "{{ _problems | join('; ') }}"
  vars:
    _problems: "{{ {'packages': ds4_maintenance_packages, 'upgrade': ds4_maintenance_upgrade} | dgxspark.ds4.maintenance_problems }}"
'''

RETURN = r'''
_value:
  description: One sentence per problem (variable, value, fix).
  type: list
  elements: str
'''

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.maintenance import input_errors


def maintenance_problems(settings, pairs=None, router=None):
    return input_errors(dict(settings or {}), pairs, router)


class FilterModule(object):
    def filters(self):
        return {'maintenance_problems': maintenance_problems}
