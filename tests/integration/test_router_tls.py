# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Router -> head over TLS (ds4_tls) with the real vllm-router 0.1.17 and the role's pool keeper.

Each pair head is a vLLM simulator behind a TLS front (a relay on 127.0.0.1 that terminates TLS with a certificate
naming 127.0.0.1, signed by a CA made here with the openssl CLI), standing in for the head's nginx proxy. The router
and its pool keeper run with router_config's plan for router_worker_ca_file: https worker URLs and SSL_CERT_FILE in
their environment, exactly what the role's units get. With the CA that signed the fronts: both pairs are added and
requests come back through the router. With another CA: no pair is ever added and the pool keeper says why."""


import urllib.error
import urllib.request

import pytest

import router_rig  # pylint: disable=import-error
from tls_front import TlsFront, make_pki  # pylint: disable=import-error


@pytest.fixture
def tls_pairs(tmp_path):
    pki = make_pki(tmp_path)
    sims = [router_rig.Sim(), router_rig.Sim()]
    fronts = [TlsFront(s, str(pki / 'front.crt'), str(pki / 'front.key')) for s in sims]
    yield pki, fronts
    for f in fronts:
        f.stop()
    for s in sims:
        s.stop()


def test_the_router_reaches_the_heads_over_verified_tls(router_bin, tls_pairs, tmp_path):
    pki, fronts = tls_pairs
    router = router_rig.Router(router_bin, fronts, tmp_path, worker_ca_file=str(pki / 'ca.crt'), policy='round_robin')
    try:
        assert router.environment == {'SSL_CERT_FILE': str(pki / 'ca.crt')}
        assert sorted(router.listed()) == sorted('https://127.0.0.1:%d' % f.port for f in fronts)
        for i in range(4):
            status, body = router.complete('tls request %d' % i)
            assert status == 200 and body['usage']['completion_tokens'] == 4, body
        assert all(f.sim.served() >= 1 for f in fronts), [f.sim.served() for f in fronts]
        assert sum(f.handshakes_failed for f in fronts) == 0
    finally:
        router.stop()


def test_another_ca_never_gets_a_pair_added(router_bin, tls_pairs, tmp_path):
    pki, fronts = tls_pairs
    router = router_rig.Router(router_bin, fronts, tmp_path, wait_pairs=False, worker_ca_file=str(pki / 'other.crt'),
                               worker_startup_timeout_s=2)
    try:
        # the pool keeper (Python, SSL_CERT_FILE) refuses the fronts' certificate and never asks the router
        assert not router_rig.wait_until(lambda: router.listed() != [], 6), router.listed()
        assert 'CERTIFICATE_VERIFY_FAILED' in router.pool_tail(50), router.pool_tail(50)
        # the router itself (its bundled OpenSSL, SSL_CERT_FILE) refuses it too when asked directly
        url = 'https://127.0.0.1:%d' % fronts[0].port
        req = urllib.request.Request(router.url('/add_worker?url=' + url), data=b'', method='POST')
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(req, timeout=30)  # pylint: disable=consider-using-with
        assert router.listed() == [] and fronts[0].handshakes_failed >= 1
        assert all(f.sim.served() == 0 for f in fronts)
    finally:
        router.stop()
