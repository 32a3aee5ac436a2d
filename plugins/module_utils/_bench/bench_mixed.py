# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mixed bench: a short request's time to first token while a long prompt prefills, beside the long prompt's own time.

What it measures (issue 44 part 3; the shape of the real-vllm-on-device notes, Part 1b): with chunked prefill and the
default `--long-prefill-token-threshold 0`, vLLM V1's scheduler gives a running prefill the whole per-step token budget,
so a request that arrives while a long prompt prefills waits for the rest of that prefill. `--long-prefill-token-threshold
N` (N below `--max-num-batched-tokens`) caps the prefilling request's share and leaves room for others, at a cost to the
long prompt's own time. run_mixed measures both sides:

  1. "short alone": short_requests short streamed requests, one after the other, on an idle server;
  2. one long prompt of about long_tokens tokens, streamed in a thread;
  3. after during_delay_s (the long prompt is admitted and prefilling), the short requests again, one after the
     other (a canary's shape), until short_requests were sent or the long prompt's first token arrived.

When the long prompt is admitted: vLLM's API server tokenizes a prompt before the engine schedules it, which for a
long one on a busy host can take longer than during_delay_s; a short request sent before then is not "during" the
prefill at all, and its quick first token would read as no starvation. With metrics_url (the vLLM server's own base
URL, whose /metrics the API front does not pass on: on the head, http://127.0.0.1:<port>) run_mixed waits until
vllm:num_requests_running rises above what it read just before sending the long prompt (vLLM counts a request as
running from its first scheduled chunk: the real-vllm-on-device notes, Part 1b, saw it 1 -> 2 during the prefill), and
during_delay_s counts from then; long.admitted_after_s says when that was. Without metrics_url, or when /metrics cannot
be read (the report's admission_note says why), during_delay_s counts from sending the long prompt, as before.

Returned (JSON-able): long {ttft_s, e2e_s, prompt_tokens, ...}, short_alone [ttft_s ...], short_during [ttft_s ...]
(only the short requests sent before the long prompt's first token), ratios {short_during_over_alone: median during /
median alone, long_ttft_s}, the settings and any request errors.

Prompts are built from simple words, 'w<number>' (the shape of the recorder's test model, whose WordLevel tokenizer
makes one word one token); each run draws its own random words, so neither the long nor a short prompt hits the prefix
cache of an earlier run. On a real model's tokenizer a word is one token or a few, so long_tokens is approximate there:
the API reports the real count in the stream's usage chunk, recorded as long.prompt_tokens (and per short request).

Pure Python standard library plus the collection's one HTTP client (vllm_client: streaming, TLS with ca_file); no
Ansible imports.  bench.yml runs it through the vllm_bench_mixed module (-e ds4_bench_mode=mixed).
"""

from __future__ import annotations


import random
import threading
import time
from collections.abc import Callable
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import ops_status, vllm_client

COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"
WORD_MIN, WORD_MAX = 7, 31999   # the real-vLLM recorder's test vocabulary (docs/real-vllm.md: 'w7' .. 'w31999', one token each)


def prompt_words(n: int, rng: random.Random) -> str:
    """n words 'w<k>' drawn from rng (one token each with the test model's WordLevel tokenizer)."""
    return " ".join("w%d" % rng.randint(WORD_MIN, WORD_MAX) for _i in range(max(1, int(n))))


def _median(values: list[float | None]) -> float | None:
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2.0


def _round(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def _body(model: str, text: str, max_tokens: int, path: str) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": int(max_tokens), "temperature": 0, "ignore_eos": True}
    if path == CHAT:
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = text
    return body


def _summary(rec: dict[str, Any]) -> dict[str, Any]:
    """One stream record -> {ttft_s, e2e_s, prompt_tokens, completion_tokens, t_start, error} (times from t_start)."""
    t0 = rec.get("t_start")
    first, end = rec.get("t_first"), rec.get("t_end")
    return {"ttft_s": _round(first - t0) if first is not None and t0 is not None else None,
            "e2e_s": _round(end - t0) if end is not None and t0 is not None else None,
            "prompt_tokens": rec.get("prompt_tokens"), "completion_tokens": rec.get("completion_tokens"),
            "error": rec.get("error")}


def _running(metrics_url: str, timeout: float) -> int | str:
    """vllm:num_requests_running at metrics_url/metrics (an int), or why it cannot be read (a str)."""
    try:
        status, text = vllm_client.get(metrics_url, "/metrics", timeout=timeout)
    except (OSError, ValueError, vllm_client.HTTPException) as exc:
        return "GET %s/metrics: %s: %s" % (metrics_url, type(exc).__name__, exc)
    if status != 200:
        return "GET %s/metrics answered HTTP %s" % (metrics_url, status)
    value = ops_status.metrics_summary(text)["requests_running"]
    if value is None:
        return "%s/metrics has no vllm:num_requests_running" % metrics_url
    return int(value)


ADMIT_WAIT_S = 30.0   # tokenizing even a 1M-token prompt takes seconds; a longer wait means /metrics is another server's


def _wait_admitted(metrics_url: str, baseline: int | str | None, seen: threading.Event, clock: Callable[[], float],
                   t_sent: float, timeout_s: float = ADMIT_WAIT_S, poll_s: float = 0.05) -> tuple[float | None, str | None]:
    """Poll metrics_url until more requests run than baseline: (seconds after t_sent, None), or (None, why not)."""
    if not isinstance(baseline, int):
        return None, baseline
    while True:
        if seen.is_set():
            return None, "the long prompt's first token (or its end) came before it was seen running"
        now = _running(metrics_url, 5.0)
        if not isinstance(now, int):
            return None, now
        if now > baseline:
            return round(clock() - t_sent, 4), None
        if clock() - t_sent > timeout_s:
            return None, "vllm:num_requests_running stayed at %d for %s s" % (now, timeout_s)
        seen.wait(poll_s)


class _FirstLineClock(object):
    """A clock for stream_chat that also says when the stream's first line (or its end) came: stream_chat calls it once
    at the start, then once per received line, then at the end. vLLM sends a stream's first line with its first
    output, after the prefill."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.calls = 0
        self.seen = threading.Event()

    def __call__(self) -> float:
        self.calls += 1
        if self.calls >= 2:
            self.seen.set()
        return self.clock()


def run_mixed(base_url: str, model: str, api_key: str | None = None, long_tokens: int = 250000, short_requests: int = 5,
              short_max_tokens: int = 8, long_max_tokens: int = 8, timeout_s: float = 1800, ca_file: str | None = None,
              short_tokens: int = 30, during_delay_s: float = 1.0, short_gap_s: float = 0.2, path: str = COMPLETIONS,
              seed: int | None = None, clock: Callable[[], float] = time.monotonic,
              stream: Callable[..., dict[str, Any]] | None = None, metrics_url: str | None = None) -> dict[str, Any]:
    """Short requests alone, then one long prompt with short requests sent while it prefills (module docstring).

    base_url: 'http[s]://host:port'; api_key: the Bearer key or None; ca_file: PEM bundle for https (else the system's
    trust store). long_tokens / short_tokens: prompt sizes in words (one token each on the test tokenizer; approximate
    elsewhere, the real count is in the result's prompt_tokens). during_delay_s: seconds between sending the long
    prompt and the first short one (the long one must be prefilling by then; Part 1b used 3 s at budget 256 and 1 s at
    8192). short_gap_s: pause between short requests. timeout_s: limit of each request (the long one's whole prefill
    included). path: /v1/completions (default: the prompt is exactly the words) or /v1/chat/completions. stream: the
    streaming function (default vllm_client.stream_chat; a test may pass its own with the same signature). metrics_url:
    the vLLM server's own base URL, to see the long prompt admitted before during_delay_s starts (module docstring)."""
    if int(long_tokens) < 1 or int(short_requests) < 1 or int(short_tokens) < 1:
        raise ValueError("long_tokens, short_requests and short_tokens must be >= 1 (got %r, %r, %r)"
                         % (long_tokens, short_requests, short_tokens))
    if int(short_max_tokens) < 1 or int(long_max_tokens) < 1:
        raise ValueError("short_max_tokens and long_max_tokens must be >= 1 (got %r, %r)" % (short_max_tokens, long_max_tokens))
    stream = stream or vllm_client.stream_chat
    seed = random.SystemRandom().randint(0, 2 ** 31) if seed is None else seed
    rng = random.Random(seed)
    errors: list[str] = []
    streamer = stream  # not None from here on (send() closes over it)

    def send(text: str, max_tokens: int, clk: Callable[[], float] = clock) -> dict[str, Any]:
        return streamer(base_url, _body(model, text, max_tokens, path), api_key=api_key, timeout=float(timeout_s),
                        clock=clk, path=path, ca_file=ca_file)

    alone: list[dict[str, Any]] = []
    for i in range(int(short_requests)):
        rec = send(prompt_words(short_tokens, rng), short_max_tokens)
        s = _summary(rec)
        alone.append(s)
        if s["error"]:
            errors.append("short alone #%d: %s" % (i + 1, s["error"]))
        if short_gap_s and i + 1 < int(short_requests):
            time.sleep(short_gap_s)

    long_text = prompt_words(long_tokens, rng)
    short_texts = [prompt_words(short_tokens, rng) for _i in range(int(short_requests))]
    long_clock = _FirstLineClock(clock)
    box: dict[str, dict[str, Any]] = {}

    def long_worker() -> None:
        try:
            box["rec"] = send(long_text, long_max_tokens, long_clock)
        except Exception as exc:  # pylint: disable=broad-except
            box["rec"] = dict(vllm_client.new_record(), error="%s: %s" % (type(exc).__name__, exc))
        finally:
            long_clock.seen.set()

    th = threading.Thread(target=long_worker, name="bench-mixed-long")
    th.daemon = True
    baseline = _running(metrics_url, 5.0) if metrics_url else None
    t_sent = clock()
    th.start()
    admitted_after, admission_note = None, None
    if metrics_url:
        admitted_after, admission_note = _wait_admitted(metrics_url, baseline, long_clock.seen, clock, t_sent,
                                                        min(float(timeout_s), ADMIT_WAIT_S))
    sent: list[dict[str, Any]] = []
    if not long_clock.seen.wait(float(during_delay_s)):
        for text in short_texts:
            if long_clock.seen.is_set():
                break
            sent.append(send(text, short_max_tokens))
            if short_gap_s and long_clock.seen.wait(short_gap_s):
                break
    th.join(float(timeout_s) + 30.0)
    lrec = box.get("rec") or dict(vllm_client.new_record(), error="the long request did not end within %s s" % timeout_s)
    long_sum = _summary(lrec)
    long_sum["requested_tokens"] = int(long_tokens)
    long_sum["max_tokens"] = int(long_max_tokens)
    long_sum["admitted_after_s"] = admitted_after
    if long_sum["error"]:
        errors.append("long: %s" % long_sum["error"])
    t_long_first = lrec.get("t_first")
    during: list[dict[str, Any]] = []
    after = 0
    for i, rec in enumerate(sent):
        s = _summary(rec)
        if t_long_first is not None and rec.get("t_start") is not None and rec["t_start"] >= t_long_first:
            after += 1
            continue
        # from t_sent, as admitted_after_s: the long record's own t_start comes later, when its thread runs
        s["sent_after_long_s"] = _round(rec["t_start"] - t_sent) if rec.get("t_start") is not None else None
        during.append(s)
        if s["error"]:
            errors.append("short during #%d: %s" % (i + 1, s["error"]))
    med_alone = _median([s["ttft_s"] for s in alone if not s["error"]])
    med_during = _median([s["ttft_s"] for s in during if not s["error"]])
    ratio = (med_during / med_alone) if (med_alone and med_during is not None) else None
    return {
        "settings": {"base_url": base_url, "model": model, "long_tokens": int(long_tokens),
                     "short_requests": int(short_requests), "short_tokens": int(short_tokens),
                     "short_max_tokens": int(short_max_tokens), "long_max_tokens": int(long_max_tokens),
                     "during_delay_s": during_delay_s, "short_gap_s": short_gap_s, "timeout_s": timeout_s,
                     "path": path, "seed": seed, "tls_ca_file": ca_file, "metrics_url": metrics_url},
        "long": long_sum,
        "short_alone": alone,
        "short_during": during,
        "short_sent_after_long_first_token": after,
        "medians": {"short_alone_ttft_s": _round(med_alone), "short_during_ttft_s": _round(med_during)},
        "ratios": {"short_during_over_alone": _round(ratio, 2), "long_ttft_s": long_sum["ttft_s"]},
        "admission_note": admission_note,
        "errors": errors,
    }


def summary_line(report: dict[str, Any]) -> str:
    """One line with both figures (the playbook prints it)."""
    med, lg = report["medians"], report["long"]
    fmt = ("short request TTFT alone %s s, during a %s-token prefill %s s (%s x, %d sent during it); long prompt TTFT %s s, "
           "end to end %s s; %d error(s)")
    return fmt % (med.get("short_alone_ttft_s"), lg.get("prompt_tokens"), med.get("short_during_ttft_s"),
                  report["ratios"].get("short_during_over_alone"), len(report["short_during"]),
                  lg.get("ttft_s"), lg.get("e2e_s"), len(report["errors"]))


def markdown_report(report: dict[str, Any], profile: str | None = None, threshold: Any = None) -> str:
    """The result as a short markdown document (both figures, then one row per request). profile / threshold default to
    the report's own (the vllm_bench_mixed module adds them)."""
    profile = profile if profile is not None else report.get("profile")
    threshold = threshold if threshold is not None else report.get("threshold")
    lg, med, rt = report["long"], report["medians"], report["ratios"]
    lines = ["# Mixed bench%s" % (" — %s" % profile if profile else ""), "",
             "A short request's time to first token while one long prompt prefills (docs/profiles.md, "
             "\"Interactive during long prompts\"). `--long-prefill-token-threshold` as configured: %s." % (
                 threshold if threshold else "off (0, vLLM's default)"), "",
             "| figure | value |", "|---|---|",
             "| long prompt: tokens (usage) | %s |" % lg.get("prompt_tokens"),
             "| long prompt: time to first token | %s s |" % lg.get("ttft_s"),
             "| long prompt: end to end | %s s |" % lg.get("e2e_s"),
             "| long prompt: seen running after | %s |" % (
                 "%s s" % lg["admitted_after_s"] if lg.get("admitted_after_s") is not None
                 else "not seen (%s)" % (report.get("admission_note") or "no metrics_url: the short requests waited "
                                         "during_delay_s from sending it")),
             "| short alone: median TTFT | %s s |" % med.get("short_alone_ttft_s"),
             "| short during the long prefill: median TTFT (%d sent) | %s s |" % (len(report["short_during"]),
                                                                                  med.get("short_during_ttft_s")),
             "| ratio during / alone | %s |" % rt.get("short_during_over_alone"),
             ""]
    lines += ["| request | sent after the long one | TTFT | error |", "|---|---|---|---|"]
    for i, s in enumerate(report["short_alone"]):
        lines.append("| short alone #%d | - | %s s | %s |" % (i + 1, s["ttft_s"], s["error"] or ""))
    for i, s in enumerate(report["short_during"]):
        lines.append("| short during #%d | %s s | %s s | %s |" % (i + 1, s.get("sent_after_long_s"), s["ttft_s"], s["error"] or ""))
    if report["errors"]:
        lines += ["", "Errors: " + "; ".join(report["errors"])]
    return "\n".join(lines) + "\n"
