# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Merge and validation rules of ds4_config: every refusal shows its message."""

import copy
import json
import os

import pytest

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config as c
from golden_regen import regen  # pylint: disable=import-error

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))


@pytest.fixture
def inputs():
    return copy.deepcopy(regen.inputs_for('balanced'))


def refused(inputs, *needles):
    """Assert compute_effective fails and one error contains every needle; return that error."""
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


def profile_args(inputs):
    return inputs['ds4_profile_config']['serve_args']


def site(inputs, layer):
    set_everywhere(inputs, 'ds4_site_overrides', layer)


def test_all_seven_profiles_valid():
    for name in c.PROFILES:
        inp = regen.inputs_for(name)
        errors, warnings, _m, _o, _n = c.validate_all(inp)
        assert errors == [], name
        assert inp['ds4_profile'] == name


@pytest.mark.parametrize('name', ['fastest', None])
def test_unknown_recipe_refused_with_the_list(name):
    """No recipe of that name ships (and no ds4_profile_config of the user's own): refused, every recipe listed."""
    inputs = regen.inventory_inputs('balanced')
    set_everywhere(inputs, 'ds4_profile', name)
    msg = refused(inputs, 'ds4_profile = %s' % json.dumps(name), 'unknown recipe')
    assert 'use one of: %s ' % ', '.join(c.PROFILES) in msg
    assert 'upstream-0731-dspark' in msg and 'balanced' in msg


@pytest.mark.parametrize('hosts', [['spark1'], ['spark1', 'spark2', 'spark3']])
def test_tp_times_pp_must_equal_gpus(inputs, hosts):
    if 'spark3' in hosts:
        inputs['hostvars']['spark3'] = dict(inputs['hostvars']['spark2'], ds4_node_rank=2, ds4_fabric_ip='192.168.100.12')
    inputs['spark_hosts'] = hosts
    refused(inputs, "groups['spark']", 'tensor-parallel-size 2 x pipeline-parallel-size 1 = 2 GPUs',
            'has %d host(s)' % len(hosts))


@pytest.mark.parametrize('flag', ['headless', '--node-rank', 'nnodes', 'master_addr', '--master-port'])
def test_renderer_owned_flags_refused(inputs, flag):
    profile_args(inputs)[flag] = True if flag == 'headless' else 1
    set_everywhere(inputs, 'ds4_profile_config', inputs['ds4_profile_config'])
    refused(inputs, 'serve_args[%s]' % flag, 'owned by the renderer')


def test_renderer_owned_flag_refused_in_site_too(inputs):
    site(inputs, {'serve_args': {'headless': True}})
    msg = refused(inputs, 'ds4_site_overrides.serve_args[headless]', 'owned by the renderer')
    assert 'seed 000 failure #5' in msg


def test_flag_set_twice_in_one_layer(inputs):
    profile_args(inputs)['max_num_seqs'] = 4
    set_everywhere(inputs, 'ds4_profile_config', inputs['ds4_profile_config'])
    refused(inputs, 'serve_args[max_num_seqs]', 'set twice in profile')


def test_flag_set_twice_across_layers_base(inputs):
    profile_args(inputs)['tensor_parallel_size'] = 2
    set_everywhere(inputs, 'ds4_profile_config', inputs['ds4_profile_config'])
    refused(inputs, 'ds4_profile_config.serve_args[tensor_parallel_size]', 'set by the collection base layer', 'set twice across layers')


def test_site_cannot_touch_base_flag_env_or_container(inputs):
    site(inputs, {'serve_args': {'--distributed-executor-backend': 'ray'}, 'env': {'HF_HUB_OFFLINE': '0'},
                  'container': {'ipc': 'private'}})
    refused(inputs, 'ds4_site_overrides.serve_args[--distributed-executor-backend]', 'base layer')
    refused(inputs, 'ds4_site_overrides.env[HF_HUB_OFFLINE]', 'base layer')
    refused(inputs, 'ds4_site_overrides.container.ipc', 'base layer')


