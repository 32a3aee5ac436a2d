# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runtime wedge and slow prefill of the vLLM simulator (the hang drills): what /metrics shows while the
engine is stuck mid-serve, and while a long prompt is prefilled without a generated token (as real vLLM 0.26.0
showed it: real-vllm-on-device notes, Part 1 §2)."""


import json
import socket
import threading
import time

import pytest

from conftest import stream_chat, wait_for  # pylint: disable=import-error

TIMEOUTS = (socket.timeout, TimeoutError, OSError)


def series(sim):
    """{name: value} of the unlabelled-by-position series of /metrics (sum over label sets)."""
    status, body, _h = sim.request('/metrics')
    assert status == 200
    out = {}
    for line in body.splitlines():
        if not line or line.startswith('#'):
            continue
        name_labels, value = line.rsplit(' ', 1)
        name = name_labels.split('{', 1)[0]
        out[name] = out.get(name, 0.0) + float(value)
    return out


def progress(m):
    return (m['vllm:generation_tokens_total'], m['vllm:prompt_tokens_total'], m['vllm:iteration_tokens_total_count'])


def background(fn, *args, **kwargs):
    result = {}

    def run():
        try:
            result['value'] = fn(*args, **kwargs)
        except Exception as exc:  # pylint: disable=broad-except
            result['error'] = exc
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def test_wedge_after_n_tokens_freezes_counters_keeps_running_and_health(sim_factory):
    sim = sim_factory(env={'VLLM_SIM_WEDGE_AFTER_TOKENS': '30', 'VLLM_SIM_TOKENS_PER_S': '200',
                           'VLLM_SIM_SHM_WAIT_LOG_S': '10'}).wait_ready()
    status, body, _h = sim.request('/v1/completions', {'prompt': 'hello there', 'max_tokens': 10})
    assert status == 200 and json.loads(body)['usage']['completion_tokens'] == 10   # serves before the wedge
    thread, result = background(stream_chat, sim, {'messages': [{'role': 'user', 'content': 'go on'}],
                                                   'max_tokens': 100}, timeout=3.0)
    assert wait_for(lambda: series(sim)['vllm:generation_tokens_total'] >= 30)
    before = series(sim)
    time.sleep(0.6)
    # a new request arriving at the wedged engine never gets a token either
    with pytest.raises(TIMEOUTS):
        sim.request('/v1/completions', {'prompt': 'anyone?', 'max_tokens': 2}, timeout=0.8)
    after = series(sim)
    assert before['vllm:generation_tokens_total'] == after['vllm:generation_tokens_total'] == 30.0
    assert progress(before) == progress(after)
    assert after['vllm:num_requests_running'] == 1.0          # gauges keep their last published value
    assert sim.request('/health')[0] == 200
    thread.join(5)
    assert isinstance(result.get('error'), TIMEOUTS)           # the streaming client got no [DONE]
    sim.wait_line('No available shared memory broadcast block found in 60 seconds', timeout=5)


def test_wedge_on_demand_through_the_control_endpoint(sim_factory):
    sim = sim_factory(env={'VLLM_SIM_TOKENS_PER_S': '500'}).wait_ready()
    assert sim.request('/v1/completions', {'prompt': 'a', 'max_tokens': 5})[0] == 200
    status, body, _h = sim.request('/sim/wedge', {'after_tokens': 3}, method='POST')
    assert status == 200 and json.loads(body) == {'wedged': False, 'wedge_at_tokens': 8, 'generation_tokens': 5}
    thread, _result = background(sim.request, '/v1/completions', {'prompt': 'b', 'max_tokens': 50}, timeout=3.0)
    assert wait_for(lambda: series(sim)['vllm:generation_tokens_total'] == 8.0)
    first = series(sim)
    time.sleep(0.5)
    assert progress(series(sim)) == progress(first) and first['vllm:num_requests_running'] == 1.0
    assert json.loads(sim.request('/sim/wedge', {'after_tokens': 0}, method='POST')[1])['wedged'] is True
    thread.join(5)
    assert sim.request('/sim/wedge', {'after_tokens': -1}, method='POST')[0] == 400


def test_wedge_requested_while_idle_wedges_the_next_step(sim_factory):
    sim = sim_factory().wait_ready()
    assert sim.request('/sim/wedge', {}, method='POST')[0] == 200
    with pytest.raises(TIMEOUTS):
        sim.request('/v1/completions', {'prompt': 'x', 'max_tokens': 3}, timeout=0.8)
    m = series(sim)
    assert m['vllm:num_requests_running'] == 1.0 and m['vllm:generation_tokens_total'] == 0.0
    assert m['vllm:prompt_tokens_total'] == 0.0


def test_chunked_prefill_holds_the_counters_and_only_kv_usage_rises(sim_factory):
    """What vLLM 0.26.0 showed on the GPU during a chunked prefill (real-vllm-on-device notes, Part 1 §2): before the
    first token the prompt, generation and iteration counters stand still, num_requests_running is 1, the prefix
    cache queries jump once by the whole prompt when it is scheduled, and only vllm:kv_cache_usage_perc rises (every
    step); at the first token everything is credited at once (one iteration for the whole prefill). The stats line
    reads 0.0 tokens/s meanwhile."""
    sim = sim_factory(env={'VLLM_SIM_PREFILL_TOKENS_PER_S': '20000', 'VLLM_SIM_PREFILL_CHUNK_TOKENS': '1000',
                           'VLLM_SIM_STATS_INTERVAL_S': '0.5'}).wait_ready()
    assert sim.request('/v1/completions', {'prompt': 'warm up', 'max_tokens': 2})[0] == 200
    before = series(sim)
    thread, result = background(sim.request, '/v1/completions',
                                {'prompt': 'summarise [[vllm-sim:prompt_tokens=60000]]', 'max_tokens': 4}, timeout=10.0)
    samples = []
    for _i in range(8):
        time.sleep(0.3)
        samples.append(series(sim))
    thread.join(10)
    assert result['value'][0] == 200
    assert json.loads(result['value'][1])['usage']['prompt_tokens'] == 60000
    during = samples[:7]     # 60000 tokens at 20000/s: 3 s of prefill, no token
    assert all(m['vllm:num_requests_running'] == 1.0 for m in during)
    for name in ('vllm:prompt_tokens_total', 'vllm:generation_tokens_total', 'vllm:iteration_tokens_total_count',
                 'vllm:iteration_tokens_total_sum'):
        assert [m[name] for m in during] == [before[name]] * len(during), name
    assert all(m['vllm:prefix_cache_queries_total'] == before['vllm:prefix_cache_queries_total'] + 60000 for m in during)
    kv = [m['vllm:kv_cache_usage_perc'] for m in during]
    assert before['vllm:kv_cache_usage_perc'] == 0.0 < kv[0]
    assert all(a < b for a, b in zip(kv, kv[1:])), kv          # rises at every poll
    final = series(sim)
    assert final['vllm:prompt_tokens_total'] == before['vllm:prompt_tokens_total'] + 60000
    assert final['vllm:generation_tokens_total'] == before['vllm:generation_tokens_total'] + 4
    # the whole prefill is one step (with the first token), then one step per further token
    assert final['vllm:iteration_tokens_total_count'] == before['vllm:iteration_tokens_total_count'] + 4
    assert final['vllm:iteration_tokens_total_sum'] == before['vllm:iteration_tokens_total_sum'] + 60001 + 3
    assert final['vllm:kv_cache_usage_perc'] == 0.0
    line = sim.wait_line('Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 1 reqs')
    assert 'GPU KV cache usage: ' in line


def test_a_wedge_in_the_middle_of_a_prefill_freezes_kv_usage_too(sim_factory):
    sim = sim_factory(env={'VLLM_SIM_PREFILL_TOKENS_PER_S': '20000', 'VLLM_SIM_PREFILL_CHUNK_TOKENS': '1000'}).wait_ready()
    background(sim.request, '/v1/completions', {'prompt': 'long [[vllm-sim:prompt_tokens=60000]]', 'max_tokens': 2},
               timeout=4.0)
    assert wait_for(lambda: series(sim)['vllm:kv_cache_usage_perc'] > 0.0)
    assert sim.request('/sim/wedge', {}, method='POST')[0] == 200
    time.sleep(0.3)
    first = series(sim)
    time.sleep(1.0)
    again = series(sim)
    assert first['vllm:num_requests_running'] == again['vllm:num_requests_running'] == 1.0
    assert first['vllm:kv_cache_usage_perc'] == again['vllm:kv_cache_usage_perc'] > 0.0
    assert progress(first) == progress(again) == (0.0, 0.0, 0.0)


def test_prompt_tokens_marker_must_be_a_positive_integer(sim_factory):
    sim = sim_factory().wait_ready()
    status, body, _h = sim.request('/v1/completions', {'prompt': 'x [[vllm-sim:prompt_tokens=abc]]', 'max_tokens': 1})
    assert status == 200 and json.loads(body)['usage']['prompt_tokens'] == 8  # ceil(32 chars / 4)
    status, body, _h = sim.request('/v1/completions', {'prompt': 'x [[vllm-sim:prompt_tokens=2000000]]', 'max_tokens': 1})
    assert status == 400 and "maximum context length is 1048576 tokens" in body
