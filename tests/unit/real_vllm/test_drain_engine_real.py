# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drain's engine check against what real vLLM showed: what playbooks/tasks/drain.yml relies on is there.

When a router's count of a pair's requests stands still, the drain asks the pair's own engine
(router_admin.wait_engine_quiet, module vllm_idle): vllm:num_requests_running + vllm:num_requests_waiting must read
0 on every read for ENGINE_QUIET_S. That is safe only if real vLLM counts a request from soon after it is sent until
it ends, also while nothing else moves. Replayed here through the collection's own reader (router_admin.vllm_in_flight
over the /metrics text of each recorded poll, on a fake clock), from tests/fixtures/real_vllm (real vLLM 0.26.0):

- chunked prefill (130,000 tokens, 9.45 s to the first token; every counter stands still meanwhile): the request is
  counted 0.34-0.59 s after it was sent and on every poll until it finished, so the check waits for the whole
  prefill, then the quiet window; the time to be counted, scaled to a 1M-token prompt, stays below ENGINE_QUIET_S;
- a frozen worker rank (SIGSTOP for 20 s in a decode) and a killed one (a request in flight, the head still up for 30
  s): the request stays counted, so the check never reads such a pair as idle (the drain then fails at its timeout).
"""


import os
import sys

import pytest

TESTS = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

from real_vllm import observe  # noqa: E402  pylint: disable=import-error,wrong-import-position
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import router_admin, vllm_client  # noqa: E402

FIXTURES = os.path.join(TESTS, 'fixtures', 'real_vllm')
LONGEST_PROMPT = 1048576  # the 1M-context recipes


class Replay(object):
    """The recorded /metrics polls of one real run, served as text at the fake clock's time (the poll at or
    before it); the clock starts at `start` (seconds of the recording)."""

    def __init__(self, scenario, start):
        trace = observe.load(os.path.join(FIXTURES, scenario + '.json'))
        self.marks = dict((e['name'], e['t']) for e in trace['events'] if e['kind'] == 'mark')
        self.polls = [(e['t'], ''.join('%s %s\n' % item for item in sorted(e['series'].items())))
                      for e in trace['events'] if e['kind'] == 'metrics']
        self.now = self.marks[start] if isinstance(start, str) else start

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds

    def get(self, url, path, api_key=None, timeout=None):  # vllm_client.get's signature
        assert path == '/metrics'
        before = [text for t, text in self.polls if t <= self.now]
        assert before, 'the clock (%s) is before the first recorded poll' % self.now
        return 200, before[-1]

    def counted(self):
        """[(t, running + waiting)] of every recorded poll, read by the collection's reader."""
        out = []
        for t, _text in self.polls:
            self.now = t
            out.append((t, router_admin.vllm_in_flight('http://127.0.0.1:8001')))
        return out


@pytest.fixture
def replay(monkeypatch):
    def make(scenario, start):
        rep = Replay(scenario, start)
        monkeypatch.setattr(vllm_client, 'get', rep.get)
        return rep
    return make


def test_a_chunked_prefill_is_counted_from_soon_after_its_send_to_its_end(replay):
    rep = replay('prefill', 'prefill_start')
    sent, finished = rep.marks['prefill_start'], rep.marks['finished']
    counted = rep.counted()
    during = [n for t, n in counted if sent + 1.0 <= t < finished]
    assert len(during) >= 30 and set(during) == {1}, counted
    first = min(t for t, n in counted if n)
    last_zero = max(t for t, n in counted if t < first)
    # counted between 0.34 and 0.59 s after the send, for a 130,000-token prompt (the API server tokenizes first)
    assert last_zero - sent < 0.5 and first - sent < 1.0, (last_zero - sent, first - sent)
    assert (first - sent) * LONGEST_PROMPT / 130000 < router_admin.ENGINE_QUIET_S
    assert [n for t, n in counted if t > finished + 0.2] and set(n for t, n in counted if t > finished + 0.2) == {0}


def test_the_engine_check_waits_for_the_whole_prefill_then_its_window(replay):
    rep = replay('prefill', None)
    rep.now = rep.marks['prefill_start'] + 1.0  # the request reached the engine; the router's count stands
    start = rep.now
    res = router_admin.wait_engine_quiet('http://127.0.0.1:8001', quiet_for=router_admin.ENGINE_QUIET_S,
                                         timeout=120, clock=rep, sleep=rep.sleep)
    assert res['in_flight_initial'] == 1 and res['in_flight_max'] == 1
    # not before the prefill finished (its first 0 poll), plus the whole window
    assert start + res['waited_s'] >= rep.marks['finished'] + router_admin.ENGINE_QUIET_S, res
    assert start + res['waited_s'] < rep.marks['finished'] + router_admin.ENGINE_QUIET_S + 1.0, res


@pytest.mark.parametrize('scenario,mark,still', [('worker_frozen', 'worker_stopped', 19.0),
                                                 ('worker_killed_serving', 'worker_killed', 29.0)])
def test_a_frozen_or_dead_worker_with_a_request_never_reads_idle(replay, scenario, mark, still):
    rep = replay(scenario, mark)
    start = rep.now
    with pytest.raises(router_admin.RouterAdminError) as info:
        router_admin.wait_engine_quiet('http://127.0.0.1:8001', quiet_for=router_admin.ENGINE_QUIET_S,
                                       timeout=still, clock=rep, sleep=rep.sleep)
    assert info.value.fields['in_flight_final'] == 1 and info.value.fields['in_flight_max'] == 1
    assert rep.now - start >= still
