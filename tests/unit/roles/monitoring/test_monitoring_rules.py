# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Alert rules and dashboard of roles/monitoring (metrics history and alerts).

- `promtool check rules` and `promtool test rules` (the real promtool of the Debian/Ubuntu
  `prometheus` package) on roles/monitoring/files/dgxspark-ds4.rules.yml; every alert has a test
  series that fires it and one that must not. Without promtool the tests skip, except under CI=true
  where they fail (CI must install the package).
- Every PromQL expression of the rules and of the Grafana dashboard names only series that vLLM
  (its documented series + what the simulator exports), the node exporter, Prometheus or the pair
  guard's textfile export; every dashboard expression is valid PromQL (checked by promtool).
"""


import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import forensics
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import memory_guard
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import hang as pg_hang
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import state as pg_state

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))
FILES = os.path.join(REPO, 'roles', 'monitoring', 'files')
RULES = os.path.join(FILES, 'dgxspark-ds4.rules.yml')
RULES_TEST = os.path.join(HERE, 'promtool', 'dgxspark-ds4.rules.test.yml')
DASHBOARD = os.path.join(FILES, 'dgxspark-ds4-dashboard.json')
TESTS = os.path.join(REPO, 'tests')

# vLLM's series as exposed (prometheus_client adds _total to counters; histograms get _bucket/_sum/_count):
# the names read in vLLM 0.33 v1/metrics/loggers.py and v1/spec_decode/metrics.py (also in 0.27.1 where noted
# in the collection's research notes, section 1.4). The simulator's own exports are added below.
VLLM_COUNTERS_GAUGES = {
    'vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:num_requests_waiting_by_reason',
    'vllm:kv_cache_usage_perc', 'vllm:cache_config_info', 'vllm:prefix_cache_queries_total',
    'vllm:prefix_cache_hits_total', 'vllm:prompt_tokens_cached_total', 'vllm:prompt_tokens_total',
    'vllm:generation_tokens_total', 'vllm:request_success_total', 'vllm:num_preemptions_total',
    'vllm:spec_decode_num_drafts_total', 'vllm:spec_decode_num_draft_tokens_total',
    'vllm:spec_decode_num_accepted_tokens_total', 'vllm:spec_decode_num_accepted_tokens_per_pos_total',
}
VLLM_HISTOGRAMS = {
    'vllm:time_to_first_token_seconds', 'vllm:inter_token_latency_seconds', 'vllm:request_time_per_output_token_seconds',
    'vllm:e2e_request_latency_seconds', 'vllm:request_queue_time_seconds', 'vllm:request_prefill_time_seconds',
    'vllm:request_decode_time_seconds', 'vllm:request_inference_time_seconds', 'vllm:iteration_tokens_total',
}
# prometheus-node-exporter (Debian 1.5 / Ubuntu 24.04 1.7): meminfo, pressure, netdev, netclass, infiniband.
NODE_EXPORTER = {
    'node_memory_MemTotal_bytes', 'node_memory_MemFree_bytes', 'node_memory_MemAvailable_bytes',
    'node_pressure_memory_stalled_seconds_total', 'node_pressure_memory_waiting_seconds_total',
    'node_network_up', 'node_network_carrier', 'node_network_transmit_bytes_total', 'node_network_receive_bytes_total',
    'node_infiniband_state_id', 'node_infiniband_physical_state_id', 'node_infiniband_rate_bytes_per_second',
    'node_infiniband_port_data_transmitted_bytes_total', 'node_infiniband_port_data_received_bytes_total',
    'node_textfile_mtime_seconds', 'node_textfile_scrape_error',
}
PROMETHEUS = {'up', 'scrape_duration_seconds'}

KEYWORDS = {'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'bool', 'offset',
            'inf', 'nan'}


def simulator_series():
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    from vllm_sim import cli, engine, serve  # pylint: disable=import-error,import-outside-toplevel
    args = cli.build_parser().parse_args(['serve', 'm', '--speculative-config', '{"method": "mtp", "num_speculative_tokens": 2}'])
    text = engine.Engine(serve.Config(args)).render_metrics()
    return {ln.split('{', 1)[0].split(' ', 1)[0] for ln in text.splitlines() if ln and not ln.startswith('#')}


def guard_series():
    sys.path.insert(0, os.path.join(TESTS, 'unit', 'roles'))
    try:
        from vllm_service.role_files import load  # pylint: disable=import-error,import-outside-toplevel
    finally:
        sys.path.pop(0)
    state = pg_state.GuardState({'hang_watchdog': True, 'memory_guard': True, 'canary': True})
    state.rank('head', 'spark1', True)
    psi = 'some avg10=1.00 avg60=0 avg300=0 total=1\nfull avg10=0.50 avg60=0 avg300=0 total=1\n'
    state.memory = {'spark1': memory_guard.assess('spark1', 'MemTotal: 125489508 kB\nMemFree: 4194304 kB\n'
                                                  'MemAvailable: 9437184 kB\n', psi, None, '', '1572864\n')}
    text = state.render(0)
    # the boot forensics' textfile (the node package's forensics.py), written by the head's prestart
    path = os.path.join(TESTS, '..', '.cache', 'forensics-series.prom')
    finding = {'node': 'spark1', 'id': 'gsp-timeout'}
    forensics.export({'textfile': path}, [finding], True, 0)
    with open(path) as fh:
        text += fh.read()
    os.unlink(path)
    return {ln.split('{', 1)[0].split(' ', 1)[0] for ln in text.splitlines() if ln and not ln.startswith('#')}


def tls_series():
    """The series of the fronts' TLS textfile, read from what the task writes (roles/api_proxy/vars/main.yml
    _api_proxy_tls_textfile_content, written by tasks/tls_front_files.yml)."""
    with open(os.path.join(REPO, 'roles', 'api_proxy', 'vars', 'main.yml')) as f:
        text = yaml.safe_load(f)['_api_proxy_tls_textfile_content']
    with open(os.path.join(REPO, 'roles', 'api_proxy', 'tasks', 'tls_front_files.yml')) as f:
        tasks = yaml.safe_load(f)
    writers = [t for t in tasks if 'expiry for the node exporter' in t.get('name', '')]
    assert len(writers) == 1 and writers[0]['ansible.builtin.copy']['content'] == '{{ _api_proxy_tls_textfile_content }}', writers
    return set(re.findall(r'^(dgxspark_ds4_tls_[a-z_]+)\{', text, re.M))


def known_series():
    names = set(VLLM_COUNTERS_GAUGES) | NODE_EXPORTER | PROMETHEUS | simulator_series() | guard_series() | tls_series()
    for hist in VLLM_HISTOGRAMS:
        names |= {hist + '_bucket', hist + '_sum', hist + '_count'}
    return names


def series_in(expr):
    """Metric names a PromQL expression selects (functions, keywords, labels, durations left out)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r'\{[^}]*\}', ' ', text)
    text = re.sub(r'\[[^\]]*\]', ' ', text)
    text = re.sub(r'\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)', ' ', text)
    names = set()
    for m in re.finditer(r'(?<![\w:$.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?', text):
        name, call = m.group(1), m.group(2)
        if call or name.lower() in KEYWORDS:
            continue
        names.add(name)
    return names


