# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""serve_args and env against vLLM's own flag schema."""

import copy
import json

import pytest

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config as c
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import vllm_schema as vs
from golden_regen import regen  # pylint: disable=import-error


COMMITTED = ('0.21.0', '0.22.0', '0.27.1', '0.33.0')


@pytest.fixture
def inputs():
    return copy.deepcopy(regen.inputs_for('balanced'))


def errors_of(inputs):
    errors, _w, _m, _o, _n = c.validate_all(inputs)
    return errors


def warnings_of(inputs):
    errors, warnings, _m, _o, _n = c.validate_all(inputs)
    assert errors == [], errors
    return warnings


def refused(inputs, *needles):
    with pytest.raises(c.Ds4ConfigError) as exc:
        c.compute_effective(inputs, 'spark1')
    hits = [e for e in exc.value.errors if all(n in e for n in needles)]
    assert hits, 'no error with %r in:\n%s' % (needles, '\n'.join(exc.value.errors))
    assert 'Fix:' in hits[0]
    return hits[0]


def set_everywhere(inputs, key, value):
    inputs[key] = value
    for hv in inputs['hostvars'].values():
        hv[key] = copy.deepcopy(value)


def set_profile_arg(inputs, flag, value):
    layer = copy.deepcopy(inputs['ds4_profile_config'])
    layer['serve_args'][flag] = value
    set_everywhere(inputs, 'ds4_profile_config', layer)


def set_site(inputs, layer):
    set_everywhere(inputs, 'ds4_site_overrides', layer)


def set_vllm_version(inputs, version):
    layer = copy.deepcopy(inputs['ds4_profile_config'])
    layer['image']['vllm_version'] = version
    set_everywhere(inputs, 'ds4_profile_config', layer)


# --------------------------------------------------------------------------- the data

@pytest.mark.parametrize('version', COMMITTED)
def test_committed_schema_files(version):
    path = vs.schema_path(version)
    with open(path) as f:
        schema = json.load(f)
    assert schema['vllm_version'] == version
    assert schema['generator'] == 'tools/vllm_flag_schema.py'
    flags = schema['flags']
    assert len(flags) > 200
    # the flags every profile leans on, with vLLM's own types
    assert flags['max-num-seqs']['type'] == 'int'
    assert flags['enable-prefix-caching']['type'] == 'bool'
    assert flags['compilation-config']['json'] is True
    assert 'num_speculative_tokens' in flags['speculative-config']['json_schema']['keys']
    assert 'VLLM_HOST_IP' in schema['env']
    assert version in vs.available_versions()


def test_nvfp4_ds_mla_only_in_0_33_0():
    """0.33.0 knows the DSpark KV dtype (vLLM validates it in CacheConfig, not in argparse); 0.27.1 does not."""
    new = vs.load_schema('0.33.0')['flags']['kv-cache-dtype']
    old = vs.load_schema('0.27.1')['flags']['kv-cache-dtype']
    assert 'nvfp4_ds_mla' in new['choices'] and new['choices_source'] == 'vllm.config.cache.KV_CACHE_DTYPES'
    assert 'nvfp4_ds_mla' not in old['choices'] and 'fp8' in old['choices']


def test_removed_env_vars_really_are_gone():
    for version in COMMITTED:
        env = vs.load_schema(version)['env']
        for name in vs.REMOVED_ENV:
            assert name not in env, (version, name)


# Regenerating the schemas needs the vllm wheel (+ CPU torch), which CI does not install: that check is the maintainer
# command `tools/vllm_flag_schema.py --check` (docs/testing.md, "Maintainer checks"), not a test that would skip in CI.


# --------------------------------------------------------------------------- every leaf of every profile

def _leaves(serve_args):
    """(flag, json key or None, value) for every leaf of a profile's serve_args."""
    for flag, value in serve_args.items():
        if isinstance(value, dict):
            yield flag, None, value
            for key, v in value.items():
                yield flag, key, v
        else:
            yield flag, None, value


