# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_ready poll logic (readiness.ReadyInstance, as the action plugin drives it) against the vLLM
simulator: head + headless worker on 127.0.0.1, one poller thread per rank, coordinating through a state dir.

Measures (printed, run with -s to see them):
  (a) "Application startup complete." read from the head's log -> the head poller returns ready
  (b) the worker's process exits -> the head poller reports the failure
The per-node snapshot is built here from the process state (exit = unit failed) and the new log lines,
in place of the module's systemctl/docker/journalctl poll.
"""


import os
import signal
import subprocess
import sys
import threading
import time

import pytest

_LINK_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".collections")
if os.path.isdir(_LINK_ROOT) and _LINK_ROOT not in sys.path:
    sys.path.insert(0, _LINK_ROOT)

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe
from ansible_collections.dgxspark.ds4.plugins.module_utils._readiness import readiness_http
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import readiness_pair

TESTS_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
VLLM = os.path.join(TESTS_DIR, "vllm_sim", "bin", "vllm")
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)
from vllm_sim import standin  # noqa: E402  pylint: disable=import-error,wrong-import-position
INTERVAL = 0.5  # the action's default poll interval
ENV = {"PYTHONUNBUFFERED": "1", "VLLM_SIM_PYTHON": sys.executable, "VLLM_SIM_STATS_INTERVAL_S": "0",
       "VLLM_SIM_RENDEZVOUS_TIMEOUT_S": "20", "VLLM_SIM_TOKENS_PER_S": "500", "VLLM_SIM_ORPHAN_EXIT_S": "-1",
       # the simulator checks its model at start: /models/ds4 lives in a stand-in container root
       "VLLM_SIM_ROOT": standin.temp_root()}


from ports import free_port as _free_port  # noqa: E402  pylint: disable=import-error,wrong-import-position,unused-import


class Node(object):
    """A simulator rank: its lines (with the monotonic time each was read) and its exit time."""

    def __init__(self, args, env=None):
        full = dict(os.environ)
        full.pop("VLLM_API_KEY", None)
        full.update(ENV)
        full.update(env or {})
        self.proc = subprocess.Popen([VLLM, "serve", "/models/ds4"] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=full, text=True)
        self.lines = []
        self.seen = {}
        self.exited_at = None
        self.exit_wall = None
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.lock:
                self.lines.append(line.rstrip("\n"))
                if "Application startup complete." in line:
                    self.seen.setdefault("complete", time.monotonic())
        self.proc.wait()
        self.exited_at = time.monotonic()
        self.exit_wall = time.time()

    def snapshot(self, pos):
        with self.lock:
            new = self.lines[pos:]
        alive = self.proc.poll() is None
        status = {"unit": "sim", "active_state": "active" if alive else "failed", "sub_state": "running" if alive else "failed",
                  "n_restarts": 0, "main_pid": self.proc.pid, "exec_main_status": self.proc.returncode,
                  "exit_time": self.exit_wall,
                  "container": {"id": "sim%d" % self.proc.pid, "running": alive}}
        return {"status": status, "lines": new}, pos + len(new)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def poller(role, node, sdir, out, port=None, timeout=60.0, served="ds4", max_len=8192, thinking=True, chat_timeout=10):
    inst = readiness_pair.ReadyInstance(role, "sim-" + role, sdir, timeout)
    pos = 0
    events = []
    decision = "continue"
    while True:
        t0 = time.monotonic()
        if decision == "widen":  # as the action does: the whole journal of the wait, replacing what was collected
            snap, pos = node.snapshot(0)
            snap["window"] = True
        else:
            snap, pos = node.snapshot(pos)
        if role == "head":  # as the module does with checks=true: probe the port, run the checks once it listens
            if node_probe.tcp_state("127.0.0.1", port) == "open":
                snap["http"] = readiness_http.http_checks("127.0.0.1", port, served_name=served, max_model_len=max_len,
                                                          thinking=thinking, timeout=chat_timeout)
        ev, decision, msg = inst.step(snap)
        while decision == "wait_peer":
            time.sleep(readiness_pair.PEER_RECHECK)
            more, decision, msg = inst.recheck()
            ev.extend(more)
        events.extend(ev)
        if decision not in ("continue", "settle", "widen"):
            out[role] = {"decision": decision, "msg": msg, "at": time.monotonic(), "result": inst.result(), "events": events}
            return
        pause = {"settle": readiness_pair.SETTLE_INTERVAL, "widen": readiness_pair.WIDEN_INTERVAL}.get(decision, INTERVAL)
        time.sleep(max(0.0, pause - (time.monotonic() - t0)))


def _pair(worker_env=None):
    mport, api = _free_port(), _free_port()
    dist = ["--tensor-parallel-size", "2", "--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", str(mport)]
    common = ["--served-model-name", "ds4", "--max-model-len", "8192", "--reasoning-parser", "deepseek_v4",
              "--default-chat-template-kwargs", '{"thinking": true}']
    worker = Node(common + dist + ["--node-rank", "1", "--headless"], env=worker_env)
    head = Node(common + dist + ["--node-rank", "0", "--port", str(api), "--host", "127.0.0.1"])
    return head, worker, api


def _run_pollers(tmp_path, head, worker, api, timeout=60.0):
    sdir = readiness_pair.state_dir("it", str(tmp_path))
    out = {}
    threads = [threading.Thread(target=poller, args=("head", head, sdir, out, api, timeout)),
               threading.Thread(target=poller, args=("worker", worker, sdir, out, None, timeout))]
    for t in threads:
        t.start()
    return out, threads


def test_ready_then_worker_death(tmp_path):
    head, worker, api = _pair()
    try:
        out, threads = _run_pollers(tmp_path, head, worker, api)
        for t in threads:
            t.join(60)
        assert out["head"]["decision"] == "ready", out["head"]
        assert out["worker"]["decision"] == "done", out["worker"]
        res = out["head"]["result"]
        phases = [e["phase"] for e in out["head"]["events"]]
        for ph in ("loading", "shards", "weights_loaded", "kv_cache", "cuda_graphs", "engine_ready", "startup_complete"):
            assert ph in phases, phases
        assert res["kv_cache_tokens"] > 0 and res["max_concurrency"] > 0
        assert res["http"]["ok"] and res["http"]["chat"]["reasoning"]
        a = out["head"]["at"] - head.seen["complete"]
        print("\n(a) 'Application startup complete.' -> ready: %.2f s (poll interval %.1f s; checks %s)"
              % (a, INTERVAL, res["http"]["timings"]))
        for e in out["head"]["events"]:
            print("   ", e["message"])
        assert a < INTERVAL + 3.0

    finally:
        head.stop()
        worker.stop()


@pytest.mark.parametrize("victim", ["worker", "head"])
def test_rank_killed_during_load(tmp_path, victim):
    """(b) one rank's container is killed while the weights load (slowed start: time scale 4); the other rank's poller
    reports it, naming the dead rank."""
    head, worker, api = _pair(worker_env={"VLLM_SIM_TIME_SCALE": "4"})
    dead, other = (worker, "head") if victim == "worker" else (head, "worker")
    try:
        out, threads = _run_pollers(tmp_path, head, worker, api)
        deadline = time.monotonic() + 30
        while not any("Loading safetensors checkpoint shards" in ln for ln in list(worker.lines)) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.3)  # arbitrary phase of the poll cycle
        dead.proc.send_signal(signal.SIGKILL)
        for t in threads:
            t.join(30)
        assert out["head"]["decision"] == "fail" and out["worker"]["decision"] == "fail", out
        b = out[other]["at"] - dead.exited_at
        print("\n(b) %s killed -> %s poller reports failure: %.2f s; %s" % (victim, other, b, out[other]["msg"]))
        for v in out[other]["result"]["verdicts"]:
            print("   ", v)
        # the other rank may go down in the same second (its TCP peer vanished); either way the dead one is named first
        assert ("sim-%s failed" % victim) in out[other]["msg"], out[other]["msg"]
        assert out[other]["result"]["lines"], "the failing node's lines are reported"
        assert b < 5.0
    finally:
        head.stop()
        worker.stop()


def test_worker_dies_while_loading_is_diagnosed(tmp_path):
    head, worker, api = _pair(worker_env={"VLLM_SIM_FAIL": "load_crash"})
    try:
        out, threads = _run_pollers(tmp_path, head, worker, api)
        for t in threads:
            t.join(60)
        assert out["head"]["decision"] == "fail", out["head"]
        first = min(x for x in (worker.exited_at, head.exited_at) if x is not None)
        delay = out["head"]["at"] - first
        res = out["head"]["result"]
        print("\n(b') load_crash: first rank exit -> head reports failure: %.2f s" % delay)
        print("   ", out["head"]["msg"])
        for v in res["verdicts"]:
            print("   ", v)
        ids = [f["id"] for f in res["findings"]]
        assert "worker-proc-died" in ids or "engine-core-init-failed" in ids, ids
        assert res["lines"]
        assert delay < 5.0
    finally:
        head.stop()
        worker.stop()


@pytest.mark.parametrize("version", ["0.33.0"])
def test_one_line_kv_form(tmp_path, version):
    mport, api = _free_port(), _free_port()
    head = Node(["--port", str(api), "--host", "127.0.0.1", "--served-model-name", "ds4", "--max-model-len", "8192"],
                env={"VLLM_SIM_VERSION": version})
    try:
        sdir = readiness_pair.state_dir("one", str(tmp_path))
        out = {}
        # single node: publish a worker that is "done" so the head does not wait for a peer
        readiness_pair.publish(sdir, "worker", {"state": "starting", "node": "none"})
        poller("head", head, sdir, out, api, 30.0, thinking=False)
        assert out["head"]["decision"] == "ready", out["head"]
        assert out["head"]["result"]["kv_cache_tokens"] > 0 and out["head"]["result"]["max_concurrency"] > 0
    finally:
        head.stop()


def test_hang_is_caught_by_the_real_completion(tmp_path):
    """Port open, /health 200, no tokens: the chat completion times out and readiness fails saying so."""
    api = _free_port()
    head = Node(["--port", str(api), "--host", "127.0.0.1", "--served-model-name", "ds4", "--max-model-len", "8192"],
                env={"VLLM_SIM_FAIL": "hang"})
    try:
        sdir = readiness_pair.state_dir("hang", str(tmp_path))
        readiness_pair.publish(sdir, "worker", {"state": "starting", "node": "none"})
        out = {}
        poller("head", head, sdir, out, api, 30.0, thinking=False, chat_timeout=2)
        assert out["head"]["decision"] == "fail"
        assert "port open but no tokens = hang" in out["head"]["msg"], out["head"]["msg"]
        assert out["head"]["result"]["http"]["health"] == 200
    finally:
        head.stop()
