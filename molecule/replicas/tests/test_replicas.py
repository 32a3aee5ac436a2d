# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two TP=2 pairs behind vllm-router (scenario `replicas`), in order:

0. right after the converge, a no-op site.yml skips the router and the controller's TLS modules; a pool keeper
   disabled by hand is named and repaired;
1. a router on each router host (spark1, spark3: the VIP's two hosts) lists both pair heads, none on a worker;
   its front (10.77.0.11:8080) wants a key, and concurrent load
   through it is served by both pairs (each head's own request counter grows);
2. bench through the router (12 streams) = the sum of both pairs' aggregates (6 streams each, same test) within 5 %;
3. a pair whose head rank is killed leaves the router's rotation within 5 s, the load sees no failed request
   beyond those in flight on that pair, and it comes back (pair guard) and serves again;
4. the router restarted while a pair is down (its head frozen): it serves from the other pair at once, and its
   pool keeper adds the missing pair as soon as it answers; the router's front is an nginx of its own: with its port
   taken it does not start, and pair1's head proxy on the same host restarts and serves;
5. restart.yml (rolling) under steady load: zero failed requests, both pairs restarted, one after the other;
6. switch.yml to a recipe with another served name (dspark-c16) is refused up front, nothing touched;
7. upgrade.yml (switch.yml gated by the regression kit) to an image the simulator makes slower: pair1 measured slower
   than pair2 (still on the old image), reverted by itself, back in rotation, pair2 never touched, 0 failed requests;
8. upgrade.yml to an equal image (another ID), the throughput recipe and another API port (8888) at once, under
   steady load: promoted pair by pair with both sets of numbers in the output and the JSON record, zero failed
   requests, the pair that serves a slow request (longer than the old fixed 600 s would be at this scale: the router's
   request timeout is 90 s here) is drained only once it finished, the router's configuration lists only the live
   URLs afterwards and a router restart serves at once; then rollback.yml back to the old image, recipe and port
   under load, zero failed requests (DS4_REPLICAS_SWITCH=0 skips 6 and 8).

test_zy_maintenance.py (maintenance.yml) and test_zz_vip.py (the VIP) run after this file.

Measured figures are printed as `FIGURE ...` lines (pytest -s) for docs/measurements.md.
"""


import json
import os
import re
import sys
import threading
import time
from urllib.parse import quote

import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position
import ds4_load as load  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

SCENARIO_VARS = os.path.join(d.SCENARIO_DIR, 'vars', 'replicas.yml')
P1, P2 = 'spark_pair1', 'spark_pair2'
NODES = {P1: (('spark1', 'head'), ('spark2', 'worker')), P2: (('spark3', 'head'), ('spark4', 'worker'))}
MAX_EVICTION_S = 5.0
ROUTER_UNIT, POOL_UNIT = 'dgxspark-ds4-router.service', 'dgxspark-ds4-router-pool.service'
TLS_CA_FILE = '/etc/dgxspark-ds4/tls/ca.crt'
POOL_FILE = '/etc/dgxspark-ds4/router-pool.json'
# the bound on "serves at once" after a router (re)start: it listens at once and its pool keeper polls every 1 s
ROUTER_SERVES_S = 10.0
# vars/replicas.yml: router_request_timeout_s 90 (production 1800): the drain waits 90 + 10 s
REQUEST_TIMEOUT_S = 90
ALT_PORT = 8888


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


def both_in_rotation(timeout=120.0, port=8000):
    return d.wait_until('both pairs in the router\'s rotation', lambda: load.in_rotation(P1, port) and load.in_rotation(P2, port),
                        timeout, interval=0.5)


def restart_router():
    """systemctl restart of the router; seconds until a chat through the clients' address answers 200."""
    t0 = time.monotonic()
    d.node('spark1', 'systemctl', 'restart', ROUTER_UNIT)
    t_ok = d.wait_until('a chat through the router after its restart',
                        lambda: load.chat_once(timeout=5.0)[0] == 200 and time.monotonic(), 60, interval=0.1)
    return t_ok - t0


def pool_workers():
    return json.loads(d.node('spark1', 'cat', POOL_FILE))['workers']


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


def _task_results(out, title):
    """The result lines ('ok: [spark1]', 'skipping: [spark3]', ...) under each TASK header that starts with title."""
    blocks = re.findall(r'^TASK \[%s[^\n]*\n(.*?)(?=^TASK \[|^PLAY RECAP)' % re.escape(title), out, re.M | re.S)
    return [ln.split(':')[0] for block in blocks for ln in block.splitlines() if re.match(r'^(ok|changed|skipping|fatal): ', ln)]


def test_a_noop_site_skips_the_router_and_the_controllers_tls_work_and_a_disabled_pool_keeper_runs_it_again():
    """Work in proportion to the change (docs/measurements.md, the converge benchmark): right after the converge, a
    site.yml over both pairs finds each router host as recorded (the router skipped on spark1 and spark3) and the
    collection's CA and every front's certificate as community.crypto made them (no module runs on the controller);
    then a pool keeper disabled by hand on spark3 is named and repaired by site.yml -l spark_pair2, spark1's router
    untouched."""
    out, _took = playbook('site.yml')
    flat = ' '.join(out.split())
    # the router and the API proxy in the plan after readiness: as recorded on both router hosts (the router with the
    # proxy) and on the workers (the proxy), neither probing itself: the file that includes them after readiness
    # (tasks/deploy_after.yml, with the removal of revisions and metrics, neither asked for here) skipped everywhere
    assert flat.count('converge plan: as recorded on this node: router, api_proxy') == 2, flat[-3000:]
    assert flat.count('converge plan: as recorded on this node: api_proxy') == 2, flat[-3000:]
    assert _task_results(out, 'Deploy | After readiness') == ['skipping'] * 4, out[-3000:]
    for title in ('Deploy | vllm-router in front of the pairs', 'Deploy | Expose the API to the allowed networks'):
        assert 'TASK [%s' % title not in out, (title, out[-3000:])
    assert 'router: runs (' not in flat and 'router: as recorded on every node' not in flat, flat[-3000:]
    # each host's front material looked at once (file_state's look, in the converge plan) and found as written (the workers': absent),
    # the CA and every front's certificate on the controller as made: tasks/tls.yml not even included anywhere (none
    # of its tasks: the CA's, each host's key and certificate, writing or removing material)
    # (in the converge plan's first node call: no task of its own)
    assert "TLS | The fronts' material on this host, in one look" not in out, out[-3000:]
    # and decided there too (one CA per site, whether the material differs: tls_decide.yml's tasks not run)
    assert 'TLS | Whether anything of the material differs here' not in out, out[-3000:]
    # and, every planned role skipped too, the file of the roles that change the nodes not included on any host
    assert _task_results(out, 'Deploy | The roles that change the nodes') == ['skipping'] * 4, out[-3000:]
    assert 'Deploy | TLS material of the fronts' not in out, out[-3000:]
    for title in ('TLS | CA key', "TLS | This host's key and certificate on the controller", 'TLS | Write what differs',
                  'TLS | No front here', 'TLS | Certificate (renewed', 'tls_front.yml', 'tls_front_files.yml'):
        assert title not in out, (title, out[-3000:])
    assert re.findall(r'^spark\d\s+:\s+ok=\d+\s+changed=(\d+)', out, re.M) == ['0'] * 4, out[-1500:]

    router1 = d.unit_show('spark1', ROUTER_UNIT, 'ExecMainStartTimestampMonotonic')
    d.node('spark3', 'systemctl', 'disable', '--quiet', POOL_UNIT)
    # and the CA file of spark3's fronts made group-readable by hand: that host's material is written again
    d.node('spark3', 'chmod', '0640', TLS_CA_FILE)
    out, _took = playbook('site.yml', args=['-l', P2])
    flat = ' '.join(out.split())
    assert 'router: runs (' in flat and 'unit %s: recorded enabled/' % POOL_UNIT in flat, flat[-3000:]
    assert d.node('spark3', 'systemctl', 'is-enabled', POOL_UNIT).strip() == 'enabled'
    assert re.search(r'included: \S*tls_front_files\.yml for spark3$', out, re.M), out[-3000:]
    assert d.node('spark3', 'stat', '-c', '%a', TLS_CA_FILE).strip() == '644'
    assert d.unit_show('spark1', ROUTER_UNIT, 'ExecMainStartTimestampMonotonic') == router1
    both_in_rotation()


def test_router_lists_both_pairs_and_its_front_wants_a_key():
    both_in_rotation()
    assert load.router_workers() == sorted([load.worker_url(P1), load.worker_url(P2)])
    # a router on each router host (ds4_router_vip: the heads of both pairs), none on the workers, each listing both
    for host in ('spark1', 'spark3'):
        assert d.unit_show(host, ROUTER_UNIT, 'ActiveState')['ActiveState'] == 'active', host
        assert load.router_workers(host) == sorted([load.worker_url(P1), load.worker_url(P2)]), host
    for host in ('spark2', 'spark4'):
        assert d.unit_show(host, ROUTER_UNIT, 'LoadState')['LoadState'] == 'not-found', host
    status, error = load.chat_once(key='not-a-key')
    assert status == 401, (status, error)
    assert load.chat_once() == (200, None)


def test_concurrent_load_is_spread_over_both_pairs():
    before = dict((p, load.success_count(p)) for p in (P1, P2))
    steady = load.SteadyLoad(threads=8, max_requests=160, max_seconds=20, max_tokens=8).start().wait()
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
    from ansible_collections.dgxspark.ds4.plugins.module_utils._bench import bench_sweep  # pylint: disable=import-error
    report = bench_sweep.run_sweep(url, 'deepseek-v4-flash', levels=[level], max_tokens=256, api_key=load.API_KEY,
                                   timeout=120.0, pause_s=0)
    lv = report['levels'][0]
    assert lv['errors'] == 0 and lv['aggregate_tps'], (url, lv['error_messages'], lv)
    return lv['aggregate_tps']


def test_bench_through_the_router_is_the_sum_of_the_pairs():
    """6 streams on each pair on its own, then 12 through the router. The simulator decodes 50 tok/s per stream
    up to max-num-seqs (8) streams: one pair cannot serve 12 streams at that rate, so a router aggregate equal to
    the sum of the pairs' means both pairs decoded side by side, at no cost from the router's hop."""
    pair1 = _bench('%s://%s:8000' % (d.SCHEME, d.ip(11)), 6)
    pair2 = _bench('%s://%s:8000' % (d.SCHEME, d.ip(13)), 6)
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


def test_router_restart_with_a_pair_down_serves_at_once_and_adds_it_when_it_answers():
    """vllm-router with --worker-urls would not listen until every pair answers; the role starts it without and the
    pool keeper adds each pair that answers /health. Pair 2's head frozen (docker pause: its address takes
    connections and answers nothing, as a Spark that hangs or is cut off does) while the router restarts."""
    both_in_rotation()
    exec_start = [ln for ln in d.node('spark1', 'systemctl', 'cat', ROUTER_UNIT).splitlines() if ln.startswith('ExecStart=')]
    assert len(exec_start) == 1 and '--worker-urls' not in exec_start[0] and 'http' not in exec_start[0], exec_start
    d.node('spark3', 'docker', 'pause', d.container('head'))
    try:
        serving = restart_router()
        assert load.router_workers() == [load.worker_url(P1)]
        served = [load.chat_once()[0] for dummy in range(4)]
    finally:
        t_back = time.monotonic()
        d.node('spark3', 'docker', 'unpause', d.container('head'), check=False)
    t_in = d.wait_until('pair2 added by the pool keeper once it answers', lambda: load.in_rotation(P2) and time.monotonic(),
                        60, interval=0.2)
    journal = d.node('spark1', 'journalctl', '--no-pager', '-o', 'cat', '-n', '40', '-u', POOL_UNIT)
    figure('router restarted with pair2 down: serving from pair1 %.2f s after the restart (bound %.0f s); pair2 added '
           '%.2f s after it answered again' % (serving, ROUTER_SERVES_S, t_in - t_back))
    assert served == [200] * 4
    assert serving <= ROUTER_SERVES_S
    assert 'waiting for %s' % load.worker_url(P2) in journal and 'added %s' % load.worker_url(P2) in journal, journal
    assert t_in - t_back <= ROUTER_SERVES_S


def test_router_front_is_its_own_nginx_a_fault_there_leaves_the_head_proxy_serving():
    """The router's front (clients' address :8080) is an nginx instance of its own: with its port taken by another
    process it cannot start, and pair1's head proxy (:8000 on the same host) restarts and serves all the same."""
    front, proxy = 'dgxspark-ds4-router-front.service', 'dgxspark-ds4-proxy.service'
    assert d.unit_show('spark1', front, 'ActiveState')['ActiveState'] == 'active'
    assert '8080' not in d.node('spark1', 'cat', '/etc/dgxspark-ds4/proxy/nginx.conf')
    head_url = '%s://%s:%s' % (d.SCHEME, d.ip(11), pool_workers()[0].rsplit(':', 1)[1])  # pair1's API port now
    d.node('spark1', 'systemctl', 'stop', front)
    squat = ("import socket, time; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
             "s.bind(('0.0.0.0', 8080)); s.listen(1); time.sleep(300)")
    d.node('spark1', 'systemd-run', '--unit=ds4-test-squat-8080', '/usr/bin/python3', '-c', squat)
    try:
        taken = ("import socket, sys\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                 "try:\n    s.bind(('0.0.0.0', 8080))\nexcept OSError:\n    sys.exit(0)\nsys.exit(1)\n")
        d.wait_until('another process on :8080', lambda: d.node('spark1', 'python3', '-c', taken) is not None, 10,
                     interval=0.2)
        d.node('spark1', 'systemctl', 'restart', front, check=False)
        # Type=simple: active at once, then nginx gives up binding (5 tries 0.5 s apart) and systemd retries it
        front_state = d.wait_until('the front fails on its taken port', lambda: d.unit_show(
            'spark1', front, 'ActiveState', 'SubState')['SubState'] in ('auto-restart', 'failed') and d.unit_show(
                'spark1', front, 'SubState')['SubState'], 20, interval=0.2)
        t_restart = time.monotonic()
        d.node('spark1', 'systemctl', 'restart', proxy)
        head = d.wait_until('pair1\'s head proxy serves after its restart',
                            lambda: [r for r in [load.chat_once(url=head_url, timeout=5.0)]
                                     if r[0] == 200], 20, interval=0.2)[0]
        head_s = time.monotonic() - t_restart
    finally:
        d.node('spark1', 'systemctl', 'stop', 'ds4-test-squat-8080', check=False)
        d.node('spark1', 'systemctl', 'reset-failed', front, check=False)
        d.node('spark1', 'systemctl', 'restart', front, check=False)
    figure('router front with its port taken: front %s, pair1\'s head proxy restarted and answered %s %.2f s later'
           % (front_state, head[0], head_s))
    assert head == (200, None)
    d.wait_until('the front serves again', lambda: load.chat_once(timeout=5.0)[0] == 200, 30, interval=0.2)


def test_rolling_restart_under_load_no_failed_request_one_pair_at_a_time():
    both_in_rotation()
    before = dict((p, started(p)) for p in (P1, P2))
    with load.HealthWindows() as health, load.SteadyLoad(threads=6, max_seconds=600, max_tokens=load.DRAIN_LOAD_TOKENS) as steady:
        _out, took = playbook('restart.yml')
    after = dict((p, started(p)) for p in (P1, P2))
    figure('restart.yml (rolling) took %.1f s' % took)
    assert_no_failed('restart.yml', steady)
    assert_one_pair_at_a_time('restart.yml', health.windows(), before, after)
    both_in_rotation(30)


def _hold_out(pair, port=8000):
    """Test setup: take a pair out of the router the way a drain does (hold, then /remove_worker)."""
    url = load.worker_url(pair, port)
    d.node('spark1', 'sh', '-c', 'mkdir -p /run/dgxspark-ds4/router-hold && echo %s > /run/dgxspark-ds4/router-hold/%s'
           % (url, quote(url, safe='')))
    assert load.router_admin('POST', '/remove_worker?url=' + quote(url, safe=''))[0] == 200


def _put_back(pair, port=8000):
    url = load.worker_url(pair, port)
    d.node('spark1', 'rm', '-f', '/run/dgxspark-ds4/router-hold/' + quote(url, safe=''))
    d.wait_until('%s back (pool keeper)' % pair, lambda: load.in_rotation(pair, port), 30, interval=0.2)


class SlowRequest(object):
    """One chat through the router that runs `seconds` (50 tokens/s in the simulator), in a thread."""

    def __init__(self, seconds):
        self.seconds, self.result, self.t0, self.t1 = seconds, None, None, None
        self.thread = threading.Thread(target=self._run)
        self.thread.daemon = True

    def _run(self):
        self.t0 = time.monotonic()
        # not one of the simulator's fixed prompts: filler, exactly max_tokens tokens at 50 tokens/s
        self.result = load.chat_once(prompt='Tell a long story about the sea.', max_tokens=int(self.seconds * 50),
                                     timeout=self.seconds * 3)
        self.t1 = time.monotonic()

    def start(self):
        self.thread.start()
        return self


@pytest.mark.skipif(os.environ.get('DS4_REPLICAS_SWITCH', '1') == '0', reason='DS4_REPLICAS_SWITCH=0')
def test_switch_to_another_served_name_is_refused_up_front():
    before = dict((p, started(p)) for p in (P1, P2))
    # the recipe is collection data, picked by name (-e ds4_profile)
    with open(os.path.join(d.PROJECT, 'roles', 'config', 'files', 'recipes', 'dspark-c16.yml')) as handle:
        minor = '.'.join(yaml.safe_load(handle)['image']['vllm_version'].split('.')[:2])
    overrides = dict(d.BASE_OVERRIDES, image={'ref': 'ds4-vllm-sim:vllm-%s' % minor})
    rc, out = d.run_playbook('switch.yml', {'ds4_profile': 'dspark-c16', 'ds4_site_overrides': overrides},
                             var_files=[SCENARIO_VARS])
    assert rc != 0, out[-3000:]
    assert "serves 'deepseek-v4-flash'" in out and "serves 'deepseek-v4-flash-dspark'" in out, out[-3000:]
    assert 'Nothing was changed. Fix: keep the served name' in out, out[-3000:]
    assert dict((p, started(p)) for p in (P1, P2)) == before
    assert pool_workers() == [load.worker_url(P1), load.worker_url(P2)]
    figure('switch.yml to dspark-c16 (served name deepseek-v4-flash-dspark): refused up front, no pair touched')


def test_a_rolling_switch_from_a_controller_without_the_sites_ca_is_refused_before_any_pair_leaves_rotation(tmp_path):
    """One CA per site (issue 45): the per-pair deploy checks the CA only after the pair left the routers' rotation,
    so switch.yml checks every host first: from a controller whose ds4_tls_ca_dir holds no CA it is refused before
    anything changes - no drain, no restart, both pairs still listed, nothing made in that directory."""
    before = dict((p, started(p)) for p in (P1, P2))
    empty = tmp_path / 'no-ca'
    rc, out = d.run_playbook('switch.yml', {'ds4_profile': 'throughput', 'ds4_tls_ca_dir': str(empty)},
                             var_files=[SCENARIO_VARS])
    flat = ' '.join(out.split())
    assert rc != 0 and 'already trusts a CA the collection made' in flat and 'holds no CA (no ca.crt there)' in flat, out[-3000:]
    assert 'out of rotation' not in flat and 'Rolling |' not in out, out[-3000:]
    assert re.findall(r'^spark\d\s+:\s+ok=\d+\s+changed=(\d+)', out, re.M) == ['0'] * 4, out[-1500:]
    assert not empty.exists()
    assert dict((p, started(p)) for p in (P1, P2)) == before
    assert pool_workers() == [load.worker_url(P1), load.worker_url(P2)]


# upgrade.yml (issue: upgrades without fear): switch.yml gated by the regression kit. `slower` is the simulator at half
# its decode and prefill rates (baked into the image: tests/harness/build-sim-image.sh), `next` the same simulator
# under another image ID.
SLOWER_IMAGE, NEXT_IMAGE, OLD_IMAGE = 'ds4-vllm-sim:slower', 'ds4-vllm-sim:next', 'ds4-vllm-sim:test'


def image_ids(pair):
    """The image each rank's container of the pair runs (its ID)."""
    return [d.node(n, 'docker', 'inspect', '-f', '{{.Image}}', d.container(role)) for n, role in NODES[pair]]


def image_id(ref, node='spark1'):
    return d.node(node, 'docker', 'image', 'inspect', '-f', '{{.Id}}', ref)


# The compile cache's marker on each node (ds4_effective.compile_cache.host_dir with the test inventory's cache volumes)
COMPILE_MARKER = '/var/cache/dgxspark-ds4/vllm/torch_compile_cache/.dgxspark-ds4-compiled-by.json'


def marked_images(pair):
    """The image ID each rank's compile cache marker names (tasks/ready.yml writes it after readiness when the wait's
    last poll found it naming another image or launch)."""
    return [json.loads(d.node(n, 'cat', COMPILE_MARKER))['image_id'] for n, _role in NODES[pair]]


def upgrade_record(record_dir, out):
    records = sorted(record_dir.glob('upgrade-*.json'))
    assert len(records) == 1, (records, out[-3000:])
    return json.loads(records[0].read_text())


def _numbers(step):
    return '; '.join('%s %s vs %s (x%.2f)' % (c['figure'], c['new'], c['old'], c['ratio']) for c in step['verdict']['compared'])


def test_upgrade_to_a_slower_image_reverts_the_first_pair_by_itself_and_never_touches_the_other(tmp_path):
    old_id = image_id(OLD_IMAGE)
    assert image_ids(P1) == image_ids(P2) == [old_id, old_id]
    overrides = dict(d.BASE_OVERRIDES, image=dict(d.BASE_OVERRIDES['image'], ref=SLOWER_IMAGE))
    before = dict((p, started(p)) for p in (P1, P2))
    with load.SteadyLoad(threads=6, max_seconds=900, max_tokens=load.DRAIN_LOAD_TOKENS) as steady:
        t0 = time.monotonic()
        rc, out = d.run_playbook('upgrade.yml', {'ds4_site_overrides': overrides, 'ds4_upgrade_dir': str(tmp_path)},
                                 var_files=[SCENARIO_VARS], timeout=1800)
        took = time.monotonic() - t0
    after = dict((p, started(p)) for p in (P1, P2))
    record = upgrade_record(tmp_path, out)
    flat = ' '.join(out.split())
    assert rc != 0, out[-3000:]
    step = record['steps'][0]
    figure('upgrade.yml to %s: reverted by itself in %.1f s; %s against %s: %s'
           % (SLOWER_IMAGE, took, step['pair'], step['reference'], _numbers(step)))
    assert_no_failed('upgrade.yml (slower image, reverted)', steady)
    assert 'upgrade to balanced stopped: pair spark_pair1 regressed against spark_pair2 (still on the old version' in flat
    assert 'went back to its kept set by itself' in flat and 'the pairs after it were not touched' in flat
    assert record['outcome'] == 'reverted' and record['regressed'] == [P1] and len(record['steps']) == 1
    assert step['pair'] == P1 and step['verdict']['verdict'] == 'regressed'
    decode = [c for c in step['verdict']['compared'] if c['figure'] == 'decode_tps'][0]
    assert decode['ratio'] < 0.6 and not decode['ok'], step  # half the rate, 10 % allowed
    assert step['new']['failures'] == [] and step['old']['failures'] == []  # slower, not broken: only the numbers
    # pair1 went to the slower image and back (restarted), pair2 never restarted; both serve the old image again
    assert all(a > b for a, b in zip(after[P1], before[P1])), (before[P1], after[P1])
    assert after[P2] == before[P2], 'pair2 was touched: %r -> %r' % (before[P2], after[P2])
    assert image_ids(P1) == image_ids(P2) == [old_id, old_id]
    both_in_rotation(30)


@pytest.mark.skipif(os.environ.get('DS4_REPLICAS_SWITCH', '1') == '0', reason='DS4_REPLICAS_SWITCH=0')
def test_upgrade_to_an_equal_image_recipe_and_port_promoted_pair_by_pair_then_rollback_under_load(tmp_path):
    """upgrade.yml (switch.yml gated by the kit: the one rolling sequence, tasks/rolling.yml) to a change of three
    things at once: the `next` image (the same simulator under another ID), the throughput recipe and API port 8888
    (as the dspark recipes use). Under steady load: promoted pair by pair, both sets of numbers in the output and the
    JSON record, 0 failed requests. The drain takes the URL the router lists (:8000), the restore puts back :8888; a
    slow request in flight on pair1 (45 s, well past any drain's own duration, under the router's 90 s request
    timeout) is waited for; afterwards the
    router's configuration lists only the :8888 URLs and a router restart serves at once. Then rollback.yml, back to
    the old image, recipe and port, under load: 0 failed requests."""
    assert served_max_model_len() == 131072
    old_id, next_id = image_id(OLD_IMAGE), image_id(NEXT_IMAGE)
    assert next_id != old_id and image_ids(P1) == image_ids(P2) == [old_id, old_id]
    assert next_id not in marked_images(P1) + marked_images(P2)
    overrides = dict(d.BASE_OVERRIDES, api={'port': ALT_PORT}, image=dict(d.BASE_OVERRIDES['image'], ref=NEXT_IMAGE))
    before = dict((p, started(p)) for p in (P1, P2))
    # the slow request lands on pair1, the first pair the upgrade drains: pair2 held out while it is sent
    _hold_out(P2)
    # 45 s: pair1's drain starts ~8 s into the upgrade (CI21: it waited 71.6 s for an 80 s request), so the request is
    # still in flight there on a machine several times slower; each second of it is a second of the steady load
    slow = SlowRequest(45).start()
    d.wait_until('the slow request running on pair1', lambda: load.running_count(P1) >= 1, 20, interval=0.2)
    _put_back(P2)
    with load.HealthWindows(ports=(8000, ALT_PORT)) as health, load.SteadyLoad(threads=6, max_seconds=1800, max_tokens=load.DRAIN_LOAD_TOKENS) as steady:
        t_switch = time.monotonic()
        # four drains of up to 100 s each (the slow request's), two deploys and three kit runs, on a loaded 2-core
        # machine: more than run_playbook's default 900 s is possible
        out, took = playbook('upgrade.yml', {'ds4_profile': 'throughput', 'ds4_site_overrides': overrides,
                                             'ds4_upgrade_dir': str(tmp_path)},
                             timeout=1800)
    slow.thread.join(120)
    after = dict((p, started(p)) for p in (P1, P2))
    record = upgrade_record(tmp_path, out)
    # the YAML callback folds long lines: read the run's words
    flat = ' '.join(out.split())
    # one drain per pair at each router (spark1's, spark3's: the two router hosts behind the VIP), in that order
    drained = re.findall(r'(spark_pair\d) at the router on (spark\d): took (\S+) out of rotation; waited up to (\d+) s '
                         r'\(([^)]*)\) for its in-flight requests: (\d+) (?:finished|in flight, ended) in ([0-9.]+) s', flat)
    assert len(record['steps']) == 2, (record, out[-3000:])
    first, last = record['steps']
    figure('upgrade.yml to %s, balanced -> throughput on port %d (rolling): promoted in %.1f s; %s against %s: %s; '
           '%s against %s: %s; drains (pair, URL, bound s, in flight, waited s) %s; the slow request (%s s, HTTP %s) '
           'ended %.1f s after the upgrade started, pair1 stopped answering %.1f s after it ended'
           % (NEXT_IMAGE, ALT_PORT, took, first['pair'], first['reference'], _numbers(first), last['pair'],
              last['reference'], _numbers(last), [(p, r, u, w, n, s_) for p, r, u, w, _why, n, s_ in drained],
              slow.seconds, slow.result[0], slow.t1 - t_switch, health.windows()[P1][0][0] - slow.t1))
    assert_no_failed('upgrade.yml (equal image, throughput recipe, port %d: promoted)' % ALT_PORT, steady)
    assert_one_pair_at_a_time('upgrade.yml', health.windows(), before, after)
    # promoted pair by pair, both sets of numbers in the record and in the output
    assert record['outcome'] == 'promoted' and record['regressed'] == [] and record['failed'] == [], record
    assert [s['pair'] for s in record['steps']] == [P1, P2]
    assert first['reference'].startswith(P2 + ' (still on the old version') and last['reference'] == P2 + ' itself, before its change'
    # the last pair's reference is the numbers it gave as the first comparison's reference
    assert last['old']['decode_tps'] == first['old']['decode_tps']
    for step in (first, last):
        assert step['verdict']['verdict'] == 'pass', step
        assert set(c['figure'] for c in step['verdict']['compared']) >= {'decode_tps', 'prefill_tps'}
    assert flat.count('Changed pair: decode') == 2 and flat.count('Reference: decode') == 2
    assert image_ids(P1) == image_ids(P2) == [next_id, next_id]
    # every rank's compile cache marked again, by the image it now runs
    assert marked_images(P1) == marked_images(P2) == [next_id, next_id]
    # the slow request finished (200, not cut) while pair1's drain waited for it: pair1 stopped answering only after
    assert slow.result == (200, None), slow.result
    first_down = health.windows()[P1][0][0]
    assert slow.t1 > t_switch and first_down >= slow.t1 - 0.5, (slow.t1 - t_switch, first_down - slow.t1)
    # each pair drained at both routers under the URL they listed (:8000), for the router's request timeout + 10 s,
    # said so; the slow request (sent through spark1's front) was in flight at spark1's router
    around = [m.start() for m in re.finditer('out of rotation', out)]
    assert [(p, r, u) for p, r, u, _w, _why, _n, _s in drained] == [
        (P1, 'spark1', load.worker_url(P1)), (P1, 'spark3', load.worker_url(P1)),
        (P2, 'spark1', load.worker_url(P2)), (P2, 'spark3', load.worker_url(P2))], (
        [out[max(0, i - 300):i + 400] for i in around[:3]] or out[-3000:])
    assert all(int(w) == REQUEST_TIMEOUT_S + 10 and 'router_request_timeout_s %d s' % REQUEST_TIMEOUT_S in why
               for _p, _r, _u, w, why, _n, _s in drained), drained
    assert int(drained[0][5]) >= 1, drained[0]
    assert set(served_max_model_len() for dummy in range(6)) == {65536}, 'a pair still serves the old recipe'
    # the router's configuration lists only the live URLs, its unit none; a restart serves at once, both pairs back
    live = [load.worker_url(P1, ALT_PORT), load.worker_url(P2, ALT_PORT)]
    assert pool_workers() == live
    assert load.router_workers() == sorted(live)
    serving = restart_router()
    both_in_rotation(ROUTER_SERVES_S, port=ALT_PORT)
    figure('router restart after the upgrade: serving %.2f s after the restart, both :%d pairs in rotation'
           % (serving, ALT_PORT))
    assert serving <= ROUTER_SERVES_S

    before = after
    with load.HealthWindows(ports=(8000, ALT_PORT)) as health, load.SteadyLoad(threads=6, max_seconds=600, max_tokens=load.DRAIN_LOAD_TOKENS) as steady:
        _out, took = playbook('rollback.yml', timeout=1800)
    after = dict((p, started(p)) for p in (P1, P2))
    figure('rollback.yml (rolling, back to the old image, recipe and port 8000) took %.1f s' % took)
    assert_no_failed('rollback.yml', steady)
    assert_one_pair_at_a_time('rollback.yml', health.windows(), before, after)
    assert set(served_max_model_len() for dummy in range(6)) == {131072}
    assert image_ids(P1) == image_ids(P2) == [old_id, old_id]
    assert pool_workers() == [load.worker_url(P1), load.worker_url(P2)]
    both_in_rotation(30)
    assert load.router_workers() == sorted([load.worker_url(P1), load.worker_url(P2)])
