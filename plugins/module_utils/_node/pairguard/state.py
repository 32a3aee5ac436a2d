# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Guard state: counters, causes, the storm window, and the node-exporter textfile."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import memory_guard as memguard
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import quality_canary
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.jobs import _utc_stamp
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.pair import load_record, save_record, say


# --------------------------------------------------------------------------- guard state + textfile
# The state fields the quality canary owns (GuardState.save_canary writes only these).
CANARY_PREFIXES = ('canary_', 'last_canary_')
# metric(name, kind, help text, sample lines): one series of the textfile (GuardState.render)
Metric = Callable[[str, str, str, Iterable[str]], None]
KNOWN_CAUSES = ('hang_api_silent', 'hang_no_tokens', 'head_exited', 'quality_canary', 'worker_down', 'worker_restarted',
                'worker_unreadable')


class GuardState(object):
    """Counters and last events of the guard, persisted (JSON) and exported for the node exporter.
    Every known cause is exported from 0 on, so increase() sees the first restart of each cause."""

    # restart_times: the pair restarts of the storm window (epoch seconds), kept so that a restarted guard
    # (crash, upgrade, reboot of the guard unit) does not start counting from zero.
    FIELDS: dict[str, Any] = {'restarts_total': 0, 'hangs_total': 0, 'storm_stops_total': 0, 'last_cause': '', 'last_why': '',
                              'last_action': '', 'last_restart_at': None, 'last_hang_at': None, 'last_hang_why': '',
                              'last_hang_evidence': '', 'restarts_by_cause': {}, 'restart_times': [],
                              'memory_gates_total': 0, 'memory_stops_total': 0, 'last_memory_at': None, 'last_memory_why': '',
                              'canary_runs_total': 0, 'canary_failures_total': 0, 'canary_skips_total': 0, 'canary_consecutive': 0,
                              'last_canary_at': None, 'last_canary_ok': None, 'last_canary_why': '', 'last_canary_evidence': '',
                              'last_canary_ttft_s': None, 'last_canary_decode_tps': None, 'last_canary_skip': '', 'canary_baseline': {},
                              'canary_head': '', 'last_canary_started_at': None, 'last_canary_load': None,
                              'canary_inconclusive_total': 0, 'last_canary_inconclusive': '', 'last_canary_inconclusive_at': None}

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.path = cfg.get('state_file')
        self.textfile = cfg.get('textfile')
        self.watchdog = bool(cfg.get('hang_watchdog'))
        self.memory_guard = bool(cfg.get('memory_guard'))
        self.canary = bool(cfg.get('canary'))
        self.memory: dict[str, Any] = {}
        self.data: dict[str, Any] = dict((k, (type(v)(v) if isinstance(v, (dict, list)) else v)) for k, v in self.FIELDS.items())
        if self.path:
            self.data.update(dict((k, v) for k, v in load_record(self.path).items()
                                  if k in self.FIELDS and _fits(self.FIELDS[k], v)))
        self.data['restart_times'] = [float(t) for t in self.data['restart_times'] if isinstance(t, (int, float))]
        self.ranks: dict[tuple[str, str], bool] = {}
        self.stalled_s = 0.0
        self.written_at: float | None = None
        self.dirty = True

    def event(self, action: str, cause: str, why: str, now: float, evidence: str | None = None) -> None:
        if action not in ('restart', 'stop'):
            # only a pair restart (or the storm stop) changes the storm window, from the file as act() re-read it;
            # any other event keeps the window the file holds now (a deliberate restart may have cleared it)
            self.reload_window()
        d = self.data
        d['last_action'], d['last_cause'], d['last_why'] = action, cause, why
        if action == 'restart':
            d['restarts_total'] += 1
            d['last_restart_at'] = now
            d['restarts_by_cause'][cause] = d['restarts_by_cause'].get(cause, 0) + 1
        elif action == 'stop':
            d['storm_stops_total'] += 1
        elif action in ('memory_gate', 'memory_stop'):
            d[action + 's_total'] += 1
            d['last_memory_at'] = now
            d['last_memory_why'] = why
        if cause.startswith('hang'):
            d['hangs_total'] += 1
            d['last_hang_at'] = now
            d['last_hang_why'] = why
            d['last_hang_evidence'] = evidence or ''
        self.dirty = True
        self.save()

    def rank(self, role: str, node: str, up: bool) -> None:
        if self.ranks.get((role, node)) != up:
            self.ranks[(role, node)] = up
            self.dirty = True

    def save(self) -> None:
        if self.path:
            save_record(self.path, self.data)

    def save_canary(self) -> None:
        """Write the canary's fields only (read, update, write): the storm window in the file may have been cleared by a
        deliberate restart (reset_window) since this guard last wrote it, and a canary must not bring it back."""
        if self.path:
            record = load_record(self.path)
            record.update((k, v) for k, v in self.data.items() if k.startswith(CANARY_PREFIXES))
            save_record(self.path, record)

    def reload_window(self) -> None:
        """The storm window as the state file holds it now: a deliberate pair restart (the role's restart contract,
        restart.yml) clears it there (reset_window) while this guard runs."""
        if self.path and os.path.exists(self.path):
            times = load_record(self.path).get('restart_times')
            self.data['restart_times'] = [float(t) for t in times if isinstance(t, (int, float))] if isinstance(times, list) else []

    def render(self, now: float) -> str:
        d = self.data
        out: list[str] = []

        def metric(name: str, kind: str, text: str, samples: Iterable[str]) -> None:
            out.append('# HELP %s %s' % (name, text))
            out.append('# TYPE %s %s' % (name, kind))
            out.extend(samples)

        metric('dgxspark_ds4_guard_last_poll_timestamp_seconds', 'gauge', 'When the pair guard last polled the pair.',
               ['dgxspark_ds4_guard_last_poll_timestamp_seconds %d' % now])
        metric('dgxspark_ds4_guard_watchdog_enabled', 'gauge', '1 when the hang watchdog is on.',
               ['dgxspark_ds4_guard_watchdog_enabled %d' % int(self.watchdog)])
        metric('dgxspark_ds4_guard_rank_up', 'gauge', '1 when the rank unit is active, as the pair guard sees it.',
               ['dgxspark_ds4_guard_rank_up{role="%s",node="%s"} %d' % (r, _esc(n), int(u))
                for (r, n), u in sorted(self.ranks.items())])
        metric('dgxspark_ds4_guard_restarts_total', 'counter', 'Pair restarts made by the guard, by cause.',
               ['dgxspark_ds4_guard_restarts_total{cause="%s"} %d' % (_esc(c), d['restarts_by_cause'].get(c, 0))
                for c in sorted(set(KNOWN_CAUSES) | set(d['restarts_by_cause']))])
        metric('dgxspark_ds4_guard_hangs_total', 'counter', 'Hangs found by the watchdog.',
               ['dgxspark_ds4_guard_hangs_total %d' % d['hangs_total']])
        metric('dgxspark_ds4_guard_storm_stops_total', 'counter', 'Times the guard stopped the pair at its storm limit.',
               ['dgxspark_ds4_guard_storm_stops_total %d' % d['storm_stops_total']])
        metric('dgxspark_ds4_guard_stalled_seconds', 'gauge', 'Seconds requests have been running with no progress.',
               ['dgxspark_ds4_guard_stalled_seconds %.1f' % self.stalled_s])
        metric('dgxspark_ds4_guard_last_restart_timestamp_seconds', 'gauge', 'Time of the last pair restart (0 = none).',
               ['dgxspark_ds4_guard_last_restart_timestamp_seconds %d' % (d['last_restart_at'] or 0)])
        metric('dgxspark_ds4_guard_last_hang_timestamp_seconds', 'gauge', 'Time of the last hang (0 = none).',
               ['dgxspark_ds4_guard_last_hang_timestamp_seconds %d' % (d['last_hang_at'] or 0)])
        metric('dgxspark_ds4_memguard_enabled', 'gauge', '1 when the memory guard is on.',
               ['dgxspark_ds4_memguard_enabled %d' % int(self.memory_guard)])
        if self.memory_guard:
            self.render_memory(metric)
        metric('dgxspark_ds4_canary_enabled', 'gauge', '1 when the quality canary is on.',
               ['dgxspark_ds4_canary_enabled %d' % int(self.canary)])
        if self.canary:
            self.render_canary(metric)
        metric('dgxspark_ds4_guard_last_cause_info', 'gauge', 'Cause and action of the last guard event.',
               ['dgxspark_ds4_guard_last_cause_info{cause="%s",action="%s"} 1'
                % (_esc(d['last_cause'] or 'none'), _esc(d['last_action'] or 'none'))])
        return '\n'.join(out) + '\n'

    def render_memory(self, metric: Metric) -> None:
        """The memory guard's series (counters, and per node its level, MemFree and PSI of the last reading)."""
        d = self.data
        metric('dgxspark_ds4_memguard_gates_total', 'counter', 'Times the memory guard took the pair out of rotation.',
               ['dgxspark_ds4_memguard_gates_total %d' % d['memory_gates_total']])
        metric('dgxspark_ds4_memguard_stops_total', 'counter', 'Times the memory guard stopped the pair (worker first).',
               ['dgxspark_ds4_memguard_stops_total %d' % d['memory_stops_total']])
        readings = [r for _n, r in sorted(self.memory.items()) if r.get('level')]
        metric('dgxspark_ds4_memguard_level', 'gauge', 'Memory guard level per node: 0 ok, 1 out of rotation, 2 stop.',
               ['dgxspark_ds4_memguard_level{node="%s"} %d' % (_esc(r['node']), memguard.LEVELS.index(r['level']))
                for r in readings])
        metric('dgxspark_ds4_memguard_memfree_bytes', 'gauge', 'MemFree as the memory guard read it (not MemAvailable).',
               ['dgxspark_ds4_memguard_memfree_bytes{node="%s"} %d' % (_esc(r['node']), r['mem_free']) for r in readings])
        metric('dgxspark_ds4_memguard_memavailable_bytes', 'gauge', 'MemAvailable as the memory guard read it (reported, '
               'never acted on).', ['dgxspark_ds4_memguard_memavailable_bytes{node="%s"} %d' % (_esc(r['node']), r['mem_available'])
                                    for r in readings if r.get('mem_available') is not None])
        metric('dgxspark_ds4_memguard_watermark_bytes', 'gauge', "The kernel's min/low/high watermarks of the node (summed over "
               'its zones), as the memory guard read them: MemFree between min and high is the kernel reclaiming, not pressure.',
               ['dgxspark_ds4_memguard_watermark_bytes{node="%s",watermark="%s"} %d' % (_esc(r['node']), mark, r['watermarks'][mark])
                for r in readings if r.get('watermarks') for mark in ('min', 'low', 'high')])
        for kind in ('some', 'full'):
            metric('dgxspark_ds4_memguard_psi_%s_avg10' % kind, 'gauge',
                   'Memory PSI %s avg10 (percent of time), as the memory guard read it.' % kind,
                   ['dgxspark_ds4_memguard_psi_%s_avg10{node="%s"} %.2f' % (kind, _esc(r['node']), r['psi_%s_avg10' % kind])
                    for r in readings if r.get('psi_%s_avg10' % kind) is not None])

    def render_canary(self, metric: Metric) -> None:
        """The quality canary's series: runs by result, failures in a row, last run, last passing timings."""
        d = self.data
        passed = d['canary_runs_total'] - d['canary_failures_total']
        metric('dgxspark_ds4_canary_runs_total', 'counter',
               'Quality canary runs by result (skipped: the pair was saturated or its serving path did not answer; '
               'inconclusive: a request got no answer while the engine was busy with other work).',
               ['dgxspark_ds4_canary_runs_total{result="%s"} %d' % (r, n)
                for r, n in (('fail', d['canary_failures_total']), ('pass', passed), ('skipped', d['canary_skips_total']),
                             ('inconclusive', d['canary_inconclusive_total']))])
        metric('dgxspark_ds4_canary_consecutive_failures', 'gauge', 'Quality canary failures in a row (0 after a pass).',
               ['dgxspark_ds4_canary_consecutive_failures %d' % d['canary_consecutive']])
        metric('dgxspark_ds4_canary_last_run_timestamp_seconds', 'gauge', 'When the quality canary last ran (0 = never).',
               ['dgxspark_ds4_canary_last_run_timestamp_seconds %d' % (d['last_canary_at'] or 0)])
        for name, key, text in (('ttft_seconds', 'last_canary_ttft_s', 'Time to first token of the last passing canary.'),
                                ('decode_tokens_per_second', 'last_canary_decode_tps',
                                 'Decode rate of the last passing canary.')):
            if d[key] is not None:
                metric('dgxspark_ds4_canary_' + name, 'gauge', text, ['dgxspark_ds4_canary_%s %s' % (name, d[key])])

    def canary_run(self, result: Mapping[str, Any], now: float, evidence: str = '') -> None:
        """A finished canary (pass or fail) into the counters and the last-run fields."""
        d = self.data
        d['canary_runs_total'] += 1
        d['last_canary_at'] = now
        d['last_canary_ok'] = bool(result.get('ok'))
        if result.get('ok'):
            d['canary_consecutive'] = 0
            d['last_canary_why'] = ''
            d['last_canary_ttft_s'], d['last_canary_decode_tps'] = result.get('ttft_s'), result.get('decode_tps')
        else:
            d['canary_failures_total'] += 1
            d['canary_consecutive'] += 1
            d['last_canary_why'] = quality_canary.summary(result)
            d['last_canary_evidence'] = evidence
        self.dirty = True
        self.save_canary()

    def canary_inconclusive(self, why: str, now: float) -> None:
        """A canary whose request got no answer while the engine was busy (quality_canary.busy_reason): counted apart,
        neither a pass nor a failure (failures in a row unchanged)."""
        self.data['canary_inconclusive_total'] += 1
        self.data['last_canary_inconclusive'] = '%s (%s)' % (why, _utc_stamp(now))
        self.data['last_canary_inconclusive_at'] = now
        self.dirty = True
        self.save_canary()

    def canary_skip(self, why: str, now: float) -> None:
        self.data['canary_skips_total'] += 1
        self.data['last_canary_skip'] = '%s (%s)' % (why, _utc_stamp(now))
        self.dirty = True
        self.save_canary()

    def canary_new_head(self, head: str) -> None:
        """A new head (restarted, or first seen): its baseline is taken again, its failures count from 0."""
        d = self.data
        if d['canary_head'] != head:
            d['canary_head'], d['canary_baseline'], d['canary_consecutive'] = head, {}, 0
            self.dirty = True
            self.save_canary()

    def export(self, now: float, every_s: float = 10.0) -> bool:
        """Write the textfile atomically when something changed or every_s passed; never raises."""
        if not self.textfile or (not self.dirty and self.written_at is not None and now - self.written_at < every_s):
            return False
        try:
            directory = os.path.dirname(self.textfile)
            if directory and not os.path.isdir(directory):
                os.makedirs(directory, 0o755)
            tmp = os.path.join(directory, '.%s.tmp' % os.path.basename(self.textfile))
            with open(tmp, 'w') as fh:
                fh.write(self.render(now))
            os.chmod(tmp, 0o644)
            os.rename(tmp, self.textfile)
        except (IOError, OSError) as exc:
            say('cannot write %s: %s' % (self.textfile, exc))
            self.written_at = now
            return False
        self.written_at = now
        self.dirty = False
        return True


def reset_window(cfg: Mapping[str, Any]) -> int:
    """Forget the storm window (a deliberate restart of the pair, like systemctl reset-failed for the start limit):
    the counters and the last events stay. Returns how many restart times were dropped."""
    path = cfg.get('state_file')
    if not path or not os.path.exists(path):
        return 0
    record = load_record(path)
    dropped = len(record.get('restart_times') or [])
    record['restart_times'] = []
    save_record(path, record)
    return dropped


def _fits(default: object, value: object) -> bool:
    """A value read back from the state file may replace the default (a dict or list only by its kind)."""
    return not isinstance(default, (dict, list)) or isinstance(value, type(default))


def _esc(value: object) -> str:
    return str(value).replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')
