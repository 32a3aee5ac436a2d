# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Recipes, models and image families as data (plugins/plugin_utils/catalogue.py) through ds4_config: choosing by
name, refusing unknown names with the list, refusing recipe/model/family mismatches naming both, the revision pin."""

import copy
import re

import pytest

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import catalogue, ds4_config as c, vllm_schema
from golden_regen import regen  # pylint: disable=import-error


UPSTREAM = ('upstream-0731-dspark', 'upstream-mtp')
SHA = '0123456789abcdef0123456789abcdef01234567'


def inputs(recipe='balanced', **extra):
    """What the sample site with -e ds4_profile=<recipe> gives (the recipe by name only), with extra group vars on both hosts."""
    inp = copy.deepcopy(regen.inventory_inputs(recipe))
    for key, value in extra.items():
        inp[key] = value
        for hv in inp['hostvars'].values():
            hv[key] = copy.deepcopy(value)
    return inp


def errors_of(inp):
    errors, _w, _m, _o, _n = c.validate_all(inp)
    return errors


def one_error(inp, *needles):
    hits = [e for e in errors_of(inp) if all(n in e for n in needles)]
    assert hits, 'no error with %r in:\n%s' % (needles, '\n'.join(errors_of(inp)))
    assert 'Fix:' in hits[0]
    return hits[0]


# ---------------------------------------------------------------------------------------------- recipes

def test_every_recipe_file_is_a_recipe_and_is_chosen_by_name():
    assert set(UPSTREAM) <= set(c.PROFILES) and 'balanced' in c.PROFILES
    for name in c.PROFILES:
        recipe = catalogue.load_recipe(name)
        assert recipe['model']['name'] in catalogue.MODELS, name
        assert recipe['image']['family'] in catalogue.IMAGE_FAMILIES, name
        assert set(recipe['measured_with']) <= set(catalogue.MODELS), name
        # field default (field notes 2026-11), unless a recipe's source says otherwise (none of the shipped ones does)
        assert recipe['env']['PYTORCH_CUDA_ALLOC_CONF'] == 'expandable_segments:True', name
        # -e ds4_profile=<name> over the sample site: the recipe chosen by name, the site unchanged
        assert regen.inventory_inputs(name)['ds4_profile'] == name
        assert all(hv['ds4_profile'] == name for hv in regen.inventory_inputs(name)['hostvars'].values())


def test_the_sample_site_holds_no_recipe_and_names_a_shipped_one():
    """The site names its recipe (ds4_profile) and holds none of it; the site's pins reach whichever recipe is chosen."""
    group, hostvars = regen.load_inventory()
    assert group['ds4_profile'] in c.PROFILES and group['ds4_profile'] == 'balanced'
    assert 'ds4_profile_config' not in group and 'ds4_node_memory_gib' not in group
    for name in c.PROFILES:
        switched, _hv = regen.load_inventory(name)
        assert switched['ds4_model_revisions'] == {} and switched['ds4_site_overrides'] == {}, name
        assert dict(switched, ds4_profile=group['ds4_profile']) == group, name  # only the recipe's name changed


def test_recipe_by_name_equals_the_same_recipe_given_in_full():
    """The shipped recipe chosen by ds4_profile and the same content as a user's own ds4_profile_config render alike."""
    for name in c.PROFILES:
        by_name = c.compute_effective(regen.inventory_inputs(name), 'spark1')
        in_full = c.compute_effective(regen.inputs_for(name), 'spark1')
        assert by_name['launch_script'] == in_full['launch_script'], name
        assert by_name['recipe'] == name and in_full['recipe'] is None


def test_a_users_own_recipe_wins_over_the_shipped_one():
    own = catalogue.load_recipe('throughput')
    own['serve_args']['max-num-seqs'] = 3
    inp = inputs('balanced', ds4_profile_config=own)
    eff = c.compute_effective(inp, 'spark1')
    assert eff['serve_args']['max-num-seqs'] == 3 and eff['recipe'] is None and eff['profile'] == 'balanced'


# ---------------------------------------------------------------------------------------------- upstream 0.33 recipes

