# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the hang watchdog of roles/vllm_service/files/pairguard.py (a pair that serves nothing while /health stays 200).

A fake /metrics endpoint (the text a test sets, or an error), a fake clock and a fake systemd +
docker + ssh runner: the tests show when a hang is declared, what the evidence directory holds,
which rank is restarted, and that the guard's storm limit also bounds hang restarts.
"""


import http.server
import json
import os
import threading
import time

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import bench_stats
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import cli as pg_cli
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import config as pg_config
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import hang as pg_hang
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import jobs as pg_jobs
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import pair as pg_pair
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import watch as pg_watch

SSH = ['ssh', '-i', '/etc/dgxspark-ds4/peer/id_ed25519', 'root@10.77.0.12']
HEAD = 'dgxspark-ds4-head.service'
WORKER = 'dgxspark-ds4-worker.service'


def metrics(running=0, gen=0, prompt=0, steps=0, waiting=0, kv=0.0):
    """vLLM-shaped exposition (labels, HELP/TYPE, histogram _count) of the series the watchdog reads; kv=None leaves
    out vllm:kv_cache_usage_perc (a vLLM that does not publish it)."""
    base = 'engine="0",model_name="deepseek-v4-flash"'
    kv_lines = [] if kv is None else ['# TYPE vllm:kv_cache_usage_perc gauge', 'vllm:kv_cache_usage_perc{%s} %r' % (base, kv)]
    return '\n'.join(kv_lines + [
        '# HELP vllm:num_requests_running Number of requests in model execution batches.',
        '# TYPE vllm:num_requests_running gauge',
        'vllm:num_requests_running{%s} %s' % (base, float(running)),
        'vllm:num_requests_waiting{%s} %s' % (base, float(waiting)),
        '# TYPE vllm:generation_tokens counter',
        'vllm:generation_tokens_total{%s} %s' % (base, float(gen)),
        'vllm:prompt_tokens_total{%s} %s' % (base, float(prompt)),
        '# TYPE vllm:iteration_tokens_total histogram',
        'vllm:iteration_tokens_total_bucket{%s,le="+Inf"} %s' % (base, float(steps)),
        'vllm:iteration_tokens_total_count{%s} %s' % (base, float(steps)),
        'vllm:iteration_tokens_total_sum{%s} %s' % (base, float(gen + prompt)),
    ]) + '\n'


class Endpoint(object):
    """Fake /metrics: returns self.text, or raises self.error."""

    def __init__(self, text=None):
        self.text = text if text is not None else metrics()
        self.error = None
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.error is not None:
            raise self.error
        return self.text


class Clock(object):
    def __init__(self):
        self.now = 1764000000.0

    def __call__(self):
        return self.now


class FakeNodes(object):
    """systemctl (head local, worker over ssh), docker inspect/top/exec, journalctl, nvidia-smi, cat."""

    def __init__(self, worker_inv='w1', container_running=True):
        self.units = {('local', HEAD): {'ActiveState': 'active', 'SubState': 'running', 'InvocationID': 'h1'},
                      (SSH[-1], WORKER): {'ActiveState': 'active', 'SubState': 'running', 'InvocationID': worker_inv}}
        self.container_running = container_running
        self.calls = []
        self.n = 1

    def __call__(self, argv, timeout=30):
        where = 'local'
        if argv[:len(SSH)] == SSH:
            where, argv = SSH[-1], argv[len(SSH):]
        self.calls.append((where, tuple(argv)))
        cmd = argv[0]
        if cmd == 'systemctl':
            unit = self.units[(where, argv[-1])]
            if argv[1] == 'show':
                return 0, ''.join('%s=%s\n' % kv for kv in sorted(unit.items())), ''
            if argv[1] == 'restart':
                self.n += 1
                unit['InvocationID'] = 'new%d' % self.n
            if argv[1] == 'stop':
                unit['ActiveState'] = 'inactive'
            return 0, '', ''
        if cmd.endswith('docker') and argv[1] == 'inspect':
            return 0, 'true\n' if self.container_running else 'false\n', ''
        if cmd.endswith('docker') and argv[1] == 'top':
            return 0, 'UID PID PPID C STIME TTY TIME CMD\nroot 4242 1 99 01:00 ? 00:10:00 VLLM::EngineCore (%s)\n' % where, ''
        if cmd == 'journalctl':
            return 0, '2026-11-24T01:00:00+0000 %s vllm[1]: (APIServer pid=1) INFO Avg generation throughput: 0.0 tokens/s\n' % where, ''
        if cmd == 'nvidia-smi':
            return 127, '', '[Errno 2] No such file or directory: nvidia-smi'
        if cmd == 'cat':
            return 0, 'MemTotal:       127535616 kB\nMemFree:         2000000 kB\n', ''
        if cmd == 'sh' or 'py-spy' in ' '.join(argv):
            return 0, 'py-spy is not in the image of dgxspark-ds4-x (no stack dump)\n', ''
        return 1, '', 'unexpected command %r' % (argv,)

    def actions(self):
        return [(w, a[1], a[-1]) for w, a in self.calls if a[0] == 'systemctl' and a[1] != 'show']


def cfg(tmp_path, **over):
    record = str(tmp_path / 'pair-head.json')
    with open(record, 'w') as fh:
        json.dump({'workers': {'spark2': 'w1'}}, fh)
    meminfo = tmp_path / 'meminfo'
    meminfo.write_text('MemTotal:       127535616 kB\nMemFree:        1000000 kB\nMemAvailable:  90000000 kB\n')
    c = {'head_unit': HEAD, 'head_name': 'spark1', 'pair_state_file': record, 'max_restarts': 2, 'window_s': 1800,
         'unreachable_polls': 3, 'hang_watchdog': True, 'hang_after_s': 120, 'hang_poll_s': 5,
         'metrics_url': 'http://127.0.0.1:8000/metrics', 'metrics_timeout_s': 10, 'docker': '/usr/bin/docker',
         'container': 'dgxspark-ds4-head', 'evidence_dir': str(tmp_path / 'evidence'), 'journal_lines': 50,
         'meminfo_path': str(meminfo), 'state_file': str(tmp_path / 'pairguard-state.json'),
         'textfile': str(tmp_path / 'textfile' / 'dgxspark_ds4_guard.prom'),
         'peers': [{'name': 'spark2', 'addr': '10.77.0.12', 'unit': WORKER, 'ssh': SSH,
                    'container': 'dgxspark-ds4-worker'}]}
    c.update(over)
    return c


def run_for(watch, clock, seconds, step_s=5, on_tick=None):
    """Poll every step_s for seconds; returns [(elapsed, action)] of the polls that acted."""
    acted = []
    start = clock.now
    while clock.now - start < seconds:
        if on_tick:
            on_tick(clock.now - start)
        result = watch.step()
        if result:
            acted.append((clock.now - start, result))
        clock.now += step_s
    return acted


# --------------------------------------------------------------------------- parsing
def test_prometheus_text_parsed_with_labels_escapes_and_histograms():
    text = ('# HELP x y\n# TYPE vllm:num_requests_running gauge\n'
            'vllm:num_requests_running{engine="0",model_name="a \\"b\\""} 3.0\n'
            'vllm:num_requests_running{engine="1",model_name="m"} 2\n'
            'vllm:iteration_tokens_total_count{engine="0"} 17 1764000000000\n'
            'garbage line here\nvllm:kv_cache_usage_perc NaN\n')
    samples = bench_stats.parse_prometheus(text)
    assert {'name': 'vllm:num_requests_running', 'labels': {'engine': '0', 'model_name': 'a "b"'}, 'value': 3.0} in samples
    assert pg_hang.metric_total(samples, 'vllm:num_requests_running') == 5.0
    assert pg_hang.metric_total(samples, 'vllm:iteration_tokens_total_count') == 17.0
    assert pg_hang.metric_total(samples, 'vllm:kv_cache_usage_perc') is None
    assert pg_hang.metric_total(samples, 'vllm:absent') is None


def test_fetch_metrics_from_a_real_http_endpoint():
    body = metrics(running=1, gen=5).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # pylint: disable=invalid-name
            code = 200 if self.path == '/metrics' else 404
            self.send_response(code)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # pylint: disable=arguments-differ
            return

    server = http.server.HTTPServer(('127.0.0.1', 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        assert 'vllm:generation_tokens_total' in pg_hang.fetch_metrics('http://127.0.0.1:%d/metrics' % port, 5)
        with pytest.raises(pg_pair.GuardError, match='HTTP 404'):
            pg_hang.fetch_metrics('http://127.0.0.1:%d/nothing' % port, 5)
    finally:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------- detection
def test_hang_detected_after_hang_after_s_not_before(tmp_path, capsys):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=0, gen=1000, prompt=500, steps=300))
    watch = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    assert run_for(watch, clock, 60) == []          # idle: never a hang
    endpoint.text = metrics(running=3, gen=1000, prompt=500, steps=300)  # wedged: running, nothing moves
    acted = run_for(watch, clock, 200)
    assert acted == [(120, 'restart')]
    assert fake.actions() == [('local', 'restart', HEAD)]     # the head's prestart then restarts the worker first
    out = [ln for ln in capsys.readouterr().out.splitlines() if 'hang' in ln]
    assert len(out) == 1                                       # ONE journal line for the hang, with the numbers
    assert ('hang: 3 requests running, generation tokens stuck at 1000, prompt tokens at 500, engine steps at 300, '
            'KV cache usage at 0.0000 for 120 s (limit 120 s); evidence in %s/hang-' % c['evidence_dir']) in out[0]
    assert watch.evidence_wait(10)
    assert out[0].endswith('restarting dgxspark-ds4-head.service so both ranks restart, worker first')


def test_decoding_pair_is_never_a_hang(tmp_path):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint()
    watch = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)

    def tick(t):
        endpoint.text = metrics(running=4, gen=int(t) * 40, prompt=100, steps=int(t) * 10)
    assert run_for(watch, clock, 900, on_tick=tick) == []
    assert fake.actions() == []


# --------------------------------------------------------------------------- long prefill as real vLLM shows it
# Real vLLM 0.26.0 on the GPU (real-vllm-on-device notes, Part 1 §2): a 261,888-token chunked prefill, /metrics polled
# 83 times before the first token: prompt tokens stood at 32,776, generation tokens at 9, iteration_tokens_total_count
# at 9 (_sum 32,785), num_requests_running 1, and only vllm:kv_cache_usage_perc moved, rising at every poll from
# 0.0004 to 0.064. At the first token everything jumped at once.
REAL_PREFILL_POLLS = 83
REAL_KV_FIRST, REAL_KV_LAST = 0.0004, 0.064


def real_prefill_trace(polls=REAL_PREFILL_POLLS, kv_flat=False):
    """The recorded shape: counters frozen, kv usage rising every poll (or flat: the same trace wedged)."""
    out = []
    for i in range(polls):
        kv = REAL_KV_FIRST if kv_flat else REAL_KV_FIRST + (REAL_KV_LAST - REAL_KV_FIRST) * i / (polls - 1)
        out.append(metrics(running=1, gen=9, prompt=32776, steps=9, kv=round(kv, 6)))
    return out


def test_detector_replaying_the_real_long_prefill_sees_no_hang_for_the_whole_prefill(tmp_path):
    """The 83 recorded polls, stretched to the watchdog's 5 s poll (415 s: a prefill four times the 120 s window,
    like seed 001's 16.6 minutes to the first token at 980K tokens): never a hang; the first token ends it."""
    detector = pg_hang.HangDetector(cfg(tmp_path), fetch=None)
    trace = real_prefill_trace()
    now = 0.0
    for text in trace:
        detector.fetch = lambda text=text: text
        assert detector.poll(now) is None, now
        assert detector.stalled_s(now) <= 5.0
        now += 5.0
    assert now > 3 * detector.after
    detector.fetch = lambda: metrics(running=1, gen=10, prompt=32776 + 261888, steps=10, kv=0.064)
    assert detector.poll(now) is None


