# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for readiness (readiness_phases, readiness_pair, readiness_http, node_probe, redact, each from its own
file; lines verbatim from vllm-ops.md §1.3 / the simulator)."""


import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe
from ansible_collections.dgxspark.ds4.plugins.module_utils._readiness import readiness_http
from ansible_collections.dgxspark.ds4.plugins.module_utils._security import redact
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import readiness_pair
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import readiness_phases

P = "(APIServer pid=412) INFO 11-22 07:30:01 "
W = "(Worker_TP0 pid=530) INFO 11-22 07:31:10 "
STARTUP = [
    W + "[gpu_model_runner.py:2602] Starting to load model /models/DeepSeek-V4-Flash...",
    "(Worker_TP0 pid=530) Loading safetensors checkpoint shards:   0% Completed | 0/48 [00:00<?, ?it/s]",
    "(Worker_TP0 pid=530) Loading safetensors checkpoint shards:  25% Completed | 12/48 [00:30<01:30,  2.5s/it]",
    "(Worker_TP0 pid=530) Loading safetensors checkpoint shards:  27% Completed | 13/48 [00:32<01:28,  2.5s/it]",
    "(Worker_TP0 pid=530) Loading safetensors checkpoint shards: 100% Completed | 48/48 [02:00<00:00,  2.5s/it]",
    W + "[default_loader.py:267] Loading weights took 120.41 seconds",
    W + "[gpu_model_runner.py:2700] Model loading took 75.0000 GiB memory and 121.300000 seconds",
    W + "[gpu_worker.py:298] Available KV cache memory: 29.70 GiB",
    P + "[kv_cache_utils.py:1087] GPU KV cache size: 611,712 tokens",
    P + "[kv_cache_utils.py:1091] Maximum concurrency for 131,072 tokens per request: 4.67x",
    "(Worker_TP0 pid=530) Capturing CUDA graphs (decode, FULL):  50%|#####     | 17/35",
    W + "[gpu_model_runner.py:3480] Graph capturing finished in 25 secs, took 0.61 GiB",
    P + "[core.py:210] init engine (profile, create kv cache, warmup model) took 81.22 s",
    P + "[api_server.py:1900] Starting vLLM server on http://0.0.0.0:8000",
    "(APIServer pid=412) INFO:     Started server process [412]",
    "(APIServer pid=412) INFO:     Waiting for application startup.",
    "(APIServer pid=412) INFO:     Application startup complete.",
]


def test_phases_027_two_line_kv():
    t = readiness_phases.PhaseTracker("spark1", start=0.0)
    events = []
    for i, line in enumerate(STARTUP):
        events.extend(t.feed(line, now=float(i)))
    phases = [e["phase"] for e in events]
    assert phases == ["loading", "shards", "shards", "weights_loaded", "kv_cache", "cuda_graphs", "graphs_done",
                      "engine_ready", "api_starting", "startup_complete"]
    assert [e["message"] for e in events if e["phase"] == "shards"][0].startswith("spark1: weights loading: shard 12/48 (25%)")
    assert t.kv_cache_tokens == 611712 and t.max_concurrency == 4.67 and t.max_concurrency_len == 131072
    assert t.shards == (48, 48) and t.complete
    assert t.timings["startup_complete"] == 16.0 and t.timings["loading"] == 0.0
    # each phase once: feeding everything again reports nothing
    assert sum((t.feed(line, 30.0) for line in STARTUP), []) == []


def test_kv_033_one_line():
    t = readiness_phases.PhaseTracker("h", start=0.0)
    ev = t.feed(P + "[kv_cache_utils.py:1240] GPU KV cache size: 2,418,690 tokens, Maximum concurrency for 1,048,576 tokens "
                    "per request: 2.31x", 5.0)
    assert [e["phase"] for e in ev] == ["kv_cache"]
    assert (t.kv_cache_tokens, t.max_concurrency, t.max_concurrency_len) == (2418690, 2.31, 1048576)
    assert "2,418,690 tokens" in ev[0]["message"] and "+5.0s" in ev[0]["message"]


def test_v2_runner_model_loading_line():
    t = readiness_phases.PhaseTracker("h", start=0.0)
    ev = t.feed(W + "Model loading took 75.1 GiB and 130.000000 seconds", 1.0)
    assert ev[0]["phase"] == "weights_loaded" and "75.1 GiB" in ev[0]["message"]


def test_node_watch():
    w = readiness_pair.NodeWatch()
    base = {"unit": "u", "active_state": "active", "sub_state": "running", "n_restarts": 0, "main_pid": 10,
            "container": {"id": "abc" * 10, "running": True}}
    assert w.observe(base) is None
    assert w.observe(dict(base)) is None
    assert "NRestarts 0 -> 1" in w.observe(dict(base, n_restarts=1))
    assert "main process changed" in w.observe(dict(base, main_pid=11))
    assert "exited" in w.observe(dict(base, container={"id": "abc" * 10, "running": False}))
    assert "exited" in w.observe(dict(base, container=None))
    assert "replaced" in w.observe(dict(base, container={"id": "def" * 10, "running": True}))
    assert "waits to be restarted" in w.observe(dict(base, active_state="activating", sub_state="auto-restart", exec_main_status=1))
    assert "failed" in w.observe(dict(base, active_state="failed", sub_state="failed"))
    # prestart (activating/start-pre, no container yet) is starting, not dead
    w2 = readiness_pair.NodeWatch()
    assert w2.observe({"unit": "u", "active_state": "activating", "sub_state": "start-pre", "n_restarts": 0, "main_pid": 0}) is None


def test_decide():
    assert readiness_pair.decide("head", "unit x failed", None, 1, 0, 100)[0] == "fail"
    assert readiness_pair.decide("head", None, {"state": "failed", "node": "spark2", "reason": "container exited"}, 1, 0, 100) == \
        ("fail", "spark2 failed: container exited")
    assert readiness_pair.decide("head", None, None, 1, 0, 100, head_ready=True)[0] == "ready"
    assert readiness_pair.decide("worker", None, {"state": "ready", "updated": 1}, 1, 0, 100)[0] == "done"
    assert readiness_pair.decide("worker", None, {"state": "starting", "updated": 1}, 2, 0, 100)[0] == "continue"
    assert readiness_pair.decide("worker", None, None, 61, 0, 1000)[0] == "fail"
    assert readiness_pair.decide("head", None, None, 61, 0, 1000)[0] == "continue"
    assert readiness_pair.decide("head", None, {"state": "starting", "updated": 10}, 31, 0, 1000)[0] == "fail"
    assert readiness_pair.decide("head", None, None, 101, 0, 100) == ("fail", "not ready after 100 s (timeout)")


def _snap(lines, active="active", restarts=0, pid=10, running=True, http=None):
    s = {"status": {"unit": "u", "active_state": active, "sub_state": "running" if active == "active" else "failed",
                    "n_restarts": restarts, "main_pid": pid, "container": {"id": "c" * 64, "running": running}},
         "lines": lines}
    if http is not None:
        s["http"] = http
    return s


def test_coordination_worker_death_fails_head(tmp_path):
    sdir = readiness_pair.state_dir("t1", str(tmp_path))
    head = readiness_pair.ReadyInstance("head", "spark1", sdir, timeout=100, started=0.0)
    worker = readiness_pair.ReadyInstance("worker", "spark2", sdir, timeout=100, started=0.0)
    assert head.step(_snap(STARTUP[:3]), now=1.0)[1] == "continue"
    assert worker.step(_snap(STARTUP[:2]), now=1.0)[1] == "continue"
    dying = ["(Worker_TP1 pid=77) ERROR 11-22 07:31:40 [multiproc_executor.py:150] Worker proc VllmWorker-1 died unexpectedly "
             "(exit code: -9), shutting down executor."]
    # the worker's poller sees its rank down: "failing", poll again at once for the last lines
    assert worker.step(_snap(dying[:0], active="failed", running=False), now=2.0)[1] == "settle"
    assert readiness_pair.read_peer(sdir, "worker")["state"] == "failing"
    # the head waits (bounded) for the worker's final report
    assert head.step(_snap([]), now=2.1)[1] == "wait_peer"
    # the last line arrives in the journal a moment after the unit state changed: the settle poll collects it
    ev, decision, msg = worker.step(_snap(dying, active="failed", running=False), now=2.2)
    assert decision == "fail" and msg.startswith("unit u is failed")
    ev, decision, msg = head.recheck(now=2.3)
    assert decision == "fail" and msg.startswith("spark2 failed: unit u is failed")
    res = head.result()
    assert res["lines"] == STARTUP[:2] + dying
    assert any(f["id"] == "worker-proc-died" for f in res["findings"])
    assert res["verdicts"][0].startswith("spark2: ")


def test_a_running_worker_ends_when_the_head_reports_not_a_poll_later(tmp_path):
    """plugins/action/vllm_ready.py between a running worker's polls: the head's report read again locally every
    PEER_RECHECK (no poll of the node), so the worker's wait ends right after the head's does; nothing reported:
    back to the next poll at the deadline; the head going down: waited for (wait_peer), then its failure."""
    import time
    from ansible_collections.dgxspark.ds4.plugins.action.vllm_ready import ActionModule
    sdir = readiness_pair.state_dir("t7", str(tmp_path))
    worker = readiness_pair.ReadyInstance("worker", "spark2", sdir, timeout=100)
    assert worker.step(_snap(STARTUP))[1] == "continue"
    # no report from the head: continue, at the deadline
    t0 = time.monotonic()
    assert ActionModule._recheck_until(worker, t0 + 0.35) == ("continue", "")
    assert 0.2 <= time.monotonic() - t0 < 1.0  # (a loaded machine oversleeps)
    # the head reports ready 0.3 s into a 5 s wait for the next poll: the worker is done within PEER_RECHECK of it
    timer = threading.Timer(0.3, readiness_pair.publish, (sdir, "head", {"node": "spark1", "state": "ready", "lines": []}))
    t0 = time.monotonic()
    timer.start()
    try:
        assert ActionModule._recheck_until(worker, t0 + 5.0) == ("done", "head is ready")
    finally:
        timer.join()
    assert time.monotonic() - t0 < 2.0  # well before the 5 s deadline (a loaded machine oversleeps)
    # the head going down: its final report waited for past the deadline (wait_peer), then the worker fails with it
    other = readiness_pair.state_dir("t8", str(tmp_path))
    worker = readiness_pair.ReadyInstance("worker", "spark2", other, timeout=100)
    assert worker.step(_snap(STARTUP))[1] == "continue"
    readiness_pair.publish(other, "head", {"state": "failing", "node": "spark1", "own_reason": "container exited", "lines": []})
    failed = {"state": "failed", "node": "spark1", "own_reason": "container exited", "reason": "container exited", "lines": []}
    final = threading.Timer(0.5, readiness_pair.publish, (other, "head", failed))
    final.start()
    try:
        assert ActionModule._recheck_until(worker, time.monotonic() + 0.2) == ("fail", "spark1 failed: container exited")
    finally:
        final.join()


def test_peer_failing_wait_is_bounded(tmp_path):
    sdir = readiness_pair.state_dir("t6", str(tmp_path))
    head = readiness_pair.ReadyInstance("head", "spark1", sdir, timeout=100, started=0.0)
    readiness_pair.publish(sdir, "worker", {"state": "failing", "node": "spark2", "own_reason": "container exited", "lines": []})
    assert head.step(_snap([]), now=1.0)[1] == "wait_peer"
    assert head.recheck(now=1.5)[1] == "wait_peer"
    # the peer may spend SETTLE_INTERVAL and WIDEN_POLLS widened re-reads on its last lines: waited for, then no longer
    assert head.recheck(now=1.0 + readiness_pair.WIDEN_POLLS * readiness_pair.WIDEN_INTERVAL + 0.9)[1] == "wait_peer"
    assert head.recheck(now=1.0 + readiness_pair.WIDEN_POLLS * readiness_pair.WIDEN_INTERVAL + 1.1)[1:] == ("fail", "spark2 failed: container exited")


def test_both_down_first_exit_leads(tmp_path):
    sdir = readiness_pair.state_dir("t5", str(tmp_path))
    head = readiness_pair.ReadyInstance("head", "spark1", sdir, timeout=100, started=0.0)
    worker = readiness_pair.ReadyInstance("worker", "spark2", sdir, timeout=100, started=0.0)
    head.step(_snap([]), now=1.0)
    worker.step(_snap([]), now=1.0)
    w = _snap(["Worker proc VllmWorker-1 died unexpectedly (exit code: -9), shutting down executor."], active="failed")
    w["status"]["exit_time"] = 1000.0
    h = _snap(["RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"], active="failed")
    h["status"]["exit_time"] = 1000.4
    assert head.step(h, now=2.0)[1] == "settle"
    assert worker.step(w, now=2.0)[1] == "settle"
    ev, decision, msg = worker.step(_snap([], active="failed"), now=2.2)
    assert decision == "fail" and msg.startswith("unit u is failed/failed (last exit status None); then spark1 failed: ")
    # the head's own lines match a known cause: no widened re-read
    ev, decision, msg = head.step(_snap([], active="failed"), now=2.2)
    assert decision == "fail"
    assert msg == "spark2 failed first: unit u is failed/failed (last exit status None); then spark1: unit u is failed/failed (last exit status None)"
    assert head.result()["verdicts"][0].startswith("spark2: ")


def test_cause_landing_late_in_the_journal_is_found_by_a_widened_re_read(tmp_path):
    """The rank is down and its polls hold only systemd's lines (journald had not drained the container's stdout
    stream yet, or the cause was printed by an earlier run of this start): the poller re-reads the whole journal of
    the wait (``widen``, at most WIDEN_POLLS times) before it reports; the cause is then named."""
    sdir = readiness_pair.state_dir("t7", str(tmp_path))
    worker = readiness_pair.ReadyInstance("worker", "spark2", sdir, timeout=100, started=0.0)
    assert worker.step(_snap(STARTUP[:2]), now=1.0)[1] == "continue"
    tail = ["dgxspark-ds4-worker.service: Main process exited, code=exited, status=1/FAILURE",
            "Error: No such container: dgxspark-ds4-worker", "dgxspark-ds4-worker.service: Failed with result 'exit-code'."]
    assert worker.step(_snap(tail[:1], active="activating", running=False), now=2.0)[1] == "settle"
    assert worker.step(_snap(tail[1:], active="activating", running=False), now=2.2)[1] == "widen"
    cause = ("(Worker_TP1 pid=8) ValueError: Free memory on device cuda:0 (95.20/119.67 GiB) on startup is less than desired "
             "GPU memory utilization (0.9, 107.70 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")
    window = dict(_snap(STARTUP[:2] + [cause] + tail, active="activating", running=False), window=True)
    ev, decision, msg = worker.step(window, now=3.2)
    assert decision == "fail"
    res = worker.result()
    assert any(f["id"] == "free-memory-below-utilization" for f in res["findings"]), res["findings"]
    assert res["lines"] == STARTUP[:2] + [cause] + tail  # the window replaced the collected lines, no duplicates


def test_no_known_cause_is_reported_after_the_bounded_re_reads(tmp_path):
    worker = readiness_pair.ReadyInstance("worker", "spark2", readiness_pair.state_dir("t8", str(tmp_path)), timeout=100, started=0.0)
    assert worker.step(_snap([], active="failed", running=False), now=1.0)[1] == "settle"
    decisions = [worker.step(dict(_snap(["something else"], active="failed", running=False), window=True), now=2.0 + i)[1]
                 for i in range(readiness_pair.WIDEN_POLLS + 1)]
    assert decisions == ["widen"] * readiness_pair.WIDEN_POLLS + ["fail"]
    assert worker.result()["findings"] == []


def test_coordination_ready(tmp_path):
    sdir = readiness_pair.state_dir("t2", str(tmp_path))
    head = readiness_pair.ReadyInstance("head", "spark1", sdir, timeout=100)
    worker = readiness_pair.ReadyInstance("worker", "spark2", sdir, timeout=100)
    worker.step(_snap([]))
    head.step(_snap(STARTUP))
    assert head.tracker.complete
    assert head.step(_snap([], http={"ok": True, "problems": []}))[1] == "ready"
    assert worker.step(_snap([]))[1] == "done"
    res = head.result()
    assert res["kv_cache_tokens"] == 611712 and res["time_to_ready"] >= 0 and "ready_after_startup_complete" in res


def test_api_check_failure_is_fatal(tmp_path):
    head = readiness_pair.ReadyInstance("head", "spark1", readiness_pair.state_dir("t3", str(tmp_path)), timeout=100)
    head.step(_snap(STARTUP))
    http = {"ok": False, "models_status": 200, "problems": ["served model name 'x' not in /v1/models ['y']"]}
    ev, decision, msg = head.step(_snap([], http=http))
    assert decision == "fail" and "served model name" in msg
    # a reset connection on /health right after the port opened is still "starting"
    head2 = readiness_pair.ReadyInstance("head", "spark1", readiness_pair.state_dir("t4", str(tmp_path)), timeout=100)
    assert head2.step(_snap([], http={"ok": False, "problems": ["/health: reset"]}))[1] == "continue"


def test_check_models_and_chat():
    body = json.dumps({"object": "list", "data": [{"id": "deepseek-v4-flash", "max_model_len": 131072}]})
    assert readiness_http.check_models(200, body, "deepseek-v4-flash", 131072) == []
    assert "max_model_len 131072 != expected 1048576" in readiness_http.check_models(200, body, "deepseek-v4-flash", 1048576)[0]
    assert "not in /v1/models" in readiness_http.check_models(200, body, "other", None)[0]
    assert "401" in readiness_http.check_models(401, '{"error": "Unauthorized"}', "x", None)[0]
    ok = json.dumps({"choices": [{"message": {"content": "Paris", "reasoning": "thinking..."}}]})
    assert readiness_http.check_chat(200, ok, True)[0] == []
    assert "no reasoning" in readiness_http.check_chat(200, json.dumps({"choices": [{"message": {"content": "Paris"}}]}), True)[0][0]
    assert "empty content" in readiness_http.check_chat(200, json.dumps({"choices": [{"message": {"content": ""}}]}), False)[0][0]


def test_tcp_state_refused_and_http_checks():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]  # bound, not listening: like vLLM during the load
    assert node_probe.tcp_state("127.0.0.1", port) == "refused"
    s.close()

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, code, body=b""):
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/health":
                return self._send(200)
            if self.headers.get("Authorization") != "Bearer k1":
                return self._send(401, b'{"error": "Unauthorized"}')
            self._send(200, json.dumps({"data": [{"id": "m", "max_model_len": 4096}]}).encode())

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self._send(200, json.dumps({"choices": [{"message": {"content": "Paris", "reasoning": "r"}}]}).encode())

    srv = HTTPServer(("127.0.0.1", 0), H)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        port = srv.server_address[1]
        assert node_probe.tcp_state("127.0.0.1", port) == "open"
        res = readiness_http.http_checks("127.0.0.1", port, api_key="k1", served_name="m", max_model_len=4096, thinking=True)
        assert res["ok"], res
        bad = readiness_http.http_checks("127.0.0.1", port, api_key="wrong", served_name="m", max_model_len=4096)
        assert not bad["ok"] and "401" in bad["problems"][0]
    finally:
        srv.shutdown()


def test_redact():
    text = "\n".join([
        "VLLM_API_KEY=sk-abc123", "HF_TOKEN='hf_abcdefghijklmnopqrstuvwxyz'", "MY_SECRET: s3cr3t", "DB_PASSWORD=hunter2",
        "non-default args: {'model': '/m', 'api_key': ['sk-abc123'], 'max_num_batched_tokens': 8192, 'tokenizer': '/m'}",
        "vllm serve /m --api-key sk-zzz --hf-token=hf_qqqqqqqqqqqqqqqqqqqqqqqq --max-num-batched-tokens 8192",
        "curl -H 'Authorization: Bearer sk-abc123' http://127.0.0.1:8000/v1/models",
        "NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1", "max_num_batched_tokens=8192 tokenizer=/m",
    ])
    out = redact.redact(text, extra=["literal-key"])
    for secret in ("sk-abc123", "hf_abcdefghijklmnopqrstuvwxyz", "s3cr3t", "hunter2", "sk-zzz", "hf_qqqq"):
        assert secret not in out, secret
    assert "NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1" in out
    assert "max_num_batched_tokens=8192" in out and "'max_num_batched_tokens': 8192" in out and "tokenizer=/m" in out
    assert "--max-num-batched-tokens 8192" in out
    assert redact.redact("x literal-key y", extra=["literal-key"]) == "x <redacted> y"


POLL_OUT = """@@ds4-ready@@show
ActiveState=activating
SubState=auto-restart
NRestarts=2
MainPID=0
ExecMainStatus=1
InactiveExitTimestamp=Sun 2026-11-22 08:16:56.827396 UTC
ExecMainExitTimestamp=Sun 2026-11-22 08:17:01.500000 UTC
@@ds4-ready@@docker
@@ds4-ready@@port
bash: connect: Connection refused
bash: line 1: /dev/tcp/127.0.0.1/8000: Connection refused
rc=1
@@ds4-ready@@journal
Started dgxspark-ds4-head.service - vLLM head.
(APIServer pid=7) INFO 11-22 08:16:58 [api_server.py:1895] vLLM server version 0.27.1, serving model /models/ds4
-- cursor: s=abc;i=12
"""


def test_poll_command_and_parse():
    cmd = node_probe.poll_command("dgxspark-ds4-head.service", "dgxspark-ds4-head", "", "0.0.0.0", 8000)
    assert "systemctl show dgxspark-ds4-head.service" in cmd and "/dev/tcp/127.0.0.1/8000" in cmd
    assert "--since" in cmd and "--after-cursor" not in cmd
    cmd2 = node_probe.poll_command("u.service", None, "s=a b;i=1", None, None)
    assert "--after-cursor 's=a b;i=1'" in cmd2 and "docker" not in cmd2 and "/dev/tcp" not in cmd2
    snap = node_probe.parse_poll(POLL_OUT, "dgxspark-ds4-head.service")
    st = snap["status"]
    assert (st["active_state"], st["sub_state"], st["n_restarts"], st["exec_main_status"]) == ("activating", "auto-restart", 2, 1)
    assert st["exit_time"] == 1795335421.5 and st["container"] is None
    assert snap["api_port"] == "refused" and snap["cursor"] == "s=abc;i=12"
    assert snap["lines"][1].endswith("serving model /models/ds4") and len(snap["lines"]) == 2
    assert "waits to be restarted" in readiness_pair.NodeWatch().observe(st)
    out2 = POLL_OUT.replace("bash: connect: Connection refused\nbash: line 1: /dev/tcp/127.0.0.1/8000: Connection refused\nrc=1",
                            "open\nrc=0").replace("@@ds4-ready@@docker", '@@ds4-ready@@docker\n"abc" true "2026-11-22T08:16:57Z" 0')
    snap2 = node_probe.parse_poll(out2, "u")
    want = {"id": "abc", "running": True, "started_at": "2026-11-22T08:16:57Z", "exit_code": 0, "image_id": None, "image_ref": None}
    assert snap2["api_port"] == "open" and snap2["status"]["container"] == want