def test_site_override_recorded_and_rendered(inputs):
    site(inputs, {'serve_args': {'max-num-seqs': 6, 'enable-chunked-prefill': None}, 'api': {'port': 8100}})
    eff = c.compute_effective(inputs, 'spark1')
    assert {'key': 'serve_args.max-num-seqs', 'profile': 8, 'site': 6} in eff['overrides']
    assert {'key': 'serve_args.enable-chunked-prefill', 'profile': True, 'site': None} in eff['overrides']
    assert {'key': 'api.port', 'profile': 8000, 'site': 8100} in eff['overrides']
    assert eff['argv'][eff['argv'].index('--max-num-seqs') + 1] == '6'
    assert '--enable-chunked-prefill' not in eff['argv']
    assert '#   serve_args.max-num-seqs: 8 -> 6' in eff['launch_script']


def test_null_only_in_site_layer(inputs):
    profile_args(inputs)['block-size'] = None
    set_everywhere(inputs, 'ds4_profile_config', inputs['ds4_profile_config'])
    refused(inputs, 'serve_args[block-size]', 'null only removes a profile flag')


def test_false_flag_refused(inputs):
    profile_args(inputs)['enforce-eager'] = False
    set_everywhere(inputs, 'ds4_profile_config', inputs['ds4_profile_config'])
    refused(inputs, 'serve_args[enforce-eager] = false', 'present (true) or absent')


@pytest.mark.parametrize('flag', ['compilation-config', 'speculative_config', '--default-chat-template-kwargs'])
def test_json_flag_must_be_mapping(inputs, flag):
    for k in list(profile_args(inputs)):
        if c.normalize_flag(k) == c.normalize_flag(flag):
            del profile_args(inputs)[k]
    profile_args(inputs)[flag] = '{"cudagraph_mode":"FULL_AND_PIECEWISE"}'
    set_everywhere(inputs, 'ds4_profile_config', inputs['ds4_profile_config'])
    msg = refused(inputs, 'serve_args[%s]' % c.normalize_flag(flag), 'must be a YAML mapping, not a string')
    assert 'seed 000 failure #6' in msg


def test_worker_multiproc_fork_refused(inputs):
    site(inputs, {'env': {'VLLM_WORKER_MULTIPROC_METHOD': 'fork'}})
    msg = refused(inputs, 'env[VLLM_WORKER_MULTIPROC_METHOD] = "fork"', 'ShmRingBuffer')
    assert 'delete VLLM_WORKER_MULTIPROC_METHOD' in msg


def test_worker_multiproc_spawn_allowed(inputs):
    site(inputs, {'env': {'VLLM_WORKER_MULTIPROC_METHOD': 'spawn'}})
    eff = c.compute_effective(inputs, 'spark1')
    assert eff['env']['VLLM_WORKER_MULTIPROC_METHOD'] == 'spawn'


def test_custom_ops_all_needs_compile_cache_volume(inputs):
    inputs['ds4_profile_config']['container'].pop('cache_volumes')
    set_everywhere(inputs, 'ds4_profile_config', inputs['ds4_profile_config'])
    msg = refused(inputs, 'custom_ops = ["all"]', 'persistent compile-cache volume', 'seed 002')
    assert '/root/.cache/vllm' in msg


def test_custom_ops_all_with_cache_volume_elsewhere_refused(inputs):
    inputs['ds4_profile_config']['container']['cache_volumes'] = {'/var/cache/x': '/root/.cache/flashinfer'}
    set_everywhere(inputs, 'ds4_profile_config', inputs['ds4_profile_config'])
    refused(inputs, 'custom_ops', 'persistent compile-cache volume')


def test_custom_ops_all_with_cache_root_env_on_volume_ok(inputs):
    cfg = inputs['ds4_profile_config']
    cfg['container']['cache_volumes'] = {'/var/cache/ds4': '/cache'}
    cfg['env']['VLLM_CACHE_ROOT'] = '/cache/vllm'
    set_everywhere(inputs, 'ds4_profile_config', cfg)
    c.compute_effective(inputs, 'spark1')


