# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The quality canary on the serving pair (after every other drill of this scenario but the layout's). It runs with
its defaults (on, every 600 s, and at once on each new head) through every drill before this file; here it is set to
its shortest interval (60 s; retried 5 s after a failure, a pair restart after 2 in a row) and its shortest request
timeout (10 s, with the hang window's prefill rate at the simulator's own 5000 tokens/s, so the timeout the role
derives from the recipe is that floor) by a site.yml run that restarts no rank (only the guard's settings change).

1. Through the drills before, the canary ran on every new head; what it counted is printed (a drill that breaks the
   pair may fail a canary: that is the canary working; a canary of a head that restarted or stopped is dropped).
2. A healthy pair under steady client load, across a scheduled canary: the canary passes, no canary fails, no client
   request fails, and the requests in flight while it ran are not slower than the others beyond a bound (printed:
   the figure for docs/measurements.md).
3. A long prompt prefilling (one prompt that takes the whole per-step token budget, as real vLLM schedules it: the
   real-vllm-on-device notes, Part 1b) when the canary runs: the canary starts (nothing waits when it looks), its
   request queues behind the prefill and times out; that is load, not decay: inconclusive (counted apart), no gate,
   no restart, no failure; once the prefill is done the canary passes again.
4. The simulator switched to garbled replies while serving (/sim/garble, its test control: /health stays 200 and
   the counters move, as the field reports): the next canary takes the pair out of rotation (health gate) within
   one interval plus a bound, keeps its evidence (canary-<UTC>/: prompts, answers, timings, /metrics), the retry
   fails too and the guard restarts the pair, worker first; the new head serves clean answers and its first canary
   passes; Prometheus saw the failures (dgxspark_ds4_canary_consecutive_failures).
"""


import json
import os
import sys
import threading
import time
import urllib.error

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position
import test_hang_monitoring as hm  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

INTERVAL_S = 60
GATE = '/run/%s.unhealthy' % d.container('head')
# One canary: two known answers, a tool call, a 64-token decode at the simulator's 50 tok/s, one at a time.
CANARY_BOUND_S = 30


def state():
    return hm.guard_state()


def garble(mode):
    out = d.node('spark1', 'curl', '-sS', '-m', '5', '-X', 'POST', '-H', 'Content-Type: application/json',
                 '-d', json.dumps({'mode': mode}), hm.LOCAL_VLLM + '/sim/garble')
    assert json.loads(out) == {'garble': mode}, out


def gate_text():
    return d.node('spark1', 'cat', GATE, check=False) if d.node(
        'spark1', 'sh', '-c', 'test -e %s && echo closed || echo open' % GATE) == 'closed' else None


class TimedLoad(object):
    """n clients sending chat completions through the API proxy, each request's (start, end, ok) kept (epoch s)."""

    def __init__(self, n=2):
        self.stop = threading.Event()
        self.records = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._client, daemon=True) for _i in range(n)]
        for thread in self.threads:
            thread.start()

    def _client(self):
        body = {'model': 'deepseek-v4-flash', 'max_tokens': 32, 'temperature': 0,
                'messages': [{'role': 'user', 'content': 'Summarize the water cycle for a ten-year-old.'}]}
        while not self.stop.is_set():
            t0 = time.time()
            try:
                ok = d.request('/v1/chat/completions', body, timeout=30)[0] == 200
            except (urllib.error.URLError, ConnectionError, OSError, ValueError):
                ok = False
            with self.lock:
                self.records.append((t0, time.time(), ok))

    def close(self):
        self.stop.set()
        for thread in self.threads:
            thread.join(35)
        return list(self.records)


