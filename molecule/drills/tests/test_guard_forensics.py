# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Boot forensics and the memory guard on the converged pair (drills converge; each drill ends with the pair serving).

The nodes share the CI machine's kernel, so both read fixture files (molecule/resources/inventory/group_vars/spark/
test.yml points the sources at /var/lib/ds4-test/*; absent, both stay idle):
1. a previous-boot kernel log with a GSP timeout and then no shutdown (tests/fixtures/kernel, public lines, replayed
   through the forensics' reader) on spark1, a clean reboot after a survived OOM kill on spark2 -> at "boot" (both
   units started) the pair is held: the head's prestart stops the worker and the head, vLLM never starts; status.yml
   names the cause, the fix and the evidence record (one, with both nodes' logs); ack.yml releases it and the pair
   serves; the same old evidence at the next start holds nothing.
1b. a power cut (the log just stops, no GPU fault) on spark1, a clean reboot with benign noise (application Xids, the
   engine start's NV_ERR_NO_MEMORY, correctable AER, a journald restart) on spark2 -> at "boot" the pair starts and
   serves; status.yml says what was seen ("left signatures, pair started"); ack.yml clears it. (The phase-marker rule,
   an unclean end while the pair was loading, needs a new boot id: the test nodes share the CI machine's kernel, so
   only the unit tests cover it.)
2. the worker's meminfo/PSI/zoneinfo driven through the fixtures of tests/fixtures/memory (the kernel's watermarks at
   the collection's settings): MemFree inside the reclaim band with PSI 0 -> nothing for three polls; stalls (PSI some)
   -> out of rotation (health gate); MemFree below the min watermark with PSI full -> a clean stop, worker first, one
   line each, and no restart afterwards; a start brings the pair back.
Durations are printed (pytest -s) for docs/measurements.md.
"""


import json
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

HEAD_UNIT = d.unit('head')
WORKER_UNIT = d.unit('worker')
GUARD_UNIT = 'dgxspark-ds4-pairguard.service'
DRILL_VARS = os.path.join(d.SCENARIO_DIR, 'vars', 'drills.yml')
FIXTURES = os.path.join(d.PROJECT, 'tests', 'fixtures', 'kernel')
MEMORY = os.path.join(d.PROJECT, 'tests', 'fixtures', 'memory')
TEST_DIR = '/var/lib/ds4-test'
KERNEL_LOG = TEST_DIR + '/prev-boot-kernel.log'
GATE = '/run/%s.unhealthy' % d.container('head')


def put(name, path, text):
    d.node(name, 'mkdir', '-p', os.path.dirname(path))
    d.node(name, 'python3', '-c', 'import sys; open(sys.argv[1], "w").write(sys.argv[2])', path, text)


def journal(name, unit, lines=100):
    return d.node(name, 'journalctl', '--no-pager', '-o', 'cat', '-n', str(lines), '-u', unit, check=False)


def inactive(name, unit):
    """Stopped and not coming back by itself (a unit whose start failed on a queued stop may read failed)."""
    return d.unit_show(name, unit, 'ActiveState')['ActiveState'] in ('inactive', 'failed')


def guard_lines(text):
    return [ln for ln in d.node('spark1', 'journalctl', '--no-pager', '-o', 'cat', '-u', GUARD_UNIT, check=False).splitlines()
            if text in ln]


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as fh:
        return fh.read()


def test_previous_boot_gsp_crash_holds_the_pair_status_names_it_ack_releases_it():
    put('spark1', KERNEL_LOG, fixture('prev-boot-gsp-timeout.log'))
    put('spark2', KERNEL_LOG, fixture('prev-boot-clean-oom-survived.log'))
    try:
        d.node('spark1', 'systemctl', 'stop', HEAD_UNIT)
        d.node('spark2', 'systemctl', 'stop', WORKER_UNIT)
        d.node('spark1', 'systemctl', 'reset-failed', HEAD_UNIT, check=False)
        d.node('spark2', 'systemctl', 'reset-failed', WORKER_UNIT, check=False)
        t0 = time.monotonic()
        # a boot: systemd starts both enabled units at once
        d.node('spark2', 'systemctl', 'start', '--no-block', WORKER_UNIT)
        d.node('spark1', 'systemctl', 'start', '--no-block', HEAD_UNIT)
        text = d.wait_until('the head held at "previous boot"', lambda: 'prestart: pair held: the previous boot crashed' in journal(
            'spark1', HEAD_UNIT) and journal('spark1', HEAD_UNIT), 90)
        d.wait_until('both units stopped, none retried', lambda: inactive('spark1', HEAD_UNIT) and inactive('spark2', WORKER_UNIT), 60)
        print('DRILL previous-boot GSP timeout -> pair held in %.1f s' % (time.monotonic() - t0))
        assert 'spark1: gsp-timeout' in text and 'Fix: apply the mxfp4 per-layer tensor release' in text, text[-3000:]
        assert 'Release: ansible-playbook playbooks/ack.yml' in text, text[-3000:]
        assert not d.node('spark1', 'docker', 'ps', '-q', '--filter', 'name=' + d.container('head')), 'vLLM must not start'
        records = d.node('spark1', 'sh', '-c', 'ls -1d %s/evidence/crash-* 2>/dev/null || true' % d.STATE_DIR).split()
        assert len(records) == 1, records
        assert sorted(d.node('spark1', 'ls', '-1', records[0]).split()) == ['kernel-spark1.txt', 'kernel-spark2.txt', 'summary.json']
        summary = json.loads(d.node('spark1', 'cat', records[0] + '/summary.json'))
        assert summary['nodes'] == ['spark1', 'spark2'] and summary['findings'][0]['id'] == 'gsp-timeout'
        assert summary['ends'] == {'spark1': 'unclean', 'spark2': 'clean'} and summary['verdict'] == 'held: spark1: gsp-timeout, spark1: nv-err-no-memory'

        rc, out = d.run_playbook('status.yml', {'ds4_status_chat': False})
        assert rc == 0, out[-3000:]
        assert 'previous boot crashed, pair HELD (not started)' in out, out[-4000:]
        assert 'fix: apply the mxfp4 per-layer tensor release' in out, out[-4000:]
        assert 'release: ansible-playbook playbooks/ack.yml' in out, out[-4000:]

        t1 = time.monotonic()
        rc, out = d.run_playbook('ack.yml', var_files=[DRILL_VARS])
        assert rc == 0, out[-3000:]
        assert 'acknowledged incident %s' % summary['incident'] in out, out[-3000:]
        d.wait_serving(120)
        print('DRILL ack.yml -> serving again in %.1f s' % (time.monotonic() - t1))
        # the same old evidence at the next start: acknowledged, not held again, no second record
        assert 'incident %s' % summary['incident'] in journal('spark1', HEAD_UNIT, 300)
        assert 'was acknowledged; not held again' in journal('spark1', HEAD_UNIT, 300)
        rc, out = d.run_playbook('status.yml', {'ds4_status_chat': False})
        assert rc == 0 and 'previous boot crashed' not in out, out[-3000:]
    finally:
        for name in ('spark1', 'spark2'):
            d.node(name, 'rm', '-f', KERNEL_LOG, check=False)
    d.wait_serving(120)


def memory(name):
    with open(os.path.join(MEMORY, name)) as fh:
        return fh.read()


def test_memory_pressure_gates_then_stops_the_pair_worker_first_and_never_restarts_it():
    d.wait_serving(120)
    put('spark2', TEST_DIR + '/zoneinfo', memory('zoneinfo-spark128-normal.txt'))
    put('spark2', TEST_DIR + '/min_free_kbytes', memory('min_free_kbytes.txt'))
    put('spark2', TEST_DIR + '/pressure-memory', memory('pressure-memory-idle.txt'))
    put('spark2', TEST_DIR + '/meminfo', memory('meminfo-band-min.txt'))  # MemFree just above min: the kernel reclaiming
    try:
        gates0 = len(guard_lines('pair out of rotation (health gate)'))
        # the reclaim band with PSI 0 is normal: three polls (vllm_service_memory_guard_poll_s 5), no gate, no line
        for name in ('meminfo-band-low.txt', 'meminfo-band-high.txt', 'meminfo-band-mid.txt'):
            put('spark2', TEST_DIR + '/meminfo', memory(name))
            time.sleep(5.5)
            assert not d.node('spark1', 'cat', GATE, check=False).startswith('memory guard:'), name
        assert len(guard_lines('pair out of rotation (health gate)')) == gates0
        t0 = time.monotonic()
        put('spark2', TEST_DIR + '/meminfo', memory('meminfo-under-load.txt'))
        put('spark2', TEST_DIR + '/pressure-memory', memory('pressure-memory-some-high.txt'))  # stalls: PSI some 35 %
        reason = d.wait_until('the health gate closed by the memory guard', lambda: d.node(
            'spark1', 'cat', GATE, check=False).startswith('memory guard:') and d.node('spark1', 'cat', GATE), 30)
        print('DRILL memory pressure -> out of rotation in %.1f s' % (time.monotonic() - t0))
        assert 'spark2: PSI some avg10 35.0% >= 10.0%' in reason, reason
        assert d.unit_show('spark1', HEAD_UNIT, 'ActiveState')['ActiveState'] == 'active'
        assert d.chat(timeout=30.0), 'the pair still serves while out of rotation'

        t1 = time.monotonic()
        put('spark2', TEST_DIR + '/meminfo', memory('meminfo-below-min.txt'))  # below the kernel's min watermark
        put('spark2', TEST_DIR + '/pressure-memory', memory('pressure-memory-full-high.txt'))  # every task stalled
        d.wait_until('both ranks stopped', lambda: inactive('spark1', HEAD_UNIT) and inactive('spark2', WORKER_UNIT), 60)
        print('DRILL memory floor -> pair stopped in %.1f s' % (time.monotonic() - t1))
        # worker first: its stop began before the head's (the nodes share the kernel's monotonic clock)
        worker_off = int(d.unit_show('spark2', WORKER_UNIT, 'ActiveExitTimestampMonotonic')['ActiveExitTimestampMonotonic'])
        head_off = int(d.unit_show('spark1', HEAD_UNIT, 'ActiveExitTimestampMonotonic')['ActiveExitTimestampMonotonic'])
        assert 0 < worker_off <= head_off, 'worker first: %d vs %d' % (worker_off, head_off)
        # one line each
        assert len(guard_lines('pair out of rotation (health gate)')) == gates0 + 1
        stops = guard_lines('stopping the pair, worker first')
        assert len(stops) == 1 and "spark2: MemFree 1.20 GiB < the kernel's min watermark 1.50 GiB (zoneinfo)" in stops[0], stops
        # no restart loop: the guard keeps polling (its textfile moves on), the pair stays stopped
        restarts = d.unit_show('spark1', HEAD_UNIT, 'NRestarts')['NRestarts']
        prom = '/var/lib/prometheus/node-exporter/dgxspark_ds4_guard.prom'

        def last_poll():
            text = d.node('spark1', 'cat', prom)
            return float([ln for ln in text.splitlines() if ln.startswith('dgxspark_ds4_guard_last_poll_timestamp_seconds ')][0]
                         .split()[1])
        polled = last_poll()
        d.wait_until('the guard polled again after the stop', lambda: last_poll() > polled, 30)
        assert inactive('spark1', HEAD_UNIT) and inactive('spark2', WORKER_UNIT)
        assert d.unit_show('spark1', HEAD_UNIT, 'NRestarts')['NRestarts'] == restarts
        assert 'dgxspark_ds4_memguard_stops_total 1\n' in d.node('spark1', 'cat', prom)
        assert len(guard_lines('stopping the pair, worker first')) == 1
    finally:
        d.node('spark2', 'rm', '-f', TEST_DIR + '/meminfo', TEST_DIR + '/pressure-memory', TEST_DIR + '/zoneinfo',
               TEST_DIR + '/min_free_kbytes', check=False)
    # the way back once the memory is found: start the pair (the head's prestart takes the worker first)
    d.node('spark1', 'systemctl', 'reset-failed', HEAD_UNIT, check=False)
    d.node('spark1', 'systemctl', 'start', HEAD_UNIT)
    d.wait_serving(120)
    check = 'test -e %s && echo closed || echo open' % GATE
    d.wait_until('the health gate open again', lambda: d.node('spark1', 'sh', '-c', check) == 'open', 30)