def test_compile_cache_plan_maps_the_compile_cache_to_its_host_volume(inputs):
    """Where the custom_ops guard looks on the node: $VLLM_CACHE_ROOT/torch_compile_cache through cache_volumes."""
    cfg = inputs['ds4_profile_config']
    cfg['container']['cache_volumes'] = {'/var/cache/ds4': '/cache'}
    cfg['env']['VLLM_CACHE_ROOT'] = '/cache/vllm'
    set_everywhere(inputs, 'ds4_profile_config', cfg)
    plan = c.compute_effective(inputs, 'spark1')['compile_cache']
    assert plan['container_dir'] == '/cache/vllm/torch_compile_cache'
    assert plan['host_dir'] == '/var/cache/ds4/vllm/torch_compile_cache'
    assert plan['custom_ops_all'] is True and len(plan['launch_digest']) == 16


def test_compile_cache_plan_cache_dir_eager_and_digest(inputs):
    merged = {'serve_args': {'compilation-config': {'cache_dir': '/cc', 'custom_ops': ['none']}}, 'env': {},
              'container': {'cache_volumes': {'/h/cc': '/cc'}}}
    plan = c.compile_cache_plan(merged)
    assert plan == dict(plan, container_dir='/cc', host_dir='/h/cc', custom_ops_all=False)
    other = c.compile_cache_plan(dict(merged, serve_args=dict(merged['serve_args'], **{'max-num-seqs': 4})))
    assert other['launch_digest'] != plan['launch_digest']
    eager = c.compile_cache_plan(dict(merged, serve_args=dict(merged['serve_args'], **{'enforce-eager': True})))
    assert eager['container_dir'] is None and eager['host_dir'] is None


def test_recipe_without_tool_parser_says_so_and_validate_forces_required():
    """dspark-c16 sets no tool-call parser (seed 003 lists only core flags): one warning naming the recipe."""
    inp = regen.inventory_inputs('dspark-c16')  # the shipped recipe, chosen by ds4_profile
    errors, warnings, merged, _o, _n = c.validate_all(inp)
    assert errors == []
    notes = [w for w in warnings if 'tool-call-parser' in w]
    assert len(notes) == 1
    assert notes[0].startswith('recipe dspark-c16 sets no --tool-call-parser and --enable-auto-tool-choice '
                               '(seed 003 lists only core flags): clients that send tools with tool_choice "auto"')
    assert 'validate.yml checks the tool call with tool_choice "required"' in notes[0]
    tc = c.tool_calls(merged)
    assert tc['tool_choice'] == 'required' and tc['parser'] is None and tc['note'] == notes[0]


def test_recipe_with_tool_parser_checks_auto_and_warns_nothing(inputs):
    errors, warnings, merged, _o, _n = c.validate_all(inputs)
    assert errors == [] and not [w for w in warnings if 'tool-call-parser' in w]
    assert c.tool_calls(merged) == {'parser': 'deepseek_v4', 'auto': True, 'tool_choice': 'auto', 'note': None}


def test_gpu_util_cap_96(inputs):
    for hv in inputs['hostvars'].values():
        hv['ds4_node_memory_gib'] = 96
    msg = refused(inputs, '[host spark1]', 'gpu-memory-utilization] = 0.9', 'safe cap 0.78 for a 96 GiB node')
    assert 'ds4_ack_unsafe_gpu_memory_utilization' in msg
    refused(inputs, '[host spark2]', 'safe cap 0.78')


def test_gpu_util_cap_128(inputs):
    site(inputs, {'serve_args': {'gpu-memory-utilization': 0.91}})
    refused(inputs, 'gpu-memory-utilization] = 0.91', 'safe cap 0.9 for a 128 GiB node')


