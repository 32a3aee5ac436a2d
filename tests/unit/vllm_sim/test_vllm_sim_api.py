# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""HTTP API of the vLLM simulator: closed port while starting, endpoints, auth, streaming, tools, metrics."""


import http.client
import json
import os
import signal
import socket
import threading
import time

import pytest

from conftest import stream_chat, wait_for  # pylint: disable=import-error
from vllm_sim import standin  # pylint: disable=import-error

PROFILE_ARGS = ['--served-model-name', 'deepseek-v4-flash', '--max-model-len', '200000', '--max-num-seqs', '4',
                '--block-size', '256', '--kv-cache-dtype', 'fp8', '--gpu-memory-utilization', '0.9',
                '--speculative-config', '{"method":"deepseek_mtp","num_speculative_tokens":3}',
                '--tool-call-parser', 'deepseek_v4', '--enable-auto-tool-choice', '--reasoning-parser', 'deepseek_v4',
                '--default-chat-template-kwargs', '{"thinking":true}']
KEY = 'sk-test-123'
STARTUP_ORDER = [
    'vLLM server version 0.27.1, serving model /models/sim-model',
    'non-default args: {',
    'Initializing a V1 LLM engine (v0.27.1) with config: ',
    'world_size=1 rank=0 local_rank=0 distributed_init_method=tcp://127.0.0.1:29501 backend=nccl',
    'vLLM is using nccl==2.27.7',
    'Starting to load model /models/sim-model...',
    'Loading safetensors checkpoint shards: 100% Completed | 8/8',
    'Loading weights took ',
    'Model loading took 75.0000 GiB memory and ',
    'Available KV cache memory: ',
    'GPU KV cache size: ',
    'Maximum concurrency for 200,000 tokens per request: ',
    'Capturing CUDA graphs (decode, FULL)',
    'Graph capturing finished in ',
    'init engine (profile, create kv cache, warmup model) took ',
    'Starting vLLM server on http://127.0.0.1:',
    'Started server process [',
    'Waiting for application startup.',
    'Application startup complete.',
]


@pytest.fixture
def sim(sim_factory):
    return sim_factory(PROFILE_ARGS, env={'VLLM_API_KEY': KEY}).wait_ready()


def _chat(sim, content, **extra):
    body = {'model': 'deepseek-v4-flash', 'messages': [{'role': 'user', 'content': content}], 'temperature': 0}
    body.update(extra)
    code, text, _headers = sim.request('/v1/chat/completions', body, key=KEY)
    assert code == 200, text
    return json.loads(text)


def test_port_refused_until_startup_complete(sim_factory):
    sim = sim_factory(env={'VLLM_SIM_TIME_SCALE': '1', 'VLLM_SIM_LOAD_S': '1.0', 'VLLM_SIM_INIT_S': '0.1',
                           'VLLM_SIM_PROFILE_S': '0.1', 'VLLM_SIM_GRAPH_S': '0.1', 'VLLM_SIM_API_S': '0.1'})
    sim.wait_line('Starting to load model')
    refused = 0
    while True:
        try:
            socket.create_connection(('127.0.0.1', sim.port), timeout=1).close()
        except ConnectionRefusedError:
            refused += 1
            time.sleep(0.05)
            continue
        # Accepted: the line was written before the port listened, so it is in the pipe whether or not the reader
        # thread has taken it yet. The process is stopped first so that nothing written after the accept counts.
        os.kill(sim.proc.pid, signal.SIGSTOP)
        try:
            sim.wait_line('Application startup complete.', timeout=5)
        except AssertionError as exc:
            pytest.fail('port accepted a connection before startup completed: %s' % exc)
        finally:
            os.kill(sim.proc.pid, signal.SIGCONT)
        break
    assert refused >= 5
    assert sim.request('/health')[0] == 200


def test_startup_lines_in_order(sim):
    out = sim.output
    assert out.splitlines()[0].startswith('vllm-sim: this is a STAND-IN for vLLM')
    pos = -1
    for text in STARTUP_ORDER:
        idx = out.find(text, pos + 1)
        assert idx > pos, 'missing or out of order: %r' % text
        pos = idx
    assert "'api_key': '***'" not in out or KEY not in out
    assert KEY not in out


