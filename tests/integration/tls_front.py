# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A TLS front on 127.0.0.1 for the integration tests, standing in for the head's nginx proxy (its TLS termination):
a CA and a certificate naming 127.0.0.1 made with the openssl CLI (make_pki), and a relay that terminates TLS with it
and passes the bytes to a simulator's port (TlsFront). Used by test_router_tls.py (router -> head) and
test_benchy_sim.py (llama-benchy from the controller)."""


import socket
import ssl
import subprocess
import threading


def _openssl(*args):
    subprocess.run(('openssl',) + args, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def make_pki(d):
    """ca.crt/ca.key, front.crt/front.key (SAN IP:127.0.0.1, signed by ca), other.crt (another CA, same name).

    The extensions are the collection's own (roles/api_proxy/tasks/tls.yml and tls_front.yml): the CA's basic
    constraints and key usage critical, the front's key identifiers, server auth and no CA. Python 3.13's default
    TLS context verifies strictly (ssl.VERIFY_X509_STRICT): a CA without key usage or a leaf without an authority key
    identifier is refused ("CA cert does not include key usage extension"), as the OpenAI SDK and llama-benchy
    (aiohttp) do on it."""
    ec = ('-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes')
    ca_ext = ('-addext', 'basicConstraints=critical,CA:TRUE,pathlen:0', '-addext', 'keyUsage=critical,keyCertSign,cRLSign')
    _openssl('req', '-x509', *ec, *ca_ext, '-days', '2', '-subj', '/CN=test fronts CA', '-keyout', str(d / 'ca.key'),
             '-out', str(d / 'ca.crt'))
    _openssl('req', '-x509', *ec, *ca_ext, '-days', '2', '-subj', '/CN=test fronts CA', '-keyout', str(d / 'other.key'),
             '-out', str(d / 'other.crt'))
    _openssl('req', *ec, '-subj', '/CN=127.0.0.1', '-keyout', str(d / 'front.key'), '-out', str(d / 'front.csr'))
    (d / 'ext').write_text('subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n'
                           'extendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n')
    _openssl('x509', '-req', '-in', str(d / 'front.csr'), '-CA', str(d / 'ca.crt'), '-CAkey', str(d / 'ca.key'),
             '-CAcreateserial', '-days', '1', '-extfile', str(d / 'ext'), '-out', str(d / 'front.crt'))
    return d


class TlsFront(object):
    """TLS in front of one simulator (the head proxy's part here: TLS termination), on its own 127.0.0.1 port."""

    def __init__(self, sim, cert, key):
        self.sim = sim
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.handshakes_failed = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                raw, _addr = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw):
        try:
            conn = self.ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            self.handshakes_failed += 1
            raw.close()
            return
        up = socket.create_connection(('127.0.0.1', self.sim.port))
        threading.Thread(target=self._pipe, args=(up, conn), daemon=True).start()
        self._pipe(conn, up)

    @staticmethod
    def _pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass

    def stop(self):
        self.sock.close()
