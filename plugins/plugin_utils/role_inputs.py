# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role variable checked on the controller before any host changes (controller only, never shipped to a host).

The config role's action plugin (``dgxspark.ds4.effective_config``, the first play of ``render.yml``, ``site.yml`` and
every operations playbook) calls :func:`problems` with each value the inventory or ``-e`` sets for an option of any
role's ``meta/argument_specs.yml``. One source of truth per rule:

- **type and choices**: the argument spec itself (ansible-core's ``ArgumentSpecValidator``, as a role's own
  validation would run on the host, only earlier); a YAML boolean given to a text option is refused (``yes`` for a
  password or a name is a quoting mistake, not the text "True");
- **text**: no control character (newline, carriage return, NUL, the Unicode line separators) in any string of any
  option, however deep in a list or mapping: every value ends up in a line-based file (unit, env file, nginx,
  keepalived, Prometheus' command line) or on a command line;
- **shape by what the value is**, from the option's name and type (:func:`kind`): a path is absolute, normal and of
  ``[A-Za-z0-9._@+/-]`` only (no space, quote or ``$``: it is written into command lines); a directory the collection
  creates, chmods or empties (:data:`OWNED_DIR_SUFFIXES`) is never a system directory or one another package owns
  (plugin_utils/system_paths.py), nor an ancestor of one; a file it writes is never a system file (its directory is the
  collection's own, or its name carries ``dgxspark``/``ds4``); a unit directory is one systemd reads; ports are
  1-65535, intervals and polls at least 1, every other number at least 0 (:data:`RANGES` for the few others);
  unit names, users, package names, addresses and networks by their own syntax; an API key (a name ending in
  ``_api_key``) empty or valid by the one API-key rule (module_utils/_security/api_exposure.py ``api_key_problem``); loopback-only listeners
  (:data:`LOOPBACK_ONLY`) stay on loopback;
- **secrets** (``no_log`` in the spec, or a name with KEY/TOKEN/PASS/SECRET): the refusal names the variable and the
  rule, never the value.

Each problem is one line: the variable, the value (or ``(secret, not shown)``), what is wrong, the fix.
Pure Python (ansible-core's argument spec validator only).
"""


import ipaddress
import json
import os
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import converge_state

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import memory_guard, quality_canary
from ansible_collections.dgxspark.ds4.plugins.module_utils._security.api_exposure import api_key_problem
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.container_logs import docker_log_args
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.service_layout import ARGV_VARS
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.system_paths import is_system as _system

CONTROL_RE = re.compile('[\x00-\x1f\x7f\x85\u2028\u2029]')
PATH_RE = re.compile(r'^/[A-Za-z0-9._@+/-]*$')
UNIT_RE = re.compile(r'^[A-Za-z0-9:_.@\\-]+\.service$')
SERVICE_RE = re.compile(r'^[A-Za-z0-9:_.@-]+$')
USER_RE = re.compile(r'^[a-z_][a-z0-9_-]{0,31}$')
PACKAGE_RE = re.compile(r'^[a-z0-9][a-z0-9+.-]*[a-z0-9+.*-](=[A-Za-z0-9.+:~-]+)?$')
URL_PATH_RE = re.compile(r'^/[A-Za-z0-9._~/-]*$')
# A value written as one word of a command line or one token of a config file (nginx, keepalived, a unit): no
# whitespace, quote, shell or config metacharacter.
TOKEN_BAD_RE = re.compile(r'[\s"\'`$;\\{}<>|&#!]')
MAX_TEXT = 4096

UNIT_DIRS = ('/etc/systemd/system', '/run/systemd/system', '/usr/local/lib/systemd/system')
# Name endings of directories the collection creates, chmods or removes content in.
OWNED_DIR_SUFFIXES = ('_config_dir', '_state_dir', '_libexec_dir', '_evidence_dir', '_cache_dir', '_build_dir',
                      '_control_dir', '_hold_dir', '_web_dir', '_dashboards_dir', '_dir', '_venv')
# Directories the collection only writes its own named files into (shared with their package), or only reads.
SHARED_DIRS = frozenset((
    'monitoring_textfile_dir', 'monitoring_prometheus_rules_dir', 'monitoring_grafana_provisioning_dir',
    'monitoring_prometheus_storage_dir', 'vllm_service_shm_dir', 'vllm_service_forensics_pstore_dir',
    'nccl_fabric_dev_infiniband', 'nccl_fabric_sysfs_root', 'model_cache_local_dir',
))
# Paths the collection only reads (a file or tree of the system, the kernel or the user's).
READ_PATHS = frozenset((
    'vllm_service_docker_bin', 'router_python', 'vllm_service_memory_guard_meminfo_path', 'vllm_service_memory_guard_psi_path',
    'vllm_service_memory_guard_zoneinfo_path', 'vllm_service_memory_guard_min_free_kbytes_path', 'vllm_service_forensics_file',
    'container_image_tarball', 'container_image_build_context', 'container_image_mxfp4_path', 'container_image_metadata_paths',
    'container_image_prune_keep_files', 'nccl_fabric_sysfs_root', 'nccl_fabric_dev_infiniband', 'vllm_service_shm_dir',
    'vllm_service_forensics_pstore_dir', 'model_cache_local_dir', 'router_worker_ca_file',
))
# Listeners that must stay on loopback: their ports have no authentication (the router's admin API, its metrics).
LOOPBACK_ONLY = frozenset(('router_listen_host', 'router_prometheus_host'))
# Free text by design (a shell command, argv lists, env values, authorized_keys options, passwords that are hashed or
# written escaped): only the control character rule applies.
FREE_TEXT = frozenset((
    'container_image_deepgemm_install_command', 'container_image_deepgemm_resolve', 'container_image_deepgemm_probe',
    'router_pip_extra_args', 'peer_access_key_options', 'container_image_build_args', 'nccl_fabric_env',
    'monitoring_prometheus_password', 'monitoring_grafana_admin_password', 'vllm_service_ulimits',
    'vllm_service_memory_guard_thresholds', 'nccl_fabric_ipv4_by_ifname', 'container_image_deepgemm_repo',
    # an ssh argv (an element may hold a space: -o "ProxyCommand ..."); files on the controller, read by Ansible
    'model_cache_peer_ssh', 'monitoring_prometheus_tls_cert', 'monitoring_prometheus_tls_key',
))
# Inclusive ranges beyond the generic ones (see kind()).
RANGES = {
    'host_hardening_vm_overcommit_memory': (0, 1),  # 2: strict accounting fails CUDA's reservations (the role's spec)
    'host_hardening_vm_swappiness': (0, 200),
    'router_vrrp_virtual_router_id': (1, 255),
    'router_vrrp_advert_int': (1, 255),
    'api_proxy_worker_processes': (1, 64),
    'router_cache_threshold': (0, 1),
    'model_cache_hash_workers': (0, 1024),
    'nccl_fabric_preflight_mem_fraction': (0, 1),
    'vllm_service_memory_fraction': (0, 1),  # 0: the memory gate off
}
PORT_NAMES_RE = re.compile(r'_port$')
POSITIVE_RE = re.compile(r'(_interval_s|_poll_s|_polls|_interval|_workers|_streams|_burst|_threshold|_fall|_rise|_ping_count)$')


def kind(name: str, option: dict[str, Any]) -> str:
    """What a value is, from the option's name and spec: 'free' (the control character rule only), 'path-owned',
    'path-write', 'path-shared', 'path-read', 'unit-dir', 'unit', 'service', 'user', 'package', 'url-path', 'loopback',
    'address', 'network', 'size', 'api-key', 'token'."""
    typ = option.get('type', 'str')
    elements = option.get('elements')
    if name.startswith('ds4_') or name in FREE_TEXT or typ in ('dict', 'raw'):
        return 'free'  # ds4_*: the config compile checks them (plugins/plugin_utils/ds4_config.py)
    if name in LOOPBACK_ONLY:
        return 'loopback'
    if name.endswith('_unit_dir'):
        return 'unit-dir'
    if name in READ_PATHS:
        return 'path-read'
    if name in SHARED_DIRS:
        return 'path-shared'
    pathish = typ == 'path' or elements == 'path' or name.endswith(('_path', '_file', '_textfile', '_dir', '_venv'))
    if pathish:
        if name.endswith(OWNED_DIR_SUFFIXES):
            return 'path-owned'
        return 'path-write'
    if name.endswith('_unit_name'):
        return 'unit'
    if name.endswith(('_sshd_service', '_grafana_service')):
        return 'service'
    if name.endswith(('_user', '_users', '_groups')) and not name.endswith('_auth_user'):
        return 'user'  # an account or group name, or a list of them
    if name.endswith('_packages'):
        return 'package'
    if name.endswith('_endpoint') and 'health' in name:
        return 'url-path'
    if name.endswith('_listen_addresses') or name in ('router_vrrp_vip',):
        return 'address'
    if name.endswith('_networks'):
        return 'network'
    if name.endswith('_client_max_body_size') or name.endswith('_retention_size'):
        return 'size'
    if name.endswith('_api_key'):
        return 'api-key'  # empty (no key) or a valid API key (module_utils/_security/api_exposure.py api_key_problem)
    return 'token'


def is_secret(name: str, option: dict[str, Any]) -> bool:
    return bool(option.get('no_log')) or converge_state.is_secret_name(name)


def show(name: str, option: dict[str, Any], value: Any) -> str:
    if is_secret(name, option):
        return '(secret, not shown)'
    try:
        text = '"%s"' % value if isinstance(value, str) else repr(value)
    except Exception:  # pylint: disable=broad-except  # an undecryptable or lazy value
        return '(value not shown)'
    text = text.encode('unicode_escape').decode('ascii') if CONTROL_RE.search(text) else text
    return text if len(text) <= 80 else text[:77] + '...'


def _strings(value: Any, where: str = '') -> Iterator[tuple[str, str]]:
    """(where, string) of every string inside value (list items, mapping keys and values)."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k, '%s key' % where)
            yield from _strings(v, '%s[%s]' % (where, k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _strings(v, '%s[%d]' % (where, i))


def _path_problem(name: str, path: str, what: str) -> tuple[str, str] | None:
    """The problem of one path string, or None."""
    if path == '' and what in ('path-read', 'path-shared'):
        return None
    if not PATH_RE.match(path):
        return ('is not an absolute path of letters, digits and . _ @ + / - (it is written into unit files and command '
                'lines; a space, quote, $ or ~ there is refused)', 'an absolute path such as /var/lib/dgxspark-ds4')
    if path != '/' and (posixpath.normpath(path) != path or path.endswith('/')):
        return 'is not a normal path (// or /./ or /../ or a trailing /)', 'write it as %s' % posixpath.normpath(path)
    if what == 'path-owned':
        if _system(path) or path.count('/') < 2:
            return ('is a system directory or one another package owns (or too near /): the collection creates it, '
                    'sets its owner and mode and removes what it left there',
                    "a directory of the collection's own, e.g. /var/lib/dgxspark-ds4 or /srv/ds4/<name>")
    if what == 'path-write':
        parent = posixpath.dirname(path)
        own = re.search(r'(dgxspark|ds4)', path)
        if _system(path) or (not own and (_system(parent) or parent == '/')):
            return ('is a system file or a file in a directory another package owns: the collection would overwrite it',
                    "a path in the collection's own directory (e.g. /etc/dgxspark-ds4/...) or a file name with dgxspark or "
                    'ds4 in it')
    if what == 'path-shared' and any(path == p or path.startswith(p + '/') for p in ('/proc', '/sys')) \
            and not name.endswith(('_pstore_dir', '_sysfs_root')):
        return 'is under /proc or /sys', 'a directory on disk'
    return None


def _value_problem(name: str, option: dict[str, Any], value: Any, what: str) -> tuple[str, str] | None:
    """(problem, fix) of a value that passed the spec's type check, or None."""
    typ = option.get('type', 'str')
    if typ in ('int', 'float') and isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high = RANGES.get(name, (None, None))
        if low is None:
            if PORT_NAMES_RE.search(name):
                low, high = 1, 65535
            elif POSITIVE_RE.search(name):
                low = 1
            else:
                low = 0
        if value < low or (high is not None and value > high):
            rng = '%s-%s' % (low, high) if high is not None else 'at least %s' % low
            return 'is out of range (%s)' % rng, 'a number %s' % rng
        return None
    if name in RANGES and isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high = RANGES[name]
        if not low <= value <= high:
            return 'is out of range (%s-%s)' % (low, high), 'a number %s-%s' % (low, high)
    items = value if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not isinstance(item, str):
            continue
        if what.startswith('path') and item != '':
            problem = _path_problem(name, item, what)
            if problem:
                return problem
        elif what == 'unit-dir' and item not in UNIT_DIRS:
            return 'is not a directory systemd reads units from', 'one of %s' % ', '.join(UNIT_DIRS)
        elif what == 'unit' and not UNIT_RE.match(item):
            return 'is not a unit name (letters, digits, : _ . @ - and .service)', 'e.g. dgxspark-ds4-router.service'
        elif what == 'service' and not SERVICE_RE.match(item):
            return 'is not a service name', 'e.g. ssh'
        elif what == 'user' and not USER_RE.match(item):
            return 'is not a system user or group name', 'a name such as www-data or sudo'
        elif what == 'package' and not PACKAGE_RE.match(item):
            return 'is not a Debian package name (optionally =version, or a name pattern ending in *)', 'e.g. nginx or nginx=1.24.0-2ubuntu7'
        elif what == 'url-path' and not URL_PATH_RE.match(item):
            return 'is not an URL path', 'e.g. /health'
        elif what == 'loopback':
            try:
                ok = ipaddress.ip_address(item).is_loopback
            except ValueError:
                ok = item == 'localhost'
            if not ok:
                return ('is not a loopback address: this port has no authentication (the router\'s admin API / metrics); '
                        'clients reach the router through its TLS front on ds4_router_port', '127.0.0.1 (the default)')
        elif what == 'address' and item != '':
            try:
                # nginx writes an IPv6 listen address in brackets ("[::]"); keepalived's VIP bare
                ipaddress.ip_address(item[1:-1] if item.startswith('[') and item.endswith(']') and name.endswith('_addresses') else item)
                ok = '%' not in item
            except ValueError:
                ok = False
            if not ok:
                return 'is not an IP address (no port, no %zone)', 'e.g. 10.0.0.10'
        elif what == 'size' and item != '' and not re.match(r'^[0-9]+[kKmMgGtT]?[bB]?$', item):
            return 'is not a size (digits and a unit letter)', 'e.g. 64m'
        elif what == 'api-key' and item != '' and api_key_problem(item):
            return str(api_key_problem(item)), 'generate one (openssl rand -base64 32), or leave it empty for no key'
        elif what == 'token' and TOKEN_BAD_RE.search(item):
            return ('holds whitespace, a quote or one of ` $ ; \\ { } < > | & # ! (it is written as one word of a command '
                    'line or one token of a config file)', 'a value without them')
        elif what == 'network':
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                return 'is not a network in CIDR notation', 'e.g. 10.0.0.0/24'
    return None


def cross_problems(effective: dict[str, Any] | None, values: dict[str, Any], options: dict[str, dict[str, Any]]) -> list[str]:
    """Rules between a role variable and the compiled config (ds4_effective of one host), one line each.

    values: the role variables the inventory sets for that host (as for problems()); an unset one takes its spec default."""
    out: list[str] = []
    api = (effective or {}).get('api') or {}
    if api.get('proxied') and (effective or {}).get('role') == 'head':
        listen = values.get('api_proxy_listen_addresses', options.get('api_proxy_listen_addresses', {}).get('default')) or []
        v6 = [n for n in api.get('allowed_networks') or [] if ':' in str(n)]
        if v6 and not any(':' in str(a) for a in listen):
            out.append('api_proxy_listen_addresses = %s has no IPv6 address, but ds4_api_allowed_networks opens the API to the '
                       'IPv6 networks %s (the firewall would open the port to them and nginx would not answer). Fix: add "[::]" '
                       '(roles/api_proxy/meta/argument_specs.yml).' % (show('api_proxy_listen_addresses', {}, list(listen)), ', '.join(v6)))
    return out


def _merged(values: dict[str, Any], options: dict[str, dict[str, Any]], prefix: str) -> dict[str, Any]:
    """Every option named prefix*: the value the inventory sets, else its spec default (the role's defaults/main.yml)."""
    out = dict((n, o.get('default')) for n, o in options.items() if n.startswith(prefix))
    out.update((n, v) for n, v in values.items() if n.startswith(prefix))
    return out


def _on(value: Any) -> bool:
    """A switch as the role reads it (`| bool`): true, "yes", 1 ... are on; anything else is off."""
    return boolean(value, strict=False)


def argv_settings(values: dict[str, Any], options: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The vllm_service variables the unit's docker run argv reads (service_layout.ARGV_VARS) as the role reads them:
    the inventory's value, else the spec default (the role's defaults/main.yml); the switches as booleans."""
    merged = _merged(values, options, 'vllm_service_')
    out = dict((name, merged.get(name)) for name in ARGV_VARS)
    for name in ('vllm_service_privileged', 'vllm_service_gpu', 'vllm_service_rdma_devices'):
        out[name] = _on(out[name]) if out[name] is not None else False
    return out


def _whole(value: Any, least: int = 1) -> bool:
    return not isinstance(value, bool) and re.match(r'^[0-9]+$', str(value)) is not None and int(value) >= least


def setting_problems(effective: dict[str, Any] | None, values: dict[str, Any], options: dict[str, dict[str, Any]],
                     recipes: Iterable[str]) -> list[str]:
    """Rules among the vllm_service settings of one host (each unset one at its spec default), once in the config play
    instead of the role's preflight on every node: the HF token kept out of the serving container, the container's log
    driver, the memory guard and the quality canary (the checks their node code runs at start), the boot's after-crash
    action and forensics source, the pair guard's polls and ssh sharing, the hang watchdog's windows, evidence pruning,
    the container's ulimits (vllm_service_ulimits, else the recipe's).

    effective: ds4_effective of the host; values: the role variables the inventory sets for it (as for problems());
    recipes: the recipe names (roles/config/files/recipes) a fallback may name. Values still templated are the role's."""
    v = dict((n, x) for n, x in _merged(values, options, 'vllm_service_').items()
             if not (isinstance(x, str) and ('{{' in x or '{%' in x)))
    head = (effective or {}).get('role') == 'head'
    out: list[str] = []
    if v.get('vllm_service_hf_token'):
        out.append('vllm_service_hf_token is set (value hidden): the serving container runs offline and must not get the '
                   'Hugging Face token (anyone who can run docker inspect would read it). Fix: move the value to '
                   'model_cache_hf_token (used by the download task only) and remove vllm_service_hf_token.')
    try:
        docker_log_args(v.get('vllm_service_container_log_driver', 'none'), v.get('vllm_service_container_log_max_size'),
                        v.get('vllm_service_container_log_max_file'))
    except ValueError as exc:
        out.append(str(exc))
    out.extend(memory_guard.check_config({
        'memory_guard': _on(v.get('vllm_service_memory_guard')),
        'memory_guard_thresholds': v.get('vllm_service_memory_guard_thresholds'),
        'memory_gate_psi_some_avg10': v.get('vllm_service_memory_guard_gate_psi_some_avg10'),
        'memory_stop_psi_full_avg10': v.get('vllm_service_memory_guard_stop_psi_full_avg10'),
        'memory_poll_s': v.get('vllm_service_memory_guard_poll_s'),
        'memory_stop_polls': v.get('vllm_service_memory_guard_stop_polls'),
        'memory_clear_polls': v.get('vllm_service_memory_guard_clear_polls'),
        'meminfo_path': v.get('vllm_service_memory_guard_meminfo_path'),
        'psi_path': v.get('vllm_service_memory_guard_psi_path'),
        'zoneinfo_path': v.get('vllm_service_memory_guard_zoneinfo_path'),
        'min_free_kbytes_path': v.get('vllm_service_memory_guard_min_free_kbytes_path')}))
    if head:
        out.extend(quality_canary.settings_problems(dict(
            (key, v.get(var, default)) for key, var, default, _lo, _hi in quality_canary.SETTINGS),
            _on(v.get('vllm_service_canary'))))
    after = v.get('vllm_service_after_crash', 'hold')
    if not (isinstance(after, str) and re.match(r'^(hold|start|fallback:[A-Za-z0-9_-]+)$', after)
            and (not after.startswith('fallback:') or after[9:] in recipes)):
        out.append('vllm_service_after_crash = %s: must be hold, start or fallback:<recipe>, a recipe of '
                   'roles/config/files/recipes (%s). Fix: set it to hold (the default).' % (json.dumps(after), ', '.join(sorted(recipes))))
    source, source_file = v.get('vllm_service_forensics_source'), v.get('vllm_service_forensics_file')
    if source not in ('journal', 'file') or (source == 'file' and not str(source_file or '').startswith('/')):
        out.append('vllm_service_forensics_source = %s, vllm_service_forensics_file = %s: the source is journal (journalctl -b '
                   '-1 and pstore) or file, and a file source needs the absolute path of the log file on each node. Fix: set '
                   'vllm_service_forensics_source: journal.' % (json.dumps(source), json.dumps(source_file)))
    fraction = v.get('vllm_service_memory_fraction')
    if fraction is None:
        fraction = ((effective or {}).get('serve_args') or {}).get('gpu-memory-utilization', 0)
    try:
        fraction_ok = not isinstance(fraction, bool) and 0 <= float(fraction) <= 1
    except (TypeError, ValueError):
        fraction_ok = False
    if not fraction_ok:
        out.append('vllm_service_memory_fraction (or serve_args gpu-memory-utilization) = %s: must be a fraction of MemTotal '
                   'between 0 (gate off) and 1. Fix: set it to e.g. 0.9 or 0.' % (fraction,))
    out.extend(_ulimit_problems(effective, v.get('vllm_service_ulimits')))
    keep, age = v.get('vllm_service_evidence_keep'), v.get('vllm_service_evidence_max_age_days')
    if not (_whole(keep) and _whole(age)):
        out.append('Evidence pruning: vllm_service_evidence_keep=%s (directories kept per kind) and '
                   'vllm_service_evidence_max_age_days=%s (days) must be whole numbers >= 1 (defaults 20 and 30). Fix the '
                   'values; to keep more evidence, raise them.' % (json.dumps(keep), json.dumps(age)))
    if head and _on(v.get('vllm_service_pair_guard')):
        out.extend(_pair_guard_problems(v))
    return out


ULIMIT_NAME_RE = re.compile(r'^[a-z]+$')
ULIMIT_VALUE_RE = re.compile(r'^-?[0-9]+(:-?[0-9]+)?$')


def _ulimit_problems(effective: dict[str, Any] | None, ulimits: Any) -> list[str]:
    """The ulimits the unit's docker run gets (`--ulimit name=value`): vllm_service_ulimits, else the recipe's
    container.ulimits (the base layer sets memlock and stack); each a name (letters) -> an integer or "soft:hard"."""
    source = 'vllm_service_ulimits'
    if ulimits is None:
        source = 'ds4_effective.container.ulimits (the recipe\'s container.ulimits)'
        ulimits = ((effective or {}).get('container') or {}).get('ulimits') or {}
    if isinstance(ulimits, dict) and all(
            isinstance(name, str) and ULIMIT_NAME_RE.match(name) and not isinstance(value, bool)
            and isinstance(value, (int, str)) and ULIMIT_VALUE_RE.match(str(value)) for name, value in ulimits.items()):
        return []
    try:
        shown = json.dumps(ulimits)
    except (TypeError, ValueError):
        shown = repr(ulimits)
    shown = shown.encode('unicode_escape').decode('ascii') if CONTROL_RE.search(shown) else shown
    return ['%s = %s: must map a ulimit name (letters) to an integer or "soft:hard" (docker run --ulimit name=value). '
            'Fix: write e.g. {memlock: -1, stack: 67108864}.' % (source, shown[:200])]


def _pair_guard_problems(v: dict[str, Any]) -> list[str]:
    out: list[str] = []
    polls = ('vllm_service_pair_guard_interval_s', 'vllm_service_pair_guard_down_polls',
             'vllm_service_pair_guard_unreachable_polls', 'vllm_service_pair_guard_ssh_control_persist_s')
    control = v.get('vllm_service_pair_guard_ssh_control_dir') or ''
    if not all(_whole(v.get(n)) for n in polls) or (
            control and not (re.match(r'^/[A-Za-z0-9_./-]+$', str(control)) and len(str(control)) <= 60)):
        out.append('Pair guard: %s must be >= 1; vllm_service_pair_guard_ssh_control_dir=%s an absolute path of at most 60 '
                   'characters without spaces (the ssh control socket ssh-%%C inside it must fit a unix socket path) or "" '
                   '(off). Fix the values.' % (', '.join('%s=%s' % (n, v.get(n)) for n in polls), json.dumps(control)))
    if not _on(v.get('vllm_service_hang_watchdog')):
        return out
    poll: Any
    timeout: Any
    after: Any  # inventory values: _whole() checks them before int()
    poll, timeout, after = (v.get('vllm_service_hang_poll_s'), v.get('vllm_service_hang_metrics_timeout_s'),
                            v.get('vllm_service_hang_after_s'))
    lines, rate, ev_timeout = (v.get('vllm_service_hang_journal_lines'), v.get('vllm_service_hang_prefill_tokens_per_s'),
                               v.get('vllm_service_hang_evidence_timeout_s'))
    textfile = v.get('vllm_service_guard_textfile') or ''
    ok = (_whole(poll) and _whole(timeout) and _whole(after) and int(after) >= 2 * int(poll) and int(after) > int(timeout)
          and _whole(lines) and _whole(rate) and _whole(ev_timeout)
          and str(v.get('vllm_service_evidence_dir', '/')).startswith('/')
          and (not textfile or re.match(r'^/.+\.prom$', str(textfile))))
    if not ok:
        out.append('Hang watchdog: vllm_service_hang_after_s=%s must be at least twice vllm_service_hang_poll_s=%s (>= 1) and '
                   'longer than vllm_service_hang_metrics_timeout_s=%s (>= 1); vllm_service_hang_journal_lines=%s >= 1; '
                   'vllm_service_hang_prefill_tokens_per_s=%s a whole number of tokens per second >= 1 (the prefill rate the '
                   'hang window assumes; 400 is below every rate the seeds measured); vllm_service_hang_evidence_timeout_s=%s '
                   'whole seconds >= 1; vllm_service_evidence_dir=%s absolute; vllm_service_guard_textfile=%s an absolute path '
                   'ending in .prom (the node exporter reads only *.prom) or "". Fix the values, or set '
                   'vllm_service_hang_watchdog: false.'
                   % (after, poll, timeout, lines, json.dumps(rate), json.dumps(ev_timeout), v.get('vllm_service_evidence_dir'),
                      json.dumps(textfile)))
    return out


def _spec_for_validation(option: dict[str, Any]) -> dict[str, Any]:
    """The option's spec for ArgumentSpecValidator: type/elements/choices/options only (no default, never required)."""
    out: dict[str, Any] = {}
    for key in ('type', 'elements', 'choices'):
        if key in option:
            out[key] = option[key]
    if option.get('options'):
        out['options'] = dict((k, _spec_for_validation(v)) for k, v in option['options'].items())
    return out


def options_by_name(specs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{name: option} of every entry point of every role (first definition wins; entry points agree).

    specs: {role: argument_specs mapping}."""
    out: dict[str, dict[str, Any]] = {}
    for role in sorted(specs):
        for entry in (specs[role] or {}).values():
            for name, option in ((entry or {}).get('options') or {}).items():
                out.setdefault(name, dict(option, _role=role))
    return out


def problems(values: dict[str, Any], options: dict[str, dict[str, Any]]) -> list[str]:
    """One line per bad value. values: {name: value} (templated, as the roles would read them); options: options_by_name().

    Names without an option (unknown names are the typo check's, plugins/plugin_utils/known_vars.py) are skipped."""
    out: list[str] = []
    for name in sorted(values):
        option = options.get(name)
        if option is None or name == 'ds4_effective':
            continue
        value = values[name]
        shown = show(name, option, value)
        what = kind(name, option)

        def refuse(problem: str, fix: str) -> None:
            out.append('%s = %s %s. Fix: %s (roles/%s/meta/argument_specs.yml).' % (name, shown, problem, fix, option['_role']))

        bad = [(w, s) for w, s in _strings(value) if CONTROL_RE.search(s)]
        if bad:
            refuse('holds a control character (newline, carriage return, tab, NUL) at %s' % (bad[0][0] or 'the value'),
                   'one line of printable text: it is written into a line-based file or a command line')
            continue
        if any(len(s) > MAX_TEXT for _w, s in _strings(value)):
            refuse('is longer than %d characters' % MAX_TEXT, 'a shorter value')
            continue
        if value is None:
            continue
        typ = option.get('type', 'str')
        if typ in ('str', 'path') and isinstance(value, bool):
            refuse('is a YAML boolean given to a text option (yes/no/true/false unquoted)', 'quote it: "%s"' % str(value).lower()
                   if not is_secret(name, option) else 'quote it')
            continue
        if typ in ('int', 'float') and isinstance(value, bool):
            refuse('is a boolean given to a number', 'a number')
            continue
        if isinstance(value, str) and ('{{' in value or '{%' in value):
            continue  # a template Ansible could not resolve before ds4_effective exists: the role checks it
        result = ArgumentSpecValidator({name: _spec_for_validation(option)}).validate({name: value})
        if result.error_messages:
            message = '; '.join(result.error_messages)
            if is_secret(name, option):
                message = 'is not of the type or choices its argument spec says (%s)' % typ
            else:
                message = 'is refused by its argument spec: %s' % message
            refuse(message, 'a %s%s' % (typ, ' of %s' % option['elements'] if option.get('elements') else '')
                   + (' among %s' % ', '.join(str(c) for c in option['choices']) if option.get('choices') else ''))
            continue
        checked = value if what.startswith('path') or what == 'unit-dir' else result.validated_parameters.get(name, value)
        problem = _value_problem(name, option, checked, what)
        if problem:
            refuse(*problem)
    return out


def load_specs(root: str, load_yaml: Callable[[str], Any]) -> dict[str, Any]:
    """{role: argument_specs} of every role under root/roles (load_yaml: a safe YAML loader of text)."""
    specs: dict[str, Any] = {}
    roles_dir = os.path.join(root, 'roles')
    for role in sorted(os.listdir(roles_dir)):
        path = os.path.join(roles_dir, role, 'meta', 'argument_specs.yml')
        if os.path.isfile(path):
            with open(path) as handle:
                specs[role] = (load_yaml(handle.read()) or {}).get('argument_specs') or {}
    return specs


# The nccl_fabric values the config compile renders nccl.env with (ds4_config: ds4_effective.env_file), as the role
# renders it on the node (nccl_preflight.compile_env_file): one render, the same inputs.
NCCL_FABRIC_INPUTS = ('nccl_fabric_env', 'nccl_fabric_gid_index', 'nccl_fabric_exact_match')


def nccl_fabric_inputs(values: dict[str, Any], options: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """{name: value} of NCCL_FABRIC_INPUTS for one host: the value the inventory or the extra vars set (values, as
    role_values() gives them), else the role's default (options: options_by_name())."""
    return dict((name, values[name] if name in values else options[name].get('default')) for name in NCCL_FABRIC_INPUTS)
