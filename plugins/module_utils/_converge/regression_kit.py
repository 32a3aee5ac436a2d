# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark-ds4 regression kit: one verdict, with its numbers, on whether a changed pair serves as well as an old one.

Pure Python (no Ansible imports). The kit is data (roles/config/files/regression_kit.yml: a default and, per recipe,
what differs), resolved for a recipe by resolve_kit; run_kit runs it against one pair's endpoint and returns numbers;
verdict compares the numbers of a changed pair with those of a pair still on the old version (measured at the same
time, under the same share of live traffic) or with the pair's own numbers from before the change.

Why: users who upgrade often (nightly images, new checkpoints, new vLLM) were hurt by images that silently changed
behaviour, and one of them built "a regression kit" by hand to gate upgrades (field notes, items 5 to 7). The checks
are the collection's own: smoke_checks' known answer and tool-call checks and its garble sweep (seed 003's gate at 1,
2, 4 and 6 concurrent English prompts), the bench's streamed timings and its spec-decode acceptance from /metrics
(bench_stats.spec_decode_stats).

run_kit, in order (thinking off, temperature 0):
  known answers  each prompt's reply must be one of its answers and clean (garble)
  tool calls     one streamed-free call per entry with the recipe's parsers (tool_choice as validate.yml uses it);
                 skipped, and said, when the recipe has no tool-call path (tools=False)
  garble sweep   garble_levels: that many English prompts at once, every reply clean
  bench          `runs` times one stream of bench.decode_tokens (ignore_eos): decode tok/s (tokens after the first
                 over the time after the first), and one prompt of bench.prefill_words words with max_tokens 1:
                 prefill tok/s (the prompt's tokens, as the server counted them, over the time to the first token;
                 each prompt starts with a word of its own, so the prefix cache serves none of it);
                 the median of the runs. /metrics is read before and after: spec-decode acceptance over the kit's
                 window (every request the pair served then, the live traffic's included), or None without MTP
verdict: `regressed` when the changed pair failed a check, or its decode or prefill rate, or its acceptance rate, is
below the reference by more than the thresholds (percent); `pass` otherwise. A number that one side lacks is not
compared, and the verdict says which.
"""

from __future__ import annotations


import binascii
import copy
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import bench_stats
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import garble
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import smoke_checks
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import vllm_client

# threshold key -> (playbook variable, default percent, smallest, largest)
THRESHOLDS = (
    ('max_decode_drop_pct', 'ds4_upgrade_max_decode_drop_pct', 10.0, 0.0, 90.0),
    ('max_prefill_drop_pct', 'ds4_upgrade_max_prefill_drop_pct', 15.0, 0.0, 90.0),
    ('max_acceptance_drop_pct', 'ds4_upgrade_max_acceptance_drop_pct', 10.0, 0.0, 90.0),
)
THRESHOLD_DEFAULTS = dict((key, default) for key, _var, default, _lo, _hi in THRESHOLDS)
THRESHOLD_VARS = dict((key, var) for key, var, _default, _lo, _hi in THRESHOLDS)
# (the figure, its name in a verdict, its threshold key): higher is better for each
COMPARED = (
    ('decode_tps', 'decode tok/s', 'max_decode_drop_pct'),
    ('prefill_tps', 'prefill tok/s', 'max_prefill_drop_pct'),
    ('acceptance_rate', 'spec-decode acceptance', 'max_acceptance_drop_pct'),
)
KIT_KEYS = ('known_answers', 'tool_calls', 'garble_levels', 'garble_max_tokens', 'bench')
BENCH_KEYS = ('decode_tokens', 'prefill_words', 'runs')
# words of the prefill prompt, cycled (plain English, so a tokenizer counts about one token per word)
PREFILL_TEXT = ('the pair serves a long prompt while the kit measures how fast the engine reads it before the first '
                'token of the answer comes back to the client').split()


def check_thresholds(cfg: dict[str, Any]) -> list[str]:
    """Problems of the threshold settings (one line each, naming the variable, the value and the fix)."""
    problems: list[str] = []
    for key, var, default, low, high in THRESHOLDS:
        value = cfg.get(key, default)
        try:
            number = float(value)
        except (TypeError, ValueError):
            problems.append('%s=%r is not a number. Fix: a percentage from %s to %s (default %s).'
                            % (var, value, low, high, default))
            continue
        if isinstance(value, bool) or not low <= number <= high:
            problems.append('%s=%r is out of range. Fix: a percentage from %s to %s (default %s).'
                            % (var, value, low, high, default))
    return problems


def check_upgrade(thresholds: dict[str, Any] | None, kit_data: Any, recipe: str | None) -> list[str]:
    """Problems of an upgrade's inputs before anything changes: the thresholds and the recipe's kit."""
    problems = check_thresholds(thresholds or {})
    if not isinstance(kit_data, dict) or not isinstance(kit_data.get('default'), dict):
        return problems + ['the regression kit data has no `default` kit. Fix: the collection\'s '
                           'roles/config/files/regression_kit.yml (ds4_upgrade_kit_file), or a copy of it.']
    return problems + ['%s. Fix: ds4_upgrade_kit_file.' % p for p in resolve_kit(kit_data, recipe)[1]]


def _kit_problems(kit: dict[str, Any], where: str) -> list[str]:
    problems: list[str] = []
    unknown = sorted(set(kit) - set(KIT_KEYS))
    if unknown:
        problems.append('%s: unknown key(s) %s (known: %s)' % (where, ', '.join(unknown), ', '.join(KIT_KEYS)))
    for entry in kit.get('known_answers') or []:
        if not isinstance(entry, dict) or not entry.get('name') or not entry.get('prompt') or not entry.get('expected'):
            problems.append('%s: a known answer needs name, prompt and expected (a list): %r' % (where, entry))
    for entry in kit.get('tool_calls') or []:
        if not isinstance(entry, dict) or not entry.get('name') or not entry.get('prompt'):
            problems.append('%s: a tool call needs name and prompt: %r' % (where, entry))
    levels = kit.get('garble_levels') or []
    if not isinstance(levels, list) or not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 64 for n in levels):
        problems.append('%s: garble_levels must be a list of whole numbers from 1 to 64, got %r' % (where, levels))
    bench = kit.get('bench') or {}
    for key in BENCH_KEYS:
        value = bench.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            problems.append('%s: bench.%s must be a whole number of 1 or more, got %r' % (where, key, value))
    return problems


def resolve_kit(data: Any, recipe: str | None) -> tuple[dict[str, Any], list[str]]:
    """(kit, problems): the default kit with the recipe's entry over it (a key of the entry replaces the default's;
    bench keys one by one)."""
    default = copy.deepcopy((data or {}).get('default') or {})
    entry = ((data or {}).get('recipes') or {}).get(recipe) or {}
    kit = dict(default)
    for key, value in entry.items():
        if key == 'bench' and isinstance(value, dict):
            kit['bench'] = dict(default.get('bench') or {}, **value)
        else:
            kit[key] = copy.deepcopy(value)
    return kit, _kit_problems(kit, 'regression kit of %s' % recipe)


def _median(values: Iterable[float | None]) -> float | None:
    present = sorted(v for v in values if v is not None)
    if not present:
        return None
    mid = len(present) // 2
    return present[mid] if len(present) % 2 else (present[mid - 1] + present[mid]) / 2.0


def _body(model: str, prompt: str, max_tokens: int, **extra: Any) -> dict[str, Any]:
    """A request at temperature 0, thinking off: smoke_checks' body, as validate.yml sends it."""
    return smoke_checks._body(model, prompt, max_tokens, False, **extra)  # pylint: disable=protected-access


