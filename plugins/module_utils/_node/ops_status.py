# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""status.yml logic: one row per rank from systemctl show, docker inspect, the
deployment evidence file and (head) the endpoint and /metrics; rows rendered as one short table.

Pure Python (no Ansible imports).  The unit and container are read by the node probe (node_probe.py).

  parse_systemctl_show(text) -> {Key: value}   (node_probe.parse_unit_show)
  parse_docker_inspect(text) -> {exists, running, status, started_at, image_id, image_ref, restart_count}
                                (node_probe.parse_container_inspect)
  parse_iso8601(text) -> epoch seconds | None;  human_duration(seconds) -> '2d03h' / '1h02m' / '4m05s'
  metrics_summary(text) -> {kv_cache_usage_perc, requests_running, requests_waiting, ...}
  guard_summary(state, now) -> the pair guard's state file (pairguard-state.json) summarised: last hang, last cause
  canary_summary(state, config, now) -> the quality canary's last run from the same state file, on or off and its
                            interval from the guard's config (pairguard.json: only `canary`, `canary_interval_s`)
  read_json(path) -> a state file's content or None
  crash_summary(record) -> the boot forensics' crash-hold.json summarised (held or started anyway, cause, fix,
                            evidence, how to release); None when there is none
  build_row(node, role, unit, container, deployed, endpoint, now, guard, crash, guard_config) -> row
  format_table(rows) -> [line, ...] (table, then the "previous boot", "pair guard" and "quality canary" lines of each row)
"""

from __future__ import annotations

import calendar
import json
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import bench_stats
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe

UNIT_PROPS = ("ActiveState", "SubState", "Result", "NRestarts", "MainPID", "ExecMainStatus", "ActiveEnterTimestamp",
              "LoadState", "UnitFileState")
COLUMNS = (("node", "node"), ("role", "role"), ("unit", "unit"), ("container", "container"), ("image", "image"),
           ("profile", "profile"), ("uptime", "uptime"), ("endpoint", "endpoint"), ("kv", "KV used"),
           ("reqs", "running/waiting"))


parse_systemctl_show = node_probe.parse_unit_show
parse_docker_inspect = node_probe.parse_container_inspect


_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:?\d{2})?$")


def parse_iso8601(text: str | None) -> float | None:
    """Docker's StartedAt ('2026-11-22T19:46:01.123456789Z') -> epoch seconds; None for zero/invalid."""
    if not text or text.startswith("0001-"):
        return None
    m = _ISO.match(text.strip())
    if not m:
        return None
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    frac = float("0." + m.group(7)) if m.group(7) else 0.0
    epoch = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) + frac
    tz = m.group(8)
    if tz and tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        digits = tz[1:].replace(":", "")
        epoch -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return epoch


def human_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(max(0, seconds))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return "%dd%02dh" % (d, h)
    if h:
        return "%dh%02dm" % (h, m)
    return "%dm%02ds" % (m, s)


def metrics_summary(text: str | None) -> dict[str, Any]:
    samples = bench_stats.parse_prometheus(text or "")
    return {
        "kv_cache_usage_perc": bench_stats.metric_sum(samples, "vllm:kv_cache_usage_perc"),
        "requests_running": bench_stats.metric_sum(samples, "vllm:num_requests_running"),
        "requests_waiting": bench_stats.metric_sum(samples, "vllm:num_requests_waiting"),
        "generation_tokens_total": bench_stats.metric_sum(samples, "vllm:generation_tokens_total"),
        "vllm_series": sum(1 for s in samples if s["name"].startswith("vllm:")),
    }


def _ago(ts: object, now: float) -> str | None:
    """'3m05s ago' for an epoch time; None for none (0, null, not a number)."""
    return "%s ago" % human_duration(now - ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) and ts else None


