# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real vllm-router (PyPI vllm-router, the release roles/router pins) in front of two vLLM simulator
instances on 127.0.0.1 standing in for two pair heads, started with the command line that
plugins/module_utils/router_config.py renders for the role (its defaults; only the ports and the start-up
check interval differ). Shown: requests through the router reach both instances (each one's
vllm:request_success_total); an instance killed (SIGKILL) or frozen (SIGSTOP: /health stops answering)
leaves rotation within 5 s (router_max_eviction_s) while requests keep succeeding through the other; the
instance restarted (or thawed) comes back and serves again; consistent_hash keeps one X-Session-ID on one
instance. And why two router defaults are overridden: with --balance-abs-threshold 64 the load stays on one
instance, with --cb-timeout-duration-secs 60 a restarted, healthy instance gets no request. The measured
times are printed (pytest -s).

Without a vllm-router binary (DS4_VLLM_ROUTER, the venv's bin/, PATH, else a pip install into
.cache/router-venv) the tests skip, saying why; under CI=true they fail (requirements.txt installs it)."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

_LINK_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".collections")
if os.path.isdir(_LINK_ROOT) and _LINK_ROOT not in sys.path:
    sys.path.insert(0, _LINK_ROOT)

from ansible_collections.dgxspark.ds4.plugins.module_utils import router_config  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VLLM = os.path.join(REPO, "tests", "vllm_sim", "bin", "vllm")
if os.path.join(REPO, "tests") not in sys.path:
    sys.path.insert(0, os.path.join(REPO, "tests"))
from vllm_sim import standin  # noqa: E402  pylint: disable=import-error,wrong-import-position

MODEL = "deepseek-v4-flash"
SIM_ROOT = standin.temp_root()
MAX_EVICTION_S = router_config.DEFAULTS["max_eviction_s"]


def _ci():
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _install_router():
    """pip install the pinned vllm-router into .cache/router-venv; returns (binary or None, reason)."""
    venv = os.path.join(REPO, ".cache", "router-venv")
    binary = os.path.join(venv, "bin", "vllm-router")
    try:
        if not os.path.exists(os.path.join(venv, "bin", "python")):
            subprocess.run([sys.executable, "-m", "venv", venv], check=True, capture_output=True, timeout=120)
        proc = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q",
                               "vllm-router==%s" % router_config.ROUTER_VERSION],
                              capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, "python -m venv / pip failed: %s" % exc
    if proc.returncode != 0 or not os.access(binary, os.X_OK):
        return None, "pip install vllm-router==%s failed: %s" % (router_config.ROUTER_VERSION,
                                                                 (proc.stderr or proc.stdout).strip()[-400:])
    return binary, ""


def _candidates():
    return (os.environ.get("DS4_VLLM_ROUTER"), os.path.join(os.path.dirname(sys.executable), "vllm-router"),
            shutil.which("vllm-router"), os.path.join(REPO, ".cache", "router-venv", "bin", "vllm-router"))


@pytest.fixture(scope="module")
def router_bin():
    for cand in _candidates():
        if cand and os.access(cand, os.X_OK):
            return cand
    binary, reason = _install_router()
    if binary:
        return binary
    message = ("vllm-router %s is not installed and could not be installed (%s). Fix: .venv/bin/pip install -r "
               "requirements.txt, or DS4_VLLM_ROUTER=/path/to/vllm-router" % (router_config.ROUTER_VERSION, reason))
    if _ci():
        pytest.fail("under CI=true: " + message)
    pytest.skip(message)


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _get(url, timeout=2.0):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.status, resp.read().decode()


class Sim(object):
    """One vLLM simulator standing in for a pair head's API (served name deepseek-v4-flash)."""

    def __init__(self, port=None):
        self.port = port or _free_port()
        self.proc = None
        self.start()

    def start(self):
        env = dict(os.environ)
        env.pop("VLLM_API_KEY", None)
        env.update({"PYTHONUNBUFFERED": "1", "VLLM_SIM_PYTHON": sys.executable, "VLLM_SIM_STATS_INTERVAL_S": "0",
                    "VLLM_SIM_TIME_SCALE": "0.02", "VLLM_SIM_ROOT": SIM_ROOT, "VLLM_SIM_TOKENS_PER_S": "100"})
        self.proc = subprocess.Popen([VLLM, "serve", "/models/ds4", "--served-model-name", MODEL, "--host", "127.0.0.1",
                                      "--port", str(self.port)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
        deadline = time.monotonic() + 30
        for line in self.proc.stdout:
            if "Application startup complete." in line:
                break
            assert time.monotonic() < deadline, "simulator did not start"
        threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()
        return time.monotonic()

    @staticmethod
    def _drain(proc):
        for _line in proc.stdout:
            pass

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def served(self):
        """vllm:request_success_total of this process (all finished reasons)."""
        _status, text = _get(self.url + "/metrics")
        return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                       if line.startswith("vllm:request_success_total")))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)


