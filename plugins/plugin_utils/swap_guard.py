# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether `swapoff --all` is safe on a node now (role dgxspark.ds4.host_hardening).

`swapoff` moves every swapped-out page back into memory. When more swap is in use than memory is free
(MemAvailable) minus a margin, or while a vLLM rank or another GPU process holds its memory (a node migrated
from a seed-000 setup: ~110 GB held by a running vLLM with swap in use), that is an OOM, and on GB10 unified
memory an OOM is a freeze, not a kill. The refusal names the numbers and the fix.

Pure Python (no Ansible imports).
"""

from __future__ import annotations

from collections.abc import Iterable

from ansible_collections.dgxspark.ds4.plugins.module_utils._node.node_probe import parse_meminfo

GIB = 1024.0 * 1024 * 1024
MARGIN_VAR = 'host_hardening_swapoff_margin_mib'


def _gib(num: float) -> str:
    return '%.1f GiB' % (num / GIB)


def swapoff_refusals(meminfo_text: str, margin_mib: int | str, gpu_processes: Iterable[str] | None = None,
                     vllm_units: Iterable[str] | None = None, vllm_processes: Iterable[str] | None = None,
                     host: str = 'this node') -> list[str]:
    """Reasons (sentences) to refuse `swapoff --all` now; empty when it is safe.

    ``gpu_processes``: lines of `nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader`;
    ``vllm_units``: the collection's vLLM units that run; ``vllm_processes``: lines of `pgrep -a` for vLLM."""
    info = parse_meminfo(meminfo_text, in_bytes=True)
    problems: list[str] = []
    missing = [key for key in ('MemAvailable', 'SwapTotal', 'SwapFree') if key not in info]
    if missing:
        return ['swapoff refused on %s: /proc/meminfo has no %s, so the swap in use cannot be weighed against free '
                'memory. Fix: check the kernel (MemAvailable exists since Linux 3.14), or set host_hardening_apply_kernel: '
                'false to turn swap off at the next reboot only.' % (host, ', '.join(missing))]
    used = info['SwapTotal'] - info['SwapFree']
    available = info['MemAvailable']
    margin = int(margin_mib) * 1024 * 1024
    if used > 0 and used > available - margin:
        problems.append(
            'swapoff refused on %s: swap in use %s (SwapTotal %s - SwapFree %s) exceeds MemAvailable %s minus the margin '
            '%s = %d MiB (%s): bringing it back would leave %s free, and on GB10 unified memory an out-of-memory is a '
            'freeze, not a kill. Fix: stop what holds the memory (the vLLM pair: playbooks/stop.yml) until MemAvailable is '
            'above swap in use + margin (%s), then rerun; or set host_hardening_apply_kernel: false (swap goes off at the '
            'next reboot: fstab and units are still changed).'
            % (host, _gib(used), _gib(info['SwapTotal']), _gib(info['SwapFree']), _gib(available), MARGIN_VAR,
               int(margin_mib), _gib(margin), _gib(available - used), _gib(used + margin)))
    running = ['GPU process %s' % line.strip() for line in (gpu_processes or []) if line.strip()]
    running += ['unit %s' % unit for unit in (vllm_units or [])]
    running += ['process %s' % line.strip()[:120] for line in (vllm_processes or []) if line.strip()]
    if used > 0 and running:
        problems.append(
            'swapoff refused on %s: swap in use %s while a vLLM/GPU process runs (%s): swapoff would pull its swapped '
            'pages back under a live model (MemAvailable %s). Fix: stop the pair first (playbooks/stop.yml), rerun, '
            'then start it again; or set host_hardening_apply_kernel: false (swap goes off at the next reboot).'
            % (host, _gib(used), '; '.join(running), _gib(available)))
    return problems
