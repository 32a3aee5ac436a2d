# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""benchmarks/converge_bench.py: the no-op run's restart check, what counts as waiting, the floor's playbook."""

import importlib.util
import os

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_SPEC = importlib.util.spec_from_file_location("converge_bench", os.path.join(REPO, "benchmarks", "converge_bench.py"))
cb = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(cb)

OUT = """
TASK [Report] ******************************************************************
ok: [spark1] =>
    msg:
    - DS4_BENCH_STARTED host=spark1 container=/dgxspark-ds4-head started=2026-11-22T08:00:01.5Z
ok: [spark2] => {
    "msg": ["DS4_BENCH_STARTED host=spark2 container=/dgxspark-ds4-worker started=2026-11-22T08:00:02.25Z"]
}
"""


def test_started_and_floor_playbooks_are_yaml():
    play = yaml.safe_load(cb.STARTED_PLAYBOOK)
    assert play[0]["hosts"] == "spark" and play[0]["gather_facts"] is False
    assert cb.STARTED_MARK in play[0]["tasks"][1]["ansible.builtin.command"]
    floor = yaml.safe_load(cb.FLOOR_PLAYBOOK)
    assert floor[0]["gather_facts"] is False and list(floor[0]["tasks"][0]) == ["name", "ansible.builtin.ping"]


def test_parse_started_reads_every_rank_in_either_result_format():
    assert cb.parse_started(OUT) == {("spark1", "/dgxspark-ds4-head"): "2026-11-22T08:00:01.5Z",
                                     ("spark2", "/dgxspark-ds4-worker"): "2026-11-22T08:00:02.25Z"}


def test_parse_started_refuses_no_rank():
    with pytest.raises(SystemExit, match="no vLLM rank container"):
        cb.parse_started("ok: [spark1] =>\n    msg: []\n")


def test_restarted_names_only_the_rank_whose_start_moved_or_that_is_gone():
    before = cb.parse_started(OUT)
    assert cb.restarted(before, dict(before)) == []
    after = dict(before)
    after[("spark2", "/dgxspark-ds4-worker")] = "2026-11-22T09:00:00Z"
    assert cb.restarted(before, after) == [("spark2", "/dgxspark-ds4-worker")]
    del after[("spark2", "/dgxspark-ds4-worker")]
    assert cb.restarted(before, after) == [("spark2", "/dgxspark-ds4-worker")]


@pytest.mark.parametrize("name,waiting", [
    ("dgxspark.ds4.vllm_service : Restart | Stop the head first", True),
    ("dgxspark.ds4.vllm_service : Restart | Then stop the worker(s)", True),
    ("dgxspark.ds4.vllm_service : Restart | Start the worker(s)", True),
    ("dgxspark.ds4.vllm_service : Restart | Wait until each worker container runs", True),
    ("Ready | Wait until the pair serves (phases, a real completion; fails fast with the cause)", True),
    ("Drain | Wait at each router for its requests in flight on the pair", True),
    ("Rolling | Back into every router's rotation (once it answers its health check)", True),
    ("dgxspark.ds4.vllm_service : Restart | Why", False),
    ("dgxspark.ds4._converge : Probe | Compare every node with its record", False),
    ("Deterministic answer, tool call, reasoning, garble under concurrency", False),
])
def test_waiting_tasks_are_the_restart_readiness_and_drain_waits_only(name, waiting):
    assert bool(cb.WAITING_TASK.search(name)) is waiting


def test_ratios_are_against_the_floor_of_the_same_run():
    floor = dict(wall_s=2.0, cpu_s=1.5)
    res = cb.with_ratio(dict(wall_s=10.0, cpu_s=6.0, orchestration_s=4.0), floor)
    assert (res["ratio_wall"], res["ratio_cpu"], res["ratio_orchestration"]) == (5.0, 4.0, 2.0)


def test_roles_that_ran_from_the_converge_lines():
    out = ("ok: [spark1] =>\n    msg: 'vllm_service: runs (inputs: serve_args)'\n"
           "ok: [spark1] =>\n    msg: 'nccl_fabric: as recorded on every node, skipped'\n"
           "ok: [spark1] => {\"msg\": \"api_proxy: runs (forced: ds4_converge_full)\"}\n")
    assert sorted(set(cb.RAN.findall(out))) == ["api_proxy", "vllm_service"]


@pytest.mark.parametrize("name,smoke", [
    ("Deterministic answer, tool call, reasoning, garble under concurrency", True),
    ("Ready | Wait until the pair serves (phases, a real completion; fails fast with the cause)", False),
    ("Say which check changed and why (the tool call is checked with tool_choice \"required\", not \"auto\")", False),
])
def test_the_smoke_checks_requests_are_shown_apart_and_not_counted_as_waiting(name, smoke):
    assert bool(cb.SMOKE_TASK.search(name)) is smoke
    assert not (smoke and cb.WAITING_TASK.search(name))


