# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""API exposure of the head: one choice per deployment, and the reverse proxy that implements it.

Pure Python (no Ansible imports), unit-tested with plain pytest.

vLLM's --api-key guards only /v1, /v2, /inference and /cohere; /invocations (full inference),
/tokenize, /pause, /metrics and others stay open (vllm-ops 1.5, 6). So vLLM itself always binds
loopback. The choice:

- loopback (default, ds4_api_allowed_networks empty): vLLM on 127.0.0.1:<api.port>; nothing else.
- networks (a list of CIDRs): vLLM moves to 127.0.0.1:<upstream port>; an nginx on the head listens
  on <api.port>, forwards ONLY an allowlist of exact paths, and requires one of the API keys
  (ds4_api_keys) on every path marked auth; the firewall opens <api.port> only to those networks.

Entry points:
  plan_exposure(api, allowed_networks, upstream_port, master_port) -> (plan, errors, warnings)
  api_key_problem(key) -> None or what is wrong  THE rule of what an API key is (every check calls it)
  check_api_keys(keys, var) -> [errors]  a key list (messages never contain a key)
  check_api_key(key, var) -> [errors]    one key, empty allowed (messages never contain it)
  render_proxy_conf(spec) -> nginx.conf text (no secrets; includes the keys file)
  render_proxy_keys(keys, upstream_key) -> text of the 0600 keys include
"""

from __future__ import annotations


import ipaddress
import re
from typing import Any

# Paths forwarded by default: OpenAI-compatible inference + model list need a key; /health does
# not (load balancers probe it; it says only "engine not errored").
DEFAULT_ENDPOINTS = (
    {'path': '/v1/models', 'auth': True, 'methods': ['GET']},
    {'path': '/v1/chat/completions', 'auth': True, 'methods': ['POST']},
    {'path': '/v1/completions', 'auth': True, 'methods': ['POST']},
    {'path': '/health', 'auth': False, 'methods': ['GET']},
)

# vLLM paths outside --api-key's guard (vllm-ops 1.5, vLLM docs/usage/security.md). The proxy
# refuses to forward them without a key, whatever the endpoint list says.
UNGUARDED_PATHS = (
    '/invocations', '/generative_scoring', '/pooling', '/classify', '/score', '/rerank', '/pause', '/resume',
    '/is_paused', '/scale_elastic_ep', '/is_scaling_elastic_ep', '/init_weight_transfer_engine', '/update_weights',
    '/get_world_size', '/abort_requests', '/tokenize', '/detokenize', '/metrics', '/tokenizer_info',
    '/collective_rpc', '/sleep', '/wake_up', '/reset_prefix_cache', '/start_profile', '/stop_profile',
)
# Unauthenticated on purpose only: nothing but liveness.
OPEN_OK_PATHS = ('/health', '/ping', '/version')
# The router front's liveness path (vllm-router's own /liveness), for keepalived's track script.
FRONT_LIVENESS_PATH = '/liveness'

# What an API key is (api_key_problem, the one place the rule is decided): a Bearer token of 16-256 characters from
# this set - no whitespace, newline, quote or nginx/regex metacharacter but . and + (render_proxy_keys escapes them).
API_KEY_RULE = '16-256 characters from A-Z a-z 0-9 . _ ~ + / = -'
_API_KEY_RE = re.compile(r'[A-Za-z0-9._~+/=-]{16,256}')
PATH_RE = re.compile(r'^/[A-Za-z0-9._~/-]*$')
METHODS = ('GET', 'POST', 'HEAD', 'OPTIONS')
LOOPBACK_V4 = ipaddress.ip_network('127.0.0.0/8')


class ExposureError(Exception):
    """Raised by the renderers with every error at once."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = list(errors)
        super(ExposureError, self).__init__('\n'.join(self.errors))


def _port_ok(port: Any) -> bool:
    return isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535


def is_loopback(host: Any) -> bool:
    try:
        return ipaddress.ip_address(str(host)).is_loopback
    except ValueError:
        return False


