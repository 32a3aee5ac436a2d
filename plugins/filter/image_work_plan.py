# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: image_work_plan
short_description: Decide whether image work (pull, load, build, save, stream) may run beside the pair now
version_added: 0.2.0
description:
  - V(go) when no vLLM rank of the pair is live, or every node has at least O(min_available_gib) of C(MemAvailable);
    beside a live rank with a node short of it, V(stop_pair) in a rolling operation (the pair is out of rotation and
    restarts on the change) and V(refuse) otherwise, with the numbers (logic in
    C(plugins/plugin_utils/image_work_guard.py)).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description:
      - The registered results of C(ansible.builtin.systemd_service) (status only) looped over the pair's nodes with
        C(delegate_to), one per node (C(item) the host, C(name) the unit, C(status.ActiveState)).
    type: list
    elements: dict
    required: true
  meminfo:
    description:
      - The registered results of C(ansible.builtin.slurp) of C(/proc/meminfo) looped over the same nodes, in the same
        order.
    type: list
    elements: dict
    required: true
  work:
    description: What is about to run, in words (said in the message).
    type: str
    required: true
  min_available_gib:
    description: C(MemAvailable) every node needs for the work beside a live rank.
    type: float
    required: true
  rolling:
    description: The pair is in a rolling operation (drained, restarts on this change).
    type: bool
    default: false
'''

EXAMPLES = r'''
- name: Plan the pull
  ansible.builtin.debug:
    msg: "{{ (units['results'] | dgxspark.ds4.image_work_plan(meminfo['results'], work='the pull', min_available_gib=16))['msg'] }}"
'''

RETURN = r'''
_value:
  description: C(action) (V(go), V(stop_pair), V(refuse)), C(live), C(available), C(short), C(msg).
  type: dict
'''

import base64

from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.image_work_guard import GIB, plan


def image_work_plan(units, meminfo, work, min_available_gib, rolling=False):
    nodes = []
    for unit, mem in zip(units, meminfo):
        if unit.get('item') != mem.get('item'):
            raise AnsibleFilterError('image_work_plan: the unit and meminfo results are of other nodes (%s, %s)'
                                     % (unit.get('item'), mem.get('item')))
        nodes.append({'host': unit.get('item'), 'unit': unit.get('name'),
                      'active_state': (unit.get('status') or {}).get('ActiveState', ''),
                      'meminfo': base64.b64decode(mem['content']).decode('utf-8', 'replace') if mem.get('content') else ''})
    return plan(nodes, str(work), int(float(min_available_gib) * GIB), rolling=bool(rolling))


class FilterModule(object):
    def filters(self):
        return {'image_work_plan': image_work_plan}
