# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""tls_plan.generated_current: when the deploy may skip the controller's community.crypto tasks (the material is as
they made it), and every way it is not (each then runs the tasks, which make or repair it)."""

import datetime
import ipaddress

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ansible_collections.dgxspark.ds4.plugins.module_utils._security import tls_plan as t

NOW = datetime.datetime(2026, 12, 1, tzinfo=datetime.timezone.utc)
SANS = ['DNS:spark1', 'DNS:ds4-replicas-spark1', 'IP:10.77.5.11', 'IP:127.0.0.1', 'DNS:localhost']


def _write_key(path, key):
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _sign(subject, key, issuer, issuer_key, ca=False, sans=(), eku=True, days=365):
    b = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer)).public_key(key.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(NOW - datetime.timedelta(days=1))
         .not_valid_after(NOW + datetime.timedelta(days=days))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True))
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address(s[3:])) if s.startswith('IP:') else x509.DNSName(s[4:]) for s in sans]),
            critical=False)
    if eku:
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    return b.sign(issuer_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def _pki(tmp_path, **leaf):
    """A CA directory as the deploy's tasks leave it: ca.key, ca.crt, hosts/spark1.key, hosts/spark1.crt."""
    (tmp_path / 'hosts').mkdir()
    ca_key, host_key = ec.generate_private_key(ec.SECP384R1()), ec.generate_private_key(ec.SECP256R1())
    _write_key(tmp_path / 'ca.key', ca_key)
    (tmp_path / 'ca.crt').write_bytes(_sign('dgxspark.ds4 fronts CA', ca_key, 'dgxspark.ds4 fronts CA', ca_key, ca=True))
    _write_key(tmp_path / 'hosts' / 'spark1.key', host_key)
    args = dict(sans=SANS)
    args.update(leaf)
    signer = args.pop('signer', ca_key)
    (tmp_path / 'hosts' / 'spark1.crt').write_bytes(_sign('spark1', host_key, 'dgxspark.ds4 fronts CA', signer, **args))
    return str(tmp_path), str(tmp_path / 'hosts' / 'spark1.key'), str(tmp_path / 'hosts' / 'spark1.crt')


def _current(paths, sans=None, renew_days=30, now=NOW):
    ca_dir, key, cert = paths
    return t.generated_current(ca_dir, key, cert, SANS if sans is None else sans, renew_days, int(now.timestamp()))


def test_material_as_made_is_current_for_the_ca_and_the_host(tmp_path):
    paths = _pki(tmp_path)
    assert t.generated_current(paths[0]) == (True, 'as made')
    # the same names in another order and spelling of the same addresses
    assert _current(paths, sans=list(reversed(SANS))) == (True, 'as made')


def test_nothing_there_yet_is_not_current(tmp_path):
    assert t.generated_current(str(tmp_path))[0] is False
    paths = _pki(tmp_path)
    (tmp_path / 'hosts' / 'spark1.crt').unlink()
    assert _current(paths) == (False, 'no key and certificate of this host yet')


def test_a_name_more_or_less_is_not_current(tmp_path):
    paths = _pki(tmp_path)
    current, why = _current(paths, sans=SANS + ['IP:10.77.5.100'])
    assert current is False and '10.77.5.100' in why
    assert _current(paths, sans=SANS[:-1])[0] is False


def test_due_for_renewal_is_not_current(tmp_path):
    paths = _pki(tmp_path, days=20)
    assert _current(paths, renew_days=30) == (False, 'the certificate expires within 30 days')
    assert _current(paths, renew_days=10) == (True, 'as made')


def test_a_certificate_of_another_ca_key_or_usage_is_not_current(tmp_path):
    for sub in ('a', 'b', 'c'):
        (tmp_path / sub).mkdir()
    forged = _pki(tmp_path / 'a', signer=ec.generate_private_key(ec.SECP384R1()))
    assert _current(forged) == (False, 'unreadable or not as made (InvalidSignature)')
    assert _current(_pki(tmp_path / 'b', eku=False))[0] is False
    paths = _pki(tmp_path / 'c')
    _write_key(tmp_path / 'c' / 'hosts' / 'spark1.key', ec.generate_private_key(ec.SECP256R1()))
    assert _current(paths) == (False, 'the certificate is not of the host key')


def test_a_ca_certificate_of_another_key_or_garbage_is_not_current(tmp_path):
    paths = _pki(tmp_path)
    _write_key(tmp_path / 'ca.key', ec.generate_private_key(ec.SECP384R1()))
    assert t.generated_current(paths[0]) == (False, 'the CA certificate is not of the CA key')
    (tmp_path / 'ca.crt').write_text('not a certificate')
    assert t.generated_current(paths[0])[0] is False
