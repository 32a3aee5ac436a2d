# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/plugin_utils/allreduce_guard.py: the nccl_fabric all-reduce preflight is skipped beside a live
vLLM pair (seed 002: an OOM on GB10 freezes the node) and its buffers are sized to the pair's least MemFree;
the role's tasks and converge checks use it."""


import os

import yaml

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import allreduce_guard as ag
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import converge_state

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ROLE = os.path.join(REPO, "roles", "nccl_fabric")
GIB = 1 << 30
MIB = 1 << 20


def meminfo(free_gib, available_gib=None):
    free_kb = int(free_gib * 1024 * 1024)
    avail_kb = int((available_gib if available_gib is not None else free_gib) * 1024 * 1024)
    return ("MemTotal:       127535240 kB\nMemFree:        %d kB\nMemAvailable:   %d kB\nCached:          1000 kB\n"
            "HugePages_Total:       0\n" % (free_kb, avail_kb))


def node(host, state="inactive", free_gib=110.0, available_gib=None, unit=None):
    return {"host": host, "unit": unit or ("dgxspark-ds4-%s.service" % ("head" if host == "spark1" else "worker")),
            "active_state": state, "meminfo": meminfo(free_gib, available_gib)}


def test_live_head_skips_both_ranks_with_one_line():
    p = ag.plan([node("spark1", "active"), node("spark2")])
    assert p["run"] is False and p["reason"] == "live_pair" and p["pending"] is True and p["max_bytes"] == 0
    assert p["live_units"] == ["spark1:dgxspark-ds4-head.service (active)"]
    assert "\n" not in p["msg"] and "skipped" in p["msg"] and "seed 002" in p["msg"]
    assert "nccl_fabric_preflight_force" in p["msg"]


def test_live_worker_alone_also_skips_and_starting_units_count_as_live():
    assert ag.plan([node("spark1"), node("spark2", "active")])["reason"] == "live_pair"
    for state in ("activating", "deactivating", "reloading"):
        assert ag.plan([node("spark1"), node("spark2", state)])["run"] is False
    for state in ("inactive", "failed", "", None, "unknown"):
        assert not ag.unit_live(state)


def test_force_runs_beside_live_pair_but_still_sizes_to_memfree():
    p = ag.plan([node("spark1", "active", free_gib=12), node("spark2", "active", free_gib=14)], force=True)
    assert p["run"] is True and p["reason"] == "forced" and p["pending"] is False
    # 0.5 x 12 GiB - 4 GiB overhead = 2 GiB budget: 1 GiB fits
    assert p["max_bytes"] == GIB
    assert "FORCED" in p["msg"]
    p = ag.plan([node("spark1", "active", free_gib=9), node("spark2", "active", free_gib=14)], force=True)
    # 0.5 x 9 - 4 = 0.5 GiB: 512 MiB on both ranks (the tightest node decides)
    assert p["max_bytes"] == 512 * MIB and "spark1" in p["msg"]


def test_idle_pair_runs_full_size():
    p = ag.plan([node("spark1"), node("spark2")])
    assert p["run"] is True and p["reason"] == "ok" and p["max_bytes"] == GIB and p["pending"] is False
    assert p["memfree"]["spark1"] == int(110.0 * 1024 * 1024) * 1024


def test_memfree_not_memavailable_decides():
    # 5 GiB free, 100 GiB available (page cache): CUDA on GB10 sees the 5 (seed 000); nothing fits
    p = ag.plan([node("spark1", free_gib=5, available_gib=100), node("spark2")])
    assert p["run"] is False and p["reason"] == "low_memory" and p["pending"] is True
    assert "nccl_fabric_preflight_min_fit_bytes" in p["msg"]


def test_fit_bytes():
    assert ag.fit_bytes(110 * GIB, GIB, 0.5, 4 * GIB) == GIB
    assert ag.fit_bytes(9 * GIB, GIB, 0.5, 4 * GIB) == 512 * MIB
    assert ag.fit_bytes(8 * GIB, GIB, 0.5, 4 * GIB) == 0
    assert ag.fit_bytes(100 * GIB, 3 * MIB, 0.5, 0) == 3 * MIB
    assert ag.fit_bytes(10 * MIB, GIB, 1.0, 0) == 8 * MIB


def test_missing_meminfo_skips():
    bad = node("spark2")
    bad["meminfo"] = ""
    p = ag.plan([node("spark1"), bad])
    assert p["run"] is False and p["reason"] == "no_meminfo" and "spark2" in p["msg"]
    assert ag.plan([])["run"] is False


def test_filter_plugin_passes_knobs():
    from ansible_collections.dgxspark.ds4.plugins.filter.fabric import FilterModule
    f = FilterModule().filters()["allreduce_plan"]
    p = f([node("spark1", free_gib=20), node("spark2", free_gib=20)], force=False, max_bytes=GIB, fraction="0.5",
          overhead_bytes=str(8 * GIB), min_fit_bytes=256 * MIB)
    assert p["max_bytes"] == 1 * GIB and p["run"]
    p = f([node("spark1", free_gib=20), node("spark2", free_gib=20)], overhead_bytes=int(9.5 * GIB))
    assert p["max_bytes"] == 512 * MIB


