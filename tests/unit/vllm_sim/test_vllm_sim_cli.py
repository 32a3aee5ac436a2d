# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Command line of the vLLM simulator: the profiles' flags parse, unknown flags are rejected like argparse."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
import shlex
import subprocess
import sys

from conftest import VLLM  # pylint: disable=import-error
from vllm_sim import cli  # pylint: disable=import-error

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

SEED_002_003 = """--prefix-caching --enable-expert-parallel --compilation-config '{"cudagraph_mode":"PIECEWISE"}'
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
    assert args.prefix_caching is True and args.enable_expert_parallel is True and args.enforce_eager is True
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
    assert res.stderr.startswith('usage: vllm ')
    assert res.stderr.rstrip().endswith('vllm: error: unrecognized arguments: --bogus-flag 7')
    assert 'Application startup complete.' not in res.stdout


def test_stray_value_rejected():
    # A boolean rendered as `--enable-prefix-caching false` leaves `false` unrecognized, as in vLLM.
    res = run_cli(['serve', 'm', '--enable-prefix-caching', 'false'])
    assert res.returncode == 2
    assert 'vllm: error: unrecognized arguments: false' in res.stderr


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