def _number(value: object) -> float | None:
    """A float from a JSON number; None for anything else (null, a string, a bool)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def guard_summary(state: Any, now: float | None = None) -> dict[str, Any] | None:
    """The pair guard's state (roles/vllm_service/files/pairguard.py, GuardState) -> summary with a one-line text;
    None when there is no state (guard off or never ran)."""
    if not isinstance(state, dict) or not state:
        return None
    now = time.time() if now is None else now

    def ago(ts: object) -> str | None:
        return _ago(ts, now)

    out: dict[str, Any] = {
        "restarts": int(state.get("restarts_total") or 0),
        "hangs": int(state.get("hangs_total") or 0),
        "storm_stops": int(state.get("storm_stops_total") or 0),
        "restarts_by_cause": dict(state.get("restarts_by_cause") or {}),
        "last_cause": state.get("last_cause") or None,
        "last_action": state.get("last_action") or None,
        "last_why": state.get("last_why") or None,
        "last_restart_ago": ago(state.get("last_restart_at")),
        "last_hang_ago": ago(state.get("last_hang_at")),
        "last_hang_why": state.get("last_hang_why") or None,
        "last_hang_evidence": state.get("last_hang_evidence") or None,
    }
    parts = ["%d pair restarts" % out["restarts"]]
    if out["last_cause"]:
        parts[0] += " (last %s: %s%s)" % (out["last_action"] or "event", out["last_cause"],
                                          ", " + out["last_restart_ago"] if out["last_restart_ago"] else "")
    if out["hangs"]:
        evidence = (", evidence " + out["last_hang_evidence"]) if out["last_hang_evidence"] else ""
        parts.append("%d hangs (last %s%s)" % (out["hangs"], out["last_hang_ago"] or "?", evidence))
    else:
        parts.append("no hang")
    if out["storm_stops"]:
        parts.append("%d storm stops" % out["storm_stops"])
    out["memory_gates"] = int(state.get("memory_gates_total") or 0)
    out["memory_stops"] = int(state.get("memory_stops_total") or 0)
    out["last_memory_why"] = state.get("last_memory_why") or None
    if out["memory_gates"] or out["memory_stops"]:
        parts.append("memory guard: %d out of rotation, %d stops (last %s)" % (
            out["memory_gates"], out["memory_stops"], ago(state.get("last_memory_at")) or "?"))
    out["text"] = "; ".join(parts)
    return out


def _timings(ttft_s: float | None, decode_tps: float | None, labelled: bool) -> str:
    """'ttft 0.21 s, decode 49.8 tok/s' (labelled) or '0.20 s, 50.1 tok/s'; an unknown part is left out."""
    parts: list[str] = []
    if ttft_s is not None:
        parts.append("%s%.2f s" % ("ttft " if labelled else "", ttft_s))
    if decode_tps is not None:
        parts.append("%s%.1f tok/s" % ("decode " if labelled else "", decode_tps))
    return ", ".join(parts)


def canary_summary(state: Any, config: Any, now: float | None = None) -> dict[str, Any] | None:
    """The quality canary of a pair (the pair guard's state file: canary_* and last_canary_* keys; config: the guard's
    pairguard.json, of which only `canary` and `canary_interval_s` are read) -> summary with a one-line text; None when
    neither says anything (no config and no canary run: a guard without the canary)."""
    state = state if isinstance(state, dict) else {}
    config = config if isinstance(config, dict) else {}
    now = time.time() if now is None else now
    known = "canary" in config
    enabled = bool(config.get("canary")) if known else None
    interval = _number(config.get("canary_interval_s"))
    out: dict[str, Any] = {
        "enabled": enabled,
        "interval_s": interval,
        "runs": int(state.get("canary_runs_total") or 0),
        "failures": int(state.get("canary_failures_total") or 0),
        "skips": int(state.get("canary_skips_total") or 0),
        "inconclusive": int(state.get("canary_inconclusive_total") or 0),
        "last_inconclusive": state.get("last_canary_inconclusive") or None,
        "consecutive": int(state.get("canary_consecutive") or 0),
        "last_ago": _ago(state.get("last_canary_at"), now),
        "last_ok": state.get("last_canary_ok") if isinstance(state.get("last_canary_ok"), bool) else None,
        "last_why": state.get("last_canary_why") or None,
        "last_evidence": state.get("last_canary_evidence") or None,
        "ttft_s": _number(state.get("last_canary_ttft_s")),
        "decode_tps": _number(state.get("last_canary_decode_tps")),
    }
    baseline = state.get("canary_baseline") if isinstance(state.get("canary_baseline"), dict) else {}
    out["baseline_ttft_s"] = _number(baseline.get("ttft_s"))
    out["baseline_decode_tps"] = _number(baseline.get("decode_tps"))
    counts = "; %d runs, %d failed" % (out["runs"], out["failures"])
    skipped = ", %d skipped (saturated or unreachable)" % out["skips"] if out["skips"] else ""
    if out["inconclusive"]:
        skipped += ", %d inconclusive (no answer while the pair was busy: not failures)" % out["inconclusive"]
    if enabled is False:
        out["text"] = "off"
    elif out["last_ago"] is None or out["last_ok"] is None:
        if not known and not out["runs"] and not out["skips"] and not out["inconclusive"]:
            return None
        out["text"] = "no run yet%s%s" % (" (every %d s)" % interval if interval is not None else "", skipped)
    elif out["last_ok"]:
        timings = _timings(out["ttft_s"], out["decode_tps"], True)
        base = _timings(out["baseline_ttft_s"], out["baseline_decode_tps"], False)
        detail = [timings] if timings else []
        detail.append("baseline " + base if base else "no baseline yet")
        out["text"] = "last run %s: ok (%s)%s%s" % (out["last_ago"], "; ".join(detail), counts, skipped)
    else:
        out["text"] = "last run %s: FAILED (%s), %d in a row%s%s%s" % (
            out["last_ago"], out["last_why"] or "no reason recorded", out["consecutive"],
            ", evidence " + out["last_evidence"] if out["last_evidence"] else "", counts, skipped)
    return out


def read_json(path: str | None) -> Any:
    """The JSON file's content, or None when there is no path, no file or no JSON (a state file that may be absent)."""
    if not path:
        return None
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


