# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vllm-router in front of several TP=2 pairs: the worker URLs, the command line, the unit's ExecStart.

Pure logic (no Ansible): the role ``dgxspark.ds4.router`` calls it through the filter
``dgxspark.ds4.vllm_router_plan``; the collection's router integration test starts the real router with the
argv rendered here. Input: the pair list of ``pairs.py`` (``validate_pairs``), each a dict with
``name``, ``head``, ``api_host``, ``api_port``, ``served_model``, ``profile`` (extra keys ignored),
and the router settings (the role's ``router_*`` knobs without the prefix, see ``DEFAULTS``).

Only flags that vllm-router ``ROUTER_VERSION`` has are written (read from its ``vllm-router --help``):
``--host --port --policy --cache-threshold --balance-abs-threshold
--balance-rel-threshold --health-check-interval-secs --health-check-timeout-secs
--health-failure-threshold --health-success-threshold --health-check-endpoint
--cb-failure-threshold --cb-timeout-duration-secs --worker-startup-timeout-secs
--worker-startup-check-interval --request-timeout-secs --prometheus-host --prometheus-port --log-level``.

No ``--worker-urls``: vllm-router 0.1.17 does not listen until every ``--worker-urls`` entry answers (up to
``--worker-startup-timeout-secs``, then it exits), so one pair that is down would keep the router, and every other
pair behind it, unreachable. Started with none it listens at once (``GET /list_workers`` -> ``{"urls": []}``,
requests 503 ``No workers are currently available``), and the pool keeper (``roles/router/files/routerpool.py``,
``router_admin.reconcile``) adds each pair through ``POST /add_worker`` as soon as its ``/health`` answers.
The pairs are in the pool keeper's file (``pool_config``), not on the command line.
"""


import ipaddress
import re
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node.node_probe import probe_host

ROUTER_VERSION = '0.1.17'

# --policy choices of vllm-router 0.1.17 that fit one model on N identical replicas. kv_aware needs KV
# event sources, sticky_least_loaded and power_of_two are left out until measured here.
POLICIES = ('cache_aware', 'consistent_hash', 'round_robin', 'random')

# The headers vllm-router 0.1.17 reads a session key from (consistent_hash, and cache_aware's session map):
# strings of its binary, the first one proven by the collection's router integration test. Not configurable.
SESSION_HEADERS = ('x-session-id', 'session-id', 'x-user-id', 'x-tenant-id', 'x-claude-code-session-id')

LOG_LEVELS = ('debug', 'info', 'warning', 'error', 'critical')

DEFAULTS = {
    'listen_host': '127.0.0.1',
    'listen_port': 30000,
    'policy': 'cache_aware',
    'cache_threshold': 0.3,
    # vllm-router's own 64 never triggers in front of pairs that run 2-16 sequences each: with it, 8 clients
    # all land on one pair (test_router_sim: 116/0, 0/120, 0/119, 117/0); 2 spreads them (58/58, 60/58, 62/55, 56/61).
    'balance_abs_threshold': 2,
    'balance_rel_threshold': 1.5,
    'health_check_interval_s': 1,
    'health_check_timeout_s': 1,
    'health_failure_threshold': 2,
    'health_success_threshold': 1,
    'health_check_endpoint': '/health',
    'max_eviction_s': 5,
    # The circuit breaker opens on a pair after this many failed requests (vllm-router's default 10) and lets a
    # request through again after circuit_breaker_timeout_s. With vllm-router's 60 s a pair killed under load and
    # restarted got no request in the 8 s after its health checks passed (test_router_sim); with 5 s it served
    # again within 1 s of its restart.
    'circuit_breaker_failure_threshold': 10,
    'circuit_breaker_timeout_s': 5,
    'worker_startup_timeout_s': 600,
    'worker_startup_check_interval_s': 5,
    'request_timeout_s': 1800,
    'prometheus_host': '127.0.0.1',
    'prometheus_port': 29000,
    'log_level': 'info',
    # TLS to the heads (ds4_tls): the CA file the router and its pool keeper trust (the unit's SSL_CERT_FILE); set =
    # the pairs' worker URLs are https. vllm-router 0.1.17 has no CA flag; its bundled OpenSSL 1.1.1k (OPENSSLDIR
    # /etc/pki/tls, absent on Debian/Ubuntu) reads SSL_CERT_FILE - measured: with the CA that issued the head's
    # certificate it adds https://head and forwards; with another CA, or none, it never adds the worker.
    'worker_ca_file': '',
}

_INT_KEYS = ('listen_port', 'balance_abs_threshold', 'health_check_interval_s', 'health_check_timeout_s',
             'health_failure_threshold', 'health_success_threshold', 'worker_startup_timeout_s',
             'worker_startup_check_interval_s', 'request_timeout_s', 'prometheus_port',
             'circuit_breaker_failure_threshold', 'circuit_breaker_timeout_s')
_POSITIVE = ('circuit_breaker_failure_threshold', 'circuit_breaker_timeout_s', 'health_check_interval_s',
             'health_check_timeout_s', 'health_failure_threshold',
             'health_success_threshold', 'worker_startup_timeout_s', 'worker_startup_check_interval_s',
             'request_timeout_s')
_PAIR_KEYS = ('name', 'head', 'api_host', 'api_port', 'served_model', 'profile')
_HOST_RE = re.compile(r'^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$')


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def settings_with_defaults(settings: dict[str, Any] | None) -> dict[str, Any]:
    merged = dict(DEFAULTS)
    merged.update(dict(settings or {}))
    return merged


def eviction_bound_s(settings: dict[str, Any] | None) -> Any:
    """Worst case from a pair's death (or freeze) to its leaving rotation: every one of the
    failure_threshold failed checks may wait a whole interval and then its whole timeout."""
    s = settings_with_defaults(settings)
    return s['health_failure_threshold'] * (s['health_check_interval_s'] + s['health_check_timeout_s'])


# The drain's margin over the router's request timeout: the router's health bound and the settle reads.
DRAIN_MARGIN_S = 10


def drain_timeout_s(settings: dict[str, Any] | None, requested: Any = None) -> tuple[int | None, list[str]]:
    """(seconds, errors): how long a rolling operation waits for a drained pair's requests.

    vllm-router cuts every request it forwards at --request-timeout-secs (measured, 0.1.17: a longer one fails
    with 500 "Request failed" and is retried on a worker still in rotation, never on the drained one), so no
    request it sent to a pair outlives that timeout: the drain waits router_request_timeout_s + DRAIN_MARGIN_S.
    A recipe whose requests can run longer (long-context prefill: seed 001, 16.6 min to the first token at
    980K) needs a larger router_request_timeout_s, and the drain follows it. requested
    (ds4_rolling_drain_timeout) may lengthen the wait, never shorten it below the request timeout."""
    s = settings_with_defaults(settings)
    if not _is_int(s['request_timeout_s']) or s['request_timeout_s'] < 1:
        return None, ['router_request_timeout_s = %r: must be an integer of at least 1' % (s['request_timeout_s'],)]
    derived = s['request_timeout_s'] + DRAIN_MARGIN_S
    if requested in (None, ''):
        return derived, []
    if not _is_int(requested) and not (isinstance(requested, str) and requested.isdigit()):
        return None, ['ds4_rolling_drain_timeout = %r: must be a number of seconds. Fix: remove it (the drain then '
                      'waits %d s, the router\'s request timeout + %d s)' % (requested, derived, DRAIN_MARGIN_S)]
    requested = int(requested)
    if requested < s['request_timeout_s']:
        return None, ['ds4_rolling_drain_timeout = %d s is shorter than the router\'s request timeout (router_request_timeout_s '
                      '= %d s): a request in flight on the drained pair may run that long and would be cut by the '
                      'restart. Fix: remove ds4_rolling_drain_timeout (the drain waits %d s), or lower '
                      'router_request_timeout_s if the recipe\'s requests are shorter'
                      % (requested, s['request_timeout_s'], derived)]
    return max(requested, derived), []


def _host_ok(host: Any) -> bool:
    if not isinstance(host, str) or not host:
        return False
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return bool(_HOST_RE.match(host))


def check_settings(settings: dict[str, Any] | None) -> list[str]:
    """Problems of the router settings, one sentence each naming the role variable and the fix."""
    s = settings_with_defaults(settings)
    errors = []
    unknown = sorted(set(s) - set(DEFAULTS))
    for key in unknown:
        errors.append('router_%s: not a router setting (known: %s)' % (key, ', '.join(sorted(DEFAULTS))))
    for key in _INT_KEYS:
        if not _is_int(s[key]):
            errors.append('router_%s = %r: must be an integer' % (key, s[key]))
    for key in ('cache_threshold', 'balance_rel_threshold', 'max_eviction_s'):
        if isinstance(s[key], bool) or not isinstance(s[key], (int, float)):
            errors.append('router_%s = %r: must be a number' % (key, s[key]))
    if errors:
        return errors
    if s['policy'] not in POLICIES:
        errors.append('router_policy = %r: not one of %s (vllm-router %s --policy choices that fit identical replicas)'
                      % (s['policy'], ', '.join(POLICIES), ROUTER_VERSION))
    if s['log_level'] not in LOG_LEVELS:
        errors.append('router_log_level = %r: not one of %s' % (s['log_level'], ', '.join(LOG_LEVELS)))
    for key in ('listen_port', 'prometheus_port'):
        if not 1 <= s[key] <= 65535:
            errors.append('router_%s = %r: not a TCP port (1-65535)' % (key, s[key]))
    if s['listen_port'] == s['prometheus_port'] and s['listen_host'] == s['prometheus_host']:
        errors.append('router_prometheus_port = %d: the same as router_listen_port on %s. Fix: pick another port'
                      % (s['prometheus_port'], s['listen_host']))
    for key in ('listen_host', 'prometheus_host'):
        if not _host_ok(s[key]):
            errors.append('router_%s = %r: not an address or host name' % (key, s[key]))
    for key in _POSITIVE:
        if s[key] < 1:
            errors.append('router_%s = %r: must be at least 1' % (key, s[key]))
    if s['balance_abs_threshold'] < 0:
        errors.append('router_balance_abs_threshold = %r: must be at least 0' % s['balance_abs_threshold'])
    if not 0.0 <= s['cache_threshold'] <= 1.0:
        errors.append('router_cache_threshold = %r: must be within 0.0-1.0' % s['cache_threshold'])
    if s['balance_rel_threshold'] < 1.0:
        errors.append('router_balance_rel_threshold = %r: must be at least 1.0' % s['balance_rel_threshold'])
    if s['worker_ca_file'] and not (isinstance(s['worker_ca_file'], str) and s['worker_ca_file'].startswith('/')):
        errors.append('router_worker_ca_file = %r: must be an absolute path on the router host (the CA of the heads\' '
                      'TLS fronts) or empty (plain HTTP to the heads)' % (s['worker_ca_file'],))
    if not (isinstance(s['health_check_endpoint'], str) and s['health_check_endpoint'].startswith('/')
            and ' ' not in s['health_check_endpoint']):
        errors.append('router_health_check_endpoint = %r: must be a path starting with /' % (s['health_check_endpoint'],))
    if errors:
        return errors
    bound = eviction_bound_s(s)
    if bound > s['max_eviction_s']:
        errors.append('router health checks: a dead or frozen pair could stay in rotation up to %d s '
                      '(router_health_failure_threshold %d x (router_health_check_interval_s %d + '
                      'router_health_check_timeout_s %d)), more than router_max_eviction_s %s. Fix: lower them, '
                      'e.g. interval 1, timeout 1, threshold 2 (4 s)'
                      % (bound, s['health_failure_threshold'], s['health_check_interval_s'],
                         s['health_check_timeout_s'], s['max_eviction_s']))
    return errors


def worker_url(pair: dict[str, Any], scheme: str = 'http') -> str:
    host = pair['api_host']
    if ':' in host:
        host = '[%s]' % host
    return '%s://%s:%d' % (scheme, host, pair['api_port'])


def worker_scheme(settings: dict[str, Any] | None) -> str:
    """https when the router trusts a CA for the heads' fronts (worker_ca_file), else http."""
    return 'https' if settings_with_defaults(settings)['worker_ca_file'] else 'http'


def environment(settings: dict[str, Any] | None) -> dict[str, str]:
    """The router's and the pool keeper's environment: SSL_CERT_FILE = the CA of the heads' fronts (TLS on)."""
    ca = settings_with_defaults(settings)['worker_ca_file']
    return {'SSL_CERT_FILE': ca} if ca else {}


def check_pairs(pairs: Any) -> list[str]:
    """Problems of the pair list the router fronts, one sentence each."""
    if not isinstance(pairs, list) or not pairs:
        return ['router_pairs: no pair to route to. Fix: give the pair list of dgxspark.ds4 pairs validation '
                '(one entry per TP=2 pair: name, head, api_host, api_port, served_model, profile)']
    errors: list[str] = []
    for index, pair in enumerate(pairs):
        if not isinstance(pair, dict):
            errors.append('router_pairs[%d] = %r: not a mapping' % (index, pair))
            continue
        missing = [k for k in _PAIR_KEYS if pair.get(k) in (None, '')]
        if missing:
            errors.append('router_pairs[%d] (%s): missing %s' % (index, pair.get('name', '?'), ', '.join(missing)))
            continue
        if not _is_int(pair['api_port']) or not 1 <= pair['api_port'] <= 65535:
            errors.append('router_pairs[%d] (%s): api_port = %r is not a TCP port' % (index, pair['name'], pair['api_port']))
        if not _host_ok(pair['api_host']):
            errors.append('router_pairs[%d] (%s): api_host = %r is not an address or host name'
                          % (index, pair['name'], pair['api_host']))
    if errors:
        return errors
    seen_names: dict[str, dict[str, Any]] = {}
    seen_urls: dict[str, str] = {}
    for pair in pairs:
        if pair['name'] in seen_names:
            errors.append('router_pairs: pair name %s given twice. Fix: one entry per pair' % pair['name'])
        seen_names[pair['name']] = pair
        url = worker_url(pair)
        if url in seen_urls:
            errors.append('router_pairs: pairs %s and %s both answer at %s. Fix: each pair head needs its own API address'
                          % (seen_urls[url], pair['name'], url))
        seen_urls.setdefault(url, pair['name'])
    models = sorted(set(p['served_model'] for p in pairs))
    if len(models) > 1:
        errors.append('router_pairs: served models %s differ; one router fronts replicas of one model '
                      '(%s). Fix: one router per served model'
                      % (', '.join(models), '; '.join('%s: %s' % (p['name'], p['served_model']) for p in pairs)))
    profiles = sorted(set(p['profile'] for p in pairs))
    if len(profiles) > 1:
        errors.append('router_pairs: replicas of %s run different profiles (%s); replicas must answer alike. '
                      'Fix: the same profile on every pair'
                      % (models[0], '; '.join('%s: %s' % (p['name'], p['profile']) for p in pairs)))
    return errors


def worker_urls(pairs: list[dict[str, Any]], scheme: str = 'http') -> list[str]:
    """The head API URL of every pair, in pair-name order."""
    return [worker_url(p, scheme) for p in sorted(pairs, key=lambda p: p['name'])]


def router_argv(settings: dict[str, Any] | None, binary: str = 'vllm-router') -> list[str]:
    """The router's command line (a list of words; no worker: the pool keeper adds them). Call check_settings
    first."""
    s = settings_with_defaults(settings)
    argv = [binary,
            '--host', s['listen_host'], '--port', str(s['listen_port']),
            '--policy', s['policy']]
    if s['policy'] == 'cache_aware':
        argv += ['--cache-threshold', _num(s['cache_threshold']),
                 '--balance-abs-threshold', str(s['balance_abs_threshold']),
                 '--balance-rel-threshold', _num(s['balance_rel_threshold'])]
    argv += ['--health-check-interval-secs', str(s['health_check_interval_s']),
             '--health-check-timeout-secs', str(s['health_check_timeout_s']),
             '--health-failure-threshold', str(s['health_failure_threshold']),
             '--health-success-threshold', str(s['health_success_threshold']),
             '--health-check-endpoint', s['health_check_endpoint'],
             '--cb-failure-threshold', str(s['circuit_breaker_failure_threshold']),
             '--cb-timeout-duration-secs', str(s['circuit_breaker_timeout_s']),
             '--worker-startup-timeout-secs', str(s['worker_startup_timeout_s']),
             '--worker-startup-check-interval', str(s['worker_startup_check_interval_s']),
             '--request-timeout-secs', str(s['request_timeout_s']),
             '--prometheus-host', s['prometheus_host'], '--prometheus-port', str(s['prometheus_port']),
             '--log-level', s['log_level']]
    return argv


def _num(value: Any) -> str:
    return repr(float(value))


def systemd_quote(word: Any) -> str:
    """One word of a systemd ExecStart= line: %-specifiers and $ expansions escaped, quoted when needed."""
    text = str(word).replace('%', '%%').replace('$', '$$')
    if text and not re.search(r'[\s"\'\\;]', text):
        return text
    return '"%s"' % text.replace('\\', '\\\\').replace('"', '\\"')


def exec_start(argv: list[str]) -> str:
    return ' '.join(systemd_quote(w) for w in argv)


def plan(pairs: Any, settings: dict[str, Any] | None, binary: str = 'vllm-router', drain_timeout: Any = None) -> dict[str, Any]:
    """Everything the role needs: errors (empty when valid), worker_urls (the pool keeper's list), argv,
    exec_start, the eviction bound, drain_timeout_s (drain_timeout_s(); drain_timeout: ds4_rolling_drain_timeout),
    local_url (the router as a process on its own host reaches it: a wildcard bind on 127.0.0.1, the node probe's
    rule)."""
    errors = check_pairs(pairs) + check_settings(settings)
    drain_s, drain_errors = (None, []) if errors else drain_timeout_s(settings, drain_timeout)
    errors += drain_errors
    if errors:
        return {'errors': errors, 'worker_urls': [], 'argv': [], 'exec_start': '', 'eviction_bound_s': None,
                'drain_timeout_s': None, 'environment': {}, 'local_url': ''}
    argv = router_argv(settings, binary)
    return {'errors': [], 'worker_urls': worker_urls(pairs, worker_scheme(settings)), 'argv': argv,
            'exec_start': exec_start(argv), 'environment': environment(settings),
            'drain_timeout_s': drain_s, 'eviction_bound_s': eviction_bound_s(settings),
            'session_headers': list(SESSION_HEADERS), 'router_version': ROUTER_VERSION,
            'local_url': 'http://%s:%s' % (probe_host(str(settings_with_defaults(settings)['listen_host'])),
                                           settings_with_defaults(settings)['listen_port'])}
