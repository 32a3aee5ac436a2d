# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router test rig shared by test_router_sim.py and test_router_drain.py: vLLM simulator instances on
127.0.0.1 standing in for pair heads (Sim), the real vllm-router started with router_config's argv and the role's
pool keeper (roles/router/files/routerpool.py) adding the pairs to it (Router),
a steady client load through it (Load), and where the router binary comes from (find_router). The pytest
fixtures router_bin and rig are in conftest.py."""


import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

_LINK_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".collections")
if os.path.isdir(_LINK_ROOT) and _LINK_ROOT not in sys.path:
    sys.path.insert(0, _LINK_ROOT)

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import router_config  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VLLM = os.path.join(REPO, "tests", "vllm_sim", "bin", "vllm")
if os.path.join(REPO, "tests") not in sys.path:
    sys.path.insert(0, os.path.join(REPO, "tests"))
from vllm_sim import standin  # noqa: E402  pylint: disable=import-error,wrong-import-position

MODEL = "deepseek-v4-flash"
SIM_ROOT = standin.temp_root()
MAX_EVICTION_S = router_config.DEFAULTS["max_eviction_s"]


def ci():
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


def find_router():
    """(path to vllm-router or None, why none): DS4_VLLM_ROUTER, the venv's bin/, PATH, .cache/router-venv,
    else a pip install into .cache/router-venv."""
    for cand in _candidates():
        if cand and os.access(cand, os.X_OK):
            return cand, ""
    binary, reason = _install_router()
    if binary:
        return binary, ""
    return None, ("vllm-router %s is not installed and could not be installed (%s). Fix: .venv/bin/pip install -r "
                  "requirements.txt, or DS4_VLLM_ROUTER=/path/to/vllm-router" % (router_config.ROUTER_VERSION, reason))


from ports import free_port, start_server  # noqa: E402  pylint: disable=import-error,wrong-import-position,unused-import


def http_get(url, timeout=2.0):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.status, resp.read().decode()


class Sim(object):
    """One vLLM simulator standing in for a pair head's API (served name deepseek-v4-flash)."""

    def __init__(self, port=None):
        self.port = port or free_port()
        self.proc = None
        self.start()

    def start(self):
        env = dict(os.environ)
        env.pop("VLLM_API_KEY", None)
        env.update({"PYTHONUNBUFFERED": "1", "VLLM_SIM_PYTHON": sys.executable, "VLLM_SIM_STATS_INTERVAL_S": "0",
                    "VLLM_SIM_TIME_SCALE": "0.02", "VLLM_SIM_ROOT": SIM_ROOT, "VLLM_SIM_TOKENS_PER_S": "100"})
        self.proc = start_server([VLLM, "serve", "/models/ds4", "--served-model-name", MODEL, "--host", "127.0.0.1",
                                  "--port", str(self.port)], env, self.port)
        return time.monotonic()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def served(self):
        """vllm:request_success_total of this process (all finished reasons)."""
        _status, text = http_get(self.url + "/metrics")
        return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                       if line.startswith("vllm:request_success_total")))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)


POOL_KEEPER = os.path.join(REPO, "roles", "router", "files", "routerpool.py")


class Router(object):
    """The real vllm-router, started with router_config's argv (no worker) and the role's pool keeper adding the
    given pair heads (anything with a .port on 127.0.0.1: Sim, or a test's own server); extra_args are appended to
    that argv. wait_pairs: wait until the router lists every pair (False: a test that keeps one down)."""

    def __init__(self, binary, sims, tmp_path, extra_args=(), wait_pairs=True, **settings):
        self.port, self.metrics_port = free_port(), free_port()
        pairs = [{"name": "spark_pair%d" % (i + 1), "head": "spark%d" % (2 * i + 1), "api_host": "127.0.0.1",
                  "api_port": s.port, "served_model": MODEL, "profile": "balanced"} for i, s in enumerate(sims)]
        full = {"listen_port": self.port, "prometheus_port": self.metrics_port, "worker_startup_check_interval_s": 1}
        full.update(settings)
        plan = router_config.plan(pairs, full, binary)
        assert plan["errors"] == []
        self.argv = plan["argv"] + list(extra_args)
        self.log_path = str(tmp_path / "router.log")
        self.log = open(self.log_path, "w")
        # the units' environment (router_config.environment: SSL_CERT_FILE with TLS to the heads), for both processes
        self.environment = plan["environment"]
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **self.environment))
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, "vllm-router exited: %s" % self.tail()
            try:
                if http_get(self.url("/health"), 1)[0] == 200:
                    break
            except (OSError, urllib.error.URLError):
                pass
            assert time.monotonic() < deadline, "vllm-router did not answer: %s" % self.tail()
            time.sleep(0.1)
        self.worker_urls = plan["worker_urls"]
        self.pool_config = str(tmp_path / "router-pool.json")
        # a drain holds its pair here, or the pool keeper puts it straight back (it answers /health)
        self.hold_dir = str(tmp_path / "hold")
        with open(self.pool_config, "w") as handle:
            json.dump({"router_url": self.base, "workers": self.worker_urls, "hold_dir": self.hold_dir,
                       "poll_s": 0.2}, handle)
        env = dict(os.environ, PYTHONUNBUFFERED="1", **self.environment)
        self.pool_log = open(str(tmp_path / "router-pool.log"), "w")
        # the keeper imports router_admin from ansible_collections/ next to itself on a router host; here from
        # the collection link
        env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(_LINK_ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
        self.pool = subprocess.Popen([sys.executable, POOL_KEEPER, self.pool_config], stdout=self.pool_log,
                                     stderr=subprocess.STDOUT, env=env)
        if wait_pairs:
            assert wait_until(lambda: sorted(self.listed()) == sorted(self.worker_urls), 30), \
                "the pool keeper did not add %s: %s" % (self.worker_urls, self.pool_tail())

    def pool_tail(self, n=10):
        self.pool_log.flush()
        with open(self.pool_log.name, errors="replace") as handle:
            return "".join(handle.readlines()[-n:])

    def listed(self):
        """GET /list_workers."""
        return json.loads(http_get(self.url("/list_workers"))[1])["urls"]

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    @property
    def base(self):
        return "http://127.0.0.1:%d" % self.port

    @property
    def metrics_base(self):
        return "http://127.0.0.1:%d" % self.metrics_port

    def tail(self, n=20):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, errors="replace") as handle:
            return "".join(handle.readlines()[-n:])

    def healthy(self):
        """worker URL -> is_healthy, from the router's own GET /workers."""
        _status, text = http_get(self.url("/workers"))
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
        if self.pool.poll() is None:
            self.pool.kill()
            self.pool.wait(10)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()
        self.pool_log.close()


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


def wait_until(predicate, timeout, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(step)
    return None
