# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: container_log_args
short_description: The logging arguments of the vLLM container's docker run
version_added: 0.1.0
description:
  - Returns exactly one C(--log-driver) with its options. The unit runs C(docker run) attached, so the container's
    output is already in the unit's journal; C(none) keeps no other copy, C(json-file) keeps a copy for C(docker logs)
    bounded by O(max_size) x O(max_file).
  - Fails naming the variable, the value and the fix for C(journald) (every line twice in the journal), an unknown
    driver or an unbounded json-file.
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: The driver, C(none) or C(json-file).
    type: str
    required: true
  max_size:
    description: Size of one json-file log (a number with k, m or g).
    type: str
    default: 100m
  max_file:
    description: Number of json-file logs kept.
    type: int
    default: 3
'''

EXAMPLES = r'''
- name: Logging arguments
  ansible.builtin.debug:
    msg: "{{ 'json-file' | dgxspark.ds4.container_log_args('100m', 3) }}"
'''

RETURN = r'''
_value:
  description: docker run arguments, one word per item.
  type: list
  elements: str
'''

from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.container_logs import docker_log_args


def container_log_args(driver, max_size='100m', max_file=3):
    try:
        return docker_log_args(driver, max_size, max_file)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {'container_log_args': container_log_args}
