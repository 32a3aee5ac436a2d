# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mixed bench on the simulator, without and with --long-prefill-token-threshold (issue 44 part 3).

The simulator's step scheduler is vLLM V1's `Scheduler.schedule()` (tests/vllm_sim/engine.py, checked against the
recorded starvation traces of real vLLM 0.26.0): one token budget per step (--max-num-batched-tokens), running requests
first, waiting ones only while budget is left, a prefilling request capped at --long-prefill-token-threshold when > 0.
Two simulators, the same budget (1024), one with the threshold the collection derives from it
(ds4_config.long_prefill_threshold: 7/8, 896) and one without; the same bench_mixed.run_mixed against each:

- without: a short request sent 1 s into a ~3 s prefill gets its first token only when the prefill ends (the shape of
  the real-vllm-on-device notes, Part 1b: 10.3 s behind a 250K prompt, 0.02-0.08 s alone);
- with: it gets its first token within a step or two, near its time alone, and the long prompt's time to first token
  grows only by the shorts' own steps.

A word is one token: the simulated model directory holds a WordLevel tokenizer.json over the recorder's test
vocabulary (w0..w31999, the words run_mixed sends), so the API's usage.prompt_tokens is exactly long_tokens.
Then bench.yml -e ds4_bench_mode=mixed (the playbook, the vllm_bench_mixed module, bench_report) against the simulator
with the threshold, with ds4_interactive_long_prompts on so the configured threshold the report names is the one the
simulator runs; and bench.yml's refusal of a bad mode. Run with -s to see the figures.
"""


import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

import local_pair  # pylint: disable=import-error

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if os.path.join(REPO, "tests") not in sys.path:
    sys.path.insert(0, os.path.join(REPO, "tests"))
from vllm_sim import standin  # noqa: E402  pylint: disable=import-error,wrong-import-position

_LINK_ROOT = os.path.join(REPO, ".collections")
if os.path.isdir(_LINK_ROOT) and _LINK_ROOT not in sys.path:
    sys.path.insert(0, _LINK_ROOT)
from ansible_collections.dgxspark.ds4.plugins.module_utils._bench import bench_mixed  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config  # noqa: E402  pylint: disable=wrong-import-position

tokenizers = pytest.importorskip("tokenizers")

VLLM = os.path.join(REPO, "tests", "vllm_sim", "bin", "vllm")
MODEL = "deepseek-v4-flash"
BUDGET = 1024
THRESHOLD = ds4_config.long_prefill_threshold(BUDGET)
PREFILL = 50000.0     # tok/s: a 150K-token prompt prefills in ~3 s, one full step (1024 tokens) lasts ~20 ms
DECODE = 200.0        # tok/s per stream: a short request's 8 tokens take 40 ms
LONG_TOKENS = 150000


def build_tokenizer(path):
    """WordLevel over w0..w31999 + Whitespace: one run_mixed word is one token (the recorder's test tokenizer shape)."""
    from tokenizers import Tokenizer, models, pre_tokenizers  # pylint: disable=import-outside-toplevel
    vocab = {"[UNK]": 0}
    for i in range(32000):
        vocab["w%d" % i] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(path)


from ports import free_port as _free_port  # noqa: E402  pylint: disable=import-error,wrong-import-position,unused-import


class Sim(object):
    def __init__(self, tmp_path, name, threshold):
        root = standin.make_root(str(tmp_path / name))
        build_tokenizer(os.path.join(root, "models", "ds4", "tokenizer.json"))
        self.port = _free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.log_path = str(tmp_path / ("%s.log" % name))
        env = dict(os.environ)
        env.pop("VLLM_API_KEY", None)
        env.update(PYTHONUNBUFFERED="1", VLLM_SIM_PYTHON=sys.executable, VLLM_SIM_STATS_INTERVAL_S="0", VLLM_SIM_TIME_SCALE="0.02",
                   VLLM_SIM_ROOT=root, VLLM_SIM_TOKENS_PER_S=str(DECODE), VLLM_SIM_PREFILL_TOKENS_PER_S=str(PREFILL))
        argv = [VLLM, "serve", "/models/ds4", "--served-model-name", MODEL, "--host", "127.0.0.1", "--port", str(self.port),
                "--max-model-len", "262144", "--max-num-seqs", "8", "--enable-chunked-prefill",
                "--max-num-batched-tokens", str(BUDGET)]
        if threshold:
            argv += ["--long-prefill-token-threshold", str(threshold)]
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                break
            except OSError:
                assert self.proc.poll() is None and time.monotonic() < deadline, open(self.log_path).read()
                time.sleep(0.1)

    def close(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture(scope="module")
def sims(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mixed")
    out = {}
    try:
        out["off"] = Sim(tmp, "off", 0)
        out["on"] = Sim(tmp, "on", THRESHOLD)
        yield out
    finally:
        for sim in out.values():
            sim.close()


def _run(url):
    # metrics_url: the short requests start 1 s after the simulator shows the long prompt running (its tokenization on
    # a busy machine once took more than the 1 s the bench used to count from sending it: a short request then went in
    # before the prefill began and read as not starved)
    return bench_mixed.run_mixed(url, MODEL, long_tokens=LONG_TOKENS, short_requests=5, during_delay_s=1.0, short_gap_s=0.2,
                                 timeout_s=60, metrics_url=url)


def test_threshold_keeps_short_requests_interactive_during_a_long_prefill(sims):
    assert THRESHOLD == 896
    off = _run(sims["off"].url)
    on = _run(sims["on"].url)
    for name, rep in (("off", off), ("on", on)):
        print("\n%s: %s" % (name, bench_mixed.summary_line(rep)))
        assert rep["errors"] == [], rep["errors"]
        assert rep["long"]["prompt_tokens"] == LONG_TOKENS, rep["long"]   # one word, one token
        assert len(rep["short_alone"]) == 5 and rep["short_during"], rep
        assert rep["admission_note"] is None and rep["long"]["admitted_after_s"] is not None, rep
        assert all(s["sent_after_long_s"] >= rep["long"]["admitted_after_s"] + 0.95 for s in rep["short_during"]), (
            rep["long"], rep["short_during"])
    alone_off, alone_on = off["medians"]["short_alone_ttft_s"], on["medians"]["short_alone_ttft_s"]
    long_off, long_on = off["long"]["ttft_s"], on["long"]["ttft_s"]
    # the long prompt's prefill, from when it was seen running (its tokenization before that: 0.6 s on an idle machine,
    # more on a busy one, and not what the threshold changes)
    prefill_off, prefill_on = long_off - off["long"]["admitted_after_s"], long_on - on["long"]["admitted_after_s"]
    # the configured prefill: ~3 s for 150K tokens at 50K tok/s (plus what a loaded machine adds)
    assert 2.5 < prefill_off < 6.0, off["long"]
    # without the threshold: the short request sent 1 s in waits for the rest of the prefill, then the one after it
    # is sent after the long prompt's first token (not "during")
    first = off["short_during"][0]
    assert len(off["short_during"]) == 1, off["short_during"]
    assert first["ttft_s"] > 0.6 * (long_off - first["sent_after_long_s"]), (first, long_off)
    assert first["ttft_s"] > 10 * alone_off and off["ratios"]["short_during_over_alone"] > 10, off["medians"]
    # with it: every short request sent during the prefill is served within a step or two, near its time alone
    assert len(on["short_during"]) == 5, on["short_during"]
    assert on["medians"]["short_during_ttft_s"] < alone_on + 0.25, on["medians"]
    assert on["medians"]["short_during_ttft_s"] < 0.2 * first["ttft_s"], (on["medians"], first)
    # and the long prompt's prefill pays only for the steps it shared (the shorts' prompt tokens and decode steps): modestly
    assert prefill_on < 1.3 * prefill_off, (on["long"], off["long"])


def test_bench_playbook_mixed_mode_reports_both_figures(sims, tmp_path):
    out_dir = tmp_path / "bench"
    # the inventory's budget is the simulator's, so the threshold the collection derives and reports is the one it runs
    rc, out = local_pair.run_playbook(tmp_path, "bench.yml", {
        "ds4_endpoint_url": sims["on"].url, "ds4_bench_mode": "mixed", "ds4_bench_dir": str(out_dir),
        "ds4_bench_mixed_long_tokens": 60000, "ds4_bench_mixed_short_requests": 2, "ds4_interactive_long_prompts": True},
        site={"ds4_site_overrides": {"serve_args": {"max-num-batched-tokens": BUDGET}}})
    assert rc == 0, out
    files = sorted(os.listdir(str(out_dir)))
    assert len(files) == 2 and all(f.startswith("mixed-balanced-") for f in files), files
    assert [f.rsplit(".", 1)[1] for f in files] == ["json", "md"], files
    with open(os.path.join(str(out_dir), files[0])) as handle:
        report = json.load(handle)
    md = (out_dir / files[1]).read_text()
    assert report["tool"] == "mixed" and report["profile"] == "balanced" and report["threshold"] == THRESHOLD
    assert report["long"]["prompt_tokens"] == 60000 and report["errors"] == [] and len(report["short_alone"]) == 2
    assert "`--long-prefill-token-threshold` as configured: %d." % THRESHOLD in md
    assert "short request TTFT alone " in out and "during a 60000-token prefill" in out, out
    assert "| short during the long prefill: median TTFT" in out, out
    assert "| long prompt: seen running after |" in md, md


def test_bench_playbook_refuses_a_bad_mode_before_anything_runs(tmp_path):
    rc, out = local_pair.run_playbook(tmp_path, "bench.yml", {"ds4_endpoint_url": "http://127.0.0.1:9", "ds4_bench_mode": "mix"})
    assert rc != 0 and 'ds4_bench_mode = "mix": must be concurrency (the default) or mixed. Fix: -e ds4_bench_mode=mixed' in out, out
    assert "Run the mixed bench" not in out and "Run the sweep" not in out, out