def _wrong(value):
    """A value of the wrong type, chosen from the original's type (not from the schema)."""
    if value is True or isinstance(value, bool):
        return 'maybe'
    if isinstance(value, (int, float)):
        return 'lots'
    if isinstance(value, str):
        return {'not': 'a string'}
    if isinstance(value, list):
        return 'lots'
    if isinstance(value, dict):
        return 'lots'
    raise AssertionError(value)


def _cases():
    for name in c.PROFILES:
        inp = regen.inputs_for(name)
        args = inp['ds4_profile_config']['serve_args']
        for flag, key, value in _leaves(args):
            yield name, flag, key, value


CASES = list(_cases())


@pytest.mark.parametrize('profile,flag,key,value', CASES, ids=['%s:%s%s' % (p, f, '.' + k if k else '') for p, f, k, _v in CASES])
def test_every_leaf_of_every_profile_refused_with_a_wrong_type(profile, flag, key, value):
    inputs = copy.deepcopy(regen.inputs_for(profile))
    layer = copy.deepcopy(inputs['ds4_profile_config'])
    bad = _wrong(value)
    if key is None:
        layer['serve_args'][flag] = bad
        var = 'ds4_profile_config.serve_args[%s]' % flag
    else:
        layer['serve_args'][flag][key] = bad
        var = 'ds4_profile_config.serve_args[%s].%s' % (flag, key)
    set_everywhere(inputs, 'ds4_profile_config', layer)
    refused(inputs, var + ' = ', json.dumps(bad))


FLAG_CASES = [(p, f, v) for p, f, k, v in CASES if k is None]


@pytest.mark.parametrize('profile,flag,value', FLAG_CASES, ids=['%s:%s' % (p, f) for p, f, _v in FLAG_CASES])
def test_every_flag_of_every_profile_refused_from_the_site_layer(profile, flag, value):
    inputs = copy.deepcopy(regen.inputs_for(profile))
    bad = _wrong(value)
    set_site(inputs, {'serve_args': {flag: bad}})
    refused(inputs, 'ds4_site_overrides.serve_args[%s] = ' % flag, json.dumps(bad))


def _int_cases():
    for name, flag, key, value in CASES:
        if isinstance(value, int) and not isinstance(value, bool) and flag not in vs.FREEFORM_JSON_KEYS:
            yield name, flag, key, value


INT_CASES = list(_int_cases())


@pytest.mark.parametrize('profile,flag,key,value', INT_CASES,
                         ids=['%s:%s%s' % (p, f, '.' + k if k else '') for p, f, k, _v in INT_CASES])
def test_every_count_of_every_profile_refused_at_minus_one(profile, flag, key, value):
    inputs = copy.deepcopy(regen.inputs_for(profile))
    layer = copy.deepcopy(inputs['ds4_profile_config'])
    if key is None:
        layer['serve_args'][flag] = -1
        var = 'ds4_profile_config.serve_args[%s]' % flag
    else:
        layer['serve_args'][flag][key] = -1
        var = 'ds4_profile_config.serve_args[%s].%s' % (flag, key)
    set_everywhere(inputs, 'ds4_profile_config', layer)
    refused(inputs, var + ' = -1')


def test_the_leaf_cases_cover_all_seven_profiles():
    assert set(p for p, _f, _k, _v in CASES) == set(c.PROFILES)
    assert len(CASES) > 7 * 15


# --------------------------------------------------------------------------- each rule

@pytest.mark.parametrize('flag,value,needle', [
    ('max-num-seqs', 'lots', 'takes an integer'),
    ('max-num-seqs', -1, 'must be a positive integer'),
    ('max-num-seqs', 0, 'must be a positive integer'),
    ('max-num-seqs', 8.5, 'takes an integer'),
    ('block-size', -1, 'must be a positive integer'),
    ('max-num-batched-tokens', 'many', 'takes an integer (or 1k/2M style)'),
    ('enable-prefix-caching', 'maybe', 'is a switch in vLLM'),
    ('enable-prefix-caching', 1, 'is a switch in vLLM'),
    ('max-num-seqs', True, 'true would render a bare --max-num-seqs'),
    ('kv-cache-dtype', 'fp9', 'must be one of the values vLLM 0.22.0 accepts'),
    ('tokenizer-mode', {'a': 1}, 'not a mapping'),
    ('served-model-name', {'a': 1}, 'not a mapping'),
    ('gpu-memory-utilization', 'high', 'takes a number'),
])
def test_value_rules(inputs, flag, value, needle):
    set_profile_arg(inputs, flag, value)
    msg = refused(inputs, 'ds4_profile_config.serve_args[%s] = %s' % (flag, json.dumps(value)), needle)
    assert 'vLLM' in msg or 'collection rule' in msg


