# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`vllm` command line of the simulator (a STAND-IN for vLLM, test code, never deployed).

Argument handling follows vLLM's FlexibleArgumentParser where the collection depends on it:
`--flag_name` == `--flag-name`, `--flag=value`, JSON flags parsed with json.loads,
`--json-flag.key=value` dotted updates, unknown flags rejected by argparse itself
(`vllm: error: unrecognized arguments: ...`, exit 2).
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import argparse
import json
import os
import sys

DEFAULT_VERSION = '0.27.1'

JSON_FLAGS = ('compilation-config', 'speculative-config', 'reasoning-config', 'default-chat-template-kwargs',
              'override-generation-config', 'hf-overrides', 'limit-mm-per-prompt', 'allowed-origins',
              'allowed-methods', 'allowed-headers', 'kv-transfer-config', 'model-loader-extra-config')

# Boolean engine flags (vLLM: BooleanOptionalAction, so --no-X works too).
BOOL_FLAGS = ('trust-remote-code', 'enable-prefix-caching', 'enable-chunked-prefill', 'disable-custom-all-reduce',
              'enforce-eager', 'enable-expert-parallel', 'enable-flashinfer-autotune', 'disable-log-stats',
              'enable-prompt-tokens-details', 'enable-force-include-usage', 'enable-server-load-tracking',
              'disable-uvicorn-access-log', 'disable-frontend-multiprocessing', 'async-scheduling',
              'enable-log-requests', 'disable-log-requests', 'enable-per-request-metrics', 'enable-sleep-mode',
              'prefix-caching')
# store_true flags in vLLM.
TRUE_FLAGS = ('headless', 'enable-auto-tool-choice', 'enable-request-id-headers')

STR_FLAGS = ('host', 'kv-cache-dtype', 'tokenizer-mode', 'tool-call-parser', 'reasoning-parser',
             'load-format', 'master-addr', 'distributed-executor-backend', 'generation-config', 'revision',
             'tokenizer', 'tokenizer-revision', 'dtype', 'quantization', 'chat-template', 'download-dir',
             'uvicorn-log-level', 'root-path', 'attention-backend', 'code-revision', 'config-format',
             'tool-parser-plugin', 'ssl-keyfile', 'ssl-certfile', 'seed', 'cpu-offload-gb', 'swap-space',
             'kv-cache-memory-bytes', 'max-logprobs', 'data-parallel-address', 'worker-cls', 'mm-processor-cache-gb',
             'chat-template-content-format', 'response-role', 'uds')
INT_FLAGS = ('port', 'tensor-parallel-size', 'pipeline-parallel-size', 'data-parallel-size', 'block-size',
             'max-model-len', 'max-num-seqs', 'max-num-batched-tokens', 'nnodes', 'node-rank', 'master-port',
             'api-server-count', 'distributed-timeout-seconds', 'max-parallel-loading-workers',
             'data-parallel-rpc-port', 'data-parallel-size-local')
FLOAT_FLAGS = ('gpu-memory-utilization',)
SHORT = {'tensor-parallel-size': '-tp', 'pipeline-parallel-size': '-pp', 'compilation-config': '-cc',
         'data-parallel-size': '-dp', 'quantization': '-q'}


def _json_type(text):
    return json.loads(text)


_json_type.__name__ = 'loads'


def _float_type(text):
    return float(text)


_float_type.__name__ = 'float'