def test_detector_catches_the_same_trace_wedged_within_the_window_plus_one_poll(tmp_path):
    """Running 1, counters frozen and kv usage flat (a wedge in the middle of a prefill): a hang within
    hang_after_s + hang_poll_s of the last progress."""
    detector = pg_hang.HangDetector(cfg(tmp_path), fetch=None)
    found, now = None, 0.0
    for text in real_prefill_trace(kv_flat=True):
        detector.fetch = lambda text=text: text
        found = detector.poll(now)
        if found:
            break
        now += 5.0
    assert found is not None and found['kind'] == 'stall' and found['cause'] == 'hang_no_tokens'
    assert 120.0 <= now <= 120.0 + 5.0
    assert found['kv_cache_usage'] == REAL_KV_FIRST and found['prompt_tokens'] == 32776 and found['running'] == 1
    assert 'KV cache usage at 0.0004 for 120 s (limit 120 s)' in found['why']


def test_watch_leaves_a_seed_001_sized_prefill_alone(tmp_path):
    """980K tokens in 16.6 min (seed 001), chunks of 8192 tokens (8.3 s each at that rate): kv usage moves once a
    chunk, so some 5 s polls see nothing move; the window (>= one chunk) keeps it alive, no restart, no evidence."""
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint()
    watch = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    rate = 980000 / (16.6 * 60)

    def tick(t):
        chunks = int(t * rate // 8192)
        endpoint.text = metrics(running=1, gen=0, prompt=0, steps=0, kv=round(min(980000, chunks * 8192) / 4.0e6, 6))
    assert run_for(watch, clock, 16.6 * 60, on_tick=tick) == []
    assert fake.actions() == [] and not os.path.exists(c['evidence_dir'])


def test_without_a_kv_usage_series_the_window_is_the_longest_prefill(tmp_path):
    """A vLLM that does not publish vllm:kv_cache_usage_perc shows nothing moving during a prefill: only
    hang_after_no_kv_s (the longest prefill the recipe allows) makes a hang then."""
    c = cfg(tmp_path, hang_after_no_kv_s=600)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=1, gen=5, prompt=7, steps=3, kv=None))
    watch = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    assert run_for(watch, clock, 700) == [(600, 'restart')]
    assert watch.evidence_wait(10)


