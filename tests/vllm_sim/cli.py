# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`vllm` command line of the simulator (a STAND-IN for vLLM, test code, never deployed).

The `vllm serve` flags come from vLLM's own parser, as data: the collection's flag schema for the
vLLM version the image carries (its installed vllm distribution, or VLLM_SIM_VERSION; image_version,
README.md). Every flag of that version is accepted with vLLM's type, choices and nargs; anything else
is refused the way argparse refuses it in vLLM (`vllm serve: error: unrecognized arguments: --foo`,
`argument --max-num-seqs: invalid int value: 'lots'`, exit 2). A version without a schema falls back
to the simulator's own short flag list (with a note on stderr).

FlexibleArgumentParser behaviour the collection depends on: `--flag_name` == `--flag-name`,
`--flag=value`, JSON flags parsed with json.loads, `--json-flag.key=value` dotted updates, no
abbreviations (allow_abbrev=False).
"""


import argparse
import json
import os
import re
import sys

from vllm_sim import schema as flag_schema

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
             'data-parallel-rpc-port', 'data-parallel-size-local', 'long-prefill-token-threshold')
FLOAT_FLAGS = ('gpu-memory-utilization',)
SHORT = {'tensor-parallel-size': '-tp', 'pipeline-parallel-size': '-pp', 'compilation-config': '-cc',
         'data-parallel-size': '-dp', 'quantization': '-q'}


def _json_type(text):
    return json.loads(text)


_json_type.__name__ = 'loads'


def _float_type(text):
    return float(text)


_float_type.__name__ = 'float'

_HUMAN_RE = re.compile(r'(\d+(?:\.\d+)?)([kKmMgGtT])')


def human_readable_int(value):
    """vLLM's human_readable_int: 25600, 25.6k (decimal: k m g t), 25K (binary: K M G T)."""
    value = value.strip()
    match = _HUMAN_RE.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in 'kmgt':
            return int(float(number) * 10 ** (3 * ('kmgt'.index(suffix) + 1)))
        try:
            return int(number) * 2 ** (10 * ('KMGT'.index(suffix) + 1))
        except ValueError:
            raise argparse.ArgumentTypeError('Decimals are not allowed with binary suffixes like %s. Did you mean to use '
                                             '%s%s instead?' % (suffix, number, suffix.lower()))
    return int(value)


def human_readable_int_or_auto(value):
    """vLLM's human_readable_int_or_auto: also `auto` / -1 (= derive from the model)."""
    if value.strip().lower() in ('auto', '-1'):
        return -1
    return human_readable_int(value)


def _json_or_str(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


_json_or_str.__name__ = 'json_or_str'

SCHEMA_TYPES = {'int': int, 'float': _float_type, 'str': str, 'json': _json_type, 'json_or_str': _json_or_str,
                'human_readable_int': human_readable_int, 'human_readable_int_or_auto': human_readable_int_or_auto}


def _optional(func):
    """vLLM's optional_type: '' and 'None' mean None (argparse then names the type `_optional_type`)."""
    def _optional_type(val):
        if val in ('', 'None'):
            return None
        return func(val)
    return _optional_type


def image_version():
    """The vLLM version the (simulated) image carries, where a real image has it: the installed `vllm` distribution
    (dist-info METADATA; tests/harness/build-sim-image.sh installs one, with a `vllm` package whose __version__ says
    the same), which is also what dgxspark.ds4.container_image reads from the image. VLLM_SIM_VERSION, when set,
    overrides it (the simulator run from a checkout, where no vllm is installed); DEFAULT_VERSION otherwise."""
    if os.environ.get('VLLM_SIM_VERSION'):
        return os.environ['VLLM_SIM_VERSION']
    from importlib import metadata  # Python >= 3.8 (the simulator needs 3.9)
    try:
        return metadata.version('vllm')
    except metadata.PackageNotFoundError:
        return DEFAULT_VERSION


def _add_schema_flags(serve, schema):
    json_flags = set()
    for name, entry in sorted(schema['flags'].items()):
        options = list(entry.get('options') or ['--' + name])
        dest = entry.get('dest') or name.replace('-', '_')
        if entry.get('json'):
            json_flags.add(name)
        if entry.get('type') == 'bool':
            negative = ['--' + n for n in entry.get('negative') or []]
            positive = [o for o in options if o not in negative]
            serve.add_argument(*positive, dest=dest, action='store_true', default=None if negative else False)
            if negative:
                serve.add_argument(*negative, dest=dest, action='store_false', default=None)
            continue
        func = SCHEMA_TYPES.get(entry.get('type'), str)
        if entry.get('nullable'):
            func = _optional(func)
        kwargs = {'dest': dest, 'type': func, 'default': None}
        if entry.get('nargs') not in (None, 0):
            kwargs['nargs'] = entry['nargs']
            if entry['nargs'] == '?':
                kwargs['const'] = True
        if entry.get('append'):
            kwargs['action'] = 'append'
        if entry.get('choices'):
            kwargs['choices'] = entry['choices']
        serve.add_argument(*options, **kwargs)
    return json_flags


def _add_builtin_flags(serve):
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
    return set(JSON_FLAGS)


def build_parser(version=None):
    """argparse parser of `vllm`; `serve` built from the flag schema of `version` (default: the image's).

    The parser carries `sim_serve` (the serve subparser), `sim_json_flags`, `sim_schema`,
    `sim_schema_version` and `sim_schema_problem` (why the built-in list is used, or None)."""
    version = version or image_version()
    schema, used, problem = flag_schema.lookup(version)
    parser = argparse.ArgumentParser(prog='vllm', description='vLLM CLI (simulator: a stand-in for vLLM, test code only)',
                                     allow_abbrev=False)
    parser.add_argument('-v', '--version', action='store_true', help='show the version and exit')
    sub = parser.add_subparsers(dest='subparser', metavar='{chat,complete,serve,bench,collect-env,run-batch}')
    serve = sub.add_parser('serve', usage='vllm serve [model_tag] [options]', allow_abbrev=False,
                           help='Launch a local OpenAI-compatible API server (simulated).')
    serve.add_argument('model_tag', nargs='?', default=None, help='model name or path')
    if schema is not None:
        json_flags = _add_schema_flags(serve, schema)
    else:
        serve.add_argument('--model', default=None)
        json_flags = _add_builtin_flags(serve)
    for sub_name in ('chat', 'complete', 'bench', 'collect-env', 'run-batch'):
        sub.add_parser(sub_name, help='not implemented by the simulator')
    parser.sim_serve = serve
    parser.sim_json_flags = json_flags
    parser.sim_schema = schema
    parser.sim_schema_version = used
    parser.sim_schema_problem = problem
    return parser


def normalize_argv(argv, json_flags=None):
    """FlexibleArgumentParser behaviour: underscores in flag names, dotted JSON keys."""
    json_flags = JSON_FLAGS if json_flags is None else json_flags
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
            if '.' in name and base in json_flags:
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


def parse(argv, version=None):
    """-> (parser, args). Unknown words end the process like vLLM: the serve parser's usage and
    `vllm serve: error: unrecognized arguments: ...`, exit 2."""
    parser = build_parser(version)
    norm, dotted = normalize_argv(list(argv), parser.sim_json_flags)
    args, extras = parser.parse_known_args(norm)
    if extras:
        (parser.sim_serve if args.subparser == 'serve' else parser).error('unrecognized arguments: %s' % ' '.join(extras))
    apply_dotted(args, dotted)
    return parser, args


def non_default_args(parser, args):
    defaults = vars(parser.sim_serve.parse_args([]))
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
    version = image_version()
    parser, args = parse(argv, version)
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
