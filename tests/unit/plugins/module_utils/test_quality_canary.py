# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/module_utils/_node/quality_canary.py: the canary's checks on stream records, the timing judgement against the
pair's own baseline, the saturation skip and the settings' refusals."""

import json
import threading

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import quality_canary as qc
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import smoke_checks

CJK = '我们 的 模型 在 这个 问题 上 给出 了 答案 。 然后 继续 生成 中文 文本'
GOOD_DECODE = ('The sky looks blue because air molecules scatter the short blue wavelengths of sunlight far more '
               'than the longer red ones, so blue light reaches our eyes from every direction of the sky.')


def record(content='', tool_calls=None, finish='stop', tokens=8, ttft=0.2, tps=50.0, error=None):
    t_first = 10.0 + ttft
    return {'t_start': 10.0, 't_first': t_first, 't_last': t_first + (tokens - 1) / tps, 'completion_tokens': tokens,
            'error': error, 'status': None if error else 200, 'content': content, 'tool_calls': tool_calls or [],
            'finish_reason': finish}


TOOL_CALL = [{'id': 'c1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': json.dumps({'city': 'Paris'})}}]


class FakeServer(object):
    """stream_chat's stand-in: answers by prompt; `mode` garbles every reply; `bodies` keeps what was sent."""

    def __init__(self, mode=None, decode_tps=50.0, ttft=0.2, error=None):
        self.mode, self.decode_tps, self.ttft, self.error = mode, decode_tps, ttft, error
        self.bodies = []

    def __call__(self, base_url, body, api_key=None, timeout=600.0):
        self.bodies.append((base_url, body, api_key, timeout))
        if self.error:
            return record(error=self.error)
        prompt = body['messages'][0]['content']
        if self.mode == 'cjk':
            return record(content=CJK, tokens=24)
        if body.get('tools'):
            return record(tool_calls=TOOL_CALL, finish='tool_calls', tokens=12)
        answer = {'What is 2+2? Answer with one word.': 'Four',
                  'What is the capital of France? Answer with one word.': 'Paris.'}.get(prompt)
        if answer:
            return record(content=answer, tokens=2)
        return record(content=GOOD_DECODE, tokens=body['max_tokens'], tps=self.decode_tps, ttft=self.ttft)


def test_a_healthy_pair_passes_with_its_timings_and_every_request_streamed_at_temperature_0():
    server = FakeServer()
    result = qc.run_canary('https://127.0.0.1:8000', 'deepseek-v4-flash', api_key='k', tool_choice='auto',
                           decode_tokens=64, stream=server)
    assert result['ok'] and result['failures'] == [], result['failures']
    assert [r['request'] for r in result['requests']] == ['arithmetic', 'capital', 'tool_call', 'decode']
    assert result['ttft_s'] == pytest.approx(0.2) and result['decode_tps'] == pytest.approx(50.0)
    for url, body, key, _timeout in server.bodies:
        assert url == 'https://127.0.0.1:8000' and key == 'k'
        assert body['temperature'] == 0.0 and body['model'] == 'deepseek-v4-flash'
        assert body['chat_template_kwargs'] == {'thinking': False, 'enable_thinking': False}
    tool_body = server.bodies[2][1]
    assert tool_body['tools'] == [smoke_checks.TOOL] and tool_body['tool_choice'] == 'auto'
    assert server.bodies[3][1]['max_tokens'] == 64


def test_a_garbled_pair_fails_every_check_it_garbles():
    result = qc.run_canary('http://127.0.0.1:8001', 'm', stream=FakeServer(mode='cjk'))
    assert not result['ok']
    checks = set((f['request'], f['check']) for f in result['failures'])
    assert ('arithmetic', 'known_answer') in checks and ('arithmetic', 'unexpected_script') in checks
    assert ('capital', 'known_answer') in checks
    assert ('tool_call', 'tool_call') in checks          # no tool call in a garbled reply
    assert ('decode', 'unexpected_script') in checks
    assert qc.summary(result).startswith('%d check(s) failed: arithmetic unexpected_script' % len(result['failures']))


def test_a_refused_request_is_a_failure_naming_the_error():
    result = qc.run_canary('http://127.0.0.1:8001', 'm', stream=FakeServer(error='HTTP 502: Bad Gateway'))
    assert not result['ok'] and result['ttft_s'] is None
    assert [f['check'] for f in result['failures']] == ['http'] * 4
    assert 'HTTP 502: Bad Gateway' in result['failures'][0]['detail']


def test_no_tool_check_when_the_recipe_has_none_and_it_is_said():
    server = FakeServer()
    result = qc.run_canary('http://h:1', 'm', tools=False, stream=server)
    assert result['ok'] and not any(b[1].get('tools') for b in server.bodies)
    assert result['skipped_checks'] == ['tool_call: the recipe has no tool-call parser']


