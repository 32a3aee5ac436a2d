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
