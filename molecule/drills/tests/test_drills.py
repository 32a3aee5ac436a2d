# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Failure drills on the converged pair (pair failure drills), in order; each one ends with the pair serving.

1. worker rank killed -> both ranks restarted, worker first, serving again (pair guard);
2. head rank killed   -> same (the head's prestart restarts the stale worker first);
   a forced restart (--tags vllm_service_force_restart) -> both ranks, worker first; the next site.yml a no-op;
3. master port held by a stray process -> the start is refused before vLLM runs, owner named;
4. memory short at start -> the free-memory gate refuses with the numbers;
5. a hang (port open, no tokens) -> the readiness check's real completion catches it;
6. a config that fails every start -> start limits stop it after a few tries, doctor names the cause;
7. both nodes "rebooted" (containers stopped and started) -> serving again with no manual step.
Durations are printed (pytest -s / -v shows them) for docs/measurements.md.
"""


import json
import os
import re
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

HEAD_UNIT = d.unit('head')
WORKER_UNIT = d.unit('worker')
DRILL_VARS = os.path.join(d.SCENARIO_DIR, 'vars', 'drills.yml')


def site(*extra):
    return d.run_playbook('site.yml', *extra, var_files=[DRILL_VARS])


def restarted_worker_first(head0, worker0):
    """Both containers newer than before and the worker's start before the head's."""
    head1, worker1 = d.both_started()
    return head1 > head0 and worker1 > worker0 and worker1 < head1


def journal(name, unit, lines=200):
    return d.node(name, 'journalctl', '--no-pager', '-o', 'cat', '-n', str(lines), '-u', unit, check=False)


def test_pair_serves_before_the_drills():
    d.wait_serving(120)
    assert d.unit_show('spark1', 'dgxspark-ds4-pairguard.service', 'ActiveState')['ActiveState'] == 'active'


def _canary_of_this_head_done():
    """The current head's first quality canary has finished (it runs as soon as a new head serves; the next one is an
    interval away), so no request reaches the head in the next seconds."""
    head = d.unit_show('spark1', HEAD_UNIT, 'InvocationID')['InvocationID']
    s = json.loads(d.node('spark1', 'cat', d.STATE_DIR + '/pairguard-state.json'))
    started = s.get('last_canary_started_at')
    done = max(s.get('last_canary_at') or 0, s.get('last_canary_inconclusive_at') or 0)
    return s.get('canary_head') == head and started is not None and done >= started


def test_worker_killed_both_ranks_restart_worker_first():
    """An idle pair whose worker dies: real vLLM's head logs nothing and answers /health 200 until the next request
    (real-vllm-on-device notes, Part 1 §3 A), so only the pair guard catches it (worker down for 3 polls). A request
    arriving within those polls makes the head fail it and exit by itself instead (the other path: systemd restarts
    it and its prestart takes a fresh worker first; the guard's unit tests cover that message). The only request
    source here is the quality canary, which runs once as a new head serves: the drill waits for it, so the path
    it proves is the guard's."""
    d.wait_until('the current head\'s first canary done', _canary_of_this_head_done, 120, interval=1.0)
    head0, worker0 = d.both_started()
    t0 = time.monotonic()
    d.node('spark2', 'docker', 'kill', d.container('worker'))
    d.wait_until('both ranks restarted, worker first', lambda: restarted_worker_first(head0, worker0), 120)
    d.wait_serving(120)
    print('DRILL worker killed -> serving again in %.1f s' % (time.monotonic() - t0))
    assert 'restarting %s so both ranks restart, worker first' % HEAD_UNIT in journal('spark1', 'dgxspark-ds4-pairguard.service')


def test_head_killed_both_ranks_restart_worker_first():
    head0, worker0 = d.both_started()
    t0 = time.monotonic()
    d.node('spark1', 'docker', 'kill', d.container('head'))
    d.wait_until('both ranks restarted, worker first', lambda: restarted_worker_first(head0, worker0), 120)
    d.wait_serving(120)
    print('DRILL head killed -> serving again in %.1f s' % (time.monotonic() - t0))
    assert 'paired with the previous head' in journal('spark1', HEAD_UNIT)


def test_forced_restart_by_tag_restarts_both_ranks_worker_first_and_the_next_run_restarts_nothing():
    """--tags vllm_service_force_restart (the role's README): both ranks restart, worker first, although nothing
    changed, so the converge shortcut must not skip the role as recorded (it did: the tag is an input now). The next
    plain site.yml changes nothing and restarts nothing."""
    head0, worker0 = d.both_started()
    rc, out = d.run_playbook('site.yml', var_files=[DRILL_VARS], args=['--tags', 'vllm_service_force_restart'])
    assert rc == 0, out[-3000:]
    assert 'vllm_service: runs (inputs changed: vllm_service_force_restart)' in out, out[-3000:]
    assert restarted_worker_first(head0, worker0), (head0, worker0, d.both_started())
    d.wait_serving(120)
    head1, worker1 = d.both_started()
    rc, out = site()
    assert rc == 0, out[-3000:]
    assert re.findall(r'^spark\d\s+:\s+ok=\d+\s+changed=(\d+)', out, re.M) == ['0'] * 2, out[-1500:]
    assert d.both_started() == (head1, worker1)


def _start_head_expecting_refusal():
    d.node('spark1', 'systemctl', 'reset-failed', HEAD_UNIT, check=False)
    out = d.node('spark1', 'systemctl', 'start', HEAD_UNIT, check=False)
    assert 'failed' in out.lower(), out
    return d.wait_until('head refused at start', lambda: 'FAILED at' in journal('spark1', HEAD_UNIT, 60)
                        and journal('spark1', HEAD_UNIT, 60), 30)


def _restart_pair_and_serve():
    d.node('spark1', 'systemctl', 'reset-failed', HEAD_UNIT, check=False)
    d.node('spark1', 'systemctl', 'start', HEAD_UNIT)
    d.wait_serving(120)


def test_master_port_taken_is_caught_before_start_with_the_owner():
    d.node('spark1', 'systemctl', 'stop', HEAD_UNIT)
    d.node('spark1', 'systemd-run', '--unit', 'ds4-stray-listener', '--property', 'Type=simple', '/usr/bin/python3', '-c',
           'import socket, time\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n'
           's.bind(("0.0.0.0", 29501))\ns.listen(1)\ntime.sleep(600)\n')
    try:
        stray = d.wait_until('stray listener up', lambda: d.unit_show('spark1', 'ds4-stray-listener.service', 'MainPID')
                             ['MainPID'] not in ('', '0') and d.unit_show('spark1', 'ds4-stray-listener.service', 'MainPID')
                             ['MainPID'], 20)
        d.wait_until('port 29501 held', lambda: ':733D ' in d.node('spark1', 'cat', '/proc/net/tcp'), 20)
        text = _start_head_expecting_refusal()
        assert '29501' in text and ('pid %s' % stray in text or stray in text), text[-2000:]
        assert 'python3' in text, text[-2000:]
        assert not d.node('spark1', 'docker', 'ps', '-q', '--filter', 'name=' + d.container('head')), 'vLLM must not start'
    finally:
        d.node('spark1', 'systemctl', 'stop', 'ds4-stray-listener.service', check=False)
    _restart_pair_and_serve()


def test_memory_short_at_start_is_refused_with_the_numbers():
    """The CI machine's memory cannot be eaten safely: the gate's requirement is raised instead
    (memory_fraction 0.999 of MemTotal, which no running Linux has available)."""
    path = d.CONFIG_DIR + '/prestart-head.json'
    saved = d.node('spark1', 'cat', path)
    cfg = json.loads(saved)
    cfg.update({'memory_fraction': 0.999, 'memory_wait_s': 2, 'memory_poll_s': 1})
    d.node('spark1', 'systemctl', 'stop', HEAD_UNIT)
    d.node('spark1', 'python3', '-c', 'import sys; open(sys.argv[1], "w").write(sys.argv[2])', path, json.dumps(cfg))
    try:
        text = _start_head_expecting_refusal()
        assert 'FAILED at memory: MemFree below gpu_memory_utilization 1.00 x MemTotal' in text, text[-2000:]
        assert 'MemAvailable' in text, text[-2000:]
        assert 'bytes' in text and 'GiB' in text
    finally:
        d.node('spark1', 'python3', '-c', 'import sys; open(sys.argv[1], "w").write(sys.argv[2])', path, saved)
    _restart_pair_and_serve()


def test_hang_is_caught_by_the_real_completion():
    overrides = dict(d.BASE_OVERRIDES, env={'VLLM_SIM_FAIL': 'hang'})
    rc, out = site({'ds4_site_overrides': overrides})
    assert rc != 0, out[-3000:]
    assert 'port open but no tokens = hang' in out, out[-3000:]


def test_config_failing_every_start_stops_and_doctor_names_the_cause():
    overrides = dict(d.BASE_OVERRIDES, env={'VLLM_SIM_FAIL': 'free_memory'})
    rc, out = site({'ds4_site_overrides': overrides})
    assert rc != 0, out[-3000:]
    assert 'Free memory on device' in out, out[-3000:]

    def stopped_for_good():
        head = d.unit_show('spark1', HEAD_UNIT, 'ActiveState', 'Result')
        worker = d.unit_show('spark2', WORKER_UNIT, 'ActiveState', 'Result')
        return head['ActiveState'] in ('failed', 'inactive') and worker['ActiveState'] in ('failed', 'inactive') \
            and (head, worker)
    head, worker = d.wait_until('both ranks stopped by the start limits, no storm', stopped_for_good, 180)
    starts0 = int(d.unit_show('spark1', HEAD_UNIT, 'NRestarts')['NRestarts'])
    time.sleep(10)
    assert stopped_for_good(), 'a rank started again: restart storm'
    assert int(d.unit_show('spark1', HEAD_UNIT, 'NRestarts')['NRestarts']) == starts0
    print('DRILL failing config: head %s, worker %s' % (head, worker))

    rc, out = d.run_playbook('doctor.yml')
    assert rc == 0, out[-3000:]
    assert 'free unified memory is below --gpu-memory-utilization' in out, out[-4000:]
    assert HEAD_UNIT in out, 'the doctor must name the (overridden) unit: ' + out[-4000:]

    rc, out = site()
    assert rc == 0, out[-3000:]
    d.wait_serving(60)


def test_reboot_of_both_nodes_serves_again_without_a_manual_step():
    took, (head0, worker0), (head1, worker1) = d.reboot_both_nodes()
    print('DRILL reboot -> serving again in %.1f s' % took)
    assert head1 > head0 and worker1 > worker0
    assert worker1 < head1, 'the worker rank must be up before the head starts'
