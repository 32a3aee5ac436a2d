# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runtime wedge and slow prefill of the vLLM simulator (the hang drills): what /metrics shows while the
engine is stuck mid-serve, and while a long prompt is prefilled without a generated token."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import socket
import threading
import time

import pytest

from conftest import stream_chat  # pylint: disable=import-error

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


def wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


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


def test_slow_prefill_moves_prompt_tokens_and_steps_without_generation(sim_factory):
    """A 1M-style prefill: [[vllm-sim:prompt_tokens=N]] counts the prompt as N tokens, prefilled in chunks."""
    sim = sim_factory(env={'VLLM_SIM_PREFILL_TOKENS_PER_S': '20000', 'VLLM_SIM_PREFILL_CHUNK_TOKENS': '2000'}).wait_ready()
    thread, result = background(sim.request, '/v1/completions',
                                {'prompt': 'summarise [[vllm-sim:prompt_tokens=60000]]', 'max_tokens': 4}, timeout=10.0)
    samples = []
    for _i in range(5):
        time.sleep(0.4)
        samples.append(series(sim))
    thread.join(10)
    assert result['value'][0] == 200
    assert json.loads(result['value'][1])['usage']['prompt_tokens'] == 60000
    during = samples[:4]
    assert all(m['vllm:num_requests_running'] == 1.0 and m['vllm:generation_tokens_total'] == 0.0 for m in during)
    prompt = [m['vllm:prompt_tokens_total'] for m in during]
    steps = [m['vllm:iteration_tokens_total_count'] for m in during]
    assert prompt == sorted(prompt) and len(set(prompt)) == 4 and 0 < prompt[0] < 60000   # moving, in chunks
    assert steps == sorted(steps) and len(set(steps)) == 4
    assert all(p % 2000 == 0 for p in prompt)
    final = series(sim)
    assert final['vllm:prompt_tokens_total'] == 60000.0 and final['vllm:generation_tokens_total'] == 4.0


def test_prompt_tokens_marker_must_be_a_positive_integer(sim_factory):
    sim = sim_factory().wait_ready()
    status, body, _h = sim.request('/v1/completions', {'prompt': 'x [[vllm-sim:prompt_tokens=abc]]', 'max_tokens': 1})
    assert status == 200 and json.loads(body)['usage']['prompt_tokens'] == 8  # ceil(32 chars / 4)
    status, body, _h = sim.request('/v1/completions', {'prompt': 'x [[vllm-sim:prompt_tokens=2000000]]', 'max_tokens': 1})
    assert status == 400 and "maximum context length is 1048576 tokens" in body