def normalize_networks(networks: Any, errors: list[str], var: str = 'ds4_api_allowed_networks') -> list[str]:
    """List of CIDR strings -> list of normalized network strings (host bits cleared)."""
    if networks is None:
        return []
    if isinstance(networks, str) or not isinstance(networks, (list, tuple)):
        errors.append('%s = %r: must be a list of CIDRs (e.g. [192.168.1.0/24]); [] keeps it on loopback only.'
                      % (var, networks))
        return []
    out: list[str] = []
    for item in networks:
        try:
            net = ipaddress.ip_network(str(item).strip(), strict=False)
        except ValueError:
            errors.append('%s entry %r: not an IPv4/IPv6 network. Fix: write it as a CIDR, e.g. 192.168.1.0/24 or 10.0.0.5/32.'
                          % (var, item))
            continue
        if net.is_loopback:
            errors.append('%s entry %r: a loopback network; loopback always reaches it. Fix: remove it.' % (var, item))
            continue
        if str(net) not in out:
            out.append(str(net))
    return out


def plan_exposure(api: dict[str, Any] | None, allowed_networks: Any, upstream_port: Any,
                  master_port: Any) -> tuple[dict[str, Any], list[str], list[str]]:
    """Decide how the head serves the API.

    api: the merged profile/site api section {host, port}; allowed_networks: ds4_api_allowed_networks;
    upstream_port: ds4_api_upstream_port (None = port + 1); master_port: the TCPStore port.
    Returns (plan, errors, warnings); plan is the effective `api` mapping:
      host/port: what vLLM binds; public_port: what clients use; exposure: loopback|networks;
      allowed_networks; proxied; engine_url: vLLM itself as a process on the head reaches it (its loopback bind and
      port; the one place that address is made: drains, the canary, metrics and the deployed record read it).
    """
    errors: list[str] = []
    warnings: list[str] = []
    api = dict(api or {})
    host = api.get('host')
    port: Any = api.get('port')
    if host is not None and not is_loopback(host):
        errors.append('ds4_profile_config.api.host = %r: vLLM must bind loopback (127.0.0.1). Bound beyond it, its '
                      'unguarded paths (/invocations = full inference, /tokenize, /pause, /metrics; --api-key guards '
                      'only /v1, /v2, /inference, /cohere: vllm-ops 1.5, 6) are open to the network. Fix: set api.host '
                      '127.0.0.1 and list the client networks in ds4_api_allowed_networks (an nginx on the head then '
                      'forwards only allowlisted paths and checks ds4_api_keys).' % (host,))
    nets = normalize_networks(allowed_networks, errors)
    for n in nets:
        if ipaddress.ip_network(n).prefixlen == 0:
            warnings.append('ds4_api_allowed_networks contains %s: every address may try API keys against the proxy.' % n)
    plan: dict[str, Any] = {'host': '127.0.0.1', 'port': port, 'public_port': port, 'exposure': 'networks' if nets else 'loopback',
                            'allowed_networks': nets, 'proxied': bool(nets)}
    if nets:
        up = upstream_port
        if up is None and _port_ok(port):
            up = port + 1
        if not _port_ok(up):
            errors.append('ds4_api_upstream_port = %r: must be an integer 1-65535 (vLLM\'s loopback port behind the '
                          'proxy). Fix: e.g. 8001.' % (upstream_port,))
        elif up == port:
            errors.append('ds4_api_upstream_port = %r equals api.port: the proxy listens on api.port and vLLM on the '
                          'upstream port. Fix: pick another port, e.g. %d.' % (up, port + 1))
        elif up == master_port:
            errors.append('ds4_api_upstream_port = %r equals master_port (the TCPStore of the rendezvous). Fix: pick '
                          'another port.' % (up,))
        plan['port'] = up
    elif upstream_port is not None and not _port_ok(upstream_port):
        errors.append('ds4_api_upstream_port = %r: must be an integer 1-65535 or null.' % (upstream_port,))
    plan['engine_url'] = 'http://%s:%s' % (plan['host'], plan['port'])
    return plan, errors, warnings


def api_key_problem(key: Any) -> str | None:
    """None when key is a valid API key, else what is wrong with it (its length, never the key itself)."""
    if not isinstance(key, str):
        return 'is a %s, not a key (a string)' % type(key).__name__
    if not _API_KEY_RE.fullmatch(key):
        return '(length %d) is not a valid key: %s' % (len(key), API_KEY_RULE)
    return None


