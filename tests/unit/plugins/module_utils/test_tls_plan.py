# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TLS on the fronts: the checks of the user's certificate, key and CA (before any host changes), the names a host's
fronts need, expiry, and the TLS lines of the proxy's nginx configuration. Real certificates, made here with
cryptography (the controller's package)."""

import datetime
import hashlib
import ipaddress

import pytest

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ansible_collections.dgxspark.ds4.plugins.module_utils._security import api_exposure as x
from ansible_collections.dgxspark.ds4.plugins.module_utils._security import tls_plan as t

NOW = datetime.datetime(2026, 11, 26, tzinfo=datetime.timezone.utc)
NAMES = ['spark1', '192.0.2.10', '192.168.100.10', '127.0.0.1', 'localhost']


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _cert(subject, key, issuer_name, issuer_key, sans=(), ca=False, days=(-1, 365)):
    b = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
         .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name)]))
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(NOW + datetime.timedelta(days=days[0])).not_valid_after(NOW + datetime.timedelta(days=days[1]))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address(n)) if t.is_ip(n) else x509.DNSName(n) for n in sans]), critical=False)
    return b.sign(issuer_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()


@pytest.fixture(scope='module')
def pki():
    ca_key, other_key, leaf_key = _key(), _key(), _key()
    return {
        'ca': _cert('test CA', ca_key, 'test CA', ca_key, ca=True, days=(-1, 3650)),
        'other_ca': _cert('other CA', other_key, 'other CA', other_key, ca=True, days=(-1, 3650)),
        'leaf': _cert('spark1', leaf_key, 'test CA', ca_key, sans=NAMES),
        'leaf_key': _pem_key(leaf_key),
        'short': _cert('spark1', leaf_key, 'test CA', ca_key, sans=NAMES, days=(-300, 10)),
        'expired': _cert('spark1', leaf_key, 'test CA', ca_key, sans=NAMES, days=(-300, -2)),
        'few_names': _cert('spark1', leaf_key, 'test CA', ca_key, sans=['spark1']),
        # same subject as the test CA's issuer name, signed by another key: the chain check must verify signatures
        'forged': _cert('spark1', leaf_key, 'test CA', other_key, sans=NAMES),
        'other_key': _pem_key(_key()),
    }


def plan(**inputs):
    return t.plan_tls(inputs, list(NAMES), now=int(NOW.timestamp()))


def test_generated_by_default_names_every_front_address(tmp_path):
    p, errors, warnings = plan(ds4_tls_ca_dir=str(tmp_path))
    assert errors == [] and warnings == []
    assert p['enabled'] and p['scheme'] == 'https' and p['source'] == 'generated' and p['ca_dir'] == str(tmp_path)
    assert p['subject_alt_name'] == ['DNS:spark1', 'IP:192.0.2.10', 'IP:192.168.100.10', 'IP:127.0.0.1', 'DNS:localhost']
    assert (p['cert_path'], p['key_path'], p['ca_path']) == (
        '/etc/dgxspark-ds4/tls/front.crt', '/etc/dgxspark-ds4/tls/front.key', '/etc/dgxspark-ds4/tls/ca.crt')


def test_tls_off_is_explicit_and_plain():
    p, errors, warnings = plan(ds4_tls=False, ds4_tls_certificate='/x.crt')
    assert errors == [] and p['enabled'] is False and p['scheme'] == 'http'
    assert warnings == ['ds4_tls_certificate is set but ds4_tls is false: the fronts serve plain HTTP and ignore it']
    _p, errors, _w = plan(ds4_tls='sometimes')
    assert errors and errors[0].startswith("ds4_tls = 'sometimes': must be true or false. Fix:")


def test_user_certificate_key_and_ca_as_text_and_as_paths(pki, tmp_path):
    for cert, key, ca in ((pki['leaf'], pki['leaf_key'], pki['ca']), (None, None, None)):
        if cert is None:
            for name in ('leaf', 'leaf_key', 'ca'):
                (tmp_path / name).write_text(pki[name])
            cert, key, ca = str(tmp_path / 'leaf'), str(tmp_path / 'leaf_key'), str(tmp_path / 'ca')
        p, errors, warnings = plan(ds4_tls_certificate=cert, ds4_tls_private_key=key, ds4_tls_ca_certificate=ca)
        assert errors == [] and warnings == [], (errors, warnings)
        assert p['source'] == 'user' and p['ca_given'] and p['loopback_verifies']
        assert p['fingerprint_sha256'] == t.cert_info(pki['leaf'])['fingerprint_sha256']


def test_missing_files_named_with_variable_value_and_fix(pki):
    _p, errors, _w = plan(ds4_tls_certificate='/nowhere/front.crt', ds4_tls_private_key=pki['leaf_key'],
                          ds4_tls_ca_certificate='/nowhere/ca.crt')
    assert errors == [
        "ds4_tls_certificate = '/nowhere/front.crt': no such file on the controller. Fix: give the path of the PEM file "
        "(absolute, or relative to where ansible-playbook runs), or the PEM text itself (vault it for a key)",
        "ds4_tls_ca_certificate = '/nowhere/ca.crt': no such file on the controller. Fix: give the path of the PEM file "
        "(absolute, or relative to where ansible-playbook runs), or the PEM text itself (vault it for a key)"]


def test_a_key_of_another_certificate_is_refused_without_showing_it(pki):
    _p, errors, _w = plan(ds4_tls_certificate=pki['leaf'], ds4_tls_private_key=pki['other_key'])
    assert len(errors) == 1
    assert errors[0].startswith('ds4_tls_private_key does not match ds4_tls_certificate (the PEM text of '
                                'ds4_tls_certificate, subject CN=spark1)')
    assert 'PRIVATE KEY' not in errors[0] and pki['other_key'].splitlines()[1] not in errors[0]


def test_a_key_in_another_format_is_never_shown_and_pkcs12_bag_attributes_are_skipped(pki):
    """Issue 46: `openssl pkcs12 -nodes` output starts with "Bag Attributes"; it used to be taken for a path and printed
    whole in the refusal. Now the PEM block in it is used, and a key in no PEM form is refused without being shown."""
    bag = 'Bag Attributes\n    localKeyID: 01 02 03\nKey Attributes: <No Attributes>\n' + pki['leaf_key']
    p, errors, _w = plan(ds4_tls_certificate=pki['leaf'], ds4_tls_private_key=bag, ds4_tls_ca_certificate=pki['ca'])
    assert errors == [] and p['source'] == 'user'
    body = ''.join(pki['leaf_key'].splitlines()[1:-1])
    for not_pem in (body, 'PRIVATE KEY ' + body[:40], body[:60] + '\n' + body[60:120]):
        _p, errors, _w = plan(ds4_tls_certificate=pki['leaf'], ds4_tls_private_key=not_pem)
        assert len(errors) == 1 and errors[0].startswith(('ds4_tls_private_key: neither a path nor PEM text (the value is not '
                                                          'shown', 'ds4_tls_private_key = (not shown): no such file')), errors
        assert body[:20] not in errors[0] and body[60:80] not in errors[0]


def test_a_ca_that_did_not_issue_the_certificate_is_refused(pki):
    for ca in (pki['other_ca'], pki['ca']):
        cert = pki['leaf'] if ca == pki['other_ca'] else pki['forged']
        _p, errors, _w = plan(ds4_tls_certificate=cert, ds4_tls_private_key=pki['leaf_key'], ds4_tls_ca_certificate=ca)
        assert len(errors) == 1 and errors[0].startswith(
            'ds4_tls_ca_certificate (the PEM text of ds4_tls_ca_certificate) does not verify ds4_tls_certificate'), errors
        assert errors[0].endswith('Fix: give the CA chain that issued the certificate')


def test_half_given_unparsable_and_expired_certificates_refused(pki):
    _p, errors, _w = plan(ds4_tls_certificate=pki['leaf'])
    assert errors == ['ds4_tls_certificate is set but ds4_tls_private_key is not: a front needs both. Fix: set '
                      'ds4_tls_private_key (vault the key), or remove ds4_tls_certificate (the collection then makes '
                      'its own CA and certificates)']
    _p, errors, _w = plan(ds4_tls_certificate=pki['leaf_key'], ds4_tls_private_key=pki['leaf_key'])
    assert errors and 'holds no PEM certificate' in errors[0]
    _p, errors, _w = plan(ds4_tls_certificate=pki['leaf'], ds4_tls_private_key='-----BEGIN PRIVATE KEY-----\nAAAA\n')
    assert errors and errors[0].startswith('ds4_tls_private_key: not an unencrypted PEM private key')
    _p, errors, _w = plan(ds4_tls_certificate=pki['expired'], ds4_tls_private_key=pki['leaf_key'])
    assert errors == ['ds4_tls_certificate (the PEM text of ds4_tls_certificate) expired 2 day(s) ago. Fix: renew it']
    _p, errors, _w = plan(ds4_tls_ca_certificate=pki['ca'])
    assert errors and errors[0].startswith('ds4_tls_ca_certificate is set without ds4_tls_certificate')


def test_warnings_for_names_not_covered_and_a_near_expiry(pki):
    p, errors, warnings = plan(ds4_tls_certificate=pki['few_names'], ds4_tls_private_key=pki['leaf_key'])
    assert errors == [] and not p['loopback_verifies'] and p['ca_path'] == t.SYSTEM_CA_BUNDLE
    assert warnings == ['ds4_tls_certificate (the PEM text of ds4_tls_certificate) does not cover 192.0.2.10, '
                        '192.168.100.10, 127.0.0.1, localhost (its names: spark1): a client using those names cannot '
                        'verify it. Fix: reissue it with those names, or use only the covered ones']
    _p, errors, warnings = plan(ds4_tls_certificate=pki['short'], ds4_tls_private_key=pki['leaf_key'])
    assert errors == [] and warnings == [
        'ds4_tls_certificate (the PEM text of ds4_tls_certificate) expires in 10 day(s): renew it (the collection '
        'renews only the certificates it makes)']


@pytest.mark.parametrize('inputs, start', [
    ({'ds4_tls_renew_days': 0}, 'ds4_tls_renew_days = 0: must be a whole number of days, 1-3650.'),
    ({'ds4_tls_validity_days': 'long'}, "ds4_tls_validity_days = 'long': must be a whole number of days, 2-3650."),
    ({'ds4_tls_renew_days': 60, 'ds4_tls_validity_days': 30}, 'ds4_tls_renew_days = 60 is not below ds4_tls_validity_days'),
    ({'ds4_tls_extra_names': 'api.example'}, "ds4_tls_extra_names = 'api.example': must be a list"),
    ({'ds4_tls_extra_names': ['bad name']}, "ds4_tls_extra_names[0] = 'bad name': not a DNS name or an IP address."),
    ({'ds4_tls_ca_dir': 'relative/dir'}, "ds4_tls_ca_dir = 'relative/dir': must be an absolute directory on the controller"),
    ({'ds4_tls_new_ca': 'maybe'}, "ds4_tls_new_ca = 'maybe': must be true or false. Fix: remove it"),
])
def test_bad_numbers_names_and_directories_refused(inputs, start):
    _p, errors, _w = plan(**inputs)
    assert len(errors) == 1 and errors[0].startswith(start), errors


def test_extra_names_join_the_certificate(tmp_path):
    p, errors, _w = plan(ds4_tls_ca_dir=str(tmp_path), ds4_tls_extra_names=['api.example.internal', '198.51.100.7'])
    assert errors == [] and p['subject_alt_name'][-2:] == ['DNS:api.example.internal', 'IP:198.51.100.7']


def test_front_names_of_a_head_and_a_router_host_with_a_vip():
    pair = {'head': 'spark1', 'api_host': '192.0.2.10'}
    router = {'enabled': True, 'hosts': ['spark1', 'spark3'], 'addresses': ['192.0.2.10', '192.0.2.12'],
              'vip': '192.0.2.100/24'}
    hv = {'ansible_host': '192.0.2.10', 'ds4_fabric_ip': '192.168.100.10'}
    assert t.front_names('spark1', hv, pair, router) == ['spark1', '192.0.2.10', '192.168.100.10', '127.0.0.1', 'localhost',
                                                         '192.0.2.100']
    worker = t.front_names('spark2', {'ansible_host': '192.0.2.11', 'ds4_fabric_ip': '192.168.100.11'}, pair, router)
    assert worker == ['spark2', '192.0.2.11', '192.168.100.11', '127.0.0.1', 'localhost']
    assert t.front_names('spark3', {'ansible_host': 'spark3.lan'}, None, router) == [
        'spark3', 'spark3.lan', '127.0.0.1', 'localhost', '192.0.2.12', '192.0.2.100']


def test_cover_rules():
    assert t.covers(['*.example.internal', '10.0.0.1'], 'api.example.internal')
    assert not t.covers(['*.example.internal'], 'a.b.example.internal')
    assert t.covers(['10.0.0.1'], '10.0.0.1') and not t.covers(['10.0.0.1'], '10.0.0.2')
    assert not t.covers(['spark1'], '127.0.0.1')


def test_cert_info_expiry_and_fingerprint(pki):
    info = t.cert_info(pki['short'], now=int(NOW.timestamp()), renew_days=30)
    assert info['days_left'] == 10 and info['renew'] and not info['expired']
    assert info['not_after_iso'] == '2026-12-06T00:00:00Z' and info['sans'][0] == 'spark1'
    assert len(info['fingerprint_sha256']) == 64 and info['fingerprint_sha256'] == t.pem_fingerprint(pki['short'])
    assert t.cert_info(pki['leaf'], now=int(NOW.timestamp()), renew_days=30)['renew'] is False
    assert t.expiry(100, 100 + 86400, 30) == {'days_left': -1, 'renew': True, 'expired': True}
    with pytest.raises(ValueError):
        t.cert_info(pki['leaf_key'])
    assert t.read_pem('ds4_tls_certificate', pki['leaf']) == pki['leaf'].strip() + '\n'
    with pytest.raises(ValueError, match='ds4_tls_certificate = .*/missing.crt.: no such file'):
        t.read_pem('ds4_tls_certificate', '/missing.crt')


def test_proxy_conf_tls_only_with_fingerprint_and_refusals():
    conf = x.render_proxy_conf(dict(
        listen=['0.0.0.0', '[::]'], public_port=8000, upstream_port=8001, endpoints=[dict(e) for e in x.DEFAULT_ENDPOINTS],
        keys_path='/etc/dgxspark-ds4/proxy/keys.conf',
        tls={'cert_path': '/etc/dgxspark-ds4/tls/front.crt', 'key_path': '/etc/dgxspark-ds4/tls/front.key',
             'fingerprint': 'ab' * 32}))
    assert '        listen 0.0.0.0:8000 ssl;\n        listen [::]:8000 ssl;\n' in conf
    assert 'ssl_certificate /etc/dgxspark-ds4/tls/front.crt;' in conf and 'ssl_certificate_key /etc/dgxspark-ds4/tls/front.key;' in conf
    assert 'ssl_protocols TLSv1.2 TLSv1.3;' in conf and ('sha256 ' + 'ab' * 32) in conf
    plain = x.render_proxy_conf(dict(listen=['0.0.0.0'], public_port=8000, upstream_port=8001, keys_path='/k',
                                     endpoints=[dict(e) for e in x.DEFAULT_ENDPOINTS]))
    assert 'ssl' not in plain and 'listen 0.0.0.0:8000;' in plain
    with pytest.raises(x.ExposureError, match=r"tls.key_path = '../front.key'"):
        x.render_proxy_conf(dict(listen=['0.0.0.0'], public_port=8000, upstream_port=8001, keys_path='/k',
                                 endpoints=[dict(e) for e in x.DEFAULT_ENDPOINTS],
                                 tls={'cert_path': '/c.crt', 'key_path': '../front.key'}))


def test_a_new_ca_is_a_choice_said_once_and_published(tmp_path):
    p, errors, warnings = plan(ds4_tls_ca_dir=str(tmp_path))
    assert errors == [] and warnings == [] and p['new_ca'] is False
    p, errors, warnings = plan(ds4_tls_ca_dir=str(tmp_path), ds4_tls_new_ca=True)
    assert errors == [] and p['new_ca'] is True
    assert len(warnings) == 1 and warnings[0].startswith('ds4_tls_new_ca is true: the fronts get the CA in %s' % tmp_path)
    assert 'Remove it after this run' in warnings[0]


SITE_CA_PATH = '/etc/dgxspark-ds4/tls/ca.crt'


def _observed(pem):
    """dgxspark.ds4.file_state's value for a CA file the deploy wrote (root, 0644)."""
    return 'sha1:%s:644:0:0' % hashlib.sha1(pem.encode()).hexdigest()


def test_one_ca_per_site_a_host_that_trusts_the_controllers_ca_or_none_goes_on(pki, tmp_path):
    (tmp_path / 'ca.crt').write_text(pki['ca'])
    assert t.site_ca_problem(str(tmp_path), 'spark1', SITE_CA_PATH, _observed(pki['ca'])) == ''
    assert t.site_ca_problem(str(tmp_path), 'spark1', SITE_CA_PATH, 'absent') == ''
    # a first deploy: neither the controller nor the host has a CA yet
    assert t.site_ca_problem(str(tmp_path / 'none'), 'spark1', SITE_CA_PATH, 'absent') == ''


def test_one_ca_per_site_a_controller_without_it_is_refused_naming_the_directory_to_copy(pki, tmp_path):
    empty = tmp_path / 'empty'
    problem = t.site_ca_problem(str(empty), 'spark1', SITE_CA_PATH, _observed(pki['ca']))
    assert problem.startswith('One CA per site: spark1 already trusts a CA the collection made (%s, file SHA-1 %s), '
                              "but this controller's ds4_tls_ca_dir %s holds no CA (no ca.crt there)."
                              % (SITE_CA_PATH, hashlib.sha1(pki['ca'].encode()).hexdigest(), empty)), problem
    assert 'would re-sign every front with a new CA' in problem and 'Nothing was changed on any host' in problem
    assert 'Fix: copy that directory (ca.key, ca.crt, hosts/) from the controller that deployed this site to %s' % empty in problem
    assert 'run once with -e ds4_tls_new_ca=true and give every client the new ca.crt' in problem
    assert '-----BEGIN' not in problem


def test_one_ca_per_site_another_ca_is_refused_and_a_replacement_on_purpose_goes_on(pki, tmp_path):
    (tmp_path / 'ca.crt').write_text(pki['other_ca'])
    problem = t.site_ca_problem(str(tmp_path), 'spark3', SITE_CA_PATH, _observed(pki['ca']))
    assert ("ds4_tls_ca_dir %s holds another CA (its ca.crt has SHA-1 %s)" % (tmp_path, hashlib.sha1(pki['other_ca'].encode()).hexdigest())
            in problem), problem
    assert problem.startswith('One CA per site: spark3 already trusts') and 'would re-sign every front with that CA' in problem
    assert t.site_ca_problem(str(tmp_path), 'spark3', SITE_CA_PATH, _observed(pki['ca']), new_ca=True) == ''
    # the same bytes are the same CA; a host's file that is not the controller's by one byte is another
    assert t.site_ca_problem(str(tmp_path), 'spark3', SITE_CA_PATH, _observed(pki['other_ca'])) == ''
    assert t.site_ca_problem(str(tmp_path), 'spark3', SITE_CA_PATH, _observed(pki['other_ca'] + '\n')) != ''