def test_kv_line_one_line_form_on_033(sim_factory):
    sim = sim_factory(['--max-model-len', '1048576'], env={'VLLM_SIM_VERSION': '0.33.0', 'VLLM_SIM_KV_TOKENS': '2418690',
                                                           'VLLM_SIM_SHARDS': '3'}).wait_ready()
    line = sim.wait_line('GPU KV cache size:')
    assert line.endswith('GPU KV cache size: 2,418,688 tokens, Maximum concurrency for 1,048,576 tokens per request: 2.31x')
    assert 'Loading safetensors checkpoint shards: 100% Completed | 3/3' in sim.output


def test_shards_counted_from_model_dir(sim_factory, sim_root):
    # no index: every *.safetensors of the directory is a shard (vLLM's default loader)
    standin.make_model(os.path.join(sim_root, 'models', 'five'), shards=5, index=False)
    sim = sim_factory(model='/models/five').wait_ready()
    assert 'Loading safetensors checkpoint shards: 100% Completed | 5/5' in sim.output


def test_open_endpoints_and_auth(sim):
    assert sim.request('/health')[:2] == (200, '')
    assert sim.request('/ping')[0] == 200
    assert json.loads(sim.request('/version')[1]) == {'version': '0.27.1'}
    code, body, _hdrs = sim.request('/v1/models')
    assert (code, json.loads(body)) == (401, {'error': 'Unauthorized'})
    assert sim.request('/v1/models', key='wrong')[0] == 401
    code, body, _hdrs = sim.request('/v1/models', key=KEY)
    card = json.loads(body)['data'][0]
    assert code == 200 and card['id'] == 'deepseek-v4-flash' and card['max_model_len'] == 200000
    assert card['root'] == '/models/sim-model'
    code, body, headers = sim.request('/metrics')
    assert code == 200 and headers['content-type'].startswith('text/plain; version=0.0.4')
    assert sim.request('/v1/chat/completions', {'messages': [{'role': 'user', 'content': 'x'}]})[0] == 401


def test_keep_alive_after_rejected_post(sim):
    conn = http.client.HTTPConnection('127.0.0.1', sim.port, timeout=5)
    try:
        conn.request('POST', '/v1/completions', body=json.dumps({'prompt': 'x' * 500}),
                     headers={'Content-Type': 'application/json'})
        resp = conn.getresponse()
        assert resp.status == 401 and json.loads(resp.read()) == {'error': 'Unauthorized'}
        conn.request('GET', '/health')
        resp = conn.getresponse()
        assert resp.status == 200 and resp.read() == b''
    finally:
        conn.close()


def test_several_served_model_names(sim_factory):
    sim = sim_factory(['--served-model-name', 'alias-a', 'alias-b']).wait_ready()
    ids = [card['id'] for card in json.loads(sim.request('/v1/models')[1])['data']]
    assert ids == ['alias-a', 'alias-b']
    req = {'model': 'alias-b', 'prompt': 'What is 2+2? Answer with one word.', 'max_tokens': 3}
    code, body, _hdrs = sim.request('/v1/completions', req)
    assert code == 200 and json.loads(body)['model'] == 'alias-a'


def test_cli_api_key_list_beats_env(sim_factory):
    sim = sim_factory(['--api-key', 'a1', 'a2'], env={'VLLM_API_KEY': 'envkey'}).wait_ready()
    assert sim.request('/v1/models', key='a2')[0] == 200
    assert sim.request('/v1/models', key='envkey')[0] == 401


def test_deterministic_answer_with_reasoning(sim):
    res = _chat(sim, 'What is 2+2? Answer with one word.', max_tokens=32)
    msg = res['choices'][0]['message']
    assert msg['content'] == 'Four' and msg['reasoning'] and res['choices'][0]['finish_reason'] == 'stop'
    assert res['usage']['completion_tokens'] == res['usage']['completion_tokens_details']['reasoning_tokens'] + 1
    res = _chat(sim, 'What is the capital of France? Answer with one word.', chat_template_kwargs={'thinking': False})
    assert res['choices'][0]['message']['content'] == 'Paris' and res['choices'][0]['message']['reasoning'] is None


