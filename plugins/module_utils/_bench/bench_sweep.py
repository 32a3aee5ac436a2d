# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Concurrency sweep for bench.yml: requests, per-level statistics (bench_stats),
speculative-decoding acceptance from /metrics deltas, seed reference figures, markdown report.

Pure Python (no Ansible imports).  The statistics are bench_stats' (not re-implemented here);
the HTTP client is vllm_client's.

  SEED_REFERENCES[profile] -> reference figures with their source (seed file and section)
  chat_body(model, prompt, max_tokens, thinking) -> request body
  run_sweep(base_url, model, levels, ...) -> report dict
  markdown_report(report) -> str   (header with the method, then one row per level)
"""

from __future__ import annotations


import time
from collections.abc import Callable, Iterable
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import bench_stats
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import vllm_client

DEFAULT_LEVELS = (1, 2, 4, 8, 16)        # seed 000 sweep
DEFAULT_MAX_TOKENS = 256                 # seed 000: 256 output tokens
DEFAULT_PROMPT = ("Write a long, detailed technical essay about how large language model inference servers "
                  "schedule concurrent requests, manage the KV cache and use speculative decoding. "
                  "Keep writing until you are stopped.")

# Seed reference figures, drawn beside the measured curve.  Each value is a figure the seed
# itself reports (docs/sources.md quotes the tables verbatim; a unit test checks every value against
# them); 'aggregate' = aggregate decode tok/s over all streams at that
# concurrency, 'per_stream' = tok/s of one stream.  Conditions differ from seed to seed: they are
# printed with the figures.
SEED_REFERENCES: dict[str, dict[str, Any]] = {
    "latency": {
        "source": "seed 000 (000_5c109cc0a805ddff.txt) 'Throughput profile' table, column 'Baseline (latency)'",
        "conditions": "non-stream completions, 256 output tokens, thinking disabled, prefix caching warm",
        "aggregate": {1: 37.8, 2: 55.9, 4: 88.0, 8: 86.3, 16: 89.5},
        "per_stream": {},
    },
    "throughput": {
        "source": "seed 000 (000_5c109cc0a805ddff.txt) 'Throughput profile' table, column 'Throughput profile'",
        "conditions": "non-stream completions, 256 output tokens, thinking disabled, prefix caching warm",
        "aggregate": {1: 36.5, 2: 52.1, 4: 73.7, 8: 117.5, 16: 163.2},
        "per_stream": {},
    },
    "balanced": {
        "source": "seed 000 (000_5c109cc0a805ddff.txt) 'production profile' table, column 'Balanced (128K@8)'",
        "conditions": "400 output tokens, thinking disabled, prefix caching warm; c16 not run (admission caps at 8)",
        "aggregate": {1: 37.2, 4: 65.8, 8: 105.0},
        "per_stream": {8: 15.4},
    },
    "long-context-1m": {
        "source": "seed 001 (001_9dfc0859543564c6.txt) 'Concurrency (pp2048, tg128)' table, depth 0",
        "conditions": "llama-benchy, 2048 prompt / 128 output tokens, context depth 0",
        "aggregate": {1: 36.5, 2: 54.4, 4: 47.8},
        "per_stream": {},
    },
    "conservative": {
        "source": "seed 002 (002_f507b8c32a3f3564.txt) reports no concurrency sweep",
        "conditions": "",
        "aggregate": {},
        "per_stream": {},
    },
    "dspark-nvfp4-1m": {
        "source": "seed 003 (003_55b1aeac4ec54a2e.txt) 'Direct validation' (c1: code-gate server decode mean) "
                  "and 'Concurrency' table (c2/4/6)",
        "conditions": "direct OpenAI-compatible prompts, DSpark k=5, nvfp4_ds_mla KV",
        "aggregate": {1: 54.22, 2: 60.95, 4: 83.21, 6: 104.11},
        "per_stream": {},
    },
    "dspark-c16": {
        "source": "seed 003 (003_55b1aeac4ec54a2e.txt) 'Static simultaneous batch, one TP=2 replica' table",
        "conditions": "static simultaneous batch, DSpark k=5, max_model_len 200000, max_num_seqs 16",
        "aggregate": {1: 57.6, 4: 140.8, 8: 252.6, 16: 315.1},
        "per_stream": {1: 57.6, 4: 35.2, 8: 31.6, 16: 19.7},
    },
}

METHOD = (
    "Method (dgxspark.ds4 bench.yml; docs/vllm-ops-notes.md section 4.5): each level sends N streamed /v1/chat/completions "
    "requests at once (threads released together), temperature 0, ignore_eos, max_tokens = the output length, "
    "thinking as set (chat_template_kwargs), stream_options.include_usage. Token counts come from the final "
    "'usage' chunk (never from counting chunks). Timestamps are taken by the client when a chunk carrying "
    "generated text (content, reasoning or tool-call arguments) arrives. "
    "Per-stream decode tok/s = (completion_tokens - 1) / (t_last - t_first): the first token belongs to TTFT. "
    "Aggregate decode tok/s = tokens generated inside the steady-state window [latest first token, earliest "
    "last token] (all N streams decoding; prefill, ramp-up and tail excluded) / window length; a stream's "
    "tokens inside the window assume it decodes at its own constant rate between its first and last token. "
    "TTFT = first generated chunk - request sent (p50/p95: linear interpolation). Errors = HTTP/stream errors "
    "or streams with < 2 tokens. Speculative decoding per-position acceptance = delta "
    "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=i} / delta vllm:spec_decode_num_drafts_total "
    "between /metrics scrapes before and after the level; mean acceptance length = 1 + accepted/drafts. "
    "Cross-check: delta vllm:generation_tokens_total over the level. A warm-up request per prompt runs first "
    "(prefix cache warm, as in seed 000)."
)


def chat_body(model: str, prompt: str, max_tokens: int, thinking: bool = False, temperature: float = 0.0,
              ignore_eos: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": int(max_tokens),
                            "temperature": temperature,
                            "chat_template_kwargs": {"thinking": bool(thinking), "enable_thinking": bool(thinking)}}
    if ignore_eos:
        body["ignore_eos"] = True
    return body


def scrape(base_url: str, timeout: float = 10.0) -> str | None:
    """/metrics text, or None when it cannot be read (the bench goes on without spec stats)."""
    try:
        status, text = vllm_client.get(base_url, "/metrics", timeout=timeout)
    except Exception:  # pylint: disable=broad-except
        return None
    return text if status == 200 else None


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def run_level(base_url: str, model: str, concurrency: int, prompt: str, max_tokens: int, thinking: bool,
              api_key: str | None = None, timeout: float = 600.0, clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """One level: scrape, N concurrent streams, scrape; bench_stats summary + spec decode + cross-check."""
    before = scrape(base_url)
    t0 = clock()
    body = chat_body(model, prompt, max_tokens, thinking)
    records = vllm_client.run_concurrent(
        lambda: vllm_client.stream_chat(base_url, body, api_key=api_key, timeout=timeout, clock=clock),
        [()] * concurrency)
    t1 = clock()
    after = scrape(base_url)
    for rec in records:
        rec.setdefault("error", "no result")
    summary = bench_stats.summarize_level(records, concurrency=concurrency)
    spec = bench_stats.spec_decode_stats(before or "", after or "")
    gen = bench_stats.counter_delta(before or "", after or "", "vllm:generation_tokens_total")
    summary["spec_decode"] = spec
    summary["server_generation_tokens"] = gen
    summary["client_completion_tokens"] = sum(int(r.get("completion_tokens") or 0) for r in records if not r.get("error"))
    summary["level_wall_s"] = t1 - t0
    summary["metrics_available"] = before is not None and after is not None
    summary["finish_reasons"] = sorted(set(str(r.get("finish_reason")) for r in records))
    summary["short_streams"] = sum(1 for r in records if not r.get("error") and (r.get("completion_tokens") or 0) < max_tokens)
    return summary


def reference_for(profile: str | None) -> dict[str, Any] | None:
    return SEED_REFERENCES.get(profile or "")


def run_sweep(base_url: str, model: str, levels: Iterable[int] = DEFAULT_LEVELS, max_tokens: int = DEFAULT_MAX_TOKENS,
              thinking: bool = False, prompt: str = DEFAULT_PROMPT, api_key: str | None = None, profile: str | None = None,
              max_num_seqs: Any = None, warmup: bool = True, timeout: float = 600.0, pause_s: float = 0.5,
              clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Run every level in order; levels above max_num_seqs are skipped (they would queue, so no
    steady-state window exists: seed 000 'admission caps at 8')."""
    report: dict[str, Any] = {"endpoint": base_url, "model": model, "profile": profile,
                              "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "settings": {"levels": list(levels), "max_tokens": max_tokens, "thinking": bool(thinking), "prompt": prompt,
                                           "max_num_seqs": max_num_seqs, "warmup": bool(warmup), "temperature": 0.0, "ignore_eos": True},
                              "method": METHOD, "levels": [], "skipped": [], "seed_reference": reference_for(profile)}
    if warmup:
        rec = vllm_client.stream_chat(base_url, chat_body(model, prompt, min(16, max_tokens), thinking), api_key=api_key,
                                      timeout=timeout, clock=clock)
        report["warmup_error"] = rec.get("error")
    for n in levels:
        n = int(n)
        if max_num_seqs and n > int(max_num_seqs):
            report["skipped"].append({"concurrency": n, "reason": "above max-num-seqs %s (requests would queue)" % max_num_seqs})
            continue
        report["levels"].append(run_level(base_url, model, n, prompt, max_tokens, thinking, api_key, timeout, clock))
        if pause_s:
            time.sleep(pause_s)
    report["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    report["errors"] = sum(lv["errors"] for lv in report["levels"])
    report["comparison"] = compare_to_seed(report)
    return report


def compare_to_seed(report: dict[str, Any]) -> list[dict[str, Any]]:
    ref = report.get("seed_reference") or {}
    agg = ref.get("aggregate") or {}
    out: list[dict[str, Any]] = []
    for lv in report.get("levels", []):
        c = lv["concurrency"]
        seed = agg.get(c)
        if seed is None:
            seed = agg.get(str(c))
        meas = lv.get("aggregate_tps")
        out.append({"concurrency": c, "measured_aggregate_tps": _round(meas, 2), "seed_aggregate_tps": seed,
                    "ratio": _round(meas / seed, 3) if (meas is not None and seed) else None})
    return out


def _fmt(value: float | None, digits: int = 1, none: str = "-") -> str:
    if value is None:
        return none
    return ("%%.%df" % digits) % value


def _spec_cell(spec: dict[str, Any] | None) -> str:
    if not spec or not spec.get("available"):
        return "-"
    rates = ["%.2f" % p["rate"] for p in spec.get("per_position") or [] if p.get("rate") is not None]
    mal = spec.get("mean_acceptance_length")
    return "%s (len %s)" % ("/".join(rates) or "-", _fmt(mal, 2))


def markdown_report(report: dict[str, Any]) -> str:
    """Markdown: title, settings, the method, the table, skipped levels, the seed reference."""
    ref = report.get("seed_reference") or {}
    agg_ref = dict((int(k), v) for k, v in (ref.get("aggregate") or {}).items())
    ps_ref = dict((int(k), v) for k, v in (ref.get("per_stream") or {}).items())
    s = report.get("settings") or {}
    lines = [
        "# dgxspark.ds4 decode benchmark: profile %s" % (report.get("profile") or "?"),
        "",
        "- Endpoint: `%s`, model `%s`" % (report.get("endpoint"), report.get("model")),
        "- Run: %s to %s (UTC)" % (report.get("started_utc"), report.get("finished_utc")),
        "- Output tokens per request: %s (ignore_eos), thinking %s, temperature 0, concurrency levels %s%s" % (
            s.get("max_tokens"), "on" if s.get("thinking") else "off", ", ".join(str(x) for x in s.get("levels") or []),
            (", max-num-seqs %s" % s["max_num_seqs"]) if s.get("max_num_seqs") else ""),
        "",
        "## Method",
        "",
        report.get("method") or METHOD,
        "",
        "## Results",
        "",
        "| Concurrency | OK / requests | Aggregate decode tok/s | Per-stream tok/s mean (min-max) | TTFT p50 / p95 (s) "
        "| Window (s) | Spec accept per position (mean len) | Server gen tokens | Seed aggregate | Measured / seed |",
        "|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for lv in report.get("levels", []):
        c = lv["concurrency"]
        seed = agg_ref.get(c)
        seed_cell = _fmt(seed) if seed is not None else "-"
        if ps_ref.get(c) is not None:
            seed_cell += " (%s/stream)" % _fmt(ps_ref[c])
        ratio = (lv["aggregate_tps"] / seed) if (seed and lv.get("aggregate_tps") is not None) else None
        lines.append("| %d | %d / %d | %s | %s (%s-%s) | %s / %s | %s | %s | %s | %s | %s |" % (
            c, lv["ok_requests"], lv["requests"], _fmt(lv.get("aggregate_tps")), _fmt(lv.get("per_stream_tps_mean")),
            _fmt(lv.get("per_stream_tps_min")), _fmt(lv.get("per_stream_tps_max")), _fmt(lv.get("ttft_p50_s"), 3),
            _fmt(lv.get("ttft_p95_s"), 3), _fmt(lv.get("window_s"), 2), _spec_cell(lv.get("spec_decode")),
            _fmt(lv.get("server_generation_tokens"), 0), seed_cell, ("%.2fx" % ratio) if ratio is not None else "-"))
    for sk in report.get("skipped", []):
        seed = _fmt(agg_ref.get(sk["concurrency"]))
        lines.append("| %d | skipped | %s | | | | | | %s | |" % (sk["concurrency"], sk["reason"], seed))
    errs = [(lv["concurrency"], m) for lv in report.get("levels", []) for m in lv.get("error_messages") or []]
    if errs:
        lines += ["", "## Errors", ""] + ["- c%d: %s" % (c, m) for c, m in errs]
    lines += ["", "## Seed reference", ""]
    if ref and agg_ref:
        lines.append("%s: %s. Conditions: %s." % ("Source", ref.get("source"), ref.get("conditions") or "-"))
        lines.append("Seed figures come from other runs and conditions; compare the shape, not the decimals.")
    else:
        lines.append("No seed reference figures for this profile%s." % ((" (%s)" % ref.get("source")) if ref else ""))
    return "\n".join(lines) + "\n"
