# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Injected failures of the vLLM simulator print vLLM's exact messages; garbled output on demand."""


import json
import re
import signal
import socket
import threading
import time

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import garble
from conftest import stream_chat, wait_for  # pylint: disable=import-error

FREE_RE = (r'ValueError: Free memory on device cuda:0 \((\d+\.\d\d)/119\.67 GiB\) on startup is less than desired GPU '
           r'memory utilization \(0\.9, 107\.70 GiB\)\. Decrease GPU memory utilization or reduce GPU memory used by '
           r'other processes\.')
ENGINE_INIT = 'RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}'


def test_free_memory_injected(sim_factory):
    sim = sim_factory(['--gpu-memory-utilization', '0.9'], env={'VLLM_SIM_FAIL': 'free_memory', 'VLLM_SIM_FREE_GIB': '95.2'})
    assert sim.wait_exit() == 1
    match = re.search(FREE_RE, sim.output)
    assert match and match.group(1) == '95.20'
    assert ENGINE_INIT in sim.output and 'Starting to load model' not in sim.output


def test_free_memory_real_check_against_memavailable(sim_factory):
    short = sim_factory(['--gpu-memory-utilization', '0.9'],
                        env={'VLLM_SIM_CHECK_MEMAVAILABLE': '1', 'VLLM_SIM_TOTAL_GIB': '1000000'})
    assert short.wait_exit() == 1
    assert 'on startup is less than desired GPU memory utilization (0.9, 900000.00 GiB)' in short.output
    enough = sim_factory(['--gpu-memory-utilization', '0.5'],
                         env={'VLLM_SIM_CHECK_MEMAVAILABLE': '1', 'VLLM_SIM_TOTAL_GIB': '0.001'}).wait_ready()
    assert 'Free memory on device' not in enough.output


def test_free_memory_is_memfree_not_memavailable(sim_factory, tmp_path):
    """Seed 000: 4.75/119.67 GiB free with 110 GiB in page cache. MemAvailable (115 GiB) would pass;
    the simulator reports MemFree, like CUDA on GB10."""
    meminfo = tmp_path / 'meminfo'
    meminfo.write_text('MemTotal: %d kB\nMemFree: %d kB\nMemAvailable: %d kB\nCached: %d kB\n'
                       % (int(119.67 * 1048576), int(4.75 * 1048576), 115 * 1048576, 110 * 1048576))
    sim = sim_factory(['--gpu-memory-utilization', '0.9'],
                      env={'VLLM_SIM_CHECK_MEMFREE': '1', 'VLLM_SIM_MEMINFO': str(meminfo)})
    assert sim.wait_exit() == 1
    match = re.search(FREE_RE, sim.output)
    assert match and match.group(1) == '4.75', sim.output[-2000:]


@pytest.mark.parametrize('env', [{'VLLM_SIM_FAIL': 'shm_ring'}, {'VLLM_WORKER_MULTIPROC_METHOD': 'fork'}])
def test_shm_ring_buffer_error(sim_factory, env):
    sim = sim_factory(env=env)
    assert sim.wait_exit() == 1
    out = sim.output
    assert re.search(r"FileNotFoundError: \[Errno 2\] No such file or directory: '/psm_[0-9a-f]+'", out)
    assert "AttributeError: 'ShmRingBuffer' object has no attribute 'shared_memory'" in out
    assert out.index('FileNotFoundError') < out.index('AttributeError')


def test_spawn_is_fine(sim_factory):
    sim = sim_factory(env={'VLLM_WORKER_MULTIPROC_METHOD': 'spawn'}).wait_ready()
    assert 'ShmRingBuffer' not in sim.output


def test_load_crash(sim_factory):
    sim = sim_factory(env={'VLLM_SIM_FAIL': 'load_crash'})
    assert sim.wait_exit() == 1
    out = sim.output
    assert 'Loading safetensors checkpoint shards:  50% Completed | 4/8' in out
    assert '5/8' not in out and 'Loading weights took' not in out and ENGINE_INIT in out


def test_hang_port_open_health_ok_no_tokens(sim_factory):
    sim = sim_factory(env={'VLLM_SIM_FAIL': 'hang'}).wait_ready()
    assert sim.request('/health')[0] == 200
    with pytest.raises((socket.timeout, TimeoutError, OSError)):
        sim.request('/v1/completions', {'prompt': 'hi', 'max_tokens': 2}, timeout=0.8)
    with pytest.raises((socket.timeout, TimeoutError, OSError)):
        stream_chat(sim, {'messages': [{'role': 'user', 'content': 'hi'}], 'max_tokens': 2}, timeout=0.8)
    assert sim.request('/health')[0] == 200


