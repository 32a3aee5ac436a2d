# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A pair that stops generating, and the metrics that show it (after test_drills.py, on the same pair).

Monitoring is on in this scenario (vars/drills.yml): Prometheus on spark1 scrapes the simulator over loopback
and both node exporters over ds4-fabric; the firewall admits its port from the allowed network only.
The hang drills redeploy with a short watchdog (hang_after_s 15 s, poll 1 s) and a storm limit of 2:

1. Prometheus scrapes vLLM, itself and both node exporters (targets up); it listens on the head's loopback only
   (monitoring_allowed_networks empty): spark2 and the controller cannot reach its port;
2. a runtime wedge under load (the simulator stops after serving some tokens; /health stays 200) is detected
   within hang_after_s + 10 s of the last progress, with its evidence kept, and the pair serves again,
   restarted worker first, with no manual step; Prometheus then fires DS4HangRecovered;
3. a long prefill (no counter moving until the first token, as on real vLLM; only the KV-cache usage gauge rises,
   for longer than hang_after_s) is not restarted;
4. repeated hangs stop at the storm limit with the cause named, the worker stopped too; restart.yml recovers.
Durations are printed (pytest -s) for docs/measurements.md.
"""


import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

DRILL_VARS = os.path.join(d.SCENARIO_DIR, 'vars', 'drills.yml')
HANG_AFTER_S = 15
# The window is the larger of hang_after_s and the longest engine step at the assumed prefill rate: here the
# simulator's own rate (VLLM_SIM_PREFILL_TOKENS_PER_S, 5000), so a 16384-token chunk takes 4 s and the floor rules.
HANG_VARS = {'vllm_service_hang_after_s': HANG_AFTER_S, 'vllm_service_hang_poll_s': 1,
             'vllm_service_hang_prefill_tokens_per_s': 5000,
             'vllm_service_pair_guard_max_restarts': 2, 'vllm_service_pair_guard_window_s': 900}
PROMETHEUS = 'http://%s:9090' % d.ip(11)
# Prometheus on the head's loopback (monitoring_allowed_networks empty): read there, as root.
LOCAL_PROMETHEUS = 'http://127.0.0.1:9090'
# vLLM's own port on the head: loopback only, behind the API proxy (the test inventory opens the API to the
# controller, so vLLM moves to 127.0.0.1:8001). /sim/wedge is the simulator's test control, not a vLLM endpoint.
LOCAL_VLLM = 'http://127.0.0.1:8001'
GUARD_UNIT = 'dgxspark-ds4-pairguard.service'
EVIDENCE_DIR = d.STATE_DIR + '/evidence'
HEAD_UNIT = d.unit('head')
WORKER_UNIT = d.unit('worker')


def prom(path):
    body = json.loads(d.node('spark1', 'curl', '-sS', '-m', '10', LOCAL_PROMETHEUS + path))
    assert body['status'] == 'success', body
    return body['data']


def head_metric(name):
    """Sum of a vLLM counter/gauge on the head, read over the head's loopback."""
    text = d.node('spark1', 'curl', '-sS', '-m', '5', LOCAL_VLLM + '/metrics')
    total = None
    for line in text.splitlines():
        if line.startswith(name + '{') or line.startswith(name + ' '):
            total = (total or 0.0) + float(line.rsplit(' ', 1)[1])
    return total


def wedge(after_tokens):
    out = d.node('spark1', 'curl', '-sS', '-m', '5', '-X', 'POST', '-H', 'Content-Type: application/json',
                 '-d', json.dumps({'after_tokens': after_tokens}), LOCAL_VLLM + '/sim/wedge')
    return json.loads(out)


