# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scenario `replicas`, LAST (test_zz_*: it kills a node): the clients' one address survives the loss of the router
host that holds it (issue 26, "Done when", first item). First the steady state: the VIP on one router host, both
routers with both pairs, VRRP let in from the other router host only, status.yml naming each router and the holder.

Two routers (spark1 and spark3, the heads of both pairs), each with its own pool keeper and front, and keepalived
holding the VIP <net>.100 on one of them (ds4_router_vip <net>.100/24, molecule/replicas/inventory). Under steady client
load through the VIP, the node container holding it is killed (`docker kill`: SIGKILL of its systemd, no graceful
stop, no VRRP priority-0 advert). Measured: the seconds from the kill until a request through the VIP is answered
again (bound FAILOVER_BOUND_S), and the failed requests, each of which must have been in flight when the node died.
Then the node is started again: the VIP stays where it is (nopreempt) and nothing was restarted on the surviving
router host or its pair. The killed node's pair does not serve again here (its tmpfs /var/lib/docker, with the
simulator image, died with it): nothing below depends on it.

Figures: `FIGURE replicas-vip:` lines (the verifier runs pytest -s) and .cache/molecule-logs/replicas-vip.json.
"""


import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position
import ds4_load as load  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

VIP = d.ip(100)
VIP_URL = '%s://%s:8080' % (d.SCHEME, VIP)
ROUTER_HOSTS = ('spark1', 'spark3')
PAIR_OF = {'spark1': ('spark_pair1', 'spark2'), 'spark3': ('spark_pair2', 'spark4')}
KEEPALIVED_UNIT = 'dgxspark-ds4-keepalived.service'
ROUTER_UNITS = ('dgxspark-ds4-router.service', 'dgxspark-ds4-router-pool.service', 'dgxspark-ds4-router-front.service',
                KEEPALIVED_UNIT)
FAILOVER_BOUND_S = 10.0
# adverts are 1 s apart: a host that came back and wanted the address would take it within 3-4 adverts
NO_PREEMPT_WATCH_S = 6.0
RESULTS = os.path.join(d.PROJECT, '.cache', 'molecule-logs', 'replicas-vip.json')
_FIGURES = {}
# what the failover test leaves for the return test: the lost and the surviving router host, the survivor's state
_KILLED = {}


def figure(key, value, text):
    _FIGURES[key] = value
    print('FIGURE replicas-vip: ' + text)
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, 'w') as handle:
        json.dump(_FIGURES, handle, indent=1, sort_keys=True)


def _exec(node, *argv):
    """docker exec without raising (a killed node answers nothing): (rc, output)."""
    proc = subprocess.run(['docker', 'exec', d.node_container(node)] + list(argv), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, check=False, timeout=20)
    return proc.returncode, proc.stdout.strip()


def holds_vip(node):
    rc, out = _exec(node, 'ip', '-o', '-4', 'addr', 'show', 'to', VIP + '/32')
    return rc == 0 and VIP in out


def vip_holders():
    return [n for n in ROUTER_HOSTS if holds_vip(n)]


def unit_state(node, unit):
    props = d.unit_show(node, unit, 'ActiveState', 'ActiveEnterTimestampMonotonic', 'NRestarts', 'MainPID')
    return dict((k, props.get(k)) for k in ('ActiveState', 'ActiveEnterTimestampMonotonic', 'NRestarts', 'MainPID'))


def survivor_state(survivor):
    """What must not change on the surviving router host and its pair while the other router host dies and returns:
    its router units (start time, restarts, PID) and its pair's two containers (StartedAt)."""
    pair, worker = PAIR_OF[survivor]
    state = dict(('%s %s' % (survivor, u), unit_state(survivor, u)) for u in ROUTER_UNITS)
    state['%s head container' % pair] = d.started_at(survivor, 'head')
    state['%s worker container' % pair] = d.started_at(worker, 'worker')
    return state