SMOKE_OUT = """
TASK [Deterministic answer, tool call, reasoning, garble under concurrency] ****
ok: [spark1 -> spark1]
ok: [spark3 -> spark3]

TASK [Result] ******************************************************************
ok: [spark1] =>
    msg: 15 request(s), 0 failure(s); 13.92 s waiting on the model
ok: [spark3] =>
    msg: 15 request(s), 0 failure(s); 13.41 s waiting on the model

TASK [Rolling | The next pair] *************************************************
TASK [Result] ******************************************************************
ok: [spark3] =>
    msg: 'validate failed: 15 request(s), 1 failure(s); 12.50 s waiting on the model: c4-r2 garble: x'
"""


def test_the_model_s_answers_are_the_longest_of_a_task_s_hosts_summed_over_tasks():
    # spark1 and spark3 checked at once (13.92 s), then spark3 alone (12.50 s)
    assert cb.model_answers(SMOKE_OUT) == pytest.approx(13.92 + 12.50)
    assert cb.model_answers("TASK [Result] ***\nok: [spark1] =>\n    msg: hello\n") == 0.0


def test_a_read_only_figure_is_the_run_of_median_cpu_with_the_range_of_all():
    runs = [dict(wall_s=w, cpu_s=c, tasks=203) for w, c in ((12.0, 16.5), (11.0, 12.8), (14.0, 15.2))]
    mid = cb.median_run(runs)
    assert (mid['cpu_s'], mid['wall_s'], mid['runs']) == (15.2, 14.0, 3)
    assert mid['cpu_range'] == [12.8, 16.5] and mid['wall_range'] == [11.0, 14.0]
    one = cb.median_run(runs[:1])
    assert one['cpu_s'] == 16.5 and one['cpu_range'] == [16.5, 16.5]


def test_plan_off_measures_each_figure_again_right_after_with_the_plan_off_and_only_then():
    class Fake(object):
        def __init__(self):
            self.extra_args, self.calls = [], []

        def _res(self):
            return dict(wall_s=2.0, cpu_s=1.0, orchestration_s=1.0, changed={}, tasks=1)

        def inline(self, text):
            self.calls.append(('floor', list(self.extra_args)))
            return self._res()

        def shipped(self, name, *extra):
            self.calls.append((name, list(self.extra_args)))
            return self._res()

        def started_at(self):
            return {}
    fake = Fake()
    result = cb.measure(fake, ['status'], repeat=1, plan_off=True)
    assert sorted(result) == ['floor', 'status', 'status_plan_off']
    assert fake.calls == [('floor', []), ('site.yml', []), ('status.yml', []), ('site.yml', cb.PLAN_OFF), ('status.yml', cb.PLAN_OFF)]
    assert fake.extra_args == []
    assert cb.PLAN_OFF[0] == '--skip-tags'
    fake.calls = []
    assert sorted(cb.measure(fake, ['status'], repeat=1)) == ['floor', 'status']
    assert all(args == [] for dummy, args in fake.calls)


def test_the_report_names_the_controllers_python_and_its_standard_librarys_bytecode(tmp_path, capsys):
    """The floor's share of compiling changes the ratios (docs/measurements.md, thirty-ninth session): the benchmark
    reads the Python ansible-playbook runs under (its #! line) and counts its standard library's modules with bytecode."""
    import sys
    script = tmp_path / "ansible-playbook"
    script.write_text("#!%s -I\nprint('not run')\n" % sys.executable)
    os.chmod(str(script), 0o755)
    env = dict(os.environ, PATH=str(tmp_path), PYTHONDONTWRITEBYTECODE="1")
    py = cb.controller_python(env)
    assert py["interpreter"] == sys.executable and py["version"] == sys.version.split()[0] and py["dont_write_bytecode"]
    assert py["stdlib_modules"] > 100 and 0 <= py["stdlib_bytecode"] <= py["stdlib_modules"], py
    cb.report({"floor": {"tasks": 4, "wall_s": 1.0, "cpu_s": 0.8}, "python": dict(py, stdlib_bytecode=3, stdlib_modules=9)})
    assert ("controller Python %s (%s): standard library byte-compiled 3 of 9 modules; PYTHONDONTWRITEBYTECODE set"
            % (py["version"], sys.executable)) in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cb.controller_python(dict(env, PATH=str(tmp_path / "nowhere")))
