# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness in parts: readiness_phases (phase tracking), readiness_pair (pair coordination), readiness_http (the
head's checks) and redact (redaction), each imported from its own file (the re-exporting readiness.py is gone):
each part works on its own, and the readiness HTTP checks go through vllm_client, the collection's one HTTP
client."""


import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe, vllm_client

from ansible_collections.dgxspark.ds4.plugins.module_utils._readiness import readiness_http

from ansible_collections.dgxspark.ds4.plugins.module_utils._security import redact
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import readiness_pair, readiness_phases

PARTS = (readiness_phases, readiness_pair, readiness_http, redact, node_probe)


@pytest.mark.parametrize("part", PARTS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_each_part_says_what_it_is(part):
    first = (part.__doc__ or "").strip().splitlines()[0]
    assert ": " in first and len(first) > 40, first


def test_phase_tracker_alone():
    t = readiness_phases.PhaseTracker("spark1", start=0.0)
    assert t.feed("(APIServer pid=1) INFO Starting vLLM server on http://0.0.0.0:8000", 3.0)[0]["phase"] == "api_starting"
    assert t.feed("INFO:     Application startup complete.", 4.5)[0]["message"] == "spark1: Application startup complete. (+4.5s)"
    assert t.complete and t.timings == {"api_starting": 3.0, "startup_complete": 4.5}


def test_pair_alone(tmp_path):
    sdir = readiness_pair.state_dir("task-1", str(tmp_path))
    readiness_pair.publish(sdir, "worker", {"node": "spark2", "state": "failed", "own_reason": "unit exited"}, now=10.0)
    peer = readiness_pair.read_peer(sdir, "worker")
    assert peer["updated"] == 10.0 and peer["role"] == "worker"
    assert readiness_pair.decide("head", None, peer, 11.0, 0.0, 60.0) == ("fail", "spark2 failed: unit exited")
    status = node_probe.unit_state(node_probe.parse_unit_show("ActiveState=failed\nSubState=failed\nExecMainStatus=1\n"), "u")
    assert readiness_pair.NodeWatch().observe(status) == "unit u is failed/failed (last exit status 1)"


def test_redact_alone():
    assert redact.redact("VLLM_API_KEY=sk-1 --hf-token hf_x other", extra=["other"]) == (
        "VLLM_API_KEY=<redacted> --hf-token <redacted> <redacted>")
    assert redact.redact(None) is None


def test_base_url():
    assert vllm_client.base_url("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert vllm_client.base_url("::1", "8000") == "http://[::1]:8000"
    assert vllm_client.base_url("[::1]", 8000) == "http://[::1]:8000"


class _Server(object):
    """A tiny OpenAI-compatible endpoint recording each request's method, path and User-Agent."""

    def __init__(self, family_host):
        seen = self.seen = []

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, body=b""):
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                seen.append(("GET", self.path, self.headers.get("User-Agent")))
                if self.path == "/health":
                    return self._send(200)
                self._send(200, json.dumps({"data": [{"id": "m", "max_model_len": 4096}]}).encode())

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                seen.append(("POST", self.path, self.headers.get("User-Agent")))
                self._send(200, json.dumps({"choices": [{"message": {"content": "Paris " + body["model"]}}]}).encode())

        cls = HTTPServer
        if ":" in family_host:
            import socket

            class V6(HTTPServer):
                address_family = socket.AF_INET6
            cls = V6
        self.srv = cls((family_host, 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def _has_ipv6_loopback():
    import socket
    try:
        s = socket.socket(socket.AF_INET6)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_http_checks_go_through_vllm_client(host):
    if host == "::1" and not _has_ipv6_loopback():
        pytest.skip("no IPv6 loopback on this machine")
    srv = _Server(host)
    try:
        res = readiness_http.http_checks(host, srv.port, served_name=None, max_model_len=4096)
        assert res["ok"], res
        assert res["chat"]["content"] == "Paris m"  # the served name from /v1/models
        assert [(m, p) for m, p, _ua in srv.seen] == [("GET", "/health"), ("GET", "/v1/models"), ("POST", "/v1/chat/completions")]
        assert set(ua for _m, _p, ua in srv.seen) == {vllm_client.USER_AGENT}
        st, text = vllm_client.post(vllm_client.base_url(host, srv.port), "/v1/chat/completions", {"model": "x"})
        assert st == 200 and json.loads(text)["choices"][0]["message"]["content"] == "Paris x"
    finally:
        srv.close()


def test_http_checks_connection_refused_is_still_starting():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    try:
        res = readiness_http.http_checks("127.0.0.1", port)
    finally:
        s.close()
    assert res["ok"] is False and res["problems"][0].startswith("/health: ") and "health" not in res


def test_http_checks_health_not_200_names_what_answers_it():
    """vLLM answers /health 200 or refuses (even right after an engine death; real-vllm-on-device notes, Part 1):
    a 503 comes from the API proxy's health gate, and the problem says so instead of "the engine is dead"."""
    import http.server
    import threading

    class Gate(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # pylint: disable=invalid-name
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):  # pylint: disable=arguments-differ
            return

    server = http.server.HTTPServer(("127.0.0.1", 0), Gate)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        res = readiness_http.http_checks("127.0.0.1", server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
    assert res["ok"] is False and res["health"] == 503
    assert res["problems"] == ["/health answered 503 (not vLLM's own answer: vLLM answers 200 or refuses; 503 = the pair "
                               "guard's health gate in the API proxy)"]
