# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deploy-contract drills on the converged pair, run last (file name sorts after the others).

Each test runs playbooks/site.yml again from the controller against the Molecule inventory:
- a bad host_hardening value is refused before anything on the hosts changes (hardening contract);
- a changed launch flag restarts both ranks, worker first (restart contract);
- a unit that would reference a missing path is refused at deploy time and the running pair
  is left alone (restart contract; seed 000's ghost ExecStart, docs/sources.md).
The pair is restored to the scenario's own configuration at the end.
"""

from __future__ import absolute_import, division, print_function

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
from ds4_drill import BASE_OVERRIDES, INVENTORY, node, run_playbook, started_at  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not INVENTORY, reason='runs inside molecule verify only')


def run_site(*extra_vars):
    return run_playbook('site.yml', *extra_vars)


def test_bad_hardening_value_refused_before_any_change():
    before = node('spark1', 'stat', '-c', '%Y %s', '/etc/sysctl.d/60-dgxspark-ds4.conf')
    rc, out = run_site({'host_hardening_vm_min_free_kbytes': 'lots'})
    assert rc != 0
    assert 'host_hardening_vm_min_free_kbytes' in out
    assert 'changed=' in out and 'TASK [dgxspark.ds4.host_hardening : Swap' not in out
    assert node('spark1', 'stat', '-c', '%Y %s', '/etc/sysctl.d/60-dgxspark-ds4.conf') == before


def test_changed_flag_restarts_both_ranks_worker_first():
    head0, worker0 = started_at('spark1', 'head'), started_at('spark2', 'worker')
    changed = dict(BASE_OVERRIDES, serve_args={'max-num-seqs': 4})
    rc, out = run_site({'ds4_site_overrides': changed})
    assert rc == 0, out[-3000:]
    head1, worker1 = started_at('spark1', 'head'), started_at('spark2', 'worker')
    assert head1 != head0 and worker1 != worker0, 'both ranks must restart'
    assert worker1 < head1, 'the worker must start before the head (%s vs %s)' % (worker1, head1)
    assert "'--max-num-seqs' '4'" in node('spark1', 'cat', '/etc/dgxspark-ds4/launch-head.sh') or \
        '--max-num-seqs 4' in node('spark1', 'cat', '/etc/dgxspark-ds4/launch-head.sh')
    # Back to the scenario's configuration: restarts again (it changed). That an unchanged run
    # restarts nothing is the idempotence step's job (test_endpoint.py reads the start times).
    rc, out = run_site()
    assert rc == 0, out[-3000:]
    head2, worker2 = started_at('spark1', 'head'), started_at('spark2', 'worker')
    assert head2 != head1 and worker2 != worker1 and worker2 < head2


def test_unit_referencing_missing_path_refused_at_deploy_time():
    """Seed 000's ghost ExecStart: a unit whose executable is missing never gets installed."""
    unit_before = node('spark1', 'cat', '/etc/systemd/system/dgxspark-ds4-head.service')
    prestart_before = node('spark2', 'cat', '/etc/dgxspark-ds4/prestart-worker.json')
    head0 = started_at('spark1', 'head')
    rc, out = run_site({'vllm_service_docker_bin': '/usr/local/bin/docker-gone'})
    assert rc != 0
    assert '/usr/local/bin/docker-gone' in out and 'does not exist' in out
    assert node('spark1', 'cat', '/etc/systemd/system/dgxspark-ds4-head.service') == unit_before
    # nothing half-written either: the next (re)start must still work
    assert node('spark2', 'cat', '/etc/dgxspark-ds4/prestart-worker.json') == prestart_before
    assert started_at('spark1', 'head') == head0, 'a refused deploy must not touch the running pair'
