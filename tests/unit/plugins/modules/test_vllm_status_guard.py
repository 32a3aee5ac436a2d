# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""status.yml shows the pair guard's last hang and last restart cause: ops_status turns the
guard's state file into a row field and table lines; vllm_status main() reads the file (no systemctl/docker:
the module reports them missing, the guard part still comes through)."""


import json
import time

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import ops_status
from ansible_collections.dgxspark.ds4.plugins.modules import vllm_status as mod
from .module_harness import ExitJson, FailJson, patch_exit

NOW = 1764000000.0
STATE = {
    'restarts_total': 2, 'hangs_total': 1, 'storm_stops_total': 0,
    'restarts_by_cause': {'hang_no_tokens': 1, 'worker_restarted': 1},
    'last_cause': 'worker_restarted', 'last_action': 'restart', 'last_restart_at': NOW - 65,
    'last_why': 'worker spark2: dgxspark-ds4-worker.service restarted on its own (invocation abc, head was paired with def)',
    'last_hang_at': NOW - 3700,
    'last_hang_why': 'hang: 3 requests running, generation tokens stuck at 1000, prompt tokens at 500, engine steps at 300 '
                     'for 120 s (limit 120 s); evidence in /var/lib/dgxspark-ds4/evidence/hang-20251124T150000Z',
    'last_hang_evidence': '/var/lib/dgxspark-ds4/evidence/hang-20251124T150000Z',
}


def test_guard_summary_names_last_hang_and_last_cause():
    s = ops_status.guard_summary(STATE, NOW)
    assert s['restarts'] == 2 and s['hangs'] == 1 and s['last_cause'] == 'worker_restarted'
    assert s['last_restart_ago'] == '1m05s ago' and s['last_hang_ago'] == '1h01m ago'
    assert s['text'] == ('2 pair restarts (last restart: worker_restarted, 1m05s ago); 1 hangs (last 1h01m ago, evidence '
                         '/var/lib/dgxspark-ds4/evidence/hang-20251124T150000Z)')
    assert ops_status.guard_summary({}, NOW) is None and ops_status.guard_summary(None, NOW) is None
    quiet = ops_status.guard_summary({'restarts_total': 0}, NOW)
    assert quiet['text'] == '0 pair restarts; no hang'
    stopped = ops_status.guard_summary(dict(STATE, storm_stops_total=1, last_action='stop', last_cause='hang_no_tokens'), NOW)
    assert stopped['text'].endswith('; 1 storm stops') and '(last stop: hang_no_tokens' in stopped['text']


def test_table_lists_the_guard_below_the_ranks():
    unit = ops_status.parse_systemctl_show('ActiveState=active\nSubState=running\n')
    cont = ops_status.parse_docker_inspect('[]')
    head = ops_status.build_row('spark1', 'head', unit, cont, None, None, NOW, STATE)
    worker = ops_status.build_row('spark2', 'worker', unit, cont, None, None, NOW)
    assert 'guard' in head and 'guard' not in worker
    lines = ops_status.format_table([worker, head])
    assert lines[2].startswith('spark1') and lines[3].startswith('spark2')
    assert lines[4] == 'pair guard on spark1: ' + head['guard']['text']
    assert lines[5] == '  last hang: ' + STATE['last_hang_why']
    assert lines[6] == '  last cause: ' + STATE['last_why']
    assert len(lines) == 7


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    patch_exit(monkeypatch)
    monkeypatch.setattr(AnsibleModule, 'get_bin_path', lambda self, *a, **k: None)
    monkeypatch.setattr(time, 'time', lambda: NOW)


def run(args):
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as info:
            mod.main()
    return info.type, info.value.args[0]


def test_module_reads_the_guard_state_file(tmp_path):
    path = tmp_path / 'pairguard-state.json'
    path.write_text(json.dumps(STATE))
    kind, result = run({'role': 'head', 'unit': 'dgxspark-ds4-head.service', 'container': 'dgxspark-ds4-head',
                        'guard_state': str(path)})
    assert kind is ExitJson and result['changed'] is False
    assert result['row']['guard']['last_hang_evidence'] == STATE['last_hang_evidence']
    assert result['row']['guard']['last_cause'] == 'worker_restarted'


@pytest.mark.parametrize('content', [None, 'not json'])
def test_module_without_a_readable_guard_state_has_no_guard(tmp_path, content):
    path = tmp_path / 'pairguard-state.json'
    if content is not None:
        path.write_text(content)
    kind, result = run({'role': 'head', 'unit': 'u.service', 'container': 'c', 'guard_state': str(path)})
    assert kind is ExitJson and 'guard' not in result['row']


# --------------------------------------------------------------------------- boot forensics and memory guard
# crash-hold.json as roles/vllm_service/files/forensics.py writes it (the GB10 freeze fixture of tests/fixtures/kernel)
CRASH = {
    'incident': '3f2a9c1b7d4e', 'after_crash': 'hold', 'held': True, 'fallback_recipe': None, 'found_at': NOW - 60,
    'evidence': '/var/lib/dgxspark-ds4/evidence/crash-20251124T150000Z-3f2a9c1b7d4e',
    'findings': [
        {'node': 'spark1', 'id': 'nv-err-no-memory', 'cause': 'the unified-memory pool is exhausted',
         'fix': 'lower --gpu-memory-utilization / --max-num-seqs', 'source': 'vllm-ops.md §2.3G',
         'line': '2026-11-25T02:41:07+0000 spark1 kernel: NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory '
                 '[NV_ERR_NO_MEMORY] (0x00000051)'},
        {'node': 'spark1', 'id': 'unclean-shutdown', 'cause': 'the previous boot ended without a clean shutdown',
         'fix': 'read the evidence record', 'source': 'field notes 2026-11', 'line': 'INFO: task kworker/u40:2:1234 blocked'},
    ],
}


def test_status_names_a_held_crash_with_its_fix_evidence_and_release():
    unit = ops_status.parse_systemctl_show('ActiveState=inactive\nSubState=dead\n')
    cont = ops_status.parse_docker_inspect('[]')
    head = ops_status.build_row('spark1', 'head', unit, cont, None, None, NOW, None, CRASH)
    lines = ops_status.format_table([head])
    assert lines[3:] == [
        'spark1: previous boot crashed, pair HELD (not started): incident 3f2a9c1b7d4e, vllm_service_after_crash hold',
        '  spark1: the unified-memory pool is exhausted (nv-err-no-memory) [2026-11-25T02:41:07+0000 spark1 kernel: NVRM: '
        'nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051)]',
        '  spark1: the previous boot ended without a clean shutdown (unclean-shutdown) [INFO: task kworker/u40:2:1234 blocked]',
        '  fix: lower --gpu-memory-utilization / --max-num-seqs',
        '  evidence: /var/lib/dgxspark-ds4/evidence/crash-20251124T150000Z-3f2a9c1b7d4e; release: ansible-playbook '
        'playbooks/ack.yml']
    started = ops_status.crash_summary(dict(CRASH, held=False, after_crash='start'))
    assert started['text'].startswith('previous boot crashed, pair started anyway (vllm_service_after_crash: start)')
    # recorded, not a crash the pair would repeat (forensics.py: 'holding' False): started, not "crashed"
    recorded = ops_status.crash_summary(dict(CRASH, held=False, holding=False,
                                             verdict='started: unclean end of spark1 with no GPU fault while the pair was serving'))
    assert recorded['text'] == ('previous boot left signatures, pair started (unclean end of spark1 with no GPU fault while the '
                                'pair was serving): incident 3f2a9c1b7d4e, vllm_service_after_crash hold')
    fallback = ops_status.crash_summary(dict(CRASH, after_crash='fallback:latency', fallback_recipe='latency'))
    assert '  then switch to the safer recipe: ansible-playbook playbooks/switch.yml -e ds4_profile=latency' in fallback['lines']
    assert ops_status.crash_summary(None) is None and ops_status.crash_summary({'incident': 'x', 'findings': []}) is None


def test_module_reads_the_crash_hold_file(tmp_path):
    path = tmp_path / 'crash-hold.json'
    path.write_text(json.dumps(CRASH))
    kind, result = run({'role': 'head', 'unit': 'u.service', 'container': 'c', 'crash_hold': str(path)})
    assert kind is ExitJson and result['row']['crash']['held'] is True
    assert result['row']['crash']['signatures'] == ['nv-err-no-memory', 'unclean-shutdown']
    kind, result = run({'role': 'head', 'unit': 'u.service', 'container': 'c', 'crash_hold': str(tmp_path / 'absent.json')})
    assert 'crash' not in result['row']


def test_guard_summary_names_the_memory_guard():
    state = dict(STATE, memory_gates_total=2, memory_stops_total=1, last_memory_at=NOW - 30,
                 last_memory_why='memory guard: spark2 (128 GB node): MemFree 0.50 GiB < floor 1.00 GiB (MemAvailable 61.0 GiB)')
    s = ops_status.guard_summary(state, NOW)
    assert s['text'].endswith('; memory guard: 2 out of rotation, 1 stops (last 0m30s ago)')
    unit = ops_status.parse_systemctl_show('ActiveState=inactive\nSubState=dead\n')
    row = ops_status.build_row('spark1', 'head', unit, ops_status.parse_docker_inspect('[]'), None, None, NOW, state)
    lines = ops_status.format_table([row])
    assert lines[-1] == '  last memory guard action: ' + state['last_memory_why']


# --------------------------------------------------------------------------- quality canary
# the canary keys of pairguard-state.json as roles/vllm_service/files/pairguard.py (GuardState) keeps them
CANARY_OK = dict(STATE, canary_runs_total=12, canary_failures_total=0, canary_skips_total=2, canary_consecutive=0,
                 last_canary_at=NOW - 180, last_canary_ok=True, last_canary_why='', last_canary_evidence='',
                 last_canary_ttft_s=0.2149, last_canary_decode_tps=49.84,
                 canary_baseline={'ttft_s': 0.2, 'decode_tps': 50.1, 'at': NOW - 86400})
CANARY_FAILED = dict(CANARY_OK, canary_runs_total=14, canary_failures_total=2, canary_consecutive=2,
                     last_canary_at=NOW - 65, last_canary_ok=False,
                     last_canary_why="arithmetic: garble unexpected_script '4 我们 的 模型'",
                     last_canary_evidence='/var/lib/dgxspark-ds4/evidence/canary-20251124T150000Z')
CONFIG_ON = {'canary': True, 'canary_interval_s': 600, 'canary_api_key': 'sk-secret', 'head_unit': 'x.service'}


def test_canary_summary_last_run_ok_with_timings_against_the_baseline():
    s = ops_status.canary_summary(CANARY_OK, CONFIG_ON, NOW)
    assert s['text'] == ('last run 3m00s ago: ok (ttft 0.21 s, decode 49.8 tok/s; baseline 0.20 s, 50.1 tok/s); 12 runs, '
                         '0 failed, 2 skipped (saturated or unreachable)')
    assert (s['enabled'], s['interval_s'], s['runs'], s['failures'], s['skips']) == (True, 600, 12, 0, 2)
    # the first passing run of a head is its baseline: none yet reads so; no skip, no skip count
    first = ops_status.canary_summary(dict(CANARY_OK, canary_baseline={}, canary_skips_total=0, canary_runs_total=1),
                                      CONFIG_ON, NOW)
    assert first['text'] == 'last run 3m00s ago: ok (ttft 0.21 s, decode 49.8 tok/s; no baseline yet); 1 runs, 0 failed'


def test_canary_summary_failure_names_why_how_many_in_a_row_and_the_evidence():
    s = ops_status.canary_summary(CANARY_FAILED, CONFIG_ON, NOW)
    assert s['text'] == ("last run 1m05s ago: FAILED (arithmetic: garble unexpected_script '4 我们 的 模型'), 2 in a row, "
                         'evidence /var/lib/dgxspark-ds4/evidence/canary-20251124T150000Z; 14 runs, 2 failed, '
                         '2 skipped (saturated or unreachable)')
    assert s['consecutive'] == 2 and s['last_ok'] is False
    bare = ops_status.canary_summary(dict(CANARY_FAILED, last_canary_why='', last_canary_evidence=''), CONFIG_ON, NOW)
    assert bare['text'].startswith('last run 1m05s ago: FAILED (no reason recorded), 2 in a row; 14 runs')


def test_canary_summary_counts_the_inconclusive_runs_apart_from_failures_and_skips():
    """A canary request that got no answer while the pair was busy (a long prefill it queued behind) is neither a pass
    nor a failure (roles/vllm_service/files/pairguard.py, GuardState.canary_inconclusive)."""
    busy = dict(CANARY_OK, canary_inconclusive_total=3, last_canary_inconclusive='quality canary inconclusive (...)')
    s = ops_status.canary_summary(busy, CONFIG_ON, NOW)
    assert s['text'] == ('last run 3m00s ago: ok (ttft 0.21 s, decode 49.8 tok/s; baseline 0.20 s, 50.1 tok/s); 12 runs, '
                         '0 failed, 2 skipped (saturated or unreachable), 3 inconclusive (no answer while the pair was '
                         'busy: not failures)')
    assert (s['failures'], s['skips'], s['inconclusive']) == (0, 2, 3)
    only = dict(STATE, canary_inconclusive_total=1, last_canary_at=None, last_canary_ok=None)
    assert ops_status.canary_summary(only, None, NOW)['text'] == ('no run yet, 1 inconclusive (no answer while the pair '
                                                                  'was busy: not failures)')


def test_canary_summary_off_no_run_yet_and_a_guard_without_the_canary():
    assert ops_status.canary_summary(CANARY_FAILED, {'canary': False, 'canary_interval_s': 600}, NOW)['text'] == 'off'
    assert ops_status.canary_summary(None, CONFIG_ON, NOW)['text'] == 'no run yet (every 600 s)'
    fresh = dict(STATE, canary_runs_total=0, canary_skips_total=3, last_canary_at=None, last_canary_ok=None)
    assert ops_status.canary_summary(fresh, CONFIG_ON, NOW)['text'] == 'no run yet (every 600 s), 3 skipped (saturated or unreachable)'
    # no config readable: the state alone (a failure still shows); a guard that never had the canary: no line
    assert ops_status.canary_summary(CANARY_FAILED, None, NOW)['text'].startswith('last run 1m05s ago: FAILED')
    assert ops_status.canary_summary(STATE, None, NOW) is None
    assert ops_status.canary_summary(None, None, NOW) is None


def test_table_shows_the_canary_below_the_pair_guard():
    unit = ops_status.parse_systemctl_show('ActiveState=active\nSubState=running\n')
    cont = ops_status.parse_docker_inspect('[]')
    head = ops_status.build_row('spark1', 'head', unit, cont, None, None, NOW, CANARY_FAILED, None, CONFIG_ON)
    worker = ops_status.build_row('spark2', 'worker', unit, cont, None, None, NOW)
    assert 'canary' in head and 'canary' not in worker
    lines = ops_status.format_table([worker, head])
    assert lines[4] == 'pair guard on spark1: ' + head['guard']['text']
    assert lines[-1] == 'quality canary on spark1: ' + head['canary']['text']
    assert len(lines) == 8
    # a guard without the canary (no config key, no run): no line, as before
    old = ops_status.build_row('spark1', 'head', unit, cont, None, None, NOW, STATE)
    assert 'canary' not in old and not any(ln.startswith('quality canary') for ln in ops_status.format_table([old]))


def test_module_reads_the_canary_from_the_guard_state_and_config(tmp_path):
    state, config = tmp_path / 'pairguard-state.json', tmp_path / 'pairguard.json'
    state.write_text(json.dumps(CANARY_OK))
    config.write_text(json.dumps(CONFIG_ON))
    kind, result = run({'role': 'head', 'unit': 'u.service', 'container': 'c', 'guard_state': str(state),
                        'guard_config': str(config)})
    assert kind is ExitJson and result['row']['canary']['text'].startswith('last run 3m00s ago: ok (ttft 0.21 s')
    assert 'sk-secret' not in json.dumps(result)          # only `canary` and `canary_interval_s` of the config
    config.write_text(json.dumps({'canary': False}))
    kind, result = run({'role': 'head', 'unit': 'u.service', 'container': 'c', 'guard_state': str(state),
                        'guard_config': str(config)})
    assert result['row']['canary']['text'] == 'off'
