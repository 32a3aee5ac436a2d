# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""router_config: the worker URLs and vllm-router command line computed from the pair list; refusals name
the role variable and the fix; only flags of vllm-router's own --help are written; the role's defaults and
argument specs are the module's DEFAULTS."""


import os

import pytest
import yaml

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import known_vars
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import router_config as rc

ROLE = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'roles', 'router')

# `vllm-router --help` of vllm-router 0.1.17 (the option names it lists; the wheel's router_args.py)
HELP_FLAGS_0_1_17 = set('''
--host --port --worker-urls --enable-program-scheduling --program-scheduling-config-json --policy --prefill-policy
--decode-policy --router-temperature --kv-penalty-host --kv-penalty-external --kv-penalty-disk
--kv-aware-session-affinity-ttl-secs --kv-event-source --kv-event-replay-source --kv-event-block-size --kv-event-model
--pd-kv-events --mini-lb --vllm-pd-disaggregation --prefill --decode --worker-startup-timeout-secs
--worker-startup-check-interval --cache-threshold --balance-abs-threshold --balance-rel-threshold
--eviction-interval-secs --max-tree-size --max-payload-size --wasm-middleware --wasm-middleware-sha256
--wasm-middleware-route --intra-node-data-parallel-size --enable-igw --api-key --log-dir --log-level
--service-discovery --selector --service-discovery-port --service-discovery-namespace --prefill-selector
--decode-selector --vllm-discovery-address --kv-connector --prometheus-port --prometheus-host --request-id-headers
--request-timeout-secs --retry-max-retries --retry-initial-backoff-ms --retry-max-backoff-ms
--retry-backoff-multiplier --retry-jitter-factor --disable-retries --cb-failure-threshold --cb-success-threshold
--cb-timeout-duration-secs --cb-window-duration-secs --disable-circuit-breaker --health-failure-threshold
--health-success-threshold --health-check-timeout-secs --health-check-interval-secs --health-check-endpoint
--max-concurrent-requests --queue-size --queue-timeout-secs --rate-limit-tokens-per-second --cors-allowed-origins
'''.split())
POLICY_CHOICES_0_1_17 = {'random', 'round_robin', 'cache_aware', 'kv_aware', 'power_of_two', 'consistent_hash',
                         'sticky_least_loaded'}


def _pair(n, host='192.0.2.%d', port=8000, model='deepseek-v4-flash', profile='balanced'):
    return {'name': 'spark_pair%d' % n, 'head': 'spark%d' % (2 * n - 1), 'worker': 'spark%d' % (2 * n),
            'api_host': host % (10 + n) if '%' in host else host, 'api_port': port, 'served_model': model,
            'profile': profile}


PAIRS = [_pair(2), _pair(1)]


def test_worker_urls_one_per_pair_head_in_name_order():
    assert rc.worker_urls(PAIRS) == ['http://192.0.2.11:8000', 'http://192.0.2.12:8000']
    assert rc.worker_url(dict(_pair(1), api_host='fd00::1')) == 'http://[fd00::1]:8000'


def test_tls_to_the_heads_https_urls_and_ssl_cert_file():
    """worker_ca_file (ds4_tls): https worker URLs, SSL_CERT_FILE for the units; empty: http, no environment."""
    p = rc.plan(PAIRS, {'worker_ca_file': '/etc/dgxspark-ds4/tls/ca.crt'})
    assert p['errors'] == [] and p['worker_urls'] == ['https://192.0.2.11:8000', 'https://192.0.2.12:8000']
    assert p['environment'] == {'SSL_CERT_FILE': '/etc/dgxspark-ds4/tls/ca.crt'}
    assert '/etc/dgxspark-ds4/tls/ca.crt' not in p['argv']  # vllm-router 0.1.17 has no CA flag
    plain = rc.plan(PAIRS, {})
    assert plain['worker_urls'] == ['http://192.0.2.11:8000', 'http://192.0.2.12:8000'] and plain['environment'] == {}
    assert rc.plan(PAIRS, {'worker_ca_file': 'ca.crt'})['errors'] == [
        "router_worker_ca_file = 'ca.crt': must be an absolute path on the router host (the CA of the heads' TLS fronts) "
        "or empty (plain HTTP to the heads)"]


