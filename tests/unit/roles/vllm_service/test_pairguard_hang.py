# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the hang watchdog of roles/vllm_service/files/pairguard.py (a pair that serves nothing while /health stays 200).

A fake /metrics endpoint (the text a test sets, or an error), a fake clock and a fake systemd +
docker + ssh runner: the tests show when a hang is declared, what the evidence directory holds,
which rank is restarted, and that the guard's storm limit also bounds hang restarts.
"""

from __future__ import absolute_import, division, print_function

import http.server
import json
import os
import threading

import pytest

from .role_files import load

pairguard = load('pairguard.py')

SSH = ['ssh', '-i', '/etc/dgxspark-ds4/peer/id_ed25519', 'root@10.77.0.12']
HEAD = 'dgxspark-ds4-head.service'
WORKER = 'dgxspark-ds4-worker.service'


def metrics(running=0, gen=0, prompt=0, steps=0, waiting=0):
    """vLLM-shaped exposition (labels, HELP/TYPE, histogram _count) of the series the watchdog reads."""
    base = 'engine="0",model_name="deepseek-v4-flash"'
    return '\n'.join([
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
    samples = pairguard.parse_prometheus(text)
    assert ('vllm:num_requests_running', {'engine': '0', 'model_name': 'a "b"'}, 3.0) in samples
    assert pairguard.metric_total(samples, 'vllm:num_requests_running') == 5.0
    assert pairguard.metric_total(samples, 'vllm:iteration_tokens_total_count') == 17.0
    assert pairguard.metric_total(samples, 'vllm:kv_cache_usage_perc') is None
    assert pairguard.metric_total(samples, 'vllm:absent') is None


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
        assert 'vllm:generation_tokens_total' in pairguard.fetch_metrics('http://127.0.0.1:%d/metrics' % port, 5)
        with pytest.raises(pairguard.GuardError, match='HTTP 404'):
            pairguard.fetch_metrics('http://127.0.0.1:%d/nothing' % port, 5)
    finally:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------- detection
def test_hang_detected_after_hang_after_s_not_before(tmp_path, capsys):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=0, gen=1000, prompt=500, steps=300))
    watch = pairguard.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    assert run_for(watch, clock, 60) == []          # idle: never a hang
    endpoint.text = metrics(running=3, gen=1000, prompt=500, steps=300)  # wedged: running, nothing moves
    acted = run_for(watch, clock, 200)
    assert acted == [(120, 'restart')]
    assert fake.actions() == [('local', 'restart', HEAD)]     # the head's prestart then restarts the worker first
    out = [ln for ln in capsys.readouterr().out.splitlines() if 'hang' in ln]
    assert len(out) == 1                                       # ONE journal line for the hang, with the numbers
    assert ('hang: 3 requests running, generation tokens stuck at 1000, prompt tokens at 500, engine steps at 300 '
            'for 120 s (limit 120 s); evidence in %s/hang-' % c['evidence_dir']) in out[0]
    assert out[0].endswith('restarting dgxspark-ds4-head.service so both ranks restart, worker first')


def test_decoding_pair_is_never_a_hang(tmp_path):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint()
    watch = pairguard.Watch(c, runner=fake, clock=clock, fetch=endpoint)

    def tick(t):
        endpoint.text = metrics(running=4, gen=int(t) * 40, prompt=100, steps=int(t) * 10)
    assert run_for(watch, clock, 900, on_tick=tick) == []
    assert fake.actions() == []


def test_long_prefill_is_not_restarted(tmp_path):
    """A 1M-token prefill: requests running, no generated token for 10 minutes, prompt tokens and steps move."""
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint()
    watch = pairguard.Watch(c, runner=fake, clock=clock, fetch=endpoint)

    def tick(t):
        endpoint.text = metrics(running=1, gen=0, prompt=int(t) * 1700, steps=int(t) // 4)
    assert run_for(watch, clock, 600, on_tick=tick) == []
    assert fake.actions() == []
    assert not os.path.exists(c['evidence_dir'])


def test_steps_alone_keep_it_alive_while_prompt_counter_waits_for_the_end_of_prefill(tmp_path):
    """vLLM counts prompt tokens when a prefill completes; chunked prefill steps still move iteration_tokens_total."""
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint()
    watch = pairguard.Watch(c, runner=fake, clock=clock, fetch=endpoint)

    def tick(t):
        endpoint.text = metrics(running=1, gen=0, prompt=0, steps=int(t))
    assert run_for(watch, clock, 400, on_tick=tick) == []


def test_api_silent_while_container_runs_is_a_hang(tmp_path, capsys):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=0))
    watch = pairguard.Watch(c, runner=fake, clock=clock, fetch=endpoint)
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
    watch = pairguard.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    assert run_for(watch, clock, 1800) == []


def test_silence_with_the_container_gone_is_left_to_systemd(tmp_path):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes(container_running=False)
    endpoint = Endpoint(metrics())
    watch = pairguard.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    run_for(watch, clock, 10)
    endpoint.error = OSError('refused')
    assert run_for(watch, clock, 300) == []
    assert fake.actions() == []


def test_a_new_head_invocation_restarts_the_clock(tmp_path):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=2, gen=10))
    watch = pairguard.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    assert run_for(watch, clock, 100) == []
    fake.units[('local', HEAD)]['InvocationID'] = 'h2'          # restarted by someone else
    assert run_for(watch, clock, 100) == []
    assert run_for(watch, clock, 30) == [(20, 'restart')]        # 120 s after the new head was first seen


# --------------------------------------------------------------------------- storm limit, off switch
def test_repeated_hangs_stop_at_the_storm_limit_with_the_cause_named(tmp_path, capsys):
    c = cfg(tmp_path, max_restarts=2)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=1, gen=7))
    watch = pairguard.Watch(c, runner=fake, clock=clock, fetch=endpoint)
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


def test_watchdog_off_never_scrapes_or_restarts(tmp_path):
    c = cfg(tmp_path, hang_watchdog=False)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=5, gen=1))
    watch = pairguard.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    assert run_for(watch, clock, 1000) == []
    assert endpoint.calls == 0 and fake.actions() == []
    assert 'dgxspark_ds4_guard_watchdog_enabled 0' in open(c['textfile']).read()


def test_worker_death_still_wins_over_the_watchdog(tmp_path):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes(worker_inv='w9')
    endpoint = Endpoint(metrics(running=1, gen=1))
    watch = pairguard.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    assert watch.step() == 'restart'
    assert endpoint.calls == 0
    assert json.load(open(c['state_file']))['last_cause'] == 'worker_restarted'


# --------------------------------------------------------------------------- evidence, state export
def test_evidence_directory_holds_metrics_journals_top_stacks_and_memory_of_both_ranks(tmp_path):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=2, gen=50, prompt=20, steps=9))
    watch = pairguard.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    run_for(watch, clock, 125)
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
    # evidence is taken before the restart
    calls = [a for _w, a in fake.calls]
    assert calls.index(('/usr/bin/docker', 'top', 'dgxspark-ds4-head')) < calls.index(('systemctl', 'restart', '--no-block', HEAD))


def test_evidence_when_metrics_do_not_answer_anymore(tmp_path):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=1, gen=3))
    hang = {'kind': 'stall', 'before_text': None}
    endpoint.error = OSError('timed out')
    path = pairguard.collect_evidence(c, hang, fake, endpoint, clock.now)
    assert '# no successful scrape before the hang' in open(os.path.join(path, 'metrics-before.txt')).read()
    assert 'did not answer at evidence time: OSError: timed out' in open(os.path.join(path, 'metrics-after.txt')).read()
    again = pairguard.collect_evidence(c, hang, fake, endpoint, clock.now)
    assert again != path and again.endswith('-2')


def test_state_file_and_textfile_export(tmp_path):
    c = cfg(tmp_path)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=1, gen=3))
    watch = pairguard.Watch(c, runner=fake, clock=clock, fetch=endpoint)
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
    samples = pairguard.parse_prometheus(prom)
    assert len(samples) == len([ln for ln in prom.splitlines() if ln and not ln.startswith('#')])
    assert prom.count('# TYPE ') == prom.count('# HELP ') == 10
    # a new guard process keeps the counters
    again = pairguard.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    assert again.state.data['hangs_total'] == 1 and again.state.data['last_hang_evidence'].startswith(c['evidence_dir'])


def test_stalled_seconds_exported_while_a_stall_builds_up(tmp_path):
    c = cfg(tmp_path, textfile_every_s=0)
    clock, fake = Clock(), FakeNodes()
    endpoint = Endpoint(metrics(running=1, gen=3))
    watch = pairguard.Watch(c, runner=fake, clock=clock, fetch=endpoint)
    run_for(watch, clock, 65)
    assert 'dgxspark_ds4_guard_stalled_seconds 60.0' in open(c['textfile']).read()
