# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The regression kit's bench figures from streams real vLLM sent: what the kit relies on is there.

The kit (plugins/module_utils/_converge/regression_kit.py) times a decode stream (tokens after the first over the time after
the first) and a long prompt with max_tokens 1 (the prompt's tokens, from the stream's final usage chunk, over the
time to the first token). tests/fixtures/real_vllm/bench_result.json holds every SSE line real vLLM 0.26.0 sent to the
collection's bench (two independent recordings), folded here by the same client code the kit uses
(vllm_client.fold_stream): real vLLM sends the usage chunk with prompt_tokens and completion_tokens when the client
asks for it, and its first text chunk comes before the last, so both figures exist and agree with the bench's own
per-stream figure and TTFT for the same stream.
"""


import os
import sys

import pytest

TESTS = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

from real_vllm import bench, driver, observe, recipe  # noqa: E402  pylint: disable=import-error,wrong-import-position

recipe.production_effective()  # puts the collection (ansible_collections.dgxspark.ds4) on sys.path
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import regression_kit  # noqa: E402  pylint: disable=wrong-import-position

FIXTURES = os.path.join(TESTS, 'fixtures', 'real_vllm')
PATHS = (os.path.join(FIXTURES, driver.BENCH_RESULT), os.path.join(FIXTURES, 'run2', driver.BENCH_RESULT + '.gz'))


@pytest.mark.parametrize('path', PATHS)
def test_the_kit_measures_real_vllm_streams(path):
    col = observe.load(path)['collection']
    level = col['report']['levels'][0]  # one stream at a time, as the kit sends them
    rec = bench.replay_record(col['streams'][0][0])
    assert rec['error'] is None and rec['completion_tokens'] == 64 and rec['prompt_tokens'] > 0, rec
    decode = regression_kit.decode_tps(rec)
    prefill = regression_kit.prefill_tps(rec)
    assert decode is not None and prefill is not None
    # the bench's own figures for the same stream (recorded on the GPU machine)
    assert decode == pytest.approx(level['per_stream_tps'][0], rel=0.05), (decode, level['per_stream_tps'])
    assert prefill == pytest.approx(rec['prompt_tokens'] / level['ttft_s'][0], rel=1e-6)