class Router(object):
    """The real vllm-router, started with router_config's argv for the two simulators."""

    def __init__(self, binary, sims, tmp_path, **settings):
        self.port, self.metrics_port = _free_port(), _free_port()
        pairs = [{"name": "spark_pair%d" % (i + 1), "head": "spark%d" % (2 * i + 1), "api_host": "127.0.0.1",
                  "api_port": s.port, "served_model": MODEL, "profile": "balanced"} for i, s in enumerate(sims)]
        full = {"listen_port": self.port, "prometheus_port": self.metrics_port, "worker_startup_check_interval_s": 1}
        full.update(settings)
        plan = router_config.plan(pairs, full, binary)
        assert plan["errors"] == []
        self.argv = plan["argv"]
        self.log_path = str(tmp_path / "router.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, "vllm-router exited: %s" % self.tail()
            try:
                if _get(self.url("/health"), 1)[0] == 200:
                    break
            except (OSError, urllib.error.URLError):
                pass
            assert time.monotonic() < deadline, "vllm-router did not answer: %s" % self.tail()
            time.sleep(0.1)

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def tail(self, n=20):
        self.log.flush()
        with open(self.log_path, errors="replace") as handle:
            return "".join(handle.readlines()[-n:])

    def healthy(self):
        """worker URL -> is_healthy, from the router's own GET /workers."""
        _status, text = _get(self.url("/workers"))
        return dict((w["url"], w["is_healthy"]) for w in json.loads(text)["workers"])

    def complete(self, prompt, max_tokens=4, session=None, timeout=30):
        headers = {"Content-Type": "application/json"}
        if session:
            headers["X-Session-ID"] = session
        body = json.dumps({"model": MODEL, "prompt": prompt, "max_tokens": max_tokens}).encode()
        req = urllib.request.Request(self.url("/v1/completions"), data=body, headers=headers)
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read().decode())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


class Load(object):
    """n clients sending distinct prompts through the router in a loop; records every outcome with its time."""

    def __init__(self, router, n=4, max_tokens=10):
        self.router, self.max_tokens = router, max_tokens
        self.results = []  # (monotonic time, ok, detail)
        self.lock = threading.Lock()
        self.running = True
        self.threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(n)]
        for t in self.threads:
            t.start()

    def _client(self, i):
        k = 0
        while self.running:
            k += 1
            try:
                status, body = self.router.complete("client %d request %d: %s" % (i, k, "tell me about the sea " * (k % 7)),
                                                    self.max_tokens)
                ok = status == 200 and body["usage"]["completion_tokens"] == self.max_tokens
                detail = status
            except Exception as exc:  # pylint: disable=broad-except
                ok, detail = False, repr(exc)[:200]
            with self.lock:
                self.results.append((time.monotonic(), ok, detail))

    def stop(self):
        self.running = False
        for t in self.threads:
            t.join(40)

    def between(self, start, end=None):
        with self.lock:
            return [r for r in self.results if r[0] >= start and (end is None or r[0] < end)]


@pytest.fixture
def rig(router_bin, tmp_path):
    made = {"sims": [], "router": None}

    def make(**settings):
        made["sims"] = [Sim(), Sim()]
        made["router"] = Router(router_bin, made["sims"], tmp_path, **settings)
        return made["sims"], made["router"]
    yield make
    if made["router"]:
        made["router"].stop()
    for sim in made["sims"]:
        sim.stop()