def decode_tps(rec: dict[str, Any]) -> float | None:
    """Tokens after the first over the time after the first, from a stream record (vllm_client.stream_chat); None
    when it cannot be measured (one token, no timings)."""
    tokens, t_first, t_last = rec.get('completion_tokens'), rec.get('t_first'), rec.get('t_last')
    if tokens and tokens > 1 and t_first is not None and t_last is not None and t_last > t_first:
        return (tokens - 1) / (t_last - t_first)
    return None


def prefill_tps(rec: dict[str, Any]) -> float | None:
    """The prompt's tokens as the server counted them (the stream's usage) over the time to the first token; None
    without them."""
    if rec.get('prompt_tokens') and rec.get('t_first') is not None and rec.get('t_start') is not None \
            and rec['t_first'] > rec['t_start']:
        return rec['prompt_tokens'] / (rec['t_first'] - rec['t_start'])
    return None


def prefill_prompt(words: int, salt: str) -> str:
    """`words` words of plain English, the first one `salt`: a prompt no earlier request shares a prefix with, so
    the prefix cache (on by default in vLLM V1; the simulator models it) cannot serve any of it. Repeated as is, the
    second run's "prefill" came back ~7x faster from the cache (measured on the simulator)."""
    return ' '.join([str(salt)] + [PREFILL_TEXT[i % len(PREFILL_TEXT)] for i in range(int(words) - 1)])


