# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark-ds4 pair guard: the two vLLM ranks live and die together (head side). This module: the watch loop.

The package: pair (units, ssh, records, the phase marker, the fresh worker), hang (the hang detector and the
Prometheus text), jobs (child jobs with a deadline, the evidence), canary (the quality canary), memory (the memory
poll), state (guard state, the textfile), watch (the watch loop), config (its checks), cli (the command line, main).
The entry point is roles/vllm_service/files/pairguard.py.

The entry point is installed by dgxspark.ds4.vllm_service as /usr/local/libexec/dgxspark-ds4/pairguard.py on the head,
this package under <libexec>/ansible_collections/dgxspark/ds4/plugins/module_utils/_node/pairguard/.
Python 3 standard library only. Two entry points share one record, the worker unit's systemd
InvocationID that the running head was paired with (state file, JSON):

  * prestart.py (ExecStartPre of the head unit) calls ensure_fresh_workers(cfg): before the head
    starts, every worker rank must be a fresh one. A worker whose InvocationID equals the record
    was paired with the previous head (it survived a head crash: a stale rank that would never
    rejoin the new rendezvous) or is not running: it is (re)started over the peer key, the head
    waits (bounded) until it is active, and the new InvocationID becomes the record. At boot
    this is also "the head waits for the worker's rank to be up".
  * `python3 pairguard.py watch CONFIG.json` (dgxspark-ds4-pairguard.service): every interval,
    while the head unit is active, reads each worker unit over ssh. A worker that is no longer
    the recorded one (it died and systemd restarted it, or it is down) leaves the head serving
    /health 200 with a dead peer (vllm-ops 2.6): the guard restarts the head unit, whose
    prestart then takes a fresh worker. Result: both ranks restarted, worker first.
    A rate limit (max_restarts per window_s) stops the guard from feeding a crash loop: past it,
    the head is stopped and the reason printed (systemd's start limits do the same per unit).
    When the head has given up (unit failed, e.g. its start limit hit) or the guard stopped it,
    the worker rank is stopped too: it would otherwise wait for a rendezvous that never comes.

  * Hang watchdog (same loop, cfg hang_watchdog): a live pair that produces nothing (an NCCL
    collective or the engine wedged, a rank frozen; /health and /v1/models stay green, real-vllm-on-device
    notes Part 1 §3-4). Every hang_poll_s the head's /metrics (Prometheus text, parsed here) is read.
    Progress is any of vllm:generation_tokens_total, vllm:prompt_tokens_total,
    vllm:iteration_tokens_total_count moving OR vllm:kv_cache_usage_perc changing: during a chunked
    prefill real vLLM 0.26.0 moves none of the counters until the first token (it records iteration
    stats only for steps that return outputs) and the KV-cache usage gauge rises at every step (notes
    Part 1 §2). A hang: requests running (vllm:num_requests_running > 0) and no progress for
    hang_after_s, the window the role derives from the longest single engine step the recipe allows
    (one prefill chunk; the whole prompt when chunked prefill is off) at a conservative prefill rate
    (README "Hang watchdog window"); a vLLM that publishes no KV-cache gauge gets hang_after_no_kv_s,
    the whole longest prefill. So is /metrics not answering for hang_after_s, once it had answered,
    while the head container runs. On a hang the pair is restarted at once (worker first, within the
    same storm limit), in one line, and the evidence (hang-<UTC>/ under evidence_dir: metrics before
    and after, last journal lines, docker top, py-spy dump when the image has it, /proc/meminfo,
    nvidia-smi, of both ranks) is collected by a child process with a hard deadline
    (evidence_timeout_s): the guard loop never waits for it.
  * A head that exits by itself is restarted by systemd (Restart=always: vLLM 0.26.0 exits with status 0
    after an engine death, notes Part 1 §3, which Restart=on-failure would leave down; a systemctl stop
    is never restarted). Its prestart takes a fresh worker first. The guard sees it in the head unit's
    NRestarts and counts it in the same storm window: past max_restarts it stops the pair.
  * Guard state (restarts, hangs, storm stops, last cause, last hang, and the restart times of the storm
    window, so a restarted guard keeps counting) is kept in state_file (JSON, read by status.yml) and
    exported as a node-exporter textfile (textfile, written atomically).
  * Health gate (health_gate, a file path): while the guard sees a worker rank not active or unreadable
    (from the FIRST such poll, before down_polls confirm it), a hang, or a pair restart it started, the
    file exists and holds the reason; the head's API proxy then answers /health with 503, so a router in
    front of several pairs takes this pair out of rotation within its health-check bound instead of
    sending requests to a head whose peer is gone (vLLM's own /health stays 200 then, vllm-ops 2.3 F).
    The first poll that sees the pair whole again removes it. A blip costs one poll out of rotation,
    never a restart.

  * Memory guard (same loop, cfg memory_guard; the logic in memory_guard.py): memory PSI and MemFree of both
    nodes every memory_poll_s (the head's files, the worker's over the same ssh connection), MemFree against
    the node's own min watermark (its /proc/zoneinfo). Stalls (PSI some) gate the pair out of rotation (one
    line); severe pressure (PSI full, or MemFree below min) for memory_stop_polls polls stops it cleanly,
    worker first (one line): a stopped pair restarts in minutes, a frozen GB10 needs the power button. MemFree
    inside the kernel's reclaim band (min..high) is never acted on. Once per head: never a restart loop.

  * One ssh connection, and no cold restart for a blip: the watch loop reaches each worker over ONE
    OpenSSH connection (ControlMaster=auto, ControlPersist, ControlPath ssh-%C in ssh_control_dir, a
    root-only 0700 runtime directory; ServerAlive* drops a dead master within ~10 s) instead of a new
    root login every poll. A worker seen not active must be seen so on down_polls consecutive polls
    (and an unreadable one on unreachable_polls) before the pair is restarted: one failed poll or a
    slow ssh does not turn into a cold restart of both ranks. A worker with a new InvocationID (it
    restarted on its own: a stale head is certain) is acted on at the first poll that sees it.

The worker is reached with the peer_access key (ssh options + root@<worker fabric ip>); there the
guard runs `systemctl show/start/restart/reset-failed/stop <worker unit>` and, on a hang only, reads
evidence (journalctl, docker top/exec, /proc/meminfo, nvidia-smi).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import memory_guard as memguard
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.canary import (
    CanaryJob, CanaryWatch, canary_deadline_s, canary_request_timeout_s)
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.hang import HangDetector, fetch_metrics
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.jobs import EvidenceJob, _write
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.memory import MemoryWatch
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.pair import (
    GuardError, Runner, load_record, prepare_control_dir, run, say, set_phase, ssh_control_options, unit_state, with_ssh_options)
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.state import GuardState


class Watch(CanaryWatch, MemoryWatch):
    """One guard loop; step() is one poll, unit-tested with a fake runner and clock."""

    def __init__(self, cfg: Mapping[str, Any], runner: Runner = run, clock: Callable[[], float] = time.time,
                 fetch: Callable[[], str] | None = None, prepare: Callable[[str], str | None] = prepare_control_dir,
                 cfg_path: str | None = None) -> None:
        options = ssh_control_options(cfg)
        if options:
            problem = prepare(cfg['ssh_control_dir'])
            if problem:
                say('ssh connection sharing off (%s): one ssh login per poll' % problem)
                options = []
        cfg = dict(cfg)
        cfg['peers'] = [dict(p, ssh=with_ssh_options(p['ssh'], options)) if p.get('ssh') else dict(p)
                        for p in cfg.get('peers') or []]
        self.cfg = cfg
        self.runner = runner
        self.clock = clock
        self.failures: dict[str, int] = {}
        self.down: dict[str, int] = {}
        self.stopped_workers = False
        self.state = GuardState(cfg)
        self.hang: HangDetector | None = None
        self.hang_poll_s = float(cfg.get('hang_poll_s', 5))
        self.hang_polled_at: float | None = None
        self.head_invocation: str | None = None
        self.head_nrestarts: int | None = None
        self.evidence_jobs: list[EvidenceJob] = []
        self.suspect = None
        self.memory = memguard.MemoryGuard(cfg) if cfg.get('memory_guard') else None
        self.memory_poll_s = float(cfg.get('memory_poll_s', 5))
        self.memory_polled_at = None
        self.memory_head = None
        self.gate = cfg.get('health_gate') or None
        if self.gate:
            gate_write(self.gate, None)  # a gate left from before (a crash, a reboot) is re-decided by the next poll
        self.fetch = None
        if cfg.get('metrics_url'):
            timeout = float(cfg.get('metrics_timeout_s', 10))
            self.fetch = fetch or (lambda: fetch_metrics(cfg['metrics_url'], timeout))
        if cfg.get('hang_watchdog') and self.fetch:
            self.hang = HangDetector(cfg, self.fetch)
        self.canary = bool(cfg.get('canary')) and self.fetch is not None
        self.canary_job = None
        self.canary_due = None
        self.canary_head = None
        self.canary_metrics = ''
        self.canary_load = 0
        self.canary_busy = ''
        self.canary_probed_at = None
        self.canary_ranks = {}
        self.canary_job_factory = CanaryJob
        self.cfg_path = cfg_path

    @property
    def restarts(self) -> list[float]:
        """Times of the pair restarts in the storm window (persisted in the state file)."""
        return self.state.data['restart_times']

    def evidence_wait(self, timeout: float | None = None) -> bool:
        """Wait for the evidence children still running; True when none is left."""
        for job in list(self.evidence_jobs):
            job.wait(timeout)
        self.evidence_jobs = [job for job in self.evidence_jobs if not job.poll()]
        return not self.evidence_jobs

    def step(self) -> str | None:
        """Returns the action taken: None, 'restart' or 'stop'."""
        self.suspect = None
        action = None
        self.evidence_jobs = [job for job in self.evidence_jobs if not job.poll()]
        try:
            action = self._step()
            return action
        finally:
            if self.hang is not None:
                self.state.stalled_s = self.hang.stalled_s(self.clock())
            self.state.export(self.clock(), float(self.cfg.get('textfile_every_s', 10)))
            if self.gate:
                if action in ('restart', 'stop') and not self.suspect:
                    self.suspect = 'pair %s by the pair guard' % ('restarting' if action == 'restart' else 'stopped')
                gate_write(self.gate, self.suspect)

    def _step(self) -> str | None:
        cfg = self.cfg
        head = unit_state(cfg['head_unit'], None, self.runner)
        self.state.rank('head', cfg.get('head_name') or 'head', head['ActiveState'] == 'active')
        if head['ActiveState'] == 'failed':
            # The head gave up (start limit): a worker left running would wait for a rendezvous
            # that never comes. Stop it once; the next deploy or restart starts both again.
            self.failures = {}
            self.reset_hang()
            why = '%s failed (%s)' % (cfg['head_unit'], head.get('SubState', '?'))
            if self.stop_workers(why):
                self.state.event('stop_worker', 'head_failed', why, self.clock())
                return 'stop'
            return None
        self.stopped_workers = False
        exited = self.head_exited(head)
        if exited:
            return exited
        if head['ActiveState'] != 'active':
            self.failures = {}
            self.down = {}
            self.reset_hang()
            self.observe_memory()
            return None
        if self.watch_memory(head.get('InvocationID', '')) == 'stop':
            return 'stop'
        if self.canary and head.get('InvocationID', '') != self.canary_head:
            self.canary_reset(head.get('InvocationID', ''))
        record = load_record(cfg['pair_state_file']).get('workers') or {}
        # every rank's invocation when the pair is whole at this poll (None otherwise): the canary runs and is judged
        # only then, and only on the ranks it started on
        ranks: dict[str, str] | None = {'head': head.get('InvocationID', '')}
        for peer in cfg.get('peers') or []:
            name = peer['name']
            try:
                state = unit_state(peer['unit'], peer['ssh'], self.runner)
            except GuardError as exc:
                self.failures[name] = self.failures.get(name, 0) + 1
                self.suspect = 'worker %s unreadable (%s)' % (name, exc)
                ranks = None
                if self.failures[name] < int(cfg.get('unreachable_polls', 5)):
                    continue
                self.state.rank('worker', name, False)
                return self.act('worker %s unreadable %d polls in a row (%s)' % (name, self.failures[name], exc),
                                cause='worker_unreadable')
            self.failures[name] = 0
            inv = state.get('InvocationID', '')
            active = state['ActiveState'] == 'active'
            self.state.rank('worker', name, active)
            if record.get(name) and inv and inv != record[name]:
                # A new invocation: the worker restarted on its own and the head's peer is gone for good.
                return self.act('worker %s: %s restarted on its own (invocation %s, head was paired with %s)'
                                % (name, peer['unit'], inv[:12], record[name][:12]), cause='worker_restarted')
            if ranks is not None:
                ranks[name] = inv
            if not active:
                self.suspect = 'worker %s: %s is %s' % (name, peer['unit'], state['ActiveState'])
                ranks = None
                self.down[name] = self.down.get(name, 0) + 1
                need = max(1, int(cfg.get('down_polls', 3)))
                if self.down[name] < need:
                    say('worker %s: %s is %s/%s (poll %d of %d before the pair restarts)' % (
                        name, peer['unit'], state['ActiveState'], state.get('SubState', '?'), self.down[name], need))
                    continue
                return self.act('worker %s: %s is %s/%s while the head serves (%d polls in a row)'
                                % (name, peer['unit'], state['ActiveState'], state.get('SubState', '?'), self.down[name]),
                                cause='worker_down')
            self.down[name] = 0
        if ranks is not None:
            self.mark_serving(head.get('InvocationID', ''))
        return self.watch_hang(head.get('InvocationID', '')) or self.watch_canary(ranks)

    def mark_serving(self, head_invocation: str) -> None:
        """Every rank is up and the head answers /metrics: the pair reached readiness. The phase marker that prestart set
        to 'starting' becomes 'serving' (once per head invocation): an unclean end from now on is no load crash."""
        path = self.cfg.get('phase_file')
        if not path or self.fetch is None or getattr(self, 'phase_marked', None) == head_invocation:
            return
        try:
            self.fetch()
        except Exception:  # pylint: disable=broad-except  # (not serving yet: loading)
            return
        try:
            set_phase(path, 'serving', self.cfg.get('boot_id_file'), self.clock, only_from='starting')
            self.phase_marked = head_invocation
        except (IOError, OSError) as exc:
            say('cannot write the phase marker %s: %s' % (path, exc))

    def head_exited(self, head: Mapping[str, str]) -> str | None:
        """systemd restarted the head by itself (NRestarts grew): vLLM exited, e.g. with status 0 after an engine
        death (real-vllm-on-device notes Part 1 §3). systemd's Restart=always restarts it and its prestart takes a
        fresh worker first; the guard counts it in the storm window and stops the pair past the limit."""
        try:
            count = int(head.get('NRestarts', ''))
        except ValueError:
            return None
        seen, self.head_nrestarts = self.head_nrestarts, count
        if seen is None or count <= seen:
            return None
        self.reset_hang()
        return self.act('%s exited by itself and systemd restarted it (NRestarts %d -> %d; vLLM exits 0 after an engine '
                        'death: look for EngineDeadError in journalctl -u %s)' % (self.cfg['head_unit'], seen, count,
                                                                                  self.cfg['head_unit']),
                        cause='head_exited', restart=False)

    def reset_hang(self) -> None:
        if self.hang is not None:
            self.hang.reset()
            self.hang_polled_at = None

    def watch_hang(self, head_invocation: str) -> str | None:
        """The pair is up: is it producing anything? Returns None or the action taken on a hang."""
        if self.hang is None:
            return None
        if head_invocation != self.head_invocation:
            # A new head (restarted, or first seen): its load phase is not a silence.
            self.head_invocation = head_invocation
            self.reset_hang()
        now = self.clock()
        if self.hang_polled_at is not None and now - self.hang_polled_at < self.hang_poll_s:
            return None
        self.hang_polled_at = now
        found = self.hang.poll(now)
        if found is None:
            return None
        if found['kind'] == 'silent' and not self.head_container_running():
            return None
        self.suspect = found['why']
        if self.gate:  # out of rotation at once
            gate_write(self.gate, self.suspect)
        # The evidence is collected by a child with a hard deadline; the restart does not wait for it.
        job = EvidenceJob(self.cfg, found, self.runner, self.fetch, now)
        self.evidence_jobs.append(job)
        self.reset_hang()
        return self.act('%s; evidence in %s' % (found['why'], job.path), cause=found['cause'], evidence=job.path)

    def head_container_running(self) -> bool:
        cfg = self.cfg
        rc, out, _err = self.runner([cfg.get('docker') or 'docker', 'inspect', '-f', '{{.State.Running}}',
                                     cfg.get('container') or 'dgxspark-ds4-head'])
        return rc == 0 and out.strip() == 'true'

    def stop_workers(self, why: str, quiet: bool = False, block: bool = True) -> bool:
        """Stop every worker rank that still runs; True when one was stopped. quiet: the caller said why already;
        block=False: only queue the stop (the caller stops the head right after)."""
        if self.stopped_workers:
            return False
        stopped = False
        for peer in self.cfg.get('peers') or []:
            try:
                state = unit_state(peer['unit'], peer['ssh'], self.runner)
            except GuardError as exc:
                say('%s; cannot read the worker %s to stop it: %s' % (why, peer['name'], exc))
                continue
            if state['ActiveState'] in ('active', 'activating', 'reloading'):
                if not quiet:
                    say('%s: stopping %s on %s too (the pair lives and dies together)' % (why, peer['unit'], peer['name']))
                self.runner(list(peer['ssh']) + ['systemctl', 'stop'] + ([] if block else ['--no-block']) + [peer['unit']],
                            timeout=120)
                if not block:
                    self.left_active(peer)
                stopped = True
        self.stopped_workers = True
        return stopped

    def left_active(self, peer: Mapping[str, Any], tries: int = 50) -> bool:
        """After a queued stop: wait (bounded, ~5 s) until the worker unit has left 'active', so its stop has begun
        before the caller stops the head (a --no-block stop returns before systemd runs the job)."""
        for _try in range(tries):
            try:
                if unit_state(peer['unit'], peer['ssh'], self.runner)['ActiveState'] != 'active':
                    return True
            except GuardError:
                return False
            time.sleep(0.1)
        return False

    def act(self, why: str, cause: str = 'worker', evidence: str | None = None, restart: bool = True) -> str:
        """Restart the pair (the head; its prestart restarts the worker first), or stop it past the storm limit.
        restart=False: systemd restarts the head already; only count it (and stop past the limit)."""
        cfg = self.cfg
        now = self.clock()
        window = float(cfg.get('window_s', 1800))
        self.state.reload_window()
        self.restarts[:] = [t for t in self.restarts if now - t < window]
        if len(self.restarts) >= int(cfg.get('max_restarts', 3)):
            say('%s; %d pair restarts within %ds already: stopping %s instead of feeding a crash loop. '
                'Find the cause (ansible-playbook playbooks/doctor.yml), then restart the pair'
                % (why, len(self.restarts), window, cfg['head_unit']))
            self.state.event('stop', cause, why, now, evidence)
            self.runner(['systemctl', 'stop', cfg['head_unit']])
            self.stopped_workers = False
            self.stop_workers('pair guard gave up')
            return 'stop'
        self.restarts.append(now)
        self.state.event('restart', cause, why, now, evidence)
        if not restart:
            say('%s: its prestart restarts the worker first (pair restart %d of %d within %ds)'
                % (why, len(self.restarts), int(cfg.get('max_restarts', 3)), window))
        else:
            say('%s: restarting %s so both ranks restart, worker first' % (why, cfg['head_unit']))
            rc, out, err = self.runner(['systemctl', 'restart', '--no-block', cfg['head_unit']])
            if rc != 0:
                say('systemctl restart %s failed (rc %d): %s' % (cfg['head_unit'], rc, err or out))
        self.failures = {}
        self.down = {}
        return 'restart'


def gate_write(path: str, reason: str | None) -> None:
    """The health gate: the file (the reason in it) while the pair must not take requests, absent otherwise."""
    try:
        if reason:
            try:
                with open(path) as handle:
                    if handle.read().strip() == reason.strip():
                        return
            except (IOError, OSError):
                pass
            _write(path, reason.strip() + '\n')
        elif os.path.exists(path):
            os.unlink(path)
    except (IOError, OSError) as exc:
        say('health gate %s: %s' % (path, exc))


def watch_forever(cfg: Mapping[str, Any], cfg_path: str | None = None) -> None:
    loop = Watch(cfg, cfg_path=cfg_path)
    interval = float(cfg.get('interval_s', 5))
    workers = ', '.join('%s on %s' % (p['unit'], p['name']) for p in cfg.get('peers') or [])
    say('watching %s and %s every %.1fs (worker down: %d polls, unreadable: %d polls; ssh %s); hang watchdog %s' % (
        cfg['head_unit'], workers, interval, int(cfg.get('down_polls', 3)), int(cfg.get('unreachable_polls', 5)),
        'one shared connection' if any('ControlMaster=auto' in (p.get('ssh') or []) for p in loop.cfg['peers'])
        else 'one login per poll',
        ('on (%s, no progress for %ss; %ss without a KV-cache usage series)'
         % (cfg.get('metrics_url'), cfg.get('hang_after_s', 120), cfg.get('hang_after_no_kv_s') or cfg.get('hang_after_s', 120)))
        if loop.hang else 'off'))
    if loop.memory:
        say("memory guard on: PSI and MemFree of %s and %s every %.0fs (sources %s): out of rotation at PSI some avg10 >= %s%%, "
            "stopped at PSI full avg10 >= %s%% or MemFree below the kernel's min watermark (each node's own, from its "
            'zoneinfo), never for MemFree inside the reclaim band' % (
                cfg.get('head_name') or 'head', ', '.join(p['name'] for p in cfg.get('peers') or []) or 'no worker',
                loop.memory_poll_s, ', '.join(cfg.get(key) or memguard.SOURCES[key] for key in
                                              ('meminfo_path', 'psi_path', 'zoneinfo_path', 'min_free_kbytes_path')),
                loop.memory.settings['memory_gate_psi_some_avg10'], loop.memory.settings['memory_stop_psi_full_avg10']))
    if loop.canary:
        say('quality canary on: %s (model %s%s) every %ss, retried after %ss when it fails, a pair restart after %s '
            'failures in a row; skipped while saturated (max-num-seqs %s); each request %g s, the whole canary %g s; '
            'inconclusive (no gate, no restart) when a request gets no answer behind other work; timing bounds: TTFT '
            'above %s x the baseline + %s s, decode below %s x the baseline' % (
                cfg['canary_url'], cfg['canary_model'], ', TLS trusting %s' % cfg['canary_ca_file'] if cfg.get('canary_ca_file') else '',
                cfg.get('canary_interval_s', 600), cfg.get('canary_retry_s', 60), cfg.get('canary_failures_to_restart', 3),
                cfg.get('canary_max_num_seqs'), canary_request_timeout_s(cfg), canary_deadline_s(cfg),
                cfg.get('canary_max_ttft_ratio', 5.0), cfg.get('canary_ttft_slack_s', 2.0),
                cfg.get('canary_min_decode_ratio', 0.3)))
    elif cfg.get('canary'):
        say('quality canary off: no metrics_url in the config (re-run the dgxspark.ds4.vllm_service role)')
    while True:
        try:
            if loop.step() == 'restart':
                # Let the head leave "active" before the next poll looks at it again.
                time.sleep(max(interval, float(cfg.get('settle_s', 5))))
        except GuardError as exc:
            say('head unit unreadable: %s' % exc)
        time.sleep(interval)
