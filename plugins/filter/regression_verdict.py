# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: regression_verdict
short_description: The regression kit's verdict on a changed pair against a reference pair
version_added: 0.2.0
description:
  - C(regressed) when the changed pair failed a check of the kit, or its decode rate, prefill rate or spec-decode
    acceptance is lower than the reference's by more than the thresholds (percent); C(pass) otherwise. A figure one
    side lacks is not compared, and the result says which (an acceptance the reference had and the changed pair lost
    is a regression).
  - The same code as C(plugins/module_utils/regression_kit.py) (verdict).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: The changed pair's numbers (the C(dgxspark.ds4.regression_kit) module's result).
    type: dict
    required: true
  reference:
    description: The reference numbers (a pair still on the old version, or the same pair before the change).
    type: dict
    required: true
  thresholds:
    description: C(max_decode_drop_pct), C(max_prefill_drop_pct), C(max_acceptance_drop_pct) (defaults 10, 15, 10).
    type: dict
    default: {}
'''

EXAMPLES = r'''
- name: Judge the changed pair
  ansible.builtin.set_fact:
    verdict: "{{ new_kit | dgxspark.ds4.regression_verdict(old_kit, {'max_decode_drop_pct': 10}) }}"
'''

RETURN = r'''
_value:
  description: verdict (pass or regressed), regressions (one line each), compared (figure, new, old, ratio,
    floor_ratio, ok), not_compared (one line each), summary (one line).
  type: dict
'''

from ansible_collections.dgxspark.ds4.plugins.module_utils import regression_kit


def regression_verdict(new, reference, thresholds=None):
    result = regression_kit.verdict(dict(new or {}), dict(reference or {}), dict(thresholds or {}))
    result['summary'] = regression_kit.summary(result)
    return result


class FilterModule(object):
    def filters(self):
        return {'regression_verdict': regression_verdict}