def test_gpu_util_cap_ack_turns_into_warning(inputs):
    for hv in inputs['hostvars'].values():
        hv['ds4_node_memory_gib'] = 96
        hv['ds4_ack_unsafe_gpu_memory_utilization'] = True
    eff = c.compute_effective(inputs, 'spark1')
    assert any('allowed by ds4_ack_unsafe_gpu_memory_utilization' in w for w in eff['warnings'])
    assert eff['gpu_memory_utilization_cap'] == 0.78


def test_enforce_eager_warns(inputs):
    site(inputs, {'serve_args': {'enforce-eager': True}})
    eff = c.compute_effective(inputs, 'spark1')
    assert any('44 -> ~25 tok/s' in w for w in eff['warnings'])
    assert '--enforce-eager' in eff['argv']


def test_mtp3_warns(inputs):
    site(inputs, {'serve_args': {'speculative-config': {'method': 'deepseek_mtp', 'num_speculative_tokens': 3}}})
    eff = c.compute_effective(inputs, 'spark1')
    assert any('MTP=3' in w and 'slower' in w for w in eff['warnings'])


def test_mtp2_does_not_warn(inputs):
    eff = c.compute_effective(inputs, 'spark1')
    assert not any('MTP=3' in w for w in eff['warnings'])
    assert not any('enforce-eager' in w for w in eff['warnings'])


def test_nvfp4_needs_dspark_image(inputs):
    site(inputs, {'serve_args': {'kv-cache-dtype': 'nvfp4_ds_mla'}})
    # the image family and the model each refuse it, naming both sides and where the dtype exists
    refused(inputs, 'serve_args[kv-cache-dtype] = "nvfp4_ds_mla"', 'image family eugr-nightly', 'has no KV-cache dtype nvfp4_ds_mla',
            'an image family that has nvfp4_ds_mla (dspark, vllm-openai)')
    refused(inputs, 'serve_args[kv-cache-dtype] = "nvfp4_ds_mla"', 'model deepseek-v4-flash (deepseek-ai/DeepSeek-V4-Flash)',
            'it fits auto, fp8')


def test_nvfp4_with_dspark_image_ok():
    inp = regen.inputs_for('dspark-nvfp4-1m')
    eff = c.compute_effective(inp, 'spark1')
    assert eff['serve_args']['kv-cache-dtype'] == 'nvfp4_ds_mla'
    assert eff['api'] == {'host': '127.0.0.1', 'port': 8888, 'public_port': 8888, 'exposure': 'loopback',
                          'allowed_networks': [], 'proxied': False, 'engine_url': 'http://127.0.0.1:8888'}


def test_master_port_equal_api_port(inputs):
    site(inputs, {'master_port': 8000})
    refused(inputs, 'master_port = 8000', 'equals api.port')


def test_max_model_len_above_image(inputs):
    site(inputs, {'serve_args': {'max-model-len': 1048576}})
    refused(inputs, 'serve_args[max-model-len] = 1048576', 'above the 200000 tokens image')


@pytest.mark.parametrize('name', ['VLLM_HOST_IP', 'NCCL_SOCKET_IFNAME', 'GLOO_SOCKET_IFNAME', 'TP_SOCKET_IFNAME',
                                  'NCCL_IB_HCA', 'NCCL_IB_GID_INDEX', 'MASTER_ADDR', 'NODE_RANK'])
def test_per_node_env_refused_in_profile(inputs, name):
    inputs['ds4_profile_config']['env'][name] = 'x'
    set_everywhere(inputs, 'ds4_profile_config', inputs['ds4_profile_config'])
    refused(inputs, 'env[%s]' % name, 'differs per node', 'host_vars')


def test_secrets_refused(inputs):
    site(inputs, {'env': {'HF_TOKEN': 'hf_abc'}, 'serve_args': {'api-key': 'sk-1'}})
    m1 = refused(inputs, 'env[HF_TOKEN]', 'looks like a secret')
    m2 = refused(inputs, 'serve_args[api-key]', 'is a secret')
    assert 'hf_abc' not in m1 and 'sk-1' not in m2


