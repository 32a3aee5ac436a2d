# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's one HTTP client: a minimal OpenAI-compatible client for readiness (vllm_ready), status
(vllm_status), validate.yml and bench.yml.

Pure Python standard library (http.client, threading); no Ansible imports.  Requests go straight to the
endpoint (no proxy from the environment is used).

  base_url(host, port) -> 'http://host:port' ('[::1]' for an IPv6 address)
  get(base_url, path, api_key=None, timeout=10) -> (status, text)
  post(base_url, path, body, api_key=None, timeout=120) -> (status, text)   connection errors raise
  post_json(base_url, path, body, api_key=None, timeout=120) -> (status, obj_or_text, seconds)
  stream_chat(base_url, body, api_key=None, timeout=600, clock=time.monotonic, path=..., ca_file=None) -> record
  run_concurrent(fn, args_list) -> [result, ...]   all calls released together (barrier)

A stream record is what bench_stats.summarize_level expects (vllm-ops.md section 4.5):
  t_start (request sent), t_first / t_last (first / last chunk that carries generated text:
  content, reasoning or tool-call arguments), completion_tokens / prompt_tokens (from the final
  `usage` chunk, requested with stream_options.include_usage; never from counting chunks), error
  (None or a short text), plus content, reasoning, tool_calls, finish_reason, text_chunks, status.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

try:  # Python 3
    from http.client import HTTPConnection, HTTPResponse, HTTPSConnection, HTTPException
    from urllib.parse import urlsplit
except ImportError:  # pragma: no cover  (Python 2 is not supported by the collection)
    from httplib import HTTPConnection, HTTPResponse, HTTPSConnection, HTTPException  # type: ignore
    from urlparse import urlsplit  # type: ignore

USER_AGENT = "dgxspark.ds4-ops/1"


def _headers(api_key: str | None, json_body: bool = False) -> dict[str, str]:
    h = {"User-Agent": USER_AGENT}
    if json_body:
        h["Content-Type"] = "application/json"
    if api_key:
        h["Authorization"] = "Bearer %s" % api_key
    return h


