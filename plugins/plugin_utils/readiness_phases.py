# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness phase tracking: the startup phases of one vLLM rank, read from its log lines.

Pure Python standard library (no Ansible imports).  Used by ``readiness_pair.ReadyInstance`` (the vllm_ready
action); the test-only vLLM simulator's lines and vllm-ops.md §1.3 are what the patterns match.

Phases (in order): ``loading`` (``Starting to load model``), ``shards`` (every
``Loading safetensors checkpoint shards: N% Completed | i/n``), ``weights_loaded`` (``Loading weights
took``/``Model loading took``), ``kv_cache`` (``GPU KV cache size: N tokens`` + ``Maximum concurrency for
L tokens per request: Xx``: two lines in 0.27.1, one line in 0.33), ``cuda_graphs`` (``Capturing CUDA
graphs``), ``graphs_done``, ``engine_ready`` (``init engine (...) took``), ``api_starting`` (``Starting vLLM
server on``) and ``startup_complete`` (``Application startup complete.``).
"""


from typing import Any
import re
import time

PHASES = ("loading", "shards", "weights_loaded", "kv_cache", "cuda_graphs", "graphs_done", "engine_ready",
          "api_starting", "startup_complete")

_RX_LOAD = re.compile(r"Starting to load model (\S+?)(?:\.\.\.)?\s*$")
_RX_SHARDS = re.compile(r"Loading safetensors checkpoint shards:\s*(\d+)% Completed \| (\d+)/(\d+)")
_RX_WEIGHTS = re.compile(r"Loading weights took ([\d.]+) seconds|Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) seconds")
_RX_KV_TOKENS = re.compile(r"KV cache size: ([\d,]+) tokens")
_RX_CONC = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_RX_GRAPHS = re.compile(r"Capturing CUDA graphs \(([^)]*)\)")
_RX_GRAPHS_DONE = re.compile(r"Graph capturing finished in ([\d.]+) secs?, took ([\d.]+) GiB")
_RX_ENGINE = re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s")
_RX_API = re.compile(r"Starting vLLM server on (\S+)")
_RX_COMPLETE = re.compile(r"Application startup complete\.")


def _int(text: str) -> int:
    return int(text.replace(",", ""))


class PhaseTracker(object):
    """Follow one node's log lines; report each phase once, with the time it was reached.

    feed(line, now) returns a list of events ``{'phase', 'elapsed', 'message'}`` (``elapsed`` =
    now - start, seconds).  Shard progress is reported at most every ``shard_step`` percent (and at
    100 %).  Attributes: ``timings`` {phase: elapsed of first sight}, ``kv_cache_tokens``,
    ``max_concurrency``, ``max_concurrency_len``, ``shards`` (i, n), ``complete`` (bool).
    """

    def __init__(self, node: str = "node", start: float | None = None, shard_step: int = 25) -> None:
        self.node = node
        self.start = time.monotonic() if start is None else start
        self.shard_step = shard_step
        self.timings: dict[str, float] = {}
        self.kv_cache_tokens: int | None = None
        self.max_concurrency: float | None = None
        self.max_concurrency_len: int | None = None
        self.shards: tuple[int, int] | None = None
        self.weights_gib: float | None = None
        self.complete = False
        self._last_shard_pct = -1
        self._kv_reported = False

    def _event(self, phase: str, now: float, message: str) -> dict[str, Any]:
        elapsed = round(now - self.start, 2)
        self.timings.setdefault(phase, elapsed)
        return {"phase": phase, "elapsed": elapsed, "node": self.node, "message": "%s: %s (+%.1fs)" % (self.node, message, elapsed)}

    def feed(self, line: str, now: float | None = None) -> list[dict[str, Any]]:
        now = time.monotonic() if now is None else now
        out = []
        if "loading" not in self.timings:
            m = _RX_LOAD.search(line)
            if m:
                out.append(self._event("loading", now, "loading weights of %s" % m.group(1)))
        m = _RX_SHARDS.search(line)
        if m:
            pct, i, n = int(m.group(1)), int(m.group(2)), int(m.group(3))
            self.shards = (i, n)
            if i > 0 and (pct >= self._last_shard_pct + self.shard_step or i == n) and pct > self._last_shard_pct:
                self._last_shard_pct = pct
                ev = self._event("shards", now, "weights loading: shard %d/%d (%d%%)" % (i, n, pct))
                out.append(ev)
        m = _RX_WEIGHTS.search(line)
        if m and "weights_loaded" not in self.timings:
            if m.group(2):
                self.weights_gib = float(m.group(2))
                msg = "weights loaded (%s GiB, %.1f s)" % (m.group(2), float(m.group(3)))
            else:
                msg = "weights loaded (%.1f s)" % float(m.group(1))
            out.append(self._event("weights_loaded", now, msg))
        m = _RX_KV_TOKENS.search(line)
        if m:
            self.kv_cache_tokens = _int(m.group(1))
        m = _RX_CONC.search(line)
        if m:
            self.max_concurrency_len = _int(m.group(1))
            self.max_concurrency = float(m.group(2))
        if not self._kv_reported and self.kv_cache_tokens is not None and self.max_concurrency is not None:
            self._kv_reported = True
            out.append(self._event("kv_cache", now, "KV cache %s tokens, max concurrency %.2fx at %s tokens/request"
                                   % ("{:,}".format(self.kv_cache_tokens), self.max_concurrency,
                                      "{:,}".format(self.max_concurrency_len))))
        if "cuda_graphs" not in self.timings:
            m = _RX_GRAPHS.search(line)
            if m:
                out.append(self._event("cuda_graphs", now, "capturing CUDA graphs (%s)" % m.group(1)))
        if "graphs_done" not in self.timings:
            m = _RX_GRAPHS_DONE.search(line)
            if m:
                out.append(self._event("graphs_done", now, "CUDA graphs captured in %s s (%s GiB)" % (m.group(1), m.group(2))))
        if "engine_ready" not in self.timings:
            m = _RX_ENGINE.search(line)
            if m:
                out.append(self._event("engine_ready", now, "engine initialised in %s s" % m.group(1)))
        if "api_starting" not in self.timings:
            m = _RX_API.search(line)
            if m:
                out.append(self._event("api_starting", now, "API server starting on %s" % m.group(1)))
        if not self.complete and _RX_COMPLETE.search(line):
            self.complete = True
            out.append(self._event("startup_complete", now, "Application startup complete."))
        return out

    def summary(self) -> dict[str, Any]:
        return {"timings": dict(self.timings), "kv_cache_tokens": self.kv_cache_tokens,
                "max_concurrency": self.max_concurrency, "max_concurrency_len": self.max_concurrency_len,
                "shards": list(self.shards) if self.shards else None}
