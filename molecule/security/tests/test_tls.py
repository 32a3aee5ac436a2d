# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TLS on the head's API proxy (ds4_tls, on; no user certificate: the collection's CA on the controller, in the
scenario's ephemeral directory). Seen from the `client` container and the controller: a client that verifies the
certificate against that CA gets answers (curl --cacert; streamed chats through the collection's own HTTPS client and the OpenAI SDK);
plain HTTP on the port is refused; a client trusting another CA, or only the system's, is refused; the key files are
0600; the expiry reaches the node exporter textfile and status.yml; a certificate inside the renewal window is
renewed by a plain site.yml and served at once. Runs after test_security.py (file order)."""


import datetime
import os
import re
import shutil
import ssl
import stat
import subprocess
import sys
import tempfile

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position
import test_security as s  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

HEAD_CERT = '/etc/dgxspark-ds4/tls/front.crt'


def served_fingerprint():
    """SHA-256 fingerprint of the certificate the proxy serves to the client (openssl s_client on the client)."""
    out = d.node('client', 'sh', '-c', 'openssl s_client -connect %s:8000 -servername %s </dev/null 2>/dev/null '
                 '| openssl x509 -noout -fingerprint -sha256' % (s.HEAD, s.HEAD), check=False)
    m = re.search(r'Fingerprint=([0-9A-F:]+)', out)
    assert m, out
    return m.group(1).replace(':', '').lower()


def controller_cert_info(path):
    with open(path, 'rb') as f:
        return x509.load_pem_x509_certificate(f.read())


def test_a_client_verifying_the_certificate_gets_answers():
    status, body = s.curl('client', '/v1/models', s.KEY_A)
    assert status == 200, body
    status, body = s.curl('client', '/v1/chat/completions', s.KEY_B, 'POST', s.chat_body())
    assert status == 200 and '"Four"' in body.replace(' ', ''), body
    # the certificate names the head's address (verified by IP above) and is the one the collection signed
    cert = controller_cert_info(os.path.join(s.CA_DIR, 'hosts', 'spark1.crt'))
    assert served_fingerprint() == cert.fingerprint(hashes.SHA256()).hex()


def test_a_streamed_chat_through_the_collections_https_client_verifies_the_ca(monkeypatch):
    """vllm_client (the collection's one HTTP client; the router's pool keeper uses it the same way) trusts the CA
    through SSL_CERT_FILE, as the router units do."""
    sys.path.insert(0, os.path.join(d.PROJECT, '.collections'))
    from ansible_collections.dgxspark.ds4.plugins.module_utils._node import vllm_client  # pylint: disable=import-outside-toplevel
    body = {'model': 'deepseek-v4-flash', 'max_tokens': 16, 'temperature': 0,
            'messages': [{'role': 'user', 'content': 'What is 2+2? Answer with one word.'}]}
    monkeypatch.setenv('SSL_CERT_FILE', os.path.join(s.CA_DIR, 'ca.crt'))
    rec = vllm_client.stream_chat('https://%s:8000' % s.HEAD, body, api_key=s.KEY_A, timeout=60)
    assert rec['error'] is None and rec['content'].strip() == 'Four', rec
    assert rec['text_chunks'] >= 1 and rec['completion_tokens'] >= 1, rec
    # the same client, trusting only the system's CAs, is refused by its own verification
    monkeypatch.setenv('SSL_CERT_FILE', '/etc/ssl/certs/ca-certificates.crt')
    rec = vllm_client.stream_chat('https://%s:8000' % s.HEAD, body, api_key=s.KEY_A, timeout=60)
    assert rec['error'] and 'CERTIFICATE_VERIFY_FAILED' in rec['error'], rec


def test_the_openai_sdk_streams_a_chat_verifying_the_certificate():
    """The client most users point at the endpoint: the OpenAI Python SDK (pinned in requirements.txt), streaming,
    verifying the certificate against the collection's CA; the same SDK trusting only the system's CAs is refused."""
    import openai  # pylint: disable=import-outside-toplevel

    def client(cafile):
        return openai.OpenAI(base_url='https://%s:8000/v1' % s.HEAD, api_key=s.KEY_A, max_retries=0, timeout=60,
                             http_client=openai.DefaultHttpx2Client(verify=ssl.create_default_context(cafile=cafile)))
    messages = [{'role': 'user', 'content': 'What is 2+2? Answer with one word.'}]
    stream = client(os.path.join(s.CA_DIR, 'ca.crt')).chat.completions.create(
        model='deepseek-v4-flash', messages=messages, max_tokens=16, temperature=0, stream=True)
    chunks = [c.choices[0].delta.content or '' for c in stream if c.choices]
    assert ''.join(chunks).strip() == 'Four' and len(chunks) >= 2, chunks
    with pytest.raises(openai.APIConnectionError) as refused:
        client(None).chat.completions.create(model='deepseek-v4-flash', messages=messages, max_tokens=16, stream=True)
    assert 'CERTIFICATE_VERIFY_FAILED' in repr(refused.value.__cause__) + str(refused.value.__context__), (
        refused.value, refused.value.__cause__)


def test_plain_http_is_refused_on_the_port():
    status, body = s.curl('client', '/v1/models', s.KEY_A, scheme='http')
    assert status == 400 and 'The plain HTTP request was sent to HTTPS port' in body, (status, body)
    status, body = s.curl('client', '/v1/chat/completions', s.KEY_A, 'POST', s.chat_body(), scheme='http')
    assert status == 400 and 'Four' not in body, (status, body)


def curl_trusting(cacert, tries=3):
    """curl, in the client container, trusting only cacert: (exit status, its error line). curl exits 60
    (CURLE_PEER_FAILED_VERIFICATION, "SSL certificate problem") when it refuses the served certificate. Another
    failure (a connection timed out or reset, docker exec itself failing on a loaded CI machine) proves nothing either
    way: asked again, at most tries times; the error line holds every attempt's. An answer (exit 0) is never retried."""
    seen = []
    for _attempt in range(tries):
        proc = subprocess.run(['docker', 'exec', d.node_container('client'), 'curl', '-sS', '-o', '/dev/null', '--max-time',
                               '20', '--cacert', cacert, '-H', 'Authorization: Bearer ' + s.KEY_A,
                               'https://%s:8000/v1/models' % s.HEAD],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
        seen.append('exit %d: %s' % (proc.returncode, proc.stdout.strip()))
        if proc.returncode in (0, 60):
            break
    return proc.returncode, ' | '.join(seen)


def test_an_unknown_ca_is_refused():
    # the system's CAs only
    rc, err = curl_trusting('/etc/ssl/certs/ca-certificates.crt')
    assert rc == 60 and 'SSL certificate problem' in err, (rc, err)
    # another CA, made here, with the same subject as the collection's
    tmp = tempfile.mkdtemp(prefix='ds4-other-ca-')
    subprocess.run(['openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2',
                    '-subj', '/CN=dgxspark.ds4 fronts CA', '-keyout', os.path.join(tmp, 'k'), '-out', os.path.join(tmp, 'c')],
                   check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    subprocess.run(['docker', 'cp', os.path.join(tmp, 'c'), '%s:/tmp/ds4-other-ca.crt' % d.node_container('client')], check=True)
    with open(os.path.join(tmp, 'c')) as handle:
        assert d.node('client', 'cat', '/tmp/ds4-other-ca.crt') == handle.read().strip()
    shutil.rmtree(tmp)
    rc, err = curl_trusting('/tmp/ds4-other-ca.crt')
    assert rc == 60 and 'SSL certificate problem' in err, (rc, err)
    # and the collection's own CA, asked the same way, is answered: the refusals above are the CA's doing
    s.client_trusts_the_ca('client')
    rc, err = curl_trusting(s.CLIENT_CA)
    assert rc == 0, (rc, err)


def test_keys_0600_and_the_ca_key_only_on_the_controller():
    assert d.node('spark1', 'stat', '-c', '%a %U %G', '/etc/dgxspark-ds4/tls/front.key') == '600 root root'
    assert d.node('spark1', 'stat', '-c', '%a', HEAD_CERT) == '644'
    assert d.node('spark1', 'ls', '/etc/dgxspark-ds4/tls').split() == ['ca.crt', 'front.crt', 'front.key']
    # the worker has no front: no material
    assert 'No such file' in d.node('spark2', 'ls', '/etc/dgxspark-ds4/tls', check=False)
    assert stat.S_IMODE(os.stat(s.CA_DIR).st_mode) == 0o700
    for name in ('ca.key', os.path.join('hosts', 'spark1.key')):
        assert stat.S_IMODE(os.stat(os.path.join(s.CA_DIR, name)).st_mode) == 0o600, name
    assert not os.path.exists(os.path.join(s.CA_DIR, 'hosts', 'spark2.key'))


def test_expiry_in_the_textfile_and_in_status():
    cert = controller_cert_info(os.path.join(s.CA_DIR, 'hosts', 'spark1.crt'))
    not_after = int(cert.not_valid_after_utc.timestamp())
    text = d.node('spark1', 'cat', '/var/lib/prometheus/node-exporter/dgxspark_ds4_tls.prom')
    assert ('dgxspark_ds4_tls_certificate_not_after_seconds{front="proxy",path="%s"} %d' % (HEAD_CERT, not_after)) in text
    rc, out = d.run_playbook('status.yml', {'ds4_status_chat': False})
    assert rc == 0, out[-3000:]
    days = (cert.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)).days
    assert 'tls spark1 proxy: expires %s, in %d days' % (cert.not_valid_after_utc.strftime('%Y-%m-%dT%H:%M:%SZ'), days) in out, \
        out[-3000:]


def _recap_changed(out):
    return dict((m.group(1), int(m.group(2))) for m in re.finditer(r'^(spark\d)\s+:\s+ok=\d+\s+changed=(\d+)', out, re.M))


def _other_ca(path):
    """A CA directory holding another CA's certificate (what a second controller that made its own would have)."""
    key = ec.generate_private_key(ec.SECP384R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'dgxspark.ds4 fronts CA')])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True).sign(key, hashes.SHA256()))
    os.makedirs(path, mode=0o700)
    with open(os.path.join(path, 'ca.crt'), 'wb') as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))


