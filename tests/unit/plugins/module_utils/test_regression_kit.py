# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/module_utils/_converge/regression_kit.py: the kit per recipe (the shipped data file), its run on fake endpoints, the
verdict in both directions and at its thresholds, and the refusals of bad thresholds."""

import glob
import json
import os

import pytest
import yaml

from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import regression_kit as rk

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
with open(os.path.join(REPO, 'roles', 'config', 'files', 'regression_kit.yml')) as _fh:
    DATA = yaml.safe_load(_fh)
RECIPES = sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(REPO, 'roles', 'config', 'files', 'recipes', '*.yml')))
CLEAN = ('The sky looks blue because air molecules scatter the short blue wavelengths of sunlight far more than the '
         'longer red ones, so blue light reaches our eyes from every direction of the sky.')
TOOL_CALL = [{'id': 'c1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': json.dumps({'city': 'Paris'})}}]


def numbers(decode=50.0, prefill=2000.0, acceptance=0.7, failures=()):
    return {'ok': not failures, 'failures': list(failures), 'decode_tps': decode, 'prefill_tps': prefill,
            'acceptance_rate': acceptance}


@pytest.mark.parametrize('recipe', RECIPES)
def test_every_shipped_recipe_has_a_valid_kit(recipe):
    kit, problems = rk.resolve_kit(DATA, recipe)
    assert problems == []
    assert kit['known_answers'] and kit['tool_calls'] and kit['bench']['runs'] >= 1


def test_a_recipe_entry_replaces_keys_and_bench_keys_one_by_one():
    data = {'default': dict(DATA['default']), 'recipes': {'x': {'garble_levels': [1], 'bench': {'runs': 1}}}}
    kit, problems = rk.resolve_kit(data, 'x')
    assert problems == [] and kit['garble_levels'] == [1]
    assert kit['bench'] == dict(DATA['default']['bench'], runs=1)
    assert rk.resolve_kit(DATA, 'conservative')[0]['garble_levels'] == [1, 2]  # max-num-seqs 2


def test_a_broken_kit_is_named():
    data = {'default': {'known_answers': [{'name': 'a', 'prompt': 'p'}], 'garble_levels': [0], 'bench': {'runs': 0},
                        'extra': 1}}
    _kit, problems = rk.resolve_kit(data, 'x')
    text = ' | '.join(problems)
    assert 'unknown key(s) extra' in text and 'needs name, prompt and expected' in text
    assert 'garble_levels must be a list' in text and 'bench.runs must be a whole number' in text
    assert 'bench.decode_tokens' in text


def test_equal_or_better_passes_and_says_what_was_compared():
    v = rk.verdict(numbers(55.0, 2100.0, 0.72), numbers())
    assert v['verdict'] == 'pass' and v['regressions'] == [] and v['not_compared'] == []
    ratios = [(c['figure'], c['ratio']) for c in v['compared']]
    assert ratios == [('decode_tps', 1.1), ('prefill_tps', 1.05), ('acceptance_rate', 1.029)]
    assert rk.summary(v).startswith('pass: decode_tps 55.0 vs 50.0 (x1.10)')


def test_slower_beyond_the_threshold_regresses_and_names_the_variable():
    v = rk.verdict(numbers(decode=30.0), numbers(decode=50.0))
    assert v['verdict'] == 'regressed'
    assert v['regressions'] == ['decode tok/s: 30.0 against 50.0 on the reference (40 % lower; at most 10.0 % allowed, '
                                'ds4_upgrade_max_decode_drop_pct)']
    assert rk.summary(v).startswith('regressed: decode tok/s')


@pytest.mark.parametrize('decode,expected', [(45.0, 'pass'), (44.9, 'regressed')])
def test_the_threshold_is_inclusive(decode, expected):
    assert rk.verdict(numbers(decode=decode), numbers(decode=50.0))['verdict'] == expected


def test_thresholds_move_the_bound_both_ways():
    assert rk.verdict(numbers(decode=30.0), numbers(decode=50.0), {'max_decode_drop_pct': 50})['verdict'] == 'pass'
    assert rk.verdict(numbers(prefill=1990.0), numbers(prefill=2000.0), {'max_prefill_drop_pct': 0})['verdict'] == 'regressed'
    assert rk.verdict(numbers(acceptance=0.5), numbers(acceptance=0.7))['verdict'] == 'regressed'


def test_a_failed_check_regresses_even_when_faster():
    fail = {'request': 'capital', 'check': 'deterministic_answer', 'excerpt': 'Berlin', 'detail': "expected 'paris'"}
    v = rk.verdict(numbers(decode=80.0, failures=[fail]), numbers())
    assert v['verdict'] == 'regressed' and v['regressions'][0] == "capital deterministic_answer: expected 'paris'"


def test_a_figure_one_side_lacks_is_not_compared_and_lost_acceptance_regresses():
    v = rk.verdict(numbers(acceptance=None), numbers(acceptance=None))
    assert v['verdict'] == 'pass' and v['not_compared'] == ['spec-decode acceptance: measured on neither pair']
    v = rk.verdict(numbers(acceptance=None), numbers(acceptance=0.7))
    assert v['verdict'] == 'regressed' and 'the changed pair none' in v['regressions'][0]
    v = rk.verdict(numbers(acceptance=0.6), numbers(acceptance=None))
    assert v['verdict'] == 'pass' and v['not_compared'] == ['spec-decode acceptance: not measured on the reference pair']


@pytest.mark.parametrize('cfg,word', [
    ({'max_decode_drop_pct': 'fast'}, 'ds4_upgrade_max_decode_drop_pct=\'fast\' is not a number'),
    ({'max_prefill_drop_pct': 95}, 'ds4_upgrade_max_prefill_drop_pct=95 is out of range'),
    ({'max_acceptance_drop_pct': -1}, 'ds4_upgrade_max_acceptance_drop_pct=-1 is out of range'),
    ({'max_decode_drop_pct': True}, 'ds4_upgrade_max_decode_drop_pct=True is out of range'),
])
def test_bad_thresholds_refused_naming_the_variable(cfg, word):
    problems = rk.check_thresholds(cfg)
    assert len(problems) == 1 and problems[0].startswith(word) and 'Fix: a percentage from 0.0 to 90.0' in problems[0]
    assert rk.check_thresholds({}) == [] and rk.check_thresholds({'max_decode_drop_pct': '20'}) == []


class FakeEndpoint(object):
    """post_json / stream_chat / /metrics of one simulated pair: decode and prefill rates, answers, spec counters."""

    def __init__(self, decode=50.0, prefill=2000.0, capital='Paris', accepted_per_run=14):
        self.decode, self.prefill, self.capital = decode, prefill, capital
        self.accepted_per_run, self.scrapes, self.bodies = accepted_per_run, 0, []

    def post(self, _url, path, body, _key, _timeout):
        assert path == '/v1/chat/completions'
        self.bodies.append(body)
        prompt = body['messages'][0]['content'].lower()
        if body.get('tools'):
            msg, finish = {'content': '', 'tool_calls': TOOL_CALL}, 'tool_calls'
        elif '2+2' in prompt:
            msg, finish = {'content': 'Four'}, 'stop'
        elif 'capital' in prompt:
            msg, finish = {'content': self.capital}, 'stop'
        else:
            msg, finish = {'content': CLEAN}, 'stop'
        return 200, {'choices': [{'message': msg, 'finish_reason': finish}]}, 0.1

    def stream(self, _url, body, api_key=None, timeout=None, clock=None):
        self.bodies.append(body)
        if body['max_tokens'] == 1:
            tokens = len(body['messages'][0]['content'].split()) + 4
            return {'t_start': 0.0, 't_first': tokens / self.prefill, 't_last': tokens / self.prefill, 'error': None,
                    'completion_tokens': 1, 'prompt_tokens': tokens, 'content': 'The'}
        n = body['max_tokens']
        return {'t_start': 0.0, 't_first': 0.1, 't_last': 0.1 + (n - 1) / self.decode, 'error': None,
                'completion_tokens': n, 'prompt_tokens': 20, 'content': CLEAN}

    def scrape(self, _url):
        self.scrapes += 1
        k = self.scrapes - 1
        return ('vllm:spec_decode_num_drafts_total{model_name="m"} %d\n'
                'vllm:spec_decode_num_draft_tokens_total{model_name="m"} %d\n'
                'vllm:spec_decode_num_accepted_tokens_total{model_name="m"} %d\n' % (10 * k, 20 * k, self.accepted_per_run * k))


def run(endpoint, **kw):
    kit = rk.resolve_kit(DATA, 'balanced')[0]
    return rk.run_kit('http://pair', 'm', kit, post=endpoint.post, stream=endpoint.stream, scrape=endpoint.scrape,
                      clock=lambda: 0.0, **kw)


def test_run_kit_measures_and_checks_everything_once_per_entry():
    ep = FakeEndpoint()
    out = run(ep)
    assert out['ok'] and out['failures'] == []
    assert out['checks'] == {'known_answers': 2, 'tool_calls': 1, 'garble_requests': 13, 'skipped': []}
    assert out['decode_tps'] == pytest.approx(50.0) and out['prefill_tps'] == pytest.approx(2000.0, rel=1e-3)
    assert out['acceptance_rate'] == 0.7 and ep.scrapes == 2 and len(out['runs']) == 3
    # temperature 0, thinking off, the decode streams ignore_eos so every run decodes the same length
    assert all(b['temperature'] == 0.0 and b['chat_template_kwargs'] == {'thinking': False, 'enable_thinking': False}
               for b in ep.bodies)
    assert [b['max_tokens'] for b in ep.bodies if b.get('ignore_eos')] == [128] * 3


def test_run_kit_against_a_slower_pair_then_the_verdict():
    old, new = run(FakeEndpoint()), run(FakeEndpoint(decode=20.0))
    v = rk.verdict(new, old)
    assert v['verdict'] == 'regressed' and v['regressions'][0].startswith('decode tok/s: 20.0 against 50.0')


def test_run_kit_a_wrong_answer_and_no_tools():
    out = run(FakeEndpoint(capital='Berlin'), tools=False)
    assert not out['ok'] and [f['check'] for f in out['failures']] == ['deterministic_answer']
    assert out['checks']['tool_calls'] == 0 and out['checks']['skipped'] == ['tool calls: the recipe has no tool-call parser']


def test_run_kit_without_metrics_has_no_acceptance():
    ep = FakeEndpoint()
    kit = rk.resolve_kit(DATA, 'balanced')[0]
    out = rk.run_kit('http://pair', 'm', kit, post=ep.post, stream=ep.stream, scrape=lambda _url: None, clock=lambda: 0.0)
    assert out['ok'] and out['acceptance_rate'] is None and out['metrics'] is False


def test_an_upgrade_with_bad_inputs_is_refused_before_anything_changes():
    assert rk.check_upgrade({}, DATA, 'balanced') == []
    assert rk.check_upgrade({'max_decode_drop_pct': 95}, DATA, 'balanced')[0].startswith('ds4_upgrade_max_decode_drop_pct=95')
    assert 'has no `default` kit' in rk.check_upgrade({}, {'recipes': {}}, 'balanced')[0]
    broken = {'default': dict(DATA['default'], garble_levels=['x'])}
    assert rk.check_upgrade({}, broken, 'balanced') == [
        "regression kit of balanced: garble_levels must be a list of whole numbers from 1 to 64, got ['x']. Fix: "
        "ds4_upgrade_kit_file."]


def _pairs(n):
    return [{'name': 'spark_pair%d' % (i + 1), 'head': 'spark%d' % (2 * i + 1), 'hosts': []} for i in range(n)]


def test_the_plan_of_an_upgrade_of_three_pairs():
    assert rk.upgrade_plan(_pairs(3)) == [
        {'pair': 'spark_pair1', 'head': 'spark1', 'reference': 'spark_pair2', 'reference_head': 'spark3', 'measure_before': False},
        {'pair': 'spark_pair2', 'head': 'spark3', 'reference': 'spark_pair3', 'reference_head': 'spark5', 'measure_before': False},
        # the last pair: its own numbers from when it was spark_pair2's reference
        {'pair': 'spark_pair3', 'head': 'spark5', 'reference': None, 'reference_head': None, 'measure_before': False}]


def test_the_plan_of_a_single_pair_measures_it_before_its_change():
    assert rk.upgrade_plan(_pairs(1)) == [
        {'pair': 'spark_pair1', 'head': 'spark1', 'reference': None, 'reference_head': None, 'measure_before': True}]
    assert rk.upgrade_plan([]) == []


def test_each_prefill_prompt_is_new_to_the_prefix_cache():
    ep = FakeEndpoint()
    run(ep)
    prompts = [b['messages'][0]['content'] for b in ep.bodies if b['max_tokens'] == 1]
    assert len(prompts) == 3 and len(set(p.split()[0] for p in prompts)) == 3
    assert all(len(p.split()) == 2048 for p in prompts)
    assert rk.prefill_prompt(4, 'x') == 'x the pair serves'
