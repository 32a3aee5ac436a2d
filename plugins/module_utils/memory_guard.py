# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark-ds4 memory guard: act on unified-memory pressure before a GB10 freezes (pure logic, no I/O).

Pure Python (no Ansible imports). Used twice, one file: the role's preflight validates the settings with
check_config (filter dgxspark.ds4.memory_guard_problems), and dgxspark.ds4.vllm_service installs this file
next to pairguard.py, which runs MemoryGuard in its watch loop on the head (the same loop, health gate,
state and textfile as the hang watchdog) and reads the sources.

Why: on GB10 the GPU and the CPU share one pool; an exhausted pool does not give a CUDA error, the node
freezes and needs someone at the power button (seed 002 "OOM Safety on GB10 Unified Memory"). MemAvailable
hides the squeeze: it counts reclaimable page cache that CUDA does not count as free (seed 000: 4.75 GiB free
with 110 GiB in page cache), so the guard reads MemFree and memory PSI (/proc/pressure/memory: the share of
time tasks stalled waiting for memory), on BOTH nodes: the head's files directly, the worker's over the pair
guard's ssh connection (`cat` of the same paths). A healthy pair under load sits at MemFree 4.0 GB (head)
and 9.8 GB (worker) on a 128 GB Spark (seed 000, 5 minutes at 8 concurrent requests): the gate level is below
that.

Levels per node, from the thresholds of its size (the row whose node_gb is nearest MemTotal):
  ok    MemFree >= gate_free_gib and PSI some avg10 < gate_psi_some_avg10
  gate  MemFree < gate_free_gib or PSI some avg10 >= gate_psi_some_avg10: the pair leaves rotation (health gate)
  stop  MemFree < stop_free_gib or PSI full avg10 >= stop_psi_full_avg10 (every task stalled)
The pair's level is the worst node's. The pair is stopped (worker first) only when the stop level held for
stop_polls polls in a row after the gate had been set: the gate always comes first, and one line says each.
After a stop the guard does nothing more until a new head runs (a deliberate restart): never a restart
loop; systemd does not restart a unit stopped with systemctl stop. The gate is lifted after clear_polls
polls at ok.

Sources are paths (meminfo_path, psi_path; default the real files): tests and Molecule point them at
fixture files.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

GIB = float(1 << 30)
LEVELS = ('ok', 'gate', 'stop')

# Thresholds per node size (the role's vllm_service_memory_guard_thresholds; these are its defaults).
DEFAULT_THRESHOLDS = (
    {'node_gb': 128, 'gate_free_gib': 2.0, 'stop_free_gib': 1.0, 'gate_psi_some_avg10': 10.0, 'stop_psi_full_avg10': 25.0},
    {'node_gb': 96, 'gate_free_gib': 1.5, 'stop_free_gib': 0.75, 'gate_psi_some_avg10': 10.0, 'stop_psi_full_avg10': 25.0},
)
THRESHOLD_KEYS = ('node_gb', 'gate_free_gib', 'stop_free_gib', 'gate_psi_some_avg10', 'stop_psi_full_avg10')


def parse_meminfo(text):
    """/proc/meminfo text -> {key: bytes} (kB lines only)."""
    out = {}
    for line in (text or '').splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith(':') and parts[1].isdigit():
            out[parts[0][:-1]] = int(parts[1]) * (1024 if len(parts) > 2 and parts[2] == 'kB' else 1)
    return out


def parse_psi(text):
    """/proc/pressure/memory text -> {'some': {'avg10': f, ...}, 'full': {...}}; {} when there is none."""
    out = {}
    for line in (text or '').splitlines():
        parts = line.split()
        if not parts or parts[0] not in ('some', 'full'):
            continue
        values = {}
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


def check_thresholds(rows, variable='vllm_service_memory_guard_thresholds'):
    """Problems of a threshold table (one line each, naming the variable, the value and the fix); [] when usable."""
    problems = []
    if not isinstance(rows, (list, tuple)) or not rows:
        return ['%s = %r: must be a non-empty list of {%s}. Fix: see the role README "Memory guard"'
                % (variable, rows, ', '.join(THRESHOLD_KEYS))]
    sizes = []
    for i, row in enumerate(rows):
        where = '%s[%d]' % (variable, i)
        if not isinstance(row, dict) or sorted(row) != sorted(THRESHOLD_KEYS):
            problems.append('%s = %r: must have exactly the keys %s. Fix: write every key' % (where, row, ', '.join(THRESHOLD_KEYS)))
            continue
        bad = [k for k in THRESHOLD_KEYS if isinstance(row[k], bool) or not isinstance(row[k], (int, float)) or row[k] <= 0]
        if bad:
            problems.append('%s: %s must be numbers > 0 (got %s). Fix: set them to positive numbers'
                            % (where, ', '.join(bad), ', '.join('%s=%r' % (k, row[k]) for k in bad)))
            continue
        if row['stop_free_gib'] >= row['gate_free_gib']:
            problems.append('%s: stop_free_gib %r must be below gate_free_gib %r (the pair leaves rotation first, then '
                            'stops). Fix: lower stop_free_gib' % (where, row['stop_free_gib'], row['gate_free_gib']))
        if row['gate_free_gib'] >= row['node_gb']:
            problems.append('%s: gate_free_gib %r must be below the node size node_gb %r. Fix: a few GiB'
                            % (where, row['gate_free_gib'], row['node_gb']))
        for key in ('gate_psi_some_avg10', 'stop_psi_full_avg10'):
            if row[key] > 100:
                problems.append('%s: %s %r is a percentage of time: at most 100. Fix: e.g. %s'
                                % (where, key, row[key], DEFAULT_THRESHOLDS[0][key]))
        sizes.append(row['node_gb'])
    if len(set(sizes)) != len(sizes):
        problems.append('%s: node_gb %s appears twice. Fix: one row per node size' % (variable, sizes))
    return problems