def guard_lines(since_epoch):
    """The pair guard's journal since a moment, as (epoch seconds, message)."""
    out = d.node('spark1', 'journalctl', '-u', GUARD_UNIT, '--no-pager', '-o', 'json', '--since',
                 '@%d' % int(since_epoch), check=False)
    lines = []
    for raw in out.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        message = entry.get('MESSAGE')
        if isinstance(message, list):   # journald gives bytes as a list of ints
            message = bytes(message).decode('utf-8', 'replace')
        lines.append((int(entry['__REALTIME_TIMESTAMP']) / 1e6, message or ''))
    return lines


def evidence_dirs():
    out = d.node('spark1', 'sh', '-c', 'ls -1 %s 2>/dev/null || true' % EVIDENCE_DIR)
    return set(name for name in out.split() if name.startswith('hang-'))


def guard_state():
    return json.loads(d.node('spark1', 'cat', d.STATE_DIR + '/pairguard-state.json'))


class Load(object):
    """Steady client load through the API proxy: n threads sending completions until stopped."""

    def __init__(self, n=2, max_tokens=48):
        self.stop = threading.Event()
        self.body = {'model': 'deepseek-v4-flash', 'prompt': 'Count slowly, one word per line.', 'max_tokens': max_tokens,
                     'temperature': 0}
        self.ok = 0
        self.errors = 0
        self.threads = [threading.Thread(target=self._client, daemon=True) for _i in range(n)]
        for thread in self.threads:
            thread.start()

    def _client(self):
        while not self.stop.is_set():
            try:
                d.request('/v1/completions', self.body, timeout=20)
                self.ok += 1
            except (urllib.error.URLError, ConnectionError, OSError, ValueError):
                self.errors += 1
                time.sleep(0.5)

    def close(self):
        self.stop.set()
        for thread in self.threads:
            thread.join(25)


class Anchor(object):
    """One long streamed completion, decoding when the constructor returns, so that a wedge a few tokens later falls
    inside an engine step with this request running. Without it the wedge can land where every request of the two
    lockstep Load clients has just ended: then nothing runs, the gauges the engine published last show no request (as
    real vLLM's would, its scheduler stats coming from the step before), and the watchdog rightly sees no hang (the
    integration test's wedge at 400 tokens met it; so did the storm drill of a landing CI, which then waited for a
    stop that could not come)."""

    def __init__(self, max_tokens=4000, timeout=60):
        body = {'model': 'deepseek-v4-flash', 'prompt': 'Count slowly, one word per line.', 'max_tokens': max_tokens,
                'temperature': 0, 'stream': True}
        req = urllib.request.Request(d.HEAD_URL + '/v1/completions', data=json.dumps(body).encode(),
                                     headers={'Content-Type': 'application/json', 'Authorization': 'Bearer ' + d.API_KEY})
        self.resp = urllib.request.urlopen(req, timeout=timeout)
        first = b''
        while not first.startswith(b'data: {'):
            first = self.resp.readline()
            assert first, 'the anchor request ended before its first token'
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self):
        try:
            while self.resp.readline():
                pass
        except (OSError, ValueError):   # the wedge (read timeout) or the pair's restart (reset)
            pass

    def close(self):
        self.resp.close()


def both_started():
    return d.started_at('spark1', 'head'), d.started_at('spark2', 'worker')


def wait_progress_stops(deadline_s):
    """Follow the head's generation counter until it stands still (the wedge); returns (value, last change)."""
    last_value, last_change = None, time.time()
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = head_metric('vllm:generation_tokens_total')
        if value != last_value:
            last_value, last_change = value, time.time()
        elif time.time() - last_change > 3:
            return last_value, last_change
        time.sleep(0.5)
    raise AssertionError('generation never stopped (last %r)' % last_value)


def wait_guard_line(since, needle, timeout):
    return d.wait_until('pair guard journal line %r' % needle,
                        lambda: [ln for ln in guard_lines(since) if needle in ln[1]], timeout, interval=1.0)