def test_vip_on_one_router_host_both_routers_serve_vrrp_between_them_only():
    holders = d.wait_until('the VIP on exactly one router host', lambda: (len(vip_holders()) == 1) and vip_holders(), 30,
                           interval=0.5)
    for node in ROUTER_HOSTS:
        assert d.unit_show(node, KEEPALIVED_UNIT, 'ActiveState')['ActiveState'] == 'active', node
        # each router has both pairs in rotation (its own pool keeper) and its own front serves
        d.wait_until('both pairs in the rotation of the router on %s' % node,
                     lambda n=node: load.in_rotation('spark_pair1', host=n) and load.in_rotation('spark_pair2', host=n),
                     60, interval=0.5)
        front = '%s://%s:8080' % (d.SCHEME, d.ip(11 if node == 'spark1' else 13))
        assert load.chat_once(front) == (200, None), node
        # the firewall takes VRRP from the other router host only; the keepalived file holds the secret: 0600
        other = d.ip(13 if node == 'spark1' else 11)
        table = d.node(node, 'nft', 'list', 'table', 'inet', 'dgxspark_ds4')
        assert 'ip protocol vrrp ip saddr %s accept' % other in table and 'ip protocol vrrp drop' in table, table
        assert d.node(node, 'stat', '-c', '%a %U', '/etc/dgxspark-ds4/keepalived.conf') == '600 root'
    assert load.chat_once(VIP_URL) == (200, None)
    # status.yml shows each router's view and which router host holds the VIP (no chat: /health and /metrics only)
    rc, out = d.run_playbook('status.yml', {'ds4_status_chat': False})
    words = ' '.join(out.split())
    assert rc == 0, out[-3000:]
    assert 'clients: %s (VIP %s/24 held by %s)' % (VIP_URL, VIP, holders[0]) in words, out[-3000:]
    for node in ROUTER_HOSTS:
        assert ('router on %s (http://127.0.0.1:30000; front: port 8080%s)'
                % (node, ', holds the VIP' if node == holders[0] else '')) in words, out[-3000:]
    assert words.count(': in rotation') == 4, out[-3000:]
    figure('vip_holder_before', holders[0], 'VIP %s held by %s; both routers list both pairs' % (VIP, holders[0]))


def front_liveness(node):
    """The router front's /liveness on `node` (what keepalived's track script asks: vllm-router's own /liveness;
    its /health stays 503 here, the node's own pair being dead): HTTP status or None."""
    try:
        with urllib.request.urlopen('%s://%s:8080/liveness' % (d.SCHEME, d.ip(11 if node == 'spark1' else 13)),
                                    timeout=2) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _first_success_after(t_kill, bound_s):
    """Fresh requests through the VIP (2 s timeout each, a new connection each), started once the node is dead: the
    monotonic time the first one was answered 200, or None within bound_s + 5 s of the kill."""
    end = t_kill + bound_s + 5.0
    while time.monotonic() < end:
        status, _err = load.chat_once(VIP_URL, timeout=2.0)
        if status == 200:
            return time.monotonic()
    return None


