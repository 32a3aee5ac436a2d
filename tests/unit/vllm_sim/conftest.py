# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures for the vLLM simulator tests: start `vllm serve` (the simulator) on loopback with fast timings."""


import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

TESTS_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
VLLM = os.path.join(TESTS_DIR, 'vllm_sim', 'bin', 'vllm')
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)

from vllm_sim import standin  # noqa: E402  pylint: disable=import-error,wrong-import-position

DEFAULT_MODEL = '/models/sim-model'

FAST_ENV = {
    'VLLM_SIM_TIME_SCALE': '0.02',
    'VLLM_SIM_TOKENS_PER_S': '2000',
    'VLLM_SIM_STATS_INTERVAL_S': '0',
    'VLLM_SIM_RENDEZVOUS_TIMEOUT_S': '10',
    'PYTHONUNBUFFERED': '1',
    'VLLM_SIM_PYTHON': sys.executable,
}


from ports import free_port, wait_listening  # noqa: E402  pylint: disable=import-error,wrong-import-position,unused-import


class Sim:
    """A running simulator process with its merged stdout+stderr collected line by line."""

    def __init__(self, args, port, env=None):
        self.port = port
        full_env = dict(os.environ)
        full_env.pop('VLLM_API_KEY', None)
        full_env.pop('VLLM_WORKER_MULTIPROC_METHOD', None)
        full_env.update(FAST_ENV)
        full_env.update(env or {})
        self.proc = subprocess.Popen([VLLM] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=full_env, text=True, encoding='utf-8')
        self.lines = []
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.rstrip('\n'))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    @property
    def output(self):
        with self.cond:
            return '\n'.join(self.lines)

    def wait_line(self, text, timeout=10.0):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.lines:
                    if text in line:
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.reader.is_alive()):
                    raise AssertionError('line %r not seen; output:\n%s' % (text, '\n'.join(self.lines)))
                self.cond.wait(min(left, 0.1))

    def wait_ready(self, timeout=10.0):
        """The startup line, then the port listening (it listens just after the line, as vLLM's does)."""
        self.wait_line('Application startup complete.', timeout)
        assert wait_listening(self.port, timeout=timeout, alive=lambda: self.proc.poll() is None), \
            'port %s not listening after the startup line' % self.port
        return self

    def wait_exit(self, timeout=10.0):
        rc = self.proc.wait(timeout)
        self.reader.join(5)
        return rc

    def url(self, path):
        return 'http://127.0.0.1:%d%s' % (self.port, path)

    def request(self, path, body=None, key=None, timeout=10.0, method=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url(path), data=data, method=method)
        if data is not None:
            req.add_header('Content-Type', 'application/json')
        if key:
            req.add_header('Authorization', 'Bearer ' + key)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, resp.read().decode(), dict(resp.headers)
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(), dict(exc.headers)

    def clock_resets(self):
        status, body, _h = self.request('/sim/clock')
        assert status == 200, body
        return json.loads(body)['resets']

    def measured_without_stall(self, measure, tries=3):
        """measure() again (at most tries times) while the simulator says its step clock restarted during it: a host
        stall of more than 0.25 s drops steps (engine.CLOCK_RESET_S), so the simulator produced less than its
        configured rates and a rate test would judge the stall. The last try is returned whatever happened."""
        for attempt in range(tries):
            before = self.clock_resets()
            result = measure()
            if self.clock_resets() == before or attempt == tries - 1:
                return result
        return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.reader.join(5)


def wait_for(predicate, timeout=5.0, step=0.05):
    """True as soon as predicate() is, False when timeout seconds pass first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


def stream_chat(sim, body, key=None, timeout=30.0):
    """POST a streaming request; returns [(monotonic_time, parsed_chunk_or_'[DONE]')]."""
    body = dict(body, stream=True)
    req = urllib.request.Request(sim.url('/v1/chat/completions' if 'messages' in body else '/v1/completions'),
                                 data=json.dumps(body).encode(), headers={'Content-Type': 'application/json'})
    if key:
        req.add_header('Authorization', 'Bearer ' + key)
    events = []
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith('data: '):
                continue
            payload = line[len('data: '):]
            events.append((time.monotonic(), payload if payload == '[DONE]' else json.loads(payload)))
    return events


@pytest.fixture
def sim_root(tmp_path):
    """The simulated container's / (VLLM_SIM_ROOT): DEFAULT_MODEL is a real model directory in it."""
    return standin.make_root(str(tmp_path / 'container-root'), models=(DEFAULT_MODEL,), shards=8)


@pytest.fixture
def sim_factory(sim_root):
    started = []

    def start(args=(), env=None, model=DEFAULT_MODEL, port=None, api=True):
        port = port or free_port()
        full = ['serve', model] + (['--host', '127.0.0.1', '--port', str(port)] if api else []) + list(args)
        sim = Sim(full, env=dict({'VLLM_SIM_ROOT': sim_root}, **(env or {})), port=port)
        started.append(sim)
        return sim

    yield start
    for sim in started:
        sim.stop()
