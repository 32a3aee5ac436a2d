# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness of the two-node vLLM pair: startup phases from log lines, rank death detection,
controller-side coordination of the head and worker pollers, HTTP checks, and secret redaction.

Pure Python 3.9+ standard library (no Ansible imports).  Used by the action plugin
``dgxspark.ds4.vllm_ready`` (controller side), the module ``dgxspark.ds4.vllm_ready`` (node side:
HTTP checks) and ``dgxspark.ds4.ds4_doctor`` (redaction).

Phases (vllm-ops.md §1.3, in order): ``loading`` (``Starting to load model``), ``shards`` (every
``Loading safetensors checkpoint shards: N% Completed | i/n``), ``weights_loaded`` (``Loading weights
took``/``Model loading took``), ``kv_cache`` (``GPU KV cache size: N tokens`` + ``Maximum concurrency for
L tokens per request: Xx``: two lines in 0.27.1, one line in 0.33), ``cuda_graphs`` (``Capturing CUDA
graphs``), ``graphs_done``, ``engine_ready`` (``init engine (...) took``), ``api_starting`` (``Starting vLLM
server on``) and ``startup_complete`` (``Application startup complete.``).
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os
from collections import deque
import re
import socket
import tempfile
import time

SETTLE_INTERVAL = 0.2
PEER_RECHECK = 0.1

PHASES = ("loading", "shards", "weights_loaded", "kv_cache", "cuda_graphs", "graphs_done", "engine_ready",
          "api_starting", "startup_complete")

_RX_LOAD = re.compile(r"Starting to load model (\S+?)(?:\.\.\.)?\s*$")
_RX_SHARDS = re.compile(r"Loading safetensors checkpoint shards:\s*(\d+)% Completed \| (\d+)/(\d+)")
_RX_WEIGHTS = re.compile(r"Loading weights took ([\d.]+) seconds|Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) seconds")
_RX_KV_TOKENS = re.compile(r"KV cache size: ([\d,]+) tokens")
_RX_CONC = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_RX_GRAPHS = re.compile(r"Capturing CUDA graphs \(([^)]*)\)")
_RX_GRAPHS_DONE = re.compile(r"Graph capturing finished in ([\d.]+) secs?, took ([\d.]+) GiB")
_RX_ENGINE = re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s")
_RX_API = re.compile(r"Starting vLLM server on (\S+)")
_RX_COMPLETE = re.compile(r"Application startup complete\.")


def _int(text):
    return int(text.replace(",", ""))