def test_a_second_controller_without_the_sites_ca_is_refused_before_any_host_changes_and_with_a_copy_changes_nothing(tmp_path):
    """One CA per site (issue 45): site.yml from a controller whose ds4_tls_ca_dir holds no CA (a second machine, a
    lost directory), then one holding another CA, is refused at the start of the deploy, before any host changes,
    naming the head, its CA file, the directory and how to copy it: no task changed anything, nothing was made in the
    directory, the head serves the same certificate and still trusts the same CA. With a copy of the site's CA
    directory in that place the deploy converges with no certificate change: the same files on the head, the same
    certificate served, the material not written."""
    served = served_fingerprint()
    on_head = d.node('spark1', 'sha1sum', '/etc/dgxspark-ds4/tls/ca.crt', '/etc/dgxspark-ds4/tls/front.crt')
    site_ca_sha1 = on_head.split()[0]
    empty, other, copy = tmp_path / 'no-ca', tmp_path / 'other-ca', tmp_path / 'copy-of-the-site-ca'
    _other_ca(str(other))
    for ca_dir, have in ((empty, 'holds no CA (no ca.crt there)'), (other, 'holds another CA')):
        rc, out = d.run_playbook('site.yml', {'ds4_tls_ca_dir': str(ca_dir)})
        flat = ' '.join(out.split())
        assert rc != 0, out[-3000:]
        # (the output's YAML may double an apostrophe: the message is matched around them)
        assert ('One CA per site: spark1 already trusts a CA the collection made (/etc/dgxspark-ds4/tls/ca.crt, file SHA-1 '
                '%s), but this controller' % site_ca_sha1) in flat, out[-3000:]
        assert 'ds4_tls_ca_dir %s %s' % (ca_dir, have) in flat, out[-3000:]
        assert ('Fix: copy that directory (ca.key, ca.crt, hosts/) from the controller that deployed this site to %s here'
                % ca_dir) in flat
        # refused at the deploy's first task (the converge plan, which looks at the fronts' material): no later task
        # ran (the other node's plan result may print after the refusal: it is the same task), nothing changed anywhere
        assert _recap_changed(out) == {'spark1': 0, 'spark2': 0}, out[-2000:]
        after = out.split('already trusts a CA the collection made')[-1]
        assert not re.search(r'^TASK \[', after, re.M) and 'host_hardening :' not in after, after[-3000:]
    assert not empty.exists() and sorted(os.listdir(str(other))) == ['ca.crt']
    assert d.node('spark1', 'sha1sum', '/etc/dgxspark-ds4/tls/ca.crt', '/etc/dgxspark-ds4/tls/front.crt') == on_head
    assert served_fingerprint() == served
    shutil.copytree(s.CA_DIR, str(copy))
    os.chmod(str(copy), 0o700)
    rc, out = d.run_playbook('site.yml', {'ds4_tls_ca_dir': str(copy)})
    assert rc == 0, out[-3000:]
    assert 'already trusts a CA the collection made' not in out
    # no certificate change: the material is not written (tasks/tls.yml not even included: the look found the host's
    # material and the controller's CA and certificates as made), the head's files and the served certificate the same
    skipped = re.search(r'^TASK \[Deploy \| TLS material of the fronts[^\n]*\n(.*?)(?=^TASK \[)', out, re.M | re.S)
    assert skipped and re.findall(r'^(\w+): \[', skipped.group(1), re.M) == ['skipping', 'skipping'], out[-3000:]
    assert 'tls_front_files.yml' not in out and 'TLS | Write what differs' not in out, out[-3000:]
    assert d.node('spark1', 'sha1sum', '/etc/dgxspark-ds4/tls/ca.crt', '/etc/dgxspark-ds4/tls/front.crt') == on_head
    assert served_fingerprint() == served
    assert sorted(os.listdir(str(copy / 'hosts'))) == sorted(os.listdir(os.path.join(s.CA_DIR, 'hosts')))


