# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether, and how big, the nccl_fabric all-reduce preflight may run on the pair right now.

The preflight (``roles/nccl_fabric/files/ds4_allreduce.py``) allocates up to
``nccl_fabric_preflight_max_bytes`` of GPU memory per rank plus a CUDA/torch/NCCL context. On GB10 the
GPU memory is the node's 128 GB of unified memory, shared with the CPU: beside a vLLM rank that already
holds 0.80-0.90 of it, an out-of-memory freezes the whole machine (seed 002). So:

* while the vLLM unit of **either** rank is live (active, activating, reloading, deactivating) the
  preflight is skipped on both ranks (a collective needs both), unless ``force``;
* otherwise every rank reports ``MemFree`` (not ``MemAvailable``: on GB10 CUDA's free memory excludes the
  page cache, seed 000) and the largest size the program may use is the largest power of two
  <= ``max_bytes`` with ``size + overhead <= fraction x MemFree`` on the node with the least free memory
  (both ranks must run the same sizes); below ``min_fit_bytes`` the busbw figure would mean nothing, and
  the preflight is skipped, saying so.

Pure Python (no Ansible imports); ``/proc/meminfo`` is parsed by ``node_probe.parse_meminfo``.

API:
  LIVE_STATES
  unit_live(active_state) -> bool
  fit_bytes(memfree_bytes, max_bytes, fraction, overhead_bytes) -> int (0: nothing fits)
  plan(nodes, force=False, max_bytes=1 GiB, fraction=0.5, overhead_bytes=4 GiB, min_fit_bytes=256 MiB) -> dict
"""


from collections.abc import Iterable
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node.node_probe import parse_meminfo

GIB = 1 << 30
MIB = 1 << 20
# systemd ActiveStates in which the rank holds (or is taking, or still releasing) its memory.
LIVE_STATES = ("active", "activating", "reloading", "deactivating", "refreshing")


def unit_live(active_state: str | None) -> bool:
    """True when a unit in this ActiveState may hold GPU memory."""
    return (active_state or "").strip() in LIVE_STATES


def fit_bytes(memfree_bytes: int | str, max_bytes: int | str, fraction: float | str, overhead_bytes: int | str) -> int:
    """Largest power of two <= max_bytes (or max_bytes itself) with size + overhead <= fraction x MemFree."""
    budget = int(float(fraction) * int(memfree_bytes)) - int(overhead_bytes)
    max_bytes = int(max_bytes)
    if budget <= 0 or max_bytes <= 0:
        return 0
    if max_bytes <= budget:
        return max_bytes
    size = 1
    while size * 2 <= budget:
        size *= 2
    return size


def _fmt(nbytes: int) -> str:
    if nbytes >= GIB:
        return "%.1f GiB" % (nbytes / float(GIB))
    return "%d MiB" % (nbytes // MIB)


def plan(nodes: Iterable[dict[str, Any]] | None, force: bool = False, max_bytes: int | str = GIB, fraction: float | str = 0.5,
         overhead_bytes: int | str = 4 * GIB, min_fit_bytes: int | str = 256 * MIB) -> dict[str, Any]:
    """The preflight's plan for the whole pair.

    nodes: [{'host', 'unit', 'active_state', 'meminfo' (the text of /proc/meminfo)}], one per rank.
    Returns {'run': bool, 'max_bytes': int (0 when not run), 'reason': 'live_pair'|'low_memory'|'no_meminfo'|'ok'|'forced',
    'live_units': ['host:unit (state)'], 'memfree': {host: bytes}, 'pending': bool (skipped: the fabric stays unproven),
    'msg': one line}."""
    nodes = list(nodes or [])
    live = ["%s:%s (%s)" % (n.get("host"), n.get("unit"), (n.get("active_state") or "").strip())
            for n in nodes if unit_live(n.get("active_state"))]
    memfree = {}
    unreadable = []
    for n in nodes:
        value = parse_meminfo(n.get("meminfo") or "", in_bytes=True).get("MemFree")
        if value is None:
            unreadable.append(str(n.get("host")))
        else:
            memfree[str(n.get("host"))] = value
    out = {"run": False, "max_bytes": 0, "live_units": live, "memfree": memfree, "pending": True}
    if live and not force:
        out["reason"] = "live_pair"
        out["msg"] = ("nccl_fabric: all-reduce preflight skipped: vLLM is live on %s (on GB10 an out-of-memory beside a "
                      "serving rank freezes the node, seed 002); it runs on the next site.yml with both ranks stopped, "
                      "or now with nccl_fabric_preflight_force: true" % ", ".join(live))
        return out
    if unreadable:
        out["reason"] = "no_meminfo"
        out["msg"] = ("nccl_fabric: all-reduce preflight skipped: no MemFree in /proc/meminfo of %s, so its buffers cannot "
                      "be sized safely" % ", ".join(sorted(unreadable)))
        return out
    if not memfree:
        out["reason"] = "no_meminfo"
        out["msg"] = "nccl_fabric: all-reduce preflight skipped: no node of the pair reported its memory"
        return out
    tightest = min(sorted(memfree), key=lambda h: memfree[h])
    size = fit_bytes(memfree[tightest], max_bytes, fraction, overhead_bytes)
    free_txt = ", ".join("%s %s" % (h, _fmt(memfree[h])) for h in sorted(memfree))
    if size < int(min_fit_bytes):
        out["reason"] = "low_memory"
        out["msg"] = ("nccl_fabric: all-reduce preflight skipped: MemFree %s; %s x MemFree - %s overhead on %s leaves room "
                      "for %s, below nccl_fabric_preflight_min_fit_bytes (%s): free memory first (vLLM stopped? page cache "
                      "dropped?)" % (free_txt, fraction, _fmt(int(overhead_bytes)), tightest, _fmt(size) if size else "nothing",
                                     _fmt(int(min_fit_bytes))))
        return out
    out.update({"run": True, "max_bytes": size, "pending": False, "reason": "forced" if live else "ok"})
    sized = "buffers up to %s" % _fmt(size)
    if size != int(max_bytes):
        sized += " (nccl_fabric_preflight_max_bytes %s does not fit in %s x MemFree of %s)" % (
            _fmt(int(max_bytes)), fraction, tightest)
    if live:
        out["msg"] = ("nccl_fabric: all-reduce preflight FORCED beside live vLLM on %s (nccl_fabric_preflight_force), %s; "
                      "MemFree %s" % (", ".join(live), sized, free_txt))
    else:
        out["msg"] = "nccl_fabric: all-reduce preflight runs with %s; MemFree %s" % (sized, free_txt)
    return out
