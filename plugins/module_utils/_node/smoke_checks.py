# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Smoke checks for validate.yml (seed 003's gates, docs/sources.md: direct prompts clean, concurrent
prompts clean; garble = CJK drift, loops, leaked template/tool tokens, empty replies).

Pure Python (no Ansible imports).  Garble detection is garble.check_reply's (not re-implemented here).

A failure is {'request': name, 'check': name, 'excerpt': str, 'detail': str}.

  check_deterministic(name, response, expected) -> [failure]
  check_tool_call(name, response, tool) -> [failure]
  check_reasoning(name, response) -> [failure]
  check_garble(name, response, **thresholds) -> [failure]
  run_validate(base_url, model, ...) -> {'ok', 'failures', 'requests', 'model_seconds', 'summary'}
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import garble
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import vllm_client

DETERMINISTIC_PROMPT = "What is 2+2? Answer with one word."
DETERMINISTIC_EXPECTED = ("four", "4")
TOOL: dict[str, Any] = {"type": "function", "function": {
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string", "description": "City name"},
                                  "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                   "required": ["city"]}}}
TOOL_PROMPT = "What is the weather in Paris right now? Use the tool."
# English prompts for the concurrent garble gate (seed 003: "five longer English prompts").
GARBLE_PROMPTS = (
    "Explain in a short paragraph why the sky is blue.",
    "Describe how a bicycle gear system works, in plain English.",
    "Give three practical tips for writing clear technical documentation.",
    "Summarize the water cycle for a ten-year-old.",
    "Explain what a hash table is and when to use one.",
    "Write a short paragraph about the history of the printing press.",
)
DEFAULT_LEVELS = (1, 2, 4, 6)   # seed 003: 2/4/6 concurrent direct prompts (+1)
EXCERPT = 80


def _excerpt(text: object, width: int = EXCERPT) -> str:
    text = "" if text is None else str(text)
    text = text.replace("\n", "\\n")
    return text if len(text) <= width else text[:width] + "..."


def _failure(request: str, check: str, excerpt: object, detail: str) -> dict[str, Any]:
    return {"request": request, "check": check, "excerpt": _excerpt(excerpt), "detail": detail}


def _message(response: Any) -> tuple[Any, Any, str | None]:
    """(message dict, finish_reason, error) from a non-streamed chat completion response."""
    if not isinstance(response, dict):
        return None, None, "not a JSON object: %s" % _excerpt(response)
    choices = response.get("choices") or []
    if not choices:
        return None, None, "no choices in the response"
    ch = choices[0]
    return ch.get("message") or {}, ch.get("finish_reason"), None


def _http_failure(name: str, status: int | None, response: Any) -> list[dict[str, Any]]:
    if status == 200:
        return []
    return [_failure(name, "http", response if not isinstance(response, dict) else json.dumps(response),
                     "HTTP %s" % status if status else "no HTTP answer")]


def normalise_answer(text: str | None) -> str:
    return re.sub(r"[^\w]+", " ", (text or "").lower()).strip()


def check_deterministic(name: str, response: Any, expected: Sequence[str] = DETERMINISTIC_EXPECTED) -> list[dict[str, Any]]:
    msg, _finish, err = _message(response)
    if err:
        return [_failure(name, "deterministic_answer", "", err)]
    content = msg.get("content") or ""
    got = normalise_answer(content)
    wanted = [normalise_answer(e) for e in expected]
    if got in wanted:
        return []
    return [_failure(name, "deterministic_answer", content, "expected %s at temperature 0, got %r"
                     % (" or ".join(repr(e) for e in expected), content[:40]))]


def check_tool_call(name: str, response: Any, tool: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    tool = tool or TOOL
    fn = tool["function"]
    msg, finish, err = _message(response)
    if err:
        return [_failure(name, "tool_call", "", err)]
    calls = msg.get("tool_calls") or []
    if not calls:
        return [_failure(name, "tool_call", msg.get("content") or "",
                         "no tool call in the reply (finish_reason %s); the content is shown" % finish)]
    out: list[dict[str, Any]] = []
    call = calls[0]
    f = call.get("function") or {}
    if f.get("name") != fn["name"]:
        out.append(_failure(name, "tool_call_name", f.get("name"), "called %r, expected %r" % (f.get("name"), fn["name"])))
    raw = f.get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as exc:
        return out + [_failure(name, "tool_call_arguments", raw, "arguments are not valid JSON: %s" % exc)]
    if not isinstance(args, dict):
        return out + [_failure(name, "tool_call_arguments", raw, "arguments are not a JSON object")]
    props = (fn.get("parameters") or {}).get("properties") or {}
    missing = [k for k in (fn.get("parameters") or {}).get("required") or [] if k not in args]
    if missing:
        out.append(_failure(name, "tool_call_arguments", raw, "required argument(s) missing: %s" % ", ".join(missing)))
    unknown = [k for k in args if props and k not in props]
    if unknown:
        out.append(_failure(name, "tool_call_arguments", raw, "argument(s) not in the schema: %s" % ", ".join(unknown)))
    for k, schema in props.items():
        if k in args and schema.get("enum") and args[k] not in schema["enum"]:
            out.append(_failure(name, "tool_call_arguments", raw, "%s=%r not in %s" % (k, args[k], schema["enum"])))
    if finish != "tool_calls":
        out.append(_failure(name, "tool_call_finish", finish, "finish_reason %r, expected 'tool_calls'" % finish))
    for leak in garble.leaked_tokens(msg.get("content") or ""):
        out.append(_failure(name, leak["check"], leak["excerpt"], leak["detail"]))
    return out


def check_reasoning(name: str, response: Any) -> list[dict[str, Any]]:
    msg, _finish, err = _message(response)
    if err:
        return [_failure(name, "reasoning_field", "", err)]
    reasoning = msg.get("reasoning") or msg.get("reasoning_content")
    if reasoning and str(reasoning).strip():
        return []
    content = msg.get("content") or ""
    hint = " (a '</think>' in the content: no --reasoning-parser)" if "</think>" in content else ""
    return [_failure(name, "reasoning_field", content, "thinking is on but the reply has no reasoning field%s" % hint)]


def check_garble(name: str, response: Any, **thresholds: Any) -> list[dict[str, Any]]:
    msg, _finish, err = _message(response)
    if err:
        return [_failure(name, "garble", "", err)]
    out: list[dict[str, Any]] = []
    for f in garble.check_reply(msg.get("content"), **thresholds):
        out.append(_failure(name, f["check"], f["excerpt"], f["detail"]))
    reasoning = msg.get("reasoning") or msg.get("reasoning_content")
    if reasoning:
        for f in garble.check_reply(reasoning, **thresholds):
            if f["check"] != "empty_reply":
                out.append(_failure(name, "reasoning:" + f["check"], f["excerpt"], f["detail"]))
    return out


def _body(model: str, prompt: str, max_tokens: int, thinking: bool | None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": prompt}],
                            "max_tokens": int(max_tokens), "temperature": 0.0}
    if thinking is not None:
        body["chat_template_kwargs"] = {"thinking": bool(thinking), "enable_thinking": bool(thinking)}
    body.update(extra)
    return body


def run_garble_levels(base_url: str, model: str, api_key: str | None = None, levels: Iterable[int] = DEFAULT_LEVELS,
                      max_tokens: int = 200, timeout: float = 300.0, prompts: Sequence[str] = GARBLE_PROMPTS,
                      thresholds: Mapping[str, Any] | None = None,
                      post: Callable[..., tuple[int | None, Any, float]] | None = None) -> dict[str, Any]:
    """For each of levels, that many English prompts at once (thinking off: the reply budget goes to content), every
    reply through the garble checks -> {'failures', 'requests'}. post: vllm_client.post_json (tests pass a fake)."""
    post = post or vllm_client.post_json
    thresholds = thresholds or {}
    failures: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []
    for n in levels:
        n = int(n)
        args: list[tuple[str, dict[str, Any]]] = []
        for i in range(n):
            args.append(("c%d-r%d" % (n, i + 1), _body(model, prompts[i % len(prompts)], max_tokens, False)))
        results = vllm_client.run_concurrent(
            lambda nm, b: (nm,) + tuple(post(base_url, "/v1/chat/completions", b, api_key, timeout)), args)
        for (nm, _b), res in zip(args, results):
            if isinstance(res, dict):  # the thread raised
                fails = [_failure(nm, "http", res.get("error"), "request failed")]
                status, resp, secs = None, res.get("error"), 0.0
            else:
                _nm, status, resp, secs = res
                fails = _http_failure(nm, status, resp) or check_garble(nm, resp, **thresholds)
            msg = _message(resp)[0] if status == 200 else None
            requests.append({"request": nm, "status": status, "seconds": round(secs, 3),
                             "content": _excerpt((msg or {}).get("content") or "", 120), "failures": len(fails)})
            failures.extend(fails)
    return {"failures": failures, "requests": requests}


def run_validate(base_url: str, model: str, api_key: str | None = None, thinking: bool = False,
                 levels: Iterable[int] = DEFAULT_LEVELS, tool_choice: Any = "auto", max_tokens: int = 200,
                 deterministic_max_tokens: int | None = None, timeout: float = 300.0,
                 prompts: Sequence[str] = GARBLE_PROMPTS, thresholds: Mapping[str, Any] | None = None,
                 tools_check: bool = True) -> dict[str, Any]:
    """Deterministic prompt (+ reasoning when thinking is on), tool call, then N concurrent prompts per level."""
    thresholds = thresholds or {}
    failures: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []
    started = time.monotonic()

    def record(name: str, status: int | None, response: Any, seconds: float, fails: list[dict[str, Any]]) -> None:
        msg = _message(response)[0] if status == 200 else None
        requests.append({"request": name, "status": status, "seconds": round(seconds, 3),
                         "content": _excerpt((msg or {}).get("content") or "", 120),
                         "failures": len(fails)})
        failures.extend(fails)

    # 1. deterministic answer at temperature 0 (thinking as deployed: the reasoning field is checked too)
    name = "deterministic"
    det_tokens = deterministic_max_tokens or (1024 if thinking else 32)
    status, resp, secs = vllm_client.post_json(base_url, "/v1/chat/completions",
                                               _body(model, DETERMINISTIC_PROMPT, det_tokens, thinking), api_key, timeout)
    fails = _http_failure(name, status, resp)
    if not fails:
        fails = check_deterministic(name, resp) + check_garble(name, resp, **thresholds)
        if thinking:
            fails += check_reasoning(name, resp)
    record(name, status, resp, secs, fails)

    # 2. tool call with valid JSON arguments
    if tools_check:
        name = "tool_call"
        body = _body(model, TOOL_PROMPT, 512 if thinking else 128, thinking, tools=[TOOL], tool_choice=tool_choice)
        status, resp, secs = vllm_client.post_json(base_url, "/v1/chat/completions", body, api_key, timeout)
        fails = _http_failure(name, status, resp) or check_tool_call(name, resp)
        record(name, status, resp, secs, fails)

    # 3. concurrent English prompts, thinking off (the reply budget goes to content), garble checks
    sweep = run_garble_levels(base_url, model, api_key, levels, max_tokens, timeout, prompts, thresholds)
    requests.extend(sweep["requests"])
    failures.extend(sweep["failures"])

    # the wall of the requests one after the other (each level's at once): the time spent waiting on the model's
    # answers, which the converge benchmark tells apart from the orchestration around it
    model_seconds = round(time.monotonic() - started, 2)
    return {"ok": not failures, "failures": failures, "requests": requests, "model_seconds": model_seconds,
            "summary": "%d request(s), %d failure(s); %.2f s waiting on the model%s" % (
                len(requests), len(failures), model_seconds,
                (": " + "; ".join("%s %s: %s" % (f["request"], f["check"], f["excerpt"]) for f in failures[:10]))
                if failures else "")}