def _salt() -> str:
    return 'kit%s' % binascii.hexlify(os.urandom(6)).decode('ascii')


def run_kit(base_url: str, model: str, kit: dict[str, Any], api_key: str | None = None, tools: bool = True,
            tool_choice: str = 'auto', timeout: float = 300.0, post: Callable[..., Any] | None = None,
            stream: Callable[..., dict[str, Any]] | None = None, scrape: Callable[[str], str | None] | None = None,
            clock: Callable[[], float] = time.monotonic, salt: Callable[[], str] = _salt) -> dict[str, Any]:
    """The kit against one endpoint -> {'ok', 'failures', 'checks', 'decode_tps', 'prefill_tps', 'acceptance_rate',
    'spec_decode', 'runs', 'seconds'}. post/stream/scrape: vllm_client.post_json, vllm_client.stream_chat and a
    /metrics reader; salt: the first word of each prefill prompt (tests pass fakes)."""
    post = post or vllm_client.post_json
    stream = stream or vllm_client.stream_chat
    t0 = clock()

    def metrics(url: str) -> str | None:
        try:
            status, text = vllm_client.get(url, '/metrics', api_key=api_key, timeout=10.0)
        except (OSError, ValueError, vllm_client.HTTPException):
            return None  # no acceptance figure; the verdict says it was not compared
        return text if status == 200 else None

    if scrape is None:
        scrape = metrics
    failures: list[dict[str, Any]] = []
    checks: dict[str, Any] = {'known_answers': 0, 'tool_calls': 0, 'garble_requests': 0, 'skipped': []}

    def fail(request: str, check: str, excerpt: str | None, detail: str) -> None:
        failures.append({'request': request, 'check': check, 'excerpt': (excerpt or '')[:120], 'detail': detail})

    for entry in kit.get('known_answers') or []:
        checks['known_answers'] += 1
        status, resp, _secs = post(base_url, '/v1/chat/completions', _body(model, entry['prompt'], 32), api_key, timeout)
        if status != 200:
            fail(entry['name'], 'http', str(resp), 'HTTP %s' % status)
            continue
        fails = smoke_checks.check_deterministic(entry['name'], resp, expected=tuple(entry['expected']))
        fails += smoke_checks.check_garble(entry['name'], resp)
        for f in fails:
            fail(f['request'], f['check'], f['excerpt'], f['detail'])

    if tools:
        for entry in kit.get('tool_calls') or []:
            checks['tool_calls'] += 1
            body = _body(model, entry['prompt'], 128, tools=[smoke_checks.TOOL], tool_choice=tool_choice)
            status, resp, _secs = post(base_url, '/v1/chat/completions', body, api_key, timeout)
            if status != 200:
                fail(entry['name'], 'http', str(resp), 'HTTP %s' % status)
                continue
            for f in smoke_checks.check_tool_call(entry['name'], resp):
                fail(f['request'], f['check'], f['excerpt'], f['detail'])
    else:
        checks['skipped'].append('tool calls: the recipe has no tool-call parser')

    sweep = smoke_checks.run_garble_levels(base_url, model, api_key=api_key, levels=kit.get('garble_levels') or [],
                                           max_tokens=int(kit.get('garble_max_tokens') or 200), timeout=timeout, post=post)
    checks['garble_requests'] = len(sweep['requests'])
    for f in sweep['failures']:
        fail(f['request'], f['check'], f['excerpt'], f['detail'])

    bench = kit.get('bench') or {}
    before = scrape(base_url)
    runs: list[dict[str, Any]] = []
    for run in range(int(bench.get('runs') or 1)):
        rec = stream(base_url, _body(model, smoke_checks.GARBLE_PROMPTS[0], bench['decode_tokens'], ignore_eos=True),
                     api_key=api_key, timeout=timeout, clock=clock)
        decode = None
        if rec.get('error'):
            fail('bench-decode-%d' % (run + 1), 'http', rec.get('content'), 'request failed: %s' % rec['error'])
        else:
            for f in garble.check_reply(rec.get('content') or ''):
                fail('bench-decode-%d' % (run + 1), f['check'], f['excerpt'], f['detail'])
            decode = decode_tps(rec)
        rec = stream(base_url, _body(model, prefill_prompt(bench['prefill_words'], salt()), 1), api_key=api_key,
                     timeout=timeout, clock=clock)
        prefill = None
        if rec.get('error'):
            fail('bench-prefill-%d' % (run + 1), 'http', rec.get('content'), 'request failed: %s' % rec['error'])
        else:
            prefill = prefill_tps(rec)
        runs.append({'decode_tps': None if decode is None else round(decode, 2),
                     'prefill_tps': None if prefill is None else round(prefill, 1),
                     'prompt_tokens': rec.get('prompt_tokens')})
    after = scrape(base_url)
    spec = bench_stats.spec_decode_stats(before or '', after or '') if before and after else {'available': False}
    decode, prefill = _median(r['decode_tps'] for r in runs), _median(r['prefill_tps'] for r in runs)
    for name, value in (('decode_tps', decode), ('prefill_tps', prefill)):
        if value is None:
            fail('bench', 'timings', '', 'no %s measured in %d run(s)' % (name, len(runs)))
    return {'ok': not failures, 'failures': failures, 'checks': checks, 'runs': runs,
            'decode_tps': None if decode is None else round(decode, 2),
            'prefill_tps': None if prefill is None else round(prefill, 1),
            'acceptance_rate': round(spec['acceptance_rate'], 4) if spec.get('acceptance_rate') is not None else None,
            'spec_decode': spec, 'metrics': before is not None and after is not None,
            'seconds': round(clock() - t0, 2)}


