# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: tls_certificate_info
short_description: Expiry, names and fingerprint of a front's certificate (PEM text), read on the controller
version_added: 0.2.0
description:
  - Parses the first certificate of a PEM text with the controller's C(cryptography) (the hosts need no Python
    package for it). Used by the fronts' TLS tasks (renewal, the node exporter textfile) and by C(playbooks/status.yml).
    Logic in C(plugins/module_utils/tls_plan.py).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: PEM text holding a certificate.
    type: str
    required: true
  renew_days:
    description: C(renew) is true when the certificate expires within this many days (C(ds4_tls_renew_days)).
    type: int
    default: 30
'''

EXAMPLES = r'''
- name: Days left
  ansible.builtin.debug:
    msg: "{{ (lookup('ansible.builtin.file', 'front.crt') | dgxspark.ds4.tls_certificate_info(30))['days_left'] }}"
'''

RETURN = r'''
_value:
  description: not_after (Unix time), not_after_iso, days_left, renew, expired, sans, fingerprint_sha256, subject, issuer.
  type: dict
'''

from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.ds4.plugins.module_utils.tls_plan import cert_info


def tls_certificate_info(pem, renew_days=30):
    try:
        return cert_info(pem, renew_days=int(renew_days))
    except ValueError as exc:
        raise AnsibleFilterError('not a PEM certificate: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {'tls_certificate_info': tls_certificate_info}
