# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's filters, grouped by subsystem in plugins/filter/*.py: every name the roles and playbooks use is
a filter there (found by ansible-core by its FQCN), each has its documentation (plugins/filter/<name>.yml), each
raises the one error class (plugins/plugin_utils/filter_base.py Ds4FilterError) on bad input naming the filter and
what is wrong. tls_certificate_info (over community.crypto's x509_certificate_info) publishes what the collection's
own cryptography reading gives; the API-key rule is api_exposure.api_key_problem everywhere."""

import datetime
import glob
import importlib
import ipaddress
import json
import os
import re
import subprocess
import sys
import warnings

import pytest
import yaml

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ansible_collections.dgxspark.ds4.plugins.filter import tls
from ansible_collections.dgxspark.ds4.plugins.module_utils._security import api_exposure as x
from ansible_collections.dgxspark.ds4.plugins.module_utils._security import tls_plan
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import role_inputs as ri
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.filter_base import Ds4FilterError

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
FILTER_DIR = os.path.join(REPO, 'plugins', 'filter')
NOW = datetime.datetime(2026, 11, 26, tzinfo=datetime.timezone.utc)


def _filters():
    """{name: (file, function)} of every filter of plugins/filter/*.py."""
    out = {}
    for path in sorted(glob.glob(os.path.join(FILTER_DIR, '*.py'))):
        group = os.path.basename(path)[:-3]
        module = importlib.import_module('ansible_collections.dgxspark.ds4.plugins.filter.' + group)
        for name, func in module.FilterModule().filters().items():
            assert name not in out, '%s is defined in %s and %s' % (name, out.get(name, ('?',))[0], group)
            out[name] = (group, func)
    return out


FILTERS = _filters()


def _used_filter_names():
    """Names used as filters in roles/ and playbooks/: `| dgxspark.ds4.<name>` and map/select/reject('dgxspark.ds4.<name>')."""
    names = set()
    for top in ('roles', 'playbooks'):
        for root, _dirs, files in os.walk(os.path.join(REPO, top)):
            for f in files:
                if f.endswith(('.yml', '.yaml', '.j2')):
                    with open(os.path.join(root, f), encoding='utf-8') as handle:
                        text = handle.read()
                    names.update(re.findall(r'\|\s*dgxspark\.ds4\.([a-z_]+)', text))
                    names.update(re.findall(r'(?:map|select|reject|selectattr|rejectattr)\([^)]*[\'"]dgxspark\.ds4\.([a-z_]+)[\'"]', text))
    return names


def test_the_filters_are_grouped_by_subsystem_few_files_many_filters():
    groups = {group for group, _f in FILTERS.values()}
    assert len(FILTERS) >= 24 and len(groups) <= 8, (len(FILTERS), groups)


def test_every_filter_name_the_roles_and_playbooks_use_is_a_filter_of_the_grouped_files():
    used = _used_filter_names()
    assert len(used) >= 20, sorted(used)
    assert sorted(used - set(FILTERS)) == []


def test_ansible_core_finds_every_filter_by_its_fqcn_in_the_multi_filter_files():
    code = r'''
import json, sys
from ansible.plugins.loader import init_plugin_loader, filter_loader
init_plugin_loader([%r])
out = {}
for name in sys.argv[1:]:
    plugin = filter_loader.get('dgxspark.ds4.' + name)
    out[name] = getattr(plugin, '_original_path', None) or getattr(plugin, '_load_name', None) if plugin else None
print(json.dumps(out))
''' % os.path.join(REPO, '.collections')
    proc = subprocess.run([sys.executable, '-c', code] + sorted(FILTERS), cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(n for n, where in found.items() if not where) == []


def test_every_filter_has_its_documentation_beside_it_and_no_documentation_is_left_over():
    docs = {os.path.basename(p)[:-4] for p in glob.glob(os.path.join(FILTER_DIR, '*.yml'))}
    assert docs == set(FILTERS)
    for name in docs:
        with open(os.path.join(FILTER_DIR, name + '.yml'), encoding='utf-8') as handle:
            doc = yaml.safe_load(handle)
        assert set(doc) == {'DOCUMENTATION', 'EXAMPLES', 'RETURN'}, name
        assert doc['DOCUMENTATION']['name'] == name and '_input' in doc['DOCUMENTATION']['options'], name
        assert 'dgxspark.ds4.' + name in doc['EXAMPLES'], name
    for path in glob.glob(os.path.join(FILTER_DIR, '*.py')):
        with open(path, encoding='utf-8') as handle:
            assert 'DOCUMENTATION' not in handle.read(), path


# One bad input per filter: (positional args, keyword args, what the message says)
BAD = {
    'allreduce_plan': ((42,), {}, 'the input must be a list, got int'),
    'api_key_errors': (([], None), {}, "var must be the variable's name"),
    'drain_report': ((42, {}), {}, 'the input must be a dict, got int'),
    'image_pins': (({}, 'nosuchstep'), {}, "unknown step 'nosuchstep'"),
    'image_work_plan': (('units', [], 'w', 1), {}, 'the input must be a list, got str'),
    'keepalived_conf': (([],), {}, 'the input must be a dict, got list'),
    'maintenance_plan': ((42,), {}, 'the input must be a str, got int'),
    'maintenance_problems': (([],), {}, 'the input must be a dict, got list'),
    'network_errors': ((['10.0.0.0/8'], None), {}, "var must be the variable's name"),
    'package_hold_errors': ((['docker-ce'], None, 42), {}, 'not iterable'),
    'package_hold_plan': ((42,), {}, 'the input must be a str, got int'),
    'record_launch': ((42,), {}, 'the input must be a dict, got int'),
    'regression_kit_problems': (([], {}, 'p'), {}, 'the input must be a dict, got list'),
    'regression_verdict': ((42, {}), {}, 'the input must be a dict, got int'),
    'status_table': ((42,), {}, 'the input must be a list, got int'),
    'swapoff_refusals': ((42, 1), {}, 'the input must be a str, got int'),
    'tls_certificate_info': (('not a PEM',), {}, 'not a PEM certificate'),
    'tls_generated_current': ((42,), {}, 'the input must be a str, got int'),
    'tls_pem': (('/nonexistent/front.crt', 'ds4_tls_certificate'), {}, 'no such file on the controller'),
    'tls_site_ca_problem': ((42, 'spark1', '/etc/ca.crt', 'absent'), {}, 'the input must be a str, got int'),
    'unpinned_inputs': ((42,), {}, 'the input must be a dict, got int'),
    'upgrade_plan': ((42,), {}, 'the input must be a list, got int'),
    'vllm_image_check': ((42, '0.27.1'), {}, 'the input must be a dict, got int'),
    'vllm_router_plan': ((42,), {}, 'the input must be a list, got int'),
}


def test_the_bad_input_table_covers_every_filter():
    assert set(BAD) == set(FILTERS)


@pytest.mark.parametrize('name', sorted(BAD))
def test_every_filter_raises_the_one_error_class_naming_itself_and_what_is_wrong(name):
    args, kwargs, said = BAD[name]
    with pytest.raises(Ds4FilterError) as caught:
        FILTERS[name][1](*args, **kwargs)
    assert str(caught.value).startswith('dgxspark.ds4.%s: ' % name) and said in str(caught.value), str(caught.value)


def test_the_error_class_is_an_ansible_filter_error():
    from ansible.errors import AnsibleFilterError  # pylint: disable=import-outside-toplevel
    assert issubclass(Ds4FilterError, AnsibleFilterError)


# tls_certificate_info: community.crypto's facts, put as the filter publishes them

def _cert(subject, key, issuer_key, sans, days):
    b = (x509.CertificateBuilder().subject_name(subject)
         .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'test CA')]))
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(NOW - datetime.timedelta(days=300)).not_valid_after(NOW + datetime.timedelta(days=days, seconds=7)))
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return b.sign(issuer_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()


@pytest.fixture(scope='module')
def certs():
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    plain = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'spark1')])
    odd = x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, 'DE'), x509.NameAttribute(NameOID.ORGANIZATION_NAME, ' Lab, "A"+B;<c> '),
                     x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, 'ops'), x509.NameAttribute(NameOID.COMMON_NAME, '#spark1'),
                     x509.NameAttribute(NameOID.DOMAIN_COMPONENT, 'example')])
    sans = [x509.IPAddress(ipaddress.ip_address('192.0.2.10')), x509.DNSName('spark1'), x509.IPAddress(ipaddress.ip_address('fe80::1')),
            x509.DNSName('*.example.internal'), x509.RFC822Name('ops@example.internal')]
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    return {'leaf': _cert(plain, key, ca_key, sans, 365), 'short': _cert(odd, key, ca_key, sans, 10),
            'expired': _cert(plain, key, ca_key, [], -2), 'key': key_pem}


@pytest.fixture()
def at_now(monkeypatch):
    monkeypatch.setattr(tls, '_now', lambda: int(NOW.timestamp()))


@pytest.mark.parametrize('which', ['leaf', 'short', 'expired'])
def test_tls_certificate_info_publishes_what_a_reading_with_cryptography_gives(certs, at_now, which):
    info = tls.tls_certificate_info(certs[which], 30)
    assert info == tls_plan.cert_info(certs[which], now=int(NOW.timestamp()), renew_days=30)
    assert set(info) == {'not_after', 'not_after_iso', 'days_left', 'renew', 'expired', 'sans', 'fingerprint_sha256',
                         'subject', 'issuer'}


def test_tls_certificate_info_expiry_names_and_fingerprint(certs, at_now):
    info = tls.tls_certificate_info(certs['short'], '30')
    assert (info['days_left'], info['renew'], info['expired']) == (10, True, False)
    assert info['not_after_iso'] == '2026-12-06T00:00:07Z' and info['not_after'] == int(NOW.timestamp()) + 10 * 86400 + 7
    assert info['sans'] == ['spark1', '*.example.internal', '192.0.2.10', 'fe80::1']
    assert info['fingerprint_sha256'] == tls_plan.pem_fingerprint(certs['short']) and len(info['fingerprint_sha256']) == 64
    assert info['subject'] == 'DC=example,CN=\\#spark1,OU=ops,O=\\ Lab\\, \\"A\\"\\+B\\;\\<c\\>\\ ,C=DE'
    assert info['issuer'] == 'CN=test CA'
    assert tls.tls_certificate_info(certs['leaf'])['renew'] is False
    assert tls.tls_certificate_info(certs['expired'])['expired'] is True


def test_tls_certificate_info_emits_no_warning_on_an_ec_certificate(certs, at_now):
    """community.crypto tests every key against cryptography's DSA classes, which cryptography >= 46 answers with a
    deprecation warning; printed by each forked worker ("errantly sent data directly to stderr") on every deploy.
    Where this cryptography has no such warning, the filter must still warn nothing."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        tls.tls_certificate_info(certs['leaf'])
    assert [str(w.message) for w in caught] == []


def test_tls_certificate_info_reads_the_certificate_of_a_text_with_more_in_it(certs, at_now):
    alone = tls.tls_certificate_info(certs['leaf'])
    assert tls.tls_certificate_info(certs['key'] + certs['leaf']) == alone
    assert tls.tls_certificate_info('Bag Attributes\n' + certs['leaf'] + certs['short']) == alone


def test_tls_certificate_info_refuses_what_is_not_a_certificate(certs):
    for bad in (certs['key'], '', 'no PEM here'):
        with pytest.raises(Ds4FilterError, match='^dgxspark.ds4.tls_certificate_info: not a PEM certificate'):
            tls.tls_certificate_info(bad)


# The API-key rule: api_exposure.api_key_problem, and every check through it

KEY = 'k' * 16 + '._~+/=-'


@pytest.mark.parametrize('key,ok', [
    (KEY, True), ('A' * 16, True), ('A' * 256, True), ('A' * 15, False), ('A' * 257, False),
    ('A' * 16 + '\n', False), ('A' * 8 + ' ' + 'A' * 8, False), ('A' * 16 + '\t', False), ('A' * 16 + '"', False),
    ('A' * 16 + '$', False), ('\u00e4' * 16, False), (None, False), (12345678901234567890, False), ('', False),
])
def test_api_key_rule(key, ok):
    problem = x.api_key_problem(key)
    assert (problem is None) is ok, problem
    if not ok and isinstance(key, str) and key.strip():
        assert key.strip() not in problem


def test_every_check_of_an_api_key_is_the_one_rule():
    bad = 'A' * 16 + '\n'
    assert x.check_api_keys([KEY]) == [] and len(x.check_api_keys([bad])) == 1
    assert x.check_api_key('', 'v') == [] and x.check_api_key(KEY, 'v') == [] and len(x.check_api_key(bad, 'v')) == 1
    with pytest.raises(x.ExposureError):
        x.render_proxy_keys([KEY], bad)
    assert KEY not in '\n'.join(x.check_api_key(KEY + ' ', 'v'))
    flt = FILTERS['api_key_errors'][1]
    assert flt([KEY], 'ds4_api_keys') == [] and flt(None, 'ds4_api_keys')[0].startswith('ds4_api_keys is not set')
    assert 'repeats' in flt([KEY, KEY], 'ds4_api_keys')[0] and 'must be a list' in flt(KEY, 'ds4_api_keys')[0]
    assert flt('', 'api_proxy_upstream_api_key', single=True) == []
    assert flt('short', 'api_proxy_upstream_api_key', single=True)[0].startswith('api_proxy_upstream_api_key (length 5)')
    options = ri.options_by_name(ri.load_specs(REPO, yaml.safe_load))
    for name in ('vllm_service_api_key', 'api_proxy_upstream_api_key', 'router_verify_api_key'):
        assert ri.kind(name, options[name]) == 'api-key'
        assert ri.problems({name: KEY}, options) == [] and ri.problems({name: ''}, options) == []
        lines = ri.problems({name: 'short-key'}, options)
        assert len(lines) == 1 and '(secret, not shown)' in lines[0] and 'short-key' not in lines[0], lines


def test_no_role_or_plugin_spells_the_api_key_rule_itself():
    """The character set and length of a key are written once: module_utils/_security/api_exposure.py (_API_KEY_RE); the
    monitoring passwords' rule (printable, 16-256) is another rule."""
    spelled = []
    for top in ('roles', 'playbooks', 'plugins'):
        for root, _dirs, files in os.walk(os.path.join(REPO, top)):
            for f in files:
                if f.endswith(('.yml', '.yaml', '.py', '.j2')):
                    path = os.path.join(root, f)
                    with open(path, encoding='utf-8') as handle:
                        if '._~+/=-]{16,256}' in handle.read():
                            spelled.append(os.path.relpath(path, REPO))
    assert spelled == ['plugins/module_utils/_security/api_exposure.py']