def test_unknown_failure_name_rejected(sim_factory):
    sim = sim_factory(env={'VLLM_SIM_FAIL': 'nonsense'})
    assert sim.wait_exit() == 2
    assert "unknown VLLM_SIM_FAIL='nonsense'" in sim.output


def test_api_port_in_use(sim_factory):
    blocker = socket.socket()
    blocker.bind(('127.0.0.1', 0))
    blocker.listen(1)
    try:
        sim = sim_factory(port=blocker.getsockname()[1])
        assert sim.wait_exit() == 1
        assert 'OSError: [Errno 98] Address already in use' in sim.output
    finally:
        blocker.close()


def test_tp2_without_nnodes_is_world_size_error(sim_factory):
    sim = sim_factory(['--tensor-parallel-size', '2'])
    assert sim.wait_exit() == 1
    assert 'World size (2) is larger than the number of available GPUs (1) in this node.' in sim.output


def test_sigterm_exits_promptly_during_load(sim_factory):
    sim = sim_factory(env={'VLLM_SIM_TIME_SCALE': '1', 'VLLM_SIM_LOAD_S': '30'})
    sim.wait_line('Starting to load model')
    t0 = time.monotonic()
    sim.proc.send_signal(signal.SIGTERM)
    assert sim.wait_exit(5) == 0
    assert time.monotonic() - t0 < 3.0  # seconds, not the 30 s load: generous for a loaded 2-core CI VM


def _content(sim, prompt, max_tokens=30):
    req = {'messages': [{'role': 'user', 'content': prompt}], 'max_tokens': max_tokens, 'temperature': 0}
    code, body, _hdrs = sim.request('/v1/chat/completions', req)
    assert code == 200
    return json.loads(body)['choices'][0]['message']['content']


def test_garble_markers(sim_factory):
    sim = sim_factory().wait_ready()
    clean = _content(sim, 'Tell me about foxes.')
    assert clean and all(ord(c) < 128 for c in clean)
    cjk = _content(sim, 'Tell me about foxes. [[vllm-sim:garble=cjk]]')
    assert sum(1 for c in cjk if '\u4e00' <= c <= '\u9fff') > len(cjk) / 4
    rep = _content(sim, 'What is 2+2? Answer with one word. [[vllm-sim:garble=repeat]]')
    assert rep.startswith('Four') and ' the the the the the the the the' in rep
    leak = _content(sim, 'hi [[vllm-sim:garble=leak]]')
    assert '<｜tool▁calls▁begin｜>' in leak and '</think>' in leak
    assert _content(sim, 'hi [[vllm-sim:garble=empty]]') == ''


def test_garble_env_and_concurrency_trigger(sim_factory):
    sim = sim_factory(env={'VLLM_SIM_GARBLE': 'leak'}).wait_ready()
    assert '</think>' in _content(sim, 'What is 2+2? Answer with one word.')
    sim2 = sim_factory(env={'VLLM_SIM_GARBLE_MIN_CONCURRENCY': '2', 'VLLM_SIM_TOKENS_PER_S': '50'}).wait_ready()
    assert _content(sim2, 'What is 2+2? Answer with one word.') == 'Four'
    # The rule is decided when a request is planned (admitted). A long request (100 tokens at 50 tok/s: ~2 s) is in
    # the engine (/load) when the short one is sent, so the short one is planned with two in the engine: garbled.
    # (Two short requests started together overlapped only when the second arrived within the first's ~40 ms: under
    # CI's load, in CI38, it did not, and both came back clean.)
    first = []
    long_one = threading.Thread(target=lambda: first.append(_content(sim2, 'Tell me about foxes.', max_tokens=100)))
    long_one.start()
    assert wait_for(lambda: json.loads(sim2.request('/load')[1])['server_load'] >= 1, 10, 0.02), \
        'the long request never reached the engine'
    second = _content(sim2, 'What is 2+2? Answer with one word.', max_tokens=8)
    long_one.join(15)
    assert len(first) == 1 and first[0], first
    assert second.startswith('Four') and any('\u4e00' <= c <= '\u9fff' for c in second), second


TOOLS = [{'type': 'function', 'function': {'name': 'get_weather', 'parameters': {
    'type': 'object', 'properties': {'city': {'type': 'string'}}, 'required': ['city']}}}]
KEY = 'sk-garble-test'


def _switch(sim, body):
    code, text, _hdrs = sim.request('/sim/garble', body, method='POST')
    return code, json.loads(text)


