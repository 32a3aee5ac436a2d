# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Command line of the vLLM simulator: vLLM's own flag schema for the image's version; the profiles' flags
parse, unknown flags and bad values are refused the way vLLM's argparse refuses them."""


import os
import shlex
import subprocess
import sys

import pytest

from conftest import VLLM  # pylint: disable=import-error
from vllm_sim import cli  # pylint: disable=import-error
from vllm_sim import schema as flag_schema  # pylint: disable=import-error
from golden_regen import regen  # pylint: disable=import-error

SEED_000 = """serve /models/DeepSeek-V4-Flash --served-model-name deepseek-v4-flash --host 0.0.0.0 --port 8000
--trust-remote-code --tensor-parallel-size 2 --pipeline-parallel-size 1 --kv-cache-dtype fp8 --block-size 256
--enable-prefix-caching --enable-chunked-prefill --max-model-len 200000 --max-num-seqs 4 --max-num-batched-tokens 16384
--gpu-memory-utilization 0.90 --disable-custom-all-reduce
--compilation-config '{"cudagraph_mode":"FULL_AND_PIECEWISE","custom_ops":["all"]}'
--speculative-config '{"method":"deepseek_mtp","num_speculative_tokens":2}' --tokenizer-mode deepseek_v4
--tool-call-parser deepseek_v4 --enable-auto-tool-choice --reasoning-parser deepseek_v4
--default-chat-template-kwargs '{"thinking":true}' --load-format safetensors --nnodes 2 --node-rank 0
--master-addr 10.0.0.1 --master-port 29501"""

SEED_001_EXTRA = """--distributed-executor-backend mp
--reasoning-config '{"reasoning_parser":"deepseek_v4","reasoning_start_str":"","reasoning_end_str":""}'
--default-chat-template-kwargs.thinking=true --default-chat-template-kwargs.reasoning_effort=high
--enable-flashinfer-autotune --headless --node-rank 1 --master-port 25000"""

SEED_002_003 = """--enable-expert-parallel --compilation-config '{"cudagraph_mode":"PIECEWISE"}'
--generation-config vllm --override-generation-config '{"temperature":0.0,"top_p":1.0}' --enforce-eager
--revision 9e165c30e2704aec5d9d593cce3eebd58bbef1cb --allowed-origins '["https://example.test"]' --disable-log-stats
--api-key k1 k2"""


def run_cli(args, env=None):
    full_env = dict(os.environ, VLLM_SIM_PYTHON=sys.executable, **(env or {}))
    return subprocess.run([VLLM] + args, capture_output=True, text=True, env=full_env, timeout=30,
                          check=False)


def test_seed_000_command_line_parses():
    _parser, args = cli.parse(shlex.split(SEED_000))
    assert args.model_tag == '/models/DeepSeek-V4-Flash'
    assert args.served_model_name == ['deepseek-v4-flash']
    assert args.tensor_parallel_size == 2 and args.max_model_len == 200000 and args.max_num_seqs == 4
    assert args.gpu_memory_utilization == 0.90
    assert args.compilation_config == {'cudagraph_mode': 'FULL_AND_PIECEWISE', 'custom_ops': ['all']}
    assert args.speculative_config == {'method': 'deepseek_mtp', 'num_speculative_tokens': 2}
    assert args.default_chat_template_kwargs == {'thinking': True}
    assert args.enable_prefix_caching is True and args.trust_remote_code is True and args.enable_auto_tool_choice
    assert (args.nnodes, args.node_rank, args.master_addr, args.master_port) == (2, 0, '10.0.0.1', 29501)
    assert args.headless is False


def test_seed_001_dotted_json_and_headless():
    _parser, args = cli.parse(shlex.split(SEED_000) + shlex.split(SEED_001_EXTRA))
    assert args.default_chat_template_kwargs == {'thinking': True, 'reasoning_effort': 'high'}
    assert args.reasoning_config['reasoning_parser'] == 'deepseek_v4'
    assert args.headless is True and args.node_rank == 1 and args.master_port == 25000
    assert args.distributed_executor_backend == 'mp' and args.enable_flashinfer_autotune is True