def test_api_silent_while_container_runs_is_a_hang(tmp_path, capsys):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=0))
    watch = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    assert run_for(watch, clock, 30) == []
    endpoint.error = OSError('timed out')
    assert run_for(watch, clock, 200) == [(120, 'restart')]
    assert 'hang: the API has not answered /metrics for 120 s (limit 120 s; last error OSError: timed out)' in capsys.readouterr().out


def test_api_not_yet_listening_after_a_start_is_not_a_hang(tmp_path):
    """vLLM refuses connections for the whole load (vllm-ops 1.1): never counted before a first answer."""
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint()
    endpoint.error = ConnectionRefusedError(111, 'Connection refused')
    watch = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    assert run_for(watch, clock, 1800) == []


def test_silence_with_the_container_gone_is_left_to_systemd(tmp_path):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes(container_running=False)
    endpoint = Endpoint(metrics())
    watch = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    run_for(watch, clock, 10)
    endpoint.error = OSError('refused')
    assert run_for(watch, clock, 300) == []
    assert fake.actions() == []


def test_a_new_head_invocation_restarts_the_clock(tmp_path):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=2, gen=10))
    watch = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    assert run_for(watch, clock, 100) == []
    fake.units[('local', HEAD)]['InvocationID'] = 'h2'          # restarted by someone else
    assert run_for(watch, clock, 100) == []
    assert run_for(watch, clock, 30) == [(20, 'restart')]        # 120 s after the new head was first seen


