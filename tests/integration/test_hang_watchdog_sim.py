# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pair guard's hang watchdog (plugins/module_utils/_node/pairguard, what roles/vllm_service/files/pairguard.py runs: Watch with the real clock and the real
/metrics client) against the vLLM simulator on 127.0.0.1: a runtime wedge under load is caught within
hang_after_s + hang_poll_s of the last progress, then the pair is restarted and the evidence kept; a long prefill
(as on real vLLM: no counter moving until the first token, only the KV-cache usage rising, for longer than
hang_after_s) is not; the same prefill wedged half-way is. systemd, docker, ssh and
journalctl are a fake runner (the Molecule drills exercise the real ones). Times are scaled down
(hang_after_s 3 s, poll 0.5 s); the detection delay is printed (pytest -s)."""


import json
import os
import sys
import threading
import time
import types
import urllib.request

TESTS_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
REPO = os.path.dirname(TESTS_DIR)
VLLM = os.path.join(TESTS_DIR, 'vllm_sim', 'bin', 'vllm')
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)
from vllm_sim import standin  # noqa: E402  pylint: disable=import-error,wrong-import-position
HANG_AFTER = 3.0
POLL = 0.5
SSH = ['ssh', 'root@10.77.0.12']


def _load_guard():
    """The guard's parts the test drives, from the node package (what roles/vllm_service/files/pairguard.py runs)."""
    from ansible_collections.dgxspark.ds4.plugins.module_utils._node import bench_stats
    from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import hang, watch
    return types.SimpleNamespace(Watch=watch.Watch, parse_prometheus=bench_stats.parse_prometheus,
                                 metric_total=hang.metric_total, progress_values=hang.progress_values)


pairguard = _load_guard()


from ports import free_port as _free_port, start_server  # noqa: E402  pylint: disable=import-error,wrong-import-position,unused-import


class Sim(object):
    def __init__(self, env):
        self.port = _free_port()
        full = dict(os.environ)
        full.pop('VLLM_API_KEY', None)
        full.update({'PYTHONUNBUFFERED': '1', 'VLLM_SIM_PYTHON': sys.executable, 'VLLM_SIM_STATS_INTERVAL_S': '0',
                     'VLLM_SIM_TIME_SCALE': '0.02', 'VLLM_SIM_ROOT': standin.temp_root()})
        full.update(env)
        self.proc = start_server([VLLM, 'serve', '/models/ds4', '--host', '127.0.0.1', '--port', str(self.port)], full,
                                 self.port, timeout=20)

    def url(self, path):
        return 'http://127.0.0.1:%d%s' % (self.port, path)

    def load(self, prompt, max_tokens, n=2):
        """n clients in background threads, each sending requests in a loop until the process stops answering."""
        def client():
            body = json.dumps({'prompt': prompt, 'max_tokens': max_tokens}).encode()
            while self.proc.poll() is None:
                req = urllib.request.Request(self.url('/v1/completions'), data=body, headers={'Content-Type': 'application/json'})
                try:
                    urllib.request.urlopen(req, timeout=60).read()
                except Exception:  # pylint: disable=broad-except
                    return
        for _i in range(n):
            threading.Thread(target=client, daemon=True).start()

    def stop(self):
        self.proc.kill()
        self.proc.wait(5)


class FakeSystem(object):
    """systemctl show/restart of the two units, docker inspect/top, journalctl, over the fake ssh too."""

    def __init__(self):
        self.calls = []

    def __call__(self, argv, timeout=30):
        remote = argv[:len(SSH)] == SSH
        cmd = argv[len(SSH):] if remote else argv
        self.calls.append(('remote' if remote else 'local', tuple(cmd)))
        if cmd[0] == 'systemctl' and cmd[1] == 'show':
            inv = 'w1' if remote else 'h1'
            return 0, 'ActiveState=active\nSubState=running\nInvocationID=%s\n' % inv, ''
        if cmd[0].endswith('docker') and cmd[1] == 'inspect':
            return 0, 'true\n', ''
        return 0, 'ok\n', ''

    def restarts(self):
        return [c for w, c in self.calls if c[:2] == ('systemctl', 'restart')]


