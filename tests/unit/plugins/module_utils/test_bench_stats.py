# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for bench_stats with synthetic timelines whose answers are known exactly."""


import math

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import bench_stats as bs


def _stream(t_start, t_first, rate, tokens, error=None):
    """A constant-rate stream: first token at t_first, then (tokens - 1) tokens at `rate` tok/s."""
    return {"t_start": t_start, "t_first": t_first, "t_last": t_first + (tokens - 1) / float(rate),
            "completion_tokens": tokens, "error": error}


def test_per_stream_decode_tps():
    assert bs.per_stream_decode_tps(256, 0.5, 0.5 + 255 / 44.5) == pytest.approx(44.5)
    assert bs.per_stream_decode_tps(1, 0.5, 0.6) is None
    assert bs.per_stream_decode_tps(10, 2.0, 2.0) is None
    assert bs.per_stream_decode_tps(None, 1.0, 2.0) is None


def test_percentile_linear_between_closest_ranks():
    vals = list(range(1, 11))
    assert bs.percentile(vals, 50) == pytest.approx(5.5)
    assert bs.percentile(vals, 95) == pytest.approx(9.55)   # pos 8.55 between 9 and 10
    assert bs.percentile(vals, 0) == 1 and bs.percentile(vals, 100) == 10
    assert bs.percentile([7.0], 95) == 7.0
    assert bs.percentile([], 50) is None
    assert bs.percentile([3, None, 1], 50) == 2.0


def test_constant_rate_streams_aggregate_equals_sum_inside_window():
    # rates 20, 10, 20 tok/s; windows: s1 [1, 11], s2 [2, 12], s3 [1.5, 9]  -> steady state [2, 9]
    streams = [_stream(0.0, 1.0, 20, 201), _stream(0.0, 2.0, 10, 101), _stream(0.0, 1.5, 20, 151)]
    out = bs.summarize_level(streams, concurrency=3)
    assert (out["window_start"], out["window_end"]) == (2.0, 9.0)
    assert out["window_s"] == pytest.approx(7.0)
    # every stream decodes at a constant rate, so the window holds 7 s x (20 + 10 + 20) tokens
    assert out["window_tokens"] == pytest.approx(350.0)
    assert out["aggregate_tps"] == pytest.approx(50.0)
    assert out["per_stream_tps"] == pytest.approx([20.0, 10.0, 20.0])
    assert out["per_stream_tps_mean"] == pytest.approx(50.0 / 3)
    assert (out["per_stream_tps_min"], out["per_stream_tps_max"]) == (pytest.approx(10.0), pytest.approx(20.0))
    assert out["ttft_s"] == [1.0, 2.0, 1.5]
    assert out["ttft_p50_s"] == pytest.approx(1.5)
    assert out["ttft_p95_s"] == pytest.approx(1.95)
    assert (out["requests"], out["ok_requests"], out["errors"]) == (3, 3, 0)
    assert out["completion_tokens_total"] == 453
    assert out["method"] == "uniform-rate"


def test_aggregate_excludes_prefill_ramp_and_tail():
    # same two streams with long, different prefills: whole-run token/duration would be much lower
    streams = [_stream(0.0, 10.0, 25, 251), _stream(0.0, 12.0, 25, 251)]
    out = bs.summarize_level(streams)
    assert out["aggregate_tps"] == pytest.approx(50.0)
    whole_run = 502 / 22.0
    assert out["aggregate_tps"] > 2 * whole_run
    assert out["concurrency"] == 2


def test_chunk_counts_are_used_exactly():
    # s1: 1 token at 1.0, then 3 tokens every 0.3 s (k = 1..20, last at 7.0)  -> 61 tokens
    # s2: 1 token at 2.0, then 2 tokens every 0.5 s (k = 1..10, last at 7.0)  -> 21 tokens
    s1 = {"t_start": 0.0, "t_first": 1.0, "t_last": 7.0, "completion_tokens": 61, "error": None,
          "chunks": [[1.0, 1]] + [[1.0 + 0.3 * k, 3] for k in range(1, 21)]}
    s2 = {"t_start": 0.5, "t_first": 2.0, "t_last": 7.0, "completion_tokens": 21, "error": None,
          "chunks": [[2.0, 1]] + [[2.0 + 0.5 * k, 2] for k in range(1, 11)]}
    s1["chunks"][-1][0] = 7.0  # avoid float drift on the last timestamp
    out = bs.summarize_level([s1, s2])
    # window (2.0, 7.0]: s1 chunks k = 4..20 (17 x 3 = 51), s2 chunks k = 1..10 (10 x 2 = 20)
    assert out["window_tokens"] == 71
    assert out["aggregate_tps"] == pytest.approx(71 / 5.0)
    assert out["method"] == "chunks"
    assert out["ttft_s"] == [1.0, 1.5]


def test_errors_counted_and_excluded():
    streams = [_stream(0.0, 1.0, 20, 201), _stream(0.0, 1.0, 20, 201),
               {"t_start": 0.0, "t_first": None, "t_last": None, "completion_tokens": 0, "error": "HTTP 500"},
               {"t_start": 0.0, "t_first": 1.0, "t_last": 1.0, "completion_tokens": 1, "error": None}]
    out = bs.summarize_level(streams, concurrency=4)
    assert (out["requests"], out["ok_requests"], out["errors"]) == (4, 2, 2)
    assert out["error_messages"] == ["HTTP 500", "fewer than 2 tokens or no decode time"]
    assert out["per_stream_tps"][2:] == [None, None]
    assert out["aggregate_tps"] == pytest.approx(40.0)


