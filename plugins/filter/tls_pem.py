# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: tls_pem
short_description: The PEM text of a ds4_tls_* input given as PEM text (e.g. vaulted) or as a path on the controller
version_added: 0.2.0
description:
  - C(ds4_tls_certificate), C(ds4_tls_private_key) and C(ds4_tls_ca_certificate) take either the PEM text itself
    (vault-friendly) or the path of a PEM file on the controller. This filter returns the text in both cases; a
    missing file fails naming the variable and the fix. Logic in C(plugins/module_utils/tls_plan.py).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: The variable's value.
    type: str
    required: true
  var:
    description: The variable's name, for the message.
    type: str
    required: true
'''

EXAMPLES = r'''
- name: The front's certificate on the host
  ansible.builtin.copy:
    content: "{{ ds4_tls_certificate | dgxspark.ds4.tls_pem('ds4_tls_certificate') }}"
    dest: /etc/dgxspark-ds4/tls/front.crt
    mode: "0644"
'''

RETURN = r'''
_value:
  description: The PEM text.
  type: str
'''

from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.ds4.plugins.module_utils.tls_plan import read_pem


def tls_pem(value, var):
    try:
        return read_pem(var, value)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {'tls_pem': tls_pem}