def crash_summary(record: Any) -> dict[str, Any] | None:
    """The boot forensics' record of the incident that holds the pair (roles/vllm_service/files/forensics.py,
    crash-hold.json) -> {held, incident, text, lines}; None when there is none (nothing held or acknowledged)."""
    if not isinstance(record, dict) or not record.get("incident") or not record.get("findings"):
        return None
    findings = record["findings"]
    first = findings[0]
    state = "HELD (not started)" if record.get("held") else "started anyway (vllm_service_after_crash: start)"
    head = "previous boot crashed"
    if record.get("holding") is False:
        # the boot forensics recorded signatures that are no crash the pair would repeat (forensics.py: verdict)
        why = (record.get("verdict") or "started: not a crash the pair would repeat").split(": ", 1)[-1]
        head, state = "previous boot left signatures", "started (%s)" % why
    lines = ["%s, pair %s: incident %s, vllm_service_after_crash %s" % (
        head, state, record["incident"], record.get("after_crash") or "hold")]
    for f in findings:
        lines.append("  %s: %s (%s) [%s]" % (f.get("node"), f.get("cause"), f.get("id"), (f.get("line") or "").strip()[:160]))
    lines.append("  fix: %s" % first.get("fix"))
    if record.get("fallback_recipe"):
        lines.append("  then switch to the safer recipe: ansible-playbook playbooks/switch.yml -e ds4_profile=%s"
                     % record["fallback_recipe"])
    lines.append("  evidence: %s; release: ansible-playbook playbooks/ack.yml" % record.get("evidence"))
    return {"held": bool(record.get("held")), "incident": record["incident"], "signatures": [f.get("id") for f in findings],
            "text": lines[0], "lines": lines}


def _short_id(image_id: str | None) -> str:
    if not image_id:
        return "-"
    return image_id.split(":", 1)[-1][:12]