class PhaseTracker(object):
    """Follow one node's log lines; report each phase once, with the time it was reached.

    feed(line, now) returns a list of events ``{'phase', 'elapsed', 'message'}`` (``elapsed`` =
    now - start, seconds).  Shard progress is reported at most every ``shard_step`` percent (and at
    100 %).  Attributes: ``timings`` {phase: elapsed of first sight}, ``kv_cache_tokens``,
    ``max_concurrency``, ``max_concurrency_len``, ``shards`` (i, n), ``complete`` (bool).
    """

    def __init__(self, node="node", start=None, shard_step=25):
        self.node = node
        self.start = time.monotonic() if start is None else start
        self.shard_step = shard_step
        self.timings = {}
        self.kv_cache_tokens = None
        self.max_concurrency = None
        self.max_concurrency_len = None
        self.shards = None
        self.weights_gib = None
        self.complete = False
        self._last_shard_pct = -1
        self._kv_reported = False

    def _event(self, phase, now, message):
        elapsed = round(now - self.start, 2)
        self.timings.setdefault(phase, elapsed)
        return {"phase": phase, "elapsed": elapsed, "node": self.node, "message": "%s: %s (+%.1fs)" % (self.node, message, elapsed)}

    def feed(self, line, now=None):
        now = time.monotonic() if now is None else now
        out = []
        if "loading" not in self.timings:
            m = _RX_LOAD.search(line)
            if m:
                out.append(self._event("loading", now, "loading weights of %s" % m.group(1)))
        m = _RX_SHARDS.search(line)
        if m:
            pct, i, n = int(m.group(1)), int(m.group(2)), int(m.group(3))
            self.shards = (i, n)
            if i > 0 and (pct >= self._last_shard_pct + self.shard_step or i == n) and pct > self._last_shard_pct:
                self._last_shard_pct = pct
                ev = self._event("shards", now, "weights loading: shard %d/%d (%d%%)" % (i, n, pct))
                out.append(ev)
        m = _RX_WEIGHTS.search(line)
        if m and "weights_loaded" not in self.timings:
            if m.group(2):
                self.weights_gib = float(m.group(2))
                msg = "weights loaded (%s GiB, %.1f s)" % (m.group(2), float(m.group(3)))
            else:
                msg = "weights loaded (%.1f s)" % float(m.group(1))
            out.append(self._event("weights_loaded", now, msg))
        m = _RX_KV_TOKENS.search(line)
        if m:
            self.kv_cache_tokens = _int(m.group(1))
        m = _RX_CONC.search(line)
        if m:
            self.max_concurrency_len = _int(m.group(1))
            self.max_concurrency = float(m.group(2))
        if not self._kv_reported and self.kv_cache_tokens is not None and self.max_concurrency is not None:
            self._kv_reported = True
            out.append(self._event("kv_cache", now, "KV cache %s tokens, max concurrency %.2fx at %s tokens/request"
                                   % ("{:,}".format(self.kv_cache_tokens), self.max_concurrency,
                                      "{:,}".format(self.max_concurrency_len))))
        if "cuda_graphs" not in self.timings:
            m = _RX_GRAPHS.search(line)
            if m:
                out.append(self._event("cuda_graphs", now, "capturing CUDA graphs (%s)" % m.group(1)))
        if "graphs_done" not in self.timings:
            m = _RX_GRAPHS_DONE.search(line)
            if m:
                out.append(self._event("graphs_done", now, "CUDA graphs captured in %s s (%s GiB)" % (m.group(1), m.group(2))))
        if "engine_ready" not in self.timings:
            m = _RX_ENGINE.search(line)
            if m:
                out.append(self._event("engine_ready", now, "engine initialised in %s s" % m.group(1)))
        if "api_starting" not in self.timings:
            m = _RX_API.search(line)
            if m:
                out.append(self._event("api_starting", now, "API server starting on %s" % m.group(1)))
        if not self.complete and _RX_COMPLETE.search(line):
            self.complete = True
            out.append(self._event("startup_complete", now, "Application startup complete."))
        return out

    def summary(self):
        return {"timings": dict(self.timings), "kv_cache_tokens": self.kv_cache_tokens,
                "max_concurrency": self.max_concurrency, "max_concurrency_len": self.max_concurrency_len,
                "shards": list(self.shards) if self.shards else None}


# ---------------------------------------------------------------------------------------------
# rank death / restart detection from unit + container state


def unit_down(status):
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

    def __init__(self):
        self.base = None
        self.container_seen = None

    def observe(self, status):
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


def state_dir(key, base=None):
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


def publish(path, role, data, now=None):
    """Atomically write this instance's status ({'state': starting|ready|failed|done, ...})."""
    doc = dict(data)
    doc["role"] = role
    doc["updated"] = time.time() if now is None else now
    tmp = os.path.join(path, ".%s.%d.tmp" % (role, os.getpid()))
    with open(tmp, "w") as fh:
        json.dump(doc, fh)
    os.rename(tmp, os.path.join(path, "%s.json" % role))


def read_peer(path, role):
    """The other instance's last status, or None."""
    try:
        with open(os.path.join(path, "%s.json" % role)) as fh:
            return json.load(fh)
    except (IOError, OSError, ValueError):
        return None


def peer_role(role):
    return "worker" if role == "head" else "head"


def decide(role, own_reason, peer, now, started, timeout, head_ready=False, peer_grace=60.0, peer_stale=20.0):
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


def _diagnose(sources, limit=3):
    from ansible_collections.dgxspark.ds4.plugins.module_utils.failure_catalogue import diagnose, verdict
    findings = [f for f in diagnose(sources) if f.get("severity") != "info"][:limit]
    return findings, [verdict(f) for f in findings]