def test_good_values_in_other_spellings_pass(inputs):
    set_profile_arg(inputs, 'max-num-seqs', '8')                 # argparse int('8')
    set_profile_arg(inputs, 'max-num-batched-tokens', '16k')     # human_readable_int
    set_profile_arg(inputs, 'gpu-memory-utilization', 0.85)
    assert errors_of(inputs) == []


def test_unknown_flag_suggests_the_closest(inputs):
    set_profile_arg(inputs, 'max-num-seq', 4)
    msg = refused(inputs, 'ds4_profile_config.serve_args[max-num-seq] = 4', 'vLLM 0.22.0 has no flag --max-num-seq',
                  'unrecognized arguments')
    assert 'did you mean max-num-seqs?' in msg


def test_unknown_flag_without_a_close_one_names_the_schema(inputs):
    set_profile_arg(inputs, 'frobnicate-everything', True)
    msg = refused(inputs, 'serve_args[frobnicate-everything]', 'has no flag')
    assert 'vllm_schemas/vllm-0.22.0.json' in msg


def test_short_alias_points_to_the_long_flag(inputs):
    set_profile_arg(inputs, 'sc', {'method': 'deepseek_mtp'})
    msg = refused(inputs, 'serve_args[sc]', 'short alias')
    assert 'did you mean speculative-config?' in msg


def test_negative_switch_spelling_is_known(inputs):
    set_profile_arg(inputs, 'no-enable-prefix-caching', True)
    profile = inputs['ds4_profile_config']
    del profile['serve_args']['enable-prefix-caching']
    set_everywhere(inputs, 'ds4_profile_config', profile)
    assert errors_of(inputs) == []


def test_site_override_named_as_site(inputs):
    set_site(inputs, {'serve_args': {'max-num-seqs': 'lots'}})
    refused(inputs, 'ds4_site_overrides.serve_args[max-num-seqs] = "lots"', 'takes an integer')


def test_site_null_drops_a_flag_without_a_type_error(inputs):
    set_site(inputs, {'serve_args': {'enable-prefix-caching': None}})
    assert errors_of(inputs) == []


@pytest.mark.parametrize('flag,key,value,needle', [
    ('speculative-config', 'num_speculative_tokens', 'lots', 'must be an integer'),
    ('speculative-config', 'num_speculative_tokens', -1, 'must be a positive integer'),
    ('speculative-config', 'method', 'deepseek_mpt', 'must be one of'),
    ('speculative-config', 'num_speculative_tokenz', 2, 'has no key "num_speculative_tokenz"'),
    ('compilation-config', 'cudagraph_mode', 'FULLY', 'must be one of'),
    ('compilation-config', 'custom_ops', 'all', 'must be a list'),
    ('compilation-config', 'cuda_graph_mode', 'PIECEWISE', 'did you mean "cudagraph_mode"?'),
    ('default-chat-template-kwargs', 'thinking', 'maybe', 'must be true/false'),
])
def test_json_key_rules(inputs, flag, key, value, needle):
    args = copy.deepcopy(inputs['ds4_profile_config']['serve_args'][flag])
    args[key] = value
    set_profile_arg(inputs, flag, args)
    refused(inputs, 'ds4_profile_config.serve_args[%s].%s = %s' % (flag, key, json.dumps(value)), needle)


def test_json_keys_case_of_an_enum_and_int_values_pass(inputs):
    comp = copy.deepcopy(inputs['ds4_profile_config']['serve_args']['compilation-config'])
    comp['cudagraph_mode'] = 'piecewise'
    comp['mode'] = 3
    set_profile_arg(inputs, 'compilation-config', comp)
    assert errors_of(inputs) == []