def check_api_keys(keys: Any, var: str = 'ds4_api_keys') -> list[str]:
    """Errors for a key list; never quotes a key (only its position and length)."""
    errors: list[str] = []
    if keys is None:
        return ['%s is not set: an exposed API needs at least one key. Fix: put the keys in a vaulted '
                'group_vars file (ansible-vault encrypt_string).' % var]
    if isinstance(keys, str) or not isinstance(keys, (list, tuple)):
        return ['%s must be a list of keys (a list even for one key), got a %s.' % (var, type(keys).__name__)]
    if not keys:
        errors.append('%s is empty: an exposed API needs at least one key. Fix: put the keys in a vaulted group_vars '
                      'file (ansible-vault encrypt_string), or empty ds4_api_allowed_networks (loopback only).' % var)
    seen: set[str] = set()
    for i, k in enumerate(keys):
        problem = api_key_problem(k)
        if problem:
            errors.append('%s[%d] %s. Fix: generate one, e.g. `openssl rand -base64 32`.' % (var, i, problem))
        elif k in seen:
            errors.append('%s[%d] repeats an earlier key. Fix: list each key once.' % (var, i))
        else:
            seen.add(k)
    return errors


def check_api_key(key: Any, var: str) -> list[str]:
    """Errors for one key (empty: no key, allowed); never quotes it."""
    if key in (None, ''):
        return []
    problem = api_key_problem(key)
    return ['%s %s (the value is not shown). Fix: generate one, e.g. `openssl rand -base64 32`, or leave it empty.'
            % (var, problem)] if problem else []


def check_endpoints(endpoints: Any) -> list[str]:
    """Errors for the proxy's endpoint allowlist."""
    errors: list[str] = []
    if not isinstance(endpoints, (list, tuple)) or not endpoints:
        return ['api_proxy_endpoints must be a non-empty list of {path, auth, methods}.']
    paths: set[str] = set()
    for i, ep in enumerate(endpoints):
        if not isinstance(ep, dict):
            errors.append('api_proxy_endpoints[%d] = %r: must be a mapping {path, auth, methods}.' % (i, ep))
            continue
        path = ep.get('path')
        if not isinstance(path, str) or not PATH_RE.match(path) or '//' in path or '/../' in path + '/':
            errors.append('api_proxy_endpoints[%d].path = %r: must be an absolute URL path (letters, digits, . _ ~ - /).'
                          % (i, path))
            continue
        if path in paths:
            errors.append('api_proxy_endpoints[%d].path %s is listed twice.' % (i, path))
        paths.add(path)
        auth = ep.get('auth', True)
        if not isinstance(auth, bool):
            errors.append('api_proxy_endpoints[%d].auth = %r: must be true or false.' % (i, auth))
        elif not auth and path.rstrip('/') not in OPEN_OK_PATHS:
            errors.append('api_proxy_endpoints[%d]: %s without auth; only %s may be open (everything else is inference '
                          'or control). Fix: set auth: true.' % (i, path, ', '.join(OPEN_OK_PATHS)))
        methods = ep.get('methods', ['GET', 'POST'])
        if not isinstance(methods, (list, tuple)) or not methods or any(m not in METHODS for m in methods):
            errors.append('api_proxy_endpoints[%d].methods = %r: a non-empty list of %s.' % (i, methods, ', '.join(METHODS)))
        for bad in UNGUARDED_PATHS:
            if path == bad or path.startswith(bad + '/'):
                errors.append('api_proxy_endpoints[%d].path %s is one of vLLM\'s control/unguarded paths (vllm-ops 1.5); '
                              'it is never forwarded. Fix: remove it.' % (i, path))
    return errors


def _listen_words(addr: Any, port: int) -> str:
    a = str(addr)
    if a.startswith('['):
        return '%s:%d' % (a, port)
    try:
        ip = ipaddress.ip_address(a)
    except ValueError:
        raise ExposureError(['api_proxy_listen_addresses entry %r: must be an IP address (0.0.0.0, [::], 10.0.0.5)' % a])
    return ('[%s]:%d' % (ip, port)) if ip.version == 6 else ('%s:%d' % (ip, port))


