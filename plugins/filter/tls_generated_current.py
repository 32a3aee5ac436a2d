# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: tls_generated_current
short_description: Whether the collection's CA (and a host's certificate) on the controller need nothing done
version_added: 0.2.0
description:
  - Reads the CA directory (C(ds4_tls_ca_dir)) with the controller's C(cryptography), without running a module. True
    when the community.crypto tasks of the fronts' TLS material would change nothing (the CA key and its CA
    certificate there; with O(key_path) and O(cert_path), the host's key and a certificate of it signed by that CA,
    naming exactly O(subject_alt_name), for serverAuth, not due for renewal). The deploy skips those tasks then
    (each is a Python process on the controller per host and run). Logic in C(plugins/module_utils/tls_plan.py).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: The CA directory on the controller.
    type: str
    required: true
  key_path:
    description: The host's key on the controller (omit to check the CA alone).
    type: str
  cert_path:
    description: The host's certificate on the controller.
    type: str
  subject_alt_name:
    description: The names the certificate must carry, as community.crypto's C(IP:...) / C(DNS:...) entries.
    type: list
    elements: str
  renew_days:
    description: Not current when the certificate expires within this many days (C(ds4_tls_renew_days)).
    type: int
    default: 30
'''

EXAMPLES = r'''
- name: Skip the CA tasks when the CA is in place
  ansible.builtin.debug:
    msg: "{{ '~/.dgxspark-ds4/tls' | dgxspark.ds4.tls_generated_current }}"
'''

RETURN = r'''
_value:
  description: Whether nothing is to be done.
  type: bool
'''

from ansible_collections.dgxspark.ds4.plugins.module_utils.tls_plan import generated_current


def tls_generated_current(ca_dir, key_path=None, cert_path=None, subject_alt_name=None, renew_days=30):
    return generated_current(ca_dir, key_path, cert_path, subject_alt_name, int(renew_days))[0]


class FilterModule(object):
    def filters(self):
        return {'tls_generated_current': tls_generated_current}
