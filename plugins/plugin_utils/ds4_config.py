# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Effective configuration for one DGX Spark node: merge, validate, derive.

Pure Python (no Ansible imports) so it is unit-tested with plain pytest.

Layers, lowest first:  base (collection-owned)  <-  profile  <-  site overrides
<-  per-host values (rank, fabric IP, netdev, RDMA HCAs).  The renderer owns the
multi-node flags (--nnodes, --node-rank, --master-addr, --master-port, --headless).

Entry points:
  validate_all(inputs) -> (errors, warnings)
  compute_effective(inputs, host) -> dict (raises Ds4ConfigError with every error)
"""


import copy
import hashlib
import ipaddress
import json
import re
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._security.api_exposure import plan_exposure
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import catalogue
from ansible_collections.dgxspark.ds4.plugins.module_utils._image import compile_cache
from ansible_collections.dgxspark.ds4.plugins.module_utils._fabric import nccl_preflight
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import vllm_schema
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.vllm_schema import JSON_FLAGS
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.system_paths import is_system as is_system_dir
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.launch_render import (
    build_argv,
    render_launch_script,
)

# The shipped recipes (roles/config/files/recipes/<name>.yml) and image families (plugins/plugin_utils/catalogue.py).
PROFILES = tuple(catalogue.recipe_names())
IMAGE_FAMILIES = tuple(sorted(catalogue.IMAGE_FAMILIES))

# Flags the renderer writes from the inventory; nobody may pass them by hand.
RENDERER_FLAGS = {
    'headless': 'the renderer adds --headless to every rank >= 1 (seed 000 failure #5: without it the worker also binds '
                'the TCPStore port 29501); set ds4_node_rank in host_vars instead',
    'node-rank': 'the renderer writes --node-rank from ds4_node_rank; set ds4_node_rank in host_vars/<host>.yml',
    'nnodes': 'the renderer writes --nnodes from the number of hosts in group spark',
    'master-addr': 'the renderer writes --master-addr from the head node\'s ds4_fabric_ip (host_vars of the rank 0 host)',
    'master-port': 'the renderer writes --master-port from ds4_profile_config.master_port; set master_port there',
}
# Flags that come from other parts of the profile.
SECTION_FLAGS = {
    'host': 'set ds4_profile_config.api.host (or ds4_site_overrides.api.host)',
    'port': 'set ds4_profile_config.api.port (or ds4_site_overrides.api.port)',
    'model': 'set ds4_profile_config.model.serve_arg (the positional model argument)',
}
SECRET_FLAGS = ('api-key', 'hf-token')
SECRET_ENV_RE = re.compile(r'(API_KEY|TOKEN|SECRET|PASSWORD)', re.I)

# Per-node env: one value per host from host_vars, never one global value.
PER_NODE_ENV = {
    'VLLM_HOST_IP': 'ds4_fabric_ip',
    'NCCL_SOCKET_IFNAME': 'ds4_fabric_ifname',
    'GLOO_SOCKET_IFNAME': 'ds4_fabric_ifname',
    'TP_SOCKET_IFNAME': 'ds4_fabric_ifname',
    'NCCL_IB_HCA': 'ds4_rdma_hcas',
    'NCCL_IB_GID_INDEX': 'ds4_nccl_ib_gid_index',
    'MASTER_ADDR': 'ds4_fabric_ip of the rank 0 host',
    'NODE_RANK': 'ds4_node_rank',
}

LAYER_KEYS = ('seed', 'image', 'model', 'entrypoint', 'api', 'master_port', 'container', 'env', 'serve_args')
IMAGE_KEYS = ('ref', 'family', 'max_model_len', 'vllm_version')
IMAGE_REQUIRED = ('ref', 'family', 'max_model_len')
MODEL_KEYS = ('repo_id', 'revision', 'host_dir', 'container_dir', 'serve_arg')
API_KEYS = ('host', 'port')
CONTAINER_KEYS = ('gpus', 'runtime', 'privileged', 'shm_size', 'devices', 'memory', 'cache_volumes', 'volumes',
                  'network', 'ipc', 'init', 'ulimits')

NETDEV_RE = re.compile(r'^[A-Za-z0-9_.:-]{1,15}$')
HCA_RE = re.compile(r'^[A-Za-z0-9_.:-]{1,64}$')
ENV_NAME_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
SHA_RE = re.compile(r'^[0-9a-f]{40}$')

DEFAULT_VLLM_CACHE_ROOT = '/root/.cache/vllm'
# The caches vLLM and its kernels write at start (env variable, where it lands when the variable is unset,
# for a container running as root). Each must sit on a writable host volume under /var/cache/dgxspark-ds4/,
# or every restart recompiles and re-autotunes (seed 000: the warm compile cache is +39 % decode).
PERSISTENT_CACHES = (
    ('VLLM_CACHE_ROOT', DEFAULT_VLLM_CACHE_ROOT, 'vLLM (torch.compile artifacts, cudagraph captures)'),
    ('TRITON_CACHE_DIR', '/root/.triton/cache', 'Triton kernels'),
    ('TORCHINDUCTOR_CACHE_DIR', '/tmp/torchinductor_root', 'TorchInductor'),
    ('FLASHINFER_WORKSPACE_BASE', '/root', 'FlashInfer JIT and autotune (<base>/.cache/flashinfer)'),
)
DEFAULT_NODE_MEMORY_GIB = 128
GPUS_PER_NODE = 1

UTIL_CAP_96 = 0.78
UTIL_CAP_128 = 0.90


class Ds4ConfigError(Exception):
    """Raised with every validation error at once."""

    def __init__(self, errors: list[str], warnings: list[str] | None = None) -> None:
        self.errors = list(errors)
        self.warnings = list(warnings or [])
        super(Ds4ConfigError, self).__init__('\n'.join(self.errors))


def normalize_flag(name: Any) -> str:
    """'--max_num_seqs' -> 'max-num-seqs'."""
    return str(name).strip().lstrip('-').replace('_', '-')


def _fmt(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=False)
    except (TypeError, ValueError):
        return repr(value)


def _msg(var: str, value: Any, why: str, fix: str, host: str | None = None) -> str:
    where = '[host %s] ' % host if host else ''
    return '%s%s = %s: %s. Fix: %s.' % (where, var, _fmt(value), why, fix)


def util_cap(node_memory_gib: int) -> float:
    """Safe --gpu-memory-utilization for a node: 0.78 at <=96 GiB (seed 002), 0.90 at 128 GiB (seed 000)."""
    if node_memory_gib >= 128:
        return UTIL_CAP_128
    return UTIL_CAP_96


# --------------------------------------------------------------------------- layers

def _norm_serve_args(layer_name: str, var: str, args: Any, errors: list[str], base_owned: dict[str, Any]) -> dict[str, Any]:
    """Normalise one layer's serve_args; report spelling twins and owned flags."""
    out: dict[str, Any] = {}
    if args is None:
        return out
    if not isinstance(args, dict):
        errors.append(_msg(var, args, 'serve_args must be a mapping of flag -> value', 'write e.g. {max-num-seqs: 4}'))
        return out
    seen: dict[str, Any] = {}
    for raw, value in args.items():
        flag = normalize_flag(raw)
        fvar = '%s[%s]' % (var, raw)
        if not flag:
            errors.append(_msg(fvar, value, 'empty flag name', 'remove the entry'))
            continue
        if flag in seen:
            errors.append(_msg(fvar, value, 'flag --%s is set twice in %s (also as %r); one flag, one value' % (flag, layer_name, seen[flag]),
                               'keep one spelling and delete the other'))
            continue
        seen[flag] = raw
        if flag in RENDERER_FLAGS:
            errors.append(_msg(fvar, value, '--%s is owned by the renderer: %s' % (flag, RENDERER_FLAGS[flag]),
                               'delete it from %s' % var))
            continue
        if flag in SECTION_FLAGS:
            errors.append(_msg(fvar, value, '--%s is not a serve_args entry' % flag, SECTION_FLAGS[flag]))
            continue
        if flag in SECRET_FLAGS:
            errors.append(_msg(fvar, '***', '--%s is a secret; argv shows in docker inspect, /proc/<pid>/cmdline and (vLLM 0.27.1) '
                                            'the "non-default args" log line' % flag,
                               'leave it out of serve_args; secrets go to the 0600 env file (e.g. VLLM_API_KEY)'))
            continue
        if flag in base_owned:
            errors.append(_msg(fvar, value, '--%s is set by the collection base layer to %s (a flag set twice across layers)'
                               % (flag, _fmt(base_owned[flag])), 'delete it from %s' % var))
            continue
        if value is False:
            errors.append(_msg(fvar, value, 'a boolean flag is either present (true) or absent',
                               'use true to pass --%s, or null in ds4_site_overrides to drop a profile flag' % flag))
            continue
        if value is None and layer_name != 'site overrides':
            errors.append(_msg(fvar, value, 'null only removes a profile flag from ds4_site_overrides',
                               'delete the entry or give it a value'))
            continue
        out[flag] = value
    return out


