# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""serve_args and env checked against vLLM's own `vllm serve` flag schema.

Pure Python (no Ansible imports). The schemas are data written by `tools/vllm_flag_schema.py`
from the real vLLM wheel (its own argparse parser): `vllm_schemas/vllm-<version>.json` beside
this file, read on the controller by the `dgxspark.ds4.effective_config` action.

Entry points (ds4_config formats the messages with the inventory path of each value):
  schema_for(version) -> (schema or None, version used, problem or None)
  check_serve_args(schema, args, mapping_flags) -> [(flag, key_path, value, why, fix, level)]   level: error|warning
  check_env(schema, env) -> [(name, value, why, fix)]                            (warnings)

Collection rules on top of vLLM's types (argparse takes -1 for an int, vLLM then fails minutes
into a start or silently misbehaves): POSITIVE_FLAGS and POSITIVE_JSON_KEYS must be >= 1.
"""


import difflib
import json
import os
import re
from collections.abc import Iterable
from typing import Any

# vLLM flags whose value is JSON that the collection requires as YAML mappings in the inventory, never strings: seed
# 000 failure #6 (--compilation-config quotes stripped by nested shells, vLLM silently fell back to default
# compilation); the renderer writes each as one JSON word. Each is a JSON flag of the schemas that know it
# (tests/unit/plugins/plugin_utils/test_vllm_schema.py holds this list to them). The config check (ds4_config) and
# the renderer (launch_render) read it here.
JSON_FLAGS = frozenset((
    'compilation-config',
    'speculative-config',
    'default-chat-template-kwargs',
    'reasoning-config',
    'override-generation-config',
    'hf-overrides',
    'kv-transfer-config',
    'kv-events-config',
    'limit-mm-per-prompt',
    'mm-processor-kwargs',
))

SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'vllm_schemas')
SCHEMA_RE = re.compile(r'^vllm-(\d+\.\d+(?:\.\d+)?)\.json$')
VERSION_RE = re.compile(r'^\d+\.\d+(\.\d+)?([.+-]?[A-Za-z0-9.+-]*)?$')

# Counts and sizes that must be >= 1 (collection rule; vLLM's argparse type is plain int).
POSITIVE_FLAGS = {
    'max-num-seqs': 'concurrent sequences per step',
    'max-num-batched-tokens': 'tokens per scheduler step',
    'block-size': 'tokens per KV-cache block; the DeepSeek-V4 profiles use 256',
    'max-model-len': 'context length in tokens',
    'max-num-partial-prefills': 'concurrent partial prefills',
    'max-long-partial-prefills': 'concurrent long partial prefills',
    'num-gpu-blocks-override': 'KV blocks',
    'max-cudagraph-capture-size': 'largest CUDA-graph batch',
    'max-parallel-loading-workers': 'weight-loading workers',
    'tensor-parallel-size': 'GPUs per pipeline stage',
    'pipeline-parallel-size': 'pipeline stages',
    'data-parallel-size': 'data-parallel replicas',
    'max-logprobs': 'logprobs per token',
    'max-num-scheduled-tokens': 'tokens scheduled per step',
}
POSITIVE_JSON_KEYS = {
    ('speculative-config', 'num_speculative_tokens'): 'draft tokens per step (seed 000: MTP 2; seed 003: DSpark 5)',
    ('compilation-config', 'max_cudagraph_capture_size'): 'largest CUDA-graph batch',
}

# Free-form JSON flags (vLLM hands the mapping on without a config class): the keys the profiles
# use, with the type vLLM's consumer expects (collection rule: the chat template reads `thinking`
# as a boolean, the generation config feeds SamplingParams). Other keys pass unchecked.
FREEFORM_JSON_KEYS = {
    'default-chat-template-kwargs': {
        'thinking': {'types': ['bool']},
        'enable_thinking': {'types': ['bool']},
        'reasoning_effort': {'types': ['str']},
    },
    'override-generation-config': {
        'temperature': {'types': ['float']},
        'top_p': {'types': ['float']},
        'top_k': {'types': ['int']},
        'min_p': {'types': ['float']},
        'repetition_penalty': {'types': ['float']},
        'presence_penalty': {'types': ['float']},
        'frequency_penalty': {'types': ['float']},
        'max_new_tokens': {'types': ['int']},
    },
}

# Env vars vLLM removed or replaced, with what to use instead (checked against envs.py of the
# schema's version: the warning is given when that version no longer knows the name).
REMOVED_ENV = {
    'VLLM_USE_V1': ('removed with the V0 engine (vLLM runs only the V1 engine); setting it changes nothing',
                    'delete it'),
    'VLLM_ATTENTION_BACKEND': ('replaced by the --attention-backend flag; the env var is ignored',
                               'delete it and set serve_args attention-backend: <backend> (e.g. FLASHINFER_MLA_SPARSE)'),
}

BOOL_WORDS = ('true', 'false', 'yes', 'no', 'on', 'off', '1', '0', 't', 'f', 'y', 'n')
HUMAN_INT_RE = re.compile(r'^\s*(\d+(\.\d+)?[kKmMgGtT]|[-+]?\d+)\s*$')
_CACHE: dict[str, Any] = {}


def available_versions(directory: str = SCHEMA_DIR) -> list[str]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    out = [m.group(1) for m in (SCHEMA_RE.match(n) for n in names) if m]
    return sorted(out, key=lambda v: tuple(int(p) for p in v.split('.')))


def schema_path(version: str, directory: str = SCHEMA_DIR) -> str:
    return os.path.join(directory, 'vllm-%s.json' % version)


def load_schema(version: str, directory: str = SCHEMA_DIR) -> Any:
    path = schema_path(version, directory)
    if path not in _CACHE:
        with open(path) as f:
            _CACHE[path] = json.load(f)
    return _CACHE[path]


def schema_for(version: Any, directory: str = SCHEMA_DIR) -> tuple[Any, str | None, str | None]:
    """-> (schema, used version or None, problem or None) for an image's vllm_version.

    Exact version first; else the highest patch release of the same major.minor that has a
    schema (patch releases keep the CLI), so the caller can say which schema it used."""
    if not isinstance(version, str) or not VERSION_RE.match(version):
        return None, None, 'invalid'
    if os.path.exists(schema_path(version, directory)):
        return load_schema(version, directory), version, None
    minor = minor_of(version)
    if minor is None:  # not reached: VERSION_RE matched above
        return None, None, 'invalid'
    same = [v for v in available_versions(directory) if v == minor or v.startswith(minor + '.')]
    if same:
        return load_schema(same[-1], directory), same[-1], None
    return None, None, 'missing'


def minor_of(version: Any) -> str | None:
    """'0.27.1' -> '0.27'; '0.11.1rc2.dev5+g48cebd4' -> '0.11'; None for anything that is not a vLLM version."""
    if not isinstance(version, str) or not VERSION_RE.match(version):
        return None
    match = re.match(r'^(\d+)\.(\d+)', version)
    return '.'.join(match.groups()) if match else None


def flag_index(schema: dict[str, Any]) -> tuple[dict[str, tuple[str, dict[str, Any]]], dict[str, str]]:
    """Every spelling vLLM accepts -> (canonical name, entry); short aliases listed apart."""
    index: dict[str, tuple[str, dict[str, Any]]] = {}
    short: dict[str, str] = {}
    for name, entry in schema['flags'].items():
        for opt in entry.get('options') or ['--' + name]:
            if opt.startswith('--'):
                index[opt[2:]] = (name, entry)
            else:
                short[opt.lstrip('-')] = name
    return index, short


def suggest(word: str, candidates: list[str]) -> str | None:
    hits = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return hits[0] if hits else None


def _type_words(entry: dict[str, Any]) -> str:
    t: Any = entry.get('type')  # the schema's type name (free-form JSON)
    return {
        'int': 'an integer',
        'float': 'a number',
        'str': 'a string',
        'human_readable_int': 'an integer (or 1k/2M style)',
        'human_readable_int_or_auto': 'an integer (or 1k/2M style, or auto)',
        'json': 'JSON (a YAML mapping)',
        'json_or_str': 'a YAML mapping or a string',
        'bool': 'a switch (true)',
    }.get(t, 'a string')


def _scalar_ok(entry: dict[str, Any], value: Any) -> bool:
    """argparse's conversion of one word, as vLLM's type callable does it."""
    t = entry.get('type')
    if isinstance(value, bool) or isinstance(value, (dict, list)):
        return False
    if entry.get('nullable') and value in ('None', ''):
        return True
    text = str(value)
    try:
        if t == 'int':
            if isinstance(value, float):
                return False
            int(text)
        elif t == 'float':
            float(text)
        elif t == 'human_readable_int':
            if isinstance(value, float) or not HUMAN_INT_RE.match(text):
                return False
        elif t == 'human_readable_int_or_auto':
            if isinstance(value, float) or not (HUMAN_INT_RE.match(text) or text.strip().lower() == 'auto'):
                return False
    except ValueError:
        return False
    return True


def _choice_ok(choices: list[Any], value: Any) -> bool:
    if value in choices:
        return True
    text = str(value)
    return any(text == str(c) for c in choices)


def _positive(value: Any) -> bool:
    try:
        return int(str(value).strip()) >= 1
    except ValueError:
        return True   # human-readable (1k) or auto: not a negative count


def check_flag(flag: str, entry: dict[str, Any], value: Any, mapping_only: bool = False) -> list[tuple[str, Any, str, str, str]]:
    """One known flag's value -> [(key_path, value, why, fix, level)].

    mapping_only: the collection requires a YAML mapping for this JSON flag and reports other values itself."""
    out: list[tuple[str, Any, str, str, str]] = []
    t = entry.get('type')
    words = _type_words(entry)
    if t == 'bool':
        if value is not True:
            neg = ', or --%s' % entry['negative'][0] if entry.get('negative') else ''
            out.append(('', value, '--%s is a switch in vLLM (no value%s); %s is not true' % (flag, neg, json.dumps(value)),
                        'write %s: true to pass --%s, or delete the entry (null in ds4_site_overrides drops a profile flag)'
                        % (flag, flag), 'error'))
        return out
    if value is True:
        if entry.get('nargs') == '?':
            return out
        out.append(('', value, '--%s takes %s in vLLM %%(version)s; true would render a bare --%s and vllm serve exits with '
                    '"expected one argument"' % (flag, words, flag), 'give it a value of that type', 'error'))
        return out
    if entry.get('json'):
        if isinstance(value, dict):
            out.extend(check_json(flag, entry, value))
        elif mapping_only or (t == 'json_or_str' and isinstance(value, str)):
            pass   # mapping_only: the caller refuses every non-mapping of these flags itself
        elif isinstance(value, list):
            out.append(('', value, '--%s takes one JSON word in vLLM %%(version)s; a YAML list renders as separate words' % flag,
                        'write the JSON as one quoted string, e.g. %s: \'["a", "b"]\'' % flag, 'error'))
        else:
            try:
                json.loads(str(value))
            except ValueError:
                out.append(('', value, '--%s takes JSON in vLLM %%(version)s (parsed with json.loads); %r is not JSON' % (flag, str(value)),
                            'write it as a YAML mapping', 'error'))
        return out
    if isinstance(value, dict):
        out.append(('', value, '--%s takes %s, not a mapping (it is not a JSON flag in vLLM %s)' % (flag, words, '%(version)s'),
                    'give a single value', 'error'))
        return out
    values = value if isinstance(value, list) else [value]
    if isinstance(value, list) and entry.get('nargs') not in ('+', '*') and not entry.get('append'):
        out.append(('', value, '--%s takes one value in vLLM %%(version)s, not a list' % flag, 'give a single value', 'error'))
        return out
    for v in values:
        if not _scalar_ok(entry, v):
            out.append(('', value, '--%s takes %s in vLLM %%(version)s; vllm serve would exit with "argument --%s: invalid %s value: %r"'
                        % (flag, words, flag, t, str(v)), 'write %s' % _example(entry), 'error'))
            return out
        choices = entry.get('choices')
        if choices and not _choice_ok(choices, v):
            close = suggest(str(v), [str(c) for c in choices])
            out.append(('', value, '--%s must be one of the values vLLM %%(version)s accepts: %s'
                        % (flag, ', '.join(str(c) for c in choices)),
                        'use %s' % (json.dumps(close) if close else 'one of them'), 'error'))
            return out
        if flag in POSITIVE_FLAGS and not _positive(v):
            out.append(('', value, '--%s (%s) must be a positive integer; vLLM\'s argparse takes %s but the engine then fails or '
                        'misbehaves at start (collection rule)' % (flag, POSITIVE_FLAGS[flag], json.dumps(v)),
                        'use an integer >= 1', 'error'))
            return out
    return out


def _example(entry: dict[str, Any]) -> str:
    t: Any = entry.get('type')  # the schema's type name (free-form JSON)
    return {
        'int': 'an integer, e.g. 8',
        'float': 'a number, e.g. 0.8',
        'human_readable_int': 'an integer, e.g. 16384',
        'human_readable_int_or_auto': 'an integer, e.g. 131072',
    }.get(t, 'a string')


def _json_value_ok(spec: dict[str, Any], value: Any) -> bool:
    types = spec.get('types') or ['any']
    if 'any' in types:
        return True
    if value is None:
        return 'null' in types
    if isinstance(value, bool):
        return 'bool' in types
    if isinstance(value, int):
        return bool({'int', 'float'} & set(types)) or ('choice' in types and _choice_ok(spec.get('choices') or [], value))
    if isinstance(value, float):
        return 'float' in types
    if isinstance(value, str):
        if 'str' in types:
            return True
        if 'choice' in types and (_choice_ok(spec.get('choices') or [], value)
                                  or value.upper() in [str(c).upper() for c in spec.get('choices') or []]):
            return True
        if 'int' in types:
            try:
                int(value)
                return True
            except ValueError:
                pass
        if 'float' in types:
            try:
                float(value)
                return True
            except ValueError:
                pass
        return 'bool' in types and value.strip().lower() in BOOL_WORDS
    if isinstance(value, list):
        return 'list' in types
    if isinstance(value, dict):
        return 'mapping' in types
    return False


def _json_expected(spec: dict[str, Any]) -> str:
    parts = []
    for t in spec.get('types') or []:
        if t == 'choice':
            parts.append('one of %s' % ', '.join(str(c) for c in spec.get('choices') or []))
        else:
            parts.append({'int': 'an integer', 'float': 'a number', 'str': 'a string', 'bool': 'true/false',
                          'null': 'null', 'list': 'a list', 'mapping': 'a mapping'}.get(t, t))
    return ' or '.join(parts) or 'any value'


def check_json(flag: str, entry: dict[str, Any], value: dict[str, Any]) -> list[tuple[str, Any, str, str, str]]:
    """Keys of a JSON flag against the vLLM config class that parses it."""
    out: list[tuple[str, Any, str, str, str]] = []
    js = entry.get('json_schema')
    if not js:
        for key, v in value.items():
            spec = FREEFORM_JSON_KEYS.get(flag, {}).get(key)
            if spec is not None and not _json_value_ok(spec, v):
                out.append(('.%s' % key, v, '%s.%s in --%s must be %s (vLLM passes --%s on as free-form JSON; its consumer reads '
                            '%s as that type: collection rule)' % (flag, key, flag, _json_expected(spec), flag, key),
                            'write %s' % _json_expected(spec), 'error'))
        return out
    keys = js.get('keys') or {}
    cls = js.get('class', '').rsplit('.', 1)[-1]
    for key, v in value.items():
        path = '.%s' % key
        spec = keys.get(key)
        if spec is None:
            close = suggest(str(key), list(keys))
            out.append((path, v, 'vLLM %%(version)s %s (the class that parses --%s) has no key %s; it rejects the JSON '
                        '("Extra inputs are not permitted") and vllm serve exits' % (cls, flag, json.dumps(key)),
                        'did you mean %s?' % json.dumps(close) if close else 'remove it (keys: %s)' % ', '.join(sorted(keys)),
                        'error'))
            continue
        if not _json_value_ok(spec, v):
            out.append((path, v, '%s.%s in --%s must be %s (vLLM %%(version)s %s)' % (flag, key, flag, _json_expected(spec), cls),
                        'write %s' % _json_expected(spec), 'error'))
            continue
        if (flag, key) in POSITIVE_JSON_KEYS and not isinstance(v, bool) and isinstance(v, (int, str)) and not _positive(v):
            out.append((path, v, '%s (%s) must be a positive integer (collection rule)' % (key, POSITIVE_JSON_KEYS[(flag, key)]),
                        'use an integer >= 1', 'error'))
    return out


def check_serve_args(schema: dict[str, Any], args: dict[str, Any],
                     mapping_flags: Iterable[str] = ()) -> list[tuple[str, str, Any, str, str, str]]:
    """serve_args (normalised names) -> [(flag, key_path, value, why, fix, level)].

    mapping_flags: JSON flags the caller already requires to be mappings (JSON_FLAGS)."""
    version = schema.get('vllm_version', '?')
    index, short = flag_index(schema)
    out: list[tuple[str, str, Any, str, str, str]] = []
    for flag, value in args.items():
        if value is None:
            continue
        hit = index.get(flag)
        if hit is None:
            target = short.get(flag) or suggest(flag, list(index))
            why = ('vLLM %s has no flag --%s; vllm serve exits with "unrecognized arguments: --%s"' % (version, flag, flag))
            if flag in short:
                why += ' (-%s is a short alias; the renderer writes long flags)' % flag
            fix = ('did you mean %s?' % target if target
                   else 'remove it; the flags vLLM %s knows are in plugins/plugin_utils/vllm_schemas/vllm-%s.json' % (version, version))
            out.append((flag, '', value, why, fix, 'error'))
            continue
        name, entry = hit
        if name != flag and entry.get('type') == 'bool':
            # a negative spelling (--no-x / --disable-x): a switch like the positive one
            entry = dict(entry, negative=[name])
        for path, v, why, fix, level in check_flag(flag, entry, value, mapping_only=flag in mapping_flags):
            out.append((flag, path, v, why.replace('%(version)s', version), fix, level))
        if entry.get('deprecated'):
            out.append((flag, '', value, 'vLLM %s marks --%s deprecated: %s' % (version, flag, entry.get('deprecation', '')),
                        'drop it or use its replacement', 'warning'))
    return out


def check_env(schema: dict[str, Any], env: dict[str, Any]) -> list[tuple[str, Any, str, str]]:
    """Env names vLLM removed or does not know -> [(name, value, why, fix)] (warnings)."""
    version = schema.get('vllm_version', '?')
    known = set(schema.get('env') or [])
    out: list[tuple[str, Any, str, str]] = []
    unknown: list[str] = []
    for name in env:
        if not name.startswith('VLLM_') or name in known:
            continue
        if name in REMOVED_ENV:
            why, fix = REMOVED_ENV[name]
            out.append((name, env[name], 'vLLM %s: %s' % (version, why), fix))
        else:
            unknown.append(name)
    if unknown:
        pron = 'them' if len(unknown) > 1 else 'it'
        out.append((', '.join(unknown), None,
                    'vLLM %s\'s envs.py does not know %s; upstream vLLM logs "Unknown vLLM environment variable detected: '
                    '<name>" and ignores it, so it acts only if the image\'s own build reads it' % (version, pron),
                    'keep %s only if the image (a fork) documents %s; otherwise delete %s' % (pron, pron, pron)))
    return out