def test_monitoring_deployed_and_the_hang_watchdog_shortened():
    rc, out = d.run_playbook('site.yml', HANG_VARS, var_files=[DRILL_VARS])
    assert rc == 0, out[-4000:]
    config = json.loads(d.node('spark1', 'cat', d.CONFIG_DIR + '/pairguard.json'))
    assert config['hang_watchdog'] is True and config['hang_after_s'] == HANG_AFTER_S and config['max_restarts'] == 2
    assert d.unit_show('spark1', GUARD_UNIT, 'ActiveState')['ActiveState'] == 'active'
    d.wait_serving(180)


def test_prometheus_scrapes_vllm_and_both_node_exporters():
    def targets_up():
        active = prom('/api/v1/targets')['activeTargets']
        seen = sorted((t['labels']['job'], t['scrapeUrl'], t['health']) for t in active)
        return seen if len(seen) == 4 and all(h == 'up' for _j, _u, h in seen) else None
    seen = d.wait_until('every Prometheus target up', targets_up, 90, interval=2.0)
    urls = [u for _j, u, _h in seen]
    assert ('vllm', 'http://127.0.0.1:8001/metrics', 'up') in seen, seen
    assert ('prometheus', 'http://127.0.0.1:9090/metrics', 'up') in seen, seen
    assert 'http://%s:9100/metrics' % d.ip(11) in urls and 'http://%s:9100/metrics' % d.ip(12) in urls, seen
    # the rules file was loaded (promtool-checked on the way in)
    groups = prom('/api/v1/rules')['groups']
    names = set(r['name'] for g in groups for r in g['rules'])
    assert {'DS4EngineHung', 'DS4HangRecovered', 'DS4RankDown', 'DS4RestartStorm'} <= names, names
    # the guard's state reaches Prometheus through the textfile collector
    result = d.wait_until('dgxspark_ds4_guard_rank_up scraped', lambda: prom(
        '/api/v1/query?query=dgxspark_ds4_guard_rank_up')['result'], 60, interval=2.0)
    assert sorted(r['metric'].get('role') for r in result) == ['head', 'worker'], result


