# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""router_admin against a local fake of vllm-router 0.1.17's admin API (fake_router.py): drain and restore,
their idempotence, check mode, the refusals and the two in-flight sources. Time is a fake clock; the real
router is in tests/integration/test_router_drain.py."""


import socket

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import router_admin as ra
from .fake_router import FakeRouter


class Clock(object):
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


@pytest.fixture
def fake():
    with FakeRouter(['a', 'b']) as router:
        yield router


@pytest.fixture
def clock():
    return Clock()


def _sequence(values):
    """An in-flight function returning the values one after the other (then the last one)."""
    seen = []

    def read():
        value = values[min(len(seen), len(values) - 1)]
        seen.append(value)
        if isinstance(value, Exception):
            raise value
        return value
    read.seen = seen
    return read


def test_list_and_states(fake):
    fake.healthy[fake.worker('b')] = False
    assert ra.list_workers(fake.base) == [fake.worker('a'), fake.worker('b')]
    assert ra.worker_states(fake.base + '/') == {fake.worker('a'): {'healthy': True, 'load': 0},
                                                 fake.worker('b'): {'healthy': False, 'load': 0}}


def test_drain_removes_then_waits_for_zero_twice(fake, clock):
    a = fake.worker('a')
    reads = _sequence([3, 2, 0, 1, 0, 0])
    res = ra.drain(fake.base, a + '/', in_flight_fn=reads, timeout=60, clock=clock, sleep=clock.sleep)
    assert res['changed'] is True
    assert res['workers_before'] == [a, fake.worker('b')]
    assert res['workers_after'] == [fake.worker('b')] == fake.workers
    assert res['in_flight_initial'] == 3
    assert reads.seen == [3, 2, 0, 1, 0, 0]
    assert res['in_flight_waited_s'] == 2.5
    assert 'took %s out of rotation; waited up to 60 s for its in-flight requests: 3 finished' % a in res['msg']
    removes = fake.admin_calls('/remove_worker')
    assert [r[1] for r in removes] == ['/remove_worker?url=http%3A%2F%2F127.0.0.1%3A' + a.split(':')[2].replace('/', '%2F')]


def test_drain_again_changes_nothing_but_still_waits(fake, clock):
    a = fake.worker('a')
    ra.drain(fake.base, a, in_flight_fn=_sequence([0]), clock=clock, sleep=clock.sleep)
    reads = _sequence([1, 0, 0])
    res = ra.drain(fake.base, a, in_flight_fn=reads, clock=clock, sleep=clock.sleep)
    assert res['changed'] is False
    assert res['workers_before'] == res['workers_after'] == [fake.worker('b')]
    assert len(fake.admin_calls('/remove_worker')) == 1
    assert reads.seen == [1, 0, 0]
    assert 'was not in rotation' in res['msg']


def test_drain_check_mode_reads_only(fake, clock):
    reads = _sequence([5])
    res = ra.drain(fake.base, fake.worker('a'), in_flight_fn=reads, check_mode=True, clock=clock, sleep=clock.sleep)
    assert res['changed'] is True
    assert res['workers_after'] == [fake.worker('b')]
    assert fake.workers == [fake.worker('a'), fake.worker('b')]
    assert not fake.admin_calls('/remove_worker') and not reads.seen
    assert res['in_flight_waited_s'] is None and res['msg'].startswith('would take')


def test_drain_without_source_does_not_wait(fake):
    res = ra.drain(fake.base, fake.worker('a'))
    assert res['changed'] is True and res['in_flight_waited_s'] is None
    assert 'not awaited' in res['msg']


def test_drain_refuses_to_leave_no_healthy_worker(fake, clock):
    a, b = fake.worker('a'), fake.worker('b')
    fake.healthy[b] = False
    with pytest.raises(ra.RouterAdminError) as info:
        ra.drain(fake.base, a, in_flight_fn=_sequence([0]), clock=clock, sleep=clock.sleep)
    assert 'would leave no healthy worker' in info.value.msg and 'allow_last' in info.value.msg
    assert info.value.fields['changed'] is False
    assert fake.workers == [a, b] and not fake.admin_calls('/remove_worker')
    # the same refusal in check mode
    with pytest.raises(ra.RouterAdminError):
        ra.drain(fake.base, a, check_mode=True)
    res = ra.drain(fake.base, a, in_flight_fn=_sequence([0]), allow_last=True, clock=clock, sleep=clock.sleep)
    assert res['changed'] is True and fake.workers == [b]


def test_drain_waits_for_a_request_longer_than_600_s(fake, clock):
    """Seed 001: 16.6 minutes to the first token at 980K tokens. The drain's wait is derived from the router's
    request timeout (router_config.drain_timeout_s: 1800 s + the margin), not the former fixed 600 s, so a pair
    with such a request in flight is not restarted under it; the old bound would have given up on it."""
    from ansible_collections.dgxspark.ds4.plugins.plugin_utils import router_config as rc
    a = fake.worker('a')
    ends_at = clock.now + 996.0

    def one_long_request():
        return 1 if clock.now < ends_at else 0

    timeout, errors = rc.drain_timeout_s({})
    assert errors == [] and timeout == 1810
    res = ra.drain(fake.base, a, in_flight_fn=one_long_request, timeout=timeout, clock=clock, sleep=clock.sleep)
    assert res['changed'] is True and res['in_flight_initial'] == 1
    assert 996.0 <= res['in_flight_waited_s'] < 1000.0, res
    assert 'waited up to 1810 s for its in-flight requests: 1 finished' in res['msg']
    ra.restore(fake.base, a)
    ends_at = clock.now + 996.0
    with pytest.raises(ra.RouterAdminError) as info:
        ra.drain(fake.base, a, in_flight_fn=one_long_request, timeout=600, clock=clock, sleep=clock.sleep)
    assert 'did not reach 0 within 600 s (still 1 in flight)' in info.value.msg


def test_drain_timeout_leaves_it_drained(fake, clock):
    a = fake.worker('a')
    with pytest.raises(ra.RouterAdminError) as info:
        ra.drain(fake.base, a, in_flight_fn=_sequence([2]), timeout=10, clock=clock, sleep=clock.sleep)
    assert 'did not reach 0 within 10 s (still 2 in flight); it stays out of rotation' in info.value.msg
    assert info.value.fields['changed'] is True and info.value.fields['in_flight_final'] == 2
    assert fake.workers == [fake.worker('b')]


def test_drain_retries_a_failing_source(fake, clock):
    reads = _sequence([socket.timeout('timed out'), ra.RouterAdminError('HTTP 502'), 0, 0])
    res = ra.drain(fake.base, fake.worker('a'), in_flight_fn=reads, clock=clock, sleep=clock.sleep)
    assert res['in_flight_initial'] == 0 and len(reads.seen) == 4
    with pytest.raises(ra.RouterAdminError) as info:
        ra.drain(fake.base, fake.worker('a'), in_flight_fn=_sequence([OSError('no route')]), timeout=2,
                 clock=clock, sleep=clock.sleep)
    assert 'OSError: no route' in info.value.msg


def test_restore_adds_once_and_waits_for_health(fake, clock):
    a = fake.worker('a')
    ra.drain(fake.base, a)
    res = ra.restore(fake.base, a, timeout=30, clock=clock, sleep=clock.sleep)
    assert res['changed'] is True
    assert res['workers_before'] == [fake.worker('b')] and res['workers_after'] == [fake.worker('b'), a]
    assert res['msg'].startswith('put %s back in rotation' % a)
    again = ra.restore(fake.base, a, timeout=30, clock=clock, sleep=clock.sleep)
    assert again['changed'] is False and again['workers_before'] == again['workers_after']
    assert len(fake.admin_calls('/add_worker')) == 1


def test_restore_of_a_down_worker_adds_nothing(fake, clock):
    a = fake.worker('a')
    ra.drain(fake.base, a)
    fake.up['a'] = False
    with pytest.raises(ra.RouterAdminError) as info:
        ra.restore(fake.base, a, timeout=5, clock=clock, sleep=clock.sleep)
    assert '%s/health did not answer 200 within 5 s (HTTP 503: down); not put back' % a in info.value.msg
    assert info.value.fields['changed'] is False
    assert not fake.admin_calls('/add_worker') and fake.workers == [fake.worker('b')]


def test_restore_reports_the_routers_refusal(fake, clock, monkeypatch):
    a = fake.worker('a')
    ra.drain(fake.base, a)
    fake.up['a'] = False
    # the pair head answers our health check but the router's own check fails
    monkeypatch.setattr(ra, '_wait_healthy_url', lambda *args: None)
    with pytest.raises(ra.RouterAdminError) as info:
        ra.restore(fake.base, a, timeout=5, clock=clock, sleep=clock.sleep)
    assert 'did not add %s: HTTP 400: Timeout' % a in info.value.msg


def test_restore_check_mode_and_unhealthy_listed_worker(fake, clock):
    a, b = fake.worker('a'), fake.worker('b')
    ra.drain(fake.base, a)
    res = ra.restore(fake.base, a, check_mode=True)
    assert res['changed'] is True and res['workers_after'] == [b, a] and fake.workers == [b]
    assert not fake.admin_calls('/add_worker')
    fake.healthy[b] = False
    with pytest.raises(ra.RouterAdminError) as info:
        ra.restore(fake.base, b, timeout=3, clock=clock, sleep=clock.sleep)
    assert '%s is listed but not healthy' % b in info.value.msg and info.value.fields['changed'] is False


def test_router_that_does_not_answer():
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    sock.close()
    with pytest.raises(ra.RouterAdminError) as info:
        ra.list_workers('http://127.0.0.1:%d' % port, timeout=2)
    assert 'does not answer GET /list_workers' in info.value.msg


def test_in_flight_sources(fake):
    a = fake.worker('a')
    fake.vllm['a'] = (2, 3)
    assert ra.vllm_in_flight(a, api_key='k1') == 5
    assert [r[2].get('Authorization') for r in fake.requests if r[1] == '/w/a/metrics'] == ['Bearer k1']
    fake.running = {a: 4, fake.worker('b'): 7}
    assert ra.router_in_flight(fake.base, a) == 4
    assert ra.router_in_flight(fake.base, fake.worker('c')) == 0
    read = ra.in_flight_reader(a + '/', metrics_url=a, router_metrics_url=fake.base)
    assert read() == 5
    fake.running[a] = 9
    assert read() == 9
    assert ra.in_flight_reader(a) is None
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    sock.close()
    assert ra.vllm_in_flight('http://127.0.0.1:%d' % port) == 0


def test_vllm_metrics_without_the_gauges(fake):
    with pytest.raises(ra.RouterAdminError) as info:
        ra.vllm_in_flight(fake.base)
    assert 'neither vllm:num_requests_running' in info.value.msg


def test_restore_racing_another_add_reports_no_change(fake, clock, monkeypatch):
    a = fake.worker('a')
    ra.drain(fake.base, a)

    def someone_else_adds(*args):  # pylint: disable=unused-argument
        fake.workers.append(a)
    monkeypatch.setattr(ra, '_wait_healthy_url', someone_else_adds)
    res = ra.restore(fake.base, a, timeout=5, clock=clock, sleep=clock.sleep)
    assert res['changed'] is False and len(fake.admin_calls('/add_worker')) == 1


def _free_port():
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_router_still_starting_is_waited_for_then_drained(fake, clock, monkeypatch):
    """A router that refuses connections (starting) is waited for, bounded, and the wait is said; here it
    "starts" (the URL switches to the fake's) after three refused polls."""
    refused = 'http://127.0.0.1:%d' % _free_port()
    calls = []
    real_get = ra.vllm_client.get

    def get(base, path, **kwargs):
        calls.append(base)
        return real_get(refused if len(calls) <= 3 else fake.base, path, **kwargs)
    monkeypatch.setattr(ra.vllm_client, 'get', get)
    result = ra.drain(fake.base, fake.worker('a'), timeout=5, clock=clock, sleep=clock.sleep)
    assert result['router_wait_s'] == 1.5  # three refusals, POLL_S apart
    assert 'vllm-router was not listening yet: waited 1.5 s' in result['msg'], result['msg']
    assert result['changed'] is True and fake.worker('a') not in ra.list_workers(fake.base)


def test_router_that_never_listens_fails_after_listen_timeout(clock):
    with pytest.raises(ra.RouterAdminError) as info:
        ra.restore('http://127.0.0.1:%d' % _free_port(), 'http://w:8000', timeout=5, clock=clock, sleep=clock.sleep,
                   listen_timeout=10)
    assert 'still refuses connections after 10 s' in info.value.msg and 'systemctl status' in info.value.msg
    assert clock.now >= 110.0


def test_router_answering_at_once_waits_nothing(fake, clock):
    result = ra.restore(fake.base, fake.worker('a'), timeout=5, clock=clock, sleep=clock.sleep)
    assert result['router_wait_s'] == 0.0 and 'not listening' not in result['msg']


def test_the_time_of_an_answer_is_no_wait(fake):
    """With a real clock the first GET itself takes time: a router that answered at once was still said to be 'not
    listening yet' (seen in Molecule's switch output, and it broke the drain line the replicas test reads)."""
    result = ra.drain(fake.base, fake.worker('a'), in_flight_fn=_sequence([0]))
    assert result['router_wait_s'] == 0.0, result
    assert 'not listening' not in result['msg'] and 'out of rotation; waited up to' in result['msg'], result['msg']


def test_reconcile_adds_what_answers_leaves_what_is_down_or_held(fake, tmp_path):
    """The pool keeper's pass: a router started without workers gets every head that answers now; a head that is
    down is waited for (why, said) and added on a later pass; a held (drained) one is never added back."""
    a, b = fake.worker('a'), fake.worker('b')
    fake.workers[:] = []
    fake.up['b'] = False
    res = ra.reconcile(fake.base, [a + '/', b], hold_dir=str(tmp_path / 'hold'))
    assert res['added'] == [a] and res['listed'] == [a] == fake.workers
    assert list(res['waiting']) == [b] and 'HTTP 503' in res['waiting'][b]
    fake.up['b'] = True
    res = ra.reconcile(fake.base, [a, b], hold_dir=str(tmp_path / 'hold'))
    assert res['added'] == [b] and fake.workers == [a, b] and res['waiting'] == {}
    # nothing to do: no admin call at all
    calls = len(fake.admin_calls('/add_worker'))
    assert ra.reconcile(fake.base, [a, b])['added'] == [] and len(fake.admin_calls('/add_worker')) == calls
    # drained with a hold: the keeper leaves it out until the restore releases it
    ra.drain(fake.base, b, hold_dir=str(tmp_path / 'hold'))
    assert ra.held(str(tmp_path / 'hold')) == {b}
    res = ra.reconcile(fake.base, [a, b], hold_dir=str(tmp_path / 'hold'))
    assert res['added'] == [] and res['held'] == [b] and fake.workers == [a]
    ra.restore(fake.base, b, timeout=10, hold_dir=str(tmp_path / 'hold'))
    assert ra.held(str(tmp_path / 'hold')) == set() and fake.workers == [a, b]


def test_reconcile_against_a_router_that_does_not_answer_raises():
    with pytest.raises(ra.RouterAdminError, match='does not answer GET /list_workers'):
        ra.reconcile('http://127.0.0.1:9', ['http://127.0.0.1:10'])


def test_drain_check_mode_holds_nothing(fake, tmp_path):
    ra.drain(fake.base, fake.worker('a'), check_mode=True, hold_dir=str(tmp_path))
    assert ra.held(str(tmp_path)) == set()


def test_restore_under_another_url_releases_the_drained_ones_hold(fake, tmp_path):
    """A switch to another port: drained as the old URL, put back as the new one; neither stays held."""
    a = fake.worker('a')
    ra.drain(fake.base, a, hold_dir=str(tmp_path))
    ra.hold(str(tmp_path), fake.worker('b'))
    assert ra.held(str(tmp_path)) == {a, fake.worker('b')}
    ra.restore(fake.base, fake.worker('b'), timeout=10, hold_dir=str(tmp_path), replaces=a)
    assert ra.held(str(tmp_path)) == set()


def test_drain_without_waiting_takes_it_out_and_holds_it(fake, clock, tmp_path):
    """tasks/drain.yml's first step: out of every router first (held, removed), nothing read."""
    a = fake.worker('a')
    reads = _sequence([4])
    res = ra.drain(fake.base, a, in_flight_fn=reads, wait=False, clock=clock, sleep=clock.sleep,
                   hold_dir=str(tmp_path))
    assert res['changed'] is True and fake.workers == [fake.worker('b')]
    assert ra.held(str(tmp_path)) == {a}
    assert reads.seen == [] and res['in_flight_waited_s'] is None and 'waited_msg' not in res
    assert res['msg'] == 'took %s out of rotation' % a


def test_a_count_that_stands_still_ends_the_wait_as_stale(fake, clock):
    """vllm-router's gauge left above the real load (run3 of the replicas drill: 3, then 1 for 100 s): with
    stale_after the wait ends when the count has not moved for that long, without failing."""
    a = fake.worker('a')
    reads = _sequence([3, 3, 2, 1])
    res = ra.drain(fake.base, a, in_flight_fn=reads, timeout=100, stale_after=15, clock=clock, sleep=clock.sleep)
    assert res['stale'] is True and res['stood_at'] == 1 and res['in_flight_initial'] == 3
    # 1 first read at 1.5 s; 15 s later (0.5 s reads) it still reads 1
    assert res['stood_from_s'] == 1.5 and res['in_flight_waited_s'] == 16.5
    assert res['waited_msg'] == ('waited up to 100 s for its in-flight requests: 3 in flight, the count stood at 1 '
                                 'from 1.5 s to 16.5 s')
    assert res['msg'] == 'took %s out of rotation; %s' % (a, res['waited_msg'])


def test_a_moving_count_is_not_stale(fake, clock):
    """A count that moves within stale_after is waited for to the end, however long it takes."""
    a = fake.worker('a')
    # 5 requests, one finishing every 10 s: never still for 15 s
    values = [5 - int(k * 0.5 // 10) for k in range(101)] + [0, 0]
    reads = _sequence(values)
    res = ra.drain(fake.base, a, in_flight_fn=reads, timeout=100, stale_after=15, clock=clock, sleep=clock.sleep)
    assert res['stale'] is False and 'stood_at' not in res
    assert res['waited_msg'] == 'waited up to 100 s for its in-flight requests: 5 finished in 50.5 s'


def test_without_stale_after_a_count_that_stands_still_fails_at_the_timeout(fake, clock):
    a = fake.worker('a')
    with pytest.raises(ra.RouterAdminError) as info:
        ra.drain(fake.base, a, in_flight_fn=_sequence([3, 1]), timeout=100, clock=clock, sleep=clock.sleep)
    assert 'did not reach 0 within 100 s (still 1 in flight)' in info.value.msg


def test_stale_after_zero_and_an_unreadable_count(fake, clock):
    """stale_after 0: the first count above 0 stands (the re-read of tasks/drain.yml uses 2 s); a read that fails
    is no count and never stands."""
    a = fake.worker('a')
    res = ra.drain(fake.base, a, in_flight_fn=_sequence([2]), timeout=10, stale_after=0, clock=clock,
                   sleep=clock.sleep)
    assert res['stale'] is True and res['stood_at'] == 2 and res['in_flight_waited_s'] == 0.0
    with pytest.raises(ra.RouterAdminError) as info:
        ra.drain(fake.base, a, in_flight_fn=_sequence([OSError('refused')]), timeout=5, stale_after=1,
                 clock=clock, sleep=clock.sleep)
    assert 'OSError: refused' in info.value.msg


def _engine(monkeypatch, clock, counts):
    """vllm_in_flight of the pair's engine as a function of the fake clock's seconds since the start."""
    start = clock.now
    seen = []

    def read(url, api_key=None, timeout=5.0):
        value = counts(clock.now - start)
        seen.append((url, api_key, value))
        if isinstance(value, Exception):
            raise value
        return value
    monkeypatch.setattr(ra, 'vllm_in_flight', read)
    return seen


def test_engine_quiet_waits_for_a_long_request_then_the_quiet_window(monkeypatch, clock):
    """A request still running at the engine (the router's count stood still because nothing finished) is
    waited for; then every read must be 0 for quiet_for seconds."""
    seen = _engine(monkeypatch, clock, lambda t: 1 if t < 40 else 0)
    res = ra.wait_engine_quiet('http://127.0.0.1:8001/', api_key='k', quiet_for=10, timeout=100, clock=clock,
                               sleep=clock.sleep)
    assert res['waited_s'] == 50.0 and res['in_flight_initial'] == 1 and res['in_flight_max'] == 1
    assert res['quiet_for_s'] == 10 and res['reads'] == len(seen) == 101
    assert seen[0][:2] == ('http://127.0.0.1:8001', 'k')


def test_engine_quiet_restarts_its_window_on_any_request(monkeypatch, clock):
    seen = _engine(monkeypatch, clock, lambda t: 2 if 6 <= t < 7 else (OSError('reset') if t == 12 else 0))
    res = ra.wait_engine_quiet('http://e', quiet_for=10, timeout=100, clock=clock, sleep=clock.sleep)
    # quiet from 7 s, broken by the failed read at 12 s (no count), quiet again from 12.5 s to 22.5 s
    assert res['waited_s'] == 22.5 and res['in_flight_max'] == 2 and len(seen) == 46


def test_engine_busy_past_the_timeout_fails_with_the_count(monkeypatch, clock):
    _engine(monkeypatch, clock, lambda t: 3)
    with pytest.raises(ra.RouterAdminError) as info:
        ra.wait_engine_quiet('http://e', quiet_for=10, timeout=30, clock=clock, sleep=clock.sleep)
    assert info.value.msg == ('the vLLM server at http://e did not stay without requests in flight for 10 s within '
                              '30 s (last read: 3 running or waiting)')
    assert info.value.fields['in_flight_final'] == 3 and info.value.fields['waited_s'] == 30.0


def test_engine_that_is_stopped_reads_quiet(clock):
    """Connection refused reads 0: a stopped server has nothing in flight (the real HTTP path)."""
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    url = 'http://127.0.0.1:%d' % sock.getsockname()[1]
    sock.close()
    res = ra.wait_engine_quiet(url, quiet_for=1, timeout=5, clock=clock, sleep=clock.sleep)
    assert res['in_flight_initial'] == 0 and res['waited_s'] == 1.0


def test_drain_report_of_each_way_a_drain_ends(fake, clock, monkeypatch):
    """tasks/drain.yml's line per router (filter drain_report), from the results of its steps there."""
    a = fake.worker('a')
    removal = ra.drain(fake.base, a, wait=False, clock=clock, sleep=clock.sleep)
    done = ra.drain(fake.base, a, in_flight_fn=_sequence([2, 1, 0, 0]), timeout=100, waits_for='why', stale_after=15,
                    clock=clock, sleep=clock.sleep)
    assert ra.drain_report(removal, done) == ('took %s out of rotation; waited up to 100 s (why) for its in-flight '
                                              'requests: 2 finished in 1.5 s' % a)
    stood = ra.drain(fake.base, a, in_flight_fn=_sequence([3, 1]), timeout=100, waits_for='why', stale_after=15,
                     clock=clock, sleep=clock.sleep)
    _engine(monkeypatch, clock, lambda t: 1 if t < 30 else 0)
    engine = ra.wait_engine_quiet('http://e', quiet_for=10, timeout=100, clock=clock, sleep=clock.sleep)
    came_down = ra.drain(fake.base, a, in_flight_fn=_sequence([0, 0]), timeout=10, stale_after=2, clock=clock,
                         sleep=clock.sleep)
    still = ra.drain(fake.base, a, in_flight_fn=_sequence([1]), timeout=10, stale_after=2, clock=clock,
                     sleep=clock.sleep)
    stood_words = ("the router's count stood at 1 from 0.5 s; the pair's engine had at most 1 running or waiting, then "
                   "nothing for 10 s")
    # 15.5 s at the router, 40 s at the engine, 0.5 s or 2 s reading the router again
    assert ra.drain_report(removal, stood, engine, came_down) == (
        'took %s out of rotation; waited up to 100 s (why) for its in-flight requests: 3 finished in 56.0 s (%s, and '
        'the count came down)' % (a, stood_words))
    assert ra.drain_report(removal, stood, engine, still) == (
        'took %s out of rotation; waited up to 100 s (why) for its in-flight requests: 3 in flight, ended in 57.5 s: %s, '
        'and the count still reads 1 - a router count that did not come down (vllm-router sets it after its load '
        'counter, not atomically), passed over' % (a, stood_words))
    # check mode: the removal's words only
    checked = ra.drain(fake.base, fake.worker('b'), check_mode=True, allow_last=True, in_flight_fn=_sequence([0]))
    assert ra.drain_report(checked, checked) == checked['msg'] == 'would take %s out of rotation' % fake.worker('b')
