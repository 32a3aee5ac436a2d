# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate and bench (the operations playbooks' smoke checks and benchmark) against the vLLM simulator:
a head + headless worker pair on 127.0.0.1.

  * bench_sweep measures the simulator's configured per-stream rate (VLLM_SIM_TOKENS_PER_S) and aggregate
    cap (VLLM_SIM_AGG_TOKENS_PER_S) within 2 %, and spec-decode per-position acceptance from /metrics deltas;
  * smoke_checks passes clean replies and catches every planted garble mode (VLLM_SIM_GARBLE), naming
    request, check and excerpt;
  * playbooks/validate.yml and playbooks/bench.yml run end to end with ansible-playbook (local connection,
    the balanced profile's inventory) and bench writes its JSON, markdown and PNG.
Run with -s to see the measured figures.
"""


import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

import local_pair  # pylint: disable=import-error

_LINK_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".collections")
if os.path.isdir(_LINK_ROOT) and _LINK_ROOT not in sys.path:
    sys.path.insert(0, _LINK_ROOT)

from ansible_collections.dgxspark.ds4.plugins.module_utils._bench import bench_sweep


from ansible_collections.dgxspark.ds4.plugins.module_utils._node import smoke_checks
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VLLM = os.path.join(REPO, "tests", "vllm_sim", "bin", "vllm")
if os.path.join(REPO, "tests") not in sys.path:
    sys.path.insert(0, os.path.join(REPO, "tests"))
from vllm_sim import standin  # noqa: E402  pylint: disable=import-error,wrong-import-position
MODEL = "deepseek-v4-flash"
ENV = {"PYTHONUNBUFFERED": "1", "VLLM_SIM_PYTHON": sys.executable, "VLLM_SIM_STATS_INTERVAL_S": "0",
       "VLLM_SIM_RENDEZVOUS_TIMEOUT_S": "20", "VLLM_SIM_ORPHAN_EXIT_S": "-1", "VLLM_SIM_TIME_SCALE": "0.05",
       # the simulator checks its model at start: /models/ds4 lives in a stand-in container root
       "VLLM_SIM_ROOT": standin.temp_root()}
# the balanced profile's serving flags that the checks depend on (thinking, reasoning parser, tools, MTP 2)
SERVE = ["--served-model-name", MODEL, "--max-model-len", "131072", "--max-num-seqs", "16",
         "--reasoning-parser", "deepseek_v4", "--default-chat-template-kwargs", '{"thinking": true}',
         "--enable-auto-tool-choice", "--tool-call-parser", "deepseek_v4",
         "--speculative-config", '{"method": "deepseek_mtp", "num_speculative_tokens": 2}']


from ports import free_port as _free_port  # noqa: E402  pylint: disable=import-error,wrong-import-position,unused-import


class Pair(object):
    """Head (API on 127.0.0.1:<port>) + headless worker, as two simulator processes."""

    def __init__(self, head_env=None, extra=None):
        mport, self.port = _free_port(), _free_port()
        dist = ["--tensor-parallel-size", "2", "--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", str(mport)]
        env = dict(os.environ)
        env.pop("VLLM_API_KEY", None)
        env.update(ENV)
        henv = dict(env)
        henv.update(head_env or {})
        args = SERVE + (extra or [])
        self.procs = [
            subprocess.Popen([VLLM, "serve", "/models/ds4"] + args + dist + ["--node-rank", "1", "--headless"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
            subprocess.Popen([VLLM, "serve", "/models/ds4"] + args + dist
                             + ["--node-rank", "0", "--host", "127.0.0.1", "--port", str(self.port)], env=henv,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        self.url = "http://127.0.0.1:%d" % self.port
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                return
            except OSError:
                if any(p.poll() is not None for p in self.procs):
                    break
                time.sleep(0.1)
        self.stop()
        raise AssertionError("simulator pair did not start")

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.fixture
def pair_factory():
    started = []

    def make(**kw):
        pr = Pair(**kw)
        started.append(pr)
        return pr
    yield make
    for pr in started:
        pr.stop()


def _within(measured, expected, tol=0.02):
    return measured is not None and abs(measured / float(expected) - 1.0) <= tol


# ------------------------------------------------------------------------------------------ bench
# 256 tokens at these rates: 6.4 s windows at c1/c2 (8.5 s at c4, 17 s at c8). The per-stream rate is measured
# between a stream's first and last token as the client receives them, so a late wake-up of the client at either end
# is the error: 2 % of 6.4 s is 128 ms. At 100 tok/s (2.6 s windows) CI saw c2 at -2.41 % (a 62 ms late last
# token under a load average of 12 on this 2-core machine, the Molecule scenarios beside it).
PER_STREAM = 40.0
AGG_CAP = 120.0
# the bench playbook's plumbing test (5 % tolerance, see there): 2.6 s windows at c1/c2 are enough
PLAYBOOK_PER_STREAM = 100.0
PLAYBOOK_AGG_CAP = 300.0


def _sim_clock(pair):
    with urllib.request.urlopen(pair.url + "/sim/clock", timeout=10) as resp:
        return json.loads(resp.read().decode())


def test_bench_measures_simulator_rates_within_2_percent(pair_factory):
    pair = pair_factory(head_env={"VLLM_SIM_TOKENS_PER_S": str(PER_STREAM), "VLLM_SIM_AGG_TOKENS_PER_S": str(AGG_CAP)})
    # One level at a time, each measured again (at most twice) when the simulator says its step clock restarted
    # during it: a host stall of more than 0.25 s drops that time (engine.CLOCK_RESET_S), so the simulator produced
    # less than its configured rates and the comparison below would judge the stall, not the bench (CI43: c4 -3.92 %).
    # A level without a restart is never measured again; the last try of a level is asserted whatever happened.
    report, retried = None, []
    for c in [1, 2, 4, 8]:
        for attempt in range(3):
            before = _sim_clock(pair)
            # seed 000's 256 output tokens
            one = bench_sweep.run_sweep(pair.url, MODEL, levels=[c], max_tokens=256, profile="throughput", pause_s=0.1,
                                        warmup=report is None)
            after = _sim_clock(pair)
            assert after["steps"] > before["steps"]
            if after["resets"] == before["resets"] or attempt == 2:
                break
            retried.append((c, after["dropped_s"] - before["dropped_s"]))
        if report is None:
            report = one
        else:
            report["levels"] += one["levels"]
            report["errors"] += one["errors"]
    report["settings"]["levels"] = [1, 2, 4, 8]
    assert report["errors"] == 0, report["levels"]
    print("\nbench vs simulator (per-stream %.0f tok/s, aggregate cap %.0f tok/s, 256 output tokens; measured again "
          "after a simulator clock restart: %s):" % (PER_STREAM, AGG_CAP, retried or "none"))
    rows = []
    for lv in report["levels"]:
        c = lv["concurrency"]
        exp_agg = min(c * PER_STREAM, AGG_CAP)
        exp_stream = exp_agg / c
        rows.append((c, lv["aggregate_tps"], exp_agg, lv["per_stream_tps_mean"], exp_stream))
        print("  c%-2d aggregate %7.2f (expected %5.0f, %+.2f%%)  per-stream %7.2f (expected %5.1f, %+.2f%%)  "
              "TTFT p50 %.3f s  spec/pos %s" % (
                  c, lv["aggregate_tps"], exp_agg, 100 * (lv["aggregate_tps"] / exp_agg - 1), lv["per_stream_tps_mean"],
                  exp_stream, 100 * (lv["per_stream_tps_mean"] / exp_stream - 1), lv["ttft_p50_s"],
                  ["%.3f" % p["rate"] for p in lv["spec_decode"]["per_position"]]))
    for c, agg, exp_agg, stream, exp_stream in rows:
        assert _within(agg, exp_agg), (c, agg, exp_agg)
        assert _within(stream, exp_stream), (c, stream, exp_stream)
    for lv in report["levels"]:
        # token counts: the server's generation counter agrees with the streamed usage
        assert lv["server_generation_tokens"] == lv["client_completion_tokens"] == 256 * lv["concurrency"]
        assert lv["ok_requests"] == lv["concurrency"] and lv["short_streams"] == 0
        # simulator acceptance per position 0.91, 0.81 (counters are whole numbers: small rounding)
        rates = [p["rate"] for p in lv["spec_decode"]["per_position"]]
        assert len(rates) == 2 and abs(rates[0] - 0.91) < 0.04 and abs(rates[1] - 0.81) < 0.04, rates
        assert 0 < lv["ttft_p50_s"] < 0.5
    md = bench_sweep.markdown_report(report)
    assert sum(1 for ln in md.splitlines() if ln.startswith("|")) == 1 + 1 + 4  # header, rule, 4 levels
    assert "seed 000" in md and "Method" in md


def test_sim_clock_counts_a_host_stall(pair_factory):
    """The counter the rate test trusts: a head process stopped for 0.6 s mid-generation (as a host stall stops it)
    restarts the step clock once and reports about the time it lost."""
    pair = pair_factory(head_env={"VLLM_SIM_TOKENS_PER_S": str(PER_STREAM)})
    before = _sim_clock(pair)
    out = {}
    gen = threading.Thread(target=lambda: out.update(bench_sweep.run_sweep(pair.url, MODEL, levels=[1], max_tokens=128,
                                                                           pause_s=0, warmup=False)))
    gen.start()
    time.sleep(1.0)
    pair.procs[1].send_signal(signal.SIGSTOP)
    time.sleep(0.6)
    pair.procs[1].send_signal(signal.SIGCONT)
    gen.join(30)
    after = _sim_clock(pair)
    assert out["errors"] == 0 and out["levels"][0]["server_generation_tokens"] == 128
    assert after["resets"] >= before["resets"] + 1, (before, after)
    assert 0.5 <= after["dropped_s"] - before["dropped_s"] < 5, (before, after)


def test_bench_skips_levels_above_max_num_seqs(pair_factory):
    pair = pair_factory(head_env={"VLLM_SIM_TOKENS_PER_S": "400"})
    report = bench_sweep.run_sweep(pair.url, MODEL, levels=[1, 2, 4], max_tokens=32, profile="balanced", max_num_seqs=2,
                                   pause_s=0)
    assert [lv["concurrency"] for lv in report["levels"]] == [1, 2]
    assert report["skipped"] == [{"concurrency": 4, "reason": "above max-num-seqs 2 (requests would queue)"}]
    assert "| 4 | skipped |" in bench_sweep.markdown_report(report)


def test_bench_reports_http_errors(pair_factory):
    pair = pair_factory(head_env={"VLLM_SIM_TOKENS_PER_S": "400"})
    report = bench_sweep.run_sweep(pair.url, "no-such-model", levels=[2], max_tokens=16, pause_s=0)
    lv = report["levels"][0]
    assert report["errors"] == 2 and lv["ok_requests"] == 0 and lv["aggregate_tps"] is None
    assert "HTTP 404" in lv["error_messages"][0] and "does not exist" in lv["error_messages"][0]


# ------------------------------------------------------------------------------------------ validate
def test_validate_passes_clean_replies(pair_factory):
    pair = pair_factory(head_env={"VLLM_SIM_TOKENS_PER_S": "2000"})
    res = smoke_checks.run_validate(pair.url, MODEL, thinking=True, levels=[1, 2, 4, 6], max_tokens=64)
    assert res["ok"], res["failures"]
    names = [r["request"] for r in res["requests"]]
    assert names[:2] == ["deterministic", "tool_call"] and len(names) == 2 + 1 + 2 + 4 + 6
    assert all(r["status"] == 200 for r in res["requests"])
    # the wait on the model: at least its slowest answer, less than every answer one after the other
    slowest, total = max(r["seconds"] for r in res["requests"]), sum(r["seconds"] for r in res["requests"])
    assert slowest <= res["model_seconds"] < total + 1.0 and "s waiting on the model" in res["summary"]


EXPECTED_CHECK = {"cjk": "unexpected_script", "repeat": "token_loop", "leak": "leaked_token", "empty": "empty_reply"}


@pytest.mark.parametrize("mode", sorted(EXPECTED_CHECK))
def test_validate_catches_planted_garble(pair_factory, mode):
    pair = pair_factory(head_env={"VLLM_SIM_TOKENS_PER_S": "2000", "VLLM_SIM_GARBLE": mode})
    res = smoke_checks.run_validate(pair.url, MODEL, thinking=True, levels=[1, 2], max_tokens=64)
    assert not res["ok"]
    by_request = {}
    for f in res["failures"]:
        assert set(f) == {"request", "check", "excerpt", "detail"}
        by_request.setdefault(f["request"], set()).add(f["check"])
    print("\n%s: %s" % (mode, "; ".join("%s %s %r" % (f["request"], f["check"], f["excerpt"]) for f in res["failures"][:4])))
    # every concurrent reply is garbled and each one is named with the expected check
    for name in ("c1-r1", "c2-r1", "c2-r2"):
        assert EXPECTED_CHECK[mode] in by_request.get(name, set()), (name, by_request)
    # the deterministic answer is wrong too (garble or nothing instead of "Four"), and the tool call is missing
    assert "deterministic_answer" in by_request["deterministic"] or "empty_reply" in by_request["deterministic"]
    assert "tool_call" in by_request["tool_call"]


def test_validate_names_only_the_garbled_concurrent_requests(pair_factory):
    pair = pair_factory(head_env={"VLLM_SIM_TOKENS_PER_S": "400", "VLLM_SIM_GARBLE_MIN_CONCURRENCY": "3"})
    res = smoke_checks.run_validate(pair.url, MODEL, thinking=True, levels=[1, 2, 4, 6], max_tokens=48)
    assert not res["ok"]
    bad = set(f["request"] for f in res["failures"])
    assert bad and all(b.startswith(("c4-", "c6-")) for b in bad), bad
    assert set(f["check"] for f in res["failures"]) == {"unexpected_script"}


# ------------------------------------------------------------------------------------------ playbooks
def _playbook(tmp_path, name, extra):
    return local_pair.run_playbook(tmp_path, name, extra)


def test_bench_playbook_writes_table_json_and_plot(pair_factory, tmp_path):
    pair = pair_factory(head_env={"VLLM_SIM_TOKENS_PER_S": str(PLAYBOOK_PER_STREAM),
                                  "VLLM_SIM_AGG_TOKENS_PER_S": str(PLAYBOOK_AGG_CAP)})
    out_dir = tmp_path / "bench"
    rc, out = _playbook(tmp_path, "bench.yml", {"ds4_endpoint_url": pair.url, "ds4_bench_levels": [1, 2, 4, 8, 16],
                                                "ds4_bench_max_tokens": 256, "ds4_bench_dir": str(out_dir)})
    assert rc == 0, out
    files = sorted(os.listdir(str(out_dir)))
    assert [f.rsplit(".", 1)[1] for f in files] == ["json", "md", "png"], files
    assert all(f.startswith("bench-balanced-") for f in files)
    report = json.loads((out_dir / files[0]).read_text())
    # balanced: --max-num-seqs 8 from ds4_effective caps the sweep; c16 is skipped, as in seed 000
    assert [lv["concurrency"] for lv in report["levels"]] == [1, 2, 4, 8]
    assert report["skipped"][0]["concurrency"] == 16
    assert report["settings"]["thinking"] is False and report["model"] == MODEL
    # The 2 % accuracy claim is test_bench_measures_simulator_rates_within_2_percent (the sweep in this process). Here
    # the sweep runs in an Ansible worker beside the controller while CI's other lanes keep both cores busy: a chunk
    # stamped ~70 ms late at a window edge is 2.7 % of c2's 2.6 s window (CI measured 194.6 against 200 once). What
    # this test adds is the playbook's plumbing, so a wrong rate (a level or a cap not applied) is what it must catch:
    # the nearest wrong answers are 33 % (c4 capped at 300, not 400) and 50 % (c2 as c1) away.
    for lv in report["levels"]:
        assert _within(lv["aggregate_tps"], min(PLAYBOOK_PER_STREAM * lv["concurrency"], PLAYBOOK_AGG_CAP), tol=0.05), \
            lv["aggregate_tps"]
    png = (out_dir / files[2]).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20000
    md = (out_dir / files[1]).read_text()
    assert "seed 000" in md and "| 8 | 8 / 8 |" in md
    assert "| 1 | 1 / 1 |" in out  # the table is shown in the playbook output


def test_validate_playbook_passes_then_fails_on_garble(pair_factory, tmp_path):
    pair = pair_factory(head_env={"VLLM_SIM_TOKENS_PER_S": "2000"})
    rc, out = _playbook(tmp_path, "validate.yml", {"ds4_endpoint_url": pair.url, "ds4_validate_levels": [1, 2]})
    assert rc == 0, out
    assert "0 failure(s)" in out
    bad = pair_factory(head_env={"VLLM_SIM_TOKENS_PER_S": "2000", "VLLM_SIM_GARBLE": "leak"})
    rc, out = _playbook(tmp_path, "validate.yml", {"ds4_endpoint_url": bad.url, "ds4_validate_levels": [2]})
    assert rc != 0, out
    assert "validate failed" in out and "c2-r2: leaked_token" in out, out


def test_status_playbook_table(pair_factory, tmp_path):
    """status.yml on this machine: no ds4 units or containers here, the head's endpoint is the simulator."""
    pair = pair_factory(head_env={"VLLM_SIM_TOKENS_PER_S": "2000"})
    rc, out = _playbook(tmp_path, "status.yml", {"ds4_endpoint_url": pair.url, "ansible_become": False})
    assert rc == 0, out
    header = [ln for ln in out.splitlines() if "running/waiting" in ln]
    assert header and "KV used" in header[0], out
    head = [ln for ln in out.splitlines() if "spark1  head" in ln]
    assert head and "ok deepseek-v4-flash 'OK'" in head[0] and "0.0%" in head[0] and "0/0" in head[0], out
    assert any("spark2  worker" in ln for ln in out.splitlines()), out
