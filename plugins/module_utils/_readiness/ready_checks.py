# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One readiness check of a rank on its node: what dgxspark.ds4.vllm_ready's module returns, written once.

The module (plugins/modules/vllm_ready.py) calls ``checks`` with its validated options and its ``run_command``; its
action (plugins/action/vllm_ready.py) runs the same function without a module upload where it can (converge_state's
direct run: this file's source, the collection files it imports, the options with the module's defaults, through the
connection to the node's Python; ``node_probe.run_command`` as ``run``). Pure Python standard library.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.node_probe import Runner, run_command
from ansible_collections.dgxspark.ds4.plugins.module_utils._readiness.readiness_http import http_checks


def poll(run: Runner, unit: str, container_name: str | None, docker_cli: str, cursor: str, max_lines: int):
    """One poll of this rank through the node probe: (status, lines, cursor)."""
    status = node_probe.unit_state(node_probe.probe_unit(run, unit, node_probe.READY_UNIT_PROPS, "unix").value, unit)
    if container_name:
        status["container"] = node_probe.probe_container(run, container_name, docker_cli).value
    lines, cursor = node_probe.probe_journal(run, unit, cursor, status.get("since"), max_lines).value
    return status, lines, cursor


def checks(p: Mapping[str, Any], run: Runner = run_command, check_mode: bool = False) -> dict[str, Any]:
    """The module's result for its options p (every option present, the module's defaults filled): the unit, the
    container and the journal (or, with status false, only the journal after p['cursor']), then the API port and, with
    checks, the HTTP checks (health, models, a real completion). The caller refuses a missing unit, and status false
    without a cursor, first. Check mode is the caller's (nothing is polled)."""
    del check_mode  # the module and the action answer check mode themselves, before this runs
    if p.get("poll"):
        # the action's poll (node_probe.poll_command), run here: its output goes back as it is (the action parses it as
        # it parses its own polls) and the HTTP checks follow it when it found the API port open
        rc, out, err = run(["/bin/sh", "-c", p["poll"]])
        result = dict(changed=False, poll=dict(rc=rc, stdout=out, stderr=err))
        if p["checks"] and p["api_port"] and node_probe.parse_poll(out, p["unit"]).get("api_port") == "open":
            result["http"] = _http(p)
        return result
    if p["status"]:
        status, lines, cursor = poll(run, p["unit"], p["container_name"], p["docker_cli"], p["cursor"], p["max_lines"])
    else:
        status = {}
        lines, cursor = node_probe.probe_journal(run, p["unit"], p["cursor"], None, p["max_lines"]).value
    result = dict(changed=False, status=status, lines=lines, cursor=cursor)
    if p["api_port"]:
        host = node_probe.probe_host(p["api_host"])
        result["api_port"] = node_probe.tcp_state(host, p["api_port"])
        if p["checks"] and result["api_port"] == "open":
            result["http"] = _http(p)
    return result


def _http(p: Mapping[str, Any]) -> dict[str, Any]:
    """The HTTP checks (health, models, a real completion) of the API port of p."""
    return http_checks(node_probe.probe_host(p["api_host"]), p["api_port"], api_key=p["api_key"],
                       served_name=p["served_model_name"], max_model_len=p["max_model_len"], thinking=bool(p["thinking"]),
                       timeout=p["chat_timeout"])