def _wait(predicate, timeout, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(step)
    return None


def test_rendered_command_line_is_the_roles(rig):
    _sims, router = rig()
    flags = dict((w, router.argv[i + 1]) for i, w in enumerate(router.argv) if w.startswith("--") and w != "--worker-urls")
    assert flags["--policy"] == "cache_aware" and flags["--host"] == "127.0.0.1"
    assert flags["--health-check-interval-secs"] == "1" and flags["--health-failure-threshold"] == "2"
    status, text = _get("http://127.0.0.1:%d/metrics" % router.metrics_port)
    assert status == 200 and "vllm_router" in text, text[:300]


def test_requests_are_spread_over_both_pairs(rig):
    sims, router = rig()
    load = Load(router, n=8, max_tokens=20)
    time.sleep(4)
    load.stop()
    results = load.between(0)
    served = [s.served() for s in sims]
    print("\nrouter spread (cache_aware, 8 clients, 4 s): %d requests, %d failed; per pair %s"
          % (len(results), len([r for r in results if not r[1]]), served))
    assert all(ok for _t, ok, _d in results)
    assert sum(served) == len(results)
    assert min(served) >= 0.2 * sum(served), served


def _outage(sims, router, how):
    """Break sims[0] under load, measure when the router drops it, keep serving, bring it back."""
    victim, other = sims
    load = Load(router, n=4, max_tokens=10)
    time.sleep(1.5)
    assert router.healthy() == {victim.url: True, other.url: True}
    t_break = time.monotonic()
    if how == "kill":
        victim.proc.kill()
        victim.proc.wait(10)
    else:
        victim.proc.send_signal(signal.SIGSTOP)
    t_out = _wait(lambda: not router.healthy().get(victim.url, True), MAX_EVICTION_S + 5)
    assert t_out is not None, "still in rotation after %d s: %s" % (MAX_EVICTION_S + 5, router.tail())
    evicted = t_out - t_break
    other_before = other.served()
    time.sleep(3)
    after = load.between(t_out + 0.5, time.monotonic())
    other_gain = other.served() - other_before
    failed_window = [r for r in load.between(t_break, t_out + 0.5) if not r[1]]
    # back: a restarted process on the same port, or the frozen one thawed
    if how == "kill":
        t_back_start = victim.start()
    else:
        t_back_start = time.monotonic()
        victim.proc.send_signal(signal.SIGCONT)
    t_in = _wait(lambda: router.healthy().get(victim.url), 15)
    assert t_in is not None, "not back in rotation: %s" % router.tail()
    back = t_in - t_back_start
    served_before = victim.served()
    t_served = _wait(lambda: victim.served() > served_before, 15)
    time.sleep(2)
    load.stop()
    tail = load.between(t_in + 1.0)
    print("\nrouter %s: out of rotation %.2f s after the %s (bound %d s); %d of %d requests failed between the %s "
          "and 0.5 s after it; then %d requests, all ok=%s, %d served by the other pair; back in rotation %.2f s "
          "after %s, serving again %.2f s after"
          % (how, evicted, how, MAX_EVICTION_S, len(failed_window), len(load.between(t_break, t_out + 0.5)), how,
             len(after), all(r[1] for r in after), other_gain, back,
             "its restart was complete" if how == "kill" else "SIGCONT",
             (t_served - t_back_start) if t_served else -1))
    assert evicted <= MAX_EVICTION_S
    assert after and all(ok for _t, ok, _d in after), after[:5]
    assert other_gain >= len(after)
    assert t_served is not None, "back in rotation but no request reached it"
    assert tail and all(ok for _t, ok, _d in tail), [r for r in tail if not r[1]][:5]
    return evicted, back


def test_killed_pair_leaves_rotation_within_5s_and_comes_back(rig):
    sims, router = rig()
    _outage(sims, router, "kill")


def test_frozen_pair_leaves_rotation_within_5s_and_comes_back(rig):
    sims, router = rig()
    _outage(sims, router, "freeze")


def test_consistent_hash_keeps_a_session_on_one_pair(rig):
    sims, router = rig(policy="consistent_hash")
    per_session = {}
    for session in ("alice", "bob", "carol", "dave", "erin", "frank"):
        before = [s.served() for s in sims]
        for i in range(5):
            assert router.complete("turn %d of %s" % (i, session), session=session)[0] == 200
        gain = [s.served() - b for s, b in zip(sims, before)]
        per_session[session] = gain
        assert sorted(gain) == [0, 5], (session, gain)
    print("\nconsistent_hash on X-Session-ID, 5 requests per session: %s" % per_session)
    assert len(set(g.index(5) for g in per_session.values())) == 2, per_session


def test_router_default_balance_threshold_keeps_load_on_one_pair(rig):
    """Why router_balance_abs_threshold is 2: with vllm-router's own 64 the same load stays on one pair."""
    sims, router = rig(balance_abs_threshold=64)
    load = Load(router, n=8, max_tokens=20)
    time.sleep(4)
    load.stop()
    served = [s.served() for s in sims]
    print("\nrouter spread with --balance-abs-threshold 64 (vllm-router's default), 8 clients, 4 s: per pair %s" % served)
    assert min(served) <= 0.05 * sum(served), served


def test_router_default_circuit_breaker_keeps_a_restarted_pair_out(rig):
    """Why router_circuit_breaker_timeout_s is 5: with vllm-router's own 60 s a pair killed under load and
    restarted is healthy again but gets no request."""
    sims, router = rig(circuit_breaker_timeout_s=60)
    victim = sims[0]
    load = Load(router, n=8, max_tokens=10)
    time.sleep(1.5)
    victim.proc.kill()
    victim.proc.wait(10)
    assert _wait(lambda: not router.healthy().get(victim.url, True), MAX_EVICTION_S + 5)
    time.sleep(2)
    victim.start()
    t_in = _wait(lambda: router.healthy().get(victim.url), 15)
    assert t_in is not None
    time.sleep(8)
    load.stop()
    served = victim.served()
    print("\nrouter with --cb-timeout-duration-secs 60 (vllm-router's default): pair healthy again, %d requests "
          "reached it in the next 8 s" % served)
    assert served == 0