class ReadyInstance(object):
    """One poller instance (head or worker): feed it each poll's snapshot, it says what to do.

    step(snap, now) -> (events, decision, message); snap is the module's result (``status``, ``lines``,
    ``api_port``, ``http``).  decision as decide(), or ``settle``: our rank is going down, poll it again after
    SETTLE_INTERVAL to collect its last lines before the final report; or ``wait_peer``: the other rank is going
    down, call recheck() every PEER_RECHECK s (no poll of our node) until its poller publishes the final report.
    Publishes its own state to ``sdir`` on every step;
    on failure publishes the findings (failure catalogue over its last lines) and its last lines, so the
    other instance can report the cause from the node where it happened.
    """

    def __init__(self, role, node, sdir, timeout, started=None, peer_grace=60.0, peer_stale=20.0, keep=400, tail=40, settle=1.0):
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
        self.lines = deque(maxlen=keep)
        self.tail = tail
        self.complete_at = None
        self.ready_at = None
        self.http = None
        self.state = "starting"
        self.peer = None
        self.settle = settle
        self.fail_since = None
        self.own_reason = None
        self.exit_time = None
        self.fail_polls = 0
        self.peer_failing_since = None
        self.last_status = {}

    def step(self, snap, now=None):
        now = time.monotonic() if now is None else now
        events = []
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
            if self.fail_polls < 1:
                publish(self.sdir, self.role, {"node": self.node, "state": "failing", "reason": reason, "own_reason": reason,
                                               "exit_time": self.exit_time, "lines": list(self.lines)[-self.tail:]})
                return events, "settle", ""
        elif peer_state == "failing" and not reason:
            # the other rank is down; its poller is collecting its last lines: wait for its final report (bounded)
            if self.peer_failing_since is None:
                self.peer_failing_since = now
            if now - self.peer_failing_since < self.settle:
                publish(self.sdir, self.role, {"node": self.node, "state": "starting", "lines": list(self.lines)[-self.tail:]})
                return events, "wait_peer", ""
        decision, message = decide(self.role, reason, peer, now, self.started, self.timeout, head_ready,
                                   self.peer_grace, self.peer_stale)
        doc = {"node": self.node, "lines": list(self.lines)[-self.tail:],
               "phase": max(self.tracker.timings, key=self.tracker.timings.get) if self.tracker.timings else None}
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

    def recheck(self, now=None):
        """Re-decide on the last snapshot (no new poll): used while waiting for the other poller's final report."""
        return self.step({"status": self.last_status, "lines": []}, now)

    def result(self):
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


# ---------------------------------------------------------------------------------------------
# one poll of a node as a single shell command (no module upload: ~0.1 s over a docker/ssh connection)

_UNIT_PROPS = "ActiveState,SubState,Result,NRestarts,MainPID,ExecMainStatus,InactiveExitTimestamp,ExecMainExitTimestamp"
_MARK = "@@ds4-ready@@"


def _q(text):
    import shlex
    return shlex.quote(str(text))


def poll_command(unit, container=None, cursor="", api_host=None, api_port=None, max_lines=2000, docker_cli="docker"):
    """Shell command (POSIX sh; bash for the TCP probe) printing unit state, container state, API port state
    and the unit's journal lines since `cursor` (or since the unit's current run started).  parse_poll() reads it."""
    parts = ["echo %sshow" % _MARK,
             "systemctl show %s --timestamp=us+utc -p %s 2>&1" % (_q(unit), _UNIT_PROPS)]
    if container:
        parts += ["echo %sdocker" % _MARK,
                  "%s inspect --type container --format '{{json .Id}} {{json .State.Running}} {{json .State.StartedAt}} "
                  "{{json .State.ExitCode}}' %s 2>/dev/null" % (_q(docker_cli), _q(container))]
    if api_port:
        parts += ["echo %sport" % _MARK,
                  "timeout 2 bash -c %s 2>&1 && echo open; echo rc=$?" % _q("exec 3<>/dev/tcp/%s/%d" % (probe_host(api_host), int(api_port)))]
    jr = "journalctl -u %s -o cat --no-pager --show-cursor -n %d" % (_q(unit), int(max_lines))
    if cursor:
        jr += " --after-cursor %s" % _q(cursor)
    else:
        jr = ('since=$(systemctl show -P InactiveExitTimestamp --timestamp=unix %s 2>/dev/null); '
              'if [ -n "$since" ]; then %s --since "$since"; else %s; fi' % (_q(unit), jr, jr))
    parts += ["echo %sjournal" % _MARK, jr + " 2>&1"]
    return "; ".join(parts)


def _epoch(value):
    """'Sun 2026-11-22 08:17:14.123456 UTC' (systemctl --timestamp=us+utc) or '@1763799434' -> epoch seconds."""
    import calendar
    from datetime import datetime
    if not value or value == "n/a":
        return None
    if value.startswith("@"):
        try:
            return float(value[1:])
        except ValueError:
            return None
    m = re.search(r"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(\.\d+)? UTC", value)
    if not m:
        return None
    dt = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
    return calendar.timegm(dt.timetuple()) + float(m.group(2) or 0)