def test_api_flags_belong_to_api_section(inputs):
    profile_args(inputs)['port'] = 9000
    set_everywhere(inputs, 'ds4_profile_config', inputs['ds4_profile_config'])
    refused(inputs, 'serve_args[port]', 'api.port')


def test_unknown_layer_key(inputs):
    site(inputs, {'serve_arg': {'max-num-seqs': 2}})
    refused(inputs, 'ds4_site_overrides.serve_arg', 'unknown key')


def test_revision_must_be_sha(inputs):
    site(inputs, {'model': {'revision': 'main'}})
    refused(inputs, 'model.revision = "main"', '40-hex')
    site(inputs, {'model': {'revision': 'a' * 40}})
    eff = c.compute_effective(inputs, 'spark1')
    assert not any('revision is not pinned' in w for w in eff['warnings'])


def test_profile_must_match_on_all_hosts(inputs):
    inputs['hostvars']['spark2']['ds4_profile'] = 'latency'
    refused(inputs, 'ds4_profile', 'differs between hosts')


# ------------------------------------------------------------------ inventory


@pytest.mark.parametrize('var,value,needle', [
    ('ds4_fabric_ip', None, 'required: an IPv4 address'),
    ('ds4_fabric_ip', '192.168.100', 'required: an IPv4 address'),
    ('ds4_fabric_ip', '192.168.100.11/24', 'required: an IPv4 address'),
    ('ds4_fabric_ip', '127.0.0.1', 'not loopback'),
    ('ds4_fabric_prefix', 33, 'integer 1-32'),
    ('ds4_fabric_prefix', '24', 'integer 1-32'),
    ('ds4_fabric_ifname', 'enp1s0f1np1-too-long', 'at most 15 characters'),
    ('ds4_fabric_ifname', 'en p1', 'at most 15 characters'),
    ('ds4_rdma_hcas', [], 'non-empty list'),
    ('ds4_rdma_hcas', 'rocep1s0f1,roceP2p1s0f1', 'non-empty list'),
    ('ds4_rdma_hcas', ['rocep1s0f1', 'rocep1s0f1'], 'twice'),
    ('ds4_node_rank', None, 'required: 0 for the head'),
    ('ds4_node_rank', True, 'must be an integer'),
    ('ds4_nccl_ib_gid_index', -1, 'non-negative integer'),
    ('ds4_node_memory_gib', 'lots', 'integer GiB'),
    ('ds4_ack_unsafe_gpu_memory_utilization', 'yes', 'must be a boolean'),
])
def test_bad_host_var(inputs, var, value, needle):
    inputs['hostvars']['spark2'][var] = value
    with pytest.raises(c.Ds4ConfigError) as exc:
        c.compute_effective(inputs, 'spark1')
    hits = [e for e in exc.value.errors if e.startswith('[host spark2] %s = ' % var) and needle in e]
    assert hits, exc.value.errors


def test_missing_fabric_ip_names_host_and_fix(inputs):
    del inputs['hostvars']['spark2']['ds4_fabric_ip']
    msg = refused(inputs, '[host spark2] ds4_fabric_ip = null')
    assert 'host_vars/spark2.yml' in msg


def test_two_heads(inputs):
    inputs['hostvars']['spark2']['ds4_node_rank'] = 0
    refused(inputs, 'ds4_node_rank = 0', 'spark1, spark2', 'own rank')


def test_no_head(inputs):
    inputs['hostvars']['spark1']['ds4_node_rank'] = 2
    refused(inputs, 'no host has rank 0')


def test_same_fabric_ip(inputs):
    inputs['hostvars']['spark2']['ds4_fabric_ip'] = '192.168.100.10'
    refused(inputs, 'ds4_fabric_ip = "192.168.100.10"', 'distinct')


def test_fabric_ips_in_different_subnets(inputs):
    inputs['hostvars']['spark2']['ds4_fabric_ip'] = '192.168.101.11'
    refused(inputs, 'ds4_fabric_ip', 'not in one subnet')


