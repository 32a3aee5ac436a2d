# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark-ds4 memory guard: act on memory pressure before a GB10 freezes, never inside the kernel's reclaim band
(pure logic, no I/O).

Pure Python (no Ansible imports). Used twice, one file: the controller validates the settings with
check_config (the config play, plugins/plugin_utils/role_inputs.py), and the pair guard (the node package's
pairguard/, installed by dgxspark.ds4.vllm_service) runs MemoryGuard in its watch loop on the head (the same loop,
health gate, state and textfile as the hang watchdog) and reads the sources.

Why: on GB10 the GPU and the CPU share one pool; an exhausted pool does not give a CUDA error, the node
freezes and needs someone at the power button (seed 002 "OOM Safety on GB10 Unified Memory").

What is normal, and what is not (Linux mm/page_alloc.c, __setup_per_zone_wmarks; mm/vmstat.c, zoneinfo_show_print):
the kernel splits vm.min_free_kbytes over the zones by their managed pages (the zone's `min` watermark); each zone's
`low` is min + max(min/4, managed * watermark_scale_factor / 10000) and `high` is low + that same step
(watermark_scale_factor defaults to 10). With host_hardening's vm.min_free_kbytes = 1572864 (1.5 GiB) on a 128 GB
Spark the node's watermarks are min 1.50, low 1.875, high 2.25 GiB. Once the page cache has filled the memory,
kswapd wakes below `low` and reclaims up to `high`: MemFree then sits anywhere in min..high for hours with tens of
GiB still available (page cache), which is the kernel doing its job, not pressure. Ordinary allocations never take
MemFree below `min` (they reclaim directly, or the OOM killer runs); only atomic and reclaim-time allocations dip
into that reserve, so MemFree below `min` means reclaim is not keeping up.

So the guard acts on pressure only, per node:
  gate  PSI some avg10 >= gate_psi_some_avg10 (tasks stalled on memory: /proc/pressure/memory), or the stop level
  stop  MemFree below the kernel's own min watermark, or PSI full avg10 >= stop_psi_full_avg10 (every task stalled)
  ok    anything else: MemFree anywhere above min (the reclaim band included) with PSI below the gate.
The min watermark is read on each node: /proc/zoneinfo, every populated zone's `min` (minus its transient
`boost`), summed, times the page size (MemTotal / the zones' managed pages, else / their present pages: 4, 16 or
64 KiB; page_size_of); when zoneinfo cannot
be read, the kernel's formula over /proc/sys/vm/min_free_kbytes (one zone of MemTotal). The guard's free-memory
level is therefore host_hardening's vm.min_free_kbytes as the kernel applied it: the two cannot disagree. Without
either source the node is judged on PSI only (said in the reading). MemAvailable is reported, never acted on: near
zero without stalls the node still fits, with stalls PSI gates anyway, and page cache must never gate.

The pair's level is the worst node's. The pair is stopped (worker first) only when the stop level held for
stop_polls polls in a row after the gate had been set: the gate always comes first, and one line says each.
After a stop the guard does nothing more until a new head runs (a deliberate restart): never a restart
loop; systemd does not restart a unit stopped with systemctl stop. The gate is lifted after clear_polls
polls at ok.

Sources are paths (meminfo_path, psi_path, zoneinfo_path, min_free_kbytes_path; default the real files): tests and
Molecule point them at fixture files built from the kernel's formula (docs/testing.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe

GIB = float(1 << 30)
LEVELS = ('ok', 'gate', 'stop')

# The PSI thresholds (percent of the last 10 s; the role's vllm_service_memory_guard_gate_psi_some_avg10 and
# _stop_psi_full_avg10). The free-memory level has no setting: it is the kernel's min watermark, read on the node.
DEFAULTS = {'memory_gate_psi_some_avg10': 10.0, 'memory_stop_psi_full_avg10': 25.0}
PSI_VARIABLES = {'memory_gate_psi_some_avg10': 'vllm_service_memory_guard_gate_psi_some_avg10',
                 'memory_stop_psi_full_avg10': 'vllm_service_memory_guard_stop_psi_full_avg10'}
SOURCES = {'meminfo_path': '/proc/meminfo', 'psi_path': '/proc/pressure/memory', 'zoneinfo_path': '/proc/zoneinfo',
           'min_free_kbytes_path': '/proc/sys/vm/min_free_kbytes'}
PAGE_SIZES = (4096, 16384, 65536)
# The kernel's default vm.watermark_scale_factor (Documentation/admin-guide/sysctl/vm.rst); the collection leaves it.
WATERMARK_SCALE_FACTOR = 10
WATERMARK_KEYS = ('free', 'boost', 'min', 'low', 'high', 'promo', 'spanned', 'present', 'managed', 'cma')


