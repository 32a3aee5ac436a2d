# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scenario `replicas`: maintenance.yml on two pairs under steady client load through the clients' one address (the
VIP), before test_zz_vip.py (which kills a node).

A local apt repository on every node (built here with dpkg-deb; real apt and dpkg, no network: the node's apt sources
are only that repository for the test): ds4-dummy 1.0 installed and held (a hold maintenance.yml releases for its run:
host_hardening_hold_packages lists it), 2.0 in the repository; ds4-handheld held by hand (not the collection's).

1. A run naming ds4-handheld is refused before anything changes.
2. A run with the fabric's MTU lost on spark4 at its reboot (its fixture sysfs at 1500 while the run expects 9000:
   nccl_fabric_expected_mtu): pair1 is upgraded (ds4-dummy 2.0, held again), rebooted (the node containers
   restarted by the controller's reboot command), re-qualified, back in rotation; pair2 is upgraded and rebooted, its
   fabric check fails ([mtu_low]), the run stops there with pair2 out of rotation and pair1 serving; no request fails (a request in
   flight through the VIP when it moves gets no answer: it is retried once after its error or 30 s timeout, as the
   OpenAI SDK does; counted and shown).
3. The MTU fixed, the run again for pair2 alone (-l spark_pair2), without a reboot (pair2 has its packages and
   rebooted in step 2; ds4_maintenance_reboot=false): its fabric re-qualified, its ranks started, the kit, back in
   rotation.

In CI (it was opt-in for CI time until the thirteenth session; figures in docs/testing.md). The node containers'
/var/lib/docker is a tmpfs here, so the reboot command loads the simulator image again after the restart (a real node
keeps its images on disk; nothing of the collection runs in between).
"""


import json
import os
import stat
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position
import ds4_load as load  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

SCENARIO_VARS = os.path.join(d.SCENARIO_DIR, 'vars', 'replicas.yml')
NODES = ('spark1', 'spark2', 'spark3', 'spark4')
P1, P2 = 'spark_pair1', 'spark_pair2'
VIP_URL = '%s://%s:8080' % (d.SCHEME, d.ip(100))
REPO_DIR = '/srv/ds4-apt'
HOLDS = {'host_hardening_hold_packages': ['ds4-dummy']}
# the controller's "power cycle": restart the node container, wait for its inner Docker, load the simulator image
# again (tmpfs /var/lib/docker), and on the nodes listed in the marker file set the fabric netdevs of the fixture
# sysfs (nccl_fabric_sysfs_root) to MTU 1500, as a node whose netplan MTU did not survive the reboot
REBOOT_SCRIPT = r'''#!/bin/bash
set -euo pipefail
node="$1"
docker restart -t 5 "$node" >/dev/null
for _ in $(seq 120); do docker exec "$node" docker info >/dev/null 2>&1 && break; sleep 1; done
docker exec "$node" sh -c 'for f in /images/*.tar; do docker load -i "$f" >/dev/null; done'
if grep -qx "$node" "$(dirname "$0")/mtu-1500" 2>/dev/null; then
  docker exec "$node" sh -c 'for i in enp1s0f1np1 enP2p1s0f1np1; do echo 1500 > /var/lib/ds4-test/sysfs/node_b/class/net/$i/mtu; done'
fi
'''


def figure(text):
    print('FIGURE replicas-maintenance: ' + text)


def _deb(node, name, version):
    """A package built on the node with dpkg-deb: /srv/ds4-apt/<name>_<version>_all.deb."""
    root = '/tmp/ds4-deb-%s-%s' % (name, version)
    d.node(node, 'sh', '-c', 'rm -rf {r} && mkdir -p {r}/DEBIAN {r}/usr/share/{n} && echo {v} > {r}/usr/share/{n}/version && '
           'printf "Package: {n}\\nVersion: {v}\\nArchitecture: all\\nMaintainer: ds4 test <t@example.invalid>\\n'
           'Description: dgxspark.ds4 maintenance drill package\\n" > {r}/DEBIAN/control && mkdir -p {d} && '
           'dpkg-deb --build --root-owner-group {r} {d}/{n}_{v}_all.deb >/dev/null'.format(r=root, n=name, v=version, d=REPO_DIR))
    return '%s/%s_%s_all.deb' % (REPO_DIR, name, version)


def _prepare(node):
    first = _deb(node, 'ds4-dummy', '1.0')
    _deb(node, 'ds4-dummy', '2.0')
    hand = _deb(node, 'ds4-handheld', '1.0')
    d.node(node, 'dpkg', '-i', first, hand)
    d.node(node, 'rm', '-f', first, hand)
    # the repository's index (apt-ftparchive is not on the node: the fields dpkg-deb reports, size and sha256)
    d.node(node, 'sh', '-c', 'cd {d} && for f in *.deb; do dpkg-deb -f "$f"; echo "Filename: ./$f"; '
           'echo "Size: $(stat -c %s "$f")"; echo "SHA256: $(sha256sum "$f" | cut -d" " -f1)"; echo; done > Packages'.format(d=REPO_DIR))
    d.node(node, 'sh', '-c', 'mkdir -p /etc/apt/ds4-test-saved && (mv /etc/apt/sources.list /etc/apt/sources.list.d/* '
           '/etc/apt/ds4-test-saved/ 2>/dev/null || true) && echo "deb [trusted=yes allow-insecure=yes] file:%s ./" > /etc/apt/sources.list' % REPO_DIR)
    d.node(node, 'apt-mark', 'hold', 'ds4-dummy', 'ds4-handheld')


def _version(node, name):
    return d.node(node, 'dpkg-query', '-W', '-f', '${Version} ${db:Status-Want}', name)


def _playbook(*extra, **kwargs):
    t0 = time.monotonic()
    rc, out = d.run_playbook('maintenance.yml', *extra, var_files=[SCENARIO_VARS], **kwargs)
    return rc, out, time.monotonic() - t0


@pytest.fixture(scope='module')
def reboot_command(tmp_path_factory):
    top = tmp_path_factory.mktemp('maintenance')
    script = top / 'reboot-node.sh'
    script.write_text(REBOOT_SCRIPT)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return top, ['bash', str(script), '{host}']


def test_a_package_held_by_hand_is_refused_before_anything_changes(reboot_command):
    for node in NODES:
        _prepare(node)
    before = [d.started_at(n, 'head' if n in ('spark1', 'spark3') else 'worker') for n in NODES]
    rc, out, _took = _playbook(HOLDS, {'ds4_maintenance_packages': ['ds4-handheld'],
                                       'ds4_maintenance_reboot_command': reboot_command[1]})
    flat = ' '.join(out.split())
    assert rc != 0 and 'ds4_maintenance_packages: ds4-handheld is held on spark1 by a hold the collection did not place' in flat, out[-3000:]
    assert 'Nothing was changed.' in flat
    assert [d.started_at(n, 'head' if n in ('spark1', 'spark3') else 'worker') for n in NODES] == before
    assert _version('spark1', 'ds4-dummy') == '1.0 hold'


def test_pair_by_pair_a_lost_mtu_keeps_pair2_out_and_pair1_serves_then_pair2_fixed(reboot_command):
    top, command = reboot_command
    (top / 'mtu-1500').write_text(d.node_container('spark4') + '\n')
    base = dict(HOLDS, nccl_fabric_expected_mtu=9000)
    extra = dict(base, ds4_maintenance_reboot_command=command)
    with load.SteadyLoad(threads=6, max_seconds=1800, url=VIP_URL, timeout=30.0, retry_resets=1,
                         max_tokens=load.DRAIN_LOAD_TOKENS) as steady:
        rc, out, took = _playbook(extra, timeout=1800)
    summary = steady.summary()
    flat = ' '.join(out.split())
    figure('maintenance.yml (pair2 loses its MTU at the reboot) took %.1f s, rc %s; %d requests through the VIP, %d '
           'failed, %d retried once after a reset %s'
           % (took, rc, summary['requests'], summary['failed'], summary['retried'], summary['retry_errors']))
    assert rc != 0, out[-4000:]
    assert 'maintain of pair spark_pair2 failed' in flat and 'Fabric checks failed on spark4: [mtu_low]' in flat, out[-4000:]
    # pair1: upgraded, held again, serving, in rotation; pair2 upgraded too (before its reboot), out of rotation
    for node in NODES:
        assert _version(node, 'ds4-dummy') == '2.0 hold', (node, _version(node, 'ds4-dummy'))
        assert _version(node, 'ds4-handheld') == '1.0 hold'
    assert load.in_rotation(P1) and not load.in_rotation(P2)
    assert summary['failed'] == 0, summary
    # fixed, then pair2 alone
    (top / 'mtu-1500').write_text('')
    d.node('spark4', 'sh', '-c', 'for i in enp1s0f1np1 enP2p1s0f1np1; do echo 9000 > /var/lib/ds4-test/sysfs/node_b/class/net/$i/mtu; done')
    # pair2 has its packages and rebooted in the run above: the run again without a reboot (what an operator does
    # once the cause is fixed), so its fabric is re-qualified from the fixed sysfs, its ranks start, the kit runs
    with load.SteadyLoad(threads=6, max_seconds=1200, url=VIP_URL, timeout=30.0, retry_resets=1,
                         max_tokens=load.DRAIN_LOAD_TOKENS) as steady:
        rc, out, took = _playbook(dict(base, ds4_maintenance_reboot=False), args=['-l', P2], timeout=1200)
    summary = steady.summary()
    flat = ' '.join(out.split())
    figure('maintenance.yml -l spark_pair2 -e ds4_maintenance_reboot=false after the MTU fix took %.1f s, rc %s; %d '
           'requests, %d failed, %d retried' % (took, rc, summary['requests'], summary['failed'], summary['retried']))
    assert rc == 0, out[-4000:]
    assert 'nccl_fabric: runs' in flat and 'no reboot' in flat, out[-4000:]
    assert load.in_rotation(P1) and load.in_rotation(P2)
    assert summary['failed'] == 0, summary
    record = sorted(os.listdir(os.path.join(d.PROJECT, 'maintenance')))[-1]
    with open(os.path.join(d.PROJECT, 'maintenance', record)) as handle:
        data = json.load(handle)
    assert data['pairs'] == [P2] and data['steps'][0]['pair'] == P2
    figure('record %s: %s' % (record, json.dumps(data['steps'][0]['verdict'])))
