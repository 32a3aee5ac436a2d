# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deploy-contract drills on the converged pair, run last (file name sorts after the others).

Each test runs playbooks/site.yml again from the controller against the Molecule inventory:
- a bad host_hardening value is refused before anything on the hosts changes (hardening contract);
- (a changed launch flag restarts both ranks, worker first: asserted on every recipe switch of the profile matrix,
  test_zz_profiles.py, which changes the launch each time; a separate flag change and its way back cost two more
  restarting deploys of CI time for the same check);
- a unit that would reference a missing path is refused at deploy time and the running pair
  is left alone (restart contract; seed 000's ghost ExecStart, docs/sources.md).
Neither changes the pair.
"""


import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
from ds4_drill import INVENTORY, node, run_playbook, started_at  # noqa: E402  pylint: disable=wrong-import-position

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
