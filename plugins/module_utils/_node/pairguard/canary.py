# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The quality canary: its child job, its time limits, and the watch loop's canary poll."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import quality_canary
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.bench_stats import parse_prometheus
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.hang import fetch_metrics, metric_total
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.jobs import (
    ChildJob, _utc_stamp, _write, evidence_path)
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.pair import load_record, say

if TYPE_CHECKING:
    from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.state import GuardState


def run_canary_child(cfg: Mapping[str, Any], result_path: str) -> None:
    """The canary's requests (quality_canary.run_canary), in the CanaryJob's child: the result as JSON in result_path.
    TLS fronts: the CA the fronts' certificates chain to (canary_ca_file) is the one trusted."""
    if cfg.get('canary_ca_file'):
        os.environ['SSL_CERT_FILE'] = cfg['canary_ca_file']

    def gauges() -> dict[str, float | None]:
        """The head's queue gauges, read while a canary request awaits its answer (load or decay?)."""
        samples = parse_prometheus(fetch_metrics(cfg['metrics_url'], float(cfg.get('metrics_timeout_s', 10))))
        return dict((name, metric_total(samples, name)) for name in CANARY_GAUGES)
    probe = gauges if cfg.get('metrics_url') else None
    timeout = canary_request_timeout_s(cfg)
    result = quality_canary.run_canary(
        cfg['canary_url'], cfg['canary_model'], api_key=cfg.get('canary_api_key') or None,
        tools=bool(cfg.get('canary_tools', True)), tool_choice=cfg.get('canary_tool_choice') or 'auto',
        timeout=timeout, decode_tokens=int(cfg.get('canary_decode_tokens', 64)), probe=probe,
        probe_every_s=max(0.5, min(float(cfg.get('hang_poll_s', 5)), timeout / 4.0)))
    tmp = result_path + '.tmp'
    _write(tmp, json.dumps(result, sort_keys=True))
    os.rename(tmp, result_path)


class CanaryJob(ChildJob):
    """One canary in a child with a hard deadline (canary_request_timeout_s per request, the whole canary bounded by
    canary_deadline_s); result() reads what it found, or names the timeout or the crash as the failure."""

    def __init__(self, cfg: Mapping[str, Any], monotonic: Callable[[], float] = time.monotonic, work: Callable[[], object] | None = None,
                 limit: float | None = None) -> None:
        self.result_path = cfg.get('canary_result_file') or os.path.join(
            os.path.dirname(cfg.get('state_file') or '/tmp/x'), 'canary-result.json')
        if os.path.exists(self.result_path):
            os.unlink(self.result_path)
        self.cut_why: str | None = None
        ChildJob.__init__(self, work or (lambda: run_canary_child(cfg, self.result_path)),
                          canary_deadline_s(cfg) if limit is None else limit, monotonic)

    def cut(self, deadline: bool, status: int | None) -> None:
        self.cut_why = ('the canary did not finish within %g s' % self.limit if deadline
                        else 'the canary process failed (wait status %s)' % status)

    def result(self) -> dict[str, Any]:
        if self.ok():
            result = load_record(self.result_path)
            if 'ok' in result:
                return result
            self.cut_why = 'no result in %s' % self.result_path
        return {'ok': False, 'requests': [], 'skipped_checks': [], 'ttft_s': None, 'decode_tps': None, 'failures': [
            {'request': 'canary', 'check': 'deadline' if 'within' in (self.cut_why or '') else 'canary',
             'excerpt': '', 'detail': self.cut_why or 'the canary process ended without a result'}]}


# The head's queue gauges the canary reads: what it waits behind (quality_canary.busy_reason).
CANARY_GAUGES = ('vllm:num_requests_running', 'vllm:num_requests_waiting')


def canary_request_timeout_s(cfg: Mapping[str, Any]) -> float:
    """Each canary request's read timeout: canary_request_timeout_s as the role derived it from the recipe (the longest
    engine step, as the hang window; vllm_service_canary_timeout_s its floor), else canary_timeout_s."""
    return float(cfg.get('canary_request_timeout_s') or cfg.get('canary_timeout_s', 120))


def canary_deadline_s(cfg: Mapping[str, Any]) -> float:
    """The whole canary's bound: as the role rendered it, else every request (2 known answers, the tool call, the
    decode) at its timeout, plus 10 s."""
    return float(cfg.get('canary_deadline_s') or 4 * canary_request_timeout_s(cfg) + 10)