def test_timings_against_the_baseline():
    baseline = {'ttft_s': 0.2, 'decode_tps': 50.0}
    ok = qc.judge_timings({'ok': True, 'failures': [], 'ttft_s': 0.9, 'decode_tps': 20.0}, baseline)
    assert ok['ok'], ok  # 0.9 <= 0.2 x 5 + 2; 20 >= 0.3 x 50
    slow = qc.judge_timings({'ok': True, 'failures': [], 'ttft_s': 3.5, 'decode_tps': 14.0}, baseline)
    assert not slow['ok'] and [f['check'] for f in slow['failures']] == ['ttft_drift', 'decode_drift']
    assert slow['failures'][0]['detail'] == ('time to first token 3.50 s, above 3.00 s (5.0 x the baseline 0.20 s + '
                                             '2.0 s)')
    assert slow['failures'][1]['detail'] == 'decode 14.0 tok/s, below 15.0 tok/s (0.30 x the baseline 50.0 tok/s)'
    # the settings move the bounds; no baseline yet: nothing to compare
    assert qc.judge_timings({'ok': True, 'failures': [], 'ttft_s': 3.5, 'decode_tps': 14.0}, baseline,
                            {'canary_max_ttft_ratio': 20.0, 'canary_min_decode_ratio': 0.2})['ok']
    assert qc.judge_timings({'ok': True, 'failures': [], 'ttft_s': 99, 'decode_tps': 0.1}, {})['ok']


def test_a_failure_before_the_timing_judgement_stays_a_failure():
    result = qc.judge_timings({'ok': False, 'failures': [{'request': 'capital', 'check': 'known_answer', 'excerpt': 'x',
                                                          'detail': 'd'}], 'ttft_s': 0.2, 'decode_tps': 50}, {'ttft_s': 0.2,
                                                                                                              'decode_tps': 50})
    assert not result['ok']


@pytest.mark.parametrize('samples, seqs, why', [
    ({'vllm:num_requests_waiting': 1.0, 'vllm:num_requests_running': 2.0}, 8, 'saturated: 1 request(s) waiting in the queue'),
    ({'vllm:num_requests_waiting': 0.0, 'vllm:num_requests_running': 7.0}, 8, 'saturated: 7 request(s) running of max-num-seqs 8'),
    ({'vllm:num_requests_waiting': 0.0, 'vllm:num_requests_running': 6.0}, 8, None),
    ({'vllm:num_requests_waiting': None, 'vllm:num_requests_running': None}, 8, None),
    ({'vllm:num_requests_waiting': 0.0, 'vllm:num_requests_running': 40.0}, None, None),
    ({'vllm:num_requests_running': 1.0}, 1, 'saturated: 1 request(s) running of max-num-seqs 1'),
])
def test_skipped_while_saturated(samples, seqs, why):
    assert qc.should_skip(samples, seqs) == why


GOOD = {'canary': True, 'canary_url': 'https://127.0.0.1:8000', 'canary_model': 'deepseek-v4-flash'}


@pytest.mark.parametrize('key, value, variable', [
    ('canary_interval_s', 30, 'vllm_service_canary_interval_s'),
    ('canary_interval_s', '600', 'vllm_service_canary_interval_s'),
    ('canary_retry_s', 0, 'vllm_service_canary_retry_s'),
    ('canary_failures_to_restart', 0, 'vllm_service_canary_failures_to_restart'),
    ('canary_failures_to_restart', True, 'vllm_service_canary_failures_to_restart'),
    ('canary_timeout_s', 5, 'vllm_service_canary_timeout_s'),
    ('canary_decode_tokens', 8, 'vllm_service_canary_decode_tokens'),
    ('canary_max_ttft_ratio', 1.0, 'vllm_service_canary_max_ttft_ratio'),
    ('canary_ttft_slack_s', -1, 'vllm_service_canary_ttft_slack_s'),
    ('canary_min_decode_ratio', 1.5, 'vllm_service_canary_min_decode_ratio'),
])
def test_every_setting_out_of_range_is_refused_naming_the_variable_and_the_value(key, value, variable):
    problems = qc.check_config(dict(GOOD, **{key: value}))
    assert len(problems) == 1 and problems[0].startswith('%s = %r: must be a number from' % (variable, value)), problems
    assert 'Fix:' in problems[0]