def test_seed_002_003_flags_and_underscores():
    _parser, args = cli.parse(['serve', 'm', '--max_num_seqs', '6', '--no-enable-prefix-caching'] + shlex.split(SEED_002_003))
    assert args.max_num_seqs == 6 and args.enable_prefix_caching is False
    assert args.enable_expert_parallel is True and args.enforce_eager is True
    assert args.override_generation_config == {'temperature': 0.0, 'top_p': 1.0}
    assert args.allowed_origins == ['https://example.test'] and args.api_key == ['k1', 'k2']
    assert args.generation_config == 'vllm' and args.disable_log_stats is True


def test_non_default_args_redacts_api_key():
    parser, args = cli.parse(['serve', 'm', '--api-key', 'secret-key', '--max-num-seqs', '3'])
    shown = cli.non_default_args(parser, args)
    assert shown['api_key'] == '***' and shown['max_num_seqs'] == 3
    assert 'secret-key' not in repr(shown)


def test_unknown_flag_rejected_like_argparse():
    res = run_cli(['serve', 'm', '--max-num-seqs', '2', '--bogus-flag', '7'])
    assert res.returncode == 2
    assert res.stderr.startswith('usage: vllm serve [model_tag] [options]')
    assert res.stderr.rstrip().endswith('vllm serve: error: unrecognized arguments: --bogus-flag 7')
    assert 'Application startup complete.' not in res.stdout


def test_stray_value_rejected():
    # A boolean rendered as `--enable-prefix-caching false` leaves `false` unrecognized, as in vLLM.
    res = run_cli(['serve', 'm', '--enable-prefix-caching', 'false'])
    assert res.returncode == 2
    assert 'vllm serve: error: unrecognized arguments: false' in res.stderr


def test_invalid_json_rejected():
    res = run_cli(['serve', 'm', '--compilation-config', "{'cudagraph_mode':PIECEWISE}"])
    assert res.returncode == 2
    assert 'usage: vllm serve [model_tag] [options]' in res.stderr
    assert "vllm serve: error: argument --compilation-config/-cc: invalid loads value: \"{'cudagraph_mode':PIECEWISE}\"" in res.stderr


def test_version_and_entrypoint_name(tmp_path):
    res = run_cli(['--version'], env={'VLLM_SIM_VERSION': '0.33.0'})
    assert res.returncode == 0 and res.stdout.strip() == '0.33.0'
    assert 'stand-in for vLLM' in res.stderr
    link = tmp_path / 'dsv4-vllm-entrypoint'
    link.symlink_to(VLLM)
    res = subprocess.run([str(link), '--version'], capture_output=True, text=True, timeout=30, check=False,
                         env=dict(os.environ, VLLM_SIM_PYTHON=sys.executable))
    assert res.returncode == 0 and res.stdout.strip() == cli.DEFAULT_VERSION


# --------------------------------------------------------------------------- vLLM's flag schema

def test_parser_is_the_schema_of_the_image_version():
    for version, used in (('0.27.1', '0.27.1'), ('0.33.0', '0.33.0'), ('0.22.0', '0.22.0'), ('0.21.1', '0.21.0')):
        parser = cli.build_parser(version)
        assert parser.sim_schema_version == used and parser.sim_schema_problem is None
        assert set(parser.sim_schema['flags']) == set(flag_schema.module().load_schema(used)['flags'])
    assert cli.build_parser('0.99.0').sim_schema is None   # no schema: the built-in list, said on stderr at serve