def parse_psi(text: str | None) -> dict[str, dict[str, float]]:
    """/proc/pressure/memory text -> {'some': {'avg10': f, ...}, 'full': {...}}; {} when there is none."""
    out: dict[str, dict[str, float]] = {}
    for line in (text or '').splitlines():
        parts = line.split()
        if not parts or parts[0] not in ('some', 'full'):
            continue
        values: dict[str, float] = {}
        for item in parts[1:]:
            key, sep, value = item.partition('=')
            if not sep:
                continue
            try:
                values[key] = float(value)
            except ValueError:
                continue
        if 'avg10' in values:
            out[parts[0]] = values
    return out


def parse_zoneinfo(text: str | None) -> list[dict[str, Any]]:
    """/proc/zoneinfo text -> [{'node': n, 'zone': name, 'free': pages, 'boost', 'min', 'low', 'high', 'managed', ...}].

    The kernel prints, per zone, "Node N, zone NAME", then "  pages free N" and the watermark lines "min N", "low N",
    "high N" (6.1+: "promo N"; 5.0+: "boost N"), "spanned", "present", "managed", "cma" (mm/vmstat.c,
    zoneinfo_show_print). Other lines (per-node and per-zone counters, pagesets, whose "high:" has a colon) and other
    files' text (the worker's sources come in one `cat`) are skipped."""
    zones: list[dict[str, Any]] = []
    zone: dict[str, Any] | None = None
    for line in (text or '').splitlines():
        parts = line.replace(',', ' ').split()
        if not parts or parts[0].startswith('#'):
            continue
        if len(parts) >= 4 and parts[0] == 'Node' and parts[1].isdigit() and parts[2] == 'zone':
            zone = {'node': int(parts[1]), 'zone': parts[3]}
            zones.append(zone)
            continue
        if zone is None:
            continue
        if len(parts) == 3 and parts[:2] == ['pages', 'free'] and parts[2].isdigit():
            zone['free'] = int(parts[2])
        elif len(parts) == 2 and parts[0] in WATERMARK_KEYS and parts[0] != 'free' and parts[1].isdigit():
            zone.setdefault(parts[0], int(parts[1]))
    return [z for z in zones if 'min' in z and 'managed' in z]


def parse_min_free_kbytes(text: str | None) -> int | None:
    """/proc/sys/vm/min_free_kbytes text -> KiB (int), or None. The one line that is a bare number (the worker's sources
    come in one `cat`: no line of meminfo, PSI or zoneinfo is a bare number)."""
    for line in (text or '').splitlines():
        value = line.strip()
        if value.isdigit():
            return int(value)
    return None


