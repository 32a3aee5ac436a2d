# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: upgrade_plan
short_description: The order and the references of upgrade.yml's comparisons
version_added: 0.2.0
description:
  - One entry per pair, in pair order, with C(pair), C(head), C(reference), C(reference_head), C(measure_before).
  - A pair's reference is the next pair, still on the old version and measured at the same time. The last pair has
    none, so its own numbers are the reference, taken when it was the previous pair's reference, or right before its
    change when it never was (a single pair, C(measure_before)).
  - The same code as C(plugins/module_utils/regression_kit.py) (upgrade_plan).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: The run's pairs in pair order (items of C(ds4_effective.pairs), with C(name) and C(head)).
    type: list
    elements: dict
    required: true
'''

EXAMPLES = r'''
- name: Where each comparison of the upgrade gets its reference
  ansible.builtin.debug:
    msg: "{{ ds4_ops_rolling_pairs | dgxspark.ds4.upgrade_plan }}"
'''

RETURN = r'''
_value:
  description: One entry per pair (pair, head, reference, reference_head, measure_before).
  type: list
  elements: dict
'''

from ansible_collections.dgxspark.ds4.plugins.module_utils.regression_kit import upgrade_plan as _plan


def upgrade_plan(pairs):
    return _plan(list(pairs or []))


class FilterModule(object):
    def filters(self):
        return {'upgrade_plan': upgrade_plan}