def _median(values):
    values = sorted(values)
    return values[len(values) // 2] if values else None


CANARY_VARS = {'vllm_service_canary_interval_s': INTERVAL_S, 'vllm_service_canary_retry_s': 5,
               'vllm_service_canary_failures_to_restart': 2, 'vllm_service_canary_timeout_s': 10}
# The canary request's timeout follows the recipe as the hang window does (the longest engine step at the assumed
# prefill rate, plus one poll): at the simulator's rate one 16384-token chunk is 4 s, +5 s: below the 10-s floor.
RUN_VARS = dict(CANARY_VARS, vllm_service_hang_prefill_tokens_per_s=5000)
REQUEST_TIMEOUT_S = 10


def test_the_canary_ran_through_the_drills_and_its_shortest_interval_restarts_no_rank():
    s = state()
    print('CANARY through the drills (defaults): %d runs, %d failed, %d skipped (saturated), %d inconclusive (busy), %d '
          'pair restarts by it' % (s['canary_runs_total'], s['canary_failures_total'], s['canary_skips_total'],
                                   s.get('canary_inconclusive_total', 0), s['restarts_by_cause'].get('quality_canary', 0)))
    assert s['canary_runs_total'] >= 1 and s['restarts_by_cause'].get('quality_canary', 0) == 0, s
    before = d.both_started()
    rc, out = d.run_playbook('site.yml', RUN_VARS, var_files=[hm.DRILL_VARS])
    assert rc == 0, out[-4000:]
    config = json.loads(d.node('spark1', 'cat', d.CONFIG_DIR + '/pairguard.json'))
    assert dict((k[len('vllm_service_'):], config[k[len('vllm_service_'):]]) for k in CANARY_VARS) == dict(
        (k[len('vllm_service_'):], v) for k, v in CANARY_VARS.items())
    assert (config['canary_request_timeout_s'], config['canary_deadline_s']) == (REQUEST_TIMEOUT_S, 4 * REQUEST_TIMEOUT_S + 10)
    assert config['canary'] is True and config['canary_url'] == 'http://127.0.0.1:8000', config['canary_url']
    assert d.both_started() == before, 'a change of the canary settings restarted a rank'
    assert d.node('spark1', 'stat', '-c', '%a %U', d.CONFIG_DIR + '/pairguard.json') == '600 root'
    # the current head's canary passes (the guard restarted with the new settings; its first canary runs at once)
    d.wait_until('a passing canary of the current head', lambda: state()['last_canary_ok'] is True
                 and state()['canary_consecutive'] == 0 and state()['canary_baseline'], INTERVAL_S + CANARY_BOUND_S,
                 interval=2.0)


def test_a_canary_under_client_load_passes_and_slows_no_request_beyond_a_bound():
    failures0 = state()['canary_failures_total']
    before = state()['last_canary_started_at'] or 0
    load = TimedLoad(2)
    try:
        done = d.wait_until('a scheduled canary under load', lambda: (
            (state()['last_canary_started_at'] or 0) > before and (state()['last_canary_at'] or 0)
            >= state()['last_canary_started_at'] and state()), INTERVAL_S + CANARY_BOUND_S + 10, interval=1.0)
        time.sleep(3)   # requests after the canary, for the comparison
    finally:
        records = load.close()
    assert done['last_canary_ok'] is True and done['canary_failures_total'] == failures0, done
    assert done['last_canary_load'] >= 1, done          # the load was in flight when it started (not skipped)
    started, ended = done['last_canary_started_at'], done['last_canary_at']
    assert records and all(ok for _t0, _t1, ok in records), [r for r in records if not r[2]][:5]
    during = [t1 - t0 for t0, t1, _ok in records if t0 < ended and t1 > started]
    outside = [t1 - t0 for t0, t1, _ok in records if t1 <= started or t0 >= ended]
    assert during and outside, (len(during), len(outside))
    ratio = max(during) / _median(outside)
    print('CANARY under load: %.1f s long (%d requests in flight at its start); client requests during it: %d, '
          'longest %.2f s; others: %d, median %.2f s; ratio %.2f (bound 2.0)'
          % (ended - started, done['last_canary_load'], len(during), max(during), len(outside), _median(outside), ratio))
    assert ratio <= 2.0


# A 1M-token prompt's shape, scaled to what this recipe accepts and this simulator runs: one prompt whose chunked
# prefill holds the whole per-step token budget for longer than a canary request's timeout (on a Spark a 980K prompt
# prefills for 16.6 min, seed 001; here max-model-len is 131072 and the simulator prefills 5000 tokens/s
# (VLLM_SIM_PREFILL_TOKENS_PER_S): 128000 tokens take about 26 s, more than the guard's restart, the canary's start and
# its 10-s request timeout together). The simulator's prompt-tokens marker counts the prompt as that many tokens.
LONG_PROMPT_TOKENS = 128000


def test_a_canary_behind_a_long_prefill_is_inconclusive_no_gate_no_restart():
    s0 = state()
    started0 = d.both_started()
    inconclusive0, failures0 = s0.get('canary_inconclusive_total', 0), s0['canary_failures_total']
    restarts0, evidence0 = s0['restarts_total'], sorted(
        n for n in d.node('spark1', 'sh', '-c', 'ls -1 %s 2>/dev/null || true' % hm.EVIDENCE_DIR).split()
        if n.startswith('canary-'))
    box = {}

    def long_prompt():
        t0 = time.time()
        try:
            box['status'], body = d.request('/v1/completions', {
                'model': 'deepseek-v4-flash', 'max_tokens': 4, 'temperature': 0,
                'prompt': 'Summarise this book. [[vllm-sim:prompt_tokens=%d]]' % LONG_PROMPT_TOKENS}, timeout=180)
            box['prompt_tokens'] = json.loads(body)['usage']['prompt_tokens']
        finally:
            box['took'], box['ended'] = time.time() - t0, time.time()
    thread = threading.Thread(target=long_prompt, daemon=True)
    t_long = time.time()
    thread.start()
    d.wait_until('the long prompt prefilling', lambda: (hm.head_metric('vllm:num_requests_running') or 0) >= 1, 10,
                 interval=0.2)
    # the guard runs a canary at once when it starts (as on every new head): no wait for the schedule
    t_canary = time.time()
    d.node('spark1', 'systemctl', 'restart', hm.GUARD_UNIT)
    closed = []

    def seen(predicate):
        def check():
            text = gate_text()
            if text:
                closed.append(text)
            s = state()
            return predicate(s) and s
        return check
    started = d.wait_until('the canary started during the prefill', seen(
        lambda s: (s['last_canary_started_at'] or 0) >= t_canary - 1), 15, interval=0.5)
    assert thread.is_alive(), 'the long prompt ended before the canary started (%s)' % box
    # (not within the bound, with a passing canary meanwhile: the simulator answered the canary during the prefill,
    # i.e. it does not queue a request behind a long prefill as real vLLM does)
    done = d.wait_until('the canary inconclusive behind the prefill', seen(
        lambda s: s.get('canary_inconclusive_total', 0) > inconclusive0), REQUEST_TIMEOUT_S + 20, interval=0.5)
    t_inconclusive = time.time()
    assert thread.is_alive(), 'the long prompt ended before the canary was judged inconclusive (%s)' % box
    thread.join(120)
    assert box.get('status') == 200 and box['prompt_tokens'] >= LONG_PROMPT_TOKENS, box
    assert done['last_canary_inconclusive'].startswith('quality canary inconclusive (the pair is busy; not a failure'), done
    assert 'no answer within %d s while the engine was busy' % REQUEST_TIMEOUT_S in done['last_canary_inconclusive'], done
    # once the prefill is done, a canary passes (the retry, canary_retry_s after the inconclusive one)
    after = d.wait_until('a passing canary after the prefill', seen(
        lambda s: s['last_canary_ok'] is True and (s['last_canary_at'] or 0) >= box['ended'] - 1), 5 + 2 * CANARY_BOUND_S,
        interval=1.0)
    assert closed == [], 'the health gate closed while the pair was only busy: %s' % closed[:3]
    assert after['canary_failures_total'] == failures0 and after['canary_consecutive'] == 0, after
    assert after['restarts_total'] == restarts0 and d.both_started() == started0, 'a rank restarted'
    assert sorted(n for n in d.node('spark1', 'sh', '-c', 'ls -1 %s 2>/dev/null || true' % hm.EVIDENCE_DIR).split()
                  if n.startswith('canary-')) == evidence0, 'a canary failed (its evidence was kept)'
    assert gate_text() is None
    print('CANARY behind a long prefill: %d-token prompt prefilled in %.1f s; the canary started %.1f s after it, was '
          'inconclusive %.1f s after it started (request timeout %d s), %d inconclusive in all; no gate, no restart; '
          'a canary passed %.1f s after the prefill ended (phase %.1f s)'
          % (box['prompt_tokens'], box['took'], started['last_canary_started_at'] - t_long,
             t_inconclusive - started['last_canary_started_at'], REQUEST_TIMEOUT_S,
             after['canary_inconclusive_total'] - inconclusive0, after['last_canary_at'] - box['ended'],
             time.time() - t_long))


def test_garbled_replies_gate_the_pair_then_the_guard_restarts_it_and_it_serves_clean_again():
    s0 = state()
    restarts0 = s0['restarts_by_cause'].get('quality_canary', 0)
    head0, worker0 = d.both_started()
    evidence0 = set(n for n in d.node('spark1', 'sh', '-c', 'ls -1 %s 2>/dev/null || true' % hm.EVIDENCE_DIR).split()
                    if n.startswith('canary-'))
    t_garble = time.time()
    garble('cjk')
    reason = d.wait_until('the health gate closed by the canary', lambda: (gate_text() or '').startswith(
        'quality canary failed') and gate_text(), INTERVAL_S + CANARY_BOUND_S, interval=0.5)
    gated_after = time.time() - t_garble
    assert 'known_answer' in reason or 'unexpected_script' in reason, reason
    # the retry fails too: the guard restarts the pair (the head; its prestart restarts the worker first)
    d.wait_until('the pair restarted by the canary', lambda: state()['restarts_by_cause'].get('quality_canary', 0)
                 > restarts0, 2 * CANARY_BOUND_S, interval=1.0)
    restarted_after = time.time() - t_garble
    d.wait_serving(180)
    head1, worker1 = d.both_started()
    assert head1 > head0 and worker1 > worker0 and worker1 < head1, (head0, worker0, head1, worker1)
    assert d.chat() == 'Four'                            # the new simulator answers clean
    # the new head's first canary passes and the pair is back in rotation
    d.wait_until('the new head passed its canary', lambda: state()['last_canary_ok'] is True
                 and state()['canary_consecutive'] == 0 and state()['last_canary_at'] > t_garble, INTERVAL_S, interval=1.0)
    d.wait_until('the health gate open again', lambda: gate_text() is None, 30)
    served_again = time.time() - t_garble
    s1 = state()
    assert s1['canary_failures_total'] == s0['canary_failures_total'] + 2, s1
    # the evidence: one directory per failed canary, with the prompts, the garbled answers and the metrics
    names = sorted(n for n in d.node('spark1', 'sh', '-c', 'ls -1 %s' % hm.EVIDENCE_DIR).split()
                   if n.startswith('canary-') and n not in evidence0)
    assert len(names) == 2, names
    record = json.loads(d.node('spark1', 'cat', '%s/%s/canary.json' % (hm.EVIDENCE_DIR, names[0])))
    assert record['ok'] is False and record['requests'][0]['prompt'] == 'What is 2+2? Answer with one word.'
    assert any(ord(ch) > 0x3000 for ch in record['requests'][0]['content']), record['requests'][0]
    assert 'vllm:' in d.node('spark1', 'cat', '%s/%s/metrics-before.txt' % (hm.EVIDENCE_DIR, names[0]))
    # Prometheus scraped the failures from the guard's textfile; the alert rule is loaded
    seen = d.wait_until('the canary failures in Prometheus', lambda: hm.prom(
        '/api/v1/query?query=max_over_time(dgxspark_ds4_canary_consecutive_failures%5B10m%5D)')['result'], 60, interval=2.0)
    assert float(seen[0]['value'][1]) >= 1, seen
    names_loaded = set(r['name'] for g in hm.prom('/api/v1/rules')['groups'] for r in g['rules'])
    assert 'DS4QualityCanaryFailing' in names_loaded
    print('CANARY garbled: gated %.1f s after the garbling (bound %d s = interval + one canary), pair restarted %.1f s '
          'after, serving clean with its canary passed %.1f s after'
          % (gated_after, INTERVAL_S + CANARY_BOUND_S, restarted_after, served_again))
