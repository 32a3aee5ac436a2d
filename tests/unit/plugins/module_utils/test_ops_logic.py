# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the operations logic (status, validate, bench, switch/rollback): vllm_client stream folding, bench_sweep report and seed
references, bench_plot, smoke_checks, ops_status, config_set."""


import importlib.util
import json
import os
import re
import time

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._bench import bench_plot, bench_sweep
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import config_set
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import ops_status, smoke_checks, vllm_client

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


# ------------------------------------------------------------------ vllm_client
def test_stream_events_fold_into_a_record():
    rec = vllm_client.new_record()
    tools = {}
    lines = [
        'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}',
        'data: {"choices":[{"index":0,"delta":{"reasoning":"Think."}}]}',
        'data: {"choices":[{"index":0,"delta":{"content":"Four"}}]}',
        'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"get_weather","arguments":""}}]}}]}',
        'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\": "}}]}}]}',
        'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\\"Paris\\"}"}}]}}]}',
        'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}',
        'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":6,"completion_tokens_details":{"reasoning_tokens":1}}}',
        ': keep-alive',
        'data: [DONE]',
    ]
    kinds = []
    for t, line in enumerate(lines):
        kind, obj = vllm_client.parse_sse_line(line)
        kinds.append(kind)
        if kind == "data":
            vllm_client.consume_event(rec, obj, float(t), tools)
    assert kinds[-2:] == [None, "done"]
    assert rec["t_first"] == 1.0 and rec["t_last"] == 5.0   # the role-only chunk carries no text
    assert rec["content"] == "Four" and rec["reasoning"] == "Think."
    assert rec["completion_tokens"] == 6 and rec["prompt_tokens"] == 9 and rec["reasoning_tokens"] == 1
    assert rec["finish_reason"] == "tool_calls" and rec["text_chunks"] == 5
    assert json.loads(tools[0]["function"]["arguments"]) == {"city": "Paris"} and tools[0]["id"] == "c1"


def test_run_concurrent_keeps_order_and_catches_exceptions():
    def fn(i):
        if i == 2:
            raise ValueError("boom")
        return i * 10
    out = vllm_client.run_concurrent(fn, [(i,) for i in range(4)])
    assert out[:2] == [0, 10] and out[3] == 30 and out[2] == {"error": "ValueError: boom"}
    assert vllm_client.run_concurrent(fn, []) == []


# ------------------------------------------------------------------ bench_sweep / bench_plot
def _level(c, agg, per, seed_spec=True):
    return {"concurrency": c, "requests": c, "ok_requests": c, "errors": 0, "error_messages": [], "aggregate_tps": agg,
            "per_stream_tps_mean": per, "per_stream_tps_min": per, "per_stream_tps_max": per, "ttft_p50_s": 0.1,
            "ttft_p95_s": 0.2, "window_s": 5.0, "server_generation_tokens": 256.0 * c,
            "spec_decode": {"available": seed_spec, "mean_acceptance_length": 2.5,
                            "per_position": [{"position": 0, "rate": 0.8}, {"position": 1, "rate": 0.7}]}}


def _report(profile="throughput", levels=None):
    levels = levels or [_level(1, 35.0, 35.0), _level(4, 80.0, 20.0), _level(8, 120.0, 15.0)]
    rep = {"endpoint": "http://h:8000", "model": "m", "profile": profile, "started_utc": "2026-11-22T10:00:00Z",
           "finished_utc": "2026-11-22T10:05:00Z", "settings": {"levels": [1, 4, 8, 16], "max_tokens": 256,
                                                                "thinking": False, "max_num_seqs": 8},
           "method": bench_sweep.METHOD, "levels": levels, "skipped": [{"concurrency": 16, "reason": "above max-num-seqs 8"}],
           "seed_reference": bench_sweep.reference_for(profile)}
    # as the report reaches bench_report through Ansible (JSON): integer keys become strings
    return json.loads(json.dumps(rep))


def test_markdown_report_rows_ratios_and_skips():
    md = bench_sweep.markdown_report(_report())
    rows = [ln for ln in md.splitlines() if ln.startswith("| ")]
    assert rows[1].startswith("| 1 | 1 / 1 | 35.0 | 35.0 (35.0-35.0) | 0.100 / 0.200 | 5.00 | 0.80/0.70 (len 2.50) | 256 | 36.5 | 0.96x |")
    assert rows[2].endswith("| 73.7 | 1.09x |") and rows[3].endswith("| 117.5 | 1.02x |")
    assert rows[4] == "| 16 | skipped | above max-num-seqs 8 | | | | | | 163.2 | |"
    assert "## Method" in md and "steady-state window" in md and "seed 000" in md


def test_compare_to_seed_with_string_keys():
    rep = _report()
    rep["comparison"] = bench_sweep.compare_to_seed(rep)
    assert rep["comparison"][1] == {"concurrency": 4, "measured_aggregate_tps": 80.0, "seed_aggregate_tps": 73.7,
                                    "ratio": round(80.0 / 73.7, 3)}


def test_profile_without_reference_says_so():
    md = bench_sweep.markdown_report(_report("conservative"))
    assert "No seed reference figures for this profile (seed 002" in md
    assert bench_sweep.reference_for("nope") is None


# The seed documents are not part of the repository; docs/sources.md quotes, verbatim, the parts of
# each seed the collection takes figures from (fenced blocks under "## seed NNN — `<file>`").
SOURCES_MD = os.path.join(REPO, "docs", "sources.md")


def _sources_missing(what):
    """In CI a missing source is a failure (a skipped check proves nothing); elsewhere a skip."""
    if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
        pytest.fail("%s is missing (CI=true: this check may not be skipped)" % what)
    pytest.skip("%s is missing" % what)


def _load_seed_checker():
    """tests/harness/check-seed-excerpts.py: the excerpt parser and the maintainer's verbatim check (one copy)."""
    path = os.path.join(REPO, "tests", "harness", "check-seed-excerpts.py")
    spec = importlib.util.spec_from_file_location("check_seed_excerpts", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SEED_CHECKER = _load_seed_checker()
_seed_excerpts = SEED_CHECKER.seed_excerpts


def _load_excerpts():
    if not os.path.isfile(SOURCES_MD):
        _sources_missing(SOURCES_MD)
    with open(SOURCES_MD, encoding="utf-8") as f:
        return _seed_excerpts(f.read())


def _figure_in(value, text):
    for form in ("%.1f" % value, "%.2f" % value, ("%.2f" % value).rstrip("0")):
        if re.search(r"(?<![\d.])%s(?!\d)" % re.escape(form), text):
            return True
    return False


def test_seed_excerpt_parser():
    text = ("## seed 000 — `000_ab.txt`\n\n```text\n| 1 | 37.8 |\n```\nsummary 99.9\n"
            "## seed 001 — `001_cd.txt`\n  ```text\n  | c2 | 54.4 |\n  ```\n")
    ex = _seed_excerpts(text)
    assert ex == {"000_ab.txt": "| 1 | 37.8 |", "001_cd.txt": "  | c2 | 54.4 |"}
    assert _figure_in(37.8, ex["000_ab.txt"]) and not _figure_in(99.9, ex["000_ab.txt"])   # prose is not an excerpt
    assert not _figure_in(7.8, ex["000_ab.txt"]) and not _figure_in(37.0, ex["000_ab.txt"])


def test_seed_reference_figures_appear_in_the_cited_seed():
    """Every reference figure is written in a verbatim excerpt of the seed its source names (no invented numbers)."""
    excerpts = _load_excerpts()
    assert len(excerpts) == 4 and all(excerpts.values()), sorted(excerpts)
    for profile, ref in bench_sweep.SEED_REFERENCES.items():
        m = re.search(r"\((\d{3}_[0-9a-f]+\.txt)\)", ref["source"])
        assert m, (profile, ref["source"])
        assert m.group(1) in excerpts, "%s: no section for %s in docs/sources.md" % (profile, m.group(1))
        for value in list(ref["aggregate"].values()) + list(ref["per_stream"].values()):
            assert _figure_in(value, excerpts[m.group(1)]), "%s: %s not in the excerpts of %s" % (profile, value, m.group(1))


def _write_seeds(seed_dir, excerpts):
    os.makedirs(seed_dir)
    for name, block in excerpts.items():
        with open(os.path.join(seed_dir, name), "w", encoding="utf-8") as f:
            f.write("Flattened page text before.\n" + "\n\n".join(" ".join(line.split()) for line in block.splitlines()) + "\nafter\n")


def test_seed_excerpt_checker_finds_altered_and_missing_seeds(tmp_path):
    """The seed files are not in the repository, so CI cannot compare docs/sources.md with them; a maintainer runs
    tests/harness/check-seed-excerpts.py SEED_DIR (see docs/sources.md). This proves that checker on seeds built here:
    quiet when every excerpt line is in its seed (whitespace folded), and naming the line when a figure differs or
    the file when a seed is absent."""
    excerpts = _load_excerpts()
    good = str(tmp_path / "good")
    _write_seeds(good, excerpts)
    assert SEED_CHECKER.check(good, SOURCES_MD)[1] == []
    assert SEED_CHECKER.main(["check-seed-excerpts.py", good, SOURCES_MD]) == 0
    name = sorted(excerpts)[0]
    line = next(ln for ln in excerpts[name].splitlines() if re.search(r"\d\.\d", ln))
    changed = dict(excerpts)
    changed[name] = excerpts[name].replace(line, re.sub(r"(\d)\.(\d)", r"\1.9\2", line, count=1))
    bad = str(tmp_path / "bad")
    _write_seeds(bad, changed)
    problems = SEED_CHECKER.check(bad, SOURCES_MD)[1]
    assert problems == ["%s: not verbatim: %s" % (name, " ".join(line.split()))], problems
    os.remove(os.path.join(good, name))
    assert SEED_CHECKER.check(good, SOURCES_MD)[1] == ["%s: no %s" % (good, name)]
    assert SEED_CHECKER.main(["check-seed-excerpts.py", good, SOURCES_MD]) == 1


def test_chat_body_thinking_and_ignore_eos():
    b = bench_sweep.chat_body("m", "p", 256, thinking=False)
    assert b["max_tokens"] == 256 and b["ignore_eos"] is True and b["temperature"] == 0.0
    assert b["chat_template_kwargs"] == {"thinking": False, "enable_thinking": False}


def test_plot_series_and_png(tmp_path):
    rep = _report("dspark-c16")
    s = bench_plot.plot_series(rep)
    assert s["measured_aggregate"] == [(1, 35.0), (4, 80.0), (8, 120.0)]
    assert s["seed_aggregate"] == [(1, 57.6), (4, 140.8), (8, 252.6), (16, 315.1)]
    assert s["seed_per_stream"][-1] == (16, 19.7)
    pytest.importorskip("matplotlib")
    path = str(tmp_path / "p.png")
    bench_plot.render_plot(rep, path)
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    assert (width, height) == (1140, 720)


# ------------------------------------------------------------------ smoke_checks
def _resp(content=None, reasoning=None, tool_calls=None, finish="stop"):
    return {"choices": [{"message": {"content": content, "reasoning": reasoning, "tool_calls": tool_calls or []},
                         "finish_reason": finish}]}


def _call(name="get_weather", args='{"city": "Paris"}'):
    return [{"id": "x", "type": "function", "function": {"name": name, "arguments": args}}]


def test_deterministic_answer():
    assert smoke_checks.check_deterministic("d", _resp("Four.")) == []
    assert smoke_checks.check_deterministic("d", _resp(" 4 ")) == []
    f = smoke_checks.check_deterministic("d", _resp("Five"))
    assert f[0]["request"] == "d" and f[0]["check"] == "deterministic_answer" and f[0]["excerpt"] == "Five"


def test_tool_call_checks():
    ok = _resp(None, tool_calls=_call(), finish="tool_calls")
    assert smoke_checks.check_tool_call("t", ok) == []

    def checks(resp):
        return [f["check"] for f in smoke_checks.check_tool_call("t", resp)]
    assert checks(_resp("I cannot")) == ["tool_call"]
    assert checks(_resp(None, tool_calls=_call(args='{"city": '), finish="tool_calls")) == ["tool_call_arguments"]
    assert checks(_resp(None, tool_calls=_call(args='{"unit": "kelvin"}'), finish="tool_calls")) == [
        "tool_call_arguments", "tool_call_arguments"]   # city missing, unit not in the enum
    assert checks(_resp(None, tool_calls=_call(name="other"), finish="tool_calls")) == ["tool_call_name"]
    assert checks(_resp(None, tool_calls=_call(), finish="stop")) == ["tool_call_finish"]
    assert checks(_resp(None, tool_calls=_call(args="[1]"), finish="tool_calls")) == ["tool_call_arguments"]


def test_reasoning_field():
    assert smoke_checks.check_reasoning("d", _resp("Four", reasoning="short")) == []
    f = smoke_checks.check_reasoning("d", _resp("thinking...</think>Four"))
    assert f[0]["check"] == "reasoning_field" and "no --reasoning-parser" in f[0]["detail"]


def test_garble_names_request_check_and_excerpt():
    f = smoke_checks.check_garble("c4-r2", _resp("Paris " + "我们的模型在这个问题上给出了答案" * 3))
    assert f[0]["request"] == "c4-r2" and f[0]["check"] == "unexpected_script" and "我们" in f[0]["excerpt"]
    assert smoke_checks.check_garble("c1-r1", _resp("The sky is blue because of Rayleigh scattering.")) == []
    assert smoke_checks.check_garble("x", _resp(""))[0]["check"] == "empty_reply"
    r = smoke_checks.check_garble("x", _resp("fine", reasoning="</think> leaked"))
    assert [x["check"] for x in r] == ["reasoning:leaked_token"]


def test_validate_times_the_wait_on_the_model_as_the_requests_run(monkeypatch):
    """model_seconds is the wall of the requests as sent: the deterministic prompt, the tool call, then each level's
    prompts at once (1, 2, 4, 6: four waits, not thirteen), and the summary says it (the converge benchmark reads it)."""
    each = 0.2

    def post(_url, _path, body, _key, _timeout):
        time.sleep(each)
        if body.get("tools"):
            return 200, _resp(None, tool_calls=_call(), finish="tool_calls"), each
        if body["max_tokens"] == 32:
            return 200, _resp("Four."), each
        return 200, _resp("The sky is blue because air scatters blue light more than red light."), each
    monkeypatch.setattr(vllm_client, "post_json", post)
    res = smoke_checks.run_validate("http://127.0.0.1:1", "m", levels=[1, 2, 4, 6])
    assert res["ok"], res["failures"]
    assert len(res["requests"]) == 15
    # six waits one after the other (the deterministic prompt, the tool call, four levels); thirteen would be 2.6 s+
    assert 6 * each <= res["model_seconds"] < 12 * each, res["model_seconds"]
    assert res["summary"] == "15 request(s), 0 failure(s); %.2f s waiting on the model" % res["model_seconds"]


# ------------------------------------------------------------------ ops_status
def test_status_row_and_table():
    unit = ops_status.parse_systemctl_show("ActiveState=active\nSubState=running\nNRestarts=0\nMainPID=42\n")
    inspect = json.dumps([{"State": {"Running": True, "Status": "running", "StartedAt": "2026-11-22T10:00:00.5Z"},
                           "Image": "sha256:0123456789abcdef0123", "Config": {"Image": "img:tag"}}])
    cont = ops_status.parse_docker_inspect(inspect)
    assert cont["running"] and cont["image_id"].startswith("sha256:01")
    metrics = ops_status.metrics_summary('vllm:kv_cache_usage_perc{engine="0"} 0.125\n'
                                         'vllm:num_requests_running{engine="0"} 3.0\nvllm:num_requests_waiting{engine="0"} 1.0\n')
    now = ops_status.parse_iso8601("2026-11-22T11:02:03Z")
    head = ops_status.build_row("spark1", "head", unit, cont, {"profile": "balanced"},
                                {"health": 200, "model": "m", "answer": "OK", "seconds": 0.42, "metrics": metrics}, now)
    assert head["uptime"] == "1h02m" and head["kv"] == "12.5%" and head["reqs"] == "3/1" and head["healthy"]
    assert head["endpoint"] == "ok m 'OK' 0.4s" and head["image"] == "0123456789ab" and head["profile"] == "balanced"
    worker = ops_status.build_row("spark2", "worker", ops_status.parse_systemctl_show("ActiveState=failed\nSubState=failed\nNRestarts=2"),
                                  ops_status.parse_docker_inspect("[]"), None, None, now)
    assert worker["unit"] == "failed/failed (2 restarts)" and worker["container"] == "absent" and not worker["healthy"]
    lines = ops_status.format_table([worker, head])
    assert lines[0].split()[:3] == ["node", "role", "unit"] and lines[2].startswith("spark1") and lines[3].startswith("spark2")
    assert ops_status.parse_iso8601("2026-11-22T12:00:00+01:00") == ops_status.parse_iso8601("2026-11-22T11:00:00Z")
    assert ops_status.parse_iso8601("0001-01-01T00:00:00Z") is None
    assert ops_status.human_duration(90061) == "1d01h" and ops_status.human_duration(65) == "1m05s"


# ------------------------------------------------------------------ config_set
def _files(tmp_path):
    live = tmp_path / "etc"
    live.mkdir()
    return [{"name": "launch-head.sh", "path": str(live / "launch-head.sh")},
            {"name": "unit", "path": str(live / "unit.service")},
            {"name": "secrets-head.env", "path": str(live / "secrets-head.env")}]


def test_save_swap_and_swap_back(tmp_path):
    files = _files(tmp_path)
    store = str(tmp_path / "previous")
    open(files[0]["path"], "w").write("exec vllm serve --max-model-len 131072\n")
    open(files[1]["path"], "w").write("unit A\n")
    open(files[2]["path"], "w").write("KEY=a\n")
    os.chmod(files[2]["path"], 0o600)
    assert config_set.plan_save(files, store)[0]
    config_set.save(files, store, label="balanced")
    assert config_set.plan_save(files, store) == (False, [])
    assert oct(os.stat(os.path.join(store, "secrets-head.env")).st_mode & 0o777) == "0o600"
    assert oct(os.stat(store).st_mode & 0o777) == "0o700"
    # the switch: new files, one file gone
    open(files[0]["path"], "w").write("exec vllm serve --max-model-len 65536\n")
    open(files[1]["path"], "w").write("unit B\n")
    os.remove(files[2]["path"])
    changed, diff, written = config_set.plan_swap(store)
    assert changed and len(diff) == 3
    assert written == sorted(f["name"] for f in files[:3])   # each kept and differing: the swap writes all three
    out = config_set.swap(store, label="throughput")
    assert out["restored"]["label"] == "balanced"
    assert open(files[0]["path"]).read().endswith("131072\n") and open(files[1]["path"]).read() == "unit A\n"
    assert open(files[2]["path"]).read() == "KEY=a\n" and oct(os.stat(files[2]["path"]).st_mode & 0o777) == "0o600"
    assert config_set.read_manifest(store)["label"] == "throughput"
    assert not os.path.exists(os.path.join(store, "secrets-head.env"))   # absent in the throughput set
    # a second swap returns to the switched set
    config_set.swap(store, label="balanced")
    assert open(files[0]["path"]).read().endswith("65536\n") and not os.path.exists(files[2]["path"])


def test_swap_refuses_missing_or_tampered_store(tmp_path):
    files = _files(tmp_path)
    store = str(tmp_path / "previous")
    with pytest.raises(config_set.ConfigSetError, match="no rollback target"):
        config_set.swap(store)
    with pytest.raises(config_set.ConfigSetError, match="nothing to keep"):
        config_set.save(files, store)
    open(files[0]["path"], "w").write("a\n")
    config_set.save(files, store)
    open(os.path.join(store, "launch-head.sh"), "w").write("tampered\n")
    with pytest.raises(config_set.ConfigSetError, match="does not match its manifest checksum"):
        config_set.swap(store)
    assert open(files[0]["path"]).read() == "a\n"   # nothing moved
    with pytest.raises(config_set.ConfigSetError, match="bad file key"):
        config_set.live_state([{"name": "manifest.json", "path": "/x"}])
    with pytest.raises(config_set.ConfigSetError, match="must be absolute"):
        config_set.live_state([{"name": "a", "path": "rel"}])


@pytest.mark.parametrize("profile,role,expected", [
    ("balanced", "spark1/launch-head.sh", {"served_model_name": "deepseek-v4-flash", "max_model_len": 131072, "thinking": True,
                                           "api_port": 8000, "max_num_seqs": 8, "headless": False}),
    ("throughput", "spark2/launch-worker.sh", {"max_model_len": 65536, "max_num_seqs": 16, "headless": True}),
])
def test_launch_facts_from_golden_scripts(profile, role, expected):
    text = open(os.path.join(REPO, "tests", "golden", profile, role)).read()
    facts = config_set.launch_facts(text)
    for k, v in expected.items():
        assert facts[k] == v, (k, facts)
    assert config_set.launch_facts("#!/bin/sh\necho hi\n")["served_model_name"] is None


def test_launch_from_record_reads_the_published_slice_and_never_the_script():
    launch = {"served_model_name": "m", "max_model_len": 65536, "max_num_seqs": 8, "thinking": False, "vllm_port": 8001,
              "vllm_host": "127.0.0.1", "public_port": 8000, "engine_url": "http://127.0.0.1:8001", "headless": False}

    def never(path):
        raise AssertionError("the script was read: %s" % path)

    assert config_set.launch_from_record({"launch": launch, "launch_script": "/x.sh"}, never) == launch
    assert config_set.launch_from_record(None, never) == {}


def test_launch_from_record_of_a_record_older_than_the_slice(tmp_path):
    """A set deployed by an older collection version (its record has the clients' port and the served name): the
    rest from the launch script it names, under the new names (vllm_port, not the ambiguous api_port)."""
    text = open(os.path.join(REPO, "tests", "golden", "balanced", "spark1", "launch-head.sh")).read()
    script = tmp_path / "launch-head.sh"
    script.write_text(text)
    record = {"api_port": 8000, "served_model": "deepseek-v4-flash", "launch_script": str(script)}
    facts = config_set.launch_from_record(record, lambda p: open(p).read())
    assert facts["vllm_port"] == 8000 and facts["public_port"] == 8000, facts
    assert facts["max_model_len"] == 131072 and facts["thinking"] is True and facts["served_model_name"] == "deepseek-v4-flash"
    assert facts["engine_url"] == "http://127.0.0.1:8000", facts
    gone = config_set.launch_from_record(dict(record, launch_script=str(tmp_path / "gone.sh")), lambda p: open(p).read())
    assert gone["public_port"] == 8000 and gone["vllm_port"] is None and gone["engine_url"] is None, gone
    path = tmp_path / "deployed-head.json"
    path.write_text(json.dumps(record))
    assert config_set.read_record(str(path)) == record
    path.write_text("not json")
    assert config_set.read_record(str(path)) is None and config_set.read_record(str(tmp_path / "none.json")) is None