@pytest.mark.parametrize('name', UPSTREAM)
def test_upstream_recipes_render_and_pass_the_vllm_0_33_0_schema(name):
    eff = c.compute_effective(regen.inventory_inputs(name), 'spark1')
    assert eff['image']['ref'] == 'vllm/vllm-openai:v0.33.0' and eff['image']['vllm_version'] == '0.33.0'
    assert eff['image_family']['derived_image'] is False and eff['image_family']['patches'] == {'mxfp4_fix': False, 'deepgemm': False}
    schema, used, problem = vllm_schema.schema_for('0.33.0')
    assert used == '0.33.0' and problem is None
    assert list(vllm_schema.check_serve_args(schema, eff['serve_args'], c.JSON_FLAGS)) == []
    assert not [w for w in eff['warnings'] if 'vLLM' in w and 'schema' in w], eff['warnings']
    assert "--load-format instanttensor" in eff['launch_script'] or "'--load-format' 'instanttensor'" in eff['launch_script'] \
        or 'instanttensor' in ' '.join(eff['argv'])
    assert eff['env']['PYTORCH_CUDA_ALLOC_CONF'] == 'expandable_segments:True'
    assert eff['api']['port'] == catalogue.IMAGE_FAMILIES['vllm-openai']['api_port']


def test_the_0731_recipe_serves_0731_with_dspark():
    eff = c.compute_effective(regen.inventory_inputs('upstream-0731-dspark'), 'spark1')
    assert eff['model']['repo_id'] == 'deepseek-ai/DeepSeek-V4-Flash-0731' and eff['model_name'] == 'deepseek-v4-flash-0731'
    assert eff['serve_args']['speculative-config'] == {'method': 'dspark', 'num_speculative_tokens': 5}
    assert eff['model']['serve_arg'] == '/models/DeepSeek-V4-Flash-0731'


# ---------------------------------------------------------------------------------------------- models

def test_no_model_revision_is_invented():
    """Every catalogue revision is a published full hash or None (the field notes publish none)."""
    for name, spec in catalogue.MODELS.items():
        assert spec['revision'] is None or re.match(r'^[0-9a-f]{40}$', spec['revision']), name


def test_ds4_model_picks_another_checkpoint_its_name_paths_and_pin():
    inp = inputs('upstream-mtp', ds4_model='deepseek-v4-flash-dspark', ds4_model_revisions={'deepseek-v4-flash-dspark': SHA})
    # the recipe's MTP method does not fit the DSpark checkpoint: refused, naming both
    msg = one_error(inp, 'speculative-config].method = "mtp"', 'model deepseek-v4-flash-dspark', 'fraserprice/DeepSeek-V4-Flash-DSpark',
                    'has no mtp draft')
    assert 'dspark' in msg
    site = {'serve_args': {'speculative-config': {'method': 'dspark', 'num_speculative_tokens': 5}}}
    inp = inputs('upstream-mtp', ds4_model='deepseek-v4-flash-dspark', ds4_model_revisions={'deepseek-v4-flash-dspark': SHA},
                 ds4_site_overrides=site)
    eff = c.compute_effective(inp, 'spark1')
    assert eff['model'] == {'repo_id': 'fraserprice/DeepSeek-V4-Flash-DSpark', 'revision': SHA,
                            'host_dir': '/srv/dgxspark-ds4/models/DeepSeek-V4-Flash-DSpark',
                            'container_dir': '/models/DeepSeek-V4-Flash-DSpark', 'serve_arg': '/models/DeepSeek-V4-Flash-DSpark'}
    assert eff['serve_args']['served-model-name'] == 'deepseek-v4-flash-dspark'
    assert not any('was measured with' in w for w in eff['warnings'])  # upstream-mtp's measured_with is empty: no claim
    assert not any('revision is not pinned' in w for w in eff['warnings'])


def test_a_recipe_measured_with_one_model_warns_for_another():
    inp = inputs('dspark-c16', ds4_model='deepseek-v4-flash-dspark')
    assert not any('was measured with' in w for w in c.compute_effective(inp, 'spark1')['warnings'])
    site = {'serve_args': {'kv-cache-dtype': 'fp8', 'speculative-config': {'method': 'mtp', 'num_speculative_tokens': 2}}}
    inp = inputs('dspark-c16', ds4_model='deepseek-v4-flash', ds4_site_overrides=site)
    warnings = c.compute_effective(inp, 'spark1')['warnings']
    assert any('recipe dspark-c16 was measured with deepseek-v4-flash-dspark only' in w for w in warnings), warnings


def test_unknown_model_refused_with_the_list():
    msg = one_error(inputs(ds4_model='deepseek-v4.1-flash'), 'ds4_model = "deepseek-v4.1-flash"', 'unknown model')
    assert 'use one of: deepseek-v4-flash, deepseek-v4-flash-0731, deepseek-v4-flash-dspark' in msg