def parse_poll(stdout, unit="", cursor=""):
    """Parse poll_command() output into a snapshot: {'status', 'lines', 'cursor', 'api_port'}."""
    sections = {}
    cur = None
    for line in stdout.splitlines():
        if line.startswith(_MARK):
            cur = line[len(_MARK):]
            sections[cur] = []
        elif cur is not None:
            sections[cur].append(line)
    props = dict(ln.split("=", 1) for ln in sections.get("show", []) if "=" in ln)

    def _int(v):
        try:
            return int(v)
        except (TypeError, ValueError):
            return None
    status = {"unit": unit, "active_state": props.get("ActiveState"), "sub_state": props.get("SubState"),
              "n_restarts": _int(props.get("NRestarts")), "main_pid": _int(props.get("MainPID")),
              "exec_main_status": _int(props.get("ExecMainStatus")), "result": props.get("Result"), "since": _epoch(props.get("InactiveExitTimestamp")),
              "exit_time": _epoch(props.get("ExecMainExitTimestamp")), "container": None}
    if status["main_pid"] == 0 and status["active_state"] == "active":
        status["main_pid"] = None
    doc = " ".join(sections.get("docker", [])).split()
    if len(doc) >= 4:
        try:
            status["container"] = {"id": json.loads(doc[0]), "running": json.loads(doc[1]), "started_at": json.loads(doc[2]),
                                   "exit_code": json.loads(doc[3])}
        except ValueError:
            status["container"] = None
    snap = {"status": status}
    if "port" in sections:
        text = "\n".join(sections["port"])
        if "open" in sections["port"]:
            snap["api_port"] = "open"
        elif "refused" in text.lower():
            snap["api_port"] = "refused"
        elif "rc=124" in text:
            snap["api_port"] = "timeout"
        else:
            snap["api_port"] = "error: %s" % text.strip()[:200]
    lines = sections.get("journal", [])
    new_cursor = cursor
    if lines and lines[-1].startswith("-- cursor: "):
        new_cursor = lines.pop()[len("-- cursor: "):]
    snap["lines"] = [ln for ln in lines if ln != "-- No entries --"]
    snap["cursor"] = new_cursor
    return snap


# ---------------------------------------------------------------------------------------------
# HTTP checks (run on the head node itself)


def tcp_state(host, port, timeout=1.0):
    """'open' | 'refused' | 'timeout' | 'error: ...' for a TCP connect."""
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect((host, int(port)))
        return "open"
    except socket.timeout:
        return "timeout"
    except (ConnectionRefusedError, OSError) as e:
        if getattr(e, "errno", None) in (111, 61) or isinstance(e, ConnectionRefusedError):
            return "refused"
        return "error: %s" % e
    finally:
        s.close()


def probe_host(api_host):
    """Where to reach an API bound to api_host, from the node itself."""
    if api_host in (None, "", "0.0.0.0", "::", "*"):
        return "127.0.0.1"
    return api_host