def _cfg(tmp_path, sim):
    record = tmp_path / 'pair-head.json'
    record.write_text(json.dumps({'workers': {'spark2': 'w1'}}))
    return {'head_unit': 'dgxspark-ds4-head.service', 'head_name': 'spark1', 'pair_state_file': str(record),
            'peers': [{'name': 'spark2', 'unit': 'dgxspark-ds4-worker.service', 'ssh': SSH, 'container': 'dgxspark-ds4-worker'}],
            'max_restarts': 3, 'window_s': 1800, 'hang_watchdog': True, 'hang_after_s': HANG_AFTER, 'hang_poll_s': POLL,
            'metrics_url': sim.url('/metrics'), 'metrics_timeout_s': 2, 'evidence_dir': str(tmp_path / 'evidence'),
            'state_file': str(tmp_path / 'pairguard-state.json'), 'textfile': str(tmp_path / 'guard.prom'),
            'docker': 'docker', 'container': 'dgxspark-ds4-head', 'journal_lines': 20}


def _gen_tokens(sim):
    text = urllib.request.urlopen(sim.url('/metrics'), timeout=5).read().decode()
    samples = pairguard.parse_prometheus(text)
    return pairguard.metric_total(samples, 'vllm:generation_tokens_total') or 0.0


def _watch(watch, seconds, until=None):
    """Run the guard loop (poll every 0.1 s like a short interval_s) for up to seconds; returns (action, time)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        action = watch.step()
        if action:
            return action, time.monotonic()
        if until is not None and until():
            return None, time.monotonic()
        time.sleep(0.1)
    return None, time.monotonic()


def test_runtime_wedge_under_load_is_detected_in_time_with_evidence(tmp_path):
    # 410, not a multiple of the two clients' 40-token requests: the step scheduler decodes them in lockstep, and a
    # wedge at 400 could fall exactly between requests, with nothing running (a different case: no request to hang)
    sim = Sim({'VLLM_SIM_WEDGE_AFTER_TOKENS': '410', 'VLLM_SIM_TOKENS_PER_S': '100'})
    try:
        fake = FakeSystem()
        watch = pairguard.Watch(_cfg(tmp_path, sim), runner=fake)
        sim.load('serve some tokens', 40)
        # follow the generation counter from here to find when progress stopped (the wedge)
        last_value, last_change = -1.0, time.monotonic()
        deadline = time.monotonic() + 30
        action = None
        while time.monotonic() < deadline:
            value = _gen_tokens(sim)
            if value != last_value:
                last_value, last_change = value, time.monotonic()
            action = watch.step()
            if action:
                break
            time.sleep(0.1)
        detected = time.monotonic()
        delay = detected - last_change
        print('\nwedge at %d generated tokens; detected %.2f s after the last progress (hang_after_s %.1f, poll %.1f)'
              % (last_value, delay, HANG_AFTER, POLL))
        assert action == 'restart' and last_value == 410.0
        assert HANG_AFTER - 0.3 <= delay <= HANG_AFTER + POLL + 1.0
        assert fake.restarts() == [('systemctl', 'restart', '--no-block', 'dgxspark-ds4-head.service')]
        assert watch.evidence_wait(20)      # collected by a child after the restart was issued
        evidence = os.listdir(str(tmp_path / 'evidence'))
        assert len(evidence) == 1
        files = os.listdir(str(tmp_path / 'evidence' / evidence[0]))
        assert {'metrics-before.txt', 'metrics-after.txt', 'summary.json', 'journal-spark1.txt', 'journal-spark2.txt',
                'docker-top-spark1.txt', 'py-spy-spark2.txt', 'meminfo-spark1.txt', 'meminfo-spark2.txt'} <= set(files)
        after = open(str(tmp_path / 'evidence' / evidence[0] / 'metrics-after.txt')).read()
        assert 'vllm:generation_tokens_total{engine="0",model_name="/models/ds4"} 410.0' in after
        summary = json.load(open(str(tmp_path / 'evidence' / evidence[0] / 'summary.json')))
        assert summary['kind'] == 'stall' and summary['running'] >= 1 and summary['generation_tokens'] == 410
        state = json.load(open(str(tmp_path / 'pairguard-state.json')))
        assert state['hangs_total'] == 1 and state['last_cause'] == 'hang_no_tokens'
    finally:
        sim.stop()


def _prefill_in_background(sim, tokens, done):
    def request():
        body = json.dumps({'prompt': 'read this [[vllm-sim:prompt_tokens=%d]]' % tokens, 'max_tokens': 4}).encode()
        req = urllib.request.Request(sim.url('/v1/completions'), data=body, headers={'Content-Type': 'application/json'})
        try:
            done['status'] = urllib.request.urlopen(req, timeout=60).status
        except Exception as exc:  # pylint: disable=broad-except
            done['error'] = exc
    thread = threading.Thread(target=request, daemon=True)
    thread.start()
    return thread


def _kv_and_counters(sim):
    samples = pairguard.parse_prometheus(urllib.request.urlopen(sim.url('/metrics'), timeout=5).read().decode())
    return pairguard.progress_values(samples)


def test_a_prefill_wedged_half_way_is_caught_within_the_window_plus_one_poll(tmp_path):
    # 60000 prompt tokens at 6000 tokens/s in 2000-token chunks: KV usage rises every 0.33 s, no counter moves;
    # wedged after about 2 s the KV usage stops too: a hang within hang_after_s + hang_poll_s (+ scheduling slack).
    sim = Sim({'VLLM_SIM_PREFILL_TOKENS_PER_S': '6000', 'VLLM_SIM_PREFILL_CHUNK_TOKENS': '2000'})
    try:
        fake = FakeSystem()
        watch = pairguard.Watch(_cfg(tmp_path, sim), runner=fake)
        done = {}
        _prefill_in_background(sim, 60000, done)
        action, _t = _watch(watch, 2.0)
        assert action is None
        req = urllib.request.Request(sim.url('/sim/wedge'), data=b'{}', headers={'Content-Type': 'application/json'})
        assert json.loads(urllib.request.urlopen(req, timeout=5).read())['wedge_at_tokens'] == 0
        last, last_change = _kv_and_counters(sim), time.monotonic()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            now = _kv_and_counters(sim)
            if now != last:
                last, last_change = now, time.monotonic()
            action = watch.step()
            if action:
                break
            time.sleep(0.1)
        delay = time.monotonic() - last_change
        print('\nprefill wedged at KV usage %.4f; detected %.2f s after the last change' % (last[3], delay))
        assert action == 'restart' and last[:3] == (0.0, 0.0, 0.0) and last[3] > 0.0
        assert HANG_AFTER - 0.3 <= delay <= HANG_AFTER + POLL + 1.0
        assert watch.evidence_wait(20)
    finally:
        sim.stop()


def test_long_prefill_longer_than_hang_after_is_not_restarted(tmp_path):
    # 36000 prompt tokens at 6000 tokens/s in 2000-token chunks: 6 s of prefill, no token, twice hang_after_s
    sim = Sim({'VLLM_SIM_PREFILL_TOKENS_PER_S': '6000', 'VLLM_SIM_PREFILL_CHUNK_TOKENS': '2000'})
    try:
        fake = FakeSystem()
        watch = pairguard.Watch(_cfg(tmp_path, sim), runner=fake)
        done = {}

        def request():
            body = json.dumps({'prompt': 'read this [[vllm-sim:prompt_tokens=36000]]', 'max_tokens': 4}).encode()
            req = urllib.request.Request(sim.url('/v1/completions'), data=body, headers={'Content-Type': 'application/json'})
            done['status'] = urllib.request.urlopen(req, timeout=60).status
        thread = threading.Thread(target=request, daemon=True)
        thread.start()
        action, _t = _watch(watch, 12, until=lambda: 'status' in done)
        thread.join(10)
        assert action is None and done.get('status') == 200
        assert fake.restarts() == [] and not os.path.exists(str(tmp_path / 'evidence'))
    finally:
        sim.stop()