def test_gid_index_rendered_per_node(inputs):
    inputs['hostvars']['spark2']['ds4_nccl_ib_gid_index'] = 3
    assert 'NCCL_IB_GID_INDEX' not in c.compute_effective(inputs, 'spark1')['env']
    eff = c.compute_effective(inputs, 'spark2')
    assert eff['env']['NCCL_IB_GID_INDEX'] == '3'


def test_all_errors_reported_at_once(inputs):
    del inputs['hostvars']['spark1']['ds4_fabric_ip']
    inputs['hostvars']['spark2']['ds4_fabric_prefix'] = 64
    site(inputs, {'master_port': 8000, 'env': {'VLLM_WORKER_MULTIPROC_METHOD': 'fork'}})
    with pytest.raises(c.Ds4ConfigError) as exc:
        c.compute_effective(inputs, 'spark1')
    text = '\n'.join(exc.value.errors)
    for needle in ('[host spark1] ds4_fabric_ip', '[host spark2] ds4_fabric_prefix', 'master_port = 8000', 'VLLM_WORKER_MULTIPROC_METHOD'):
        assert needle in text


def test_effective_shape(inputs):
    eff = c.compute_effective(inputs, 'spark2')
    for key in ('profile', 'node_rank', 'role', 'nnodes', 'master_addr', 'master_port', 'api', 'image', 'model', 'container',
                'env', 'argv', 'script_name', 'unit_name', 'launch_script', 'overrides', 'warnings'):
        assert key in eff
    assert (eff['profile'], eff['role'], eff['nnodes'], eff['master_addr'], eff['master_port']) == \
        ('balanced', 'worker', 2, '192.168.100.10', 29501)
    assert list(eff['env'])[-5:] == ['VLLM_HOST_IP', 'NCCL_SOCKET_IFNAME', 'GLOO_SOCKET_IFNAME', 'TP_SOCKET_IFNAME', 'NCCL_IB_HCA']
    assert eff['container']['ulimits'] == {'memlock': -1, 'stack': 67108864}
    assert eff['volumes'] == ['/srv/dgxspark-ds4/models/DeepSeek-V4-Flash:/models/DeepSeek-V4-Flash',
                              '/var/cache/dgxspark-ds4/flashinfer:/root/.cache/flashinfer',
                              '/var/cache/dgxspark-ds4/torchinductor:/root/.cache/torchinductor',
                              '/var/cache/dgxspark-ds4/triton:/root/.triton',
                              '/var/cache/dgxspark-ds4/vllm:/root/.cache/vllm']
    assert eff['host_dirs'] == ['/srv/dgxspark-ds4/models/DeepSeek-V4-Flash', '/var/cache/dgxspark-ds4/flashinfer',
                                '/var/cache/dgxspark-ds4/torchinductor', '/var/cache/dgxspark-ds4/triton',
                                '/var/cache/dgxspark-ds4/vllm']


def test_extra_volumes_listed():
    eff = c.compute_effective(regen.inputs_for('long-context-1m'), 'spark2')
    # The model by path from the shared model directory; HF_HOME, VLLM_CACHE_ROOT and FlashInfer on writable cache volumes.
    assert eff['volumes'] == ['/srv/dgxspark-ds4/models/DeepSeek-V4-Flash:/models/DeepSeek-V4-Flash',
                              '/var/cache/dgxspark-ds4/flashinfer:/cache/flashinfer/.cache/flashinfer',
                              '/var/cache/dgxspark-ds4/huggingface:/cache/huggingface',
                              '/var/cache/dgxspark-ds4/torchinductor:/cache/torchinductor',
                              '/var/cache/dgxspark-ds4/triton:/cache/triton',
                              '/var/cache/dgxspark-ds4/vllm:/cache/vllm',
                              '/etc/passwd:/etc/passwd:ro', '/etc/group:/etc/group:ro']


def test_normalize_flag():
    assert c.normalize_flag('--max_num_seqs') == 'max-num-seqs'
    assert c.normalize_flag('enable-expert-parallel') == 'enable-expert-parallel'


