# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ds4_interactive_long_prompts: --long-prefill-token-threshold at 7/8 of the recipe's --max-num-batched-tokens.

The fraction is the measured one (the real-vllm-on-device notes, Part 1b, vLLM 0.26.0): 224 of 256 and 7168 of 8192.
Off (the default, absent, false, "false") renders every recipe unchanged (the goldens of tests/golden/<profile> prove
the bytes; here: no flag, no deviation); on renders the flag, publishes the plan and lists the deviation. Every refusal
names the variable, the value and the fix.
"""

import copy
import json

import pytest

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config as c
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import vllm_schema
from golden_regen import regen  # pylint: disable=import-error


FLAG = '--long-prefill-token-threshold'


def _inputs(profile, value=None):
    inputs = copy.deepcopy(regen.inventory_inputs(profile))
    if value is not None:
        inputs['ds4_interactive_long_prompts'] = value
    return inputs


def _refused(inputs, *needles):
    with pytest.raises(c.Ds4ConfigError) as exc:
        c.compute_effective(inputs, 'spark1')
    hits = [e for e in exc.value.errors if all(n in e for n in needles)]
    assert hits, 'no error with %r in:\n%s' % (needles, '\n'.join(exc.value.errors))
    assert hits[0].startswith('ds4_interactive_long_prompts = ') and 'Fix:' in hits[0]
    return hits[0]


def test_threshold_is_seven_eighths_of_the_budget_as_measured():
    # Part 1b: 224 of 256 (+13 % on the long prompt) and 7168 of 8192 (nothing measurable) were measured
    assert c.long_prefill_threshold(256) == 224
    assert c.long_prefill_threshold(8192) == 7168
    assert c.long_prefill_threshold(16384) == 14336
    assert c.long_prefill_threshold(2) == 1 and c.long_prefill_threshold(1000) == 875


@pytest.mark.parametrize('profile', c.PROFILES)
@pytest.mark.parametrize('value', [None, False, 'false', 'no', 0])
def test_off_leaves_every_recipe_as_its_seed_ran_it(profile, value):
    eff = c.compute_effective(_inputs(profile, value), 'spark1')
    assert FLAG not in eff['argv'] and 'long-prefill-token-threshold' not in eff['serve_args']
    assert eff['deviations'] == [] and 'Deviation' not in eff['launch_script']
    assert eff['interactive_long_prompts']['enabled'] is False and eff['interactive_long_prompts']['threshold'] is None


@pytest.mark.parametrize('profile,value,budget', [('long-context-1m', True, 8192), ('long-context-1m', 'true', 8192),
                                                  ('balanced', 'yes', 16384), ('dspark-nvfp4-1m', True, 8192),
                                                  ('upstream-mtp', True, 16384)])
def test_on_renders_the_threshold_and_lists_the_deviation(profile, value, budget):
    for host in ('spark1', 'spark2'):
        eff = c.compute_effective(_inputs(profile, value), host)
        n = budget * 7 // 8
        i = eff['argv'].index(FLAG)
        assert eff['argv'][i + 1] == str(n) and eff['argv'].count(FLAG) == 1
        plan = eff['interactive_long_prompts']
        assert plan == dict(plan, enabled=True, threshold=n, max_num_batched_tokens=budget, fraction='7/8')
        assert len(eff['deviations']) == 1 and eff['deviations'][0].startswith('ds4_interactive_long_prompts: %s %d' % (FLAG, n))
        assert '# Deviation from the seed (a collection setting), ds4_interactive_long_prompts: %s %d' % (FLAG, n) in eff['launch_script']
        assert '  %s %d \\' % (FLAG, n) in eff['launch_script']
        json.dumps(eff['interactive_long_prompts'])
    # the off render differs from the on render only by the flag and the header line
    off = c.compute_effective(_inputs(profile), 'spark1')['launch_script'].splitlines()
    on = c.compute_effective(_inputs(profile, value), 'spark1')['launch_script'].splitlines()
    added = [ln for ln in on if ln not in off]
    assert len(added) == 2 and 'Deviation' in added[0] and added[1].startswith('  %s ' % FLAG)
    assert [ln for ln in on if ln not in added] == off


def test_the_site_budget_is_the_one_divided():
    inputs = _inputs('long-context-1m', True)
    inputs['ds4_site_overrides'] = dict(inputs.get('ds4_site_overrides') or {}, serve_args={'max-num-batched-tokens': 4096})
    eff = c.compute_effective(inputs, 'spark1')
    assert eff['interactive_long_prompts']['threshold'] == 3584 and eff['argv'][eff['argv'].index(FLAG) + 1] == '3584'


@pytest.mark.parametrize('value', ['maybe', 2, [True], {'on': True}])
def test_not_a_boolean_refused(value):
    err = _refused(_inputs('long-context-1m', value), 'must be true or false')
    assert json.dumps(value) in err


def test_recipe_without_a_budget_refused_naming_the_fix():
    err = _refused(_inputs('upstream-0731-dspark', True), 'does not set it', 'upstream-0731-dspark')
    assert 'ds4_site_overrides.serve_args.max-num-batched-tokens' in err
    inputs = _inputs('upstream-0731-dspark', True)   # the fix works
    inputs['ds4_site_overrides'] = dict(inputs.get('ds4_site_overrides') or {}, serve_args={'max-num-batched-tokens': 8192})
    assert c.compute_effective(inputs, 'spark1')['interactive_long_prompts']['threshold'] == 7168


def test_threshold_set_by_hand_and_by_the_setting_refused():
    inputs = _inputs('long-context-1m', True)
    inputs['ds4_site_overrides'] = dict(inputs.get('ds4_site_overrides') or {}, serve_args={'long-prefill-token-threshold': 4096})
    err = _refused(inputs, 'already set to 4096', 'ds4_site_overrides.serve_args')
    assert 'set ds4_interactive_long_prompts: false and keep your own value' in err
    # the hand-set value alone is the site's own choice (an ordinary site override, checked by the flag schema)
    inputs['ds4_interactive_long_prompts'] = False
    eff = c.compute_effective(inputs, 'spark1')
    assert eff['argv'][eff['argv'].index(FLAG) + 1] == '4096' and eff['deviations'] == []


def test_chunked_prefill_off_refused():
    inputs = _inputs('long-context-1m', True)
    inputs['ds4_site_overrides'] = dict(inputs.get('ds4_site_overrides') or {}, serve_args={'no-enable-chunked-prefill': True})
    _refused(inputs, 'chunked prefill off')


def test_differs_between_hosts_refused():
    inputs = _inputs('long-context-1m')
    inputs['hostvars']['spark2']['ds4_interactive_long_prompts'] = True
    with pytest.raises(c.Ds4ConfigError) as exc:
        c.compute_effective(inputs, 'spark1')
    assert any(e.startswith('ds4_interactive_long_prompts = ') and 'differs between hosts' in e for e in exc.value.errors)


def test_every_recipe_version_parser_knows_the_flag():
    # the schemas were built from the real wheels' `vllm serve` parsers; each recipe's declared version (0.21.1 checked
    # with 0.21.0, 0.22.0, 0.33.0) and the 0.27.1 of the peer compose have the flag as an int
    used = set()
    for profile in c.PROFILES:
        schema, version, problem = vllm_schema.schema_for(regen.recipe_layer(profile)['image'].get('vllm_version'))
        assert problem is None, (profile, problem)
        used.add(version)
    assert used >= {'0.21.0', '0.22.0', '0.33.0'}
    for version in sorted(used | {'0.27.1'}):
        entry = vllm_schema.load_schema(version)['flags']['long-prefill-token-threshold']
        assert entry['type'] == 'int' and entry['options'] == [FLAG], version


def test_the_schema_check_covers_the_rendered_flag():
    # proof that the check is not vacuous: the same flag with a wrong type is refused by the schema check
    inputs = _inputs('long-context-1m')
    inputs['ds4_site_overrides'] = dict(inputs.get('ds4_site_overrides') or {}, serve_args={'long-prefill-token-threshold': 'lots'})
    with pytest.raises(c.Ds4ConfigError) as exc:
        c.compute_effective(inputs, 'spark1')
    assert any('long-prefill-token-threshold' in e for e in exc.value.errors), exc.value.errors
