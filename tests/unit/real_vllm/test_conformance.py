# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Conformance: the simulator, driven through the recorder's scenarios, shows what real vLLM showed.

The fixtures under tests/fixtures/real_vllm/ were recorded from real vLLM on a GPU machine by
tests/real_vllm/driver.py --backend real (README there). Here the same driver runs the simulator (two
processes, head + headless worker over TCP, rendered by the collection's renderer) once for every scenario,
and tests/real_vllm/observe.py compares the two: which vllm: series move or stand still per phase, the
HTTP status per endpoint per phase, the order of key log lines per rank, exit statuses, responses. Every
difference is listed in the failure message (real vLLM's observation first).
"""


import glob
import os
import sys

import pytest

TESTS = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

from real_vllm import driver, observe  # noqa: E402  pylint: disable=import-error,wrong-import-position

FIXTURES = os.path.join(TESTS, 'fixtures', 'real_vllm')
SCENARIOS = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(FIXTURES, '*.json'))
                   if os.path.basename(p) != driver.BENCH_RESULT)


@pytest.fixture(scope='module')
def sim_traces(tmp_path_factory):
    out = str(tmp_path_factory.mktemp('sim-traces'))
    scenarios = [s for s in SCENARIOS if s in driver.TRACE_SCENARIOS]
    driver.main(['--backend', 'sim', '--out', out, '--scenarios', ','.join(scenarios), '--deadline-s', '120'])
    return out


def test_every_scenario_has_a_real_fixture():
    assert sorted(driver.TRACE_SCENARIOS) == SCENARIOS, 'record the missing scenarios with tests/real_vllm/driver.py --backend real'
    for name in SCENARIOS:
        trace = observe.load(os.path.join(FIXTURES, name + '.json'))
        assert trace['backend'] == 'real' and trace['recorded']['vllm_version'] == '0.26.0', name


@pytest.mark.parametrize('scenario', SCENARIOS)
def test_simulator_conforms_to_real_vllm(scenario, sim_traces):
    real = observe.observe(observe.load(os.path.join(FIXTURES, scenario + '.json')))
    path = os.path.join(sim_traces, scenario + '.json')
    assert os.path.exists(path), 'the simulator run wrote no trace for %s' % scenario
    sim = observe.observe(observe.load(path))
    diffs = observe.compare(real, sim)
    assert not diffs, '%d difference(s) between real vLLM 0.26.0 and the simulator:\n  %s' % (len(diffs), '\n  '.join(diffs))