def _ask(sim, prompt, **extra):
    body = {'messages': [{'role': 'user', 'content': prompt}], 'max_tokens': 30, 'temperature': 0}
    body.update(extra)
    code, text, _hdrs = sim.request('/v1/chat/completions', body, key=KEY)
    assert code == 200, text
    return json.loads(text)['choices'][0]


def _streamed(sim, prompt, **extra):
    """(content, tool call names, finish_reason) of a streamed chat."""
    body = {'messages': [{'role': 'user', 'content': prompt}], 'max_tokens': 30, 'temperature': 0}
    body.update(extra)
    events = [e for _t, e in stream_chat(sim, body, key=KEY)]
    assert events[-1] == '[DONE]'
    choices = [e['choices'][0] for e in events[:-1] if e['choices']]
    content = ''.join(c['delta'].get('content') or '' for c in choices)
    names = [tc['function']['name'] for c in choices for tc in c['delta'].get('tool_calls', [])
             if (tc.get('function') or {}).get('name')]
    return content, names, choices[-1]['finish_reason']


def _generated(sim):
    code, text, _hdrs = sim.request('/metrics')
    assert code == 200
    return float(re.search(r'^vllm:generation_tokens_total\{[^}]*\} (\S+)$', text, re.M).group(1))


def test_garble_switched_at_run_time(sim_factory):
    """POST /sim/garble: every later reply garbled (plain, streamed, tool call), /health 200 and the counters moving,
    then clean again; no key needed, like /sim/wedge, while /v1 still wants one."""
    sim = sim_factory(['--enable-auto-tool-choice', '--tool-call-parser', 'deepseek_v4'],
                      env={'VLLM_API_KEY': KEY}).wait_ready()
    question = 'What is 2+2? Answer with one word.'
    assert sim.request('/v1/models')[0] == 401 and sim.request('/v1/models', key=KEY)[0] == 200
    assert _ask(sim, question)['message']['content'] == 'Four'
    clean_call = _ask(sim, 'weather in Paris', tools=TOOLS)
    assert clean_call['finish_reason'] == 'tool_calls'
    assert clean_call['message']['tool_calls'][0]['function']['name'] == 'get_weather'

    for mode, check in (('cjk', 'unexpected_script'), ('repeat', 'token_loop'), ('leak', 'leaked_token'),
                        ('empty', 'empty_reply')):
        assert _switch(sim, {'mode': mode}) == (200, {'garble': mode})
        before = _generated(sim)
        reply = _ask(sim, question)['message']['content']
        assert check in [f['check'] for f in garble.check_reply(reply)], (mode, reply)
        content, names, finish = _streamed(sim, question)
        assert check in [f['check'] for f in garble.check_reply(content)], (mode, content)
        call = _ask(sim, 'weather in Paris', tools=TOOLS)
        assert not call['message']['tool_calls'] and call['finish_reason'] != 'tool_calls', (mode, call)
        assert check in [f['check'] for f in garble.check_reply(call['message']['content'] or '')], (mode, call)
        content, names, finish = _streamed(sim, 'weather in Paris', tools=TOOLS)
        assert names == [] and finish != 'tool_calls', (mode, names, finish)
        assert check in [f['check'] for f in garble.check_reply(content)], (mode, content)
        assert sim.request('/health')[0] == 200
        assert _generated(sim) >= before + 4          # four replies, at least one token each: the counters move

    assert _switch(sim, {'mode': None}) == (200, {'garble': None})
    assert _ask(sim, question)['message']['content'] == 'Four'
    content, names, finish = _streamed(sim, 'Tell me about foxes.')
    assert content and garble.check_reply(content) == [] and finish == 'length'
    content, names, finish = _streamed(sim, 'weather in Paris', tools=TOOLS)
    assert names == ['get_weather'] and finish == 'tool_calls'


def test_garble_switch_refuses_a_bad_mode(sim_factory):
    sim = sim_factory(env={'VLLM_SIM_GARBLE': 'leak'}).wait_ready()
    for body, got in (({'mode': 'klingon'}, 'got "klingon"'), ({'mode': 1}, 'got 1'), ({'mode': ['cjk']}, 'got ["cjk"]'),
                      ({}, 'got no "mode"'), ([], 'got no JSON object')):
        code, answer = _switch(sim, body)
        assert code == 400, body
        message = answer['error']['message']
        assert message.startswith('"mode" must be one of cjk, repeat, leak, empty or null (clean replies), '), message
        assert got in message, (body, message)
    assert '</think>' in _content(sim, 'hi')               # the mode in force is unchanged