def test_max_tokens_respected(sim):
    res = _chat(sim, 'Tell me a story.', max_tokens=7, chat_template_kwargs={'thinking': False})
    assert res['usage']['completion_tokens'] == 7 and res['choices'][0]['finish_reason'] == 'length'
    assert len(res['choices'][0]['message']['content'].split()) == 7


def test_stream_with_usage_and_reasoning(sim):
    events = stream_chat(sim, {'messages': [{'role': 'user', 'content': 'Write a sentence.'}], 'max_tokens': 20,
                               'stream_options': {'include_usage': True}}, key=KEY)
    assert events[-1][1] == '[DONE]'
    usage_chunk = events[-2][1]
    assert usage_chunk['choices'] == [] and usage_chunk['usage']['completion_tokens'] == 20
    deltas = [e[1]['choices'][0]['delta'] for e in events[:-2] if e[1]['choices']]
    assert any(d.get('reasoning') for d in deltas) and any(d.get('content') for d in deltas)
    n_tokens = sum(1 for d in deltas if d.get('reasoning') or d.get('content'))
    assert n_tokens == 20
    assert events[-3][1]['choices'][0]['finish_reason'] == 'length'


def test_stream_without_usage_has_no_usage_chunk(sim):
    events = stream_chat(sim, {'messages': [{'role': 'user', 'content': 'hi'}], 'max_tokens': 3}, key=KEY)
    assert all('usage' not in e[1] for e in events if e[1] != '[DONE]')


def test_tool_call_valid_json(sim):
    tools = [{'type': 'function', 'function': {'name': 'get_weather', 'parameters': {
        'type': 'object', 'properties': {'city': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['c', 'f']},
                                         'days': {'type': 'integer'}}, 'required': ['city']}}}]
    res = _chat(sim, 'What is the weather in Paris?', tools=tools, chat_template_kwargs={'thinking': False})
    choice = res['choices'][0]
    call = choice['message']['tool_calls'][0]
    assert choice['finish_reason'] == 'tool_calls' and call['function']['name'] == 'get_weather'
    assert json.loads(call['function']['arguments']) == {'city': 'Paris', 'unit': 'c', 'days': 1}
    events = stream_chat(sim, {'messages': [{'role': 'user', 'content': 'weather in Paris'}], 'tools': tools,
                               'chat_template_kwargs': {'thinking': False}}, key=KEY)
    parts = [tc['function'].get('arguments', '') for e in events if e[1] != '[DONE]' and e[1]['choices']
             for tc in e[1]['choices'][0]['delta'].get('tool_calls', [])]
    assert json.loads(''.join(parts))['city'] == 'Paris'
    res = _chat(sim, 'hello', tools=tools, tool_choice='none', chat_template_kwargs={'thinking': False})
    assert not res['choices'][0]['message']['tool_calls']


def test_auto_tool_choice_needs_flags(sim_factory):
    sim = sim_factory().wait_ready()
    body = {'messages': [{'role': 'user', 'content': 'x'}], 'tools': [{'type': 'function', 'function': {'name': 'f'}}]}
    code, body, _hdrs = sim.request('/v1/chat/completions', body)
    assert code == 400
    assert json.loads(body)['error']['message'] == ('"auto" tool choice requires --enable-auto-tool-choice and '
                                                    '--tool-call-parser to be set')


def test_completions_endpoint_and_unknown_model(sim):
    req = {'model': 'deepseek-v4-flash', 'prompt': 'What is 2+2? Answer with one word.', 'max_tokens': 5}
    code, body, _hdrs = sim.request('/v1/completions', req, key=KEY)
    res = json.loads(body)
    assert code == 200 and res['choices'][0]['text'] == 'Four' and res['usage']['completion_tokens'] == 1
    code, body, _hdrs = sim.request('/v1/completions', {'model': 'nope', 'prompt': 'x'}, key=KEY)
    assert code == 404 and 'The model `nope` does not exist.' in body


def _metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + '{') or line.startswith(name + ' '):
            return float(line.rsplit(' ', 1)[1])
    raise AssertionError('metric %s missing' % name)


