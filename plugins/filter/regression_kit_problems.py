# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: regression_kit_problems
short_description: Problems of an upgrade's inputs (the kit's thresholds, the recipe's kit)
version_added: 0.2.0
description:
  - Returns one sentence per problem, naming the variable, the value and the fix; an empty list when usable.
  - The same check as C(plugins/module_utils/regression_kit.py) (check_upgrade).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: The thresholds, C(max_decode_drop_pct), C(max_prefill_drop_pct), C(max_acceptance_drop_pct) (percent).
    type: dict
    required: true
  kit:
    description: The kit data (C(roles/config/files/regression_kit.yml)).
    type: dict
    required: true
  recipe:
    description: The recipe whose kit the upgrade runs.
    type: str
    required: true
'''

EXAMPLES = r'''
- name: Refuse unusable thresholds
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems | join(' ') }}"
  vars:
    problems: "{{ {'max_decode_drop_pct': 95} | dgxspark.ds4.regression_kit_problems(kit_data, 'balanced') }}"
'''

RETURN = r'''
_value:
  description: Problems, one sentence each (empty when usable).
  type: list
  elements: str
'''

from ansible_collections.dgxspark.ds4.plugins.module_utils.regression_kit import check_upgrade


def regression_kit_problems(thresholds, kit, recipe):
    return check_upgrade(dict(thresholds or {}), kit, recipe)


class FilterModule(object):
    def filters(self):
        return {'regression_kit_problems': regression_kit_problems}
