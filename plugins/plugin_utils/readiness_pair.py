# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness pair coordination: the head and worker pollers of one vllm_ready task, on the controller.

Pure Python standard library (no Ansible imports).  Used by the action plugin ``dgxspark.ds4.vllm_ready``.

  unit_down(status) / NodeWatch     a rank exited or restarted, from the node probe's unit + container state
                                    (``node_probe.unit_state`` / ``node_probe.parse_poll``)
  state_dir / publish / read_peer   the controller-side directory the two poller instances share (one JSON file each)
  decide(...)                       what one instance does next, given its own rank and the other's last report
  ReadyInstance                     one poller: feeds each poll's lines to a ``readiness_phases.PhaseTracker``,
                                    watches its rank, publishes its state, and on failure the failure catalogue's
                                    findings over the lines of the rank that went down first
"""


import json
import os
import re
import tempfile
import time
from collections import deque
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.readiness_phases import PhaseTracker

SETTLE_INTERVAL = 0.2
# A rank went down and its lines match no known cause: the journal may not hold them yet (journald drains a
# process's stdout stream on its own schedule: under load the cause can land after systemd's "Main process exited"),
# or they belong to an earlier run of this start (Restart=on-failure). Re-read the unit's whole journal since the
# wait began, WIDEN_INTERVAL apart, up to WIDEN_POLLS times, before reporting "no known cause" (a rank killed with
# no word, SIGKILL or OOM, is reported about WIDEN_POLLS x WIDEN_INTERVAL later than its death: ~2 s).
WIDEN_INTERVAL = 0.7
WIDEN_POLLS = 3
PEER_RECHECK = 0.1


def unit_down(status: dict[str, Any]) -> str | None:
    """Why the unit/container is not (going to be) running, or None.

    status: {'active_state', 'sub_state', 'n_restarts', 'main_pid', 'exec_main_status',
    'container': {'running', 'id', 'started_at'} or None}.
    """
    active = status.get("active_state")
    sub = status.get("sub_state")
    if active in ("failed", "inactive"):
        why = status.get("result")
        if why == "start-limit-hit":
            return ("unit %s hit its start limit (StartLimitBurst): systemd stopped restarting it; find the cause below, then "
                    "systemctl reset-failed" % status.get("unit", ""))
        extra = ", result %s" % why if why and why != "success" else ""
        return "unit %s is %s/%s (last exit status %s%s)" % (status.get("unit", ""), active, sub, status.get("exec_main_status"), extra)
    if active == "activating" and sub == "auto-restart":
        return "unit %s exited (status %s) and waits to be restarted" % (status.get("unit", ""), status.get("exec_main_status"))
    if active == "deactivating":
        return "unit %s is stopping" % status.get("unit", "")
    return None


class NodeWatch(object):
    """Detect that a rank exited or restarted since the first observation.

    observe(status) returns None while the node is alive (starting or running), else a one-line reason.
    A rank counts as dead when: the unit is failed/inactive/stopping/auto-restart, NRestarts grew, the
    unit's main PID changed, or the container that was running stopped or was replaced.
    """

    def __init__(self) -> None:
        self.base: dict[str, Any] | None = None
        self.container_seen: str | None = None

    def observe(self, status: dict[str, Any]) -> str | None:
        reason = unit_down(status)
        if reason:
            return reason
        if self.base is None:
            self.base = dict(status)
        base = self.base
        if status.get("n_restarts") is not None and base.get("n_restarts") is not None and status["n_restarts"] > base["n_restarts"]:
            return "unit %s restarted (NRestarts %s -> %s)" % (status.get("unit", ""), base["n_restarts"], status["n_restarts"])
        if base.get("main_pid") and status.get("main_pid") and status["main_pid"] != base["main_pid"]:
            return "unit %s main process changed (pid %s -> %s): it restarted" % (status.get("unit", ""), base["main_pid"], status["main_pid"])
        cont = status.get("container") or {}
        if cont.get("running"):
            if self.container_seen and cont.get("id") != self.container_seen:
                return "container replaced (%s -> %s): the rank restarted" % (self.container_seen[:12], (cont.get("id") or "")[:12])
            self.container_seen = cont.get("id")
        elif self.container_seen:
            return "container %s exited" % self.container_seen[:12]
        return None


# ---------------------------------------------------------------------------------------------
# coordination of the head and worker poller instances on the controller


def wait_round(base: str, task_path: str, node: str) -> str:
    """This rank's wait: the task's file and line with how many times this host has run it in this controller run
    (counted in a file per task and host under `base`, the run's own local temporary directory; one worker per host runs
    a task at a time). Both ranks of a pair run the readiness task as often, so their nth runs meet under one key, new
    for every run of the task (an include run again, a rolling operation's next pass): no task has to draw a round."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", "%s-%s" % (task_path, node))
    path = os.path.join(base, "dgxspark-ds4-ready-runs-%s" % safe)
    try:
        with open(path) as handle:
            runs = int(handle.read().strip() or 0)
    except (OSError, ValueError):
        runs = 0
    runs += 1
    os.makedirs(base, 0o700, exist_ok=True)
    _replace(path, str(runs))
    return "%s-%d" % (task_path, runs)


def _replace(path: str, text: str) -> None:
    """text as the file path, atomically (a hidden temporary file beside it, renamed): a reader sees all of it or the
    file as it was."""
    tmp = os.path.join(os.path.dirname(path), ".%s.%d.tmp" % (os.path.basename(path), os.getpid()))
    with open(tmp, "w") as handle:
        handle.write(text)
    os.rename(tmp, path)


def state_dir(key: Any, base: str | None = None) -> str:
    """Controller-side directory shared by the poller instances of one task run."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", str(key))
    path = os.path.join(base or tempfile.gettempdir(), "dgxspark-ds4-ready-%s" % safe)
    if not os.path.isdir(path):
        try:
            os.makedirs(path, 0o700)
        except OSError:
            if not os.path.isdir(path):
                raise
    return path


def publish(path: str, role: str, data: dict[str, Any], now: float | None = None) -> None:
    """Atomically write this instance's status ({'state': starting|ready|failed|done, ...})."""
    doc = dict(data)
    doc["role"] = role
    doc["updated"] = time.time() if now is None else now
    _replace(os.path.join(path, "%s.json" % role), json.dumps(doc))


def read_peer(path: str, role: str) -> Any:
    """The other instance's last status, or None."""
    try:
        with open(os.path.join(path, "%s.json" % role)) as fh:
            return json.load(fh)
    except (IOError, OSError, ValueError):
        return None


def peer_role(role: str) -> str:
    return "worker" if role == "head" else "head"


def decide(role: str, own_reason: str | None, peer: dict[str, Any] | None, now: float, started: float, timeout: float,
           head_ready: bool = False, peer_grace: float = 60.0, peer_stale: float = 20.0) -> tuple[str, str]:
    """What this instance does next: ('continue'|'ready'|'done'|'fail', message).

    own_reason: NodeWatch reason for this node or None.  peer: read_peer() or None.
    head_ready: (head only) every HTTP check passed.
    """
    if own_reason:
        return "fail", own_reason
    if peer is not None and peer.get("state") in ("failed", "failing"):
        return "fail", "%s failed: %s" % (peer.get("node") or peer_role(role), peer.get("own_reason") or peer.get("reason", "?"))
    if role == "head" and head_ready:
        return "ready", "ready"
    if role == "worker" and peer is not None and peer.get("state") == "ready":
        return "done", "head is ready"
    if peer is None and now - started > peer_grace:
        if role == "worker":
            return "fail", ("no vllm_ready instance for the head reported within %.0f s: run the task on both hosts "
                            "(no --limit to one node)" % peer_grace)
    if peer is not None and peer.get("state") in ("starting",) and now - peer.get("updated", now) > peer_stale:
        return "fail", "the %s's poller stopped reporting %.0f s ago" % (peer_role(role), now - peer.get("updated", now))
    if now - started > timeout:
        return "fail", "not ready after %.0f s (timeout)" % timeout
    return "continue", ""


def _diagnose(sources: list[dict[str, Any]], limit: int = 3) -> tuple[list[dict[str, Any]], list[Any]]:
    from ansible_collections.dgxspark.ds4.plugins.module_utils._node.failure_catalogue import diagnose, verdict
    findings = [f for f in diagnose(sources) if f.get("severity") != "info"][:limit]
    return findings, [verdict(f) for f in findings]


class ReadyInstance(object):
    """One poller instance (head or worker): feed it each poll's snapshot, it says what to do.

    step(snap, now) -> (events, decision, message); snap is the module's result (``status``, ``lines``,
    ``api_port``, ``http``).  decision as decide(), or ``settle``: our rank is going down, poll it again after
    SETTLE_INTERVAL to collect its last lines before the final report; ``widen``: still no known cause in them,
    poll again after WIDEN_INTERVAL with ``since`` = ``wall_started`` (the whole journal of this wait; the step
    gets ``window: True`` and the lines replace the collected ones); or ``wait_peer``: the other rank is going
    down, call recheck() every PEER_RECHECK s (no poll of our node) until its poller publishes the final report.
    Publishes its own state to ``sdir`` on every step;
    on failure publishes the findings (failure catalogue over its last lines) and its last lines, so the
    other instance can report the cause from the node where it happened.
    """

    def __init__(self, role: str, node: str | None, sdir: str, timeout: float, started: float | None = None,
                 peer_grace: float = 60.0, peer_stale: float = 20.0, keep: int = 400, tail: int = 40,
                 settle: float = 1.0 + WIDEN_POLLS * WIDEN_INTERVAL) -> None:
        self.role = role
        self.node = node or role
        self.sdir = sdir
        self.timeout = timeout
        self.started = time.monotonic() if started is None else started
        self.wall_started = time.time()
        self.peer_grace = peer_grace
        self.peer_stale = peer_stale
        self.tracker = PhaseTracker(self.node, self.started)
        self.watch = NodeWatch()
        self.lines: deque[str] = deque(maxlen=keep)
        self.tail = tail
        self.complete_at: float | None = None
        self.ready_at: float | None = None
        self.http: dict[str, Any] | None = None
        self.state = "starting"
        self.peer: dict[str, Any] | None = None
        self.settle = settle
        self.fail_since: float | None = None
        self.own_reason: str | None = None
        self.exit_time: float | None = None
        self.fail_polls = 0
        self.widen_left = WIDEN_POLLS
        self.peer_failing_since: float | None = None
        self.last_status: dict[str, Any] = {}

    def step(self, snap: dict[str, Any], now: float | None = None) -> tuple[list[dict[str, Any]], str, str]:
        now = time.monotonic() if now is None else now
        events: list[dict[str, Any]] = []
        if snap.get("window"):
            # the whole journal since the wait began (a widened re-read): it replaces what the polls collected
            self.lines = deque(snap.get("lines") or [], maxlen=self.lines.maxlen)
        else:
            for line in snap.get("lines") or []:
                self.lines.append(line)
                events.extend(self.tracker.feed(line, now))
        if self.tracker.complete and self.complete_at is None:
            self.complete_at = now
            self.complete_wall = time.time() - (time.monotonic() - now)
        self.last_status = snap.get("status") or {}
        down = self.watch.observe(self.last_status)
        reason = None
        head_ready = False
        http = snap.get("http")
        if self.role == "head" and http is not None:
            self.http = http
            if http.get("ok"):
                head_ready = True
            elif http.get("health") == 503 or http.get("models_status") is not None or http.get("chat"):
                reason = reason or "API checks failed: %s" % "; ".join(http.get("problems") or ["?"])
            elif any("hang" in p for p in http.get("problems") or []):
                reason = reason or "; ".join(http["problems"])
        peer = read_peer(self.sdir, peer_role(self.role))
        if peer is not None and peer.get("updated") is not None:
            # stale check uses wall clock in the file; convert to our monotonic scale
            peer = dict(peer)
            peer["updated"] = now - max(0.0, time.time() - peer["updated"])
        self.peer = peer
        if down and self.fail_since is None:
            # our rank went down: poll once more (after SETTLE_INTERVAL) so its last log lines are in; when both
            # ranks are down, the one that exited first (exit timestamps) leads the diagnosis
            self.fail_since, self.own_reason, self.fail_polls = now, down, 0
            self.exit_time = (snap.get("status") or {}).get("exit_time") or time.time()
        elif self.fail_since is not None:
            self.fail_polls += 1
        peer_state = peer.get("state") if peer else None
        if self.fail_since is not None:
            reason = self.own_reason
            own_lines = [{"lines": list(self.lines), "node": self.node, "role": self.role, "source": None}]
            if self.fail_polls < 1 or (self.widen_left > 0 and not _diagnose(own_lines)[0]):
                publish(self.sdir, self.role, {"node": self.node, "state": "failing", "reason": reason, "own_reason": reason,
                                               "exit_time": self.exit_time, "lines": list(self.lines)[-self.tail:]})
                if self.fail_polls < 1:
                    return events, "settle", ""
                self.widen_left -= 1
                return events, "widen", ""
        elif peer_state == "failing" and not reason:
            # the other rank is down; its poller is collecting its last lines: wait for its final report (bounded)
            if self.peer_failing_since is None:
                self.peer_failing_since = now
            if now - self.peer_failing_since < self.settle:
                publish(self.sdir, self.role, {"node": self.node, "state": "starting", "lines": list(self.lines)[-self.tail:]})
                return events, "wait_peer", ""
        decision, message = decide(self.role, reason, peer, now, self.started, self.timeout, head_ready,
                                   self.peer_grace, self.peer_stale)
        timings = self.tracker.timings
        doc: dict[str, Any] = {"node": self.node, "lines": list(self.lines)[-self.tail:],
                               "phase": max(timings, key=lambda phase: timings[phase]) if timings else None}
        if decision == "fail":
            self.state = "failed"
            self.failed_wall = time.time()
            # did the other rank itself go down (not merely fail because of us)?  who exited first leads
            peer_down = bool(peer and peer.get("state") in ("failed", "failing") and peer.get("own_reason"))
            peer_first = peer_down and (not reason or (peer.get("exit_time") or 0) <= (self.exit_time or 0))
            peer_failed = peer_first or bool(not reason and peer and peer.get("state") in ("failed", "failing"))
            own = {"lines": list(self.lines), "node": self.node, "role": self.role, "source": None}
            sources = [own]
            if peer and peer.get("lines"):
                other = {"lines": peer["lines"], "node": peer.get("node"), "role": peer.get("role"), "source": None}
                sources = [other, own] if peer_failed else [own, other]
            self.findings, self.verdicts = _diagnose(sources)
            if reason and peer_first:
                message = "%s failed first: %s; then %s: %s" % (peer.get("node"), peer.get("own_reason"), self.node, message)
            elif reason and peer_down:
                message = "%s; then %s failed: %s" % (message, peer.get("node"), peer.get("own_reason"))
            self.failed_lines = (peer.get("lines") or []) if peer_failed else doc["lines"]
            self.reason = message
            doc.update(state="failed", reason=message, findings=self.findings, verdicts=self.verdicts, exit_time=self.exit_time,
                       own_reason=self.own_reason)
        elif decision == "ready":
            self.state = "ready"
            self.ready_at = time.monotonic()
            doc.update(state="ready")
        elif decision == "done":
            self.state = "done"
            doc.update(state="done")
        else:
            doc.update(state="starting")
        publish(self.sdir, self.role, doc)
        return events, decision, message

    def recheck(self, now: float | None = None) -> tuple[list[dict[str, Any]], str, str]:
        """Re-decide on the last snapshot (no new poll): used while waiting for the other poller's final report."""
        return self.step({"status": self.last_status, "lines": []}, now)

    def result(self) -> dict[str, Any]:
        s = self.tracker.summary()
        out = {"phases": s["timings"], "kv_cache_tokens": s["kv_cache_tokens"], "max_concurrency": s["max_concurrency"],
               "max_concurrency_len": s["max_concurrency_len"], "shards": s["shards"], "node": self.node, "role": self.role}
        if self.ready_at is not None:
            out["time_to_ready"] = round(self.ready_at - self.started, 2)
            if self.complete_at is not None:
                out["ready_after_startup_complete"] = round(self.ready_at - self.complete_at, 2)
        if self.http is not None:
            out["http"] = self.http
        if self.state == "failed":
            out["reported_at"] = round(self.failed_wall, 3)
            out.update(reason=self.reason, findings=self.findings, verdicts=self.verdicts, lines=self.failed_lines)
        return out