def build_row(node: str, role: str, unit: Mapping[str, Any], container: Mapping[str, Any],
              deployed: Mapping[str, Any] | None = None, endpoint: Mapping[str, Any] | None = None,
              now: float | None = None, guard: Any = None, crash: Any = None, guard_config: Any = None) -> dict[str, Any]:
    """unit: parse_systemctl_show dict; container: parse_docker_inspect dict; deployed: the
    deployed-<role>.json mapping or None; endpoint (head): {health, model, answer, seconds, error, metrics};
    guard (head): the pair guard's state file mapping or None; crash (head): crash-hold.json mapping or None;
    guard_config (head): the pair guard's pairguard.json mapping or None (the canary's `canary`, `canary_interval_s`)."""
    now = time.time() if now is None else now
    deployed = deployed or {}
    started = parse_iso8601(container.get("started_at")) if container.get("running") else None
    row: dict[str, Any] = {
        "node": node, "role": role,
        "unit": "%s/%s" % (unit.get("ActiveState", "?"), unit.get("SubState", "?")),
        "unit_restarts": unit.get("NRestarts"),
        "container": container.get("status", "?"),
        "image": _short_id(container.get("image_id") or deployed.get("image_id")),
        "image_id": container.get("image_id") or deployed.get("image_id"),
        "image_ref": deployed.get("image_ref") or container.get("image_ref"),
        "profile": deployed.get("profile") or "-",
        "uptime_s": (now - started) if started else None,
        "uptime": human_duration(now - started) if started else "-",
        "endpoint": "-", "kv": "-", "reqs": "-",
    }
    if unit.get("NRestarts") not in (None, "", "0"):
        row["unit"] += " (%s restarts)" % unit["NRestarts"]
    if endpoint is not None:
        if endpoint.get("error"):
            row["endpoint"] = "down: %s" % endpoint["error"][:40]
        elif endpoint.get("health") != 200:
            row["endpoint"] = "/health %s" % endpoint.get("health")
        else:
            ans = endpoint.get("answer")
            row["endpoint"] = "ok %s" % endpoint.get("model", "?")
            if ans is not None:
                row["endpoint"] += " %r %.1fs" % (ans[:12], endpoint.get("seconds") or 0.0)
        m = endpoint.get("metrics") or {}
        if m.get("kv_cache_usage_perc") is not None:
            row["kv"] = "%.1f%%" % (100.0 * m["kv_cache_usage_perc"])
        if m.get("requests_running") is not None:
            row["reqs"] = "%d/%d" % (m["requests_running"], m.get("requests_waiting") or 0)
        row["metrics"] = m
    summary = guard_summary(guard, now)
    if summary is not None:
        row["guard"] = summary
    canary = canary_summary(guard, guard_config, now)
    if canary is not None:
        row["canary"] = canary
    crashed = crash_summary(crash)
    if crashed is not None:
        row["crash"] = crashed
    row["healthy"] = (unit.get("ActiveState") == "active" and bool(container.get("running"))
                      and (endpoint is None or (not endpoint.get("error") and endpoint.get("health") == 200)))
    return row


def format_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    cols = list(COLUMNS)
    widths = [max([len(title)] + [len(str(r.get(k, "-"))) for r in rows]) for k, title in cols]
    fmt = "  ".join("%%-%ds" % w for w in widths)
    lines = [fmt % tuple(t for _k, t in cols), fmt % tuple("-" * w for w in widths)]
    ordered = sorted(rows, key=lambda x: (x.get("role") != "head", x.get("node")))
    for r in ordered:
        lines.append(fmt % tuple(str(r.get(k, "-")) for k, _t in cols))
    for r in ordered:
        if r.get("crash"):
            lines.append("%s: %s" % (r.get("node"), r["crash"]["lines"][0]))
            lines.extend(r["crash"]["lines"][1:])
        if r.get("guard"):
            lines.append("pair guard on %s: %s" % (r.get("node"), r["guard"]["text"]))
            if r["guard"].get("last_hang_why"):
                lines.append("  last hang: %s" % r["guard"]["last_hang_why"])
            if r["guard"].get("last_why") and r["guard"].get("last_why") != r["guard"].get("last_hang_why"):
                lines.append("  last cause: %s" % r["guard"]["last_why"])
            if r["guard"].get("last_memory_why") and r["guard"].get("last_memory_why") != r["guard"].get("last_why"):
                lines.append("  last memory guard action: %s" % r["guard"]["last_memory_why"])
        if r.get("canary"):
            lines.append("quality canary on %s: %s" % (r.get("node"), r["canary"]["text"]))
    return [ln.rstrip() for ln in lines]
