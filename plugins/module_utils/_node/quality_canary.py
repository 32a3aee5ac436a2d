# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark-ds4 quality canary: known answers, a tool call and the pair's own speed, checked while it serves.

Pure Python (no Ansible imports). Used twice, one file: the controller validates the settings with settings_problems
(the config play, plugins/plugin_utils/role_inputs.py), and dgxspark.ds4.vllm_service installs it (with garble,
smoke_checks and vllm_client, under <libexec>/ansible_collections/...) for the pair guard, which runs one canary at a
time in a child process with a hard deadline (roles/vllm_service/files/pairguard.py).

Why: what users of two-Spark DeepSeek-V4-Flash report after "both ranks come back" is output that decays with uptime
while /health and the token counters look fine ("garbled after hours, restart clears", "silent bad answers + latency
drift", a wrong lm-head that served weeks of traffic: field notes). The detectors are the ones validate.yml uses
(garble.check_reply, smoke_checks' deterministic answer and tool-call checks); here they run on a schedule, through
the path clients use (the head's API proxy, with a client key, TLS when the fronts serve it).

One canary (run_canary), each request streamed, temperature 0, thinking off, one at a time (a canary in which a
request got no answer from the serving path at all - refused, reset, 502/503/504 - is inconclusive: `unreachable`
names them, and the pair guard counts it as skipped, not failed):
  known answers   KNOWN_ANSWERS: the reply must be the answer (smoke_checks.normalise_answer) and clean (garble)
  tool call       the recipe's parsers (tool_choice as validate.yml uses it: auto with a tool parser, else
                  required); skipped, and said, when the recipe has no tool-call path at all (tools=False)
  decode          an English prompt, decode_tokens long: clean, and its timings: time to first token (ttft_s)
                  and decode rate (decode_tps, tokens after the first over the time after the first)
judge_timings compares ttft_s and decode_tps with the pair's own baseline (the first passing canary of a head that
found it idle, after readiness): a TTFT above max_ttft_ratio x baseline + ttft_slack_s, or a decode rate below
min_decode_ratio x baseline, is a failure ("latency drift"). Both follow the load (a batch of 16 decodes at 5.6 tok/s
per stream where one alone gets 44: seed 000), so the pair guard judges them, and takes the baseline, only for a
canary that found no request in flight; under load only the answers count.

Saturation (should_skip): the canary is never the request that tips a busy pair over: skipped while requests wait
in the queue or the running ones fill max-num-seqs less one (vllm:num_requests_waiting / _running of the head).

Load is not decay (busy_reason, run_canary's probe): a canary that finds the pair free starts, and a long prompt may be
prefilling or arrive while it runs. Real vLLM (0.26.0, V1 scheduler, chunked prefill) gives the running prefill the
whole per-step token budget and schedules a waiting request only with budget left: a short request that arrived
during a 250,000-token prefill got its first token only when the prefill ended (10.3 s, alone 0.02-0.08 s), and
/metrics showed vllm:num_requests_waiting 1 and vllm:num_requests_running 2 for the whole wait (the real-vllm-on-device
notes, Part 1b). On a Spark a 980K prompt prefills for 16.6 min (seed 001): every canary request would time out.
So while each request awaits its answer the head's queue gauges are read (every probe_every_s, and once more when it
ended); the canary has at most one request in the engine, so a reading with running + waiting above one shows other
work. A request that got no answer (timed out, or its stream stopped) while a reading showed other work is
INCONCLUSIVE: said in one line (`inconclusive`), the canary stops there (its later requests would wait too), and the
pair guard counts it apart, no gate, no restart. No answer while every reading showed the canary alone (or none could
be read) stays a failure: an idle engine that does not answer a 32-token request is a fault (the hang watchdog watches
the same engine). An answer that did arrive is judged as always, busy or not (garbled, wrong, a broken tool call:
failures); only its timings are not (`busy`: the pair guard judges timings on a canary that saw the pair idle only).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import garble
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import smoke_checks
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import vllm_client

KNOWN_ANSWERS = (
    ('arithmetic', smoke_checks.DETERMINISTIC_PROMPT, smoke_checks.DETERMINISTIC_EXPECTED),
    ('capital', 'What is the capital of France? Answer with one word.', ('paris',)),
)
DECODE_PROMPT = smoke_checks.GARBLE_PROMPTS[0]
EXCERPT = 200
# A request that got no answer from the serving path at all says nothing about the output: the proxy not up yet (the
# first canary of a first deploy runs before the proxy is installed), restarting, or its upstream gone (502/503/504).
# Availability is readiness's and the pair guard's business; such a canary is inconclusive, not failed.
UNREACHABLE_ERRORS = ('ConnectionRefusedError', 'ConnectionResetError', 'RemoteDisconnected', 'BrokenPipeError',
                      'ConnectionAbortedError')
UNREACHABLE_STATUS = (502, 503, 504)
# vllm_client.stream_chat's errors for a stream that stopped before its end (a read timed out, the connection closed)
NO_ANSWER_ERRORS = ('stream interrupted', 'stream ended without')
# The canary sends one request at a time: at most one request in the engine is its own.
CANARY_OWN_REQUESTS = 1

# config key -> (role variable, default, smallest allowed, largest allowed)
SETTINGS = (
    ('canary_interval_s', 'vllm_service_canary_interval_s', 600, 60, 86400),
    ('canary_retry_s', 'vllm_service_canary_retry_s', 60, 5, 3600),
    ('canary_failures_to_restart', 'vllm_service_canary_failures_to_restart', 3, 1, 20),
    ('canary_timeout_s', 'vllm_service_canary_timeout_s', 120, 10, 1800),
    ('canary_decode_tokens', 'vllm_service_canary_decode_tokens', 64, 16, 1024),
    ('canary_max_ttft_ratio', 'vllm_service_canary_max_ttft_ratio', 5.0, 1.5, 100),
    ('canary_ttft_slack_s', 'vllm_service_canary_ttft_slack_s', 2.0, 0, 600),
    ('canary_min_decode_ratio', 'vllm_service_canary_min_decode_ratio', 0.3, 0.01, 0.95),
)
DEFAULTS = dict((key, default) for key, _var, default, _lo, _hi in SETTINGS)


def settings_problems(cfg: Mapping[str, Any], on: object = True) -> list[str]:
    """Problems of the canary's own settings (the role variables of SETTINGS, keyed as in the guard config; one line
    each, naming the variable, the value and the fix); [] when usable or when the canary is off. The controller runs it
    on the inventory's values before any host changes (plugins/plugin_utils/role_inputs.py), the guard at its start."""
    problems: list[str] = []
    if not isinstance(on, bool):
        return ['vllm_service_canary = %r: must be true or false. Fix: true (the default) or false' % (on,)]
    if not on:
        return []
    for key, variable, default, low, high in SETTINGS:
        value = cfg.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            problems.append('%s = %r: must be a number from %s to %s. Fix: set it in that range, or remove it for the '
                            'default (%s)' % (variable, value, low, high, default))
    if not problems and cfg.get('canary_retry_s', DEFAULTS['canary_retry_s']) > cfg.get(
            'canary_interval_s', DEFAULTS['canary_interval_s']):
        problems.append('vllm_service_canary_retry_s = %r is longer than vllm_service_canary_interval_s = %r: a failed '
                        'canary is retried sooner than the next scheduled one. Fix: lower the retry or raise the interval'
                        % (cfg['canary_retry_s'], cfg.get('canary_interval_s', DEFAULTS['canary_interval_s'])))
    return problems


def check_config(cfg: Mapping[str, Any]) -> list[str]:
    """Problems of the canary keys of a guard config (one line each, naming the variable, the value and the fix);
    [] when usable or when the canary is off: the settings (settings_problems) and what the role derives from the
    recipe (the request timeout and deadline, the URL and the served name)."""
    on = cfg.get('canary', False)
    problems = settings_problems(cfg, on)
    if not isinstance(on, bool) or not on:
        return problems
    floor = cfg.get('canary_timeout_s', DEFAULTS['canary_timeout_s'])
    request = cfg.get('canary_request_timeout_s', floor)
    if not problems and (isinstance(request, bool) or not isinstance(request, (int, float)) or request < floor):
        problems.append('canary_request_timeout_s = %r: must be a number, at least vllm_service_canary_timeout_s (%r). '
                        'Fix: re-run the dgxspark.ds4.vllm_service role (it derives it from the recipe)' % (request, floor))
    elif not problems and 'canary_deadline_s' in cfg:
        deadline = cfg['canary_deadline_s']
        if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or deadline < 4 * request:
            problems.append('canary_deadline_s = %r: must be a number, at least 4 x canary_request_timeout_s (%r). Fix: '
                            're-run the dgxspark.ds4.vllm_service role (it derives it from the recipe)' % (deadline, request))
    for key in ('canary_url', 'canary_model'):
        if not isinstance(cfg.get(key), str) or not cfg.get(key):
            problems.append('%s = %r: missing from the guard config. Fix: re-run the dgxspark.ds4.vllm_service role'
                            % (key, cfg.get(key)))
    return problems


def should_skip(samples: Mapping[str, float], max_num_seqs: int | str | None) -> str | None:
    """The reason to skip the canary now (the pair is saturated), or None. samples: the head's /metrics
    ({name: value}, the pair guard's parse); max_num_seqs: the recipe's (None: only the queue counts)."""
    waiting = samples.get('vllm:num_requests_waiting') or 0.0
    running = samples.get('vllm:num_requests_running') or 0.0
    if waiting > 0:
        return 'saturated: %d request(s) waiting in the queue' % waiting
    if max_num_seqs and running >= max(1, int(max_num_seqs) - 1):
        return 'saturated: %d request(s) running of max-num-seqs %d' % (running, int(max_num_seqs))
    return None


def busy_reason(samples: Mapping[str, Any], own: int = CANARY_OWN_REQUESTS) -> str | None:
    """Why the engine was busy with other work at this reading, or None. samples: the head's queue gauges
    ({name: value}); own: how many of the requests in the engine may be the canary's (1 while one of its requests
    awaits its answer). Running + waiting above own is other work: a prefill the canary waits behind (Part 1b: waiting
    1, running 2), or requests sharing the engine's steps."""
    waiting = samples.get('vllm:num_requests_waiting') or 0.0
    running = samples.get('vllm:num_requests_running') or 0.0
    if running + waiting > own:
        return 'the engine was busy: %d request(s) running, %d waiting (at most %d of them the canary\'s own)' % (
            running, waiting, own)
    return None


def _watched(send: Callable[[], Any], probe: Callable[[], Mapping[str, Any]],
             every_s: float) -> tuple[Any, list[dict[str, Any]], Callable[[], None]]:
    """send() while a thread reads probe() every every_s; -> (send's value, the readings (samples, or {'error': ...}),
    read: one more reading into them)."""
    readings: list[dict[str, Any]] = []
    stop = threading.Event()

    def read() -> None:
        try:
            readings.append(dict(probe()))
        except Exception as exc:  # pylint: disable=broad-except
            readings.append({'error': '%s: %s' % (type(exc).__name__, exc)})

    def loop() -> None:
        while not stop.wait(every_s):
            read()
    thread = threading.Thread(target=loop, name='canary-probe')
    thread.daemon = True
    thread.start()
    try:
        value = send()
    finally:
        stop.set()
        thread.join(60)
    return value, readings, read


def _body(model: str, prompt: str, max_tokens: int, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {'model': model, 'messages': [{'role': 'user', 'content': prompt}],
                            'max_tokens': int(max_tokens), 'temperature': 0.0,
                            'chat_template_kwargs': {'thinking': False, 'enable_thinking': False}}
    body.update(extra)
    return body


def _timings(rec: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(ttft_s, decode_tps) of a stream record; None where it cannot be measured."""
    ttft = rec['t_first'] - rec['t_start'] if rec.get('t_first') is not None and rec.get('t_start') is not None else None
    tokens, t_first, t_last = rec.get('completion_tokens'), rec.get('t_first'), rec.get('t_last')
    tps: float | None = None
    if tokens and tokens > 1 and t_first is not None and t_last is not None and t_last > t_first:
        tps = (tokens - 1) / (t_last - t_first)
    return ttft, tps


def _failure(request: str, check: str, excerpt: str | None, detail: str) -> dict[str, Any]:
    return {'request': request, 'check': check, 'excerpt': (excerpt or '')[:EXCERPT], 'detail': detail}


def _as_response(rec: Mapping[str, Any]) -> dict[str, Any]:
    """A streamed record as the non-streamed response smoke_checks reads."""
    return {'choices': [{'message': {'content': rec.get('content') or '', 'tool_calls': rec.get('tool_calls') or []},
                         'finish_reason': rec.get('finish_reason')}]}


def run_canary(base_url: str, model: str, api_key: str | None = None, tools: bool = True, tool_choice: Any = 'auto',
               timeout: float = 60.0, decode_tokens: int = 64, stream: Callable[..., dict[str, Any]] | None = None,
               probe: Callable[[], Mapping[str, Any]] | None = None, probe_every_s: float = 5.0) -> dict[str, Any]:
    """One canary. -> {'ok', 'failures': [...], 'requests': [...], 'ttft_s', 'decode_tps', 'skipped_checks': [...],
    'unreachable': [...], 'inconclusive': [...], 'busy': first busy_reason seen or ''} (judge_timings adds the baseline
    comparison). stream: vllm_client.stream_chat (tests pass a fake). probe: the head's queue gauges
    ({'vllm:num_requests_running': n, 'vllm:num_requests_waiting': n}), read while each request awaits its answer
    (None: not read; a request with no answer is then a failure, as before)."""
    stream = stream or vllm_client.stream_chat
    failures: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []
    skipped: list[str] = []
    unreachable: list[str] = []
    inconclusive: list[str] = []
    busy: list[str] = []

    def send(name: str, body: Mapping[str, Any]) -> dict[str, Any] | None:
        if inconclusive:
            skipped.append('%s: not sent, the pair is busy (an earlier request got no answer behind other work)' % name)
            return None
        read: Callable[[], None] | None = None
        readings: list[dict[str, Any]]
        if probe is None:
            rec, readings = stream(base_url, body, api_key=api_key, timeout=timeout), []
        else:
            rec, readings, read = _watched(lambda: stream(base_url, body, api_key=api_key, timeout=timeout), probe,
                                           probe_every_s)
            if rec.get('error'):
                read()   # once more as it ended: a wait shorter than probe_every_s has one reading too
        reasons = [busy_reason(r) for r in readings if 'error' not in r]
        seen = [r for r in reasons if r]
        if seen and not busy:
            busy.append('%s: %s' % (name, seen[0]))
        no_answer = False
        if rec.get('error') and (rec.get('status') in UNREACHABLE_STATUS or (
                rec.get('status') is None and str(rec['error']).split(':', 1)[0] in UNREACHABLE_ERRORS)):
            unreachable.append('%s: %s' % (name, rec['error']))
        elif rec.get('error') and (rec.get('status') is None or str(rec['error']).startswith(NO_ANSWER_ERRORS)):
            no_answer = True   # timed out, or the stream stopped: no (whole) answer came
        ttft, tps = _timings(rec)
        requests.append({'request': name, 'prompt': body['messages'][0]['content'], 'status': rec.get('status'),
                         'error': rec.get('error'), 'content': (rec.get('content') or '')[:EXCERPT],
                         'tool_calls': rec.get('tool_calls') or [], 'finish_reason': rec.get('finish_reason'),
                         'completion_tokens': rec.get('completion_tokens'), 'load': readings,
                         'ttft_s': None if ttft is None else round(ttft, 4), 'decode_tps': None if tps is None else round(tps, 2)})
        if no_answer and seen:
            inconclusive.append('%s: no answer within %g s while %s' % (name, timeout, seen[0]))
            return None
        if rec.get('error'):
            detail = 'request failed: %s' % rec['error']
            if no_answer and read is not None:
                read_ok = len(reasons)
                detail += ('; the engine had no other work (%d /metrics reading(s) while it waited)' % read_ok if read_ok
                           else '; /metrics did not answer while it waited')
            failures.append(_failure(name, 'http', rec.get('content'), detail))
            return None
        return rec

    for name, prompt, expected in KNOWN_ANSWERS:
        rec = send(name, _body(model, prompt, 32))
        if rec is None:
            continue
        content = rec.get('content') or ''
        failures.extend(_failure(name, f['check'], f['excerpt'], f['detail']) for f in garble.check_reply(content))
        if smoke_checks.normalise_answer(content) not in [smoke_checks.normalise_answer(e) for e in expected]:
            failures.append(_failure(name, 'known_answer', content, 'expected %s at temperature 0, got %r'
                                     % (' or '.join(repr(e) for e in expected), content[:40])))

    if tools:
        rec = send('tool_call', _body(model, smoke_checks.TOOL_PROMPT, 128, tools=[smoke_checks.TOOL],
                                      tool_choice=tool_choice))
        if rec is not None:
            failures.extend(_failure(f['request'], f['check'], f['excerpt'], f['detail'])
                            for f in smoke_checks.check_tool_call('tool_call', _as_response(rec)))
    else:
        skipped.append('tool_call: the recipe has no tool-call parser')

    ttft: float | None = None
    tps: float | None = None
    rec = send('decode', _body(model, DECODE_PROMPT, decode_tokens))
    if rec is not None:
        content = rec.get('content') or ''
        failures.extend(_failure('decode', f['check'], f['excerpt'], f['detail']) for f in garble.check_reply(content))
        ttft, tps = _timings(rec)
        if ttft is None or tps is None:
            failures.append(_failure('decode', 'timings', content, 'no time to first token or decode rate (%s tokens)'
                                     % rec.get('completion_tokens')))
    return {'ok': not failures and not inconclusive, 'failures': failures, 'requests': requests, 'skipped_checks': skipped,
            'unreachable': unreachable, 'inconclusive': inconclusive, 'busy': busy[0] if busy else '',
            'ttft_s': None if ttft is None else round(ttft, 4), 'decode_tps': None if tps is None else round(tps, 2)}


def judge_timings(result: dict[str, Any], baseline: Mapping[str, Any] | None, settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Compare a canary's ttft_s / decode_tps with the pair's baseline ({'ttft_s', 'decode_tps'} or {}); appends the
    failures to result (and sets ok). Returns result."""
    s = dict(DEFAULTS, **(settings or {}))
    if not baseline or result.get('ttft_s') is None or result.get('decode_tps') is None:
        return result
    bound = baseline['ttft_s'] * s['canary_max_ttft_ratio'] + s['canary_ttft_slack_s']
    if result['ttft_s'] > bound:
        detail = 'time to first token %.2f s, above %.2f s (%.1f x the baseline %.2f s + %.1f s)' % (
            result['ttft_s'], bound, s['canary_max_ttft_ratio'], baseline['ttft_s'], s['canary_ttft_slack_s'])
        result['failures'].append(_failure('decode', 'ttft_drift', '', detail))
    floor = baseline['decode_tps'] * s['canary_min_decode_ratio']
    if result['decode_tps'] < floor:
        detail = 'decode %.1f tok/s, below %.1f tok/s (%.2f x the baseline %.1f tok/s)' % (
            result['decode_tps'], floor, s['canary_min_decode_ratio'], baseline['decode_tps'])
        result['failures'].append(_failure('decode', 'decode_drift', '', detail))
    result['ok'] = not result['failures'] and not result.get('inconclusive')
    return result


def summary(result: Mapping[str, Any]) -> str:
    """One line: what failed (the first three), or the timings."""
    if result.get('ok'):
        return 'ok (ttft %.2f s, decode %.1f tok/s)' % (result.get('ttft_s') or 0, result.get('decode_tps') or 0)
    fails = result.get('failures') or []
    if not fails and result.get('inconclusive'):
        return 'inconclusive: %s' % result['inconclusive'][0]
    return '%d check(s) failed: %s' % (len(fails), '; '.join(
        '%s %s: %s' % (f['request'], f['check'], f['detail'] or f['excerpt']) for f in fails[:3]))
