# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Steady client load and per-pair observation for the Molecule verify tests of several pairs (test code only).

SteadyLoad: N client threads sending small chat completions to one endpoint (the router's front,
10.77.0.11:8080, with the test API key), bounded by a request count AND a time limit; every request is
recorded (start, end, HTTP status or error). Which pair served the load is read from each pair head's own vLLM
counters (vllm:request_success_total on 127.0.0.1:8001 inside the head, `docker exec`), since neither the
router nor the simulator names the replica in a response. Router state (health view, workers) comes from
vllm-router's admin API on 127.0.0.1:30000 of the router host.
"""


import json
import subprocess
import threading
import time
import urllib.error
import urllib.request

from ds4_drill import SCHEME, ip, node_container

ROUTER_URL = '%s://%s:8080' % (SCHEME, ip(11))
ROUTER_HOST = 'spark1'
ROUTER_ADMIN = 'http://127.0.0.1:30000'
API_KEY = 'ds4-molecule-controller-key-0000'
# pair name -> (head node, head fabric address); the head's proxy serves the API on :8000, vLLM itself listens on
# 127.0.0.1:8001 inside the head. The router names each pair by its head's ansible_host (in Molecule the container
# name, <prefix>spark1, resolved by Docker's DNS): https://<prefix>spark1:8000, https://<prefix>spark3:8000 (TLS on).
PAIRS = {'spark_pair1': ('spark1', ip(11)), 'spark_pair2': ('spark3', ip(13))}
VLLM_UPSTREAM = 'http://127.0.0.1:8001'


def worker_url(pair, port=8000):
    """The pair's head as the router lists it (the API port of the recipe it runs)."""
    return '%s://%s:%d' % (SCHEME, node_container(PAIRS[pair][0]), port)


def _exec(node, *argv):
    return subprocess.run(['docker', 'exec', node_container(node)] + list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False, timeout=20)


def _get_in(node, url, method='GET'):
    """GET (or POST) url from inside a node (curl); (status or None, body)."""
    proc = _exec(node, 'curl', '-sS', '-m', '5', '-X', method, '-w', '\n%{http_code}', url)
    body, _nl, code = proc.stdout.rpartition('\n')
    try:
        return int(code), body
    except ValueError:
        return None, proc.stdout + proc.stderr


def success_count(pair):
    """vllm:request_success_total (all finish reasons) of the pair's head engine; None when it does not answer."""
    status, text = _get_in(PAIRS[pair][0], VLLM_UPSTREAM + '/metrics')
    if status != 200:
        return None
    total = 0.0
    for line in text.splitlines():
        if line.startswith('vllm:request_success_total'):
            total += float(line.rsplit(' ', 1)[1])
    return total


def running_count(pair):
    """vllm:num_requests_running + waiting of the pair's head engine (0 when it does not answer)."""
    status, text = _get_in(PAIRS[pair][0], VLLM_UPSTREAM + '/metrics')
    if status != 200:
        return 0
    total = 0.0
    for line in text.splitlines():
        if line.startswith(('vllm:num_requests_running', 'vllm:num_requests_waiting')):
            total += float(line.rsplit(' ', 1)[1])
    return int(total)


def router_health(host=ROUTER_HOST):
    """{worker url: healthy} from vllm-router's GET /workers (its health checker's view) on router host `host`."""
    status, body = _get_in(host, ROUTER_ADMIN + '/workers')
    if status != 200:
        raise AssertionError('router /workers answered %s: %s' % (status, body[:300]))
    return dict((w['url'].rstrip('/'), w.get('is_healthy') is True) for w in json.loads(body).get('workers', []))


def router_workers(host=ROUTER_HOST):
    """The worker URLs in rotation (GET /list_workers) of the router on `host`."""
    status, body = _get_in(host, ROUTER_ADMIN + '/list_workers')
    if status != 200:
        raise AssertionError('router /list_workers answered %s: %s' % (status, body[:300]))
    return sorted(u.rstrip('/') for u in json.loads(body).get('urls', []))


def in_rotation(pair, port=8000, host=ROUTER_HOST):
    """The pair's head is listed by the router on `host` and healthy in its view."""
    url = worker_url(pair, port)
    return url in router_workers(host) and router_health(host).get(url) is True


def router_admin(method, path):
    """vllm-router's admin API on the router host (test setup only); (status, body)."""
    return _get_in(ROUTER_HOST, ROUTER_ADMIN + path, method)