# --------------------------------------------------------------------------- storm limit, off switch
def test_repeated_hangs_stop_at_the_storm_limit_with_the_cause_named(tmp_path, capsys):
    c = cfg(tmp_path, max_restarts=2)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=1, gen=7))
    watch = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    results = []
    for _i in range(3):
        fake.units[('local', HEAD)]['ActiveState'] = 'active'
        results += [a for _t, a in run_for(watch, clock, 130)]
    assert results == ['restart', 'restart', 'stop']
    assert fake.actions()[-2:] == [('local', 'stop', HEAD), ('root@10.77.0.12', 'stop', WORKER)]
    out = capsys.readouterr().out
    assert 'hang: 1 requests running, generation tokens stuck at 7' in out
    assert '2 pair restarts within 1800s already: stopping dgxspark-ds4-head.service instead of feeding a crash loop' in out
    state = json.load(open(c['state_file']))
    assert state['hangs_total'] == 3 and state['restarts_total'] == 2 and state['storm_stops_total'] == 1
    assert state['last_cause'] == 'hang_no_tokens' and state['last_action'] == 'stop'
    assert len(os.listdir(c['evidence_dir'])) == 3
    assert watch.evidence_wait(10)


def test_the_storm_window_survives_a_guard_restart(tmp_path, capsys):
    """Two hang restarts by one guard process, then the guard restarts (crash, upgrade): the next hang within the
    window stops the pair instead of restarting it a third time."""
    c = cfg(tmp_path, max_restarts=2)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=1, gen=7))
    first = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    for _i in range(2):
        fake.units[('local', HEAD)]['ActiveState'] = 'active'
        assert [a for _t, a in run_for(first, clock, 130)] == ['restart']
    assert first.evidence_wait(10)
    assert len(json.load(open(c['state_file']))['restart_times']) == 2
    second = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    fake.units[('local', HEAD)]['ActiveState'] = 'active'
    assert [a for _t, a in run_for(second, clock, 130)] == ['stop']
    assert '2 pair restarts within 1800s already' in capsys.readouterr().out
    assert second.evidence_wait(10)
    # past the window the old restarts no longer count
    clock.now += 1800
    third = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    fake.units[('local', HEAD)]['ActiveState'] = 'active'
    fake.units[(SSH[-1], WORKER)]['ActiveState'] = 'active'   # the pair is started again after the storm stop
    assert [a for _t, a in run_for(third, clock, 130)] == ['restart']
    assert third.evidence_wait(10)


