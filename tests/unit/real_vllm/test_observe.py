# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""observe.compare catches the contradictions issue 23 is about, on the recorded real traces themselves.

Each test edits a copy of a real trace the way the simulator got it wrong and checks that exactly that
observation is reported (so the conformance test can fail for that reason, whatever the simulator does today).
"""


import copy
import os
import sys

TESTS = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

from real_vllm import observe  # noqa: E402  pylint: disable=import-error,wrong-import-position

FIXTURES = os.path.join(TESTS, 'fixtures', 'real_vllm')
PROMPT = 'vllm:prompt_tokens_total{engine="0",model_name="tiny"}'


def _trace(name):
    return observe.load(os.path.join(FIXTURES, name + '.json'))


def _between(trace, first, last):
    """Indexes of the events recorded after mark `first` and before mark `last`."""
    names = [e.get('name') if e['kind'] == 'mark' else None for e in trace['events']]
    return range(names.index(first) + 1, names.index(last))


def test_a_trace_conforms_to_itself():
    for name in ('prefill', 'worker_killed_serving', 'startup'):
        obs = observe.observe(_trace(name))
        assert observe.compare(obs, copy.deepcopy(obs)) == [], name


def test_prompt_tokens_credited_per_chunk_is_a_difference():
    real = _trace('prefill')
    sim = copy.deepcopy(real)
    step = 0
    for i in _between(sim, 'prefill_start', 'first_token'):
        event = sim['events'][i]
        if event['kind'] == 'metrics':
            step += 256
            event['series'][PROMPT] += step
    diffs = observe.compare(observe.observe(real), observe.observe(sim))
    assert diffs == ['prefill: window from prefill_start (38 real / 38 sim polls): vllm:prompt_tokens_total: '
                     'real vLLM "still", simulator "moving"'], diffs


def test_head_exit_status_and_503_are_differences():
    real = _trace('worker_killed_idle')
    sim = copy.deepcopy(real)
    for event in sim['events']:
        if event['kind'] == 'exit' and event['rank'] == 'head':
            event['status'] = 1
    index = _between(sim, 'request_sent', 'head_exited')
    probe = [i for i in index if sim['events'][i]['kind'] == 'probe' and sim['events'][i]['path'] == '/health'][-1]
    sim['events'].insert(probe + 1, dict(sim['events'][probe], status=503))
    diffs = observe.compare(observe.observe(real), observe.observe(sim))
    assert diffs == ['worker_killed_idle: phase request_sent: /health statuses: real vLLM [200], simulator [200, 503]',
                     'worker_killed_idle: exits: real vLLM {"worker": -9, "head": 0}, simulator {"worker": -9, "head": 1}'], diffs


def test_short_windows_tolerate_where_the_polls_fell():
    assert not observe.class_differs('still', 'step', 40)
    assert not observe.class_differs('step', 'moving', observe.LONG_WINDOW - 1)
    assert observe.class_differs('step', 'moving', observe.LONG_WINDOW)
    assert observe.class_differs('still', 'moving', 3)


def _probe_events(statuses_before_exit, statuses_after_exit):
    events = [{'t': 0.0, 'kind': 'mark', 'name': 'request_sent'}]
    t = 0.1
    for status in statuses_before_exit:
        events.append({'t': t, 'kind': 'probe', 'path': '/health', 'status': status, 'ms': 1.0})
        t += 0.1
    events.append({'t': t, 'kind': 'mark', 'name': 'head_exited', 'status': 0})
    for status in statuses_after_exit:
        t += 0.1
        events.append({'t': t, 'kind': 'probe', 'path': '/health', 'status': status, 'ms': 1.0})
    return events


def test_refusals_noticed_before_the_exit_mark_count_after_the_exit():
    """The exit mark comes from the driver's waiter thread: on a loaded machine a probe can find the port closed
    before it. Real [200] then the exit, simulator [200, refused] then the exit: the same observation."""
    real = observe.observe({'scenario': 'x', 'backend': 'real', 'events': _probe_events([200], [None])})
    sim = observe.observe({'scenario': 'x', 'backend': 'sim', 'events': _probe_events([200, None], [None])})
    assert real['probes']['request_sent']['/health'] == sim['probes']['request_sent']['/health'] == [200]
    assert sim['probes']['head_exited']['/health'] == [None]
    # a refusal followed by an answer, or a phase with nothing but refusals, stays where it was
    kept = observe.observe({'scenario': 'x', 'backend': 'sim', 'events': _probe_events([None, 200], [])})
    assert kept['probes']['request_sent']['/health'] == [None, 200]
    only = observe.observe({'scenario': 'x', 'backend': 'sim', 'events': _probe_events([None], [])})
    assert only['probes']['request_sent']['/health'] == [None]


def test_an_answer_recorded_after_the_exit_mark_but_sent_before_it_counts_before_the_exit():
    """A probe is recorded when its answer is read, the exit mark when the waiter thread sees the exit: a 200 the
    head gave just before it exited can be recorded after the mark (CI, the simulator: head_exited [200, null]
    against real vLLM's [null]). Sent before the mark, it counts before the exit; sent after it, it stays a
    difference (an exited head must not answer)."""
    real = observe.observe({'scenario': 'x', 'backend': 'real', 'events': _probe_events([200], [None])})
    late = _probe_events([200], [None])
    exit_mark = [e for e in late if e['kind'] == 'mark' and e['name'] == 'head_exited'][0]
    late.insert(late.index(exit_mark) + 1, {'t': exit_mark['t'] - 0.05, 'kind': 'probe', 'path': '/health',
                                            'status': 200, 'ms': 60.0})
    sim = observe.observe({'scenario': 'x', 'backend': 'sim', 'events': late})
    assert sim['probes'] == real['probes'] == {'request_sent': {'/health': [200]}, 'head_exited': {'/health': [None]}}
    assert not observe.compare(real, sim)
    after = _probe_events([200], [200, None])
    wrong = observe.observe({'scenario': 'x', 'backend': 'sim', 'events': after})
    assert wrong['probes']['head_exited']['/health'] == [200, None]
    # a refusal sent before the mark and recorded after it stays after the exit
    refused = _probe_events([200], [None])
    refused.insert(refused.index([e for e in refused if e.get('name') == 'head_exited'][0]) + 1,
                   {'t': exit_mark['t'] - 0.05, 'kind': 'probe', 'path': '/health', 'status': None, 'ms': 1.0})
    kept = observe.observe({'scenario': 'x', 'backend': 'sim', 'events': refused})
    assert kept['probes']['head_exited']['/health'] == [None]
    assert kept['probe_counts']['head_exited']['/health'] == 2


# -- the starvation scenario: synthetic mini-traces (they prove the functions' rules, not vLLM's behaviour) --------

def _starv_trace(short_ttft_during=10.3, waiting_during=1, decode_gap_at=None, credit_at=None, kv_flat=False,
                 threshold=0, alone_ttft=0.05, n_during=1):
    """D sent at 0, L (250,000 tokens) at 2, its first token at 15.5; S alone at -3, -2, -1; S during from 5 (one
    after the other), 3 S after L's first token. /metrics every 0.25 s from -4 to 18."""
    long_first = 15.5
    events = []
    shorts = []
    for i, t in enumerate((-3.0, -2.0, -1.0)):
        shorts.append(('short_%d' % i, 'alone', t, t + alone_ttft))
    t = 5.0
    for i in range(n_during):
        shorts.append(('short_%d' % (3 + i), 'during', t, t + short_ttft_during))
        t += short_ttft_during + 0.3
    for i in range(3):
        t_s = max(t, long_first + 0.1) + 0.3 * i
        shorts.append(('short_%d' % (3 + n_during + i), 'after', t_s, t_s + alone_ttft))
    waits = [(s[2], s[3]) for s in shorts if s[1] == 'during']
    k = 0
    while -4.0 + 0.25 * k <= 18.0:
        tm = -4.0 + 0.25 * k
        k += 1
        waiting = waiting_during if any(a < tm < b for a, b in waits) else 0
        prompt = 100.0 + (250000.0 if (credit_at is not None and tm >= credit_at) or tm >= long_first else 0.0)
        kv = 0.001 if kv_flat or tm < 2.0 else 0.001 + 0.01 * min(tm, long_first) - 0.02
        events.append({'t': tm, 'kind': 'metrics', 'series': {
            'vllm:num_requests_waiting{engine="0",model_name="tiny"}': waiting,
            'vllm:prompt_tokens_total{engine="0",model_name="tiny"}': prompt,
            'vllm:kv_cache_usage_perc{engine="0",model_name="tiny"}': max(0.001, kv)}})
    chunk_t = [round(0.05 + 0.02 * i, 3) for i in range(1000)]
    if decode_gap_at is not None:
        chunk_t = [x for x in chunk_t if not decode_gap_at[0] < x < decode_gap_at[1]]
    events.append({'t': 20.0, 'kind': 'response', 'name': 'decode', 'status': 200, 'body': '', 'stream': [],
                   't_sent': 0.0, 't_first': 0.05, 'chunk_t': chunk_t})
    events.append({'t': 15.6, 'kind': 'response', 'name': 'long', 'status': 200, 'body': '', 'stream': [],
                   't_sent': 2.0, 't_first': long_first, 'chunk_t': [long_first]})
    for name, group, sent, first in shorts:
        events.append({'t': first + 0.05, 'kind': 'response', 'name': name, 'status': 200, 'body': '', 'stream': [],
                       'group': group, 't_sent': sent, 't_first': first, 'chunk_t': [first]})
    return {'scenario': 'starvation_b256_t%d' % threshold, 'backend': 'real', 'events': events,
            'recorded': {'budget': 256, 'threshold': threshold, 'long_tokens': 250000}}


def test_starvation_threshold_0_shapes():
    """Part 1b's default: S sent 3 s after L waits the rest of L's prefill, waiting 1 meanwhile, D decodes,
    L's prompt credited only at its first token while the KV cache fills."""
    trace = _starv_trace(short_ttft_during=10.45)
    waits = observe.short_waits(trace)
    assert [w['name'] for w in waits] == ['short_3']
    assert waits[0]['rest_of_long_s'] == 10.5 and waits[0]['fraction'] > 0.99
    assert observe.starvation_shapes(trace) == {
        'short_during_long': 'waits_rest_of_long', 'waiting_while_short_waits': True, 'decode_keeps_decoding': True,
        'long_prompt_credited_during_prefill': False, 'kv_cache_rises_during_prefill': True}
    assert observe.waiting_while_short_waits(trace)['samples'] >= 30


def test_starvation_threshold_shapes():
    """With a threshold: every S sent during L served within the slowest S alone + a few engine steps."""
    trace = _starv_trace(short_ttft_during=0.05, n_during=20, threshold=224)
    assert len(observe.short_waits(trace)) >= 15
    assert observe.short_during_long_class(trace) == 'within_step'
    # no poll falls inside a 50-ms wait: nothing to say about num_requests_waiting
    assert observe.starvation_shapes(trace)['waiting_while_short_waits'] is None


def test_starvation_classes_tell_apart():
    # half the rest of L's prefill: neither waits the rest nor is served within a step
    assert observe.short_during_long_class(_starv_trace(short_ttft_during=5.0)) == 'mixed'
    # one S served at once, one (sent later) waiting the rest: mixed
    trace = _starv_trace(short_ttft_during=0.05, n_during=2)
    trace['events'] = [dict(e, t_first=15.52) if e.get('name') == 'short_4' else e for e in trace['events']]
    assert [w['name'] for w in observe.short_waits(trace)] == ['short_3', 'short_4']
    assert observe.short_during_long_class(trace) == 'mixed'
    # an S sent just before L's first token is not judged
    trace = _starv_trace(short_ttft_during=0.05)
    trace['events'] = [dict(e, t_sent=15.3, t_first=15.52) if e.get('name') == 'short_3' else e for e in trace['events']]
    assert observe.short_waits(trace) == [] and observe.short_during_long_class(trace) is None


def test_starvation_waiting_gauge_read():
    assert observe.starvation_shapes(_starv_trace(short_ttft_during=10.45, waiting_during=0))['waiting_while_short_waits'] is False


def test_starvation_decode_gap_and_stall():
    gap = observe.decode_during_long(_starv_trace(decode_gap_at=(3.0, 7.0)))
    assert gap['largest_gap_s'] > 3.9 and gap['keeps_decoding'] is False
    ok = observe.decode_during_long(_starv_trace(decode_gap_at=(3.0, 3.5)))
    assert 0.5 < ok['largest_gap_s'] < 0.6 and ok['keeps_decoding'] is True
    # D never got a token during L (all its tokens before L was sent)
    stalled = observe.decode_during_long(_starv_trace(decode_gap_at=(1.9, 30.0)))
    assert stalled['tokens'] == 0 and stalled['keeps_decoding'] is False


def test_starvation_prefill_counters():
    credited = observe.prefill_counters(_starv_trace(credit_at=8.0))
    assert credited['long_prompt_credited'] is True and credited['prompt_tokens_delta'] == 250000.0
    flat = observe.starvation_shapes(_starv_trace(kv_flat=True))
    assert flat['kv_cache_rises_during_prefill'] is False and flat['long_prompt_credited_during_prefill'] is False


def test_starvation_missing_long_request():
    trace = _starv_trace()
    trace['events'] = [e for e in trace['events'] if e.get('name') != 'long']
    assert observe.starvation_shapes(trace) == {
        'short_during_long': None, 'waiting_while_short_waits': None, 'decode_keeps_decoding': None,
        'long_prompt_credited_during_prefill': None, 'kv_cache_rises_during_prefill': None}
