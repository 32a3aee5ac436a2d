# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The conformance observations are properties of real vLLM, not of one recording.

tests/fixtures/real_vllm/run2/ is a second, independent recording (a fresh extract of the committed tree,
another machine start, 2026-11-25 23:14 UTC; gzip'd, used only here). observe.compare of the two real runs must
find nothing: every observation the conformance test holds the simulator to came out the same twice.
"""


import os
import sys

import pytest

TESTS = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

from real_vllm import driver, observe  # noqa: E402  pylint: disable=import-error,wrong-import-position

FIXTURES = os.path.join(TESTS, 'fixtures', 'real_vllm')


@pytest.mark.parametrize('scenario', driver.TRACE_SCENARIOS)
def test_two_real_recordings_agree(scenario):
    first = observe.load(os.path.join(FIXTURES, scenario + '.json'))
    second = observe.load(os.path.join(FIXTURES, 'run2', scenario + '.json.gz'))
    assert first['recorded']['date'] != second['recorded']['date']
    diffs = observe.compare(observe.observe(first), observe.observe(second))
    assert not diffs, '\n'.join(diffs)
