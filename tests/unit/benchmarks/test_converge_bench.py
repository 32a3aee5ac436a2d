# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""benchmarks/converge_bench.py: the no-op run's restart check (parsing and comparing StartedAt)."""
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

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
    msg: DS4_BENCH_STARTED rank=0 host=spark1 container=dgxspark-ds4-head started=2026-11-22T08:00:01.5Z
ok: [spark2] => {
    "msg": "DS4_BENCH_STARTED rank=1 host=spark2 container=dgxspark-ds4-worker started=2026-11-22T08:00:02.25Z"
}
"""


def test_started_playbook_is_yaml_with_the_marker():
    play = yaml.safe_load(cb.STARTED_PLAYBOOK)
    assert play[0]["hosts"] == "spark"
    assert cb.STARTED_MARK in play[0]["tasks"][-1]["ansible.builtin.debug"]["msg"]


def test_parse_started_reads_both_ranks_in_either_result_format():
    ranks = cb.parse_started(OUT)
    assert ranks == {0: dict(host="spark1", container="dgxspark-ds4-head", started="2026-11-22T08:00:01.5Z"),
                     1: dict(host="spark2", container="dgxspark-ds4-worker", started="2026-11-22T08:00:02.25Z")}


def test_parse_started_refuses_a_missing_rank():
    with pytest.raises(SystemExit, match="ranks 0 and 1, got \\[0\\]"):
        cb.parse_started(OUT.split("ok: [spark2]", maxsplit=1)[0])


def test_restarted_names_only_the_rank_whose_start_moved():
    before = cb.parse_started(OUT)
    assert cb.restarted(before, dict(before)) == []
    after = dict(before)
    after[1] = dict(before[1], started="2026-11-22T09:00:00Z")
    assert cb.restarted(before, after) == [(1, before[1], after[1])]
