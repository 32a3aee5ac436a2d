# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of TLS on the fronts: a certificate's expiry and names (over community.crypto's x509_certificate_info),
the PEM text of a ds4_tls_* input, whether the collection's CA and certificates need nothing done, one CA per site.

Documentation: plugins/filter/<name>.yml (one per filter)."""

import datetime
import time
import warnings

from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.ds4.plugins.module_utils._security.tls_plan import expiry, generated_current, read_pem, site_ca_problem
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.filter_base import Ds4FilterError, ds4_filter, filter_map


def _x509_certificate_info():
    """community.crypto's x509_certificate_info filter (a dependency of this collection, galaxy.yml), imported when a
    certificate is read: the collection's own plugins load without it (ansible-test sanity, a bare install)."""
    try:
        from ansible_collections.community.crypto.plugins.filter.x509_certificate_info import FilterModule
    except ImportError as exc:
        raise Ds4FilterError('dgxspark.ds4.tls_certificate_info: needs the community.crypto collection (>= 2.10.0, a '
                             'dependency of dgxspark.ds4; the ansible package ships it): %s' % exc) from exc
    return FilterModule().filters()['x509_certificate_info']


# RFC 4514's short names of the attribute types (section 3), keyed by the long names community.crypto reports
_RFC4514_NAMES = {'commonName': 'CN', 'localityName': 'L', 'stateOrProvinceName': 'ST', 'organizationName': 'O',
                  'organizationalUnitName': 'OU', 'countryName': 'C', 'streetAddress': 'STREET',
                  'domainComponent': 'DC', 'userId': 'UID'}


def _now():
    return int(time.time())


def _rfc4514_value(value):
    """An attribute value escaped as RFC 4514 section 2.4 says."""
    for char in '\\",+;<>':
        value = value.replace(char, '\\' + char)
    value = value.replace('\0', '\\00')
    if value[:1] in ('#', ' '):
        value = '\\' + value
    if value.endswith(' '):
        value = value[:-1] + '\\ '
    return value


def _rfc4514(ordered):
    """The RFC 4514 string of a name (community.crypto's subject_ordered / issuer_ordered: [[type, value]] in the
    certificate's order; RFC 4514 writes the last one first)."""
    return ','.join('%s=%s' % (_RFC4514_NAMES.get(kind, kind), _rfc4514_value(value)) for kind, value in reversed(ordered or []))


@ds4_filter('tls_certificate_info', 'str')
def tls_certificate_info(pem, renew_days=30):
    try:
        with warnings.catch_warnings():
            # cryptography >= 46 warns on any use of its DSA classes, and community.crypto's key check tests every
            # key against them: one "errantly sent data directly to stderr" warning per worker and deploy otherwise
            warnings.filterwarnings('ignore', message='DSA is deprecated')
            facts = _x509_certificate_info()(pem)
    except Ds4FilterError:
        raise
    except AnsibleFilterError as exc:
        raise Ds4FilterError('dgxspark.ds4.tls_certificate_info: not a PEM certificate: %s' % exc) from exc
    not_after = int(datetime.datetime.strptime(facts['not_after'], '%Y%m%d%H%M%SZ')
                    .replace(tzinfo=datetime.timezone.utc).timestamp())
    sans = facts.get('subject_alt_name') or []
    info = {'not_after': not_after,
            'not_after_iso': datetime.datetime.fromtimestamp(not_after, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'),
            'sans': [s[len('DNS:'):] for s in sans if s.startswith('DNS:')] + [s[len('IP:'):] for s in sans if s.startswith('IP:')],
            'fingerprint_sha256': facts['fingerprints']['sha256'].replace(':', ''),
            'subject': _rfc4514(facts.get('subject_ordered')), 'issuer': _rfc4514(facts.get('issuer_ordered'))}
    info.update(expiry(not_after, _now(), int(renew_days)))
    return info


@ds4_filter('tls_pem')
def tls_pem(value, var):
    return read_pem(var, value)


@ds4_filter('tls_generated_current', 'str')
def tls_generated_current(ca_dir, key_path=None, cert_path=None, subject_alt_name=None, renew_days=30):
    return generated_current(ca_dir, key_path, cert_path, subject_alt_name, int(renew_days))[0]


@ds4_filter('tls_site_ca_problem', 'str')
def tls_site_ca_problem(ca_dir, host, ca_path, observed, new_ca=False):
    return site_ca_problem(ca_dir, host, ca_path, observed, bool(new_ca))


class FilterModule(object):
    def filters(self):
        return filter_map(tls_certificate_info, tls_pem, tls_generated_current, tls_site_ca_problem)