def test_no_overlap_means_no_aggregate():
    streams = [_stream(0.0, 1.0, 10, 11), _stream(3.0, 4.0, 10, 11)]
    out = bs.summarize_level(streams)
    assert bs.steady_state_window(streams) is None
    assert out["aggregate_tps"] is None and out["window_s"] is None
    assert out["per_stream_tps"] == pytest.approx([10.0, 10.0])


def test_all_failed():
    out = bs.summarize_level([{"error": "timeout"}])
    assert out["aggregate_tps"] is None and out["ttft_p50_s"] is None and out["errors"] == 1


METRICS_BEFORE = '''# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="deepseek-v4-flash"} 100.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="deepseek-v4-flash"} 200.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="deepseek-v4-flash"} 150.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="deepseek-v4-flash",position="0"} 90.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="deepseek-v4-flash",position="1"} 60.0
vllm:generation_tokens_total{engine="0",model_name="deepseek-v4-flash"} 5000.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="deepseek-v4-flash"} 12.0
vllm:cache_config_info{block_size="256",cache_dtype="fp8",engine="0",gpu_memory_utilization="0.9"} 1.0
'''
METRICS_AFTER = '''vllm:spec_decode_num_drafts_total{engine="0",model_name="deepseek-v4-flash"} 300.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="deepseek-v4-flash"} 600.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="deepseek-v4-flash"} 430.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="deepseek-v4-flash",position="1"} 160.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="deepseek-v4-flash",position="0"} 270.0
vllm:generation_tokens_total{engine="0",model_name="deepseek-v4-flash"} 5640.0 1732262400000
'''


def test_parse_prometheus():
    samples = bs.parse_prometheus(METRICS_BEFORE + 'odd{path="a\\"b\\\\c"} NaN\nnot a sample line\nup 1\n')
    assert len(samples) == 10
    assert samples[0] == {"name": "vllm:spec_decode_num_drafts_total",
                          "labels": {"engine": "0", "model_name": "deepseek-v4-flash"}, "value": 100.0}
    assert samples[6]["labels"]["le"] == "+Inf" and samples[6]["value"] == 12.0
    assert samples[7]["labels"] == {"block_size": "256", "cache_dtype": "fp8", "engine": "0", "gpu_memory_utilization": "0.9"}
    assert samples[8]["labels"] == {"path": 'a"b\\c'} and math.isnan(samples[8]["value"])
    assert samples[9] == {"name": "up", "labels": {}, "value": 1.0}
    assert bs.parse_prometheus('x{le="+Inf"} +Inf')[0]["value"] == float("inf")


def test_metric_sum_and_counter_delta():
    assert bs.metric_sum(METRICS_BEFORE, "vllm:spec_decode_num_accepted_tokens_per_pos_total") == 150.0
    assert bs.metric_sum(METRICS_BEFORE, "vllm:spec_decode_num_accepted_tokens_per_pos_total", position=1) == 60.0
    assert bs.metric_sum(METRICS_BEFORE, "vllm:nope") is None
    # the generation-token counter cross-checks aggregate throughput: 640 tokens between scrapes
    assert bs.counter_delta(METRICS_BEFORE, METRICS_AFTER, "vllm:generation_tokens_total") == 640.0
    assert bs.counter_delta(METRICS_AFTER, METRICS_BEFORE, "vllm:generation_tokens_total") is None


def test_spec_decode_stats():
    out = bs.spec_decode_stats(METRICS_BEFORE, METRICS_AFTER)
    assert out["available"] is True
    assert (out["drafts"], out["draft_tokens"], out["accepted"]) == (200.0, 400.0, 280.0)
    assert out["acceptance_rate"] == pytest.approx(0.7)          # 280 / 400
    assert out["mean_acceptance_length"] == pytest.approx(2.4)   # 1 + 280 / 200
    assert out["convention"] == "1 + accepted/drafts (includes the bonus token)"
    assert out["per_position"] == [{"position": 0, "accepted": 180.0, "rate": pytest.approx(0.9)},
                                   {"position": 1, "accepted": 100.0, "rate": pytest.approx(0.5)}]


def test_spec_decode_sums_engines_and_accepts_parsed_samples():
    def scrape(drafts, acc):
        text = ""
        for eng in ("0", "1"):
            text += 'vllm:spec_decode_num_drafts_total{engine="%s"} %d\n' % (eng, drafts)
            text += 'vllm:spec_decode_num_draft_tokens_total{engine="%s"} %d\n' % (eng, drafts * 5)
            text += 'vllm:spec_decode_num_accepted_tokens_total{engine="%s"} %d\n' % (eng, acc)
        return bs.parse_prometheus(text)
    out = bs.spec_decode_stats(scrape(10, 20), scrape(110, 420))
    assert (out["drafts"], out["accepted"]) == (200.0, 800.0)
    assert out["mean_acceptance_length"] == pytest.approx(5.0)
    assert out["acceptance_rate"] == pytest.approx(0.8)
    assert out["per_position"] == []


def test_spec_decode_unavailable():
    out = bs.spec_decode_stats("vllm:generation_tokens_total 1\n", "vllm:generation_tokens_total 2\n")
    assert out["available"] is False
    assert out["acceptance_rate"] is None and out["mean_acceptance_length"] is None
    # counters went backwards: server restarted between scrapes
    out = bs.spec_decode_stats(METRICS_AFTER, METRICS_BEFORE)
    assert out["available"] is False and out["drafts"] is None
    # no drafts between scrapes (idle)
    out = bs.spec_decode_stats(METRICS_BEFORE, METRICS_BEFORE)
    assert out["available"] is False and out["per_position"][0]["rate"] is None
