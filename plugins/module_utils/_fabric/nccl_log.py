# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse NCCL_DEBUG=INFO output and all-reduce result rows; judge the fabric.

Pure Python (no Ansible imports).  Used by the nccl_fabric role's preflight.

Result-row format (the preflight program prints it; nccl-tests' all_reduce_perf prints the
same leading columns, so its output parses too):

    #       size         count      type   redop    root     time   algbw   busbw
    #        (B)    (elements)                                 (us)  (GB/s)  (GB/s)
       1073741824     268435456     float     sum      -1  48923.1   21.95   21.95

Fields: size in bytes, element count, dtype, reduction op, root (-1 for all-reduce), time
in microseconds, algbw and busbw in GB/s (1e9 bytes/s).  Further columns (nccl-tests'
#wrong and in-place figures) are ignored.  Lines starting with '#' are comments.

API:
  parse_log(lines) -> dict (see parse_log)
  parse_rows(lines) -> list of row dicts
  classify_busbw(busbw_gbps, threshold_gbps=18.0) -> str
  summarize(log_lines, row_lines=None, threshold_gbps=18.0, expected_hcas=2) -> dict
"""

from __future__ import annotations


import re
from collections.abc import Iterable
from typing import Any

_NCCL_VERSION = re.compile(r"NCCL INFO NCCL version (\S+)")
_VLLM_NCCL = re.compile(r"vLLM is using nccl==(\S+)")
_NET_IB_USING = re.compile(r"NET/IB : Using (.*?)(?:; OOB (\S+?):(\S+?)<\d+>)?\s*$")
_NET_SOCKET_USING = re.compile(r"NET/Socket : Using (.*?)\s*$")
_DEV_IB = re.compile(r"\[(\d+)\]([^\s:\[\]]+):(\d+)/(\w+)")
_DEV_SOCKET = re.compile(r"\[(\d+)\]([^\s:\[\]]+):(\S+?)<\d+>")
_USING_NETWORK = re.compile(r"NCCL INFO Using network (\w+)")
_NO_IB = re.compile(r"NET/IB : No device found")
_GDR_RINGS = re.compile(r"\bGDR (\d)\b")
_GDR_HCA = re.compile(r"GPU Direct RDMA (Disabled|Enabled) for HCA (\d+) '([^']+)'")
_CHANNEL = re.compile(r"Channel (\d+)/\d+ : .* via (NET/\w+(?:/\d+)?(?:/GDRDMA)?|P2P\S*|SHM\S*)")
_CONNECTED = re.compile(r"Connected all (rings|trees)")
_WARN = re.compile(r"NCCL WARN (.*)$")
_ROW = re.compile(
    r"^\s*(\d+)\s+(\d+)\s+([A-Za-z_]\w*)\s+([A-Za-z_]\w*)\s+(-?\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)(?:\s|$)")


def parse_log(lines: str | Iterable[str]) -> dict[str, Any]:
    """Parse NCCL_DEBUG=INFO lines (str or iterable of str).

    Returns dict:
      nccl_version: str|None   ('2.27.7+cuda13.0' from 'NCCL version', else vLLM's 'nccl==')
      transport: 'IB'|'Socket'|None   (last 'Using network X'; else inferred from NET/IB Using
                 lines or channel transports)
      hcas: [{'index': int, 'name': str, 'port': int, 'link': 'RoCE'|'IB'}]   (last NET/IB Using)
      hca_names: [str]
      relaxed_ordering: bool   ('[RO]' on the NET/IB Using line)
      oob_ifname, oob_ip: str|None
      socket_devices: [{'index', 'ifname', 'ip'}]   (NET/Socket Using line)
      no_ib_device: bool        ('NET/IB : No device found')
      gdr: int|None             ('GDR 0|1' on the rings/trees line)
      gdr_by_hca: {name: bool}  ('GPU Direct RDMA Disabled|Enabled for HCA')
      channels: {'NET/IB': n, 'NET/Socket': n, ...} counted by channel lines (transport
                without the /<dev> suffix; '/GDRDMA' kept)
      warnings: [str]           (text after 'NCCL WARN')
      connected: [str]          algorithms NCCL connected ('rings', 'trees') from 'Connected all X'
    """
    if isinstance(lines, str):
        lines = lines.splitlines()
    out: dict[str, Any] = {
        "nccl_version": None, "transport": None, "hcas": [], "hca_names": [], "relaxed_ordering": False,
        "oob_ifname": None, "oob_ip": None, "socket_devices": [], "no_ib_device": False, "gdr": None,
        "gdr_by_hca": {}, "channels": {}, "warnings": [], "connected": [],
    }
    vllm_version = None
    network = None
    for line in lines:
        m = _NCCL_VERSION.search(line)
        if m:
            out["nccl_version"] = m.group(1)
        m = _VLLM_NCCL.search(line)
        if m:
            vllm_version = m.group(1)
        m = _NET_IB_USING.search(line)
        if m:
            devs = [{"index": int(d[0]), "name": d[1], "port": int(d[2]), "link": d[3]} for d in _DEV_IB.findall(m.group(1))]
            out["hcas"] = devs
            out["hca_names"] = [d["name"] for d in devs]
            out["relaxed_ordering"] = "[RO]" in m.group(1)
            if m.group(2):
                out["oob_ifname"], out["oob_ip"] = m.group(2), m.group(3)
        m = _NET_SOCKET_USING.search(line)
        if m:
            out["socket_devices"] = [{"index": int(d[0]), "ifname": d[1], "ip": d[2]} for d in _DEV_SOCKET.findall(m.group(1))]
        if _NO_IB.search(line):
            out["no_ib_device"] = True
        m = _USING_NETWORK.search(line)
        if m:
            network = m.group(1)
        if "Connected all" in line or "GDR" in line:
            m = _GDR_RINGS.search(line)
            if m:
                out["gdr"] = int(m.group(1))
        m = _GDR_HCA.search(line)
        if m:
            out["gdr_by_hca"][m.group(3)] = m.group(1) == "Enabled"
        m = _CHANNEL.search(line)
        if m:
            kind = re.sub(r"/\d+(?=/|$)", "", m.group(2))
            out["channels"][kind] = out["channels"].get(kind, 0) + 1
        m = _CONNECTED.search(line)
        if m and m.group(1) not in out["connected"]:
            out["connected"].append(m.group(1))
        m = _WARN.search(line)
        if m:
            out["warnings"].append(m.group(1).strip())
    if out["nccl_version"] is None:
        out["nccl_version"] = vllm_version
    if network is not None:
        out["transport"] = network
    elif out["channels"]:
        ib = sum(n for k, n in out["channels"].items() if k.startswith("NET/IB"))
        sock = out["channels"].get("NET/Socket", 0)
        out["transport"] = "Socket" if sock > ib else ("IB" if ib else None)
    elif out["no_ib_device"] or out["socket_devices"]:
        out["transport"] = "Socket"
    elif out["hcas"]:
        out["transport"] = "IB"
    return out


def parse_rows(lines: str | Iterable[str]) -> list[dict[str, Any]]:
    """Parse result rows (see module doc).  Returns [{'size_bytes', 'count', 'type', 'redop',
    'root', 'time_us', 'algbw_gbps', 'busbw_gbps'}] in input order; other lines are skipped."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    rows: list[dict[str, Any]] = []
    for line in lines:
        if line.lstrip().startswith("#"):
            continue
        m = _ROW.match(line)
        if not m:
            continue
        rows.append({
            "size_bytes": int(m.group(1)), "count": int(m.group(2)), "type": m.group(3), "redop": m.group(4),
            "root": int(m.group(5)), "time_us": float(m.group(6)), "algbw_gbps": float(m.group(7)),
            "busbw_gbps": float(m.group(8)),
        })
    return rows


def classify_busbw(busbw_gbps: float | None, threshold_gbps: float = 18.0) -> str:
    """'both_twins' (>= threshold), 'degraded' (13 .. threshold), 'one_twin' (10 .. 13),
    'socket_speed' (< 10, single digits), 'unknown' (None).  Figures: vllm-ops.md §3.4
    (~22 GB/s both twins at 1 GiB; ~10-12 one twin; single digits = sockets)."""
    if busbw_gbps is None:
        return "unknown"
    if busbw_gbps >= threshold_gbps:
        return "both_twins"
    if busbw_gbps < 10.0:
        return "socket_speed"
    if busbw_gbps < 13.0:
        return "one_twin"
    return "degraded"


def summarize(log_lines: str | Iterable[str], row_lines: str | Iterable[str] | None = None, threshold_gbps: float = 18.0,
              expected_hcas: int | None = 2) -> dict[str, Any]:
    """Judge the fabric from NCCL INFO lines and result rows (row_lines defaults to log_lines).

    Returns dict: transport, hcas (names), hca_count, oob_ifname, oob_ip, gdr, nccl_version,
    largest_size_bytes, busbw_gbps, algbw_gbps, time_us (row at the largest size; the last
    such row if repeated), bandwidth_class (classify_busbw), threshold_gbps,
    ok (bool), failures ([str], each with the figures), summary (one line).
    ok requires transport IB, busbw >= threshold and, when expected_hcas is set, at least
    that many HCAs on the NET/IB Using line.
    """
    log = parse_log(log_lines)
    rows = parse_rows(log_lines if row_lines is None else row_lines)
    best = None
    for row in rows:
        if best is None or row["size_bytes"] >= best["size_bytes"]:
            best = row
    busbw = best["busbw_gbps"] if best else None
    failures: list[str] = []
    if log["transport"] != "IB":
        failures.append("NCCL transport is %s, not IB (%s)" % (
            log["transport"] or "unknown",
            "NET/IB : No device found" if log["no_ib_device"] else "no 'Using network IB' line"))
    if expected_hcas and len(log["hca_names"]) < expected_hcas:
        failures.append("NCCL uses %d HCA(s) %s, expected %d (both RoCE twins in NCCL_IB_HCA)" % (
            len(log["hca_names"]), ",".join(log["hca_names"]) or "-", expected_hcas))
    if best is None:
        failures.append("no all-reduce result rows found")
    elif best["busbw_gbps"] < threshold_gbps:
        failures.append("busbw %.2f GB/s at %d bytes is below %.2f GB/s (%s)" % (
            best["busbw_gbps"], best["size_bytes"], threshold_gbps, classify_busbw(best["busbw_gbps"], threshold_gbps)))
    summary = "transport=%s hcas=%s busbw=%s GB/s at %s bytes (%s)" % (
        log["transport"], ",".join(log["hca_names"]) or "-", "%.2f" % busbw if busbw is not None else "-",
        best["size_bytes"] if best else "-", classify_busbw(busbw, threshold_gbps))
    return {
        "transport": log["transport"], "hcas": log["hca_names"], "hca_count": len(log["hca_names"]),
        "oob_ifname": log["oob_ifname"], "oob_ip": log["oob_ip"], "gdr": log["gdr"], "nccl_version": log["nccl_version"],
        "largest_size_bytes": best["size_bytes"] if best else None, "busbw_gbps": busbw,
        "algbw_gbps": best["algbw_gbps"] if best else None, "time_us": best["time_us"] if best else None,
        "bandwidth_class": classify_busbw(busbw, threshold_gbps), "threshold_gbps": threshold_gbps,
        "ok": not failures, "failures": failures, "summary": summary,
    }