def test_default_argv_cache_aware_health_loopback_metrics():
    p = rc.plan(PAIRS, {})
    assert p['errors'] == []
    argv = p['argv']
    assert argv[:5] == ['vllm-router', '--host', '127.0.0.1', '--port', '30000']
    # no --worker-urls: the router would not listen until every one answers; the pool keeper adds them
    assert '--worker-urls' not in argv and not [w for w in argv if w.startswith('http')]
    assert p['worker_urls'] == ['http://192.0.2.11:8000', 'http://192.0.2.12:8000']
    pairs = dict(zip(argv[5::2], argv[6::2]))
    assert pairs['--policy'] == 'cache_aware'
    assert pairs['--balance-abs-threshold'] == '2' and pairs['--balance-rel-threshold'] == '1.5'
    assert pairs['--cache-threshold'] == '0.3'
    assert pairs['--health-check-interval-secs'] == '1' and pairs['--health-check-timeout-secs'] == '1'
    assert pairs['--health-failure-threshold'] == '2' and pairs['--health-success-threshold'] == '1'
    assert pairs['--health-check-endpoint'] == '/health'
    assert pairs['--prometheus-host'] == '127.0.0.1' and pairs['--prometheus-port'] == '29000'
    assert p['eviction_bound_s'] == 4 <= 5
    assert p['exec_start'] == ' '.join(argv)


def test_every_flag_written_exists_in_vllm_router_help():
    for policy in rc.POLICIES:
        argv = rc.router_argv({'policy': policy})
        flags = set(w for w in argv if w.startswith('--'))
        assert flags <= HELP_FLAGS_0_1_17, flags - HELP_FLAGS_0_1_17
        assert argv[argv.index('--policy') + 1] in POLICY_CHOICES_0_1_17
    assert set(rc.POLICIES) <= POLICY_CHOICES_0_1_17


def test_consistent_hash_drops_cache_aware_knobs():
    argv = rc.router_argv({'policy': 'consistent_hash'})
    assert argv[argv.index('--policy') + 1] == 'consistent_hash'
    assert '--balance-abs-threshold' not in argv and '--cache-threshold' not in argv
    assert 'x-session-id' in rc.SESSION_HEADERS


@pytest.mark.parametrize('settings, expected', [
    ({'policy': 'kv_aware'}, "router_policy = 'kv_aware': not one of cache_aware, consistent_hash"),
    ({'health_check_interval_s': 5}, 'could stay in rotation up to 12 s'),
    ({'health_failure_threshold': 3, 'health_check_timeout_s': 2}, 'up to 9 s'),
    ({'health_check_timeout_s': 0}, 'router_health_check_timeout_s = 0: must be at least 1'),
    ({'listen_port': 70000}, 'router_listen_port = 70000: not a TCP port'),
    ({'listen_port': 29000}, 'router_prometheus_port = 29000: the same as router_listen_port'),
    ({'listen_port': '30000'}, "router_listen_port = '30000': must be an integer"),
    ({'cache_threshold': 2}, 'router_cache_threshold = 2: must be within 0.0-1.0'),
    ({'balance_rel_threshold': 0.5}, 'must be at least 1.0'),
    ({'health_check_endpoint': 'health'}, 'must be a path starting with /'),
    ({'listen_host': 'bad host'}, "router_listen_host = 'bad host': not an address"),
    ({'log_level': 'loud'}, "router_log_level = 'loud'"),
    ({'polcy': 'x'}, 'router_polcy: not a router setting'),
])
def test_settings_refused_naming_the_variable(settings, expected):
    errors = rc.check_settings(settings)
    assert any(expected in e for e in errors), errors
    assert rc.plan(PAIRS, settings)['argv'] == []


def test_eviction_bound_can_be_relaxed_explicitly():
    assert rc.check_settings({'health_check_interval_s': 5, 'max_eviction_s': 12}) == []


@pytest.mark.parametrize('pairs, expected', [
    ([], 'router_pairs: no pair to route to'),
    (None, 'router_pairs: no pair to route to'),
    (['x'], "router_pairs[0] = 'x': not a mapping"),
    ([{'name': 'p'}], 'router_pairs[0] (p): missing head, api_host, api_port, served_model, profile'),
    ([dict(_pair(1), api_port=0)], 'api_port = 0 is not a TCP port'),
    ([dict(_pair(1), api_host='a b')], "api_host = 'a b' is not an address"),
    ([_pair(1), _pair(1)], 'pair name spark_pair1 given twice'),
    ([_pair(1), dict(_pair(2), api_host='192.0.2.11')], 'pairs spark_pair1 and spark_pair2 both answer at http://192.0.2.11:8000'),
    ([_pair(1), _pair(2, model='other')], 'served models deepseek-v4-flash, other differ'),
    ([_pair(1), _pair(2, profile='latency')], 'replicas of deepseek-v4-flash run different profiles'),
])
def test_pairs_refused(pairs, expected):
    errors = rc.check_pairs(pairs)
    assert any(expected in e for e in errors), errors


def test_one_pair_is_a_valid_router_input():
    assert rc.plan([_pair(1)], {})['worker_urls'] == ['http://192.0.2.11:8000']