def test_prometheus_port_closed_to_a_host_not_allowed():
    # loopback on the head is answered; the controller (an API client, not a monitoring one) and spark2 are not
    assert d.node('spark1', 'curl', '-sS', '-o', '/dev/null', '-w', '%{http_code}', '-m', '5',
                  LOCAL_PROMETHEUS + '/-/healthy') == '200'
    try:
        urllib.request.urlopen(PROMETHEUS + '/-/healthy', timeout=5)
        raise AssertionError('Prometheus answered the controller')
    except (urllib.error.URLError, OSError) as exc:
        assert not isinstance(exc, urllib.error.HTTPError), exc
    proc = subprocess.run(['docker', 'exec', d.node_container('spark2'), 'curl', '-sS', '-m', '4', PROMETHEUS + '/-/healthy'],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert proc.returncode in (7, 28), (proc.returncode, proc.stdout)   # refused (reject) or timed out (drop)
    # and the node exporters listen on the fabric address only, reachable between the two nodes
    assert 'node_exporter_build_info' in d.node('spark1', 'curl', '-sS', '-m', '5', 'http://%s:9100/metrics' % d.ip(12))


def test_runtime_hang_under_load_is_detected_kept_and_recovered():
    head0, worker0 = both_started()
    before = evidence_dirs()
    t0 = time.time()
    load = Load()
    try:
        d.wait_until('tokens flowing', lambda: (head_metric('vllm:generation_tokens_total') or 0) > 0, 30)
        anchor = Anchor()
        wedged = wedge(after_tokens=60)
        assert wedged['wedge_at_tokens'] is not None, wedged
        stuck_at, last_progress = wait_progress_stops(60)
        stuck_at = int(stuck_at)
        # /health and /v1/models stay green while the engine is wedged: only the watchdog sees it
        assert d.node('spark1', 'curl', '-sS', '-o', '/dev/null', '-w', '%{http_code}', '-m', '5',
                      LOCAL_VLLM + '/health') == '200'
        found = wait_guard_line(t0, 'hang: ', HANG_AFTER_S + 30)
        detected_at, line = found[0]
        delay = detected_at - last_progress
        print('\nDRILL runtime hang: wedged at %d generated tokens; guard line %.2f s after the last progress '
              '(hang_after_s %d, poll 1 s): %s' % (stuck_at, delay, HANG_AFTER_S, line))
        assert delay <= HANG_AFTER_S + 10, (delay, line)
        assert 'requests running, generation tokens stuck at %d' % stuck_at in line, line
        assert 'restarting %s so both ranks restart, worker first' % HEAD_UNIT in line, line
        d.wait_until('the head restarted', lambda: both_started()[0] > head0, 120, interval=2.0)
        anchor.close()
        d.wait_serving(180)
        recovered = time.time() - last_progress
        print('DRILL runtime hang: serving again %.1f s after the last progress' % recovered)
    finally:
        load.close()
    head1, worker1 = both_started()
    assert head1 > head0 and worker1 > worker0 and worker1 < head1, (head0, worker0, head1, worker1)
    new = sorted(evidence_dirs() - before)
    assert len(new) == 1, new
    files = set(d.node('spark1', 'ls', '-1', '%s/%s' % (EVIDENCE_DIR, new[0])).split())
    assert {'metrics-before.txt', 'metrics-after.txt', 'summary.json', 'journal-spark1.txt', 'journal-spark2.txt',
            'docker-top-spark1.txt', 'docker-top-spark2.txt', 'py-spy-spark1.txt', 'meminfo-spark1.txt',
            'meminfo-spark2.txt', 'nvidia-smi-spark1.txt'} <= files, files
    summary = json.loads(d.node('spark1', 'cat', '%s/%s/summary.json' % (EVIDENCE_DIR, new[0])))
    assert summary['kind'] == 'stall' and summary['running'] >= 1 and summary['generation_tokens'] == stuck_at
    # the worker's journal came over the peer connection (both ranks' last lines are kept)
    assert WORKER_UNIT in d.node('spark1', 'cat', '%s/%s/journal-spark2.txt' % (EVIDENCE_DIR, new[0]))
    after = d.node('spark1', 'cat', '%s/%s/metrics-after.txt' % (EVIDENCE_DIR, new[0]))
    assert 'vllm:num_requests_running' in after
    state = guard_state()
    assert state['hangs_total'] >= 1 and state['last_cause'] == 'hang_no_tokens', state


def test_prometheus_fires_hang_recovered_after_the_wedge():
    def firing():
        alerts = prom('/api/v1/alerts')['alerts']
        return [a for a in alerts if a['labels']['alertname'] == 'DS4HangRecovered' and a['state'] == 'firing']
    alerts = d.wait_until('DS4HangRecovered firing in Prometheus', firing, 90, interval=2.0)
    assert alerts[0]['labels']['severity'] == 'warning', alerts


def test_long_prefill_is_not_a_hang():
    # 100000 prompt tokens at the simulator's 5000 tokens/s: 20 s of prefill with no generated token, longer
    # than hang_after_s. As on real vLLM (real-vllm-on-device notes, Part 1 §2) the prompt, generation and step
    # counters stand still until the first token; vllm:kv_cache_usage_perc rises at every chunk, so the watchdog
    # must leave it alone.
    head0, worker0 = both_started()
    before = evidence_dirs()
    t0 = time.time()
    status, body = d.request('/v1/completions', {
        'model': 'deepseek-v4-flash', 'max_tokens': 4, 'temperature': 0,
        'prompt': 'Summarise this book. [[vllm-sim:prompt_tokens=100000]]'}, timeout=120)
    took = time.time() - t0
    print('\nDRILL long prefill: %.1f s for 100000 prompt tokens, no restart' % took)
    assert status == 200 and json.loads(body)['usage']['prompt_tokens'] >= 100000
    assert took > HANG_AFTER_S + 2, took
    time.sleep(3)
    assert both_started() == (head0, worker0)
    assert evidence_dirs() == before
    assert not [ln for ln in guard_lines(t0) if 'hang: ' in ln[1]]


def guard_acts_on_a_hang(since, timeout):
    """The guard's line for a hang it acted on since a moment (a restart, or a stop at the storm limit): that line.
    Not within timeout: the assertion shows what the guard said meanwhile and the head's gauges."""
    def acted():
        return [ln for ln in guard_lines(since) if 'hang: ' in ln[1]
                and ('restarting %s' % HEAD_UNIT in ln[1] or 'pair restarts within' in ln[1])]
    try:
        return d.wait_until('the pair guard acting on the hang', acted, timeout, interval=1.0)[0][1]
    except AssertionError as exc:
        gauges = [ln for ln in d.node('spark1', 'curl', '-sS', '-m', '5', LOCAL_VLLM + '/metrics', check=False).splitlines()
                  if ln.startswith(('vllm:num_requests_', 'vllm:generation_tokens_total', 'vllm:kv_cache_usage_perc'))]
        raise AssertionError('%s\nguard lines since: %r\nhead gauges now: %r' % (exc, guard_lines(since)[-15:], gauges))


def test_repeated_hangs_stop_at_the_storm_limit_with_the_cause():
    # max_restarts 2 in the 900 s window: a hang restarts the pair while fewer than two restarts lie in the window,
    # and stops it (head and worker) once two do. The runtime-hang drill's restart above counts while it is inside the
    # window; on a slow machine the drills between can take longer than the window (a landing CI did), so this drill
    # wedges the pair until the guard stops it: at most three hangs, and the stop line names the two restarts.
    load = Load()
    line, restarts = None, 0
    try:
        for _attempt in range(3):
            d.wait_until('tokens flowing', lambda: (head_metric('vllm:generation_tokens_total') or 0) > 0, 60)
            since = time.time()
            anchor = Anchor()
            wedge(after_tokens=20)
            wait_progress_stops(60)
            try:
                line = guard_acts_on_a_hang(since, HANG_AFTER_S + 30)
            finally:
                anchor.close()
            if 'pair restarts within' in line:
                break
            restarts += 1
            d.wait_serving(180)
    finally:
        load.close()
    assert 'pair restarts within' in line, 'three hangs, three restarts, no stop at the storm limit: %s' % line
    print('\nDRILL storm: %d restart(s) here, then: %s' % (restarts, line))
    assert restarts <= 2 and 'hang: ' in line, (restarts, line)
    assert '2 pair restarts within 900s already: stopping %s' % HEAD_UNIT in line, line
    d.wait_until('head and worker stopped', lambda: (
        d.unit_show('spark1', HEAD_UNIT, 'ActiveState')['ActiveState'] == 'inactive'
        and d.unit_show('spark2', WORKER_UNIT, 'ActiveState')['ActiveState'] == 'inactive'), 90)
    state = guard_state()
    assert state['storm_stops_total'] >= 1 and state['last_action'] == 'stop' and state['last_cause'] == 'hang_no_tokens'
    # the documented way back: restart.yml (both ranks, worker first, through readiness with both timeouts given)
    rc, out = d.run_playbook('restart.yml', {'ds4_ready_timeout': 1234, 'ds4_ready_chat_timeout': 45},
                             var_files=[DRILL_VARS], args=['-v'])
    assert rc == 0, out[-3000:]
    flat = ' '.join(out.split())
    assert 'chat_timeout: 45.0' in flat and ' timeout: 1234.0' in flat, 'readiness did not get both timeouts: ' + out[-2000:]
    d.wait_serving(120)
    # every hang left its evidence: the runtime-hang drill's, and each one here
    assert len(evidence_dirs()) >= restarts + 2, (restarts, evidence_dirs())
