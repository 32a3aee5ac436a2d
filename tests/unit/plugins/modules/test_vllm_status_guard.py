# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""status.yml shows the pair guard's last hang and last restart cause: ops_status turns the
guard's state file into a row field and table lines; vllm_status main() reads the file (no systemctl/docker:
the module reports them missing, the guard part still comes through)."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import time

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.ds4.plugins.module_utils import ops_status
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