def _http(host, port, path, api_key=None, body=None, timeout=10.0):
    """One HTTP request straight to host:port (http.client: no proxy from the environment is used)."""
    try:
        from http.client import HTTPConnection
    except ImportError:  # pragma: no cover (Python 2)
        from httplib import HTTPConnection
    headers = {"Accept": "application/json"}
    data = None
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        headers["Content-Type"] = "application/json"
    conn = HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("POST" if data is not None else "GET", path, body=data, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


def check_models(status, text, served_name, max_model_len):
    """Problems with a /v1/models answer (list of str; [] = fine)."""
    if status == 401:
        return ["/v1/models answered 401 Unauthorized: the API key given does not match the server's --api-key / VLLM_API_KEY"]
    if status != 200:
        return ["/v1/models answered HTTP %s: %s" % (status, text[:200])]
    try:
        data = json.loads(text)["data"]
    except (ValueError, KeyError, TypeError):
        return ["/v1/models answer is not a model list: %s" % text[:200]]
    ids = [d.get("id") for d in data]
    problems = []
    card = [d for d in data if d.get("id") == served_name] if served_name else data[:1]
    if not card:
        problems.append("served model name %r not in /v1/models %r" % (served_name, ids))
    elif max_model_len is not None and int(card[0].get("max_model_len") or -1) != int(max_model_len):
        problems.append("max_model_len %s != expected %s" % (card[0].get("max_model_len"), max_model_len))
    return problems


def check_chat(status, text, thinking):
    """Problems with a /v1/chat/completions answer; returns (problems, content, reasoning)."""
    if status != 200:
        return ["chat completion answered HTTP %s: %s" % (status, text[:200])], None, None
    try:
        msg = json.loads(text)["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return ["chat completion answer has no choices[0].message: %s" % text[:200]], None, None
    content = msg.get("content") or ""
    reasoning = msg.get("reasoning") or msg.get("reasoning_content")
    problems = []
    if not content.strip():
        problems.append("chat completion returned empty content")
    if thinking and not reasoning:
        problems.append("thinking is on but the reply has no reasoning field (is --reasoning-parser set?)")
    return problems, content, reasoning


def http_checks(host, port, api_key=None, served_name=None, max_model_len=None, thinking=False,
                prompt="What is the capital of France? Answer with one word.", max_tokens=64, timeout=60.0):
    """/health, /v1/models, a real chat completion.  Returns a dict: ok, problems, health, models, chat, timings."""
    res = {"ok": False, "problems": [], "timings": {}}
    t0 = time.monotonic()
    try:
        st = _http(host, port, "/health", timeout=5)[0]
    except Exception as e:  # connection reset / refused after open: still starting
        res["problems"].append("/health: %s" % e)
        return res
    res["health"] = st
    res["timings"]["health"] = round(time.monotonic() - t0, 3)
    if st != 200:
        res["problems"].append("/health answered %s (503 = the engine is dead)" % st)
        return res
    t0 = time.monotonic()
    try:
        st, text = _http(host, port, "/v1/models", api_key=api_key, timeout=10)
    except Exception as e:  # reset right after the port opened: still starting
        res["problems"].append("/v1/models: %s" % e)
        return res
    res["timings"]["models"] = round(time.monotonic() - t0, 3)
    res["models_status"] = st
    res["problems"].extend(check_models(st, text, served_name, max_model_len))
    if res["problems"]:
        return res
    body = {"model": served_name, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens}
    if served_name is None:
        body["model"] = json.loads(text)["data"][0]["id"]
    t0 = time.monotonic()
    try:
        st, text = _http(host, port, "/v1/chat/completions", api_key=api_key, body=body, timeout=timeout)
    except Exception as e:
        res["problems"].append("chat completion did not finish within %.0f s (%s): port open but no tokens = hang" % (timeout, e))
        return res
    res["timings"]["chat"] = round(time.monotonic() - t0, 3)
    problems, content, reasoning = check_chat(st, text, thinking)
    res["problems"].extend(problems)
    res["chat"] = {"status": st, "content": (content or "")[:200], "reasoning": bool(reasoning)}
    res["ok"] = not res["problems"]
    return res


# ---------------------------------------------------------------------------------------------
# redaction

_SECRET_NAME = r"[A-Za-z0-9_.-]*(?:KEY|TOKEN(?!S|IZ)|SECRET|PASSWORD|PASSWD|CREDENTIAL)[A-Za-z0-9_.-]*"
_RX_ASSIGN = re.compile(r"(?i)(\b%s\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;}]+)" % _SECRET_NAME)
_RX_DICT = re.compile(r"(?i)(['\"]%s['\"]\s*:\s*)(\"[^\"]*\"|'[^']*'|\[[^\]]*\]|[^\s,}]+)" % _SECRET_NAME)
_RX_FLAG = re.compile(r"(?i)(--(?:api[-_]key|hf[-_]token|[a-z-]*(?:token|secret|password))(?:\s+|=))(\"[^\"]*\"|'[^']*'|\S+)")
_RX_BEARER = re.compile(r"(?i)(Bearer\s+)[A-Za-z0-9._~+/=-]+")
_RX_HF = re.compile(r"\bhf_[A-Za-z0-9]{20,}\b")
REDACTED = "<redacted>"


def redact(text, extra=()):
    """Replace secret values: NAME=value / NAME: value / 'name': value where NAME contains KEY, TOKEN,
    SECRET, PASSWORD; --api-key/--hf-token values; Bearer tokens; hf_... tokens; and every literal in extra."""
    if text is None:
        return text
    for lit in extra:
        if lit:
            text = text.replace(lit, REDACTED)
    text = _RX_FLAG.sub(lambda m: m.group(1) + REDACTED, text)
    text = _RX_DICT.sub(lambda m: m.group(1) + ("'%s'" % REDACTED), text)
    text = _RX_ASSIGN.sub(lambda m: m.group(1) + REDACTED, text)
    text = _RX_BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _RX_HF.sub(REDACTED, text)
    return text