def test_json_flag_given_a_string_still_refused(inputs):
    set_profile_arg(inputs, 'speculative-config', '{"method": "deepseek_mtp"}')
    refused(inputs, 'ds4_profile_config.serve_args[speculative-config]', 'must be a YAML mapping')
    # one error for it, not the collection's and the schema's both
    assert len([e for e in errors_of(inputs) if 'serve_args[speculative-config]' in e]) == 1


def test_json_list_flag_outside_the_collection_list(inputs):
    """--allowed-origins is json.loads in vLLM: a JSON string works, a YAML list would render as separate words."""
    set_profile_arg(inputs, 'allowed-origins', '["https://a.example"]')
    assert errors_of(inputs) == []
    set_profile_arg(inputs, 'allowed-origins', ['https://a.example'])
    refused(inputs, 'serve_args[allowed-origins]', 'renders as separate words')
    set_profile_arg(inputs, 'allowed-origins', 'https://a.example')
    refused(inputs, 'serve_args[allowed-origins] = "https://a.example"', 'is not JSON')


def test_kv_dtype_follows_the_version(inputs):
    """nvfp4_ds_mla is outside 0.22.0's choices: refused by the schema (besides the family rule)."""
    set_profile_arg(inputs, 'kv-cache-dtype', 'nvfp4_ds_mla')
    refused(inputs, 'serve_args[kv-cache-dtype] = "nvfp4_ds_mla"', 'must be one of the values vLLM 0.22.0 accepts')
    dspark = regen.inputs_for('dspark-c16')
    assert errors_of(dspark) == []
    set_vllm_version(dspark, '0.27.1')
    assert any('must be one of the values vLLM 0.27.1 accepts' in e and 'nvfp4_ds_mla' in e for e in errors_of(dspark))


def test_deprecated_flag_warns(inputs):
    set_vllm_version(inputs, '0.33.0')
    set_profile_arg(inputs, 'disable-cascade-attn', True)
    warnings = warnings_of(inputs)
    assert any('serve_args[disable-cascade-attn]' in w and 'deprecated' in w for w in warnings), warnings


# --------------------------------------------------------------------------- versions

def test_version_without_schema_warns_and_checks_nothing(inputs):
    set_vllm_version(inputs, '0.99.0')
    set_profile_arg(inputs, 'max-num-seqs', 'lots')
    errors, warnings, _m, _o, _n = c.validate_all(inputs)
    assert not [e for e in errors if 'max-num-seqs' in e]
    assert any('ds4_profile_config.image.vllm_version = "0.99.0": no flag schema' in w and 'tools/vllm_flag_schema.py' in w
               for w in warnings), warnings


def test_patch_release_uses_the_same_minor_schema(inputs):
    set_vllm_version(inputs, '0.27.3')
    set_profile_arg(inputs, 'max-num-seqs', 'lots')
    refused(inputs, 'serve_args[max-num-seqs]', 'takes an integer')
    errors, warnings, _m, _o, _n = c.validate_all(inputs)
    assert any('checked against vllm-0.27.1.json' in w for w in warnings), warnings


def test_missing_vllm_version_warns(inputs):
    layer = copy.deepcopy(inputs['ds4_profile_config'])
    del layer['image']['vllm_version']
    set_everywhere(inputs, 'ds4_profile_config', layer)
    warnings = warnings_of(inputs)
    assert any('ds4_profile_config.image.vllm_version is not set' in w for w in warnings), warnings


@pytest.mark.parametrize('bad', [0.33, 'latest', ['0.33.0']])
def test_bad_vllm_version_refused(inputs, bad):
    set_vllm_version(inputs, bad)
    refused(inputs, 'ds4_profile_config.image.vllm_version = %s' % json.dumps(bad), 'must be a vLLM version string')


def test_site_can_set_the_version(inputs):
    set_site(inputs, {'image': {'vllm_version': '0.33.0'}})
    errors, warnings, merged, _o, _n = c.validate_all(inputs)
    assert errors == []
    set_site(inputs, {'image': {'vllm_version': 'x'}})
    refused(inputs, 'ds4_site_overrides.image.vllm_version = "x"')


