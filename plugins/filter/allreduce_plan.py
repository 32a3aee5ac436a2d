# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: allreduce_plan
short_description: Decide whether the nccl_fabric all-reduce preflight runs beside the pair, and its buffer size
version_added: 0.1.0
description:
  - Skips the preflight while the vLLM unit of either rank is live (unless O(force)), and sizes its largest buffer to
    the node with the least C(MemFree) (logic in C(plugins/plugin_utils/allreduce_guard.py)).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: One entry per rank with C(host), C(unit), C(active_state) and C(meminfo) (the text of C(/proc/meminfo)).
    type: list
    elements: dict
    required: true
  force:
    description: Run even beside a live vLLM unit.
    type: bool
    default: false
  max_bytes:
    description: Largest all-reduce size wanted.
    type: int
    default: 1073741824
  fraction:
    description: Share of MemFree the preflight may use (buffer plus overhead).
    type: float
    default: 0.5
  overhead_bytes:
    description: CUDA, torch and NCCL memory of one rank besides the buffer.
    type: int
    default: 4294967296
  min_fit_bytes:
    description: Below this largest size the preflight is skipped.
    type: int
    default: 268435456
'''

EXAMPLES = r'''
- name: Plan the preflight
  ansible.builtin.debug:
    msg: "{{ (nodes | dgxspark.ds4.allreduce_plan(force=false))['msg'] }}"
'''

RETURN = r'''
_value:
  description: C(run), C(max_bytes), C(reason), C(live_units), C(memfree), C(pending), C(msg).
  type: dict
'''

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.allreduce_guard import plan


def allreduce_plan(nodes, force=False, max_bytes=1 << 30, fraction=0.5, overhead_bytes=4 << 30, min_fit_bytes=256 << 20):
    return plan(nodes, force=bool(force), max_bytes=int(max_bytes), fraction=float(fraction),
                overhead_bytes=int(overhead_bytes), min_fit_bytes=int(min_fit_bytes))


class FilterModule(object):
    def filters(self):
        return {'allreduce_plan': allreduce_plan}
