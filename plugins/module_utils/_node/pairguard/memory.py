# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watch loop's memory guard poll (the logic: the collection's memory_guard)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import memory_guard as memguard
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.pair import Runner, say

if TYPE_CHECKING:
    from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.state import GuardState


class MemoryWatch(object):
    """The watch loop's memory poll (mixed into watch.Watch)."""

    # what it uses of watch.Watch
    cfg: dict[str, Any]
    runner: Runner
    clock: Callable[[], float]
    state: GuardState
    suspect: str | None
    stopped_workers: bool
    memory: memguard.MemoryGuard | None
    memory_poll_s: float
    memory_polled_at: float | None
    memory_head: str | None
    stop_workers: Callable[..., bool]

    def read_memory(self) -> list[dict[str, Any]]:
        """One reading per node (memguard.assess): the head's sources directly, each worker's with `cat` over ssh."""
        cfg = self.cfg
        # meminfo, PSI, zoneinfo (the kernel's watermarks), min_free_kbytes (their fallback): memory_guard.SOURCES
        paths = [cfg.get(key) or memguard.SOURCES[key] for key in ('meminfo_path', 'psi_path', 'zoneinfo_path',
                                                                   'min_free_kbytes_path')]
        if self.memory is None:  # pragma: no cover - polled only with the memory guard on (observe_memory, watch_memory)
            raise AssertionError('read_memory without the memory guard')
        texts = []
        for path in paths:
            try:
                with open(path) as handle:
                    texts.append(handle.read())
            except (IOError, OSError):
                texts.append('')
        readings = [self.memory.assess(cfg.get('head_name') or 'head', *texts)]
        for peer in cfg.get('peers') or []:
            if peer.get('ssh'):
                # cat prints what it can read (a kernel without PSI: the others only, rc 1); each parser skips the
                # other files' lines (node_probe.parse_meminfo, memory_guard.parse_*).
                _rc, out, _err = self.runner(list(peer['ssh']) + ['cat'] + paths, timeout=15)
                readings.append(self.memory.assess(peer['name'], out, out, out, out))
        return readings

    def observe_memory(self) -> None:
        """The pair is not running: keep the memory readings (and so the textfile) current, decide nothing."""
        if self.memory is None:
            return
        now = self.clock()
        if self.memory_polled_at is None or now - self.memory_polled_at >= self.memory_poll_s:
            self.memory_polled_at = now
            self.memory.observe(self.read_memory())
            self.state.memory = dict(self.memory.readings)
            self.state.dirty = True

    def watch_memory(self, head_invocation: str) -> str | None:
        """The memory guard's poll (memguard.py): gate the pair out of rotation, then stop it worker first."""
        if self.memory is None:
            return None
        if head_invocation != self.memory_head:
            self.memory_head = head_invocation
            self.memory.reset()
        now = self.clock()
        if self.memory_polled_at is None or now - self.memory_polled_at >= self.memory_poll_s:
            self.memory_polled_at = now
            action = self.memory.decide(self.read_memory())
            self.state.memory = dict(self.memory.readings)
            self.state.dirty = True
        else:
            action = None
        why = 'memory guard: %s' % self.memory.why
        if self.memory.gated or action == 'stop':
            self.suspect = why
        if action == 'gate':
            say('%s: pair out of rotation (health gate)' % why)
            self.state.event('memory_gate', 'memory_pressure', why, now)
        elif action == 'clear':
            say('memory guard: pressure gone on every node; pair back in rotation')
        elif action == 'stop':
            say('%s: stopping the pair, worker first (a stopped pair restarts in minutes, a frozen GB10 needs the power '
                'button); start it again with playbooks/restart.yml once the memory is found' % why)
            self.state.event('memory_stop', 'memory_pressure', why, now)
            # The worker's stop is queued first, the head's follows at once: a head that exits when its peer goes
            # (vLLM's engine death) waits RestartSec before systemd restarts it, and this stop cancels that restart;
            # a blocking worker stop (up to its TimeoutStopSec) could let the head restart and take a fresh worker.
            self.stop_workers(why, quiet=True, block=False)
            self.runner(['systemctl', 'stop', self.cfg['head_unit']], timeout=120)
            self.stopped_workers = False
            return 'stop'
        return None
