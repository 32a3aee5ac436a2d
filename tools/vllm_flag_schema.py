# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write vLLM's own `vllm serve` flag schema as data.

Imports the installed `vllm` package, builds the `vllm serve` argument parser with vLLM's own
code (`make_arg_parser(FlexibleArgumentParser())`, the call `vllm serve` makes in
`entrypoints/cli/serve.py::ServeSubcommand.subparser_init`) and writes every flag with its
type, choices, nargs, whether it takes JSON (and, where vLLM validates the JSON with a config
class, that class's keys and their types) and deprecation, plus the `VLLM_*` environment
variables `vllm.envs` knows. The collection's config validation
(`plugins/plugin_utils/ds4_config.py`) loads the result on the controller.

No GPU is needed. Per vLLM version, in a separate virtual environment (not the controller venv):

    python3.11 -m venv /tmp/vllm-X && /tmp/vllm-X/bin/pip install torch==2.13.0   # CPU wheel
    /tmp/vllm-X/bin/pip install --no-deps vllm==X
    /tmp/vllm-X/bin/pip install numpy regex cachetools psutil requests tqdm blake3 py-cpuinfo \
        transformers tokenizers safetensors protobuf fastapi starlette aiohttp openai pydantic \
        prometheus_client pillow prometheus-fastapi-instrumentator pyzmq msgspec pyyaml cloudpickle \
        cbor2 pybase64 partial-json-parser einops uvloop setproctitle python-json-logger ijson \
        jsonschema typing_extensions filelock uvicorn openai-harmony xgrammar llguidance gguf
    /tmp/vllm-X/bin/python tools/vllm_flag_schema.py            # writes plugins/plugin_utils/vllm_schemas/vllm-X.json
    /tmp/vllm-X/bin/python tools/vllm_flag_schema.py --check    # exit 1 if the committed file differs

The platform is pinned to vLLM's CPU platform object only so that config defaults can be
computed without a GPU; no flag, type or choice below depends on it.
"""

import argparse
import dataclasses
import enum
import importlib
import json
import os
import sys
import typing

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..'))
SCHEMA_DIR = os.path.join(REPO, 'plugins', 'plugin_utils', 'vllm_schemas')
FORMAT = 1
NONE_TYPE = type(None)


def _pin_platform():
    from vllm import platforms
    from vllm.platforms.cpu import CpuPlatform
    platforms._current_platform = CpuPlatform()  # pylint: disable=protected-access


def build_parser():
    """The `vllm serve` parser, built by vLLM's own make_arg_parser."""
    _pin_platform()
    try:
        mod = importlib.import_module('vllm.entrypoints.common.cli_args')   # 0.33
        if not hasattr(mod, 'make_arg_parser'):
            raise ImportError('no make_arg_parser')
    except ImportError:
        mod = importlib.import_module('vllm.entrypoints.openai.cli_args')   # 0.27
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    return mod.make_arg_parser(FlexibleArgumentParser(prog='vllm serve'))


def _closure(fn):
    out = {}
    code = getattr(fn, '__code__', None)
    if code is None or not fn.__closure__:
        return out
    for name, cell in zip(code.co_freevars, fn.__closure__):
        try:
            out[name] = cell.cell_contents
        except ValueError:
            pass
    return out


def describe_type(fn):
    """argparse `type` callable -> (type name, nullable, dataclass or None)."""
    if fn is None:
        return 'str', False, None
    name = getattr(fn, '__name__', '')
    if name == '_optional_type':
        inner, _n, cls = describe_type(_closure(fn).get('return_type'))
        return inner, True, cls
    if name == '_parse_type':
        return describe_type(_closure(fn).get('return_type'))
    if name == 'parse_dataclass':
        defaults = fn.__defaults__ or ()
        cls = defaults[0] if defaults else _closure(fn).get('dataclass_cls')
        return 'json', False, cls
    if fn is json.loads or name == 'loads':
        return 'json', False, None
    if name == 'union_dict_and_str':
        return 'json_or_str', True, None
    if fn is int:
        return 'int', False, None
    if fn is float:
        return 'float', False, None
    if fn is str or name == 'parse_reasoning_parser':
        return 'str', False, None
    if name in ('human_readable_int', 'human_readable_int_or_auto'):
        return name, False, None
    if name == '<lambda>':
        return 'str', False, None
    return 'str:%s' % name, False, None


def _hint_leaf(hint):
    """One type-hint member -> schema type name (+ choices)."""
    origin = typing.get_origin(hint)
    if hint is None or hint is NONE_TYPE:
        return 'null', None
    if hint is bool:
        return 'bool', None
    if hint is int:
        return 'int', None
    if hint is float:
        return 'float', None
    if hint is str:
        return 'str', None
    if origin is typing.Literal:
        vals = []
        for a in typing.get_args(hint):
            if typing.get_origin(a) is typing.Literal:
                vals.extend(typing.get_args(a))
            else:
                vals.append(a)
        return 'choice', vals
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        vals = []
        for m in hint:
            vals.append(m.name)
            if isinstance(m.value, (str, int)) and not isinstance(m.value, bool) and m.value not in vals:
                vals.append(m.value)
        return 'choice', vals
    if hint in (list, tuple, set) or origin in (list, tuple, set):
        return 'list', None
    if hint is dict or origin is dict or (isinstance(hint, type) and issubclass(hint, dict)):
        return 'mapping', None
    if dataclasses.is_dataclass(hint):
        return 'mapping', None
    return 'any', None


def _flatten_literals(hint):
    if typing.get_origin(hint) is typing.Literal:
        out = []
        for a in typing.get_args(hint):
            out.extend(_flatten_literals(a) if typing.get_origin(a) is typing.Literal else [a])
        return out
    return [hint]


def describe_hint(hint):
    """Type hint of a config-class field -> {"types": [...], "choices": [...]}."""
    from vllm.engine.arg_utils import get_type_hints as vllm_hints
    try:
        members = vllm_hints(hint)
    except Exception:  # pylint: disable=broad-except
        members = {hint}
    types = set()
    choices = []
    for m in sorted(members, key=repr):   # a set: iterate in a stable order (choices keep it)
        t, ch = _hint_leaf(m)
        if t == 'choice':
            for c in ch:
                for v in _flatten_literals(c):
                    if v not in choices:
                        choices.append(v)
            continue
        types.add(t)
    if choices and types - {'null'}:
        # Literal or another type (e.g. `CacheDType | str`): the literal list is not binding.
        types.add('str')
        choices = []
    if choices:
        types.add('choice')
    return {'types': sorted(types), 'choices': choices or None}


def describe_config_class(cls):
    """Keys of the JSON a config class accepts, with their types."""
    hints = {}
    try:
        hints = typing.get_type_hints(cls, include_extras=False)
    except Exception:  # pylint: disable=broad-except
        hints = {}
    keys = {}
    for f in dataclasses.fields(cls):
        if f.name.startswith('_') or not f.init:
            continue
        keys[f.name] = describe_hint(hints.get(f.name, f.type))
    return {'class': '%s.%s' % (cls.__module__, cls.__name__), 'keys': keys}


def _docs_class(help_text):
    marker = 'api/vllm/config/#vllm.config.'
    if help_text and marker in help_text:
        name = help_text.split(marker, 1)[1].split()[0].strip('.)')
        import vllm.config
        cls = getattr(vllm.config, name, None)
        if cls is not None and dataclasses.is_dataclass(cls):
            return cls
    return None


def _config_choices(dest):
    """Choices vLLM enforces in its config class rather than in argparse."""
    if dest == 'kv_cache_dtype':
        try:
            from vllm.config.cache import KV_CACHE_DTYPES
            return list(KV_CACHE_DTYPES), 'vllm.config.cache.KV_CACHE_DTYPES'
        except ImportError:
            return None, None
    return None, None


def describe_action(parser, action):
    longs = [s for s in action.option_strings if s.startswith('--')]
    name = longs[0][2:]
    kind = type(action).__name__
    entry = {'dest': action.dest, 'options': list(action.option_strings)}
    help_text = action.help if isinstance(action.help, str) else ''
    if kind in ('BooleanOptionalAction', 'EnableDisableAction', '_StoreTrueAction', '_StoreFalseAction', '_StoreConstAction'):
        entry.update(type='bool', nullable=False, choices=None, nargs=0, json=False)
        if kind in ('BooleanOptionalAction', 'EnableDisableAction'):
            entry['negative'] = [s[2:] for s in action.option_strings if s.startswith('--') and s != longs[0]]
    else:
        tname, nullable, cls = describe_type(action.type)
        if kind == 'DeprecatedLogConfigFileAction':
            tname = 'str'
        choices = list(action.choices) if action.choices is not None else None
        if choices is not None:
            nullable = nullable or None in choices
            choices = [c for c in choices if c is not None]
        entry.update(type=tname, nullable=bool(nullable), choices=choices,
                     nargs=action.nargs, json=tname in ('json', 'json_or_str'))
        if kind == '_AppendAction':
            entry['append'] = True
        cfg_choices, source = _config_choices(action.dest)
        if choices is None and cfg_choices:
            entry['choices'] = cfg_choices
            entry['choices_source'] = source
        if entry['json']:
            cls = cls or _docs_class(help_text)
            if cls is not None and dataclasses.is_dataclass(cls):
                entry['json_schema'] = describe_config_class(cls)
    deprecated = (action in getattr(parser, '_deprecated', ()) or bool(getattr(action, 'deprecated', False))
                  or 'deprecated' in kind.lower() or 'is deprecated' in help_text[:200])
    entry['deprecated'] = bool(deprecated)
    if deprecated:
        entry['deprecation'] = ' '.join(help_text.split())[:300] or 'deprecated'
    return name, entry


def known_env():
    from vllm import envs
    return sorted(envs.environment_variables)


def build_schema():
    import vllm
    parser = build_parser()
    flags = {}
    for action in parser._actions:  # pylint: disable=protected-access
        if not any(s.startswith('--') for s in action.option_strings) or action.dest == 'help':
            continue
        name, entry = describe_action(parser, action)
        flags[name] = entry
    return {
        'format': FORMAT,
        'vllm_version': vllm.__version__,
        'generator': 'tools/vllm_flag_schema.py',
        'source': "vllm %s: make_arg_parser(FlexibleArgumentParser()) as `vllm serve` builds it; env from vllm.envs" % vllm.__version__,
        'flags': dict(sorted(flags.items())),
        'env': known_env(),
    }


def dumps(schema):
    return json.dumps(schema, indent=1, sort_keys=True, default=str) + '\n'


def schema_path(version, directory=SCHEMA_DIR):
    return os.path.join(directory, 'vllm-%s.json' % version)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    ap.add_argument('--out-dir', default=SCHEMA_DIR)
    ap.add_argument('--check', action='store_true', help='compare with the committed file instead of writing')
    args = ap.parse_args(argv)
    schema = build_schema()
    text = dumps(schema)
    path = schema_path(schema['vllm_version'], args.out_dir)
    if args.check:
        with open(path) as f:
            same = f.read() == text
        print('%s: %s' % (path, 'up to date' if same else 'DIFFERS from what vllm %s generates' % schema['vllm_version']))
        return 0 if same else 1
    if not os.path.isdir(args.out_dir):
        os.makedirs(args.out_dir)
    with open(path, 'w') as f:
        f.write(text)
    print('wrote %s (%d flags, %d env vars)' % (path, len(schema['flags']), len(schema['env'])))
    return 0


if __name__ == '__main__':
    sys.exit(main())
