# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: network_errors
short_description: Why a list of client networks (CIDRs) is refused, naming the variable, the value and the fix
version_added: 0.2.0
description:
  - Returns one sentence per problem of a list of CIDRs (not a list, an entry that does not parse, a loopback network),
    each naming the variable, the value and the fix; an empty list when every entry is a valid IPv4/IPv6 network.
  - The same check as C(ds4_api_allowed_networks) (C(plugins/module_utils/api_exposure.py) C(normalize_networks)).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: The value of the variable (a list of CIDR strings).
    type: raw
    required: true
  var:
    description: The variable's name, for the messages.
    type: str
    required: true
'''

EXAMPLES = r'''
- name: Monitoring networks parse
  ansible.builtin.assert:
    that: errors | length == 0
    fail_msg: "{{ errors | join(' ') }}"
  vars:
    errors: "{{ monitoring_allowed_networks | dgxspark.ds4.network_errors('monitoring_allowed_networks') }}"
'''

RETURN = r'''
_value:
  description: The problems, one sentence each (empty when the list is valid).
  type: list
  elements: str
'''

from ansible_collections.dgxspark.ds4.plugins.module_utils.api_exposure import normalize_networks


def network_errors(value, var):
    errors = []
    normalize_networks(value, errors, var=var)
    return errors


class FilterModule(object):
    def filters(self):
        return {'network_errors': network_errors}