def test_a_deliberate_pair_restart_clears_the_storm_window_even_while_the_guard_runs(tmp_path, capsys):
    """restart.yml (the restart contract) runs `pairguard.py reset-window CONFIG`, like systemctl reset-failed for
    the start limit: after a storm stop the pair is brought back and the next hang restarts it again."""
    c = cfg(tmp_path, max_restarts=1)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=1, gen=7))
    watch = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    assert [a for _t, a in run_for(watch, clock, 130)] == ['restart']
    config = tmp_path / 'pairguard.json'
    config.write_text(json.dumps(c))
    assert pg_cli.main(['pairguard.py', 'reset-window', str(config)]) == 0
    assert 'storm window cleared (1 pair restarts forgotten)' in capsys.readouterr().out
    state = json.load(open(c['state_file']))
    assert state['restart_times'] == [] and state['restarts_total'] == 1      # counters kept
    fake.units[('local', HEAD)]['ActiveState'] = 'active'
    assert [a for _t, a in run_for(watch, clock, 130)] == ['restart']       # not 'stop': the running guard re-read it
    assert [a for _t, a in run_for(watch, clock, 130)] == ['stop']
    assert watch.evidence_wait(10)


def test_evidence_never_blocks_the_guard_loop(tmp_path):
    """Evidence commands that hang (a wedged docker exec, ssh to a dead node): the restart is issued in the same
    poll that found the hang, at once; the child collecting the evidence is killed at evidence_timeout_s."""
    c = cfg(tmp_path, evidence_timeout_s=1)
    clock, fake = Clock(), FakeNodes()

    def slow(argv, timeout=30):
        if argv[0] in ('journalctl', 'nvidia-smi') or 'journalctl' in argv:
            time.sleep(30)
        return fake(argv, timeout)
    endpoint = Endpoint(metrics(running=1, gen=7))
    watch = pg_watch.Watch(c, runner=slow, clock=clock, fetch=endpoint)
    assert run_for(watch, clock, 120) == []
    started = time.monotonic()
    assert watch.step() == 'restart'
    assert time.monotonic() - started < 1.0
    assert fake.actions() == [('local', 'restart', HEAD)]
    assert watch.evidence_wait(10)
    assert time.monotonic() - started < 5.0
    path = os.path.join(c['evidence_dir'], os.listdir(c['evidence_dir'])[0])
    assert 'stopped at its deadline (1 s)' in open(os.path.join(path, 'INCOMPLETE')).read()
    assert os.path.exists(os.path.join(path, 'metrics-before.txt'))


