# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
name: memory_guard_problems
short_description: Problems of the memory guard's settings (PSI levels, polls, source paths)
version_added: 0.2.0
description:
  - Returns one sentence per problem, naming the variable, the value and the fix; an empty list when the settings are
    usable or the guard is off. The same check the pair guard runs on the node (C(plugins/module_utils/memory_guard.py)).
  - The old per-node-size table C(memory_guard_thresholds) (role variable C(vllm_service_memory_guard_thresholds)) is
    refused by name, on or off, with its replacement - the guard's free-memory level is the kernel's min watermark read
    on each node, so it has no setting.
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: The memory guard keys of the pair guard's config (C(memory_guard), C(memory_gate_psi_some_avg10),
      C(memory_stop_psi_full_avg10), C(memory_poll_s), C(memory_stop_polls), C(memory_clear_polls), C(meminfo_path),
      C(psi_path), C(zoneinfo_path), C(min_free_kbytes_path); C(memory_guard_thresholds) only to refuse it).
    type: dict
    required: true
'''

EXAMPLES = r'''
- name: Refuse unusable memory guard settings
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems | join(' ') }}"
  vars:
    problems: "{{ {'memory_guard': true, 'memory_gate_psi_some_avg10': vllm_service_memory_guard_gate_psi_some_avg10,
                   'memory_stop_psi_full_avg10': vllm_service_memory_guard_stop_psi_full_avg10}
                  | dgxspark.ds4.memory_guard_problems }}"
'''

RETURN = r'''
_value:
  description: Problems, one sentence each (empty when usable).
  type: list
  elements: str
'''

from ansible_collections.dgxspark.ds4.plugins.module_utils.memory_guard import check_config


def memory_guard_problems(settings):
    return check_config(dict(settings or {}))


class FilterModule(object):
    def filters(self):
        return {'memory_guard_problems': memory_guard_problems}