# The lost router host is also pair 2's head: the surviving router then lists one unhealthy worker and its /health
# answers 503. keepalived's track script asks the front's /liveness (vllm-router's own) for that reason; when it asked
# /health, the survivor went to FAULT and nobody held the address (fresh-clone CI, 2026-11-26: 1062 of 1097 failed).
def test_killing_the_vip_holder_fails_over_within_bound_only_in_flight_requests_fail():
    holder = vip_holders()
    assert len(holder) == 1, holder
    lost = holder[0]
    survivor = [n for n in ROUTER_HOSTS if n != lost][0]
    before = survivor_state(survivor)
    t_wall_kill = time.time()
    with load.SteadyLoad(threads=6, max_seconds=120, url=VIP_URL, timeout=15.0) as steady:
        d.wait_until('steady load through the VIP', lambda: steady.count() >= 30, 60, interval=0.2)
        t_kill = time.monotonic()
        subprocess.run(['docker', 'kill', d.node_container(lost)], check=True, stdout=subprocess.PIPE)
        t_killed = time.monotonic()
        # measured from before the kill; the first probe goes out once docker says the node is dead
        t_ok = _first_success_after(t_kill, FAILOVER_BOUND_S)
        if t_ok is not None:
            # keep the load on until 30 requests sent after the failover were answered (the address serves steadily)
            d.wait_until('30 requests through the VIP answered after the failover',
                         lambda: len([r for r in steady.records if r['start'] >= t_ok and r['status'] == 200]) >= 30,
                         60, interval=0.5)
    records = list(steady.records)
    failed = steady.failed()
    # On the lost node while it died: a request in flight at any moment of the kill, from the signal until docker
    # says the node is gone. The death is not instantaneous: its processes are killed first, then Docker removes its
    # network namespace, and in between the VIP still on it answers a new connection with a RST (connection
    # refused: a plain container killed the same way refused new connections for 64 ms, then dropped them; the
    # first run of this test counted 777 failed requests, under 6 clients that retry at once, the five shown
    # started within 0.22 s of each other). A request started after the node was gone must not fail: it waits
    # (SYN retransmits) until the address has moved.
    in_flight = [r for r in records if r['start'] <= t_killed and r['end'] >= t_kill]
    not_in_flight = [r for r in failed if not (r['start'] <= t_killed and r['end'] >= t_kill)]
    refused_dying = [r for r in failed if r['start'] >= t_kill and r['end'] <= t_killed]
    failover_s = (t_ok - t_kill) if t_ok is not None else None
    figure('failover', {'killed': lost, 'survivor': survivor, 'failover_s': failover_s, 'requests': len(records),
                        'failed': len(failed), 'on_the_node_while_it_died': len(in_flight),
                        'failed_within_the_kill': len(refused_dying), 'kill_s': round(t_killed - t_kill, 3),
                        'failed_not_on_the_dying_node': len(not_in_flight),
                        'errors': sorted(set(str(r['error'])[:120] for r in failed))[:4]},
           'docker kill %s (VIP holder, %.2f s from the signal until docker returned): served through the VIP again %s s '
           'after the kill (bound %.0f s); %d requests, %d failed (%d of them started and ended within the kill), all on '
           'the node while it died (%d were), %d failed that were not; errors %s'
           % (lost, t_killed - t_kill, 'never' if failover_s is None else '%.2f' % failover_s, FAILOVER_BOUND_S,
              len(records), len(failed), len(refused_dying), len(in_flight), len(not_in_flight),
              sorted(set(str(r['error'])[:120] for r in failed))[:4]))
    if failover_s is None or failover_s > FAILOVER_BOUND_S:
        # what the survivor saw: its keepalived's journal, its addresses, its firewall's input chain
        evidence = '\n'.join('--- %s\n%s' % (' '.join(argv), d.node(survivor, *argv, check=False)) for argv in (
            ('journalctl', '--no-pager', '-o', 'cat', '-n', '40', '-u', KEEPALIVED_UNIT), ('ip', '-4', 'addr'),
            ('nft', 'list', 'chain', 'inet', 'dgxspark_ds4', 'input')))
        raise AssertionError('failover %s s (bound %.0f s)\n%s' % (failover_s, FAILOVER_BOUND_S, evidence))
    assert vip_holders() == [survivor]
    assert not not_in_flight, [dict(r, t_kill=t_kill, t_killed=t_killed) for r in not_in_flight[:5]]
    # nothing on the survivor moved while the address came to it
    assert survivor_state(survivor) == before
    _KILLED.update(lost=lost, survivor=survivor, before=before, at=int(t_wall_kill))


def test_the_lost_router_host_comes_back_and_nothing_moves():
    if not _KILLED:
        pytest.skip('the failover test did not get as far as the kill')
    lost, survivor, before = _KILLED['lost'], _KILLED['survivor'], _KILLED['before']
    subprocess.run(['docker', 'start', d.node_container(lost)], check=True, stdout=subprocess.PIPE)
    t_start = time.monotonic()
    # its router and front serve again, so its track script passes and it may hold the address again ...
    d.wait_until('the router front on %s answers /liveness again' % lost, lambda: front_liveness(lost) == 200, 180,
                 interval=0.5)
    t_front = time.monotonic() - t_start
    assert d.unit_show(lost, KEEPALIVED_UNIT, 'ActiveState')['ActiveState'] == 'active'
    # ... and for several adverts after that (the track script's rise is 2 s, a BACKUP would take an unheld address
    # 3-4 adverts later) it does not take it back: sampled every 0.5 s, the observation itself is the test
    watch_end = time.monotonic() + NO_PREEMPT_WATCH_S
    samples = []
    while time.monotonic() < watch_end:
        samples.append(tuple(vip_holders()))
        time.sleep(0.5)
    journal = _exec(lost, 'journalctl', '--no-pager', '-o', 'cat', '-u', KEEPALIVED_UNIT, '--since', '@%d' % _KILLED['at'])[1]
    states = [ln.split('Entering ', 1)[1] for ln in journal.splitlines() if 'Entering ' in ln]
    figure('return', {'back': lost, 'front_after_start_s': round(t_front, 1), 'vip_samples': len(samples),
                      'vip_holders_seen': sorted(set(samples)), 'keepalived_states': states},
           '%s started again: its front answered %.1f s after docker start, keepalived %s; VIP held by %s in all %d '
           'samples over the next %.0f s' % (lost, t_front, ' -> '.join(states) or '?', sorted(set(samples)), len(samples),
                                             NO_PREEMPT_WATCH_S))
    assert 'MASTER STATE' not in ' '.join(states), states
    assert set(samples) == {(survivor,)}, samples
    assert load.chat_once(VIP_URL) == (200, None)
    assert survivor_state(survivor) == before
