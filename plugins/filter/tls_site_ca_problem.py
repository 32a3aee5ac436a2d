# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: tls_site_ca_problem
short_description: One CA per site - whether the controller's CA is the one a host already trusts
version_added: 0.2.0
description:
  - Compares the CA file a host already carries (as C(dgxspark.ds4.file_state) reported it at the start of the deploy,
    before any host changed) with C(ca.crt) in the controller's CA directory (C(ds4_tls_ca_dir)). Returns an empty
    string when the deploy may go on - the host trusts no CA yet, it trusts this one, or O(new_ca) (a replacement on
    purpose) - else the refusal, naming the host, both files and the directory to copy. Logic in
    C(plugins/module_utils/tls_plan.py).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: The CA directory on the controller.
    type: str
    required: true
  host:
    description: The host's inventory name.
    type: str
    required: true
  ca_path:
    description: The CA file on the host.
    type: str
    required: true
  observed:
    description: C(dgxspark.ds4.file_state)'s value for O(ca_path) (C(sha1:...) or C(absent)).
    type: str
    required: true
  new_ca:
    description: C(ds4_tls_new_ca) - the site's CA is replaced on purpose.
    type: bool
    default: false
'''

EXAMPLES = r'''
- name: One CA per site
  ansible.builtin.assert:
    that: problem | length == 0
    fail_msg: "{{ problem }}"
  vars:
    problem: "{{ '~/.dgxspark-ds4/tls' | dgxspark.ds4.tls_site_ca_problem(inventory_hostname, '/etc/dgxspark-ds4/tls/ca.crt', found) }}"
'''

RETURN = r'''
_value:
  description: An empty string, or the refusal.
  type: str
'''

from ansible_collections.dgxspark.ds4.plugins.module_utils.tls_plan import site_ca_problem


def tls_site_ca_problem(ca_dir, host, ca_path, observed, new_ca=False):
    return site_ca_problem(ca_dir, host, ca_path, observed, bool(new_ca))


class FilterModule(object):
    def filters(self):
        return {'tls_site_ca_problem': tls_site_ca_problem}
