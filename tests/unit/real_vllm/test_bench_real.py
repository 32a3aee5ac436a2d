# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bench against real vLLM: the recorded figures follow from the recorded stream.

tests/fixtures/real_vllm/bench_result.json was written on the GPU machine by the recorder's `bench` scenario:
bench_sweep.run_sweep (the code playbooks/bench.yml runs) against real vLLM 0.26.0, every SSE line kept with
the clock value the client took for it, and llama-benchy (pinned) against the same server. Here each level's
streams are folded again through vllm_client.fold_stream and bench_stats.summarize_level: the figures must be
the recorded ones, to the last bit.
"""


import os
import sys

import pytest

TESTS = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

from real_vllm import bench, driver, observe, recipe  # noqa: E402  pylint: disable=import-error,wrong-import-position

recipe.production_effective()  # puts the collection (ansible_collections.dgxspark.ds4) on sys.path
FIXTURES = os.path.join(TESTS, 'fixtures', 'real_vllm')
# the fixture and the second, independent recording (run2/, gzip'd)
PATHS = (os.path.join(FIXTURES, driver.BENCH_RESULT), os.path.join(FIXTURES, 'run2', driver.BENCH_RESULT + '.gz'))
FIGURES = ('requests', 'ok_requests', 'errors', 'completion_tokens_total', 'per_stream_tps', 'per_stream_tps_mean',
           'aggregate_tps', 'window_start', 'window_end', 'window_tokens', 'ttft_s', 'ttft_p50_s', 'ttft_p95_s', 'method')


def _result(path=PATHS[0]):
    return observe.load(path)


@pytest.mark.parametrize('path', PATHS)
def test_recorded_on_real_vllm(path):
    rec = _result(path)['recorded']
    assert rec['vllm_version'] == '0.26.0' and rec['gpu'], rec


@pytest.mark.parametrize('path', PATHS)
@pytest.mark.parametrize('index', range(3))
def test_bench_statistics_reproduce_the_recorded_figures(index, path):
    col = _result(path)['collection']
    level = col['report']['levels'][index]
    streams = col['streams'][index]
    assert len(streams) == level['concurrency'] == level['requests']
    assert all(s['lines'] and s['t_start'] is not None for s in streams)
    again = bench.replay_level(streams, level['concurrency'])
    for key in FIGURES:
        got, want = again[key], level[key]
        if isinstance(want, list):
            # per-stream lists follow the request order; the tap keeps streams in the order their responses
            # began, so compare them as multisets (every other figure is order-independent)
            got, want = sorted(got), sorted(want)
        assert got == want, (key, got, want)
    assert level['errors'] == 0 and level['aggregate_tps'] > 0


def test_replay_sees_a_cut_stream_as_an_error():
    stream = dict(_result()['collection']['streams'][0][0])
    stream['lines'] = [pair for pair in stream['lines'] if 'data: [DONE]' not in pair[1]]
    assert bench.replay_record(stream)['error'] == 'stream ended without [DONE]'


@pytest.mark.parametrize('path', PATHS)
def test_llama_benchy_figures_recorded(path):
    lb = _result(path)['llama_benchy']
    assert lb['version'] == bench.LLAMA_BENCHY_VERSION and lb['rc'] == 0, lb.get('stderr')
    run = lb['result']['benchmarks'][0]
    assert (run['prompt_size'], run['response_size']) == (512, 32)
    assert run['pp_throughput']['mean'] > 0 and run['tg_throughput']['mean'] > 0