def test_util_cap():
    assert c.util_cap(96) == 0.78
    assert c.util_cap(128) == 0.90
    assert c.util_cap(112) == 0.78


# API exposure: vLLM binds loopback; ds4_api_allowed_networks puts a proxy in front.
def test_api_host_beyond_loopback_refused(inputs):
    site(inputs, {'api': {'host': '0.0.0.0'}})
    err = refused(inputs, 'api.host', '0.0.0.0', 'ds4_api_allowed_networks')
    assert '/invocations' in err


def test_default_exposure_is_loopback(inputs):
    eff = c.compute_effective(inputs, 'spark1')
    assert eff['api']['exposure'] == 'loopback' and not eff['api']['proxied']
    assert eff['argv'][eff['argv'].index('--host') + 1] == '127.0.0.1'
    assert eff['argv'][eff['argv'].index('--port') + 1] == '8000'


def test_networks_move_vllm_behind_the_proxy(inputs):
    set_everywhere(inputs, 'ds4_api_allowed_networks', ['192.168.1.7/24', '10.0.0.5/32'])
    eff = c.compute_effective(inputs, 'spark1')
    assert eff['api'] == {'host': '127.0.0.1', 'port': 8001, 'public_port': 8000, 'exposure': 'networks',
                          'allowed_networks': ['192.168.1.0/24', '10.0.0.5/32'], 'proxied': True,
                          'engine_url': 'http://127.0.0.1:8001'}
    assert eff['argv'][eff['argv'].index('--port') + 1] == '8001'
    assert eff['launch']['vllm_port'] == 8001 and eff['launch']['public_port'] == 8000
    assert 'behind the API proxy on port 8000' in eff['launch_script']
    set_everywhere(inputs, 'ds4_api_upstream_port', 18000)
    assert c.compute_effective(inputs, 'spark1')['api']['port'] == 18000


def test_exposure_inputs_refused_with_fix(inputs):
    set_everywhere(inputs, 'ds4_api_allowed_networks', ['lan'])
    refused(inputs, 'ds4_api_allowed_networks', "'lan'")
    set_everywhere(inputs, 'ds4_api_allowed_networks', ['10.0.0.0/8'])
    set_everywhere(inputs, 'ds4_api_upstream_port', 29501)
    refused(inputs, 'ds4_api_upstream_port', 'master_port')
    set_everywhere(inputs, 'ds4_api_upstream_port', 8000)
    refused(inputs, 'ds4_api_upstream_port', 'equals api.port')


def test_exposure_must_match_on_both_nodes(inputs):
    inputs['hostvars']['spark2']['ds4_api_allowed_networks'] = ['10.0.0.0/8']
    refused(inputs, 'ds4_api_allowed_networks', 'differs between hosts')


# --------------------------------------------------------------------------- persistent caches (a restart must not recompile)

def test_custom_ops_all_cache_root_on_the_read_only_model_mount_refused(inputs):
    """The model is mounted read-only: a VLLM_CACHE_ROOT under it is no persistent compile cache."""
    model_dir = c.compute_effective(inputs, 'spark1')['model']['container_dir']
    cfg = inputs['ds4_profile_config']
    cfg['container'].pop('cache_volumes')
    cfg['env']['VLLM_CACHE_ROOT'] = model_dir + '/.cache/vllm'
    set_everywhere(inputs, 'ds4_profile_config', cfg)
    msg = refused(inputs, 'custom_ops = ["all"]', 'persistent compile-cache volume')
    assert model_dir + '/.cache/vllm' in msg


