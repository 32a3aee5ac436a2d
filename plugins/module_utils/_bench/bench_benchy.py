# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""llama-benchy from bench.yml (ds4_bench_tool=llama-benchy): the cells to run, the command line, the
reading of llama-benchy's JSON and the comparison with the seeds' own llama-benchy figures.

Pure Python (no Ansible imports).  The module plugins/modules/llama_benchy.py runs the commands on the
controller (llama-benchy in its own venv, the corpus served on 127.0.0.1); bench_report writes the files.

What llama-benchy 0.4.0 measures (read from its source, llama_benchy/client.py and results.py):
  * pp t/s, one stream: prompt tokens / est_ppt, est_ppt = time to the first streamed chunk with `choices`
    minus the latency of GET /models (latency mode `api`); prompt tokens = the server's usage.prompt_tokens
    when within 20 % of the tokens asked for, else the tokens asked for.  Several streams: all prompt tokens /
    (latest first token - earliest request start).
  * tg t/s, one stream: tokens after the first / (last token time - first token time), token times from
    token_ids per chunk or, without them, spread evenly over the chunks by usage.completion_tokens.
    Several streams: all those tokens / (latest last token - earliest first token).
  * e2e_ttft: first chunk carrying text - request sent (ms).
  * each cell: --runs runs (mean +- std) after one warm-up run; prompts cut from the corpus at random
    offsets, their size adapted by the chat template's overhead measured at warm-up.

  BENCHY_VERSION, SEED_CELLS, DEFAULT_CELLS
  cells_for(profile) -> (reference or None, pp, tg, [(depth, concurrency)])
  invocations(cells) -> [(depth, [concurrency...])]   (one llama-benchy run per depth)
  argv(...) -> list
  parse_results(data) -> [cell dict]
  build_report(...) -> report dict (tool 'llama-benchy')
  markdown_report(report) -> str
