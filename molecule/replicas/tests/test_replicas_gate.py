# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scenario `replicas`, after test_replicas.py: a pair whose WORKER rank is gone, and a frozen pair.

vLLM's own /health stays 200 on a head whose worker died (vllm-ops 2.3 F), so the router alone would keep sending
requests there. The pair guard's health gate (roles/vllm_service/files/pairguard.py) makes the head's proxy answer
/health 503 from the first guard poll that sees the worker down; the router then takes the pair out within its
health-check bound. A frozen pair (docker pause: /health stops answering) is seen by the router itself.
"""


import os
import sys
import time
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position
import ds4_load as load  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

P2 = 'spark_pair2'
HEAD2_HEALTH = '%s://%s:8000/health' % (d.SCHEME, d.ip(13))
MAX_EVICTION_S = 5.0


def figure(text):
    print('FIGURE replicas: ' + text)


def proxy_health():
    """(status, body) of pair 2's /health through its head's proxy (what the router's health checker reads)."""
    try:
        with urllib.request.urlopen(HEAD2_HEALTH, timeout=2) as resp:
            return resp.status, resp.read().decode(errors='replace')
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors='replace')
    except (urllib.error.URLError, OSError) as exc:
        return None, str(exc)


def gate_closed():
    status, body = proxy_health()
    return (status, body) if status == 503 and 'pair unhealthy (pair guard' in body else None


def out_of_rotation():
    url = load.worker_url(P2)
    return load.router_health().get(url) is False or url not in load.router_workers()


def test_worker_rank_stopped_closes_the_health_gate_and_the_pair_leaves_rotation():
    d.wait_until('both pairs in rotation', lambda: load.in_rotation('spark_pair1') and load.in_rotation(P2), 120,
                 interval=0.5)
    with load.SteadyLoad(threads=4, max_seconds=240) as steady:
        time.sleep(2)
        t_stop = time.monotonic()
        d.node('spark4', 'systemctl', 'stop', '--no-block', d.unit('worker'))
        gate = d.wait_until('pair 2 /health answers 503 from the pair guard\'s gate', gate_closed, 20, interval=0.1)
        t_gate = time.monotonic()
        d.wait_until('pair 2 out of the router\'s rotation', out_of_rotation, 20, interval=0.1)
        t_out = time.monotonic()
        d.wait_until('pair 2 back in rotation', lambda: load.in_rotation(P2), 180, interval=0.5)
        t_back = time.monotonic()
    summary = steady.summary()
    figure('worker stopped: gate 503 after %.2f s, pair 2 out of rotation %.2f s after the stop (bound %.0f s), back '
           'after %.1f s (the guard restarted the pair); %d requests, %d failed'
           % (t_gate - t_stop, t_out - t_stop, MAX_EVICTION_S, t_back - t_stop, summary['requests'], summary['failed']))
    assert gate[0] == 503
    assert t_out - t_stop <= MAX_EVICTION_S
    late = [f for f in steady.failed() if f['start'] > t_out]
    assert not late, 'requests sent after pair 2 left rotation failed: %r' % late[:5]


def test_frozen_pair_leaves_rotation_and_comes_back_when_thawed():
    d.wait_until('pair 2 in rotation', lambda: load.in_rotation(P2), 180, interval=0.5)
    with load.SteadyLoad(threads=4, max_seconds=120) as steady:
        time.sleep(2)
        t_freeze = time.monotonic()
        d.node('spark3', 'docker', 'pause', d.container('head'))
        try:
            d.wait_until('pair 2 out of the router\'s rotation', out_of_rotation, 20, interval=0.1)
            t_out = time.monotonic()
        finally:
            d.node('spark3', 'docker', 'unpause', d.container('head'))
        t_thaw = time.monotonic()
        d.wait_until('pair 2 back in rotation', lambda: load.in_rotation(P2), 60, interval=0.2)
        t_back = time.monotonic()
    summary = steady.summary()
    figure('frozen (docker pause of the head): out of rotation %.2f s after the freeze (bound %.0f s), back %.2f s after '
           'the thaw; %d requests, %d failed' % (t_out - t_freeze, MAX_EVICTION_S, t_back - t_thaw, summary['requests'],
                                                 summary['failed']))
    assert t_out - t_freeze <= MAX_EVICTION_S
    late = [f for f in steady.failed() if f['start'] > t_out]
    assert not late, 'requests sent after pair 2 left rotation failed: %r' % late[:5]


def test_site_limited_to_one_pair_touches_that_pair_alone():
    """`site.yml -l spark_pair2`: only spark3/spark4 are in the run; pair 1's containers and the router on spark1 are
    neither touched nor restarted."""
    d.wait_until('both pairs in rotation', lambda: load.in_rotation('spark_pair1') and load.in_rotation(P2), 180,
                 interval=0.5)
    pair1 = (('spark1', 'head'), ('spark2', 'worker'))
    before = [d.started_at(n, r) for n, r in pair1]
    router_before = d.unit_show('spark1', 'dgxspark-ds4-router.service', 'ExecMainStartTimestampMonotonic')
    rc, out = d.run_playbook('site.yml', var_files=[os.path.join(d.SCENARIO_DIR, 'vars', 'replicas.yml')],
                             args=['-l', P2])
    assert rc == 0, out[-4000:]
    recap = out[out.rindex('PLAY RECAP'):]
    hosts = sorted(line.split()[0] for line in recap.splitlines()[1:] if line.strip())
    assert hosts == ['spark3', 'spark4'], recap
    assert [d.started_at(n, r) for n, r in pair1] == before
    assert d.unit_show('spark1', 'dgxspark-ds4-router.service', 'ExecMainStartTimestampMonotonic') == router_before
    d.wait_until('pair 2 in rotation', lambda: load.in_rotation(P2), 180, interval=0.5)
