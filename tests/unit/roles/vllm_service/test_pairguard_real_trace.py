# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hang watchdog's decision code (pg_hang.HangDetector) replaying the long chunked prefill recorded on real
vLLM 0.26.0 (tests/fixtures/real_vllm/prefill.json, written by the recorder in tests/real_vllm/): every /metrics
poll of the trace, in order, stretched in time so the prefill outlasts the watchdog's window several times.

Real vLLM moves no counter before the first token; only vllm:kv_cache_usage_perc changes, at every poll. The
watchdog must see no hang for the whole prefill, and must catch the same trace frozen half-way (a wedge: requests
running, nothing moving, KV usage flat) within the window plus one poll.
"""


import json
import os

import pytest


from ansible_collections.dgxspark.ds4.plugins.module_utils._node import bench_stats
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import hang as pg_hang

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
PREFILL = os.path.join(REPO, 'tests', 'fixtures', 'real_vllm', 'prefill.json')
WINDOW_S = 120.0
POLL_S = 5.0

pytestmark = pytest.mark.skipif(not os.path.exists(PREFILL), reason='the real-vLLM recording %s is not in this checkout' % PREFILL)


def recorded_polls():
    """[(t, /metrics text)] of the recording, from the request's start to its first token."""
    with open(PREFILL) as handle:
        trace = json.load(handle)
    assert trace['backend'] == 'real' and trace['recorded']['vllm_version'].startswith('0.26')
    marks = dict((e['name'], e['t']) for e in trace['events'] if e['kind'] == 'mark')
    polls = []
    for event in trace['events']:
        if event['kind'] == 'metrics' and marks['prefill_start'] <= event['t'] < marks['first_token']:
            text = '\n'.join('%s %r' % (series, float(value)) for series, value in sorted(event['series'].items()))
            polls.append((event['t'], text + '\n'))
    return polls


def _values(text):
    samples = bench_stats.parse_prometheus(text)
    return pg_hang.metric_total(samples, 'vllm:num_requests_running'), pg_hang.progress_values(samples)


def test_the_recording_is_what_the_watchdog_rule_rests_on():
    polls = [_values(text) for _t, text in recorded_polls()]
    running = [p for p in polls if p[0]]
    assert len(running) >= 20
    counters = set(p[1][:3] for p in running)
    assert len(counters) == 1, 'a counter moved during the prefill: %s' % sorted(counters)
    kv = [p[1][3] for p in running]
    assert all(a < b for a, b in zip(kv, kv[1:])), kv


def test_replayed_real_prefill_is_never_a_hang():
    polls = recorded_polls()
    stretch = POLL_S / 0.25          # the recorder polled every 0.25 s; the watchdog polls every 5 s
    detector = pg_hang.HangDetector({'hang_after_s': WINDOW_S}, fetch=None)
    start = polls[0][0]
    for t, text in polls:
        now = (t - start) * stretch
        detector.fetch = lambda text=text: text
        assert detector.poll(now) is None, 'hang declared %.0f s into the replayed prefill' % now
    assert (polls[-1][0] - start) * stretch > WINDOW_S, 'the replay must outlast the window'


def test_the_real_prefill_frozen_half_way_is_caught_within_the_window_plus_one_poll():
    polls = recorded_polls()
    running = [text for _t, text in polls if _values(text)[0]]
    frozen = running[len(running) // 2]
    detector = pg_hang.HangDetector({'hang_after_s': WINDOW_S}, fetch=None)
    now, found, last_progress, previous = 0.0, None, None, None
    for text in running[:len(running) // 2] + [frozen] * 100:
        detector.fetch = lambda text=text: text
        if _values(text) != previous:
            last_progress, previous = now, _values(text)
        found = detector.poll(now)
        if found:
            break
        now += POLL_S
    assert found is not None and found['cause'] == 'hang_no_tokens'
    assert WINDOW_S <= now - last_progress <= WINDOW_S + POLL_S
    assert found['kv_cache_usage'] == _values(frozen)[1][3] > 0.0