"""

from __future__ import annotations

from typing import Any

BENCHY_VERSION = '0.4.0'   # PyPI; the version seed 001's era and the field note name

METHOD = (
    "Method (dgxspark.ds4 bench.yml, ds4_bench_tool=llama-benchy): llama-benchy %s from PyPI in its own venv on the "
    "controller, against the endpoint with the API key; tokenizer: the model directory's tokenizer.json; text corpus "
    "served on 127.0.0.1 by the module (no internet). --exact-tg (min_tokens = max_tokens = tg, ignore_eos), latency "
    "mode api (GET /models, subtracted from the prefill time), --runs N after one warm-up run per cell. pp t/s = prompt "
    "tokens / (first response - request sent - latency) for one stream, all prompt tokens / (latest first token - "
    "earliest start) for several; tg t/s = tokens after the first / (last - first token) for one stream, all such tokens "
    "/ (latest last - earliest first token) for several (llama-benchy's own definitions). Ratio = measured / seed."
)

# Seed figures measured with llama-benchy, verbatim (docs/sources.md quotes the tables; a unit test reads them back
# from the seed text). Keyed by profile: the seed the profile follows.
SEED_CELLS: dict[str, dict[str, Any]] = {
    "long-context-1m": {
        "source": "seed 001 (001_9dfc0859543564c6.txt) 'Concurrency (pp2048, tg128)' table",
        "conditions": "llama-benchy, pp2048 tg128; vLLM 0.21.1 b12x image, TP=2, MTP 2, fp8 KV",
        "pp": 2048, "tg": 128,
        "cells": [
            {"depth": 0, "concurrency": 1, "pp_tps": 1942.0, "tg_tps": 36.5, "ttft_s": 1.2},
            {"depth": 0, "concurrency": 2, "pp_tps": 1843.0, "tg_tps": 54.4, "ttft_s": 2.2},
            {"depth": 0, "concurrency": 4, "pp_tps": 1883.0, "tg_tps": 47.8, "ttft_s": 3.7},
            {"depth": 4096, "concurrency": 1, "pp_tps": 2090.0, "tg_tps": 38.5, "ttft_s": 3.1},
            {"depth": 4096, "concurrency": 2, "pp_tps": 2028.0, "tg_tps": 38.3, "ttft_s": 5.0},
        ],
    },
}
# Profiles without a seed llama-benchy table run the field's common cells (seed 001's settings at depth 0).
DEFAULT_CELLS: dict[str, Any] = {"pp": 2048, "tg": 128, "cells": [(0, 1), (0, 2), (0, 4)]}


def cells_for(profile: str | None) -> tuple[dict[str, Any] | None, int, int, list[tuple[int, int]]]:
    """(seed reference or None, pp, tg, [(depth, concurrency)]) for a profile."""
    ref = SEED_CELLS.get(profile or "")
    if ref:
        return ref, ref["pp"], ref["tg"], [(c["depth"], c["concurrency"]) for c in ref["cells"]]
    return None, DEFAULT_CELLS["pp"], DEFAULT_CELLS["tg"], list(DEFAULT_CELLS["cells"])


def invocations(cells: list[tuple[int, int]]) -> list[tuple[int, list[int]]]:
    """One llama-benchy run per depth with that depth's concurrency levels, so exactly the cells asked for run
    (llama-benchy runs every depth x concurrency combination of one command line)."""
    out: list[tuple[int, list[int]]] = []
    for depth, conc in cells:
        for item in out:
            if item[0] == depth:
                if conc not in item[1]:
                    item[1].append(conc)
                break
        else:
            out.append((depth, [conc]))
    return out


def argv(benchy: str, url: str, model: str, tokenizer: str, book_url: str, pp: int, tg: int, depth: int,
         concurrency: list[int], runs: int, result_path: str, api_key: str | None = None,
         extra_body: dict[str, Any] | None = None) -> list[str]:
    """llama-benchy's command line for one depth (llama-benchy takes the API key only as --api-key)."""
    base = url.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    args = [benchy, "--base-url", base, "--model", model, "--served-model-name", model, "--tokenizer", tokenizer,
            "--book-url", book_url, "--pp", str(int(pp)), "--tg", str(int(tg)), "--depth", str(int(depth)), "--concurrency"]
    args += [str(int(c)) for c in concurrency]
    args += ["--runs", str(int(runs)), "--exact-tg", "--latency-mode", "api", "--skip-coherence",
             "--format", "json", "--save-result", result_path]
    if api_key:
        args += ["--api-key", api_key]
    for key, value in sorted((extra_body or {}).items()):
        args += ["--extra-body", "%s=%s" % (key, value)]
    return args


def _metric(run: dict[str, Any], name: str) -> tuple[Any, Any]:
    m = run.get(name) or {}
    return (m.get("mean"), m.get("std")) if m.get("mean") is not None else (None, None)