def test_a_head_that_exits_by_itself_is_counted_in_the_storm_window(tmp_path, capsys):
    """vLLM exits 0 after an engine death; systemd (Restart=always) restarts the head, whose prestart restarts the
    worker first. The guard does not restart it again, but counts it: past max_restarts it stops the pair."""
    c = cfg(tmp_path, max_restarts=2)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=0))
    head = fake.units[('local', HEAD)]
    head['NRestarts'] = '4'
    watch = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    assert run_for(watch, clock, 20) == []                     # the first count seen is the baseline
    results = []
    for n in ('5', '6', '7'):
        head.update(NRestarts=n, ActiveState='active', InvocationID='h' + n)
        results += [a for _t, a in run_for(watch, clock, 20)]
    assert results == ['restart', 'restart', 'stop']
    assert fake.actions() == [('local', 'stop', HEAD), ('root@10.77.0.12', 'stop', WORKER)]   # no extra restart
    out = capsys.readouterr().out
    assert ('dgxspark-ds4-head.service exited by itself and systemd restarted it (NRestarts 4 -> 5; vLLM exits 0 after '
            'an engine death') in out
    assert 'its prestart restarts the worker first (pair restart 1 of 2 within 1800s)' in out
    state = json.load(open(c['state_file']))
    assert state['restarts_by_cause']['head_exited'] == 2 and state['last_action'] == 'stop'


def test_guard_config_refuses_bad_values_naming_the_variable():
    good = {'head_unit': HEAD, 'hang_watchdog': True, 'hang_after_s': 120, 'hang_after_no_kv_s': 2700, 'hang_poll_s': 5,
            'max_restarts': 3, 'window_s': 1800, 'interval_s': 5, 'evidence_timeout_s': 120}
    assert pg_config.check_config(good) == []
    problems = pg_config.check_config(dict(good, hang_after_s=0, evidence_timeout_s='soon'))
    assert problems == [
        "hang_after_s = 0: must be a number >= 1. Fix: set vllm_service_hang_after_s (with "
        "vllm_service_hang_prefill_tokens_per_s) and re-run the role",
        "evidence_timeout_s = 'soon': must be a number >= 1. Fix: set vllm_service_hang_evidence_timeout_s and re-run the role"]
    assert 'shorter than two polls' in pg_config.check_config(dict(good, hang_after_s=8))[0]


def test_guard_main_refuses_a_bad_config(tmp_path, capsys):
    path = tmp_path / 'pairguard.json'
    path.write_text(json.dumps({'head_unit': HEAD, 'hang_poll_s': -1}))
    assert pg_cli.main(['pairguard.py', 'watch', str(path)]) == 2
    assert 'hang_poll_s = -1: must be a number >= 1. Fix: set vllm_service_hang_poll_s' in capsys.readouterr().err


def test_watchdog_off_never_scrapes_or_restarts(tmp_path):
    c = cfg(tmp_path, hang_watchdog=False)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=5, gen=1))
    watch = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    assert run_for(watch, clock, 1000) == []
    assert endpoint.calls == 0 and fake.actions() == []
    assert 'dgxspark_ds4_guard_watchdog_enabled 0' in open(c['textfile']).read()


def test_worker_death_still_wins_over_the_watchdog(tmp_path):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes(worker_inv='w9')
    endpoint = Endpoint(metrics(running=1, gen=1))
    watch = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    assert watch.step() == 'restart'
    assert endpoint.calls == 0
    assert json.load(open(c['state_file']))['last_cause'] == 'worker_restarted'


