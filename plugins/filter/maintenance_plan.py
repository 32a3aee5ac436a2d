# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: maintenance_plan
short_description: The package plan of one node for maintenance.yml
version_added: 0.2.0
description:
  - From the output of C(dpkg-query -W -f '${Package} ${Version} ${Status}\n') on the node.
  - C(release) is the collection's holds (host_hardening's set) that dpkg has now, released for the upgrade only and
    held again right after it; C(held_elsewhere) the packages held by something else (never touched).
  - C(errors) refuses, before anything changes, a package of C(ds4_maintenance_packages) that is not installed or is
    held by a hold the collection did not place (this run would not release it, so apt would not upgrade it).
  - With O(before) (the C(versions) of an earlier plan), C(changed) lists what changed since.
  - The logic is in C(plugins/plugin_utils/maintenance.py).
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.package_holds
options:
  _input:
    description: Output of C(dpkg-query -W -f '${Package} ${Version} ${Status}\n').
    type: str
    required: true
  packages:
    description: C(ds4_maintenance_packages) (empty for every package apt would upgrade).
    type: list
    elements: str
    default: []
  host:
    description: The node's name, for the messages.
    type: str
    default: this node
  before:
    description: C(versions) of an earlier plan of the same node.
    type: dict
'''

EXAMPLES = r'''
- name: The node's package plan
  ansible.builtin.set_fact:
    _plan: "{{ dpkg.stdout | dgxspark.ds4.maintenance_plan(['docker-ce', 'nvidia-driver-*'], packages=['docker-ce']) }}"
'''

RETURN = r'''
_value:
  description: The plan.
  type: dict
  contains:
    release:
      description: The collection's holds on the node, released for the upgrade only.
      type: list
      elements: str
    held_elsewhere:
      description: Packages held by a hold the collection did not place.
      type: list
      elements: str
    errors:
      description: Refusals (variable, value, fix).
      type: list
      elements: str
    versions:
      description: Installed package name to version.
      type: dict
    changed:
      description: With O(before), each package whose version changed (name, from, to).
      type: list
      elements: dict
'''

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.maintenance import node_plan


def maintenance_plan(dpkg_query, defaults=None, hold=None, unhold=None, packages=None, host='this node', before=None):
    return node_plan(dpkg_query, defaults, hold, unhold, packages, host, before)


class FilterModule(object):
    def filters(self):
        return {'maintenance_plan': maintenance_plan}