def parse_results(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Cells of one llama-benchy JSON result (context-load phases left out)."""
    cells: list[dict[str, Any]] = []
    for run in data.get("benchmarks") or []:
        if run.get("is_context_prefill_phase"):
            continue
        pp, pp_std = _metric(run, "pp_throughput")
        tg, tg_std = _metric(run, "tg_throughput")
        tg_req, _s = _metric(run, "tg_req_throughput")
        ttft, ttft_std = _metric(run, "e2e_ttft")
        cells.append({"depth": int(run.get("context_size") or 0), "concurrency": int(run.get("concurrency") or 1),
                      "pp": int(run.get("prompt_size") or 0), "tg": int(run.get("response_size") or 0),
                      "pp_tps": pp, "pp_tps_std": pp_std, "tg_tps": tg, "tg_tps_std": tg_std, "tg_req_tps": tg_req,
                      "ttft_s": (ttft / 1000.0) if ttft is not None else None,
                      "ttft_s_std": (ttft_std / 1000.0) if ttft_std is not None else None})
    return cells


def _ratio(meas: float | None, seed: float | None) -> float | None:
    return round(meas / seed, 3) if (meas is not None and seed) else None


def compare(cells: list[dict[str, Any]], reference: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Each measured cell with the seed's figures and the ratios (measured / seed)."""
    seeds = dict(((c["depth"], c["concurrency"]), c) for c in (reference or {}).get("cells") or [])
    out: list[dict[str, Any]] = []
    for cell in cells:
        seed = seeds.get((cell["depth"], cell["concurrency"])) or {}
        out.append(dict(cell, seed_pp_tps=seed.get("pp_tps"), seed_tg_tps=seed.get("tg_tps"), seed_ttft_s=seed.get("ttft_s"),
                        pp_ratio=_ratio(cell["pp_tps"], seed.get("pp_tps")), tg_ratio=_ratio(cell["tg_tps"], seed.get("tg_tps"))))
    return out


def build_report(endpoint: str, model: str, profile: str | None, pp: int, tg: int, runs: int, cells: list[dict[str, Any]],
                 reference: dict[str, Any] | None, version: str, started: str, finished: str, tokenizer: str, corpus: str,
                 errors: list[str] | None = None) -> dict[str, Any]:
    return {"tool": "llama-benchy", "llama_benchy_version": version, "endpoint": endpoint, "model": model, "profile": profile,
            "started_utc": started, "finished_utc": finished,
            "settings": {"pp": pp, "tg": tg, "runs": runs, "tokenizer": tokenizer, "corpus": corpus},
            "method": METHOD % version, "seed_reference": reference, "cells": compare(cells, reference),
            "errors": list(errors or [])}


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else ("%%.%df" % digits) % value


def _pm(mean: float | None, std: float | None, digits: int = 1) -> str:
    if mean is None:
        return "-"
    return "%s ± %s" % (_fmt(mean, digits), _fmt(std or 0.0, digits))


def markdown_report(report: dict[str, Any]) -> str:
    ref = report.get("seed_reference") or {}
    s = report.get("settings") or {}
    lines = [
        "# dgxspark.ds4 llama-benchy: profile %s" % (report.get("profile") or "?"),
        "",
        "- Endpoint: `%s`, model `%s`, llama-benchy %s" % (report.get("endpoint"), report.get("model"),
                                                           report.get("llama_benchy_version")),
        "- Run: %s to %s (UTC)" % (report.get("started_utc"), report.get("finished_utc")),
        "- pp%s / tg%s, %s runs per cell; tokenizer %s; corpus %s" % (
            s.get("pp"), s.get("tg"), s.get("runs"), s.get("tokenizer"), s.get("corpus")),
        "",
        "## Method",
        "",
        report.get("method") or "",
        "",
        "## Results",
        "",
        "| Cell | pp t/s | tg t/s | tg t/s per request | TTFT (s) | Seed pp t/s | Seed tg t/s | Seed TTFT (s) "
        "| pp measured / seed | tg measured / seed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in report.get("cells") or []:
        lines.append("| c%d d%d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            c["concurrency"], c["depth"], _pm(c.get("pp_tps"), c.get("pp_tps_std")), _pm(c.get("tg_tps"), c.get("tg_tps_std")),
            _fmt(c.get("tg_req_tps")), _pm(c.get("ttft_s"), c.get("ttft_s_std"), 2), _fmt(c.get("seed_pp_tps")),
            _fmt(c.get("seed_tg_tps")), _fmt(c.get("seed_ttft_s"), 1),
            ("%.2fx" % c["pp_ratio"]) if c.get("pp_ratio") is not None else "-",
            ("%.2fx" % c["tg_ratio"]) if c.get("tg_ratio") is not None else "-"))
    if report.get("errors"):
        lines += ["", "## Errors", ""] + ["- %s" % e for e in report["errors"]]
    lines += ["", "## Seed reference", ""]
    if ref:
        lines.append("Source: %s. Conditions: %s." % (ref.get("source"), ref.get("conditions") or "-"))
        lines.append("Seed figures come from another deployment (image, vLLM version, corpus); compare the shape, not the decimals.")
    else:
        lines.append("No seed llama-benchy figures for this profile (only seed 001 published a llama-benchy table); the cells "
                     "are seed 001's depth-0 settings.")
    return "\n".join(lines) + "\n"