# --------------------------------------------------------------------------- evidence, state export
def test_evidence_directory_holds_metrics_journals_top_stacks_and_memory_of_both_ranks(tmp_path):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=2, gen=50, prompt=20, steps=9))
    watch = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    run_for(watch, clock, 125)
    # the restart does not wait for the evidence: it is issued at once; the evidence child finishes on its own
    assert fake.actions() == [('local', 'restart', HEAD)]
    assert watch.evidence_wait(10)
    dirs = os.listdir(c['evidence_dir'])
    assert len(dirs) == 1 and dirs[0].startswith('hang-20') and dirs[0].endswith('Z')
    path = os.path.join(c['evidence_dir'], dirs[0])
    assert sorted(os.listdir(path)) == sorted(
        ['summary.json', 'metrics-before.txt', 'metrics-after.txt']
        + ['%s-%s.txt' % (kind, node) for kind in ('journal', 'docker-top', 'py-spy', 'nvidia-smi', 'meminfo')
           for node in ('spark1', 'spark2')])
    assert 'vllm:generation_tokens_total{engine="0",model_name="deepseek-v4-flash"} 50.0' in open(os.path.join(path, 'metrics-before.txt')).read()
    assert 'vllm:num_requests_running' in open(os.path.join(path, 'metrics-after.txt')).read()
    assert 'journalctl -u dgxspark-ds4-worker.service -n 50' in open(os.path.join(path, 'journal-spark2.txt')).read()
    assert 'root@10.77.0.12' in open(os.path.join(path, 'journal-spark2.txt')).read()
    assert 'VLLM::EngineCore (local)' in open(os.path.join(path, 'docker-top-spark1.txt')).read()
    assert 'py-spy is not in the image' in open(os.path.join(path, 'py-spy-spark2.txt')).read()
    assert 'MemFree:        1000000 kB' in open(os.path.join(path, 'meminfo-spark1.txt')).read()
    assert 'MemFree:         2000000 kB' in open(os.path.join(path, 'meminfo-spark2.txt')).read()
    assert '# rc 127' in open(os.path.join(path, 'nvidia-smi-spark1.txt')).read()
    summary = json.load(open(os.path.join(path, 'summary.json')))
    assert summary['kind'] == 'stall' and summary['running'] == 2 and summary['generation_tokens'] == 50
    assert summary['nodes'] == ['spark1', 'spark2'] and summary['stalled_s'] == 120
    assert not os.path.exists(os.path.join(path, 'INCOMPLETE'))


def test_evidence_when_metrics_do_not_answer_anymore(tmp_path):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=1, gen=3))
    hang = {'kind': 'stall', 'before_text': None}
    endpoint.error = OSError('timed out')
    path = pg_jobs.collect_evidence(c, hang, fake, endpoint, clock.now)
    assert '# no successful scrape before the hang' in open(os.path.join(path, 'metrics-before.txt')).read()
    assert 'did not answer at evidence time: OSError: timed out' in open(os.path.join(path, 'metrics-after.txt')).read()
    again = pg_jobs.collect_evidence(c, hang, fake, endpoint, clock.now)
    assert again != path and again.endswith('-2')


def test_state_file_and_textfile_export(tmp_path):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=1, gen=3))
    watch = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    run_for(watch, clock, 125)
    prom = open(c['textfile']).read()
    assert 'dgxspark_ds4_guard_restarts_total{cause="hang_no_tokens"} 1' in prom
    assert 'dgxspark_ds4_guard_restarts_total{cause="worker_down"} 0' in prom      # every cause from 0 on
    assert 'dgxspark_ds4_guard_hangs_total 1' in prom
    assert 'dgxspark_ds4_guard_last_hang_timestamp_seconds %d' % (clock.now - 5) in prom
    assert 'dgxspark_ds4_guard_last_cause_info{cause="hang_no_tokens",action="restart"} 1' in prom
    assert 'dgxspark_ds4_guard_rank_up{role="head",node="spark1"} 1' in prom
    assert 'dgxspark_ds4_guard_rank_up{role="worker",node="spark2"} 1' in prom
    assert 'dgxspark_ds4_guard_watchdog_enabled 1' in prom
    assert not [f for f in os.listdir(os.path.dirname(c['textfile'])) if f.endswith('.tmp')]
    # every sample line parses as Prometheus text, with HELP and TYPE for each family
    samples = bench_stats.parse_prometheus(prom)
    assert len(samples) == len([ln for ln in prom.splitlines() if ln and not ln.startswith('#')])
    assert prom.count('# TYPE ') == prom.count('# HELP ') == 12  # 10 + dgxspark_ds4_memguard_enabled, dgxspark_ds4_canary_enabled (both off)
    # a new guard process keeps the counters
    again = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    assert again.state.data['hangs_total'] == 1 and again.state.data['last_hang_evidence'].startswith(c['evidence_dir'])


def test_stalled_seconds_exported_while_a_stall_builds_up(tmp_path):
    c = cfg(tmp_path, textfile_every_s=0)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=1, gen=3))
    watch = pg_watch.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    run_for(watch, clock, 65)
    assert 'dgxspark_ds4_guard_stalled_seconds 60.0' in open(c['textfile']).read()