def _tasks(name):
    with open(os.path.join(ROLE, "tasks", name)) as fh:
        return yaml.safe_load(fh)


def test_role_tasks_run_the_module_only_per_plan_and_with_its_size():
    tasks = _tasks("allreduce.yml")
    by_name = dict((t["name"], t) for t in tasks)
    run = [t for t in tasks if "dgxspark.ds4.nccl_allreduce" in t][0]
    assert run["when"] == "_nccl_fabric_preflight_plan['run']"
    assert "_nccl_fabric_preflight_plan['max_bytes']" in run["dgxspark.ds4.nccl_allreduce"]["program_args"][1]
    plan_task = [t for t in tasks if "dgxspark.ds4.allreduce_plan" in str(t.get("ansible.builtin.set_fact", ""))]
    assert plan_task and "nccl_fabric_preflight_force" in str(plan_task[0])
    assert "_nccl_fabric_vllm_unit" in str(by_name["Allreduce | This rank's vLLM unit state (read-only)"])
    # every task after the plan that touches the GPU or judges it is gated on the plan
    for t in tasks[tasks.index(run):]:
        assert "_nccl_fabric_preflight_plan" in str(t.get("when")), t["name"]
    marker = [t for t in tasks if t.get("when") == "_nccl_fabric_preflight_plan['pending']" and "ansible.builtin.copy" in t]
    assert marker and marker[0]["ansible.builtin.copy"]["dest"] == "{{ _nccl_fabric_preflight_pending_path }}"


def test_role_inputs_declared():
    with open(os.path.join(ROLE, "defaults", "main.yml")) as fh:
        defaults = yaml.safe_load(fh)
    with open(os.path.join(ROLE, "meta", "argument_specs.yml")) as fh:
        spec = yaml.safe_load(fh)["argument_specs"]["main"]["options"]
    for name in ("nccl_fabric_preflight_force", "nccl_fabric_preflight_mem_fraction",
                 "nccl_fabric_preflight_mem_overhead_bytes", "nccl_fabric_preflight_min_fit_bytes"):
        assert name in defaults and name in spec
        assert spec[name]["default"] == defaults[name]
    assert defaults["nccl_fabric_preflight_force"] is False


def test_converge_check_sees_a_stopped_pair_after_a_skipped_preflight(tmp_path):
    """The record taken beside a live pair must not stand once the pair is stopped (the preflight is due)."""
    with open(os.path.join(ROLE, "vars", "main.yml")) as fh:
        raw = yaml.safe_load(fh)
    argv = raw["__nccl_fabric_pending_check"]
    assert raw["__nccl_fabric_converge_checks"]["commands"] == ["{{ __nccl_fabric_pending_check }}"]
    marker = tmp_path / "nccl-preflight-pending"
    script = argv[2].replace("{{ _nccl_fabric_preflight_pending_path | quote }}", str(marker)).replace(
        "{{ _nccl_fabric_vllm_unit | quote }}", "dgxspark-ds4-head.service")
    checks = {"commands": [[argv[0], argv[1], script]]}
    state = {"unit": "active"}

    def run(cmd):
        import subprocess
        env = dict(os.environ)
        fake = tmp_path / "bin"
        fake.mkdir(exist_ok=True)
        (fake / "systemctl").write_text("#!/bin/sh\necho %s\n" % state["unit"])
        os.chmod(str(fake / "systemctl"), 0o755)
        env["PATH"] = "%s:%s" % (fake, env["PATH"])
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, universal_newlines=True,
                           check=False)
        return p.returncode, p.stdout, p.stderr

    # no marker: vLLM starting or stopping changes nothing (molecule idempotence, no-op converge)
    quiet = converge_state.observe(checks, run)
    state["unit"] = "inactive"
    assert converge_state.observe(checks, run) == quiet
    # skipped beside the live pair: marker written, record taken while active
    marker.write_text("live_pair\n")
    state["unit"] = "active"
    recorded = converge_state.observe(checks, run)
    assert recorded != quiet
    assert converge_state.observe(checks, run) == recorded        # pair still live: the shortcut stands
    state["unit"] = "inactive"
    assert converge_state.observe(checks, run) != recorded        # pair stopped: the role (and preflight) runs


def test_preflight_off_clears_the_marker():
    tasks = _tasks("converge.yml")
    clear = [t for t in tasks if t.get("ansible.builtin.file", {}).get("path") == "{{ _nccl_fabric_preflight_pending_path }}"]
    assert clear and clear[0]["ansible.builtin.file"]["state"] == "absent"
    assert clear[0]["when"] == "not nccl_fabric_preflight | bool"