def test_metrics_names_and_counters(sim):
    _chat(sim, 'Tell me a story.', max_tokens=30, chat_template_kwargs={'thinking': False})
    text = sim.request('/metrics')[1]
    for name in ('vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc',
                 'vllm:prompt_tokens_total', 'vllm:generation_tokens_total', 'vllm:iteration_tokens_total_count',
                 'vllm:time_to_first_token_seconds_count', 'vllm:spec_decode_num_drafts_total',
                 'vllm:spec_decode_num_draft_tokens_total', 'vllm:spec_decode_num_accepted_tokens_total'):
        _metric(text, name)
    assert _metric(text, 'vllm:generation_tokens_total') == 30
    assert 'vllm:iteration_tokens_total_bucket{engine="0",model_name="deepseek-v4-flash",le="+Inf"}' in text
    assert 'vllm:time_to_first_token_seconds_bucket{' in text
    info = [ln for ln in text.splitlines() if ln.startswith('vllm:cache_config_info{')][0]
    assert 'block_size="256"' in info and 'cache_dtype="fp8"' in info and 'gpu_memory_utilization="0.9"' in info
    drafts = _metric(text, 'vllm:spec_decode_num_drafts_total')
    per_pos = [ln for ln in text.splitlines() if ln.startswith('vllm:spec_decode_num_accepted_tokens_per_pos_total{')]
    assert [p.split('position="')[1][0] for p in per_pos] == ['0', '1', '2']
    assert drafts > 0 and abs(float(per_pos[0].rsplit(' ', 1)[1]) / drafts - 0.91) < 0.15


def test_spec_acceptance_configurable(sim_factory):
    sim = sim_factory(['--speculative-config', '{"method":"dspark","num_speculative_tokens":2}'],
                      env={'VLLM_SIM_SPEC_ACCEPTANCE': '0.5,0.25'}).wait_ready()
    sim.request('/v1/completions', {'prompt': 'story', 'max_tokens': 700})
    text = sim.request('/metrics')[1]
    drafts = _metric(text, 'vllm:spec_decode_num_drafts_total')
    assert drafts == 400  # 700 tokens / mean acceptance length 1.75
    assert 'position="0"} 200.0' in text and 'position="1"} 100.0' in text
    assert _metric(text, 'vllm:spec_decode_num_accepted_tokens_total') == 300


def test_no_spec_metrics_without_speculative_config(sim_factory):
    sim = sim_factory().wait_ready()
    assert 'spec_decode' not in sim.request('/metrics')[1]


def test_max_num_seqs_queues_requests(sim_factory):
    sim = sim_factory(['--max-num-seqs', '1'], env={'VLLM_SIM_TOKENS_PER_S': '20'}).wait_ready()
    done = []

    def one():
        done.append(sim.request('/v1/completions', {'prompt': 'story', 'max_tokens': 40})[0])
    threads = [threading.Thread(target=one) for _i in range(2)]
    for t in threads:
        t.start()
    # both seen by the scheduler (each ~2 s at 20 tok/s), however late the second thread's request comes on a loaded
    # machine: one runs, one waits
    seen = {}

    def both_in():
        seen['text'] = text = sim.request('/metrics')[1]
        return _metric(text, 'vllm:num_requests_running') + _metric(text, 'vllm:num_requests_waiting') >= 2
    assert wait_for(both_in, 10, 0.02), 'the two requests never were in the engine together: %s' % seen['text']
    text = seen['text']
    assert _metric(text, 'vllm:num_requests_running') == 1 and _metric(text, 'vllm:num_requests_waiting') == 1
    for t in threads:
        t.join(10)
    assert done == [200, 200]
    text = sim.request('/metrics')[1]
    assert _metric(text, 'vllm:num_requests_running') == 0 and _metric(text, 'vllm:num_requests_waiting') == 0


def test_a_prompt_of_token_ids_counts_one_token_each(sim_factory):
    """/v1/completions takes a list of token ids as the prompt (the recorder's long prompts are sent so): vLLM counts
    each id as one prompt token, whatever the text they would join to."""
    sim = sim_factory().wait_ready()
    status, body, _h = sim.request('/v1/completions', {'prompt': [31999 - i for i in range(300)], 'max_tokens': 2})
    assert status == 200 and json.loads(body)['usage']['prompt_tokens'] == 300
    status, body, _h = sim.request('/v1/completions', {'prompt': ['hello there'], 'max_tokens': 2})
    assert status == 200 and json.loads(body)['usage']['prompt_tokens'] == 3   # ceil(11 chars / 4): text, not ids