def chat_once(url=ROUTER_URL, key=API_KEY, prompt='Reply with exactly: OK', max_tokens=8, timeout=30.0):
    """One chat completion; (status, error text or None)."""
    body = json.dumps({'model': 'deepseek-v4-flash', 'max_tokens': max_tokens, 'temperature': 0,
                       'messages': [{'role': 'user', 'content': prompt}]}).encode()
    headers = {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + key}
    req = urllib.request.Request(url + '/v1/chat/completions', data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            data = json.loads(resp.read())
            if not data.get('choices'):
                return resp.status, 'no choices: %r' % (data,)
            return resp.status, None
    except urllib.error.HTTPError as exc:
        return exc.code, '%s %s' % (exc.code, exc.read()[:200])
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return None, '%s: %s' % (type(exc).__name__, exc)


# Replies of the long drain-under-load drills (rolling restart, upgrade, rollback, maintenance: minutes of load each):
# ~1.9 s a request at the simulator's 50 tok/s, so every client still has a request in flight at every moment while
# each one opens a third as many TLS connections through the fronts and the router as with 32 tokens (the CPU the other
# CI lanes need: the per-test CPU report, tests/harness/cpu_per_test.py, had the upgrade drill's node side at 286 CPU-s).
DRAIN_LOAD_TOKENS = 96


class SteadyLoad(object):
    """`threads` clients, each sending one request after the other until stop(), `max_requests` in all or
    `max_seconds` elapsed, whichever comes first. records: dicts start, end (time.monotonic()), status, error.

    32 tokens of filler a request (~0.7 s at the simulator's 50 tok/s): every client has a request in flight at every
    moment, as with shorter ones, but each request is a new TLS connection through the router and the head's proxy,
    and with a canned two-token reply a rolling switch sent ~13 000 of them (~22 a second for ten minutes): CPU the
    other CI lanes need."""

    def __init__(self, threads=6, max_requests=20000, max_seconds=300.0, url=ROUTER_URL, key=API_KEY, max_tokens=32,
                 timeout=30.0, pause_s=0.0, retry_resets=0):
        self.threads, self.max_requests, self.max_seconds = threads, max_requests, max_seconds
        self.url, self.key, self.max_tokens, self.timeout, self.pause_s = url, key, max_tokens, timeout, pause_s
        # retry_resets: a request that got no HTTP answer (reset, refused, or its timeout) is sent again, up to this
        # many times, as the OpenAI SDK does (max_retries 2); each retry is recorded (rec['retries'])
        self.retry_resets = retry_resets
        self.records = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._workers = []
        self._sent = 0
        self.t0 = None

    def _take(self):
        with self._lock:
            if self._stop.is_set() or self._sent >= self.max_requests or time.monotonic() - self.t0 >= self.max_seconds:
                return None
            self._sent += 1
            return self._sent

    def _run(self, idx):
        while True:
            n = self._take()
            if n is None:
                return
            start = time.monotonic()
            # distinct prompts: the router's cache-aware policy sees no shared prefix to stick to; none of the
            # simulator's canned questions, so the reply is max_tokens of filler (a canned one ends after a token or two)
            retries = []
            while True:
                status, error = chat_once(self.url, self.key, 'Request %d of client %d: describe the sea.' % (n, idx),
                                          self.max_tokens, self.timeout)
                if status is not None or len(retries) >= self.retry_resets:
                    break
                retries.append(error)
            rec = {'n': n, 'client': idx, 'start': start, 'end': time.monotonic(), 'status': status, 'error': error,
                   'retries': retries}
            with self._lock:
                self.records.append(rec)
            if self.pause_s:
                time.sleep(self.pause_s)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        self.t0 = time.monotonic()
        for i in range(self.threads):
            th = threading.Thread(target=self._run, args=(i,), name='load-%d' % i)
            th.daemon = True
            th.start()
            self._workers.append(th)
        return self

    def wait(self):
        """Until the count or time bound ends the load (no early stop)."""
        for th in self._workers:
            th.join(self.max_seconds + self.timeout + 5)
        return self

    def stop(self):
        self._stop.set()
        for th in self._workers:
            th.join(self.timeout + 5)
        return self

    def failed(self):
        with self._lock:
            return [r for r in self.records if r['error'] is not None or r['status'] != 200]

    def count(self):
        with self._lock:
            return len(self.records)

    def summary(self):
        with self._lock:
            recs = list(self.records)
        bad = [r for r in recs if r['error'] is not None or r['status'] != 200]
        took = (max(r['end'] for r in recs) - self.t0) if recs else 0.0
        retried = [r for r in recs if r.get('retries')]
        return {'requests': len(recs), 'failed': len(bad), 'seconds': round(took, 1),
                'rps': round(len(recs) / took, 1) if took else 0.0,
                'errors': sorted(set(str(r['error'])[:160] for r in bad))[:5],
                'retried': len(retried), 'retry_errors': sorted(set(str(e)[:160] for r in retried for e in r['retries']))[:5]}


class HealthWindows(object):
    """Polls each pair head's API /health (through its proxy, no key needed) every `interval` s from the
    controller and records when each pair answered something else than 200: windows() -> {pair: [(t0, t1)]}.
    Every 0.5 s: a pair restart is down for seconds, and each poll is a TLS handshake per pair (0.25 s doubled them,
    as many as the steady load's, for the CPU the other CI lanes need)."""

    def __init__(self, interval=0.5, ports=(8000,)):
        self.interval, self.ports = interval, ports
        self.samples = dict((p, []) for p in PAIRS)
        self._stop = threading.Event()
        self._thread = None

    def _poll(self):
        while not self._stop.is_set():
            for pair, (_node, addr) in PAIRS.items():
                ok = False
                for port in self.ports:  # a switch to a recipe on another port: either one serving counts
                    try:
                        with urllib.request.urlopen('%s://%s:%d/health' % (SCHEME, addr, port), timeout=1.0) as resp:
                            ok = resp.status == 200
                    except (urllib.error.URLError, OSError, ValueError):
                        ok = False
                    if ok:
                        break
                self.samples[pair].append((time.monotonic(), ok))
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread = threading.Thread(target=self._poll, name='health-windows')
        self._thread.daemon = True
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)
        return False

    def windows(self):
        out = {}
        for pair, samples in self.samples.items():
            wins, begin, last_ok = [], None, None
            for t, ok in samples:
                if not ok and begin is None:
                    begin = last_ok if last_ok is not None else t
                elif ok and begin is not None:
                    wins.append((begin, t))
                    begin = None
                if ok:
                    last_ok = t
            if begin is not None:
                wins.append((begin, samples[-1][0]))
            out[pair] = wins
        return out


def overlap(windows_a, windows_b):
    """Seconds during which a window of one list overlaps a window of the other."""
    total = 0.0
    for a0, a1 in windows_a:
        for b0, b1 in windows_b:
            total += max(0.0, min(a1, b1) - max(a0, b0))
    return total