@pytest.mark.parametrize('name', c.PROFILES)
def test_every_profile_has_persistent_writable_caches(name):
    """vLLM, Triton, TorchInductor and FlashInfer caches each lie on a host volume under /var/cache/dgxspark-ds4/."""
    eff = c.compute_effective(regen.inputs_for(name), 'spark1')
    vols = eff['container']['cache_volumes']
    model_cdir = eff['model']['container_dir']
    for var, _what, path in c.cache_paths(eff['env']):
        assert var == 'FLASHINFER_WORKSPACE_BASE' or eff['env'].get(var), (name, var)
        hits = [h for h, cdir in vols.items() if path == cdir or path.startswith(cdir.rstrip('/') + '/')]
        assert hits, (name, var, path, vols)
        assert all(h.startswith('/var/cache/dgxspark-ds4/') for h in hits), (name, hits)
        assert not (path == model_cdir or path.startswith(model_cdir + '/')), (name, var)
        assert ('%s:%s' % (hits[0], vols[hits[0]])) in eff['volumes']
    assert c.cache_gaps(eff) == []


def test_cache_off_its_volume_warns(inputs):
    cfg = inputs['ds4_profile_config']
    del cfg['container']['cache_volumes']['/var/cache/dgxspark-ds4/torchinductor']
    set_everywhere(inputs, 'ds4_profile_config', cfg)
    errors, warnings, _m, _o, _n = c.validate_all(inputs)
    assert errors == []
    hits = [w for w in warnings if 'TORCHINDUCTOR_CACHE_DIR' in w and 'persistent cache volume' in w]
    assert hits and 'Fix:' in hits[0] and '/root/.cache/torchinductor' in hits[0]


# --------------------------------------------------------------------------- conservative runs with the eugr image env

def test_conservative_runs_with_the_eugr_image_env_of_seed_000():
    """conservative runs the eugr nightly, so it carries seed 000's env for that image like latency/balanced."""
    cons = c.compute_effective(regen.inputs_for('conservative'), 'spark1')
    lat = c.compute_effective(regen.inputs_for('latency'), 'spark1')
    assert cons['image']['ref'] == lat['image']['ref']
    want = {
        'TORCH_CUDA_ARCH_LIST': '12.1a', 'VLLM_ALLOW_LONG_MAX_MODEL_LEN': '1', 'VLLM_TRITON_MLA_SPARSE': '1',
        'VLLM_USE_FLASHINFER_SAMPLER': '1', 'FLASHINFER_DISABLE_VERSION_CHECK': '1', 'TILELANG_CLEANUP_TEMP_FILES': '1',
        'DG_JIT_USE_NVRTC': '0', 'DG_JIT_NVCC_COMPILER': '/usr/local/cuda/bin/nvcc', 'OMP_NUM_THREADS': '8',
        'NCCL_IB_DISABLE': '0', 'NCCL_IGNORE_CPU_AFFINITY': '1',
    }
    for k, v in want.items():
        assert cons['env'].get(k) == v, k
        assert lat['env'].get(k) == v, k
    assert 'VLLM_USE_V1' not in cons['env']
    for k in want:
        assert 'export %s=' % k in cons['launch_script']
    with open(os.path.join(REPO, 'roles', 'config', 'files', 'recipes', 'conservative.yml')) as f:
        env_block = f.read().split('\nserve_args:', 1)[0].rsplit('# seed 002 also sets', 1)[1]
    assert "seed 000's container env" in env_block  # the source is cited, as the other eugr profiles do


@pytest.mark.parametrize('host_dir', ['/opt', '/srv', '/var/lib', '/home', '/'])
def test_a_system_directory_as_the_model_directory_is_refused(inputs, host_dir):
    """Issue 46: model_cache adopts what it finds at host_dir (renamed into <host_dir>.revs/) and may prune beside it;
    /opt or /srv would be adopted whole."""
    site(inputs, {'model': {'host_dir': host_dir}})
    refused(inputs, 'ds4_profile_config.model.host_dir', 'is a system directory')


def test_a_directory_of_its_own_is_the_model_directory(inputs):
    site(inputs, {'model': {'host_dir': '/srv/models/DeepSeek-V4-Flash'}})
    assert c.compute_effective(inputs, 'spark1')['model']['host_dir'] == '/srv/models/DeepSeek-V4-Flash'
