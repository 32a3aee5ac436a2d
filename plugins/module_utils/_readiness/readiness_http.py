# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness HTTP checks: what the head must answer before the pair counts as ready (``/health`` 200,
``/v1/models`` with the served model name and ``max_model_len``, a real chat completion).

Pure Python (no Ansible imports); every request goes through ``vllm_client`` (the collection's one HTTP client).
Used by the module ``dgxspark.ds4.vllm_ready`` (run on the head node itself).
"""

from __future__ import annotations


import json
import time
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import vllm_client


def check_models(status: int, text: str, served_name: str | None, max_model_len: Any) -> list[str]:
    """Problems with a /v1/models answer (list of str; [] = fine)."""
    if status == 401:
        return ["/v1/models answered 401 Unauthorized: the API key given does not match the server's --api-key / VLLM_API_KEY"]
    if status != 200:
        return ["/v1/models answered HTTP %s: %s" % (status, text[:200])]
    try:
        data = json.loads(text)["data"]
    except (ValueError, KeyError, TypeError):
        return ["/v1/models answer is not a model list: %s" % text[:200]]
    ids = [d.get("id") for d in data]
    problems: list[str] = []
    card = [d for d in data if d.get("id") == served_name] if served_name else data[:1]
    if not card:
        problems.append("served model name %r not in /v1/models %r" % (served_name, ids))
    elif max_model_len is not None and int(card[0].get("max_model_len") or -1) != int(max_model_len):
        problems.append("max_model_len %s != expected %s" % (card[0].get("max_model_len"), max_model_len))
    return problems


def check_chat(status: int, text: str, thinking: bool) -> tuple[list[str], str | None, str | None]:
    """Problems with a /v1/chat/completions answer; returns (problems, content, reasoning)."""
    if status != 200:
        return ["chat completion answered HTTP %s: %s" % (status, text[:200])], None, None
    try:
        msg = json.loads(text)["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return ["chat completion answer has no choices[0].message: %s" % text[:200]], None, None
    content = msg.get("content") or ""
    reasoning = msg.get("reasoning") or msg.get("reasoning_content")
    problems: list[str] = []
    if not content.strip():
        problems.append("chat completion returned empty content")
    if thinking and not reasoning:
        problems.append("thinking is on but the reply has no reasoning field (is --reasoning-parser set?)")
    return problems, content, reasoning


def http_checks(host: str, port: int, api_key: str | None = None, served_name: str | None = None, max_model_len: Any = None,
                thinking: bool = False, prompt: str = "What is the capital of France? Answer with one word.",
                max_tokens: int = 64, timeout: float = 60.0) -> dict[str, Any]:
    """/health, /v1/models, a real chat completion.  Returns a dict: ok, problems, health, models, chat, timings."""
    res: dict[str, Any] = {"ok": False, "problems": [], "timings": {}}
    url = vllm_client.base_url(host, port)
    t0 = time.monotonic()
    try:
        st = vllm_client.get(url, "/health", timeout=5)[0]
    except Exception as e:  # connection reset / refused after open: still starting
        res["problems"].append("/health: %s" % e)
        return res
    res["health"] = st
    res["timings"]["health"] = round(time.monotonic() - t0, 3)
    if st != 200:
        # vLLM itself answers 200 or refuses the connection: after an engine death it kept 200 until it exited (status 0,
        # half a second later), and it never served 503 while starting (real-vllm-on-device notes, Part 1 §1, §3).
        # Another status comes from what is in front of it (the API proxy's health gate answers 503).
        res["problems"].append("/health answered %s (not vLLM's own answer: vLLM answers 200 or refuses; 503 = the pair "
                               "guard's health gate in the API proxy)" % st)
        return res
    t0 = time.monotonic()
    try:
        st, text = vllm_client.get(url, "/v1/models", api_key=api_key, timeout=10)
    except Exception as e:  # reset right after the port opened: still starting
        res["problems"].append("/v1/models: %s" % e)
        return res
    res["timings"]["models"] = round(time.monotonic() - t0, 3)
    res["models_status"] = st
    res["problems"].extend(check_models(st, text, served_name, max_model_len))
    if res["problems"]:
        return res
    body: dict[str, Any] = {"model": served_name, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens}
    if served_name is None:
        body["model"] = json.loads(text)["data"][0]["id"]
    t0 = time.monotonic()
    try:
        st, text = vllm_client.post(url, "/v1/chat/completions", body, api_key=api_key, timeout=timeout)
    except Exception as e:
        res["problems"].append("chat completion did not finish within %.0f s (%s): port open but no tokens = hang" % (timeout, e))
        return res
    res["timings"]["chat"] = round(time.monotonic() - t0, 3)
    problems, content, reasoning = check_chat(st, text, thinking)
    res["problems"].extend(problems)
    res["chat"] = {"status": st, "content": (content or "")[:200], "reasoning": bool(reasoning)}
    res["ok"] = not res["problems"]
    return res