def test_schema_without_the_multi_node_flags_refused(inputs, monkeypatch):
    schema = copy.deepcopy(vs.load_schema('0.22.0'))
    del schema['flags']['headless'], schema['flags']['nnodes']
    monkeypatch.setattr(c.vllm_schema, 'schema_for', lambda version: (schema, version, None))
    refused(inputs, 'ds4_profile_config.image.vllm_version = "0.22.0"', 'has no --headless, --nnodes', 'two-node mp launch')


def test_each_profile_names_a_version_with_a_schema():
    for name in c.PROFILES:
        version = regen.inputs_for(name)['ds4_profile_config']['image'].get('vllm_version')
        schema, used, problem = vs.schema_for(version)
        assert problem is None and schema is not None, (name, version)


# --------------------------------------------------------------------------- env

@pytest.mark.parametrize('name,needle', [
    ('VLLM_USE_V1', 'removed with the V0 engine'),
    ('VLLM_ATTENTION_BACKEND', 'replaced by the --attention-backend flag'),
])
def test_removed_env_warns_with_replacement(inputs, name, needle):
    layer = copy.deepcopy(inputs['ds4_profile_config'])
    layer['env'][name] = '0'
    set_everywhere(inputs, 'ds4_profile_config', layer)
    warnings = warnings_of(inputs)
    hits = [w for w in warnings if 'ds4_profile_config.env[%s]' % name in w and needle in w]
    assert hits and 'Fix:' in hits[0], warnings


def test_removed_env_from_site_named_as_site(inputs):
    set_site(inputs, {'env': {'VLLM_ATTENTION_BACKEND': 'FLASHINFER'}})
    warnings = warnings_of(inputs)
    assert any('ds4_site_overrides.env[VLLM_ATTENTION_BACKEND]' in w and 'attention-backend' in w for w in warnings), warnings


def test_unknown_vllm_env_warns_in_vllms_words(inputs):
    layer = copy.deepcopy(inputs['ds4_profile_config'])
    layer['env']['VLLM_MADE_UP_KNOB'] = '1'
    set_everywhere(inputs, 'ds4_profile_config', layer)
    warnings = warnings_of(inputs)
    assert any('VLLM_MADE_UP_KNOB' in w and 'Unknown vLLM environment variable detected' in w for w in warnings), warnings


def test_known_env_does_not_warn(inputs):
    warnings = warnings_of(inputs)
    assert not any('VLLM_ALLOW_LONG_MAX_MODEL_LEN' in w or 'VLLM_USE_FLASHINFER_SAMPLER' in w for w in warnings), warnings


# --------------------------------------------------------------------------- the pure helpers

def test_check_serve_args_reports_tuples():
    schema = vs.load_schema('0.27.1')
    out = vs.check_serve_args(schema, {'max-num-seqs': 'lots', 'block-size': 256, 'enable-prefix-caching': True})
    assert [(f, p, v, lvl) for f, p, v, _w, _f, lvl in out] == [('max-num-seqs', '', 'lots', 'error')]


def test_schema_for_rejects_non_strings():
    assert vs.schema_for(0.33) == (None, None, 'invalid')
    assert vs.schema_for('9.9.9')[2] == 'missing'


def test_the_mapping_flags_are_json_flags_of_the_schemas_that_know_them():
    """vllm_schema.JSON_FLAGS (the flags the collection requires as YAML mappings and renders as one JSON word, read
    by the config check and the renderer from this one place) holds to vLLM's own parsers: each is a JSON flag in
    every committed schema that has it, and at least one schema has it (a flag vLLM dropped leaves the list)."""
    schemas = [vs.load_schema(v) for v in vs.available_versions()]
    assert len(schemas) >= 2
    for flag in sorted(vs.JSON_FLAGS):
        known = [s['flags'][flag] for s in schemas if flag in s['flags']]
        assert known, '%s is in no committed schema' % flag
        assert all(entry.get('json') for entry in known), flag
    assert c.JSON_FLAGS is vs.JSON_FLAGS
