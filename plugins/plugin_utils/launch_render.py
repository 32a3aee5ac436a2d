# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render one node's launch script from its effective config (ds4_effective).

The script is the only place argv is written down: every argument goes through
shlex.quote so bash hands vLLM exactly the intended argv (seed 000 failure #6:
JSON passed through nested shells lost its quotes and was silently ignored).
Pure Python, no Ansible imports.
"""


import json
import shlex
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.vllm_schema import JSON_FLAGS

JSON_SEPARATORS = (',', ':')


def render_value(value: Any) -> list[str]:
    """One flag value -> list of argv words (empty for a bare boolean flag)."""
    if value is True:
        return []
    if isinstance(value, dict):
        return [json.dumps(value, separators=JSON_SEPARATORS)]
    if isinstance(value, (list, tuple)):
        return [render_scalar(v) for v in value]
    return [render_scalar(value)]


def render_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=JSON_SEPARATORS)
    return str(value)


def _json_flag_value(flag: str, value: Any) -> list[str]:
    # JSON-valued flags given as a list (rare) still render as one JSON word.
    return [json.dumps(value, separators=JSON_SEPARATORS)]


def build_argv_groups(eff: dict[str, Any]) -> list[list[str]]:
    """argv as groups: [entrypoint words], [model], [--flag, value...], ..."""
    groups = [list(eff['entrypoint']), [str(eff['model']['serve_arg'])]]
    groups.append(['--host', str(eff['api']['host'])])
    groups.append(['--port', str(eff['api']['port'])])
    for flag, value in eff['serve_args'].items():
        if value is None:
            continue
        if flag in JSON_FLAGS and isinstance(value, (list, tuple)):
            groups.append(['--' + flag] + _json_flag_value(flag, value))
        else:
            groups.append(['--' + flag] + render_value(value))
    groups.append(['--nnodes', str(eff['nnodes'])])
    groups.append(['--node-rank', str(eff['node_rank'])])
    groups.append(['--master-addr', str(eff['master_addr'])])
    groups.append(['--master-port', str(eff['master_port'])])
    if eff['node_rank'] != 0:
        groups.append(['--headless'])
    return groups


def build_argv(eff: dict[str, Any]) -> list[str]:
    argv: list[str] = []
    for group in build_argv_groups(eff):
        argv.extend(group)
    return argv


def _q(word: str) -> str:
    return shlex.quote(word)


def render_launch_script(eff: dict[str, Any]) -> str:
    """Text of launch-head.sh / launch-worker.sh."""
    role = eff['role']
    lines = [
        '#!/usr/bin/env bash',
        '# %s: dgxspark.ds4 launch script for %s (%s, node rank %d of %d), profile %s.'
        % (eff['script_name'], eff['host'], role, eff['node_rank'], eff['nnodes'], eff['profile']),
        '# Rendered by dgxspark.ds4.effective_config; do not edit. Change the inventory and re-render.',
    ]
    if eff.get('seed'):
        lines.append('# Recipe: %s' % ' '.join(str(eff['seed']).split()))
    if eff.get('overrides'):
        lines.append('# Site overrides applied (ds4_site_overrides):')
        for o in eff['overrides']:
            lines.append('#   %s: %s -> %s' % (o['key'], json.dumps(o['profile']), json.dumps(o['site'])))
    for text in eff.get('deviations') or []:
        lines.append('# Deviation from the seed (a collection setting), %s' % text)
    lines += ['# Secrets (API keys, HF tokens) never appear here; they come from a 0600 env file.', 'set -euo pipefail', '']
    per_node = set(eff.get('per_node_env') or [])
    lines.append('# Environment common to both nodes (base + profile + site overrides).')
    for name, value in eff['env'].items():
        if name not in per_node:
            lines.append('export %s=%s' % (name, _q(value)))
    lines.append('')
    lines.append('# Per-node environment, from host_vars/%s.yml (never one global value).' % eff['host'])
    for name in eff.get('per_node_env') or []:
        lines.append('export %s=%s' % (name, _q(eff['env'][name])))
    lines.append('')
    if eff['node_rank'] == 0:
        api = eff['api']
        if api.get('proxied'):
            lines.append('# Head: vLLM on %s:%s (loopback), behind the API proxy on port %s for %s; start it after the worker.'
                         % (api['host'], api['port'], api.get('public_port'), ', '.join(api.get('allowed_networks') or [])))
        else:
            lines.append('# Head: serves the API on %s:%s; start it after the worker.' % (api['host'], api['port']))
    else:
        lines.append('# Worker: --headless (no API server, no TCPStore bind); start it before the head.')
    groups = build_argv_groups(eff)
    first = 'exec ' + ' '.join(_q(w) for w in groups[0])
    body = [' '.join(_q(w) for w in g) for g in groups[1:]]
    lines.append(first + ' \\')
    for i, text in enumerate(body):
        lines.append('  ' + text + (' \\' if i < len(body) - 1 else ''))
    return '\n'.join(lines) + '\n'