def test_settings_that_pass_and_the_other_refusals():
    assert qc.check_config(GOOD) == []
    assert qc.check_config({'canary': False, 'canary_interval_s': 'x'}) == []       # off: nothing to check
    assert qc.check_config({'canary': 'yes'}) == ['vllm_service_canary = \'yes\': must be true or false. Fix: true (the '
                                                  'default) or false']
    retry = qc.check_config(dict(GOOD, canary_interval_s=60, canary_retry_s=120))
    assert len(retry) == 1 and retry[0].startswith('vllm_service_canary_retry_s = 120 is longer than')
    missing = qc.check_config({'canary': True, 'canary_url': 'http://h:1'})
    assert missing == ["canary_model = None: missing from the guard config. Fix: re-run the dgxspark.ds4.vllm_service role"]


@pytest.mark.parametrize('error, status', [('ConnectionRefusedError: [Errno 111] Connection refused', None),
                                           ('HTTP 502: Bad Gateway', 502), ('HTTP 503: unavailable', 503)])
def test_no_answer_from_the_serving_path_is_inconclusive_not_a_quality_failure(error, status):
    def server(base_url, body, api_key=None, timeout=600.0):
        rec = record(error=error)
        rec['status'] = status
        return rec
    result = qc.run_canary('http://127.0.0.1:8000', 'm', stream=server)
    assert result['unreachable'] and result['unreachable'][0] == 'arithmetic: %s' % error


def test_a_timeout_or_a_client_error_is_a_failure_not_unreachable():
    for error, status in (('timeout: timed out', None), ('HTTP 404: model does not exist', 404)):
        def server(base_url, body, api_key=None, timeout=600.0, error=error, status=status):
            rec = record(error=error)
            rec['status'] = status
            return rec
        result = qc.run_canary('http://127.0.0.1:8000', 'm', stream=server)
        assert not result['ok'] and result['unreachable'] == [], (error, result)


# --------------------------------------------------------------------------- load is not decay
# The head's queue gauges while a short request waits behind a long chunked prefill on real vLLM 0.26.0: waiting 1,
# running 2 for the whole wait (the real-vllm-on-device notes, Part 1b: a decode stream and the 250,000-token prompt
# running, the short request waiting). The same engine with the canary's request alone in it: running 1, waiting 0.
BEHIND_PREFILL = {'vllm:num_requests_waiting': 1.0, 'vllm:num_requests_running': 2.0}
ALONE = {'vllm:num_requests_waiting': 0.0, 'vllm:num_requests_running': 1.0}
# what vllm_client.stream_chat returns for a stream whose next line did not come within the timeout
TIMED_OUT = 'stream interrupted: TimeoutError: timed out'


class Probe(object):
    """The queue gauges' stand-in: `readings` in turn (the last one repeated); `read` is set at the first reading."""

    def __init__(self, *readings):
        self.readings, self.calls = list(readings), 0
        self.read = threading.Event()

    def __call__(self):
        self.calls += 1
        self.read.set()
        value = self.readings[min(self.calls, len(self.readings)) - 1]
        if isinstance(value, Exception):
            raise value
        return value


class WaitsThenTimesOut(FakeServer):
    """A pair whose first `stuck` requests get no first token (each returns only once the probe has read the gauges
    while it waited, as a timed-out stream returns after its timeout); later ones are answered (mode garbles them)."""

    def __init__(self, probe, stuck=1, mode=None):
        FakeServer.__init__(self, mode=mode)
        self.probe, self.stuck = probe, stuck

    def __call__(self, base_url, body, api_key=None, timeout=600.0):
        if self.stuck:
            self.stuck -= 1
            self.bodies.append((base_url, body, api_key, timeout))
            assert self.probe.read.wait(5), 'the gauges were not read while the request waited'
            rec = record(error=TIMED_OUT)
            rec.update(status=200, t_first=None, completion_tokens=None)
            return rec
        return FakeServer.__call__(self, base_url, body, api_key, timeout)


def test_busy_reason_counts_the_canarys_own_request_apart():
    assert qc.busy_reason(BEHIND_PREFILL) == ("the engine was busy: 2 request(s) running, 1 waiting (at most 1 of them "
                                              "the canary's own)")
    assert qc.busy_reason({'vllm:num_requests_waiting': 1.0, 'vllm:num_requests_running': 1.0})   # it waits behind one
    assert qc.busy_reason(ALONE) is None                                    # only the canary's request
    assert qc.busy_reason({'vllm:num_requests_waiting': 1.0, 'vllm:num_requests_running': 0.0}) is None
    assert qc.busy_reason({'vllm:num_requests_waiting': None, 'vllm:num_requests_running': None}) is None
    assert qc.busy_reason({'vllm:num_requests_running': 1.0}, own=0)      # before it sent anything: one is other work