def test_unknown_model_in_a_pin_refused_and_a_bad_pin_refused():
    one_error(inputs(ds4_model_revisions={'deepseek-v4-flash-0730': SHA}), 'ds4_model_revisions[deepseek-v4-flash-0730]',
              'unknown model', 'deepseek-v4-flash-0731')
    msg = one_error(inputs(ds4_model_revisions={'deepseek-v4-flash': '9e165c30'}), 'ds4_model_revisions[deepseek-v4-flash] = "9e165c30"',
                    'full 40-hex commit')
    assert 'huggingface.co/deepseek-ai/DeepSeek-V4-Flash/commits/main' in msg


def test_dspark_on_a_checkpoint_without_the_draft_refused_naming_both():
    site = {'serve_args': {'speculative-config': {'method': 'dspark', 'num_speculative_tokens': 5}}}
    one_error(inputs('balanced', ds4_site_overrides=site), 'speculative-config].method = "dspark"',
              'model deepseek-v4-flash (deepseek-ai/DeepSeek-V4-Flash) has no dspark draft', 'deepseek_mtp, mtp')
    # and MTP on 0731 (its MTP heads were removed)
    one_error(inputs('upstream-0731-dspark', ds4_site_overrides={'serve_args': {'speculative-config': {'method': 'mtp',
                                                                                                       'num_speculative_tokens': 2}}}),
              'model deepseek-v4-flash-0731', 'has no mtp draft')


def test_the_pinned_revision_is_required_where_model_cache_downloads():
    inp = inputs('upstream-0731-dspark')
    assert not errors_of(inp)
    inp['require_model_revision'] = True
    msg = one_error(inp, 'ds4_model_revisions[deepseek-v4-flash-0731] is not set', 'deepseek-ai/DeepSeek-V4-Flash-0731')
    assert 'set ds4_model_revisions: {deepseek-v4-flash-0731: <40-hex commit>}' in msg
    assert 'https://huggingface.co/deepseek-ai/DeepSeek-V4-Flash-0731/commits/main' in msg
    assert 'git ls-remote https://huggingface.co/deepseek-ai/DeepSeek-V4-Flash-0731 refs/heads/main' in msg
    inp = inputs('upstream-0731-dspark', ds4_model_revisions={'deepseek-v4-flash-0731': SHA})
    inp['require_model_revision'] = True
    assert c.compute_effective(inp, 'spark1')['model']['revision'] == SHA


# ---------------------------------------------------------------------------------------------- image families

def test_unknown_family_refused_with_the_list():
    msg = one_error(inputs(ds4_site_overrides={'image': {'family': 'ngc'}}), 'image.family = "ngc"', 'unknown image family')
    assert 'use one of: b12x, dspark, eugr-nightly, vllm-openai' in msg


def test_nvfp4_on_a_family_without_it_refused_naming_both():
    inp = inputs('dspark-c16', ds4_site_overrides={'image': {'family': 'b12x', 'ref': 'example/b12x:1'}})
    one_error(inp, 'kv-cache-dtype] = "nvfp4_ds_mla"', 'image family b12x (image "example/b12x:1") has no KV-cache dtype nvfp4_ds_mla',
              'dspark, vllm-openai')
    # the same dtype on the upstream family is fine
    inp = inputs('dspark-c16', ds4_site_overrides={'image': {'family': 'vllm-openai', 'ref': 'vllm/vllm-openai:v0.33.0'}})
    assert not [e for e in errors_of(inp) if 'KV-cache dtype' in e]


def test_instanttensor_only_where_the_family_has_it():
    site = {'serve_args': {'load-format': 'instanttensor'}}
    one_error(inputs('long-context-1m', ds4_site_overrides=site), 'load-format] = "instanttensor"', 'image family b12x',
              'eugr-nightly, vllm-openai')
    # any recipe on a family that has it may opt in (balanced runs eugr-nightly)
    eff = c.compute_effective(inputs('balanced', ds4_site_overrides={'serve_args': {'load-format': 'instanttensor'}}), 'spark1')
    assert eff['serve_args']['load-format'] == 'instanttensor'


def test_family_data_drives_the_derived_image():
    for name, fam in catalogue.IMAGE_FAMILIES.items():
        assert fam['derived_image'] == any(fam['patches'].values()), name
    eff = c.compute_effective(regen.inventory_inputs('balanced'), 'spark1')
    assert eff['image_family']['name'] == 'eugr-nightly' and eff['image_family']['derived_image'] is True
