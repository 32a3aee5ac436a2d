# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The quality canary on real vLLM signals: what tests/real_vllm/canary_real.py recorded on the GPU machine (real vLLM
0.26.0, one H200, make_model.py's tiny RANDOM Llama: every answer is gibberish), committed under
tests/fixtures/real_vllm/canary/ (phase<N>.json; the recorder's command is in each file's `recorded`).

  phase 1  idle engine, the answers arrive (gibberish)                                  -> failure, pair gated
  phase 2  the canary ~2 s after a 250,000-token prompt started prefilling (threshold 0), request timeout 5 s: its
           first request got no answer, every /metrics reading showed other work       -> inconclusive, no gate
  phase 3  the same prefill with --long-prefill-token-threshold 224: answers during the prefill (gibberish), readings
           busy                                                                         -> failure, pair gated

Two halves: what the pair guard decided then (the recorded verdicts, gate and counters), and a replay of the recorded
answers and /metrics readings through the CURRENT code: quality_canary.run_canary (its own rule: busy_reason on every
reading, no answer + busy = inconclusive, an answer judged), then the pair guard's Watch (should_skip at the start,
canary_probe while it runs, canary_done's judgement) fed the guard's own recorded readings. A change to the rule that
would misjudge these real signals (a wait behind a prefill failed, or a decayed answer excused by load) fails here."""


import json
import os

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import quality_canary as qc
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import watch as pg_watch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..', '..', '..'))
FIXTURES = os.path.join(REPO, 'tests', 'fixtures', 'real_vllm', 'canary')
EXPECTED = {1: 'failure', 2: 'inconclusive', 3: 'failure'}
GAUGES = ('vllm:num_requests_running', 'vllm:num_requests_waiting')


def phase(n):
    path = os.path.join(FIXTURES, 'phase%d.json' % n)
    if not os.path.exists(path):
        pytest.fail('%s missing: record it with tests/real_vllm/device-canary.sh (README there)' % path)
    with open(path) as handle:
        return json.load(handle)


def other_work(reading):
    return reading[GAUGES[0]] + reading[GAUGES[1]] > qc.CANARY_OWN_REQUESTS


# -- what was recorded ---------------------------------------------------------------------------

@pytest.mark.parametrize('n', sorted(EXPECTED))
def test_recorded_on_real_vllm_with_the_guards_expected_verdict(n):
    doc = phase(n)
    assert doc['backend'] == 'real' and doc['recorded']['vllm_version'] == '0.26.0', doc['recorded']
    assert doc['phase'] == n and doc['expected'] == EXPECTED[n]
    assert doc['judged'] and doc['verdict'] == EXPECTED[n], (doc['verdict'], doc['child_result'])
    assert doc['guard_rc'] == 0 and doc['canary_job_status'] == 0
    state = doc['state']
    assert state['canary_failures_total'] == (EXPECTED[n] == 'failure')
    assert state['canary_inconclusive_total'] == (EXPECTED[n] == 'inconclusive')
    assert state['canary_skips_total'] == 0 and not doc['child_result']['unreachable']
    # the pair is out of rotation after a failure only; never restarted by one canary (1 of 3)
    assert (doc['gate'] is not None) == (EXPECTED[n] == 'failure'), doc['gate']
    assert not any(c[1] in ('restart', 'stop') for c in doc['fake_systemctl_calls'] if len(c) > 1)


def test_phase1_an_idle_engines_gibberish_is_a_failure_on_the_answers():
    doc = phase(1)
    result = doc['child_result']
    answered = [r for r in result['requests'] if r['status'] == 200 and not r['error']]
    assert [r['request'] for r in answered] == ['arithmetic', 'capital', 'decode']
    failed = set((f['request'], f['check']) for f in result['failures'])
    assert {('arithmetic', 'known_answer'), ('capital', 'known_answer')} <= failed
    assert not any(f['check'] == 'http' for f in result['failures'])
    assert not result['inconclusive'] and not result['busy']
    # the guard found the engine idle when it started the canary and every reading the canary took saw it alone
    guard_reads = [r['gauges'] for r in doc['metrics_reads'] if r['who'] == 'guard' and 'gauges' in r]
    assert guard_reads and not any(other_work(g) for g in guard_reads[:1])
    assert not any(other_work(g) for r in result['requests'] for g in r['load'] if 'error' not in g)


def test_phase2_no_answer_behind_a_long_prefill_is_inconclusive_with_busy_readings():
    doc = phase(2)
    result = doc['child_result']
    assert not result['failures'] and len(result['inconclusive']) == 1
    first = result['requests'][0]
    assert first['request'] == 'arithmetic' and first['error'] and not first['content']
    assert 'no answer within 5 s' in result['inconclusive'][0]
    # every reading taken while it waited: the long prompt running and the canary's request waiting
    readings = [g for g in first['load'] if 'error' not in g]
    assert len(readings) >= 2 and all(other_work(g) for g in readings), readings
    assert all(g[GAUGES[1]] >= 1 for g in readings), readings
    # the later requests were not sent (they would wait too)
    assert len(result['requests']) == 1 and any('not sent, the pair is busy' in s for s in result['skipped_checks'])
    # the guard started it: nothing waiting then (the long prompt alone running), so should_skip let it run
    start = [r['gauges'] for r in doc['metrics_reads'] if r['who'] == 'guard' and 'gauges' in r][0]
    assert start[GAUGES[1]] == 0 and qc.should_skip(start, 8) is None
    # the canary was over before the long prompt's first token: it waited behind the prefill
    assert doc['canary_inside_prefill'] and doc['long']['status'] == 200
    assert doc['long']['ttft_s'] > doc['canary_after_s'] + doc['request_timeout_s']


def test_phase3_answers_during_the_prefill_are_judged_and_fail():
    doc = phase(3)
    result = doc['child_result']
    assert doc['recorded']['threshold'] == 224
    assert [r['request'] for r in result['requests'] if r['status'] == 200 and not r['error']] == [
        'arithmetic', 'capital', 'decode']
    failed = set((f['request'], f['check']) for f in result['failures'])
    assert {('arithmetic', 'known_answer'), ('capital', 'known_answer')} <= failed
    assert not result['inconclusive']
    assert doc['canary_inside_prefill']                       # all of it while the long prompt prefilled
    # the guard saw the long prompt in flight when it started the canary (should_skip let it run: nothing waiting), so
    # it judged the answers only, not the timings (the load hid nothing)
    start = [r['gauges'] for r in doc['metrics_reads'] if r['who'] == 'guard' and 'gauges' in r][0]
    assert start[GAUGES[0]] >= 1 and start[GAUGES[1]] == 0 and qc.should_skip(start, 8) is None
    (judged,) = doc['evidence'].values()
    assert any(s.startswith('timings: ') for s in judged['skipped_checks']), judged['skipped_checks']
    # any reading the canary's requests took (they are short: often none) saw the long prompt beside them
    readings = [g for r in result['requests'] for g in r['load'] if 'error' not in g]
    assert all(other_work(g) for g in readings) and bool(result['busy']) == bool(readings)


# -- the recorded signals through the current code -----------------------------------------------

def replay_canary(doc, monkeypatch, loads=None, unrecorded=None):
    """quality_canary.run_canary over the recorded answers and readings. The thread that reads /metrics every
    probe_every_s (_watched) is replaced by the recorded readings, in order; the final reading after a request that
    got no answer comes through run_canary's own read(). loads: other readings per request, unrecorded: the answer to
    a request the recorded canary did not send (both for a control)."""
    requests = dict((r['prompt'], r) for r in doc['child_result']['requests'])
    loads = loads if loads is not None else [r['load'] for r in doc['child_result']['requests']]
    calls = {'n': 0}

    def fake_watched(send, probe, every_s):
        i = calls['n']
        calls['n'] += 1
        rec = send()
        load = list(loads[i])
        final = load.pop() if rec.get('error') and load else None
        readings = load

        def read():
            readings.append(final if final is not None else {'error': 'no reading recorded'})
        return rec, readings, read

    def fake_stream(base_url, body, api_key=None, timeout=None):
        prompt = body['messages'][0]['content']
        r = requests.get(prompt)
        if r is None:
            if unrecorded is None:
                pytest.fail('the current canary sends %r, which the recorded one did not send (it had stopped): the '
                            'current rule judges the recorded signals differently' % prompt)
            r = dict(unrecorded, prompt=prompt)
        rec = {'status': r['status'], 'error': r['error'], 'content': r['content'], 'tool_calls': r['tool_calls'],
               'finish_reason': r['finish_reason'], 'completion_tokens': r['completion_tokens'], 't_start': 0.0}
        if r['ttft_s'] is not None:
            rec['t_first'] = r['ttft_s']
            if r['decode_tps'] and r['completion_tokens']:
                rec['t_last'] = r['ttft_s'] + (r['completion_tokens'] - 1) / r['decode_tps']
        return rec
    monkeypatch.setattr(qc, '_watched', fake_watched)
    cfg = doc['guard_cfg']
    return qc.run_canary(cfg['canary_url'], cfg['canary_model'], tools=cfg['canary_tools'], timeout=cfg['canary_request_timeout_s'],
                         decode_tokens=cfg['canary_decode_tokens'], stream=fake_stream, probe=lambda: {}, probe_every_s=1.0)


class Clock(object):
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Head(object):
    """systemctl: the head active, nothing else."""

    def __init__(self):
        self.calls = []

    def __call__(self, argv, timeout=30):
        self.calls.append(argv)
        if argv[:2] == ['systemctl', 'show']:
            return 0, 'ActiveState=active\nSubState=running\nInvocationID=h1\nNRestarts=0\n', ''
        return 0, '', ''


class Job(object):
    def __init__(self, result, polls):
        self.value, self.polls = result, polls

    def poll(self):
        self.polls -= 1
        return self.polls < 0

    def result(self):
        return self.value

    def kill(self):
        pass


def replay_guard(doc, result, tmp_path):
    """The pair guard's Watch judging `result` on the recorded timeline: its clock at each recorded poll's time, the canary's
    child done at the poll that judged it, /metrics the guard's own recorded readings in order (the first decides
    whether the canary starts; canary_probe reads the next ones while it runs, one per hang_poll_s)."""
    reads = [r for r in doc['metrics_reads'] if r['who'] == 'guard']
    served = {'n': 0}

    def fetch():
        r = reads[served['n']]
        served['n'] += 1
        if 'gauges' not in r:
            raise OSError(r.get('error'))
        return '\n'.join('%s{engine="0",model_name="tiny"} %s' % (n, r['gauges'][n]) for n in GAUGES) + '\n'
    cfg = dict(doc['guard_cfg'])
    for key in ('pair_state_file', 'state_file', 'textfile', 'health_gate', 'evidence_dir', 'canary_result_file'):
        cfg[key] = str(tmp_path / os.path.basename(cfg[key]))
    clock = Clock()
    guard = pg_watch.Watch(cfg, runner=Head(), clock=clock, fetch=fetch)
    started = []
    guard.canary_job_factory = lambda c: started.append(Job(result, len(doc['steps']) - 2)) or started[-1]
    actions = []
    for step in doc['steps']:
        clock.now = step['t']
        actions.append(guard.step())
    d = guard.state.data
    gate = (tmp_path / 'health-gate').read_text() if (tmp_path / 'health-gate').exists() else None
    verdict = ('failure' if d['canary_failures_total'] else 'inconclusive' if d['canary_inconclusive_total']
               else 'pass' if d['canary_runs_total'] else 'skipped' if d['canary_skips_total'] else 'none')
    return verdict, gate, actions, len(started), (served['n'], len(reads)), guard.canary_job is None


@pytest.mark.parametrize('n', sorted(EXPECTED))
def test_the_recorded_signals_replayed_through_the_current_canary_and_guard(n, monkeypatch, tmp_path):
    doc = phase(n)
    result = replay_canary(doc, monkeypatch)
    recorded = doc['child_result']
    assert result['ok'] is False
    assert [(f['request'], f['check']) for f in result['failures']] == [(f['request'], f['check']) for f in recorded['failures']]
    assert bool(result['inconclusive']) == bool(recorded['inconclusive']) == (EXPECTED[n] == 'inconclusive')
    assert bool(result['busy']) == bool(recorded['busy'])
    verdict, gate, actions, started, (served, recorded_reads), judged = replay_guard(doc, result, tmp_path)
    assert started == 1 and judged and verdict == EXPECTED[n] == doc['verdict']
    assert served == recorded_reads            # the guard read /metrics as often, and when, it did on the GPU machine
    assert (gate is not None) == (EXPECTED[n] == 'failure') and not any(actions)


def test_the_replay_is_decided_by_the_readings_an_idle_engine_that_does_not_answer_fails(monkeypatch, tmp_path):
    """Control: phase 2's request with readings that show the canary alone (running 1, waiting 0) is a failure, not
    inconclusive; so the busy readings recorded behind the real prefill are what made it inconclusive."""
    doc = phase(2)
    first = doc['child_result']['requests'][0]
    alone = [[{GAUGES[0]: 1.0, GAUGES[1]: 0.0} for _g in first['load']]] * 3
    result = replay_canary(doc, monkeypatch, loads=alone, unrecorded=first)
    assert not result['inconclusive'] and [f['check'] for f in result['failures']] == ['http'] * 3
    assert 'the engine had no other work' in result['failures'][0]['detail']
    verdict, gate, _actions, _started, _reads, judged = replay_guard(doc, result, tmp_path)
    assert judged and verdict == 'failure' and gate


def test_the_real_gibberish_under_the_real_busy_readings_is_still_a_failure(monkeypatch, tmp_path):
    """Phase 3's requests were short (0.02-0.05 s to the first token) and the canary took no reading while they ran.
    Its recorded answers replayed with phase 2's recorded busy readings (the long prompt running, a request waiting)
    beside every request: still a failure on the answers, gated; load never excuses a decayed answer."""
    doc, busy = phase(3), phase(2)['child_result']['requests'][0]['load']
    assert busy and all(other_work(g) for g in busy)
    result = replay_canary(doc, monkeypatch, loads=[busy] * len(doc['child_result']['requests']))
    assert result['busy'] and not result['inconclusive']
    assert [(f['request'], f['check']) for f in result['failures']] == [
        (f['request'], f['check']) for f in doc['child_result']['failures']]
    verdict, gate, _actions, _started, _reads, judged = replay_guard(doc, result, tmp_path)
    assert judged and verdict == 'failure' and gate
