# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A local HTTP server that answers like vllm-router 0.1.17's admin API (as measured in
tests/integration/test_router_drain.py), plus fake pair heads under /w/<name> (GET /health, GET /metrics) and
the router's Prometheus text at GET /metrics. Used by test_router_admin.py and the router_pool module test.

  with FakeRouter(['a', 'b']) as fake:   # workers fake.worker('a'), fake.worker('b') in rotation, healthy
      fake.up['a'] = False               # the pair head's /health answers 503, /add_worker times out
      fake.healthy[url] = False          # the router's health checker sees it down (GET /workers)
      fake.vllm['a'] = (running, waiting); fake.running[url] = n   # the two in-flight sources
      fake.requests                      # [(method, path, headers)], admin and worker requests alike
"""


import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


class FakeRouter(object):

    def __init__(self, names=('a', 'b')):
        self.server = ThreadingHTTPServer(('127.0.0.1', 0), self._handler())
        self.base = 'http://127.0.0.1:%d' % self.server.server_address[1]
        self.lock = threading.Lock()
        self.workers = [self.worker(n) for n in names]
        self.healthy = dict((u, True) for u in self.workers)
        self.up = dict((n, True) for n in names)
        self.vllm = dict((n, (0, 0)) for n in names)
        self.running = {}
        self.requests = []
        # GET /v1/models through the router: answered 200 with this model while some worker is listed
        self.models_status = None
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    def worker(self, name):
        return '%s/w/%s' % (self.base, name)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc_info):
        self.server.shutdown()
        self.server.server_close()

    def admin_calls(self, path):
        return [r for r in self.requests if r[1].startswith(path)]

    def _name(self, url):
        prefix = self.base + '/w/'
        return url[len(prefix):] if url.startswith(prefix) else None

    def answer(self, method, path):
        """(status, content type, body) for one request."""
        parts = urlsplit(path)
        query = parse_qs(parts.query)
        url = (query.get('url') or [None])[0]
        with self.lock:
            if parts.path.startswith('/w/'):
                name, rest = (parts.path[3:].split('/', 1) + [''])[:2]
                if rest == 'health':
                    return (200, 'text/plain', '') if self.up.get(name) else (503, 'text/plain', 'down')
                running, waiting = self.vllm.get(name, (0, 0))
                return 200, 'text/plain', ('# TYPE vllm:num_requests_running gauge\n'
                                           'vllm:num_requests_running{model_name="m"} %s\n'
                                           'vllm:num_requests_waiting{model_name="m"} %s\n' % (float(running), float(waiting)))
            if method == 'GET' and parts.path == '/list_workers':
                return 200, 'application/json', json.dumps({'urls': list(self.workers)})
            if method == 'GET' and parts.path == '/workers':
                return 200, 'application/json', json.dumps({'workers': [
                    {'url': u, 'model_id': 'unknown', 'worker_type': 'regular', 'is_healthy': self.healthy.get(u, True),
                     'load': 0} for u in self.workers], 'total': len(self.workers)})
            if method == 'GET' and parts.path == '/v1/models':
                status = self.models_status or (200 if self.workers else 503)
                return status, 'application/json', (json.dumps({'object': 'list', 'data': [{'id': 'deepseek-v4-flash'}]})
                                                    if status == 200 else '{"error": "No available workers"}')
            if method == 'GET' and parts.path == '/metrics':
                return 200, 'text/plain', ''.join('vllm_router_running_requests{worker="%s"} %s\n' % (u, n)
                                                  for u, n in sorted(self.running.items()))
            if method == 'POST' and parts.path == '/remove_worker':
                if url in self.workers:
                    self.workers.remove(url)
                return 200, 'text/plain', 'Successfully removed worker: %s' % url
            if method == 'POST' and parts.path == '/add_worker':
                if url in self.workers:
                    return 400, 'text/plain', 'Worker %s already exists' % url
                if not self.up.get(self._name(url)):
                    return 400, 'text/plain', 'Timeout 1s waiting for worker %s to become healthy.' % url
                self.workers.append(url)
                self.healthy[url] = True
                return 200, 'text/plain', 'Successfully added worker: %s' % url
        return 405, 'text/plain', ''

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self):
                length = int(self.headers.get('Content-Length') or 0)
                if length:
                    self.rfile.read(length)
                with fake.lock:
                    fake.requests.append((self.command, self.path, dict(self.headers.items())))
                status, ctype, body = fake.answer(self.command, self.path)
                data = body.encode('utf-8')
                self.send_response(status)
                self.send_header('Content-Type', ctype)
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = _serve
            do_POST = _serve

            def log_message(self, *args):  # pylint: disable=arguments-differ
                pass

        return Handler