def render_proxy_conf(spec: dict[str, Any]) -> str:
    """nginx.conf for the API proxy. spec keys:
    listen (list of addresses), public_port, upstream_host, upstream_port, endpoints, keys_path,
    pid_path, user, worker_processes, client_max_body_size, read_timeout_s, access_log, error_log;
    health_gate (optional): a file whose presence makes /health answer 503 (the pair guard's verdict);
    pass_client_key (optional, the router's front): the upstream is vllm-router, and the client's key is passed on
    (every pair head's proxy checks it again) instead of being replaced by the vLLM key. The router's front is an
    nginx instance of its own (own file, pid and unit), so a fault in it cannot take a head's proxy down.
    tls (optional, ds4_tls): {cert_path, key_path, fingerprint}: the port answers TLS only (a plain HTTP request gets
    nginx's 400 "The plain HTTP request was sent to HTTPS port" and is never forwarded); the certificate's fingerprint
    is written as a comment, so a renewed certificate changes this file and the role reloads nginx.
    No secret is in this text: keys live in keys_path (0600), the TLS key in tls.key_path (0600)."""
    errors = check_endpoints(spec.get('endpoints'))
    port: Any = spec.get('public_port')
    up: Any = spec.get('upstream_port')
    if not _port_ok(port):
        errors.append('public_port = %r: must be a port' % (port,))
    if not _port_ok(up):
        errors.append('upstream_port = %r: must be a port' % (up,))
    if not is_loopback(spec.get('upstream_host', '127.0.0.1')):
        errors.append('upstream_host = %r: vLLM behind the proxy must be on loopback' % (spec.get('upstream_host'),))
    listen = spec.get('listen') or ['0.0.0.0']
    gate = spec.get('health_gate')
    if gate is not None and not (isinstance(gate, str) and re.match(r'^/[A-Za-z0-9._/-]+$', gate) and '..' not in gate):
        errors.append('health_gate = %r: must be an absolute path of [A-Za-z0-9._/-]' % (gate,))
    front = bool(spec.get('pass_client_key'))
    if front and gate is not None:
        errors.append('health_gate with pass_client_key: the router\'s /health is the router\'s, no pair guard gates it')
    tls = spec.get('tls')
    if tls is not None:
        for key in ('cert_path', 'key_path'):
            if not (isinstance(tls.get(key), str) and re.match(r'^/[A-Za-z0-9._/-]+$', tls[key]) and '..' not in tls[key]):
                errors.append('tls.%s = %r: must be an absolute path of [A-Za-z0-9._/-]' % (key, tls.get(key)))
    if front and any(isinstance(ep, dict) and ep.get('path') == FRONT_LIVENESS_PATH for ep in spec.get('endpoints') or []):
        errors.append('endpoints: %s is the router front\'s own liveness path (keepalived\'s track script); it cannot '
                      'be listed' % FRONT_LIVENESS_PATH)
    if errors:
        raise ExposureError(errors)
    upstream = '%s:%d' % (spec.get('upstream_host', '127.0.0.1'), up)
    what, name = ('vllm-router', 'ds4_router') if front else ('vLLM', 'ds4_vllm')
    lines = [
        '# dgxspark.ds4 API proxy (role dgxspark.ds4.api_proxy); rendered by Ansible, do not edit.',
        '# Forwards only the allowlisted paths below to %s on %s; every other path is 404.' % (what, upstream),
        '# API keys are in %s (0600, root), never here.' % spec['keys_path'],
    ] + ([
        '# TLS only on port %d: certificate %s (sha256 %s), key %s (0600, root).'
        % (port, tls['cert_path'], tls.get('fingerprint') or 'not read', tls['key_path'])] if tls else []) + [
        'user %s;' % spec.get('user', 'www-data'),
        'worker_processes %s;' % spec.get('worker_processes', 2),
        'pid %s;' % spec.get('pid_path', '/run/dgxspark-ds4-proxy.pid'),
        'error_log %s;' % spec.get('error_log', 'stderr warn'),
        '',
        'events {',
        '    worker_connections 1024;',
        '}',
        '',
        'http {',
        '    server_tokens off;',
        '    default_type application/json;',
        '    # The default combined format has no Authorization header: keys never reach the log.',
        '    access_log %s;' % spec.get('access_log', 'syslog:server=unix:/dev/log,tag=dgxspark_ds4_proxy,nohostname combined'),
        '    client_max_body_size %s;' % spec.get('client_max_body_size', '64m'),
        '    # $ds4_key_ok (1 = a listed key) and $ds4_upstream_authorization come from the keys file.',
        '    include %s;' % spec['keys_path'],
        '',
        '    upstream %s {' % name,
        '        server %s;' % upstream,
        '        keepalive 16;',
        '    }',
    ]
    if front:
        lines += _server_block(spec, listen, port, name, '$http_authorization',
                               '# The client key is checked here and passed on: every head\'s proxy checks it again.',
                               liveness=True)
    else:
        lines += _server_block(spec, listen, port, name, '$ds4_upstream_authorization',
                               '# The client key is checked here and never forwarded; vLLM gets its own key (or none).',
                               gate=spec.get('health_gate'))
    lines += ['}']
    return '\n'.join(lines) + '\n'