def _resign_expiring(days):
    """The controller's copy of spark1's certificate re-signed by the collection's CA (same key, names and
    extensions) to expire in `days` days: what a certificate looks like once it entered the renewal window."""
    with open(os.path.join(s.CA_DIR, 'ca.key'), 'rb') as f:
        ca_key = serialization.load_pem_private_key(f.read(), password=None)
    ca = controller_cert_info(os.path.join(s.CA_DIR, 'ca.crt'))
    path = os.path.join(s.CA_DIR, 'hosts', 'spark1.crt')
    old = controller_cert_info(path)
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(old.subject).issuer_name(ca.subject).public_key(old.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
               .not_valid_after(now + datetime.timedelta(days=days)))
    for ext in old.extensions:
        builder = builder.add_extension(ext.value, ext.critical)
    with open(path, 'wb') as f:
        f.write(builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))


def test_zz_a_certificate_in_the_renewal_window_is_renewed_and_served():
    """A certificate expiring in 5 days (inside ds4_tls_renew_days, 30) on the controller: a plain site.yml re-signs
    it for ds4_tls_validity_days, puts it on the head, the proxy reloads and serves it, and a verifying client still
    gets answers. The converge shortcut of api_proxy runs (the certificate changed) and records the new state (a
    renewal is not drift)."""
    before = served_fingerprint()
    _resign_expiring(5)
    rc, out = d.run_playbook('site.yml')
    assert rc == 0, out[-3000:]
    cert = controller_cert_info(os.path.join(s.CA_DIR, 'hosts', 'spark1.crt'))
    assert (cert.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)).days >= 363
    after = served_fingerprint()
    assert after != before and after == cert.fingerprint(hashes.SHA256()).hex()
    status, body = s.curl('client', '/v1/models', s.KEY_A)
    assert status == 200, body
