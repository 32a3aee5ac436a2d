# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
name: quality_canary_problems
short_description: Problems of the quality canary's settings (intervals, failures before a restart, timing bounds)
version_added: 0.2.0
description:
  - Returns one sentence per problem, naming the variable, the value and the fix; an empty list when the settings are
    usable or the canary is off. The same check the pair guard runs on the node
    (C(plugins/module_utils/quality_canary.py)).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: The canary keys of the pair guard's config (C(canary), C(canary_interval_s), C(canary_retry_s),
      C(canary_failures_to_restart), C(canary_timeout_s), C(canary_decode_tokens), C(canary_max_ttft_ratio),
      C(canary_ttft_slack_s), C(canary_min_decode_ratio), C(canary_url), C(canary_model)).
    type: dict
    required: true
'''

EXAMPLES = r'''
- name: Refuse unusable quality canary settings
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems | join(' ') }}"
  vars:
    problems: "{{ {'canary': true, 'canary_interval_s': 30, 'canary_url': 'http://127.0.0.1:8000',
                   'canary_model': 'deepseek-v4-flash'} | dgxspark.ds4.quality_canary_problems }}"
'''

RETURN = r'''
_value:
  description: Problems, one sentence each (empty when usable).
  type: list
  elements: str
'''

from ansible_collections.dgxspark.ds4.plugins.module_utils.quality_canary import check_config


def quality_canary_problems(settings):
    return check_config(dict(settings or {}))


class FilterModule(object):
    def filters(self):
        return {'quality_canary_problems': quality_canary_problems}