class CanaryWatch(object):
    """The watch loop's quality canary poll (mixed into watch.Watch)."""

    # what it uses of watch.Watch
    cfg: dict[str, Any]
    cfg_path: str | None
    clock: Callable[[], float]
    state: GuardState
    suspect: str | None
    fetch: Any  # the head's /metrics text (a callable), None without metrics_url (the canary is off then)
    canary: bool
    canary_job: CanaryJob | None
    canary_due: float | None
    canary_head: str | None
    canary_metrics: str
    canary_load: int
    canary_busy: str
    canary_probed_at: float | None
    canary_ranks: dict[str, str]
    canary_job_factory: Callable[[dict[str, Any]], CanaryJob]
    act: Callable[..., str]

    def canary_reset(self, head_invocation: str) -> None:
        """A new head (or the first seen): a canary still running is for the old one; the first canary of this head
        runs as soon as it serves (its baseline, taken after readiness)."""
        if self.canary_job is not None:
            self.canary_job.kill()
            self.canary_job = None
        self.reload_canary_settings()
        self.canary_head = head_invocation
        self.state.canary_new_head(head_invocation)
        self.canary_due = self.clock()

    def reload_canary_settings(self) -> None:
        """The canary's settings as the config file holds them now: a switch (another served name, another API port)
        rewrites it before it restarts the pair, and this guard's own restart (the role's handler) comes after the
        new head serves. A config that no longer passes the check keeps the settings in force."""
        if not self.cfg_path:
            return
        fresh = load_record(self.cfg_path)
        keys = [k for k in fresh if k.startswith('canary')]
        if keys and not quality_canary.check_config(fresh):
            changed = [k for k in keys if self.cfg.get(k) != fresh[k] and k != 'canary_api_key']
            self.cfg.update((k, fresh[k]) for k in keys)
            if changed:
                say('quality canary: settings reloaded for the new head (%s)' % ', '.join(sorted(changed)))

    def watch_canary(self, ranks: Mapping[str, str] | None = None) -> str | None:
        """The quality canary's poll (quality_canary.py): one canary at a time in a child; a failure takes the pair out
        of rotation at once (health gate) and restarts it after canary_failures_to_restart in a row (storm limit).
        ranks: every rank's invocation when the pair is whole at this poll, else None: a canary is started and judged
        only on a whole pair, and dropped when a rank restarted while it ran (the restart explains what it saw)."""
        if not self.canary:
            return None
        cfg, d = self.cfg, self.state.data
        now = self.clock()
        if d['canary_consecutive'] and not self.suspect:
            self.suspect = 'quality canary failed %d time(s) in a row: %s' % (d['canary_consecutive'], d['last_canary_why'])
        if ranks is None:
            return None
        if self.canary_job is not None:
            if not self.canary_job.poll():
                self.canary_probe(now)
                return None
            job, self.canary_job = self.canary_job, None
            if ranks != self.canary_ranks:
                say('quality canary dropped: a rank restarted while it ran (%s)' % ', '.join(
                    sorted(k for k in set(ranks) | set(self.canary_ranks) if ranks.get(k) != self.canary_ranks.get(k))))
                self.canary_due = now + float(cfg.get('canary_retry_s', 60))
                return None
            return self.canary_done(job.result(), now)
        if self.canary_due is None or now < self.canary_due:
            return None
        try:
            text = self.fetch()
        except Exception:  # pylint: disable=broad-except
            # not serving yet (loading) or not answering: readiness's and the hang watchdog's business, not a canary's
            self.canary_due = now + float(cfg.get('hang_poll_s', 5))
            return None
        samples: dict[str, Any] = dict((name, metric_total(parse_prometheus(text), name))
                                       for name in ('vllm:num_requests_running', 'vllm:num_requests_waiting'))
        skip = quality_canary.should_skip(samples, cfg.get('canary_max_num_seqs'))
        if skip:
            self.state.canary_skip(skip, now)
            self.canary_due = now + float(cfg.get('canary_retry_s', 60))
            return None
        self.canary_metrics = text
        self.canary_load = int(sum(v or 0 for v in samples.values()))
        self.canary_busy, self.canary_probed_at = '', now
        self.canary_due = None
        self.canary_ranks = dict(ranks)
        self.canary_job = self.canary_job_factory(cfg)
        d['last_canary_started_at'], d['last_canary_load'] = now, self.canary_load
        self.state.save_canary()
        return None

    def canary_probe(self, now: float) -> None:
        """While the canary's child runs: the head's queue gauges every hang_poll_s, kept when they show other work
        (quality_canary.busy_reason). A canary cut at its deadline while the engine was busy is inconclusive, and the
        timings of one that saw the pair busy are not judged."""
        if self.canary_busy or (self.canary_probed_at is not None
                                and now - self.canary_probed_at < float(self.cfg.get('hang_poll_s', 5))):
            return
        self.canary_probed_at = now
        try:
            parsed = parse_prometheus(self.fetch())
        except Exception:  # pylint: disable=broad-except
            return
        self.canary_busy = quality_canary.busy_reason(dict((n, metric_total(parsed, n)) for n in CANARY_GAUGES)) or ''

    def canary_done(self, result: dict[str, Any], now: float) -> str | None:
        """A finished canary: judged against the head's baseline (the first passing canary sets it). One whose request
        got no answer from the serving path (refused, reset, 502/503/504) is inconclusive: counted as skipped. One whose
        request got no answer while the engine was busy with other work (a long prefill it queued behind: the
        real-vllm-on-device notes, Part 1b), or that was cut at its deadline so, is inconclusive: counted apart, no gate,
        no restart. An answer that arrived is judged, busy or not."""
        cfg, d = self.cfg, self.state.data
        if result.get('unreachable'):
            self.state.canary_skip('unreachable: %s' % result['unreachable'][0], now)
            self.canary_due = now + float(cfg.get('canary_retry_s', 60))
            return None
        busy = result.get('busy') or self.canary_busy
        failures = result.get('failures') or []
        if self.canary_busy and failures and all(f.get('check') == 'deadline' for f in failures):
            why = 'the canary did not finish within its deadline (%g s) while %s' % (canary_deadline_s(cfg), self.canary_busy)
            result = dict(result, failures=[], inconclusive=[why])
        if result.get('inconclusive') and not result.get('failures'):
            why = 'quality canary inconclusive (the pair is busy; not a failure: no gate, no restart): %s' % (
                result['inconclusive'][0])
            self.state.canary_inconclusive(why, now)
            self.canary_due = now + float(cfg.get('canary_retry_s', 60))
            say('%s; next canary in %ss' % (why, cfg.get('canary_retry_s', 60)))
            return None
        settings = dict((k, cfg[k]) for k in quality_canary.DEFAULTS if k in cfg)
        baseline = d['canary_baseline']
        # Time to first token and decode rate follow the load (batching, a prefill it waited behind): they are judged,
        # and the baseline taken, only for a canary that found the pair idle and saw it idle while it ran; with other
        # requests in flight only the answers count.
        idle = self.canary_load == 0 and not busy
        if idle:
            quality_canary.judge_timings(result, baseline, settings)
        else:
            result['skipped_checks'] = list(result.get('skipped_checks') or []) + [
                'timings: %s (judged on an idle pair only)' % (
                    '%d request(s) in flight when the canary started' % self.canary_load if self.canary_load else busy)]
        if result.get('ok'):
            if not baseline and idle:
                d['canary_baseline'] = {'ttft_s': result['ttft_s'], 'decode_tps': result['decode_tps'], 'at': now}
            was = d['canary_consecutive']
            self.state.canary_run(result, now)
            if was:
                say('quality canary passed again after %d failure(s): pair back in rotation' % was)
            self.suspect = None
            self.canary_due = now + float(cfg.get('canary_interval_s', 600))
            return None
        path = evidence_path(cfg, now, 'canary')
        try:
            try:
                after = self.fetch()
            except Exception as exc:  # pylint: disable=broad-except
                after = '# /metrics did not answer after the canary: %s: %s\n' % (type(exc).__name__, exc)
            _write(os.path.join(path, 'canary.json'), json.dumps(dict(
                result, baseline=baseline, settings=settings, at=now, at_utc=_utc_stamp(now), url=cfg.get('canary_url'),
                model=cfg.get('canary_model')), indent=1, sort_keys=True))
            _write(os.path.join(path, 'metrics-before.txt'), self.canary_metrics or '# no scrape before the canary\n')
            _write(os.path.join(path, 'metrics-after.txt'), after)
        except (IOError, OSError) as exc:
            say('quality canary evidence %s: %s' % (path, exc))
        self.state.canary_run(result, now, evidence=path)
        count, need = d['canary_consecutive'], int(cfg.get('canary_failures_to_restart', 3))
        why = 'quality canary failed (%d of %d in a row before a pair restart): %s' % (count, need, d['last_canary_why'])
        self.suspect = why
        if count >= need:
            return self.act('%s; evidence in %s' % (why, path), cause='quality_canary', evidence=path)
        say('%s: pair out of rotation (health gate); evidence in %s; next canary in %ss'
            % (why, path, cfg.get('canary_retry_s', 60)))
        self.canary_due = now + float(cfg.get('canary_retry_s', 60))
        return None