def verdict(new: dict[str, Any], old: dict[str, Any], thresholds: dict[str, Any] | None = None) -> dict[str, Any]:
    """new and old: run_kit results (old: the reference, an old pair's or the pair's own before the change).
    -> {'verdict': 'pass'|'regressed', 'regressions': [line], 'compared': [{'figure', 'new', 'old', 'ratio',
    'floor_ratio', 'ok'}], 'not_compared': [line]}"""
    t = dict(THRESHOLD_DEFAULTS, **(thresholds or {}))
    regressions: list[str] = []
    compared: list[dict[str, Any]] = []
    not_compared: list[str] = []
    for f in new.get('failures') or []:
        regressions.append('%s %s: %s' % (f['request'], f['check'], f['detail'] or f['excerpt']))
    for key, label, tkey in COMPARED:
        a, b = new.get(key), old.get(key)
        if a is None or b is None or not b:
            not_compared.append('%s: %s' % (label, 'measured on neither pair' if a is None and b is None else
                                            'not measured on the %s pair' % ('changed' if a is None else 'reference')))
            if key == 'acceptance_rate' and b and a is None:
                regressions.append('%s: the reference pair had %.3f, the changed pair none (no speculative decoding?)'
                                   % (label, b))
            continue
        floor = 1.0 - float(t[tkey]) / 100.0
        ratio = float(a) / float(b)
        ok = ratio >= floor
        compared.append({'figure': key, 'new': a, 'old': b, 'ratio': round(ratio, 3), 'floor_ratio': round(floor, 3), 'ok': ok})
        if not ok:
            regressions.append('%s: %s against %s on the reference (%.0f %% lower; at most %s %% allowed, %s)'
                               % (label, a, b, (1.0 - ratio) * 100.0, t[tkey], THRESHOLD_VARS[tkey]))
    return {'verdict': 'regressed' if regressions else 'pass', 'regressions': regressions, 'compared': compared,
            'not_compared': not_compared}


def upgrade_plan(pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The order and references of an upgrade over `pairs` (the run's pairs in pair order: name, head, ...):
    -> [{'pair', 'head', 'reference', 'reference_head', 'measure_before'}], one per pair in order. A pair's reference
    is the next pair (still on the old version when this one is compared, measured at the same time); the last pair
    has none: its own numbers from before are the reference, taken when it was the previous pair's reference, or
    right before its change when it never was (a single pair: measure_before)."""
    plan: list[dict[str, Any]] = []
    for i, pair in enumerate(pairs):
        ref = pairs[i + 1] if i + 1 < len(pairs) else None
        plan.append({'pair': pair['name'], 'head': pair['head'],
                     'reference': ref['name'] if ref else None, 'reference_head': ref['head'] if ref else None,
                     'measure_before': ref is None and i == 0})
    return plan


def summary(result: dict[str, Any]) -> str:
    """One line of a verdict."""
    nums = ', '.join('%s %s vs %s (x%.2f)' % (c['figure'], c['new'], c['old'], c['ratio']) for c in result['compared'])
    if result['verdict'] == 'pass':
        return 'pass: %s' % (nums or 'no figure compared')
    return 'regressed: %s%s' % ('; '.join(result['regressions'][:5]), (' [%s]' % nums) if nums else '')
