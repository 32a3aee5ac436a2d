# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: drain_report
short_description: One line saying what a drain at one router waited for
version_added: 0.1.0
description:
  - Composes the line C(playbooks/tasks/drain.yml) prints per router from the results of its steps there (logic in
    C(drain_report) of C(plugins/module_utils/router_admin.py)). A router count that stood still is reported as
    finished when it came down once the pair's engine was quiet, else as passed over, with the figures.
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: The result of the wait at that router (module C(dgxspark.ds4.router_pool), O(state=drained)).
    type: dict
    required: true
  removal:
    description: The result of taking the pair out of that router (C(router_pool) with C(wait_in_flight=false)).
    type: dict
    required: true
  engine:
    description: The result of C(dgxspark.ds4.vllm_idle) on the head, when a count stood still; else empty.
    type: dict
  again:
    description: The result of reading that router again, when its count stood still; else empty.
    type: dict
'''

EXAMPLES = r'''
- name: What the drain waited for
  ansible.builtin.debug:
    msg: "{{ wait_result | dgxspark.ds4.drain_report(removal=removal_result, engine={}, again={}) }}"
'''

RETURN = r'''
_value:
  description: The line, for example C(took http://192.0.2.10:8000 out of rotation; waited up to 1810 s (...) for its
    in-flight requests - 2 finished in 3.5 s).
  type: str
'''

from ansible_collections.dgxspark.ds4.plugins.module_utils.router_admin import drain_report


class FilterModule(object):
    def filters(self):
        return {'drain_report': lambda wait, removal, engine=None, again=None: drain_report(
            removal or {}, wait or {}, engine or {}, again or {})}
