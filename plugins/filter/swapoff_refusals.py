# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: swapoff_refusals
short_description: Reasons to refuse swapoff on a node now (swap in use against free memory, a live vLLM/GPU process)
version_added: 0.2.0
description:
  - Returns one sentence per reason to refuse C(swapoff --all) now, each naming the numbers (swap in use,
    MemAvailable, the margin) and the fix; an empty list when it is safe.
  - Refused when swap in use exceeds MemAvailable minus the margin, or when swap is in use while a vLLM rank or another
    GPU process runs (on GB10 unified memory an out-of-memory is a freeze). Logic in
    C(plugins/plugin_utils/swap_guard.py).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: The text of C(/proc/meminfo).
    type: str
    required: true
  margin_mib:
    description: MiB that must stay available once the swap in use is back in memory (C(host_hardening_swapoff_margin_mib)).
    type: int
    required: true
  gpu_processes:
    description: Lines of C(nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader).
    type: list
    elements: str
    default: []
  vllm_units:
    description: The collection's vLLM units that run.
    type: list
    elements: str
    default: []
  vllm_processes:
    description: Lines of C(pgrep -a) for vLLM processes.
    type: list
    elements: str
    default: []
  host:
    description: The node, for the message.
    type: str
    default: this node
'''

EXAMPLES = r'''
- name: Refuse swapoff when it is not safe
  ansible.builtin.assert:
    that: refusals | length == 0
    fail_msg: "{{ refusals | join(' ') }}"
  vars:
    refusals: "{{ lookup('ansible.builtin.file', '/proc/meminfo') | dgxspark.ds4.swapoff_refusals(8192) }}"
'''

RETURN = r'''
_value:
  description: Reasons to refuse, one sentence each (empty when swapoff is safe).
  type: list
  elements: str
'''

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.swap_guard import swapoff_refusals as _refusals


def swapoff_refusals(meminfo, margin_mib, gpu_processes=None, vllm_units=None, vllm_processes=None, host='this node'):
    return _refusals(meminfo, margin_mib, gpu_processes, vllm_units, vllm_processes, host)


class FilterModule(object):
    def filters(self):
        return {'swapoff_refusals': swapoff_refusals}