def test_a_request_that_times_out_behind_a_long_prefill_is_inconclusive_and_the_canary_stops_there():
    probe = Probe(BEHIND_PREFILL)
    server = WaitsThenTimesOut(probe)
    result = qc.run_canary('http://127.0.0.1:8000', 'm', timeout=120, stream=server, probe=probe, probe_every_s=0.01)
    assert result['failures'] == [] and not result['ok'] and result['unreachable'] == []
    assert result['inconclusive'] == ["arithmetic: no answer within 120 s while the engine was busy: 2 request(s) running, "
                                      "1 waiting (at most 1 of them the canary's own)"]
    assert len(server.bodies) == 1                                          # the later requests would wait too
    assert [s.split(':')[0] for s in result['skipped_checks']] == ['capital', 'tool_call', 'decode']
    assert result['requests'][0]['load'][0] == BEHIND_PREFILL and result['busy'].startswith('arithmetic: the engine was busy')
    assert qc.summary(result).startswith('inconclusive: arithmetic: no answer within 120 s while the engine was busy')
    # judge_timings keeps it inconclusive (never a pass)
    assert qc.judge_timings(result, {'ttft_s': 0.2, 'decode_tps': 50.0})['ok'] is False


def test_a_timeout_with_the_engine_idle_otherwise_is_a_failure():
    probe = Probe(ALONE)
    result = qc.run_canary('http://127.0.0.1:8000', 'm', timeout=120, stream=WaitsThenTimesOut(probe, stuck=4),
                           probe=probe, probe_every_s=0.01)
    assert result['inconclusive'] == [] and result['busy'] == '' and not result['ok']
    assert [f['check'] for f in result['failures']] == ['http'] * 4
    detail = result['failures'][0]['detail']
    assert detail.startswith('request failed: %s; the engine had no other work (' % TIMED_OUT), detail
    # /metrics not answering while it waited is no proof of load: still a failure, and said
    probe = Probe(OSError('Connection refused'))
    result = qc.run_canary('http://127.0.0.1:8000', 'm', stream=WaitsThenTimesOut(probe, stuck=4), probe=probe,
                           probe_every_s=0.01)
    assert result['inconclusive'] == [] and len(result['failures']) == 4
    assert result['failures'][0]['detail'].endswith('; /metrics did not answer while it waited')


def test_a_garbled_answer_that_arrived_while_the_pair_was_busy_is_still_a_failure():
    probe = Probe(BEHIND_PREFILL)
    result = qc.run_canary('http://127.0.0.1:8000', 'm', stream=FakeServer(mode='cjk'), probe=probe, probe_every_s=0.01)
    assert not result['ok'] and result['inconclusive'] == []
    checks = set((f['request'], f['check']) for f in result['failures'])
    assert ('arithmetic', 'known_answer') in checks and ('decode', 'unexpected_script') in checks
    # and a garbled answer after a request that got no answer behind a prefill: the canary stopped, nothing judged
    # as passed; the pair guard counts it inconclusive (a later canary sees the garbling once the prefill is done)
    probe = Probe(BEHIND_PREFILL, ALONE)
    result = qc.run_canary('http://127.0.0.1:8000', 'm', stream=WaitsThenTimesOut(probe, mode='cjk'), probe=probe,
                           probe_every_s=0.01)
    assert result['inconclusive'] and result['failures'] == []


def test_an_answer_that_waited_behind_other_work_is_judged_on_its_answers_and_says_it_saw_the_pair_busy():
    probe, server = Probe(BEHIND_PREFILL), FakeServer()

    def slow(*args, **kwargs):
        assert probe.read.wait(5)                        # answered only after a reading of the gauges while it waited
        return server(*args, **kwargs)
    result = qc.run_canary('http://127.0.0.1:8000', 'm', stream=slow, probe=probe, probe_every_s=0.01)
    assert result['ok'] and result['inconclusive'] == [] and result['failures'] == []
    # the pair guard judges no timings of a canary that saw the pair busy
    assert result['busy'].startswith('arithmetic: the engine was busy: 2 request(s) running, 1 waiting'), result['busy']
    probe, server = Probe(ALONE), FakeServer()
    result = qc.run_canary('http://127.0.0.1:8000', 'm', stream=slow, probe=probe, probe_every_s=0.01)
    assert result['ok'] and result['busy'] == '' and result['requests'][0]['load'][0] == ALONE


def test_the_derived_request_timeout_and_deadline_are_checked():
    assert qc.check_config(dict(GOOD, canary_timeout_s=120, canary_request_timeout_s=2627, canary_deadline_s=10518)) == []
    low = qc.check_config(dict(GOOD, canary_timeout_s=120, canary_request_timeout_s=60))
    assert len(low) == 1 and low[0].startswith('canary_request_timeout_s = 60: must be a number, at least '
                                               'vllm_service_canary_timeout_s (120)'), low
    short = qc.check_config(dict(GOOD, canary_request_timeout_s=120, canary_deadline_s=100))
    assert len(short) == 1 and short[0].startswith('canary_deadline_s = 100: must be a number, at least 4 x'), short
