# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""TLS on the client-facing fronts (the head's API proxy, the router's front, the VIP) and on router -> head.

Pure logic, no Ansible imports. The certificate checks need the ``cryptography`` package, which the controller has
(ansible-core depends on it); the config action plugin calls ``plan_tls`` there, before any host is contacted.

Inputs (one host's variables; collection-wide ``ds4_tls*``, roles/config/meta/argument_specs.yml):
  ds4_tls                 true (default) / false: TLS on every front; false is the explicit way to plain HTTP.
  ds4_tls_certificate     the user's certificate (PEM text, e.g. vaulted, or a path on the controller);
  ds4_tls_private_key     its key (PEM text or controller path); both or neither;
  ds4_tls_ca_certificate  the CA chain that issued it (PEM text or controller path; optional); clients and the
                          router trust it;
  ds4_tls_ca_dir          without a user certificate: the controller directory of the CA the collection makes
                          (0700; the CA key and each host's key 0600);
  ds4_tls_renew_days      a certificate the collection made is renewed when it expires within this many days;
  ds4_tls_validity_days   the validity of a certificate the collection makes;
  ds4_tls_extra_names     more names/addresses for every front's certificate (DNS names clients use);
  ds4_tls_new_ca          true, for one run: replace the site's CA on purpose (site_ca_problem refuses otherwise).

Entry points:
  plan_tls(inputs, names) -> (plan, errors, warnings)   the non-secret plan published in ds4_effective['tls']
  front_names(host, hv, eff_api, pair, router) -> [names]  the SANs one host's fronts need
  cert_info(pem, now, renew_days) -> {not_after, not_after_iso, sans, fingerprint_sha256, issuer, subject, days_left,
                                      renew, expired}
  pem_fingerprint(pem) -> sha256 of the first certificate's DER (standard library only)
  expiry(not_after_epoch, now, renew_days) -> {days_left, renew, expired}
  read_pem(var, value) -> PEM text of a value given as text or as a controller path (ValueError naming var)
  site_ca_problem(ca_dir, host, ca_path, observed, new_ca) -> '' or the refusal: one CA per site
"""

from __future__ import annotations


import base64
import datetime
import hashlib
import ipaddress
import os
import re
from typing import Any

try:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization
    HAS_CRYPTOGRAPHY = True
except ImportError:  # pragma: no cover - the controller has it (ansible-core depends on it)
    HAS_CRYPTOGRAPHY = False

DEFAULTS: dict[str, Any] = {
    'ds4_tls': True,
    'ds4_tls_certificate': None,
    'ds4_tls_private_key': None,
    'ds4_tls_ca_certificate': None,
    'ds4_tls_ca_dir': '~/.dgxspark-ds4/tls',
    'ds4_tls_renew_days': 30,
    'ds4_tls_validity_days': 365,
    'ds4_tls_extra_names': [],
    'ds4_tls_new_ca': False,
}
# Where every host keeps its front's material (the API proxy and the router front read the same files).
HOST_DIR = '/etc/dgxspark-ds4/tls'
HOST_FILES = {'cert_path': HOST_DIR + '/front.crt', 'key_path': HOST_DIR + '/front.key', 'ca_path': HOST_DIR + '/ca.crt'}
# A user certificate without ds4_tls_ca_certificate (issued by a public CA): the router trusts the system's bundle.
SYSTEM_CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt'
PEM_CERT_RE = re.compile(r'-----BEGIN CERTIFICATE-----\s*([A-Za-z0-9+/=\s]+?)-----END CERTIFICATE-----')
_DNS_RE = re.compile(r'^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$')


def is_ip(text: Any) -> bool:
    """True for an IPv4 or IPv6 address (the one test of it: TLS names here, inventory addresses in pairs)."""
    try:
        ipaddress.ip_address(str(text))
        return True
    except ValueError:
        return False


def tls_enabled(value: Any) -> bool | None:
    """ds4_tls as a bool (None: not a boolean; plan_tls names it)."""
    return _bool(value)


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ('true', 'yes', 'on', '1', 'false', 'no', 'off', '0'):
        return value.strip().lower() in ('true', 'yes', 'on', '1')
    return None


def load_pem(var: str, value: Any, errors: list[str]) -> tuple[str | None, str | None]:
    """(text, where) of a PEM input given as text or as a path on the controller; (None, None) when unset."""
    if value in (None, ''):
        return None, None
    if not isinstance(value, str):
        errors.append('%s: must be PEM text or a path on the controller, got a %s. Fix: e.g. %s: "{{ lookup(\'file\', '
                      '\'tls/front.crt\') }}" or a vaulted PEM block' % (var, type(value).__name__, var))
        return None, None
    text = value.strip()
    if '-----BEGIN' in text:
        # PEM text; what comes before the first block (openssl pkcs12 -nodes writes "Bag Attributes" lines) is not PEM
        return text[text.index('-----BEGIN'):] + '\n', 'the PEM text of %s' % var
    if '\n' in text or len(text) > 1024 or 'PRIVATE' in text.upper() or ' ' in text:
        # text that is neither a path nor PEM may be a secret (a key pasted in another format): never shown
        errors.append('%s: neither a path nor PEM text (the value is not shown: it may hold a key). Fix: give the path of '
                      'the PEM file on the controller, or the PEM text from its -----BEGIN line (vault it for a key)' % var)
        return None, None
    path = os.path.expanduser(text)
    if not os.path.isfile(path):
        # a key's value is never shown, even as a path: a key pasted without its -----BEGIN line looks like one
        shown = '(not shown)' if 'key' in var else repr(text)
        errors.append('%s = %s: no such file on the controller. Fix: give the path of the PEM file (absolute, or relative '
                      'to where ansible-playbook runs), or the PEM text itself (vault it for a key)' % (var, shown))
        return None, None
    try:
        with open(path, 'r') as f:
            content = f.read()
    except (IOError, OSError, UnicodeDecodeError) as exc:
        errors.append('%s = %r: cannot be read on the controller (%s). Fix: make it readable by the user running '
                      'ansible-playbook' % (var, text, exc))
        return None, None
    return content, '%s (%s)' % (var, text)


def read_pem(var: str, value: Any) -> str:
    """PEM text of a ds4_tls_* value (text or controller path); ValueError naming the variable and the fix."""
    errors: list[str] = []
    text, _where = load_pem(var, value, errors)
    if errors or text is None:
        raise ValueError(errors[0] if errors else '%s is not set' % var)
    return text


def pem_fingerprint(pem: str | None) -> str | None:
    """SHA-256 of the first certificate's DER, hex (standard library only: the renderers use it on the hosts)."""
    m = PEM_CERT_RE.search(pem or '')
    if not m:
        return None
    der = base64.b64decode(''.join(m.group(1).split()))
    return hashlib.sha256(der).hexdigest()


def _certs(pem: str | None) -> list[x509.Certificate]:
    return [x509.load_pem_x509_certificate(('-----BEGIN CERTIFICATE-----\n%s-----END CERTIFICATE-----\n'
                                            % m.group(1).strip() + '\n').encode('ascii'))
            for m in PEM_CERT_RE.finditer(pem or '')]


def _not_after(cert: x509.Certificate) -> int:
    when = getattr(cert, 'not_valid_after_utc', None)
    if when is None:  # pragma: no cover - cryptography < 42
        when = cert.not_valid_after.replace(tzinfo=datetime.timezone.utc)
    return int(when.timestamp())


def _sans(cert: x509.Certificate) -> list[str]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(v) for v in ext.get_values_for_type(x509.DNSName)] + \
        [str(v) for v in ext.get_values_for_type(x509.IPAddress)]


def cert_info(pem: str, now: int | None = None, renew_days: int = 30) -> dict[str, Any]:
    """The first certificate of a PEM text: not_after (epoch seconds and ISO 8601), sans, fingerprint_sha256,
    subject, issuer, and expiry() at now (default: the current time) with renew_days."""
    certs = _certs(pem)
    if not certs:
        raise ValueError('no certificate in the PEM text')
    cert = certs[0]
    not_after = _not_after(cert)
    info: dict[str, Any] = {'not_after': not_after, 'sans': _sans(cert), 'fingerprint_sha256': pem_fingerprint(pem),
                            'not_after_iso': datetime.datetime.fromtimestamp(not_after, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'),
                            'subject': cert.subject.rfc4514_string(), 'issuer': cert.issuer.rfc4514_string()}
    info.update(expiry(not_after, _now() if now is None else now, renew_days))
    return info


def _now() -> int:
    return int(datetime.datetime.now(datetime.timezone.utc).timestamp())


def covers(sans: list[str], name: str) -> bool:
    """Whether a certificate's SANs cover a name clients use (IP exactly, DNS exactly or one-label wildcard)."""
    if is_ip(name):
        return any(is_ip(s) and ipaddress.ip_address(s) == ipaddress.ip_address(name) for s in sans)
    low = name.lower()
    for s in sans:
        s = s.lower()
        if s == low or (s.startswith('*.') and '.' in low and low.split('.', 1)[1] == s[2:]):
            return True
    return False


def expiry(not_after: int, now: float, renew_days: float) -> dict[str, Any]:
    """{days_left, renew (within renew_days), expired} of a certificate expiring at not_after (epoch seconds)."""
    left = (not_after - now) / 86400.0
    return {'days_left': int(left // 1), 'renew': left < renew_days, 'expired': left <= 0}


def front_names(host: str, hv: dict[str, Any], pair: dict[str, Any] | None = None,
                router: dict[str, Any] | None = None) -> list[str]:
    """The names clients (and the router) use for this host's fronts: the inventory name, its ansible_host, its
    fabric address, loopback (the roles' own checks), the router address and the VIP on a router host."""
    names = [host, hv.get('ansible_host'), hv.get('ds4_fabric_ip'), '127.0.0.1', 'localhost']
    if pair and pair.get('head') == host:
        names.append(pair.get('api_host'))
    router = router or {}
    if router.get('enabled') and host in (router.get('hosts') or []):
        names.append((router.get('addresses') or [None] * len(router['hosts']))[router['hosts'].index(host)])
        if router.get('vip'):
            names.append(str(router['vip']).split('/', 1)[0])
    out: list[str] = []
    for n in names:
        if n not in (None, '') and str(n) not in out:
            out.append(str(n))
    return out


def subject_alt_name(names: list[str]) -> list[str]:
    """community.crypto's subject_alt_name entries (IP:... / DNS:...) for a certificate the collection makes."""
    return [('IP:%s' if is_ip(n) else 'DNS:%s') % n for n in names]


def _check_number(var: str, value: Any, low: int, high: int, errors: list[str]) -> bool:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        errors.append('%s = %r: must be a whole number of days, %d-%d. Fix: remove it for the default (%r)'
                      % (var, value, low, high, DEFAULTS[var]))
        return False
    return True


def plan_tls(inputs: dict[str, Any], names: list[str], now: int | None = None) -> tuple[dict[str, Any], list[str], list[str]]:
    """(plan, errors, warnings) for one host. inputs: the host's ds4_tls* variables (missing = DEFAULTS);
    names: front_names() of this host (the SANs its fronts need). No message quotes a key.

    plan (published in ds4_effective['tls'], no secret): enabled, scheme, source (user | generated), names,
    cert_path / key_path / ca_path on the host, ca_dir (generated), renew_days, validity_days, and for a user
    certificate its not_after and fingerprint."""
    v = dict(DEFAULTS)
    v.update(dict((k, inputs[k]) for k in DEFAULTS if k in inputs and inputs[k] is not None))
    errors: list[str] = []
    warnings: list[str] = []
    enabled = _bool(v['ds4_tls'])
    if enabled is None:
        errors.append('ds4_tls = %r: must be true or false. Fix: remove it (TLS on every front) or set false to serve '
                      'plain HTTP, which sends API keys and prompts in clear' % (v['ds4_tls'],))
        enabled = True
    plan: dict[str, Any] = dict(HOST_FILES, dir=HOST_DIR, enabled=enabled, scheme='https' if enabled else 'http', source=None, names=list(names),
                                ca_dir=None, renew_days=v['ds4_tls_renew_days'], validity_days=v['ds4_tls_validity_days'],
                                loopback_verifies=True, ca_given=False)
    if not enabled:
        for var in ('ds4_tls_certificate', 'ds4_tls_private_key', 'ds4_tls_ca_certificate'):
            if v[var] not in (None, ''):
                warnings.append('%s is set but ds4_tls is false: the fronts serve plain HTTP and ignore it' % var)
        return plan, errors, warnings
    renew_ok = _check_number('ds4_tls_renew_days', v['ds4_tls_renew_days'], 1, 3650, errors)
    valid_ok = _check_number('ds4_tls_validity_days', v['ds4_tls_validity_days'], 2, 3650, errors)
    if renew_ok and valid_ok and v['ds4_tls_renew_days'] >= v['ds4_tls_validity_days']:
        errors.append('ds4_tls_renew_days = %d is not below ds4_tls_validity_days = %d: every run would renew. Fix: '
                      'e.g. validity 365, renew 30' % (v['ds4_tls_renew_days'], v['ds4_tls_validity_days']))
    extra = v['ds4_tls_extra_names']
    if isinstance(extra, str) or not isinstance(extra, (list, tuple)):
        errors.append('ds4_tls_extra_names = %r: must be a list of DNS names or IP addresses. Fix: e.g. '
                      '[api.example.internal]' % (extra,))
    else:
        for i, n in enumerate(extra):
            if not (isinstance(n, str) and (is_ip(n) or _DNS_RE.match(n))):
                errors.append('ds4_tls_extra_names[%d] = %r: not a DNS name or an IP address. Fix: e.g. '
                              'api.example.internal or 192.0.2.10' % (i, n))
            elif n not in plan['names']:
                plan['names'].append(n)
    if not HAS_CRYPTOGRAPHY:  # pragma: no cover
        errors.append('ds4_tls: the controller lacks the Python package cryptography (ansible-core depends on it). '
                      'Fix: pip install cryptography in the controller\'s environment')
        return plan, errors, warnings
    given = [var for var in ('ds4_tls_certificate', 'ds4_tls_private_key') if v[var] not in (None, '')]
    if not given:
        if v['ds4_tls_ca_certificate'] not in (None, ''):
            errors.append('ds4_tls_ca_certificate is set without ds4_tls_certificate and ds4_tls_private_key. Fix: give '
                          'the certificate and key it issued, or remove it (the collection then makes its own CA)')
        ca_dir = v['ds4_tls_ca_dir']
        if ca_dir in (None, '') or not isinstance(ca_dir, str) or not os.path.isabs(os.path.expanduser(ca_dir)):
            errors.append('ds4_tls_ca_dir = %r: must be an absolute directory on the controller (the collection\'s CA '
                          'for the fronts, its key 0600). Fix: e.g. ~/.dgxspark-ds4/tls, or give ds4_tls_certificate '
                          'and ds4_tls_private_key' % (ca_dir,))
        else:
            plan['ca_dir'] = os.path.expanduser(ca_dir)
        new_ca = _bool(v['ds4_tls_new_ca'])
        if new_ca is None:
            errors.append('ds4_tls_new_ca = %r: must be true or false. Fix: remove it (the site keeps its CA), or set '
                          'true for the one run that replaces it' % (v['ds4_tls_new_ca'],))
        elif new_ca:
            warnings.append('ds4_tls_new_ca is true: the fronts get the CA in %s even where they trust another one '
                            '(clients that trust the old ca.crt then fail verification: give them the new one). Remove it '
                            'after this run: it turns off the one-CA-per-site check' % plan['ca_dir'])
        plan['new_ca'] = bool(new_ca)
        plan['source'] = 'generated'
        plan['subject_alt_name'] = subject_alt_name(plan['names'])
        return plan, errors, warnings
    plan['source'] = 'user'
    if len(given) == 1:
        missing = 'ds4_tls_private_key' if given[0] == 'ds4_tls_certificate' else 'ds4_tls_certificate'
        errors.append('%s is set but %s is not: a front needs both. Fix: set %s (vault the key), or remove %s (the '
                      'collection then makes its own CA and certificates)' % (given[0], missing, missing, given[0]))
        return plan, errors, warnings
    _check_user_material(v, plan, errors, warnings, now)
    return plan, errors, warnings


def _check_user_material(v: dict[str, Any], plan: dict[str, Any], errors: list[str], warnings: list[str], now: int | None) -> None:
    cert_pem, cert_where = load_pem('ds4_tls_certificate', v['ds4_tls_certificate'], errors)
    key_pem, _key_where = load_pem('ds4_tls_private_key', v['ds4_tls_private_key'], errors)
    ca_pem, ca_where = load_pem('ds4_tls_ca_certificate', v['ds4_tls_ca_certificate'], errors)
    if cert_pem is None or key_pem is None:
        return
    try:
        certs = _certs(cert_pem)
    except ValueError as exc:
        errors.append('ds4_tls_certificate: %s does not parse as a PEM certificate (%s). Fix: give the PEM '
                      'certificate (-----BEGIN CERTIFICATE-----)' % (cert_where, exc))
        return
    if not certs:
        errors.append('ds4_tls_certificate: %s holds no PEM certificate (-----BEGIN CERTIFICATE-----). Fix: give the '
                      'certificate, not the key or a CSR' % cert_where)
        return
    cert = certs[0]
    try:
        key = serialization.load_pem_private_key(key_pem.encode('ascii', 'replace'), password=None)
    except (ValueError, TypeError) as exc:
        errors.append('ds4_tls_private_key: not an unencrypted PEM private key (%s; the value is not shown). Fix: give '
                      'the key without a passphrase (vault it instead: ansible-vault encrypt_string)'
                      % type(exc).__name__)
        return
    fmt = serialization.PublicFormat.SubjectPublicKeyInfo
    enc = serialization.Encoding.DER
    if key.public_key().public_bytes(enc, fmt) != cert.public_key().public_bytes(enc, fmt):
        errors.append('ds4_tls_private_key does not match ds4_tls_certificate (%s, subject %s): the key is another '
                      'certificate\'s. Fix: give the key this certificate was issued for'
                      % (cert_where, cert.subject.rfc4514_string()))
    info = cert_info(cert_pem)
    plan['not_after'] = info['not_after']
    plan['fingerprint_sha256'] = info['fingerprint_sha256']
    left = expiry(info['not_after'], _now() if now is None else now,
                  v['ds4_tls_renew_days'] if isinstance(v['ds4_tls_renew_days'], int) else 30)
    if left['expired']:
        errors.append('ds4_tls_certificate (%s) expired %d day(s) ago. Fix: renew it' % (cert_where, -left['days_left']))
    elif left['renew']:
        warnings.append('ds4_tls_certificate (%s) expires in %d day(s): renew it (the collection renews only the '
                        'certificates it makes)' % (cert_where, left['days_left']))
    if ca_pem is not None:
        _check_chain(cert, certs[1:], ca_pem, ca_where, cert_where, errors)
    plan['loopback_verifies'] = covers(info['sans'], '127.0.0.1')
    plan['ca_given'] = ca_pem is not None
    if ca_pem is None:
        plan['ca_path'] = SYSTEM_CA_BUNDLE
    missing = [n for n in plan['names'] if not covers(info['sans'], n)]
    if missing:
        warnings.append('ds4_tls_certificate (%s) does not cover %s (its names: %s): a client using those names '
                        'cannot verify it. Fix: reissue it with those names, or use only the covered ones'
                        % (cert_where, ', '.join(missing), ', '.join(info['sans']) or 'none'))


def _check_chain(cert: x509.Certificate, intermediates: list[x509.Certificate], ca_pem: str, ca_where: str | None,
                 cert_where: str | None, errors: list[str]) -> None:
    try:
        cas = _certs(ca_pem)
    except ValueError as exc:
        errors.append('ds4_tls_ca_certificate: %s does not parse as PEM certificates (%s)' % (ca_where, exc))
        return
    if not cas:
        errors.append('ds4_tls_ca_certificate: %s holds no PEM certificate. Fix: give the CA certificate(s) that '
                      'issued ds4_tls_certificate' % ca_where)
        return
    pool = intermediates + cas
    current, seen = cert, 0
    while seen <= len(pool):
        issuer = [c for c in pool if c.subject == current.issuer]
        verified = None
        for candidate in issuer:
            try:
                current.verify_directly_issued_by(candidate)
                verified = candidate
                break
            except (InvalidSignature, ValueError, TypeError):  # another key, or a key type that cannot sign this
                continue
        if verified is None:
            errors.append('ds4_tls_ca_certificate (%s) does not verify ds4_tls_certificate (%s): no certificate in it '
                          'signed %s (issuer %s). Fix: give the CA chain that issued the certificate'
                          % (ca_where, cert_where, current.subject.rfc4514_string(), current.issuer.rfc4514_string()))
            return
        if verified in cas:
            return
        current, seen = verified, seen + 1


def _public_der(key_or_cert: Any) -> bytes:
    return key_or_cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _read(path: str) -> bytes | None:
    try:
        with open(os.path.expanduser(path), 'rb') as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def generated_current(ca_dir: str, key_path: str | None = None, cert_path: str | None = None,
                      subject_alt_name: list[str] | None = None, renew_days: int = 30,
                      now: int | None = None) -> tuple[bool, str]:
    """Whether the deploy's controller-side TLS tasks (community.crypto: the CA's key and self-signed certificate, a
    host's key, signing request and certificate) would find nothing to do, read without running them: (current,
    why not). The CA: its key and certificate there, the certificate a CA of that key. With key_path/cert_path (a
    host's): both there, the certificate of that key, signed by that CA, naming exactly subject_alt_name
    (community.crypto's 'IP:...'/'DNS:...' entries), for serverAuth, and not within renew_days of its expiry. Anything
    unreadable or different is "not current": the tasks run and make or repair it as before."""
    ca_key_pem, ca_pem = _read(os.path.join(ca_dir, 'ca.key')), _read(os.path.join(ca_dir, 'ca.crt'))
    if ca_key_pem is None or ca_pem is None:
        return False, 'no CA key and certificate in %s yet' % ca_dir
    try:
        ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
        ca = x509.load_pem_x509_certificate(ca_pem)
        if _public_der(ca_key) != _public_der(ca):
            return False, 'the CA certificate is not of the CA key'
        if not ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
            return False, 'the CA certificate is not a CA'
        if key_path is None:
            return True, 'as made'
        # cert_path None (a key_path alone) raises TypeError: "unreadable or not as made" below
        key_pem, cert_pem = _read(key_path), _read(cert_path)  # type: ignore[arg-type]
        if key_pem is None or cert_pem is None:
            return False, 'no key and certificate of this host yet'
        key = serialization.load_pem_private_key(key_pem, password=None)
        cert = x509.load_pem_x509_certificate(cert_pem)
        if _public_der(key) != _public_der(cert):
            return False, 'the certificate is not of the host key'
        if cert.issuer != ca.subject:
            return False, 'the certificate was not issued by this CA'
        cert.verify_directly_issued_by(ca)
        wanted = sorted(str(ipaddress.ip_address(s[3:])) if s.startswith('IP:') else s[4:].lower()
                        for s in (subject_alt_name or []))
        have = sorted(str(ipaddress.ip_address(s)) if is_ip(s) else s.lower() for s in _sans(cert))
        if have != wanted:
            return False, 'the certificate names %s, the fronts need %s' % (have, wanted)
        usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        if x509.oid.ExtendedKeyUsageOID.SERVER_AUTH not in usage:
            return False, 'the certificate is not for serverAuth'
        if expiry(_not_after(cert), _now() if now is None else now, renew_days)['renew']:
            return False, 'the certificate expires within %s days' % renew_days
    except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound) as exc:
        return False, 'unreadable or not as made (%s)' % (exc.__class__.__name__,)
    return True, 'as made'


def site_ca_problem(ca_dir: str, host: str, ca_path: str, observed: Any, new_ca: bool = False) -> str:
    """One CA per site: '' when the deploy may go on with the controller's CA on `host`, else the refusal.

    observed: dgxspark.ds4.file_state's value of the host's CA file (`ca_path`, read at the start of the deploy,
    before any host changes): 'sha1:<hex>:<mode>:<uid>:<gid>' or 'absent'. A host that trusts no CA yet, or
    ds4_tls_new_ca (a replacement on purpose), goes on. Otherwise the controller's ca.crt in ca_dir must be that file,
    byte for byte (the deploy copies it so): a controller without it would make a new CA, one with another CA would
    re-sign every front with it, and every client that trusts the site's ca.crt would fail verification."""
    if new_ca or not isinstance(observed, str) or not observed.startswith('sha1:'):
        return ''
    host_sha1 = observed.split(':')[1]
    ca_pem = _read(os.path.join(ca_dir, 'ca.crt'))
    if ca_pem is not None and hashlib.sha1(ca_pem).hexdigest() == host_sha1:  # nosec: a file comparison, as file_state reports
        return ''
    have = ('holds no CA (no ca.crt there)' if ca_pem is None
            else 'holds another CA (its ca.crt has SHA-1 %s)' % hashlib.sha1(ca_pem).hexdigest())  # nosec: as above
    return ('One CA per site: %s already trusts a CA the collection made (%s, file SHA-1 %s), but this controller\'s '
            'ds4_tls_ca_dir %s %s. Going on would re-sign every front with %s CA, and every client that trusts the '
            'site\'s ca.crt would fail verification. Nothing was changed on any host. Fix: copy that directory (ca.key, '
            'ca.crt, hosts/) from the controller that deployed this site to %s here (mode 0700), or, to replace the '
            'site\'s CA on purpose, run once with -e ds4_tls_new_ca=true and give every client the new ca.crt.'
            % (host, ca_path, host_sha1, ca_dir, have, 'a new' if ca_pem is None else 'that', ca_dir))
