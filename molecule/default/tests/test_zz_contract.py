# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deploy-contract drills on the converged pair, run last (file name sorts after the others).

Each test runs playbooks/site.yml again from the controller against the Molecule inventory:
- a bad host_hardening value is refused before anything on the hosts changes (issue #4);
- a changed launch flag restarts both ranks, worker first (issue #8);
- a unit that would reference a missing path is refused at deploy time and the running pair
  is left alone (issue #8, seed 000's ghost ExecStart).
The pair is restored to the scenario's own configuration at the end.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import subprocess

import pytest

INVENTORY = os.environ.get('MOLECULE_INVENTORY_FILE', '')
PROJECT = os.environ.get('MOLECULE_PROJECT_DIRECTORY', os.getcwd())
SITE = os.path.join(PROJECT, 'playbooks', 'site.yml')
BASE_OVERRIDES = {
    'image': {'ref': 'ds4-vllm-sim:test'},
    'model': {'revision': '0123456789abcdef0123456789abcdef01234567'},
}

pytestmark = pytest.mark.skipif(not INVENTORY, reason='runs inside molecule verify only')


def run_site(*extra_vars):
    cmd = [shutil.which('ansible-playbook') or 'ansible-playbook', '-i', os.path.dirname(INVENTORY), SITE]
    for ev in extra_vars:
        cmd += ['-e', json.dumps(ev)]
    env = dict(os.environ)
    env.setdefault('ANSIBLE_COLLECTIONS_PATH', os.path.join(PROJECT, '.collections'))
    env['ANSIBLE_NOCOLOR'] = '1'
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          env=env, cwd=PROJECT, timeout=900, check=False)
    return proc.returncode, proc.stdout


def node(name, *argv):
    return subprocess.run(['docker', 'exec', name] + list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=True).stdout.strip()


def started_at(name, role):
    """Container StartedAt as (seconds-part, nanoseconds) so Docker's trimmed fractions compare right."""
    raw = node(name, 'docker', 'inspect', '-f', '{{.State.StartedAt}}', 'dgxspark-ds4-%s' % role)
    stamp, _dot, frac = raw.rstrip('Z').partition('.')
    return stamp, int((frac + '000000000')[:9])


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
    # Back to the scenario's configuration: restarts again (it changed), then nothing.
    rc, out = run_site()
    assert rc == 0, out[-3000:]
    head2 = started_at('spark1', 'head')
    rc, out = run_site()
    assert rc == 0, out[-3000:]
    assert started_at('spark1', 'head') == head2, 'an unchanged run must restart nothing'


def test_unit_referencing_missing_path_refused_at_deploy_time():
    """Seed 000's ghost ExecStart: a unit whose executable is missing never gets installed."""
    unit_before = node('spark1', 'cat', '/etc/systemd/system/dgxspark-ds4-head.service')
    head0 = started_at('spark1', 'head')
    rc, out = run_site({'vllm_service_docker_bin': '/usr/local/bin/docker-gone'})
    assert rc != 0
    assert '/usr/local/bin/docker-gone' in out and 'does not exist' in out
    assert node('spark1', 'cat', '/etc/systemd/system/dgxspark-ds4-head.service') == unit_before
    assert started_at('spark1', 'head') == head0, 'a refused deploy must not touch the running pair'