def thresholds_for(total_bytes, rows):
    """The row for a node of MemTotal total_bytes: the nearest node_gb (MemTotal of a 128 GB Spark is ~128.5e9 B)."""
    total_gb = total_bytes / 1e9
    return min(rows, key=lambda row: (abs(row['node_gb'] - total_gb), row['node_gb']))


def assess(node, meminfo_text, psi_text, rows):
    """One node's reading: dict with level, why (one clause), numbers; level None when MemFree/MemTotal are missing."""
    info = parse_meminfo(meminfo_text)
    psi = parse_psi(psi_text)
    if 'MemFree' not in info or 'MemTotal' not in info:
        return {'node': node, 'level': None, 'why': '%s: no MemFree/MemTotal in its meminfo source' % node}
    row = thresholds_for(info['MemTotal'], rows)
    free = info['MemFree']
    some = psi.get('some', {}).get('avg10')
    full = psi.get('full', {}).get('avg10')
    reasons = {'stop': [], 'gate': []}
    if free < row['stop_free_gib'] * GIB:
        reasons['stop'].append('MemFree %.2f GiB < floor %.2f GiB' % (free / GIB, row['stop_free_gib']))
    if full is not None and full >= row['stop_psi_full_avg10']:
        reasons['stop'].append('PSI full avg10 %.1f%% >= %.1f%%' % (full, row['stop_psi_full_avg10']))
    if free < row['gate_free_gib'] * GIB:
        reasons['gate'].append('MemFree %.2f GiB < %.2f GiB' % (free / GIB, row['gate_free_gib']))
    if some is not None and some >= row['gate_psi_some_avg10']:
        reasons['gate'].append('PSI some avg10 %.1f%% >= %.1f%%' % (some, row['gate_psi_some_avg10']))
    level = 'stop' if reasons['stop'] else 'gate' if reasons['gate'] else 'ok'
    shown = reasons['stop'] or reasons['gate'] or ['MemFree %.2f GiB' % (free / GIB)]
    return {'node': node, 'level': level, 'node_gb': row['node_gb'], 'mem_free': free,
            'mem_available': info.get('MemAvailable'), 'mem_total': info['MemTotal'],
            'psi_some_avg10': some, 'psi_full_avg10': full,
            'why': '%s (%d GB node): %s (MemAvailable %s)' % (
                node, row['node_gb'], ', '.join(shown),
                '%.1f GiB' % (info['MemAvailable'] / GIB) if 'MemAvailable' in info else '-')}


class MemoryGuard(object):
    """Decides, poll by poll, from the readings of every node: None, 'gate', 'clear' or 'stop'. No I/O, no clock."""

    def __init__(self, cfg):
        self.rows = cfg.get('memory_guard_thresholds') or list(DEFAULT_THRESHOLDS)
        self.stop_polls = max(1, int(cfg.get('memory_stop_polls', 2)))
        self.clear_polls = max(1, int(cfg.get('memory_clear_polls', 3)))
        self.reset()

    def reset(self):
        """A new head: forget the streaks and the stop (the guard is armed again)."""
        self.gated = False
        self.stopped = False
        self.stop_streak = 0
        self.ok_streak = 0
        self.readings = {}
        self.why = ''

    def level(self):
        levels = [r['level'] for r in self.readings.values() if r.get('level')]
        return max(levels, key=LEVELS.index) if levels else None

    def decide(self, readings):
        """readings: [assess() results]. Returns the action for this poll (see the class docstring)."""
        for reading in readings:
            self.readings[reading['node']] = reading
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


def check_config(cfg):
    """Problems of the memory guard keys of a guard config; [] when usable (or when the guard is off)."""
    if not cfg.get('memory_guard'):
        return []
    problems = check_thresholds(cfg.get('memory_guard_thresholds') or list(DEFAULT_THRESHOLDS))
    for key, variable in (('memory_poll_s', 'vllm_service_memory_guard_poll_s'),
                          ('memory_stop_polls', 'vllm_service_memory_guard_stop_polls'),
                          ('memory_clear_polls', 'vllm_service_memory_guard_clear_polls')):
        value = cfg.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 1:
            problems.append('%s = %r: must be a number >= 1. Fix: set %s and re-run the role' % (key, value, variable))
    for key in ('meminfo_path', 'psi_path'):
        value = cfg.get(key)
        if value is not None and not (isinstance(value, str) and value.startswith('/')):
            problems.append('%s = %r: must be an absolute path. Fix: set vllm_service_memory_guard_%s' % (key, value, key))
    return problems