def _connect(base_url: str, timeout: float, ca_file: str | None = None) -> tuple[HTTPConnection, str]:
    """A connection straight to the endpoint (http.client: no proxy from the environment is used).  https verifies
    the server against ca_file (a PEM bundle) when given, else against the system's trust store."""
    u = urlsplit(base_url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError("bad endpoint URL %r (http[s]://host[:port])" % base_url)
    if u.scheme == "https":
        ctx = ssl.create_default_context(cafile=ca_file) if ca_file else None
        return HTTPSConnection(u.hostname, u.port or 443, timeout=timeout, context=ctx), u.path.rstrip("/")
    return HTTPConnection(u.hostname, u.port or 80, timeout=timeout), u.path.rstrip("/")


def _error_text(status: object, body: str) -> str:
    try:
        obj = json.loads(body)
        err = obj.get("error") if isinstance(obj, dict) else None
        if isinstance(err, dict):
            body = err.get("message") or body
        elif err:
            body = str(err)
    except ValueError:
        pass
    return "HTTP %s: %s" % (status, body[:300])


def _request(base_url: str, method: str, path: str, body: Any = None, api_key: str | None = None, timeout: float = 10.0,
             ca_file: str | None = None) -> tuple[HTTPConnection, HTTPResponse]:
    """(connection, response) for one request; the caller reads and closes."""
    conn, prefix = _connect(base_url, timeout, ca_file)
    data = None if body is None else json.dumps(body).encode("utf-8")
    try:
        conn.request(method, prefix + path, body=data, headers=_headers(api_key, data is not None))
        return conn, conn.getresponse()
    except Exception:
        conn.close()
        raise


def base_url(host: object, port: int | str, scheme: str = "http") -> str:
    """The base URL of host:port (an IPv6 address in brackets)."""
    host = str(host)
    if ":" in host and not host.startswith("["):
        host = "[%s]" % host
    return "%s://%s:%d" % (scheme, host, int(port))


def get(base_url: str, path: str, api_key: str | None = None, timeout: float = 10.0) -> tuple[int, str]:
    """GET; returns (status, text).  Connection errors raise (OSError / HTTPException)."""
    conn, resp = _request(base_url, "GET", path, api_key=api_key, timeout=timeout)
    try:
        return resp.status, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


def post(base_url: str, path: str, body: Any, api_key: str | None = None, timeout: float = 120.0) -> tuple[int, str]:
    """POST a JSON body; returns (status, text).  Connection errors and timeouts raise (OSError / HTTPException)."""
    conn, resp = _request(base_url, "POST", path, body=body, api_key=api_key, timeout=timeout)
    try:
        return resp.status, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


def post_json(base_url: str, path: str, body: Any, api_key: str | None = None,
              timeout: float = 120.0) -> tuple[int | None, Any, float]:
    """POST a JSON body; returns (status, parsed JSON or text, seconds).  HTTP errors do not raise;
    connection errors and timeouts return status None and the error text."""
    t0 = time.monotonic()
    try:
        conn, resp = _request(base_url, "POST", path, body=body, api_key=api_key, timeout=timeout)
        try:
            raw = resp.read().decode("utf-8", "replace")
            status = resp.status
        finally:
            conn.close()
    except (socket.timeout, OSError, HTTPException, ValueError) as exc:
        return None, "%s: %s" % (type(exc).__name__, exc), time.monotonic() - t0
    if status != 200:
        return status, _error_text(status, raw), time.monotonic() - t0
    try:
        return status, json.loads(raw), time.monotonic() - t0
    except ValueError:
        return status, raw, time.monotonic() - t0


def _merge_tool_calls(acc: dict[int, dict[str, Any]], deltas: list[dict[str, Any]] | None) -> None:
    for d in deltas or []:
        idx = d.get("index", 0)
        cur = acc.setdefault(idx, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
        if d.get("id"):
            cur["id"] = d["id"]
        fn = d.get("function") or {}
        if fn.get("name"):
            cur["function"]["name"] += fn["name"]
        if fn.get("arguments"):
            cur["function"]["arguments"] += fn["arguments"]


def parse_sse_line(line: str) -> tuple[str | None, Any]:
    """One SSE line -> ('data', obj) | ('done', None) | (None, None)."""
    line = line.strip()
    if not line.startswith("data:"):
        return None, None
    payload = line[5:].strip()
    if payload == "[DONE]":
        return "done", None
    try:
        return "data", json.loads(payload)
    except ValueError:
        return None, None


def new_record() -> dict[str, Any]:
    return {"t_start": None, "t_first": None, "t_last": None, "t_end": None, "completion_tokens": None,
            "prompt_tokens": None, "reasoning_tokens": None, "error": None, "status": None, "content": "",
            "reasoning": "", "tool_calls": [], "finish_reason": None, "text_chunks": 0}


def consume_event(rec: dict[str, Any], obj: Mapping[str, Any], now: float, tools: dict[int, dict[str, Any]]) -> None:
    """Fold one parsed chunk into the record (pure; used by stream_chat and the unit tests)."""
    usage = obj.get("usage")
    if usage:
        rec["completion_tokens"] = usage.get("completion_tokens")
        rec["prompt_tokens"] = usage.get("prompt_tokens")
        details = usage.get("completion_tokens_details") or {}
        rec["reasoning_tokens"] = details.get("reasoning_tokens")
    for choice in obj.get("choices") or []:
        delta = choice.get("delta")
        if delta is None:  # /v1/completions stream
            delta = {"content": choice.get("text")}
        text = False
        if delta.get("content"):
            rec["content"] += delta["content"]
            text = True
        reasoning = delta.get("reasoning") or delta.get("reasoning_content")
        if reasoning:
            rec["reasoning"] += reasoning
            text = True
        if delta.get("tool_calls"):
            _merge_tool_calls(tools, delta["tool_calls"])
            text = True
        if text:
            rec["text_chunks"] += 1
            if rec["t_first"] is None:
                rec["t_first"] = now
            rec["t_last"] = now
        if choice.get("finish_reason"):
            rec["finish_reason"] = choice["finish_reason"]


def stream_chat(base_url: str, body: Mapping[str, Any], api_key: str | None = None, timeout: float = 600.0,
                clock: Callable[[], float] = time.monotonic, path: str = "/v1/chat/completions",
                ca_file: str | None = None) -> dict[str, Any]:
    """Send one streamed request and time its chunks (see the module docstring)."""
    body = dict(body)
    body["stream"] = True
    opts = dict(body.get("stream_options") or {})
    opts["include_usage"] = True
    body["stream_options"] = opts
    rec = new_record()
    tools: dict[int, dict[str, Any]] = {}
    rec["t_start"] = clock()
    try:
        conn, resp = _request(base_url, "POST", path, body=body, api_key=api_key, timeout=timeout, ca_file=ca_file)
    except (socket.timeout, OSError, HTTPException, ValueError) as exc:
        rec["error"] = "%s: %s" % (type(exc).__name__, exc)
        rec["t_end"] = clock()
        return rec
    if resp.status != 200:
        rec["status"] = resp.status
        try:
            rec["error"] = _error_text(resp.status, resp.read().decode("utf-8", "replace"))
        finally:
            conn.close()
        rec["t_end"] = clock()
        return rec
    rec["status"] = resp.status
    done = False
    try:
        done = fold_stream(rec, timed_lines(resp, clock), tools)
    except (socket.timeout, OSError, HTTPException, ValueError) as exc:
        rec["error"] = "stream interrupted: %s: %s" % (type(exc).__name__, exc)
    finally:
        conn.close()
    rec["t_end"] = clock()
    finish_record(rec, done, tools)
    return rec


def timed_lines(resp: HTTPResponse, clock: Callable[[], float] = time.monotonic) -> Iterator[tuple[float, str]]:
    """(clock() when the line arrived, line text) for each line of a streamed response, until EOF."""
    while True:
        raw = resp.readline()
        if not raw:
            return
        yield clock(), raw.decode("utf-8", "replace")


def fold_stream(rec: dict[str, Any], lines: Iterable[tuple[float, str]], tools: dict[int, dict[str, Any]]) -> bool:
    """Fold (time, SSE line) pairs into the record until [DONE] or an in-band error; True if [DONE] came.
    Pure: stream_chat uses it on the live response, a recorded stream is replayed through it."""
    for now, line in lines:
        kind, obj = parse_sse_line(line)
        if kind == "done":
            return True
        if kind == "data":
            if obj.get("error"):
                err = obj["error"]
                rec["error"] = "stream error: %s" % (err.get("message") if isinstance(err, dict) else err)
                return False
            consume_event(rec, obj, now, tools)
    return False


def finish_record(rec: dict[str, Any], done: bool, tools: Mapping[int, dict[str, Any]]) -> None:
    """The record's last fields once the stream ended (tool calls in index order, the error of a cut stream)."""
    rec["tool_calls"] = [tools[k] for k in sorted(tools)]
    if rec["error"] is None:
        if not done:
            rec["error"] = "stream ended without [DONE]"
        elif rec["completion_tokens"] is None:
            rec["error"] = "no usage chunk (stream_options.include_usage ignored by the server)"


def run_concurrent(fn: Callable[..., Any], args_list: Sequence[Sequence[Any]], start_timeout: float = 30.0) -> list[Any]:
    """Run fn(*args) for every args tuple in its own thread, all released at once; results in order.
    An exception in fn becomes {'error': 'ExcType: text'}."""
    n = len(args_list)
    results: list[Any] = [None] * n
    if n == 0:
        return results
    barrier = threading.Barrier(n)

    def worker(i: int, args: Sequence[Any]) -> None:
        try:
            barrier.wait(start_timeout)
            results[i] = fn(*args)
        except Exception as exc:  # pylint: disable=broad-except
            results[i] = {"error": "%s: %s" % (type(exc).__name__, exc)}

    threads = [threading.Thread(target=worker, args=(i, a)) for i, a in enumerate(args_list)]
    for t in threads:
        t.daemon = True
        t.start()
    for t in threads:
        t.join()
    return results
