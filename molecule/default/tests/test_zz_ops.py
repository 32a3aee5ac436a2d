# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The operations playbooks (status, logs, stop, restart, validate, bench, switch, rollback) against the converged two-node pair, run last.

status, logs, stop (head first), restart (worker first, readiness), validate, bench (table, JSON,
plot), then a profile switch balanced -> throughput and a rollback, both through readiness. The
pair ends on the scenario's own (balanced) configuration.
"""

from __future__ import absolute_import, division, print_function

import glob
import json
import os
import re
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position
sys.path.insert(0, os.path.join(d.PROJECT, 'tests', 'harness'))
import demo  # noqa: E402  pylint: disable=wrong-import-position,import-error

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

def ops(name, *extra, **kwargs):
    rc, out = d.run_playbook(name, *extra, **kwargs)
    if rc != 0:
        units = '\n'.join(d.node(n, 'journalctl', '--no-pager', '-o', 'cat', '-n', '25', '-u', u, check=False)
                          for n, u in (('spark1', 'dgxspark-ds4-head.service'), ('spark2', 'dgxspark-ds4-worker.service'),
                                       ('spark1', 'dgxspark-ds4-pairguard.service')))
        raise AssertionError('%s failed:\n%s\n--- journals:\n%s' % (name, out[-4000:], units))
    return out


def head_script():
    return d.node('spark1', 'cat', '/etc/dgxspark-ds4/launch-head.sh')


def served_max_model_len():
    _status, body = d.request('/v1/models')
    return json.loads(body)['data'][0]['max_model_len']


# Both readiness timeouts mean the same in every playbook that readies the pair (playbooks/tasks/ready.yml).
READY_LIMITS = {'ds4_ready_timeout': 1234, 'ds4_ready_chat_timeout': 45}


def assert_ready_limits(out):
    flat = ' '.join(out.split())
    assert 'chat_timeout: 45.0' in flat and ' timeout: 1234.0' in flat, 'readiness did not get both timeouts: ' + out[-2000:]


def test_status_one_table_for_both_ranks():
    out = ops('status.yml')
    rows = [ln.split() for ln in out.splitlines() if ln.strip().startswith(('spark1 ', 'spark2 ')) and ' ok=' not in ln]
    assert [r[:5] for r in rows] == [['spark1', 'head', 'active/running', 'running', rows[0][4]],
                                     ['spark2', 'worker', 'active/running', 'running', rows[0][4]]], rows
    assert rows[0][5] == rows[1][5] == 'balanced', rows
    assert "ok deepseek-v4-flash 'OK'" in out


def test_logs_labelled_by_node():
    out = ops('logs.yml', {'ds4_logs_lines': 20})
    assert 'spark1 (head) |' in out and 'spark2 (worker) |' in out


def test_stop_head_first_then_restart_worker_first():
    ops('stop.yml')
    head = d.unit_show('spark1', 'dgxspark-ds4-head.service', 'ActiveState', 'InactiveEnterTimestampMonotonic')
    worker = d.unit_show('spark2', 'dgxspark-ds4-worker.service', 'ActiveState', 'InactiveEnterTimestampMonotonic')
    assert head['ActiveState'] == 'inactive' and worker['ActiveState'] == 'inactive'
    # Both containers share the CI machine's kernel: their monotonic clocks are the same clock.
    assert int(head['InactiveEnterTimestampMonotonic']) < int(worker['InactiveEnterTimestampMonotonic']), 'head must stop first'
    out = ops('restart.yml', READY_LIMITS, args=['-v'])
    assert_ready_limits(out)
    head1, worker1 = d.started_at('spark1', 'head'), d.started_at('spark2', 'worker')
    assert worker1 < head1, 'worker must start first'
    assert d.chat()


def test_validate_passes_on_a_clean_endpoint():
    out = ops('validate.yml', {'ds4_validate_levels': [1, 2]})
    assert re.search(r'msg: [1-9][0-9]* request\(s\), 0 failure\(s\)', out), out[-2000:]


def test_bench_writes_table_json_and_plot():
    outdir = tempfile.mkdtemp(prefix='ds4-bench-')
    ops('bench.yml', {'ds4_bench_levels': [1, 2], 'ds4_bench_max_tokens': 64, 'ds4_bench_dir': outdir})
    for ext in ('json', 'md', 'png'):
        assert glob.glob(os.path.join(outdir, 'bench-*.%s' % ext)), 'no .%s report in %s' % (ext, outdir)
    report = json.load(open(glob.glob(os.path.join(outdir, 'bench-*.json'))[0]))
    text = json.dumps(report)
    assert 'aggregate' in text and 'ttft' in text.lower()


def test_switch_to_throughput_then_rollback_both_pass_readiness():
    """The switch and rollback `make demo` prints (tests/harness/demo.py next_steps), run as printed against the demo
    inventory, plus the readiness limits (asserted to reach switch.yml's readiness) and -v."""
    assert served_max_model_len() == 131072
    out = d.run_printed(demo.step('switch') + ['-e', json.dumps(READY_LIMITS), '-v'])
    assert_ready_limits(out)
    assert '65536' in head_script()
    assert served_max_model_len() == 65536
    d.run_printed(demo.step('rollback'))
    assert '131072' in head_script()
    assert served_max_model_len() == 131072
    d.wait_serving(60)
    took, answer = demo.chat()
    assert answer.strip(), 'no answer through the printed endpoint after the rollback (%.2f s)' % took