def _check_env_layer(layer_name: str, var: str, env: Any, errors: list[str], base_env: dict[str, str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    if env is None:
        return out
    if not isinstance(env, dict):
        errors.append(_msg(var, env, 'env must be a mapping NAME -> value', 'write e.g. {OMP_NUM_THREADS: "8"}'))
        return out
    for name, value in env.items():
        evar = '%s[%s]' % (var, name)
        name = str(name)
        if not ENV_NAME_RE.match(name):
            errors.append(_msg(evar, value, 'not a valid environment variable name', 'use letters, digits and _'))
            continue
        if name in PER_NODE_ENV:
            errors.append(_msg(evar, value, '%s differs per node and is rendered from host_vars (%s); one global value for a '
                               'per-node setting wedges NCCL/Gloo (vllm-ops 2.B/2.C)' % (name, PER_NODE_ENV[name]),
                               'delete it from %s and set %s in host_vars/<host>.yml' % (var, PER_NODE_ENV[name])))
            continue
        if SECRET_ENV_RE.search(name):
            errors.append(_msg(evar, '***', '%s looks like a secret; the launch script is not a secret store' % name,
                               'remove it; secrets go to the 0600 env file, never the launch script'))
            continue
        if name in base_env:
            errors.append(_msg(evar, value, '%s is set by the collection base layer to %s (set twice across layers)'
                               % (name, _fmt(base_env[name])), 'delete it from %s' % var))
            continue
        if value is None:
            if layer_name != 'site overrides':
                errors.append(_msg(evar, value, 'null only removes a profile env var from ds4_site_overrides',
                                   'delete the entry or give it a value'))
                continue
            out[name] = None
            continue
        if isinstance(value, bool) or isinstance(value, (dict, list)):
            errors.append(_msg(evar, value, 'env values must be strings or numbers (a YAML boolean renders ambiguously)',
                               'quote it, e.g. "1" or "0"'))
            continue
        value = str(value)
        if '\n' in value or '\0' in value:
            errors.append(_msg(evar, value, 'env values must be one line', 'remove the newline'))
            continue
        if name == 'VLLM_WORKER_MULTIPROC_METHOD' and value.strip().lower() == 'fork':
            errors.append(_msg(evar, value, 'seed 000 (May 30 addendum, breakage #2): a drifted relaunch with '
                               'VLLM_WORKER_MULTIPROC_METHOD=fork crashed engine startup with '
                               "AttributeError: 'ShmRingBuffer' object has no attribute 'shared_memory'",
                               'delete VLLM_WORKER_MULTIPROC_METHOD (the known-good scripts never set it)'))
            continue
        out[name] = value
    return out


def _layer(inputs: dict[str, Any], key: str) -> Any:
    value = inputs.get(key)
    return {} if value is None else value


def merge_layers(base: dict[str, Any], profile: Any, site: Any,
                 errors: list[str]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Merge base <- profile <- site.  Returns (merged, overrides)."""
    overrides: list[dict[str, Any]] = []
    base_args = dict((normalize_flag(k), v) for k, v in (base.get('serve_args') or {}).items())
    base_env = dict((str(k), str(v)) for k, v in (base.get('env') or {}).items())
    base_container = base.get('container') or {}

    layers = (('profile', 'ds4_profile_config', profile), ('site overrides', 'ds4_site_overrides', site))
    for lname, var, layer in layers:
        if not isinstance(layer, dict):
            errors.append(_msg(var, layer, 'must be a mapping', 'see roles/config/README.md for the layer shape'))
            return None, overrides
        for key in layer:
            if key not in LAYER_KEYS:
                errors.append(_msg('%s.%s' % (var, key), layer[key], 'unknown key', 'use one of: %s' % ', '.join(LAYER_KEYS)))

    merged: dict[str, Any] = {
        'seed': profile.get('seed'),
        'image': {}, 'model': {}, 'api': {}, 'entrypoint': None, 'master_port': None,
        'container': copy.deepcopy(base_container), 'env': dict(base_env), 'serve_args': dict(base_args),
        'sources': dict((k, 'config_base.serve_args') for k in base_args),
    }
    for lname, var, layer in layers:
        if not isinstance(layer, dict):
            continue
        for section, allowed in (('image', IMAGE_KEYS), ('model', MODEL_KEYS), ('api', API_KEYS)):
            sub = layer.get(section)
            if sub is None:
                continue
            if not isinstance(sub, dict):
                errors.append(_msg('%s.%s' % (var, section), sub, 'must be a mapping', 'keys: %s' % ', '.join(allowed)))
                continue
            for k, v in sub.items():
                if k not in allowed:
                    errors.append(_msg('%s.%s.%s' % (var, section, k), v, 'unknown key', 'use one of: %s' % ', '.join(allowed)))
                    continue
                if lname == 'site overrides' and k in merged[section] and merged[section][k] != v:
                    overrides.append({'key': '%s.%s' % (section, k), 'profile': merged[section][k], 'site': v})
                merged[section][k] = v
        for scalar in ('entrypoint', 'master_port'):
            if scalar in layer:
                if lname == 'site overrides' and merged[scalar] is not None and merged[scalar] != layer[scalar]:
                    overrides.append({'key': scalar, 'profile': merged[scalar], 'site': layer[scalar]})
                merged[scalar] = layer[scalar]
        cont = layer.get('container')
        if cont is not None:
            if not isinstance(cont, dict):
                errors.append(_msg('%s.container' % var, cont, 'must be a mapping', 'keys: %s' % ', '.join(CONTAINER_KEYS)))
            else:
                for k, v in cont.items():
                    kvar = '%s.container.%s' % (var, k)
                    if k not in CONTAINER_KEYS:
                        errors.append(_msg(kvar, v, 'unknown key', 'use one of: %s' % ', '.join(CONTAINER_KEYS)))
                    elif k in base_container:
                        errors.append(_msg(kvar, v, 'container.%s is set by the collection base layer to %s (set twice across layers)'
                                           % (k, _fmt(base_container[k])), 'delete it from %s' % var))
                    else:
                        if lname == 'site overrides' and k in merged['container'] and merged['container'][k] != v:
                            overrides.append({'key': 'container.%s' % k, 'profile': merged['container'][k], 'site': v})
                        if v is None:
                            merged['container'].pop(k, None)
                        else:
                            merged['container'][k] = v
        env = _check_env_layer(lname, '%s.env' % var, layer.get('env'), errors, base_env)
        for k, v in env.items():
            if lname == 'site overrides' and (k in merged['env'] or v is not None) and merged['env'].get(k) != v:
                overrides.append({'key': 'env.%s' % k, 'profile': merged['env'].get(k), 'site': v})
            if v is None:
                merged['env'].pop(k, None)
            else:
                merged['env'][k] = v
        args = _norm_serve_args(lname, '%s.serve_args' % var, layer.get('serve_args'), errors, base_args)
        for k, v in args.items():
            if lname == 'site overrides' and merged['serve_args'].get(k) != v:
                overrides.append({'key': 'serve_args.%s' % k, 'profile': merged['serve_args'].get(k), 'site': v})
            if v is None:
                merged['serve_args'].pop(k, None)
                merged['sources'].pop(k, None)
            else:
                merged['serve_args'][k] = v
                merged['sources'][k] = '%s.serve_args' % var
    return merged, overrides


# --------------------------------------------------------------------------- checks

def _is_abs(path: Any) -> bool:
    return isinstance(path, str) and path.startswith('/') and '\n' not in path


def _port_ok(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def _cache_volumes(container: dict[str, Any], errors: list[str]) -> list[tuple[str, str]]:
    """container.cache_volumes: mapping host dir -> container dir."""
    vols = container.get('cache_volumes') or {}
    out: list[tuple[str, str]] = []
    if not isinstance(vols, dict):
        errors.append(_msg('ds4_profile_config.container.cache_volumes', vols, 'must be a mapping host dir -> container dir',
                           'write e.g. {/var/cache/dgxspark-ds4/vllm: /root/.cache/vllm}'))
        return out
    for host_dir, cont_dir in vols.items():
        if not _is_abs(host_dir) or not _is_abs(cont_dir):
            errors.append(_msg('ds4_profile_config.container.cache_volumes[%s]' % host_dir, cont_dir,
                               'both sides of a cache volume must be absolute paths', 'use /host/dir: /container/dir'))
            continue
        out.append((host_dir, cont_dir))
    return out


def cache_paths(env: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``[(env name, what, container path)]`` of the caches in :data:`PERSISTENT_CACHES` for this env."""
    out = []
    for name, default, what in PERSISTENT_CACHES:
        path = env.get(name) or default
        if name == 'FLASHINFER_WORKSPACE_BASE':
            path = path.rstrip('/') + '/.cache/flashinfer'
        out.append((name, what, path))
    return out


def cache_gaps(merged: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The caches of :func:`cache_paths` that no ``container.cache_volumes`` entry holds."""
    vols = merged['container'].get('cache_volumes') or {}
    if not isinstance(vols, dict):
        return []
    cdirs = [c for c in vols.values() if _is_abs(c)]
    return [(n, w, p) for n, w, p in cache_paths(merged['env']) if not any(_under(p, c) for c in cdirs)]


def _under(path: str, parent: str) -> bool:
    parent = parent.rstrip('/') or '/'
    return path == parent or path.startswith(parent + '/')


def tool_calls(merged: dict[str, Any]) -> dict[str, Any]:
    """How the served endpoint handles tool calls, from serve_args: ``{'parser', 'auto', 'tool_choice', 'note'}``.

    ``tool_choice`` is what validate.yml's tool-call check sends: ``auto`` (the model decides; vLLM's tool parser turns
    its text into ``tool_calls``) when ``--enable-auto-tool-choice`` and ``--tool-call-parser`` are both set, else
    ``required`` (vLLM forces a call of the given tools with guided decoding; no parser needed). ``note`` (None when
    auto works) is the one line that render time (config role warnings) and validate.yml print.
    """
    args = merged.get('serve_args') or {}
    parser = args.get('tool-call-parser') or None
    auto = bool(args.get('enable-auto-tool-choice')) and parser is not None
    out: dict[str, Any] = {'parser': parser, 'auto': auto, 'tool_choice': 'auto' if auto else 'required', 'note': None}
    if auto:
        return out
    recipe = (merged.get('choice') or {}).get('recipe')
    who = ('recipe %s' % recipe) if recipe else 'ds4_profile_config (own profile)'
    flags = (('--tool-call-parser', parser is not None),
             ('--enable-auto-tool-choice', bool(args.get('enable-auto-tool-choice'))))
    missing = ' and '.join(name for name, ok in flags if not ok)
    out['note'] = ('%s sets no %s%s: clients that send tools with tool_choice "auto" (the default when tools are given) '
                   'get HTTP 400 from vLLM, and tool calls come back as tool_calls only with tool_choice "required" or a '
                   'named function (guided decoding); validate.yml checks the tool call with tool_choice "required". Fix '
                   'when the image has the parser: serve_args tool-call-parser: deepseek_v4 and enable-auto-tool-choice: true.'
                   % (who, missing, ' (seed 003 lists only core flags)' if merged.get('image', {}).get('family') == 'dspark' else ''))
    return out


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def launch_facts(eff: dict[str, Any]) -> dict[str, Any]:
    """What the readiness gate, a rollback, the drains and the regression kit need of this rank's launch, published
    as ds4_effective.launch and copied into the rank's deployed record (deployed-<role>.json, part of the config set a
    rollback restores): the values the launch script is rendered from, never read back from it.

    served_model_name, max_model_len, max_num_seqs: the serve args; thinking: the default chat template kwargs ask
    for it; vllm_port / vllm_host: vLLM's own --port / --host (loopback); public_port: what clients use (the proxy's
    port when the API is exposed); engine_url: vLLM as a process on the head reaches it; headless: the worker."""
    args = eff['serve_args']
    kwargs = args.get('default-chat-template-kwargs')
    if isinstance(kwargs, str):
        try:
            kwargs = json.loads(kwargs)
        except ValueError:
            kwargs = {}
    return {
        'served_model_name': args.get('served-model-name'),
        'max_model_len': _int_or_none(args.get('max-model-len')),
        'max_num_seqs': _int_or_none(args.get('max-num-seqs')),
        'thinking': bool(isinstance(kwargs, dict) and (kwargs.get('thinking') or kwargs.get('enable_thinking'))),
        'vllm_port': eff['api']['port'],
        'vllm_host': eff['api']['host'],
        'public_port': eff['api']['public_port'],
        'engine_url': eff['api']['engine_url'],
        'headless': eff['node_rank'] != 0,
    }


def compile_cache_plan(merged: dict[str, Any]) -> dict[str, Any]:
    """Where vLLM's torch.compile cache lands: ``{'container_dir', 'host_dir', 'custom_ops_all', 'launch_digest'}``.

    ``container_dir``: ``--compilation-config`` ``cache_dir``, else ``$VLLM_CACHE_ROOT/torch_compile_cache`` (vLLM's
    layout); None with ``--enforce-eager`` or ``VLLM_DISABLE_COMPILE_CACHE=1`` (nothing is cached). ``host_dir``: its
    host side through ``container.cache_volumes`` (None when no cache volume holds it). The vllm_service role looks
    into it before a start (module service_preflight, compile_cache's verdict), and the readiness gate marks it with the image that served and
    ``launch_digest`` (sha256 of the node-independent serve_args and env: a changed flag counts as a cold cache).
    """
    args = merged.get('serve_args') or {}
    env = merged.get('env') or {}
    comp_value = args.get('compilation-config')
    comp = comp_value if isinstance(comp_value, dict) else {}
    ops = comp.get('custom_ops')
    digest = hashlib.sha256(json.dumps({'serve_args': args, 'env': env}, sort_keys=True, default=str).encode('utf-8')).hexdigest()
    out = {'container_dir': None, 'host_dir': None, 'custom_ops_all': isinstance(ops, list) and 'all' in ops,
           'launch_digest': digest[:16]}
    if args.get('enforce-eager') is True or str(env.get('VLLM_DISABLE_COMPILE_CACHE', '')).strip() in ('1', 'true', 'True'):
        return out
    root = env.get('VLLM_CACHE_ROOT') or DEFAULT_VLLM_CACHE_ROOT
    given = comp.get('cache_dir')
    cdir: str = given if isinstance(given, str) and given else root.rstrip('/') + '/torch_compile_cache'
    vols = (merged.get('container') or {}).get('cache_volumes') or {}
    out['container_dir'] = cdir
    out['host_dir'] = compile_cache.host_path(cdir, vols if isinstance(vols, dict) else {})
    return out


def check_merged(merged: dict[str, Any], errors: list[str], warnings: list[str]) -> None:
    """Rules on the merged (node-independent) configuration."""
    image = merged['image']
    model = merged['model']
    api = merged['api']
    args = merged['serve_args']
    env = merged['env']
    container = merged['container']
    sources = merged.get('sources') or {}

    def fvar(flag: str, suffix: str = '') -> str:
        return '%s[%s]%s' % (sources.get(flag, 'serve_args'), flag, suffix)

    for k in IMAGE_REQUIRED:
        if image.get(k) in (None, ''):
            errors.append(_msg('ds4_profile_config.image.%s' % k, image.get(k), 'required', 'set image.%s in the profile' % k))
    if image.get('family') not in (None, '') and image.get('family') not in IMAGE_FAMILIES:
        errors.append(_msg('ds4_profile_config.image.family', image.get('family'), 'unknown image family',
                           'use one of: %s' % ', '.join(IMAGE_FAMILIES)))
    img_max = image.get('max_model_len')
    if img_max is not None and (not isinstance(img_max, int) or isinstance(img_max, bool) or img_max <= 0):
        errors.append(_msg('ds4_profile_config.image.max_model_len', img_max, 'must be a positive integer',
                           'set the largest context the image was validated at'))
        img_max = None

    for k in ('repo_id', 'host_dir', 'container_dir', 'serve_arg'):
        if model.get(k) in (None, ''):
            errors.append(_msg('ds4_profile_config.model.%s' % k, model.get(k), 'required', 'set model.%s in the profile' % k))
    for k in ('host_dir', 'container_dir'):
        if model.get(k) not in (None, '') and not _is_abs(model.get(k)):
            errors.append(_msg('ds4_profile_config.model.%s' % k, model.get(k), 'must be an absolute path', 'start it with /'))
    if _is_abs(model.get('host_dir')) and is_system_dir(model['host_dir']):
        errors.append(_msg('ds4_profile_config.model.host_dir', model['host_dir'],
                           'is a system directory (or one another package owns): the collection renames the directory it '
                           'finds there into <host_dir>.revs/ and serves and prunes revisions beside it',
                           'a directory of its own, e.g. /srv/dgxspark-ds4/models/DeepSeek-V4-Flash'))
    if model.get('serve_arg') not in (None, '') and model.get('serve_arg') not in (model.get('repo_id'), model.get('container_dir')):
        errors.append(_msg('ds4_profile_config.model.serve_arg', model.get('serve_arg'),
                           'the positional model argument must be the container path or the repo id',
                           'set it to %s or %s' % (_fmt(model.get('container_dir')), _fmt(model.get('repo_id')))))
    rev = model.get('revision')
    if rev in (None, ''):
        pass  # validate_all: an error where the revision is downloaded (site.yml, switch.yml), else a warning
    elif not isinstance(rev, str) or not SHA_RE.match(rev):
        errors.append(_msg('ds4_profile_config.model.revision', rev, 'must be a pinned 40-hex commit id, not a branch or tag',
                           'set the commit sha of the downloaded snapshot (or null while you have none)'))

    entry = merged.get('entrypoint')
    if not isinstance(entry, list) or not entry or not all(isinstance(e, str) and e for e in entry):
        errors.append(_msg('ds4_profile_config.entrypoint', entry, 'must be a non-empty list of strings',
                           'e.g. [vllm, serve] or [/usr/local/bin/dsv4-vllm-entrypoint, serve]'))

    if not _port_ok(api.get('port')):
        errors.append(_msg('ds4_profile_config.api.port', api.get('port'), 'must be an integer 1-65535', 'e.g. 8000'))
    if not isinstance(api.get('host'), str) or not api.get('host'):
        errors.append(_msg('ds4_profile_config.api.host', api.get('host'), 'required (the address vLLM binds)',
                           'set 127.0.0.1; expose the API with ds4_api_allowed_networks'))
    else:
        try:
            ipaddress.ip_address(api['host'])
        except ValueError:
            errors.append(_msg('ds4_profile_config.api.host', api['host'], 'must be an IP address',
                               'set 127.0.0.1; expose the API with ds4_api_allowed_networks'))
    mport: Any = merged.get('master_port')
    if not _port_ok(mport) or mport < 1024:
        errors.append(_msg('ds4_profile_config.master_port', mport, 'must be an integer 1024-65535 (the TCPStore port)',
                           'e.g. 29501 (seed 000) or 25000 (seed 001)'))
    elif _port_ok(api.get('port')) and mport == api.get('port'):
        errors.append(_msg('ds4_profile_config.master_port', mport,
                           'equals api.port; the head binds both on the host network, so the second bind fails with '
                           'EADDRINUSE (seed 000 failure #5 shows what a TCPStore port clash does)',
                           'use distinct ports, e.g. api.port 8000 and master_port 29501'))

    # JSON-valued flags
    for flag in sorted(JSON_FLAGS):
        if flag in args and not isinstance(args[flag], dict):
            errors.append(_msg(fvar(flag), args[flag],
                               '--%s takes JSON and must be a YAML mapping, not a string: seed 000 failure #6, JSON passed '
                               'through nested shells lost its quotes and vLLM silently fell back to the default' % flag,
                               'write it as a mapping, e.g. %s: {cudagraph_mode: PIECEWISE}' % flag))
    for flag, value in args.items():
        if isinstance(value, dict) and flag not in JSON_FLAGS:
            warnings.append('serve_args[%s] is a mapping; it renders as compact JSON. Check that --%s takes JSON.' % (flag, flag))

    # custom_ops all without a persistent compile cache. Only the writable cache volumes count: the model is mounted
    # read-only, so a cache under its container_dir is neither persistent nor writable (vLLM fails to write it at
    # start). Whether the cache is warm for the image is looked at on the node before a start (vllm_service,
    # module compile_cache: seed 002's warning on a cold cache of a 96 GB node).
    _cache_volumes(container, errors)
    cplan = compile_cache_plan(merged)
    if cplan['custom_ops_all'] and cplan['container_dir'] and cplan['host_dir'] is None:
        errors.append(_msg(fvar('compilation-config', '.custom_ops'), args['compilation-config']['custom_ops'],
                           'custom_ops ["all"] without a persistent compile-cache volume: seed 002 froze both nodes '
                           '(TileLang/nvcc fusion compile exhausted unified memory during load); seed 000 only runs it '
                           'with ~/.cache/vllm on a volume',
                           'add container.cache_volumes {<host dir>: %s} or drop custom_ops'
                           % env.get('VLLM_CACHE_ROOT', DEFAULT_VLLM_CACHE_ROOT)))

    for name, where, cdir in cache_gaps(merged):
        warnings.append('%s cache at %s (env %s) is not on a persistent cache volume: every restart recompiles or '
                        're-autotunes it (seed 000: the warm compile cache is worth +39 %% decode). Fix: add '
                        'container.cache_volumes {/var/cache/dgxspark-ds4/<name>: %s} and set env %s to it.'
                        % (where, cdir, name, cdir, name))

    note = tool_calls(merged)['note']
    if note:
        warnings.append(note)

    if args.get('enforce-eager') is True:
        warnings.append('serve_args[enforce-eager]: seed 000 measured decode 44 -> ~25 tok/s with --enforce-eager; '
                        'use PIECEWISE cudagraphs instead (seed 002).')
    spec = args.get('speculative-config')
    if isinstance(spec, dict) and spec.get('method') == 'deepseek_mtp':
        n = spec.get('num_speculative_tokens')
        if isinstance(n, int) and not isinstance(n, bool) and n >= 3:
            warnings.append('serve_args[speculative-config] deepseek_mtp num_speculative_tokens=%d: seed 000 measured MTP=3 '
                            'slower than MTP=2 (~38 -> ~35 tok/s, acceptance 1.46 -> 1.44 tokens/step). Use 2.' % n)

    mml = args.get('max-model-len')
    if mml is not None:
        if not isinstance(mml, int) or isinstance(mml, bool) or mml <= 0:
            errors.append(_msg(fvar('max-model-len'), mml, 'must be a positive integer', 'e.g. 131072'))
        elif isinstance(img_max, int) and mml > img_max:
            errors.append(_msg(fvar('max-model-len'), mml,
                               'above the %d tokens image %s supports (image.max_model_len)' % (img_max, _fmt(image.get('ref'))),
                               'lower max-model-len to <= %d or choose an image validated at that length' % img_max))

    util = args.get('gpu-memory-utilization')
    if util is not None and (isinstance(util, bool) or not isinstance(util, (int, float)) or not 0 < util <= 1):
        errors.append(_msg(fvar('gpu-memory-utilization'), util, 'must be a number in (0, 1]', 'e.g. 0.80'))

    for k in ('devices', 'volumes'):
        v = container.get(k)
        if v is not None and (not isinstance(v, list) or not all(isinstance(i, str) and i for i in v)):
            errors.append(_msg('ds4_profile_config.container.%s' % k, v, 'must be a list of strings',
                               'e.g. [/dev/infiniband:/dev/infiniband]'))
        elif v:
            for item in v:
                if not item.startswith('/'):
                    errors.append(_msg('ds4_profile_config.container.%s' % k, item, 'host side must be an absolute path',
                                       'write /host/path:/container/path[:ro]'))


def schema_context(merged: dict[str, Any], site: dict[str, Any]) -> dict[str, Any]:
    """What the flag-schema check needs besides serve_args and env, kept in ds4_effective['vllm_schema'] so that
    dgxspark.ds4.container_image can check them again against the vLLM version the image itself carries
    (check_image_vllm): the variable that declares the version, where each flag was set, the site's env names."""
    declared_var = ('ds4_site_overrides.image.vllm_version' if isinstance(site.get('image'), dict) and 'vllm_version' in site['image']
                    else 'ds4_profile_config.image.vllm_version')
    site_env_value = site.get('env')
    site_env = site_env_value if isinstance(site_env_value, dict) else {}
    return {'declared_var': declared_var, 'sources': dict(merged.get('sources') or {}), 'site_env': sorted(site_env)}


def _check_schema(version: Any, where: str, merged: dict[str, Any], context: dict[str, Any], errors: list[str],
                  warnings: list[str], no_schema_fix: str) -> None:
    """serve_args and env of `merged` against the flag schema of vLLM `version` (`where` names where the version came from)."""
    known = ', '.join(vllm_schema.available_versions()) or 'none'
    schema, used, problem = vllm_schema.schema_for(version)
    if schema is None:
        warnings.append('%s = %s: no flag schema for this vLLM version (have: %s), so serve_args and env are not checked against '
                        'vLLM\'s own parser. Generate one with tools/vllm_flag_schema.py from the vllm==%s wheel, %s.'
                        % (where, _fmt(version), known, version, no_schema_fix))
        return
    if used != version:
        warnings.append('%s = %s: no flag schema for exactly this vLLM version; serve_args are checked against vllm-%s.json '
                        '(same minor release; patch releases keep the CLI).' % (where, _fmt(version), used))
    index, _short = vllm_schema.flag_index(schema)
    missing = [f for f in sorted(RENDERER_FLAGS) + ['host', 'port'] if f not in index]
    if missing:
        errors.append(_msg(where, version, 'vLLM %s has no %s; the renderer writes them for the two-node mp launch, so '
                           'vllm serve would exit with "unrecognized arguments"' % (version, ', '.join('--' + f for f in missing)),
                           'use an image whose vLLM supports multi-node mp (--nnodes/--node-rank/--headless) and set its version'))
    sources = context.get('sources') or {}
    for flag, path, value, why, fix, level in vllm_schema.check_serve_args(schema, merged['serve_args'], JSON_FLAGS):
        var = '%s[%s]%s' % (sources.get(flag, 'serve_args'), flag, path)
        if level == 'error':
            errors.append(_msg(var, value, why, fix))
        else:
            warnings.append('%s = %s: %s. Fix: %s.' % (var, _fmt(value), why, fix))
    site_env = set(context.get('site_env') or [])
    for name, value, why, fix in vllm_schema.check_env(schema, merged['env']):
        layer = 'ds4_site_overrides' if name in site_env else 'ds4_profile_config'
        if value is None:
            warnings.append('%s.env: %s: %s. Fix: %s.' % (layer, name, why, fix))
        else:
            warnings.append('%s.env[%s] = %s: %s. Fix: %s.' % (layer, name, _fmt(value), why, fix))


def check_vllm_schema(merged: dict[str, Any], site: dict[str, Any], errors: list[str], warnings: list[str]) -> None:
    """serve_args and env against the flag schema of the declared vLLM (image.vllm_version), on the controller before
    any host is contacted. dgxspark.ds4.container_image checks them again against the version the image carries."""
    image = merged['image']
    version = image.get('vllm_version')
    context = schema_context(merged, site)
    where = context['declared_var']
    if version in (None, ''):
        warnings.append('%s is not set: serve_args and env are checked against vLLM\'s flag schema (schemas: %s) only once '
                        'dgxspark.ds4.container_image has read the vLLM version from the image %s. Set image.vllm_version to '
                        'the version the image carries to check them before any host is contacted.'
                        % (where, ', '.join(vllm_schema.available_versions()) or 'none', _fmt(image.get('ref'))))
        return
    if vllm_schema.minor_of(version) is None:
        errors.append(_msg(where, version, 'must be a vLLM version string such as "0.27.1" (a YAML number like 0.33 loses digits)',
                           'quote it, e.g. vllm_version: "0.33.0"'))
        return
    _check_schema(version, where, merged, context, errors, warnings, 'or set the closest version that has one')


def check_image_vllm(eff: dict[str, Any], image_version: Any, image: str | None = None) -> tuple[list[str], list[str]]:
    """(errors, warnings) for the vLLM version an image carries (read from the image by dgxspark.ds4.container_image).

    A declared image.vllm_version of another major.minor is said (a warning naming both), not refused; serve_args and
    env are always checked against the flag schema of the image's own version, and a flag it rejects is refused."""
    errors: list[str] = []
    warnings: list[str] = []
    img = eff.get('image') or {}
    ref = image or img.get('ref')
    context = eff.get('vllm_schema') or {}
    where = context.get('declared_var') or 'ds4_profile_config.image.vllm_version'
    declared = img.get('vllm_version')
    found = vllm_schema.minor_of(image_version)
    if found is None:
        errors.append(_msg('the vLLM version read from the image %s' % ref, image_version,
                           'is not a vLLM version (the image\'s Python found no vllm distribution or package)',
                           'set container_image_python to the Python that runs vLLM in the image (e.g. /opt/venv/bin/python3)'))
        return errors, warnings
    if declared not in (None, '') and vllm_schema.minor_of(declared) != found:
        # Said, not refused: a moving tag (":latest", rebuilt almost daily) carries whatever vLLM it was built with.
        # The flags are checked below against the version the image really carries; only a flag that version's
        # parser rejects is refused.
        warnings.append('the recipe was measured with vLLM %s (%s); the image %s carries vLLM %s (read from the image): its '
                        'flags are checked against vLLM %s\'s own schema and the figures may differ. To silence this: set '
                        '%s: "%s", or pin an image that carries vLLM %s.x'
                        % (declared, where, ref, image_version, image_version, where, image_version, vllm_schema.minor_of(declared)))
    per_node = set(eff.get('per_node_env') or [])
    merged = {'serve_args': eff.get('serve_args') or {},
              'env': dict((k, v) for k, v in (eff.get('env') or {}).items() if k not in per_node)}
    _check_schema(image_version, 'the vLLM version of image %s' % ref, merged, context, errors, warnings,
                  'or use an image whose vLLM version has one')
    return errors, warnings


def validate_inventory(spark_hosts: list[str], hostvars: dict[str, Any], errors: list[str], tp: int = 2,
                       pp: int = 1) -> dict[str, dict[str, Any]]:
    """kubespray-style inventory checks. Returns {host: per-host dict} for the good hosts."""
    nodes: dict[str, dict[str, Any]] = {}
    gpus = len(spark_hosts) * GPUS_PER_NODE
    if tp * pp != gpus:
        errors.append(_msg("groups['spark']", list(spark_hosts),
                           'tensor-parallel-size %d x pipeline-parallel-size %d = %d GPUs, but group spark has %d host(s) '
                           'x %d GPU = %d; TP=2 needs exactly one head (ds4_node_rank 0) and one worker (ds4_node_rank 1)'
                           % (tp, pp, tp * pp, len(spark_hosts), GPUS_PER_NODE, gpus),
                           'put exactly two hosts in group spark (hosts.yml)'))
    for host in spark_hosts:
        hv = hostvars.get(host, {}) or {}
        node: dict[str, Any] = {'host': host}
        ok = True
        rank = hv.get('ds4_node_rank')
        if rank is None:
            errors.append(_msg('ds4_node_rank', rank, 'required: 0 for the head, 1 for the worker', 'set it in host_vars/%s.yml' % host, host))
            ok = False
        elif isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            errors.append(_msg('ds4_node_rank', rank, 'must be an integer (0 head, 1 worker)', 'set ds4_node_rank: 0 or 1', host))
            ok = False
        node['rank'] = rank
        ip = hv.get('ds4_fabric_ip')
        addr = None
        try:
            if not isinstance(ip, str):
                raise ValueError()
            addr = ipaddress.IPv4Address(ip)
            if addr.is_loopback or addr.is_unspecified or addr.is_multicast:
                errors.append(_msg('ds4_fabric_ip', ip, 'must be the ConnectX-7 address of this node, not loopback/unspecified/multicast '
                                   '(Gloo on 127.0.0.1 fails across nodes, seed 002 "V1 engine Gloo 127.0.0.1 bug")',
                                   'set the CX-7 IPv4, e.g. 192.168.100.10', host))
                ok = False
        except ValueError:
            errors.append(_msg('ds4_fabric_ip', ip, 'required: an IPv4 address without prefix',
                               'set the CX-7 fabric IPv4 in host_vars/%s.yml, e.g. 192.168.100.10' % host, host))
            ok = False
        node['ip'] = ip
        prefix: Any = hv.get('ds4_fabric_prefix')  # an int 1-32 once ok
        if isinstance(prefix, bool) or not isinstance(prefix, int) or not 1 <= prefix <= 32:
            errors.append(_msg('ds4_fabric_prefix', prefix, 'required: an integer 1-32', 'set e.g. ds4_fabric_prefix: 24', host))
            ok = False
        node['prefix'] = prefix
        ifname = hv.get('ds4_fabric_ifname')
        if not isinstance(ifname, str) or not NETDEV_RE.match(ifname):
            errors.append(_msg('ds4_fabric_ifname', ifname, 'required: a netdev name of at most 15 characters [A-Za-z0-9_.:-]',
                               'set the netdev holding ds4_fabric_ip, e.g. enp1s0f1np1', host))
            ok = False
        node['ifname'] = ifname
        hcas = hv.get('ds4_rdma_hcas')
        if not isinstance(hcas, list) or not hcas or not all(isinstance(h, str) and HCA_RE.match(h) for h in hcas):
            errors.append(_msg('ds4_rdma_hcas', hcas, 'required: a non-empty list of RDMA device names (both RoCE twins of the '
                               'cabled port: one twin is ~100G, both ~200G)', 'e.g. [rocep1s0f1, roceP2p1s0f1]', host))
            ok = False
        elif len(set(hcas)) != len(hcas):
            errors.append(_msg('ds4_rdma_hcas', hcas, 'lists a device twice', 'list each RDMA device once', host))
            ok = False
        node['hcas'] = hcas
        gid = hv.get('ds4_nccl_ib_gid_index')
        if gid is not None and (isinstance(gid, bool) or not isinstance(gid, int) or gid < 0):
            errors.append(_msg('ds4_nccl_ib_gid_index', gid, 'must be a non-negative integer or unset (NCCL auto-selects)',
                               'leave it unset unless show_gids on this node says otherwise', host))
            ok = False
        node['gid_index'] = gid
        mem = hv.get('ds4_node_memory_gib', DEFAULT_NODE_MEMORY_GIB)
        if isinstance(mem, bool) or not isinstance(mem, int) or not 16 <= mem <= 4096:
            errors.append(_msg('ds4_node_memory_gib', mem, 'must be an integer GiB (96 or 128 for DGX Spark/GB10 kits)',
                               'set ds4_node_memory_gib: 128 (or 96)', host))
            ok = False
        node['memory_gib'] = mem
        ack = hv.get('ds4_ack_unsafe_gpu_memory_utilization', False)
        if not isinstance(ack, bool):
            errors.append(_msg('ds4_ack_unsafe_gpu_memory_utilization', ack, 'must be a boolean', 'true or false', host))
            ok = False
        node['ack_unsafe_util'] = ack is True
        if ok:
            node['network'] = ipaddress.IPv4Network('%s/%d' % (ip, prefix), strict=False)
        nodes[host] = node

    ranks: dict[int, list[str]] = {}
    for host in spark_hosts:
        r = nodes[host]['rank']
        if isinstance(r, int) and not isinstance(r, bool):
            ranks.setdefault(r, []).append(host)
    for r, hosts in sorted(ranks.items()):
        if len(hosts) > 1:
            errors.append(_msg('ds4_node_rank', r, 'set on %s; every node needs its own rank' % ', '.join(hosts),
                               'give the head 0 and the worker 1'))
        if r >= len(spark_hosts) and len(spark_hosts) == 2:
            errors.append(_msg('ds4_node_rank', r, 'out of range for %d nodes (ranks are 0..%d)' % (len(spark_hosts), len(spark_hosts) - 1),
                               'give the head 0 and the worker 1', hosts[0]))
    if len(spark_hosts) == 2 and 0 not in ranks and all(nodes[h]['rank'] is not None for h in spark_hosts):
        errors.append(_msg('ds4_node_rank', [nodes[h]['rank'] for h in spark_hosts], 'no host has rank 0 (the head)',
                           'set ds4_node_rank: 0 on the head'))
    good = [nodes[h] for h in spark_hosts if 'network' in nodes[h]]
    if len(good) == 2:
        a, b = good
        if a['ip'] == b['ip']:
            errors.append(_msg('ds4_fabric_ip', a['ip'], 'set on both %s and %s; head and worker need distinct fabric IPs'
                               % (a['host'], b['host']), 'give each node its own CX-7 address'))
        elif a['network'] != b['network']:
            errors.append(_msg('ds4_fabric_ip', {a['host']: '%s/%s' % (a['ip'], a['prefix']), b['host']: '%s/%s' % (b['ip'], b['prefix'])},
                               'head and worker fabric addresses are not in one subnet (the direct CX-7 link needs one)',
                               'put both on one subnet, e.g. 192.168.100.10/24 and 192.168.100.11/24'))
    return nodes


# --------------------------------------------------------------------------- top level

def _plain(value: Any) -> Any:
    """Copy Ansible's wrapped types into plain Python (str/int/float/bool/None/list/dict)."""
    if isinstance(value, dict) or hasattr(value, 'items'):
        return dict((str(k), _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


# --------------------------------------------------------------------------- interactive during long prompts

INTERACTIVE_VAR = 'ds4_interactive_long_prompts'
THRESHOLD_FLAG = 'long-prefill-token-threshold'
BUDGET_FLAG = 'max-num-batched-tokens'
# --long-prefill-token-threshold = 7/8 of the per-step token budget (the real-vllm-on-device notes, Part 1b, vLLM 0.26.0:
# 224 of 256 cost the long prompt +13 % and a short request's first token came in 0.04-0.05 s instead of 10.3 s; 7168
# of 8192 cost nothing measurable and the short request waited 0.46 s instead of 7.66 s; 64 of 256 cost x3.3).
THRESHOLD_FRACTION = (7, 8)
_TRUE = ('true', 'yes', 'on', '1')
_FALSE = ('false', 'no', 'off', '0', '')


def long_prefill_threshold(budget: int) -> int:
    """--long-prefill-token-threshold for a --max-num-batched-tokens budget: 7/8 of it (rounded down), at least 1."""
    num, den = THRESHOLD_FRACTION
    return max(1, int(budget) * num // den)


def _as_bool(value: Any) -> bool | None:
    """True/False for a YAML/CLI boolean (`-e var=true` arrives as a string), None for anything else."""
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return bool(value) if value in (0, 1) else None
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    return None


def apply_interactive_long_prompts(merged: dict[str, Any], value: Any, errors: list[str]) -> dict[str, Any]:
    """ds4_interactive_long_prompts: on, render --long-prefill-token-threshold N (N = 7/8 of the merged
    --max-num-batched-tokens), listed as a deviation from the seed; off (default), the recipe is left as it is.

    Returns the plan published as ds4_effective.interactive_long_prompts:
    {enabled, threshold, max_num_batched_tokens, fraction, deviation}."""
    plan: dict[str, Any] = {'enabled': False, 'threshold': None, 'max_num_batched_tokens': None,
                            'fraction': '%d/%d' % THRESHOLD_FRACTION, 'deviation': None}
    on = _as_bool(value)
    if on is None:
        errors.append(_msg(INTERACTIVE_VAR, value, 'must be true or false',
                           'set %s: true (short requests get their first token while a long prompt prefills, at a small '
                           'cost to the long prompt; docs/profiles.md "Interactive during long prompts") or false (default: '
                           'the recipe as its seed ran it)' % INTERACTIVE_VAR))
        return plan
    args = merged['serve_args']
    budget = args.get(BUDGET_FLAG)
    plan['max_num_batched_tokens'] = budget if isinstance(budget, int) and not isinstance(budget, bool) else None
    if not on:
        return plan
    sources = merged.setdefault('sources', {})
    recipe = (merged.get('choice') or {}).get('recipe') or 'ds4_profile_config'
    if args.get(THRESHOLD_FLAG) is not None:
        errors.append(_msg(INTERACTIVE_VAR, value, '--%s is already set to %s by %s; the setting derives it and one flag has '
                           'one owner' % (THRESHOLD_FLAG, _fmt(args[THRESHOLD_FLAG]), sources.get(THRESHOLD_FLAG, 'serve_args')),
                           'either remove serve_args %s from %s (the setting then writes 7/8 of --%s), or set %s: false '
                           'and keep your own value' % (THRESHOLD_FLAG, sources.get(THRESHOLD_FLAG, 'serve_args'), BUDGET_FLAG,
                                                        INTERACTIVE_VAR)))
        return plan
    if plan['max_num_batched_tokens'] is None or budget < 2:
        errors.append(_msg(INTERACTIVE_VAR, value, 'the threshold is derived from --%s, and recipe %s %s' % (
            BUDGET_FLAG, recipe, 'does not set it (vLLM then picks a default by version and device)' if budget is None
            else 'sets it to %s, not an integer >= 2' % _fmt(budget)),
            'set ds4_site_overrides.serve_args.%s to the budget to run with (the 1M recipes use 8192), or set serve_args '
            '%s yourself in ds4_site_overrides and leave %s false' % (BUDGET_FLAG, THRESHOLD_FLAG, INTERACTIVE_VAR)))
        return plan
    if args.get('no-enable-chunked-prefill') or args.get('enable-chunked-prefill') is False:
        errors.append(_msg(INTERACTIVE_VAR, value, 'the recipe turns chunked prefill off (--no-enable-chunked-prefill), so a '
                           'long prompt is never split and the threshold cannot make room for other requests',
                           'remove no-enable-chunked-prefill, or set %s: false' % INTERACTIVE_VAR))
        return plan
    n = long_prefill_threshold(budget)
    args[THRESHOLD_FLAG] = n
    sources[THRESHOLD_FLAG] = INTERACTIVE_VAR
    plan.update(enabled=True, threshold=n, deviation=(
        '%s: --%s %d (%s of --%s %d; the seed runs vLLM\'s default, 0): a request that arrives during a long prefill gets '
        'its first token within about one engine step, the long prompt prefills slightly slower'
        % (INTERACTIVE_VAR, THRESHOLD_FLAG, n, plan['fraction'], BUDGET_FLAG, budget)))
    return plan


def revision_check(merged: dict[str, Any], choice: dict[str, Any], required: bool, errors: list[str], warnings: list[str]) -> None:
    """An unpinned model revision: an error where the weights are downloaded (required), else a warning."""
    model = merged['model']
    if model.get('revision') not in (None, ''):
        return
    var, how = catalogue.revision_fix(choice, model.get('repo_id'))
    text = ('%s is not set, so the model revision is not pinned: no source the model catalogue cites publishes a full commit of '
            '%s, and a moving refs/main once resolved to a different checkpoint on a peer deployment (vllm-ops 6); model_cache '
            'downloads only a pinned revision. Fix: %s.' % (var, model.get('repo_id'), how))
    (errors if required else warnings).append(text)


def validate_all(inputs: dict[str, Any]) -> tuple[list[str], list[str], dict[str, Any] | None, list[dict[str, Any]],
                                                  dict[str, dict[str, Any]]]:
    """inputs: {base, spark_hosts, hostvars, ds4_profile, ds4_profile_config, ds4_site_overrides, ds4_model,
    ds4_model_revisions, ds4_interactive_long_prompts, require_model_revision}.

    Returns (errors, warnings, merged, overrides, nodes); merged['choice'] is the recipe/model/family chosen."""
    errors: list[str] = []
    warnings: list[str] = []
    base = _plain(inputs.get('base') or {})
    spark = [str(h) for h in (inputs.get('spark_hosts') or [])]
    hostvars = dict((h, _plain(v)) for h, v in (inputs.get('hostvars') or {}).items())
    # The recipe layer: a shipped recipe chosen by ds4_profile, or the user's own ds4_profile_config (catalogue.py).
    profile, choice, cerrors, cwarnings = catalogue.resolve(dict(
        (k, _plain(inputs.get(k))) for k in ('ds4_profile', 'ds4_profile_config', 'ds4_model', 'ds4_model_revisions')))
    errors.extend(cerrors)
    warnings.extend(cwarnings)
    site = _plain(inputs.get('ds4_site_overrides'))
    if site is None:
        site = {}
    # Shared settings must not differ per host (host_vars overriding group_vars on one node).
    for var in ('ds4_profile', 'ds4_profile_config', 'ds4_site_overrides', 'ds4_api_allowed_networks', 'ds4_api_upstream_port',
                'ds4_model', 'ds4_model_revisions', INTERACTIVE_VAR):
        seen: dict[str, list[str]] = {}
        for h in spark:
            seen.setdefault(json.dumps(hostvars.get(h, {}).get(var), sort_keys=True, default=str), []).append(h)
        if len(seen) > 1:
            errors.append(_msg(var, sorted(seen.values()), 'differs between hosts of group spark; both nodes must run one recipe',
                               'set %s only in group_vars/spark/, not in host_vars' % var))
    merged, overrides = merge_layers(base, profile, site, errors) if profile is not None else (None, [])
    if merged is not None:
        merged['choice'] = choice
        merged['interactive_long_prompts'] = apply_interactive_long_prompts(merged, _plain(inputs.get(INTERACTIVE_VAR)), errors)
        check_merged(merged, errors, warnings)
        revision_check(merged, choice, inputs.get('require_model_revision') is True, errors, warnings)
        catalogue.check_choice(merged, choice, errors)
        check_vllm_schema(merged, site, errors, warnings)
        merged['vllm_schema'] = schema_context(merged, site)
        # API exposure: vLLM binds loopback; ds4_api_allowed_networks puts a proxy in front.
        first = hostvars.get(spark[0], {}) if spark else {}
        plan, perrors, pwarnings = plan_exposure(merged['api'], first.get('ds4_api_allowed_networks'),
                                                 first.get('ds4_api_upstream_port'), merged.get('master_port'))
        errors.extend(perrors)
        warnings.extend(pwarnings)
        merged['api_plan'] = plan
    base_args = dict((normalize_flag(k), v) for k, v in (base.get('serve_args') or {}).items())
    nodes = validate_inventory(spark, hostvars, errors, tp=int(base_args.get('tensor-parallel-size', 2)),
                               pp=int(base_args.get('pipeline-parallel-size', 1)))
    if merged is not None:
        util = merged['serve_args'].get('gpu-memory-utilization')
        if isinstance(util, (int, float)) and not isinstance(util, bool):
            for h in spark:
                node = nodes[h]
                mem = node['memory_gib']
                if not isinstance(mem, int) or isinstance(mem, bool):
                    continue
                cap = util_cap(mem)
                if util > cap:
                    if node['ack_unsafe_util']:
                        warnings.append('[host %s] gpu-memory-utilization %s is above the %s safe cap for a %d GiB node; '
                                        'allowed by ds4_ack_unsafe_gpu_memory_utilization.' % (h, util, cap, mem))
                    else:
                        errors.append(_msg('%s[gpu-memory-utilization]' % merged['sources'].get('gpu-memory-utilization', 'serve_args'), util,
                                           'above the safe cap %s for a %d GiB node (ds4_node_memory_gib): seed 002 hit OOM at 0.82 '
                                           'on 96 GB nodes and settled on 0.78; seed 000 runs 0.90 on 128 GB; unified-memory '
                                           'exhaustion freezes the box (power cycle)' % (cap, mem),
                                           'lower it to <= %s, or set ds4_ack_unsafe_gpu_memory_utilization: true to accept the risk'
                                           % cap, h))
    return errors, warnings, merged, overrides, nodes


def compute_effective(inputs: dict[str, Any], host: str) -> dict[str, Any]:
    """Validate everything, then return ds4_effective for `host`."""
    errors, warnings, merged, overrides, nodes = validate_all(inputs)
    spark = [str(h) for h in (inputs.get('spark_hosts') or [])]
    if host not in spark:
        errors.append(_msg("inventory_hostname", host, 'is not in group spark', 'run the play with hosts: spark'))
    if errors or merged is None:  # merged is None only with errors (validate_all)
        raise Ds4ConfigError(errors, warnings)
    node = nodes[host]
    head = [nodes[h] for h in spark if nodes[h]['rank'] == 0][0]
    rank = node['rank']
    role = 'head' if rank == 0 else 'worker'
    env = dict(merged['env'])
    per_node = [
        ('VLLM_HOST_IP', node['ip']),
        ('NCCL_SOCKET_IFNAME', node['ifname']),
        ('GLOO_SOCKET_IFNAME', node['ifname']),
        ('TP_SOCKET_IFNAME', node['ifname']),
        ('NCCL_IB_HCA', ','.join(node['hcas'])),
    ]
    if node['gid_index'] is not None:
        per_node.append(('NCCL_IB_GID_INDEX', str(node['gid_index'])))
    for k, v in per_node:
        env[k] = v
    choice = merged['choice']
    family = merged['image'].get('family')
    eff: dict[str, Any] = {
        'profile': inputs.get('ds4_profile'),
        # the shipped recipe used (None: the user's own ds4_profile_config), the catalogue model and image family
        'recipe': choice['recipe'],
        'model_name': choice['model'],
        'image_family': dict(catalogue.IMAGE_FAMILIES[family], name=family),
        'seed': merged.get('seed'),
        'host': host,
        'node_rank': rank,
        'role': role,
        'nnodes': len(spark),
        'master_addr': head['ip'],
        'master_port': merged['master_port'],
        'fabric': {'ip': node['ip'], 'prefix': node['prefix'], 'ifname': node['ifname'], 'rdma_hcas': list(node['hcas']),
                   'gid_index': node['gid_index'], 'network': str(node['network'])},
        'node_memory_gib': node['memory_gib'],
        'gpu_memory_utilization_cap': util_cap(node['memory_gib']),
        'api': dict(merged['api_plan']),
        'image': dict(merged['image']),
        'model': dict(merged['model']),
        'entrypoint': list(merged['entrypoint']),
        'container': merged['container'],
        'env': env,
        'per_node_env': [k for k, _v in per_node],
        'serve_args': merged['serve_args'],
        'script_name': 'launch-%s.sh' % role,
        'unit_name': 'dgxspark-ds4-%s.service' % role,
        'env_file_name': 'nccl.env',
        'overrides': overrides,
        # collection settings that change the recipe's seed launch (empty: the seed's flags as the recipe lists them)
        'deviations': [merged['interactive_long_prompts']['deviation']] if merged['interactive_long_prompts']['enabled'] else [],
        'interactive_long_prompts': merged['interactive_long_prompts'],
        'vllm_schema': merged['vllm_schema'],
        'tool_calls': tool_calls(merged),
        'compile_cache': compile_cache_plan(merged),
        'warnings': warnings,
    }
    # Every bind mount of the vLLM container in docker "host:container[:mode]" form, and the
    # host directories the deploy roles must create (model + persistent caches).
    cache = sorted((merged['container'].get('cache_volumes') or {}).items())
    eff['volumes'] = (['%s:%s' % (merged['model']['host_dir'], merged['model']['container_dir'])]
                      + ['%s:%s' % (h, cdir) for h, cdir in cache]
                      + list(merged['container'].get('volumes') or []))
    eff['host_dirs'] = [merged['model']['host_dir']] + [h for h, _c in cache]
    eff['argv'] = build_argv(eff)
    eff['launch_script'] = render_launch_script(eff)
    eff['launch'] = launch_facts(eff)
    # nccl.env as nccl_fabric renders it on the node, from the inventory and the role's values (the config play and
    # the goldens pass them: nccl_fabric_env, nccl_fabric_gid_index, nccl_fabric_exact_match, the role's defaults
    # where the inventory sets none); discovery on the node adds only what the inventory leaves out.
    eff['env_file'] = nccl_preflight.compile_env_file(eff, inputs.get('nccl_fabric_env'), inputs.get('nccl_fabric_gid_index'),
                                                      inputs.get('nccl_fabric_exact_match', True))
    return eff