@pytest.mark.parametrize('argv,message', [
    (['--max-num-seqs', 'lots'], "vllm serve: error: argument --max-num-seqs: invalid int value: 'lots'"),
    (['--gpu-memory-utilization', 'most'], "vllm serve: error: argument --gpu-memory-utilization: invalid float value: 'most'"),
    (['--max-model-len', 'lots'], "vllm serve: error: argument --max-model-len: invalid human_readable_int_or_auto value: 'lots'"),
    (['--kv-cache-dtype', 'fp7'], "vllm serve: error: argument --kv-cache-dtype: invalid choice: 'fp7' (choose from "),
    (['--prefix-caching'], 'vllm serve: error: unrecognized arguments: --prefix-caching'),   # seed 002's spelling
    (['--max-num'], 'vllm serve: error: unrecognized arguments: --max-num'),                 # no abbreviations
])
def test_schema_refusals_in_vllm_wording(argv, message):
    res = run_cli(['serve', 'm'] + argv)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith('usage: vllm serve [model_tag] [options]')
    assert message in res.stderr, res.stderr
    assert res.stdout == ''


def test_flag_set_follows_the_declared_version():
    # nvfp4_ds_mla (the DSpark KV cache) is a 0.33.0 choice; 0.27.1's parser refuses it.
    argv = ['serve', 'm', '--kv-cache-dtype', 'nvfp4_ds_mla']
    assert run_cli(argv + ['--help'], env={'VLLM_SIM_VERSION': '0.33.0'}).returncode == 0
    res = run_cli(argv, env={'VLLM_SIM_VERSION': '0.27.1'})
    assert res.returncode == 2 and "invalid choice: 'nvfp4_ds_mla'" in res.stderr
    # --max-num-partial-prefills exists in 0.22.0 and no longer in 0.27.1
    assert cli.parse(['serve', 'm', '--max-num-partial-prefills', '2'], '0.22.0')[1].max_num_partial_prefills == 2
    res = run_cli(['serve', 'm', '--max-num-partial-prefills', '2'], env={'VLLM_SIM_VERSION': '0.27.1'})
    assert 'unrecognized arguments: --max-num-partial-prefills 2' in res.stderr


def test_negative_switch_spellings_from_the_schema():
    assert cli.parse(['serve', 'm', '--no-enable-prefix-caching'], '0.27.1')[1].enable_prefix_caching is False
    assert cli.parse(['serve', 'm', '--disable-flashinfer-autotune'], '0.33.0')[1].enable_flashinfer_autotune is False
    assert cli.parse(['serve', 'm', '-tp', '2', '--max-model-len', '128k'], '0.27.1')[1].max_model_len == 128000


def golden_argv(path):
    """The `exec` words of a rendered launch script (tests/golden), without the entrypoint's `serve`."""
    text = open(path).read()
    words = shlex.split(text.split('\nexec ', 1)[1].replace('\\\n', ' '))
    return words[words.index('serve'):]


GOLDEN = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), 'golden')


# tests/golden/<profile>/, and tests/golden/_variants/<variant>/ (a profile plus a collection setting: regen.VARIANTS)
RENDERED = sorted(d for d in os.listdir(GOLDEN) if os.path.isdir(os.path.join(GOLDEN, d)) and not d.startswith('_'))
VARIANTS_DIR = os.path.join(GOLDEN, '_variants')
RENDERED += sorted('_variants/' + d for d in (os.listdir(VARIANTS_DIR) if os.path.isdir(VARIANTS_DIR) else ())
                   if os.path.isdir(os.path.join(VARIANTS_DIR, d)))


@pytest.mark.parametrize('profile', RENDERED)
def test_every_profile_argv_parses_with_its_declared_version(profile):
    """Each profile's rendered argv (both ranks) parses with the schema of the vLLM its image declares."""
    base = profile
    if profile.startswith('_variants/'):
        base = getattr(regen, 'VARIANTS', {})[profile.split('/', 1)[1]][0]
    version = regen.inputs_for(base)['ds4_profile_config']['image']['vllm_version']
    for host, script in (('spark1', 'launch-head.sh'), ('spark2', 'launch-worker.sh')):
        _parser, args = cli.parse(golden_argv(os.path.join(GOLDEN, profile, host, script)), version)
        assert args.subparser == 'serve' and args.nnodes == 2 and args.node_rank == (0 if host == 'spark1' else 1)