def _mult_frac(x: int, numer: int, denom: int) -> int:
    """The kernel's mult_frac(x, n, d): x * n / d without overflow, in integers."""
    return (x // denom) * numer + ((x % denom) * numer) // denom


def kernel_watermarks(min_free_kbytes: int | str, zones: Sequence[tuple[str, int]], page_size: int = 4096,
                      scale_factor: int = WATERMARK_SCALE_FACTOR) -> list[dict[str, Any]]:
    """The kernel's per-zone watermarks for vm.min_free_kbytes (mm/page_alloc.c, __setup_per_zone_wmarks).

    zones: [(name, managed_pages)]. pages_min = min_free_kbytes >> (PAGE_SHIFT - 10) is spread over the lowmem zones
    (every zone but Movable/HighMem) by managed pages; a Movable zone's min is managed/1024 clamped to 32..128 pages;
    each zone's step = max(its share >> 2, mult_frac(managed, watermark_scale_factor, 10000)); low = min + step,
    high = low + step, promo = high + step. Returns [{'zone', 'managed', 'min', 'low', 'high', 'promo'}] in pages."""
    pages_min = int(min_free_kbytes) // (page_size // 1024)
    lowmem = sum(managed for name, managed in zones if name not in ('Movable', 'HighMem'))
    out: list[dict[str, Any]] = []
    for name, managed in zones:
        share = pages_min * managed // lowmem if lowmem else 0
        if name in ('Movable', 'HighMem'):
            zmin = min(max(managed // 1024, 32), 128)
        else:
            zmin = share
        step = max(share >> 2, _mult_frac(managed, scale_factor, 10000))
        out.append({'zone': name, 'managed': managed, 'min': zmin, 'low': zmin + step, 'high': zmin + 2 * step,
                    'promo': zmin + 3 * step})
    return out


def page_size_of(mem_total: int | None, zones: Sequence[Mapping[str, Any]]) -> int | None:
    """The page size that makes the zones' managed pages MemTotal (MemTotal is totalram_pages, the sum of every zone's
    managed pages); else the usual size at which the zones' present pages (the physical pages, never fewer than
    MemTotal) hold MemTotal at most twice over (the sizes are 4x apart: one fits). None when neither fits.

    The second rule is for a real host where the zones manage only part of MemTotal: an x86 VM, kernel 6.18
    (the lent GPU machine's, docs/real-vllm.md: the zones manage 11.2 GiB of MemTotal 125.8 GiB, present 128.0 GiB), whose
    zone watermarks are still the kernel's min_free_kbytes split over the managed pages."""
    managed = sum(z.get('managed', 0) for z in zones)
    if not managed or not mem_total:
        return None
    for size in PAGE_SIZES:
        if abs(managed * size - mem_total) <= 0.02 * mem_total:
            return size
    present = sum(z.get('present', 0) for z in zones)
    for size in PAGE_SIZES:
        if mem_total <= present * size <= 2 * mem_total:
            return size
    return None


def watermarks(info: Mapping[str, Any], zones: Iterable[Mapping[str, Any]] | None = None,
               min_free_kbytes: int | None = None) -> dict[str, Any] | None:
    """The node's watermarks in bytes: {'min', 'low', 'high', 'source', 'page_size'}, or None when neither source is
    usable. From zoneinfo (every populated zone, boost taken off), else from min_free_kbytes by the kernel's formula
    (one zone of MemTotal, 4 KiB pages, watermark_scale_factor 10)."""
    mem_total = info.get('MemTotal')
    populated = [z for z in zones or [] if z.get('managed', 0) > 0]
    size = page_size_of(mem_total, populated) if populated else None
    if size:
        marks: dict[str, Any] = dict((key, sum(max(z.get(key, 0) - z.get('boost', 0), 0) for z in populated) * size)
                                     for key in ('min', 'low', 'high'))
        marks.update(source='zoneinfo', page_size=size)
        return marks
    if min_free_kbytes and mem_total:
        zone = kernel_watermarks(min_free_kbytes, [('Normal', mem_total // 4096)])[0]
        return {'min': zone['min'] * 4096, 'low': zone['low'] * 4096, 'high': zone['high'] * 4096,
                'source': 'min_free_kbytes', 'page_size': 4096}
    return None


def settings_of(cfg: Mapping[str, Any]) -> dict[str, float]:
    """The PSI thresholds of a guard config (defaults for the keys it does not set)."""
    return dict((key, float(cfg.get(key, default))) for key, default in DEFAULTS.items())


def _gib(value: float) -> str:
    return '%.2f GiB' % (value / GIB)


def assess(node: str, meminfo_text: str | None, psi_text: str | None, settings: Mapping[str, float] | None = None,
           zoneinfo_text: str | None = '', min_free_text: str | None = '') -> dict[str, Any]:
    """One node's reading: dict with level, why (one clause), numbers; level None when MemFree/MemTotal are missing.

    settings: the PSI thresholds (settings_of(cfg)); the free-memory level is the node's min watermark (watermarks())."""
    settings = settings or settings_of({})
    info = node_probe.parse_meminfo(meminfo_text, in_bytes=True)
    psi = parse_psi(psi_text)
    if 'MemFree' not in info or 'MemTotal' not in info:
        return {'node': node, 'level': None, 'why': '%s: no MemFree/MemTotal in its meminfo source' % node}
    marks = watermarks(info, parse_zoneinfo(zoneinfo_text), parse_min_free_kbytes(min_free_text))
    free = info['MemFree']
    some = psi.get('some', {}).get('avg10')
    full = psi.get('full', {}).get('avg10')
    gate_some, stop_full = settings['memory_gate_psi_some_avg10'], settings['memory_stop_psi_full_avg10']
    reasons: dict[str, list[str]] = {'stop': [], 'gate': []}
    if marks and free < marks['min']:
        reasons['stop'].append("MemFree %s < the kernel's min watermark %s (%s)"
                               % (_gib(free), _gib(marks['min']), marks['source']))
    if full is not None and full >= stop_full:
        reasons['stop'].append('PSI full avg10 %.1f%% >= %.1f%%' % (full, stop_full))
    if some is not None and some >= gate_some:
        reasons['gate'].append('PSI some avg10 %.1f%% >= %.1f%%' % (some, gate_some))
    level = 'stop' if reasons['stop'] else 'gate' if reasons['gate'] else 'ok'
    context: list[str] = []
    if marks and free >= marks['min']:
        context.append('MemFree %s (%s: min %s, high %s, from %s)' % (
            _gib(free), 'in the reclaim band' if free < marks['high'] else 'above the reclaim band',
            _gib(marks['min']), _gib(marks['high']), marks['source']))
    elif not marks:
        context.append('MemFree %s (watermarks unknown: no zoneinfo, no min_free_kbytes; judged on PSI only)' % _gib(free))
    if level == 'ok':
        context.append('PSI some avg10 %s' % ('%.1f%%' % some if some is not None else '-'))
    context.append('MemAvailable %s' % (_gib(info['MemAvailable']) if 'MemAvailable' in info else '-'))
    shown = reasons['stop'] or reasons['gate']
    why = '%s: %s' % (node, ', '.join(shown + context))
    return {'node': node, 'level': level, 'mem_free': free, 'mem_available': info.get('MemAvailable'),
            'mem_total': info['MemTotal'], 'watermarks': marks, 'psi_some_avg10': some, 'psi_full_avg10': full,
            'why': why}


class MemoryGuard(object):
    """Decides, poll by poll, from the readings of every node: None, 'gate', 'clear' or 'stop'. No I/O, no clock."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.settings = settings_of(cfg)
        self.stop_polls = max(1, int(cfg.get('memory_stop_polls', 2)))
        self.clear_polls = max(1, int(cfg.get('memory_clear_polls', 3)))
        self.reset()

    def reset(self) -> None:
        """A new head: forget the streaks and the stop (the guard is armed again)."""
        self.gated = False
        self.stopped = False
        self.stop_streak = 0
        self.ok_streak = 0
        self.readings: dict[str, dict[str, Any]] = {}
        self.why = ''

    def assess(self, node: str, meminfo_text: str | None, psi_text: str | None, zoneinfo_text: str | None = '',
               min_free_text: str | None = '') -> dict[str, Any]:
        return assess(node, meminfo_text, psi_text, self.settings, zoneinfo_text, min_free_text)

    def level(self) -> str | None:
        levels = [r['level'] for r in self.readings.values() if r.get('level')]
        return max(levels, key=LEVELS.index) if levels else None

    def observe(self, readings: Iterable[dict[str, Any]]) -> None:
        """Keep readings without deciding anything (the pair is not running: the metrics stay current)."""
        for reading in readings:
            self.readings[reading['node']] = reading

    def decide(self, readings: Sequence[dict[str, Any]]) -> str | None:
        """readings: [assess() results]. Returns the action for this poll (see the module docstring)."""
        self.observe(readings)
        if self.stopped:
            return None
        level = self.level()
        worst = [r for r in readings if r.get('level') == level]
        self.why = '; '.join(r['why'] for r in worst) if worst else ''
        if level in ('gate', 'stop'):
            self.ok_streak = 0
            self.stop_streak = self.stop_streak + 1 if level == 'stop' else 0
            if not self.gated:
                self.gated = True
                return 'gate'
            if self.stop_streak >= self.stop_polls:
                self.stopped = True
                return 'stop'
            return None
        self.stop_streak = 0
        if level == 'ok' and self.gated:
            self.ok_streak += 1
            if self.ok_streak >= self.clear_polls:
                self.gated = False
                self.ok_streak = 0
                return 'clear'
        return None


def check_config(cfg: Mapping[str, Any]) -> list[str]:
    """Problems of the memory guard keys of a guard config; [] when usable (or when the guard is off)."""
    problems: list[str] = []
    if cfg.get('memory_guard_thresholds') is not None:
        # the old per-node-size table: refused whether the guard is on or off, so that it is never silently ignored
        problems.append('vllm_service_memory_guard_thresholds is no longer read: its gate_free_gib/stop_free_gib sat '
                        "inside the kernel's reclaim band (MemFree between the min and high watermarks is normal once "
                        "the page cache fills). The guard's free-memory level is now the kernel's own min watermark, "
                        'read on each node (/proc/zoneinfo; host_hardening_vm_min_free_kbytes sets it). Fix: remove '
                        'vllm_service_memory_guard_thresholds; put its PSI values, if you changed them, in '
                        'vllm_service_memory_guard_gate_psi_some_avg10 and vllm_service_memory_guard_stop_psi_full_avg10')
    if not cfg.get('memory_guard'):
        return problems
    for key, variable in PSI_VARIABLES.items():
        value = cfg.get(key, DEFAULTS[key])
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 100:
            problems.append('%s = %r: a percentage of time, above 0 and at most 100. Fix: set %s (default %s)'
                            % (variable, value, variable, DEFAULTS[key]))
    for key, variable in (('memory_poll_s', 'vllm_service_memory_guard_poll_s'),
                          ('memory_stop_polls', 'vllm_service_memory_guard_stop_polls'),
                          ('memory_clear_polls', 'vllm_service_memory_guard_clear_polls')):
        value = cfg.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 1:
            problems.append('%s = %r: must be a number >= 1. Fix: set %s and re-run the role' % (key, value, variable))
    for key in SOURCES:
        value = cfg.get(key)
        if value is not None and not (isinstance(value, str) and value.startswith('/')):
            problems.append('%s = %r: must be an absolute path. Fix: set vllm_service_memory_guard_%s' % (key, value, key))
    return problems
