# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the real vllm_idle main() against the fake pair head of fake_router.py (GET /w/<name>/metrics): quiet,
busy past the timeout, the key sent, changed always false, check mode the same, bad numbers refused."""


import threading

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import router_admin
from ansible_collections.dgxspark.ds4.plugins.modules import vllm_idle as mod
from module_utils.fake_router import FakeRouter  # pylint: disable=import-error
from .module_harness import ExitJson, FailJson, patch_exit, run_main


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    patch_exit(monkeypatch)
    monkeypatch.setattr(router_admin, 'POLL_S', 0.01)


@pytest.fixture
def fake():
    with FakeRouter(['a']) as router:
        yield router


def run(args):
    return run_main(mod.main, args)


def test_a_request_at_the_engine_is_waited_for_then_the_quiet_window(fake):
    a = fake.worker('a')
    fake.vllm['a'] = (1, 0)
    threading.Timer(0.3, lambda: fake.vllm.__setitem__('a', (0, 0))).start()
    seen = []
    for check_mode in (False, True):
        kind, res = run({'url': a, 'api_key': 'secret', 'quiet_for': 1, 'timeout': 10,
                         '_ansible_check_mode': check_mode})
        assert kind is ExitJson and res['changed'] is False, res
        assert res['quiet_for_s'] == 1 and res['msg'].startswith('the vLLM server at %s had nothing in flight for 1 s' % a)
        seen.append((res['in_flight_initial'], res['in_flight_max'], res['waited_s']))
    # the first run met the request, waited for it (0.3 s), then the window (1 s); check mode waits the same way
    assert seen[0][:2] == (1, 1) and seen[0][2] >= 1.3, seen
    assert seen[1][:2] == (0, 0) and 1.0 <= seen[1][2] < 1.3, seen
    assert [r[2].get('Authorization') for r in fake.requests if r[1] == '/w/a/metrics'][0] == 'Bearer secret'


def test_busy_past_the_timeout_fails_and_bad_numbers_are_refused(fake):
    a = fake.worker('a')
    fake.vllm['a'] = (0, 2)
    kind, res = run({'url': a, 'quiet_for': 1, 'timeout': 0})
    assert kind is FailJson and res['changed'] is False and res['in_flight_final'] == 2
    assert '(last read: 2 running or waiting)' in res['msg']
    kind, res = run({'url': a, 'quiet_for': -1})
    assert kind is FailJson and res['msg'] == 'quiet_for = -1: must be at least 0'
