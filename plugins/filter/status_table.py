# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: status_table
short_description: Render dgxspark.ds4.vllm_status rows as one fixed-width table
version_added: 0.1.0
description:
  - Takes the C(row) results of M(dgxspark.ds4.vllm_status) (one per rank) and returns the table lines, head first.
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: List of rows.
    type: list
    elements: dict
    required: true
'''

EXAMPLES = r'''
- name: Show the table
  ansible.builtin.debug:
    msg: "{{ rows | dgxspark.ds4.status_table }}"
'''

RETURN = r'''
_value:
  description: Table lines (header, rule, one line per row).
  type: list
  elements: str
'''

from ansible_collections.dgxspark.ds4.plugins.module_utils.ops_status import format_table


def status_table(rows):
    return format_table(list(rows or []))


class FilterModule(object):
    def filters(self):
        return {'status_table': status_table}
