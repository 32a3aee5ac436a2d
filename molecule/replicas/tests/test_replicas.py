# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two TP=2 pairs behind vllm-router (scenario `replicas`), in order:

1. the router on spark1 lists both pair heads, its front (10.77.0.11:8080) wants a key, and concurrent load
   through it is served by both pairs (each head's own request counter grows);
2. bench through the router (12 streams) = the sum of both pairs' aggregates (6 streams each, same test) within 5 %;
3. a pair whose head rank is killed leaves the router's rotation within 5 s, the load sees no failed request
   beyond those in flight on that pair, and it comes back (pair guard) and serves again;
4. restart.yml (rolling) under steady load: zero failed requests, both pairs restarted, one after the other;
5. switch.yml to the throughput profile, then rollback.yml, under steady load: zero failed requests each
   (about 245 s of the scenario's ~610 s on the 2-core CI machine; DS4_REPLICAS_SWITCH=0 skips it).

Measured figures are printed as `FIGURE ...` lines (pytest -s) for docs/measurements.md.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position
import ds4_load as load  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

SCENARIO_VARS = os.path.join(d.SCENARIO_DIR, 'vars', 'replicas.yml')
THROUGHPUT_PROFILE = os.path.join(d.PROJECT, 'inventories', 'throughput', 'group_vars', 'spark', 'profile.yml')
P1, P2 = 'spark_pair1', 'spark_pair2'
NODES = {P1: (('spark1', 'head'), ('spark2', 'worker')), P2: (('spark3', 'head'), ('spark4', 'worker'))}
MAX_EVICTION_S = 5.0


def figure(text):
    print('FIGURE replicas: ' + text)


def playbook(name, *extra, **kwargs):
    var_files = [SCENARIO_VARS] + list(kwargs.pop('var_files', ()))
    t0 = time.monotonic()
    rc, out = d.run_playbook(name, *extra, var_files=var_files, **kwargs)
    took = time.monotonic() - t0
    if rc != 0:
        journals = '\n'.join(
            '--- %s %s\n%s' % (n, u, d.node(n, 'journalctl', '--no-pager', '-o', 'cat', '-n', '15', '-u', u, check=False))
            for n, u in (('spark1', 'dgxspark-ds4-head.service'), ('spark3', 'dgxspark-ds4-head.service'),
                         ('spark1', 'dgxspark-ds4-router.service')))
        raise AssertionError('%s failed (rc %s, %.1f s):\n%s\n%s' % (name, rc, took, out[-5000:], journals))
    return out, took


def started(pair):
    return [d.started_at(n, role) for n, role in NODES[pair]]


def both_in_rotation(timeout=120.0):
    return d.wait_until('both pairs in the router\'s rotation', lambda: load.in_rotation(P1) and load.in_rotation(P2),
                        timeout, interval=0.5)


def served_max_model_len():
    _status, body = d.request('/v1/models', url=load.ROUTER_URL)
    return json.loads(body)['data'][0]['max_model_len']


def assert_no_failed(what, steady):
    summary = steady.summary()
    figure('%s: %d requests through the router (%.1f req/s), %d failed %s'
           % (what, summary['requests'], summary['rps'], summary['failed'], summary['errors']))
    assert summary['requests'] > 0, 'no request was sent during %s' % what
    assert summary['failed'] == 0, '%s: %d of %d requests failed: %s' % (
        what, summary['failed'], summary['requests'], summary['errors'])
    return summary


def assert_one_pair_at_a_time(what, windows, before, after):
    for pair in (P1, P2):
        assert all(a > b for a, b in zip(after[pair], before[pair])), '%s: %s not restarted (%r -> %r)' % (
            what, pair, before[pair], after[pair])
        assert windows[pair], '%s: %s never stopped answering /health (restarted?)' % (what, pair)
    overlap = load.overlap(windows[P1], windows[P2])
    spans = dict((p, ['%.1f s' % (b - a) for a, b in windows[p]]) for p in (P1, P2))
    figure('%s: down windows %s, overlap %.2f s' % (what, spans, overlap))
    assert overlap == 0.0, '%s: both pairs were down at once for %.2f s: %r' % (what, overlap, windows)
    # StartedAt: every container of one pair started before any of the other (the order itself is free)
    first, second = sorted((P1, P2), key=lambda p: max(after[p]))
    assert max(after[first]) < min(after[second]), '%s: pairs restarted interleaved: %r' % (what, after)


def test_router_lists_both_pairs_and_its_front_wants_a_key():
    both_in_rotation()
    assert load.router_workers() == sorted([load.worker_url(P1), load.worker_url(P2)])
    assert d.unit_show('spark1', 'dgxspark-ds4-router.service', 'ActiveState')['ActiveState'] == 'active'
    assert d.unit_show('spark3', 'dgxspark-ds4-router.service', 'LoadState')['LoadState'] == 'not-found'
    status, error = load.chat_once(key='not-a-key')
    assert status == 401, (status, error)
    assert load.chat_once() == (200, None)


def test_concurrent_load_is_spread_over_both_pairs():
    before = dict((p, load.success_count(p)) for p in (P1, P2))
    steady = load.SteadyLoad(threads=8, max_requests=160, max_seconds=20).start().wait()
    after = dict((p, load.success_count(p)) for p in (P1, P2))
    served = dict((p, after[p] - before[p]) for p in (P1, P2))
    figure('spread: %s served %r' % (steady.summary()['requests'], served))
    assert_no_failed('spread', steady)
    assert served[P1] > 0 and served[P2] > 0, 'one pair got nothing: %r' % served
    # the balance threshold (router_balance_abs_threshold 2) keeps both busy: neither gets under a quarter
    total = served[P1] + served[P2]
    assert min(served.values()) >= 0.25 * total, 'badly spread: %r' % served


def _bench(url, level):
    sys.path.insert(0, os.path.join(d.PROJECT, '.collections'))
    from ansible_collections.dgxspark.ds4.plugins.module_utils import bench_sweep  # pylint: disable=import-error
    report = bench_sweep.run_sweep(url, 'deepseek-v4-flash', levels=[level], max_tokens=256, api_key=load.API_KEY,
                                   timeout=120.0, pause_s=0)
    lv = report['levels'][0]
    assert lv['errors'] == 0 and lv['aggregate_tps'], (url, lv['error_messages'], lv)
    return lv['aggregate_tps']


def test_bench_through_the_router_is_the_sum_of_the_pairs():
    """6 streams on each pair on its own, then 12 through the router. The simulator decodes 50 tok/s per stream
    up to max-num-seqs (8) streams: one pair cannot serve 12 streams at that rate, so a router aggregate equal to
    the sum of the pairs' means both pairs decoded side by side, at no cost from the router's hop."""
    pair1 = _bench('http://%s:8000' % d.ip(11), 6)
    pair2 = _bench('http://%s:8000' % d.ip(13), 6)
    routed = _bench(load.ROUTER_URL, 12)
    ratio = routed / (pair1 + pair2)
    figure('bench: pair1 %.1f tok/s, pair2 %.1f tok/s (6 streams each), router %.1f tok/s (12 streams): %.3f of the sum'
           % (pair1, pair2, routed, ratio))
    assert 0.95 <= ratio <= 1.05, 'router %.1f vs pairs %.1f + %.1f' % (routed, pair1, pair2)


def test_killed_pair_leaves_rotation_fast_and_comes_back():
    both_in_rotation()
    url2 = load.worker_url(P2)
    with load.SteadyLoad(threads=6, max_seconds=240) as steady:
        time.sleep(3)
        in_flight = load.running_count(P2)
        t_kill = time.monotonic()
        d.node('spark3', 'docker', 'kill', d.container('head'))
        t_out = d.wait_until('pair2 out of the router\'s rotation',
                             lambda: (load.router_health().get(url2) is False or url2 not in load.router_workers())
                             and time.monotonic(), 30, interval=0.1)
        eviction = t_out - t_kill
        d.wait_until('pair2 back in rotation', lambda: load.in_rotation(P2), 180, interval=0.5)
        t_back = time.monotonic()
        served0 = load.success_count(P2) or 0.0
        d.wait_until('pair2 serves router traffic again', lambda: (load.success_count(P2) or 0.0) > served0, 60,
                     interval=0.5)
        t_serving = time.monotonic()
    failed = steady.failed()
    summary = steady.summary()
    figure('kill: pair2 out of rotation %.2f s after its head was killed (bound %.0f s), back in rotation after %.1f s, '
           'serving after %.1f s; %d requests, %d failed (pair2 had %d in flight at the kill)'
           % (eviction, MAX_EVICTION_S, t_back - t_kill, t_serving - t_kill, summary['requests'], len(failed), in_flight))
    assert eviction <= MAX_EVICTION_S
    late = [f for f in failed if f['start'] > t_kill]
    assert not late, 'requests sent after the kill failed: %r' % late[:5]
    assert len(failed) <= in_flight, 'more failures (%d) than requests in flight on pair2 (%d): %r' % (
        len(failed), in_flight, failed[:5])


def test_rolling_restart_under_load_no_failed_request_one_pair_at_a_time():
    both_in_rotation()
    before = dict((p, started(p)) for p in (P1, P2))
    with load.HealthWindows() as health, load.SteadyLoad(threads=6, max_seconds=600) as steady:
        _out, took = playbook('restart.yml')
    after = dict((p, started(p)) for p in (P1, P2))
    figure('restart.yml (rolling) took %.1f s' % took)
    assert_no_failed('restart.yml', steady)
    assert_one_pair_at_a_time('restart.yml', health.windows(), before, after)
    both_in_rotation(30)


@pytest.mark.skipif(os.environ.get('DS4_REPLICAS_SWITCH', '1') == '0', reason='DS4_REPLICAS_SWITCH=0')
def test_rolling_switch_then_rollback_under_load_no_failed_request():
    assert served_max_model_len() == 131072
    before = dict((p, started(p)) for p in (P1, P2))
    with load.HealthWindows() as health, load.SteadyLoad(threads=6, max_seconds=600) as steady:
        _out, took = playbook('switch.yml', {'ds4_profile': 'throughput'}, var_files=[THROUGHPUT_PROFILE])
    after = dict((p, started(p)) for p in (P1, P2))
    figure('switch.yml balanced -> throughput (rolling) took %.1f s' % took)
    assert_no_failed('switch.yml', steady)
    assert_one_pair_at_a_time('switch.yml', health.windows(), before, after)
    assert set(served_max_model_len() for dummy in range(6)) == {65536}, 'a pair still serves the old profile'

    both_in_rotation(30)
    before = after
    with load.HealthWindows() as health, load.SteadyLoad(threads=6, max_seconds=600) as steady:
        _out, took = playbook('rollback.yml')
    after = dict((p, started(p)) for p in (P1, P2))
    figure('rollback.yml (rolling) took %.1f s' % took)
    assert_no_failed('rollback.yml', steady)
    assert_one_pair_at_a_time('rollback.yml', health.windows(), before, after)
    assert set(served_max_model_len() for dummy in range(6)) == {131072}