def _server_block(spec: dict[str, Any], listen: list[Any], port: int, upstream_name: str, authorization: str, auth_comment: str,
                  gate: str | None = None, liveness: bool = False) -> list[str]:
    tls = spec.get('tls')
    suffix = ' ssl' if tls else ''
    lines = ['', '    server {'] + ['        listen %s%s;' % (_listen_words(a, port), suffix) for a in listen] + (
        tls_server_lines(tls) if tls else []) + [
        '        server_name _;',
        '        proxy_http_version 1.1;',
        '        proxy_set_header Connection "";',
        '        proxy_set_header Host $host;',
        '        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;',
        '        ' + auth_comment,
        '        proxy_set_header Authorization %s;' % authorization,
        '        # Streamed completions (SSE) pass through unbuffered; long generations may take minutes.',
        '        proxy_buffering off;',
        '        proxy_request_buffering off;',
        '        proxy_read_timeout %ss;' % spec.get('read_timeout_s', 3600),
        '        proxy_send_timeout %ss;' % spec.get('read_timeout_s', 3600),
        '',
    ]
    if liveness:
        # The router front only: keepalived's track script (roles/router/files/vrrp-check) asks this path. vllm-router's
        # /liveness answers 200 "OK" while the router runs, whatever its workers do; its /health answers 503 as soon as
        # ONE listed worker is unhealthy, which is the state every surviving router is in when the router host that
        # died was also a pair's head: tracking /health put the survivor in FAULT and nobody held the VIP (measured,
        # Molecule replicas). Nothing but "OK" is answered here: no key needed.
        lines += [
            '        location = %s {' % FRONT_LIVENESS_PATH,
            '            limit_except GET { deny all; }',
            '            proxy_pass http://%s;' % upstream_name,
            '        }',
        ]
    for ep in spec['endpoints']:
        methods = ' '.join(ep.get('methods', ['GET', 'POST']))
        lines.append('        location = %s {' % ep['path'])
        lines.append('            limit_except %s { deny all; }' % methods)
        if gate and ep['path'] == '/health':
            # the pair guard's verdict (a worker rank down, a hang, a pair restart): vLLM's own /health stays 200 then
            lines.append('            if (-f %s) {' % gate)
            lines.append('                return 503 \'{"error": "pair unhealthy (pair guard: %s)"}\\n\';' % gate)
            lines.append('            }')
        if ep.get('auth', True):
            lines.append('            if ($ds4_key_ok = 0) {')
            lines.append('                add_header WWW-Authenticate \'Bearer realm="dgxspark-ds4"\' always;')
            lines.append('                return 401 \'{"error": "Unauthorized"}\\n\';')
            lines.append('            }')
        lines.append('            proxy_pass http://%s;' % upstream_name)
        lines.append('        }')
    lines += [
        '',
        '        # Everything else (/invocations, /tokenize, /metrics, /pause, ...) is not forwarded.',
        '        location / {',
        '            return 404 \'{"error": "Not Found"}\\n\';',
        '        }',
        '    }',
    ]
    return lines


def tls_server_lines(tls: dict[str, Any]) -> list[str]:
    """The server-block lines of a TLS front (paths only, no secret)."""
    return ['        ssl_certificate %s;' % tls['cert_path'],
            '        ssl_certificate_key %s;' % tls['key_path'],
            '        ssl_protocols TLSv1.2 TLSv1.3;',
            '        ssl_session_cache shared:ds4_tls:1m;',
            '        ssl_session_timeout 1h;']


def _nginx_regex_literal(key: str) -> str:
    # Keys are of API_KEY_RULE's characters (api_key_problem); escape the regex metacharacters among them.
    return re.sub(r'([.+])', r'\\\1', key)


def render_proxy_keys(keys: list[str], upstream_key: str | None = '') -> str:
    """The 0600 include: a map from the Authorization header to 1 for a listed key (exact,
    case-sensitive regex match), and the Authorization header sent to vLLM."""
    errors = check_api_keys(keys) + check_api_key(upstream_key, 'vllm_service_api_key (the upstream key)')
    if errors:
        raise ExposureError(errors)
    lines = ['# dgxspark.ds4 API proxy keys: 0600 root, read by the nginx master (root). Do not edit.',
             'map $http_authorization $ds4_key_ok {',
             '    default 0;']
    for k in keys:
        lines.append('    "~^Bearer %s$" 1;' % _nginx_regex_literal(k))
    lines.append('}')
    lines.append('map $ds4_key_ok $ds4_upstream_authorization {')
    lines.append('    default "%s";' % (('Bearer ' + upstream_key) if upstream_key else ''))
    lines.append('}')
    return '\n'.join(lines) + '\n'