def test_systemd_quoting():
    assert rc.systemd_quote('http://a:1') == 'http://a:1'
    assert rc.systemd_quote('50%') == '50%%'
    assert rc.systemd_quote('$HOME') == '$$HOME'
    assert rc.systemd_quote('a b') == '"a b"'
    assert rc.systemd_quote('say "hi"') == '"say \\"hi\\""'


def _load(path):
    with open(os.path.join(ROLE, path)) as handle:
        return yaml.safe_load(handle)


def test_role_defaults_are_the_module_defaults_and_specs_cover_them():
    defaults = _load('defaults/main.yml')
    specs = _load('meta/argument_specs.yml')['argument_specs']['main']['options']
    for key, value in rc.DEFAULTS.items():
        assert defaults['router_' + key] == value, key
        assert specs['router_' + key]['default'] == value, key
    for key in defaults:
        assert key in specs, key
        assert specs[key].get('default') == defaults[key], key
    assert defaults['router_version'] == rc.ROUTER_VERSION


def test_requirements_pin_the_same_router_release():
    with open(os.path.join(ROLE, '..', '..', 'requirements.txt')) as handle:
        pins = [line.strip() for line in handle if line.startswith('vllm-router')]
    assert pins == ['vllm-router==%s' % rc.ROUTER_VERSION]


def test_config_role_refuses_a_misspelt_router_variable():
    """router_ is a role prefix (known_vars reads the roles directory): a typo is refused, every knob is known."""
    known, roles = known_vars.scan_collection(os.path.join(ROLE, '..', '..'), yaml.safe_load)
    assert 'router' in roles
    cands = dict((n, {'hosts': ['spark1'], 'where': None, 'value': 1})
                 for n in ['router_polcy', 'router_pairs'] + ['router_' + k for k in rc.DEFAULTS])
    unknown = known_vars.find_unknown(cands, known, known_vars.prefixes(roles))
    assert [(u['name'], u['suggestion']) for u in unknown] == [('router_polcy', 'router_policy')]


def test_drain_waits_for_the_routers_request_timeout_not_a_fixed_600():
    # vllm-router cuts a request at --request-timeout-secs: the drain waits that long plus the margin
    assert rc.drain_timeout_s({}) == (1800 + rc.DRAIN_MARGIN_S, [])
    assert rc.plan(PAIRS, {})['drain_timeout_s'] == 1810 > 600
    # a long-context recipe lengthens the router's timeout (seed 001: 16.6 min to the first token): the drain follows
    assert rc.drain_timeout_s({'request_timeout_s': 3600})[0] == 3610
    # a smaller timeout (the replicas scenario's 60 s) gives a smaller drain: the rule, not the number
    assert rc.drain_timeout_s({'request_timeout_s': 60})[0] == 70
    # ds4_rolling_drain_timeout may lengthen it, never shorten it below the request timeout
    assert rc.drain_timeout_s({}, 4000) == (4000, [])
    assert rc.drain_timeout_s({}, '4000') == (4000, [])
    seconds, errors = rc.drain_timeout_s({}, 600)
    assert seconds is None and 'ds4_rolling_drain_timeout = 600 s is shorter than the router\'s request timeout' in errors[0]
    assert 'router_request_timeout_s = 1800' in errors[0] and 'Fix: remove ds4_rolling_drain_timeout' in errors[0]
    assert 'must be a number of seconds' in rc.drain_timeout_s({}, 'soon')[1][0]
    assert rc.plan(PAIRS, {}, drain_timeout=600)['errors'] == errors


@pytest.mark.parametrize('listen_host,url', [
    (None, 'http://127.0.0.1:30000'),        # the default: loopback
    ('0.0.0.0', 'http://127.0.0.1:30000'),   # a wildcard bind is reached on loopback from the router's own host
    ('::', 'http://127.0.0.1:30000'),
    ('10.0.0.5', 'http://10.0.0.5:30000'),   # a given address as it is
])
def test_the_router_reaches_itself_by_the_node_probes_wildcard_rule(listen_host, url):
    """The pool keeper's router URL (roles/router/vars/main.yml _router_pool_config) is the plan's local_url, under
    node_probe.probe_host: the one place that says where a wildcard bind is reached."""
    from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe
    settings = {'listen_port': 30000}
    if listen_host is not None:
        settings['listen_host'] = listen_host
    plan = rc.plan(PAIRS, settings)
    assert plan['errors'] == [] and plan['local_url'] == url, plan
    assert plan['local_url'] == 'http://%s:30000' % node_probe.probe_host(listen_host or rc.DEFAULTS['listen_host'])
    assert rc.plan([], settings)['local_url'] == ''
    with open(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'roles', 'router', 'vars', 'main.yml')) as handle:
        pool = yaml.safe_load(handle)['_router_pool_config']
    assert pool['router_url'] == "{{ _router_plan['local_url'] }}"