def build_parser():
    parser = argparse.ArgumentParser(prog='vllm', description='vLLM CLI (simulator: a stand-in for vLLM, test code only)')
    parser.add_argument('-v', '--version', action='store_true', help='show the version and exit')
    sub = parser.add_subparsers(dest='subparser', metavar='{chat,complete,serve,bench,collect-env,run-batch}')
    serve = sub.add_parser('serve', usage='vllm serve [model_tag] [options]',
                           help='Launch a local OpenAI-compatible API server (simulated).')
    serve.add_argument('model_tag', nargs='?', default=None, help='model name or path')
    serve.add_argument('--model', default=None)
    for flag in STR_FLAGS:
        names = ['--' + flag] + ([SHORT[flag]] if flag in SHORT else [])
        serve.add_argument(*names, default=None)
    for flag in INT_FLAGS:
        names = ['--' + flag] + ([SHORT[flag]] if flag in SHORT else [])
        serve.add_argument(*names, type=int, default=None)
    for flag in FLOAT_FLAGS:
        serve.add_argument('--' + flag, type=_float_type, default=None)
    for flag in JSON_FLAGS:
        names = ['--' + flag] + ([SHORT[flag]] if flag in SHORT else [])
        serve.add_argument(*names, type=_json_type, default=None)
    for flag in BOOL_FLAGS:
        serve.add_argument('--' + flag, action=argparse.BooleanOptionalAction, default=None)
    for flag in TRUE_FLAGS:
        serve.add_argument('--' + flag, action='store_true', default=False)
    serve.add_argument('--api-key', nargs='+', default=None)
    serve.add_argument('--served-model-name', nargs='+', default=None)
    for sub_name in ('chat', 'complete', 'bench', 'collect-env', 'run-batch'):
        sub.add_parser(sub_name, help='not implemented by the simulator')
    return parser


def normalize_argv(argv):
    """FlexibleArgumentParser behaviour: underscores in flag names, dotted JSON keys."""
    out = []
    dotted = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith('--') and len(arg) > 2:
            name, eq, value = arg[2:].partition('=')
            base, dot, keys = name.partition('.')
            base = base.replace('_', '-')
            name = base + dot + keys
            if '.' in name and base in JSON_FLAGS:
                key_path = name.split('.')[1:]
                if not eq:
                    if i + 1 < len(argv):
                        value = argv[i + 1]
                        i += 1
                    else:
                        value = 'true'
                dotted.setdefault(base, []).append((key_path, _dotted_value(value)))
                i += 1
                continue
            arg = '--' + name + (eq + value if eq else '')
        out.append(arg)
        i += 1
    return out, dotted


def _dotted_value(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def apply_dotted(args, dotted):
    for base, updates in dotted.items():
        attr = base.replace('-', '_')
        current = getattr(args, attr, None)
        if not isinstance(current, dict):
            current = {}
        for path, value in updates:
            node = current
            for key in path[:-1]:
                node = node.setdefault(key, {})
            node[path[-1]] = value
        setattr(args, attr, current)


def parse(argv):
    parser = build_parser()
    norm, dotted = normalize_argv(list(argv))
    args = parser.parse_args(norm)
    apply_dotted(args, dotted)
    return parser, args


def non_default_args(parser, args):
    serve_parser = parser._subparsers._group_actions[0].choices['serve']  # pylint: disable=protected-access
    defaults = vars(serve_parser.parse_args([]))
    out = {}
    for key, value in vars(args).items():
        if key in ('subparser', 'version'):
            continue
        if defaults.get(key, None) != value:
            out[key] = '***' if key == 'api_key' and value else value
    if out.get('model_tag') and not out.get('model'):
        out['model'] = out['model_tag']
    return out


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
    version = os.environ.get('VLLM_SIM_VERSION', DEFAULT_VERSION)
    parser, args = parse(argv)
    if args.version:
        sys.stderr.write('vllm-sim: stand-in for vLLM (test code only)\n')
        print(version)
        return 0
    if args.subparser != 'serve':
        if args.subparser is None:
            parser.print_help()
            return 0
        sys.stderr.write('vllm %s: not implemented by the simulator (a stand-in for vLLM)\n' % args.subparser)
        return 2
    # pylint: disable=import-outside-toplevel
    from vllm_sim.serve import run_serve
    return run_serve(parser, args, version)


if __name__ == '__main__':
    sys.exit(main())
