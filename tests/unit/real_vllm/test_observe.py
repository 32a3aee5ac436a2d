# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""observe.compare catches the contradictions issue 23 is about, on the recorded real traces themselves.

Each test edits a copy of a real trace the way the simulator got it wrong and checks that exactly that
observation is reported (so the conformance test can fail for that reason, whatever the simulator does today).
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

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
