# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Token pacing of the vLLM simulator: per-stream and aggregate rates within 2 % as a benchmark measures them.

Every window is about 5 s: the checks share this 2-core machine with sanity, lint and Molecule scenarios
(`make suite`). A 0.74 s window (60 tokens at 80 tok/s) once came out 5 % low there, and 2.2 s windows came out
+3.6 % (CI47, first-to-last) and -3.2 % (CI48, slope) with the machine loaded: delays of the simulator and the client
of 100-200 ms near a window's ends, which 2 % of 5 s (100 ms) and the slope below absorb. A window in which the
simulator's step clock restarted after a longer host stall is measured again
(Sim.measured_without_stall): the simulator produced less than its rates then."""


import threading

from conftest import stream_chat  # pylint: disable=import-error

BODY = {'messages': [{'role': 'user', 'content': 'Write a long story.'}], 'max_tokens': 120,
        'stream_options': {'include_usage': True}}


def _token_times(events):
    return [t for t, ev in events if ev != '[DONE]' and ev['choices'] and ev['choices'][0]['delta'].get('content')]


def _rate(times):
    """Tokens per second as the least-squares slope of the token index over its arrival time: the simulator's pacing
    over the whole window. (n - 1) / (last - first) judges the client's wake-up at two instants instead: a first token
    read 80 ms late under CI's load made a 2.2 s window 3.6 % fast (CI47). A pacing error of 2 % still shows here."""
    n = len(times)
    mean_t = sum(times) / n
    mean_i = (n - 1) / 2.0
    var = sum((t - mean_t) ** 2 for t in times)
    return sum((t - mean_t) * (i - mean_i) for i, t in enumerate(times)) / var


def _concurrent(sim, streams, max_tokens, timeout):
    results = [None] * streams

    def one(i):
        results[i] = stream_chat(sim, dict(BODY, max_tokens=max_tokens))
    threads = [threading.Thread(target=one, args=(i,)) for i in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return results


def test_per_stream_rate_within_2_percent(sim_factory):
    sim = sim_factory(env={'VLLM_SIM_TOKENS_PER_S': '100'}).wait_ready()
    events = sim.measured_without_stall(lambda: stream_chat(sim, dict(BODY, max_tokens=500)))  # 5 s
    times = _token_times(events)
    usage = events[-2][1]['usage']
    assert usage['completion_tokens'] == len(times) == 500
    rate = _rate(times)
    assert abs(rate - 100.0) / 100.0 < 0.02, rate


def test_aggregate_cap_within_2_percent(sim_factory):
    sim = sim_factory(env={'VLLM_SIM_TOKENS_PER_S': '100', 'VLLM_SIM_AGG_TOKENS_PER_S': '200'}).wait_ready()
    results = sim.measured_without_stall(lambda: _concurrent(sim, 4, 250, 30))  # 5 s
    all_times = sorted(t for events in results for t in _token_times(events))
    assert len(all_times) == 1000
    # steady-state window: from the time all 4 streams have produced a token to the first stream finishing.
    start = max(_token_times(ev)[0] for ev in results)
    end = min(_token_times(ev)[-1] for ev in results)
    inside = [t for t in all_times if start <= t <= end]
    agg = _rate(inside)
    assert abs(agg - 200.0) / 200.0 < 0.02, agg
    per_stream = [_rate(_token_times(ev)) for ev in results]
    assert all(abs(r - 50.0) / 50.0 < 0.05 for r in per_stream), per_stream


def test_uncapped_concurrency_scales(sim_factory):
    sim = sim_factory(env={'VLLM_SIM_TOKENS_PER_S': '80'}).wait_ready()
    results = sim.measured_without_stall(lambda: _concurrent(sim, 3, 400, 60))  # 5 s each
    for events in results:
        rate = _rate(_token_times(events))
        assert abs(rate - 80.0) / 80.0 < 0.02, rate