def rules():
    with open(RULES) as fh:
        return [r for g in yaml.safe_load(fh)['groups'] for r in g['rules']]


def dashboard_exprs():
    with open(DASHBOARD) as fh:
        dash = json.load(fh)
    out = []

    def walk(panels):
        for panel in panels:
            for target in panel.get('targets') or []:
                out.append((panel['title'], target['expr']))
            walk(panel.get('panels') or [])
    walk(dash['panels'])
    for ann in dash.get('annotations', {}).get('list', []):
        if ann.get('expr'):
            out.append(('annotation ' + ann['name'], ann['expr']))
    return dash, out


def promtool():
    path = shutil.which('promtool')
    if path:
        return path
    if os.environ.get('CI', '').lower() in ('1', 'true', 'yes'):
        pytest.fail('promtool not found under CI=true: the CI machine must `apt-get install -y prometheus` (Debian package, '
                    'provides /usr/bin/promtool) so the alert rules are checked and tested')
    pytest.skip('promtool not installed (apt-get install -y prometheus); CI=true makes this a failure')
    return None


# --------------------------------------------------------------------------- promtool
def test_promtool_check_rules():
    proc = subprocess.run([promtool(), 'check', 'rules', RULES], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout
    assert 'SUCCESS: %d rules found' % len(rules()) in proc.stdout


def test_promtool_test_rules():
    proc = subprocess.run([promtool(), 'test', 'rules', os.path.basename(RULES_TEST)], cwd=os.path.dirname(RULES_TEST),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout
    assert 'SUCCESS' in proc.stdout


def test_dashboard_queries_are_valid_promql(tmp_path):
    _dash, exprs = dashboard_exprs()
    group = {'groups': [{'name': 'dashboard', 'rules': [
        {'record': 'dashboard:query_%d' % i, 'expr': expr.replace('$__rate_interval', '5m').replace('$__interval', '1m')}
        for i, (_title, expr) in enumerate(exprs)]}]}
    path = tmp_path / 'dashboard-queries.rules.yml'
    path.write_text(yaml.safe_dump(group))
    proc = subprocess.run([promtool(), 'check', 'rules', str(path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout


# --------------------------------------------------------------------------- coverage of the rule tests
def test_every_alert_has_a_firing_and_a_quiet_test_series():
    with open(RULES_TEST) as fh:
        spec = yaml.safe_load(fh)
    assert spec['rule_files'] == ['../../../../../roles/monitoring/files/dgxspark-ds4.rules.yml']
    fires, quiet = set(), set()
    for test in spec['tests']:
        for case in test['alert_rule_test']:
            (fires if case.get('exp_alerts') else quiet).add(case['alertname'])
    alerts = {r['alert'] for r in rules()}
    assert alerts == fires, 'alerts without a firing test: %s' % sorted(alerts - fires)
    assert alerts == quiet, 'alerts without a must-not-fire test: %s' % sorted(alerts - quiet)


def test_alert_list_covers_hang_rank_storm_kv_queue_memory_and_fabric():
    alerts = {r['alert'] for r in rules()}
    for name in ('DS4EngineHung', 'DS4RankDown', 'DS4RestartStorm', 'DS4KVCacheNearFull', 'DS4RequestsWaitingNoneRunning',
                 'DS4QueueTimeHigh', 'DS4MemoryPressure', 'DS4FabricLinkDown', 'DS4FabricDegradedToSockets', 'DS4NodeExporterDown',
                 'DS4TLSCertificateExpiring', 'DS4QualityCanaryFailing'):
        assert name in alerts
    for rule in rules():
        assert rule['labels']['severity'] in ('critical', 'warning')
        assert rule['annotations']['summary'] and rule['annotations']['description']


def test_hang_rule_matches_the_watchdog_definition():
    """The alert and the pair guard's watchdog read the same progress signals: the three counters and the KV-cache
    usage gauge (the one series real vLLM moves during a chunked prefill)."""
    expr = next(r['expr'] for r in rules() if r['alert'] == 'DS4EngineHung')
    progress = set(pg_hang.PROGRESS_SERIES)
    assert 'vllm:kv_cache_usage_perc' in progress
    assert series_in(expr) == {'vllm:num_requests_running'} | progress
    assert 'min_over_time(vllm:num_requests_running[2m])' in expr
    assert 'unless on (instance) sum by (instance) (changes(vllm:kv_cache_usage_perc[2m])) > 0' in expr


# --------------------------------------------------------------------------- metric names
def test_series_extraction():
    assert series_in('sum by (le) (rate(vllm:x_bucket{job="vllm",le=~"1|2"}[5m])) > 0 and on (instance) up == 0') == {
        'vllm:x_bucket', 'up'}
    assert series_in('histogram_quantile(0.9, sum by (instance, le) (rate(a_bucket[$__rate_interval])))') == {'a_bucket'}
    assert series_in('1 + sum(rate(a_total[1m])) / ignoring (position) group_left sum(b)') == {'a_total', 'b'}


def test_rules_name_only_exported_series():
    known = known_series()
    for rule in rules():
        unknown = series_in(rule['expr']) - known
        assert not unknown, '%s uses series nobody exports: %s' % (rule['alert'], sorted(unknown))


def test_dashboard_names_only_exported_series():
    known = known_series()
    dash, exprs = dashboard_exprs()
    assert dash['uid'] == 'dgxspark-ds4-pair' and len(exprs) >= 20
    for title, expr in exprs:
        names = series_in(expr)
        assert names, '%s: no series in %r' % (title, expr)
        unknown = names - known
        assert not unknown, 'panel %r uses series nobody exports: %s' % (title, sorted(unknown))


def test_dashboard_covers_the_pair():
    _dash, exprs = dashboard_exprs()
    used = set()
    for _title, expr in exprs:
        used |= series_in(expr)
    for name in ('vllm:generation_tokens_total', 'vllm:time_to_first_token_seconds_bucket', 'vllm:inter_token_latency_seconds_bucket',
                 'vllm:kv_cache_usage_perc', 'vllm:num_requests_running', 'vllm:num_requests_waiting',
                 'vllm:spec_decode_num_accepted_tokens_per_pos_total', 'node_memory_MemFree_bytes',
                 'node_infiniband_port_data_transmitted_bytes_total', 'node_network_transmit_bytes_total',
                 'dgxspark_ds4_guard_restarts_total', 'dgxspark_ds4_guard_hangs_total', 'dgxspark_ds4_guard_rank_up'):
        assert name in used, name


def test_unknown_series_would_be_caught():
    known = known_series()
    assert 'vllm:gpu_cache_usage_perc' not in known          # removed in vLLM 0.27.1 / 0.33 (renamed kv_cache_usage_perc)
    assert series_in('max(vllm:gpu_cache_usage_perc)') - known == {'vllm:gpu_cache_usage_perc'}
