# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for memory_guard: parsers, thresholds per node size (every threshold, both sides), the decision
sequence (gate first, stop after stop_polls, once), and the settings check the role's preflight runs."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils import memory_guard as mg
from ansible_collections.dgxspark.ds4.plugins.filter.memory_guard_problems import memory_guard_problems

GIB = 1 << 30
# MemTotal as /proc/meminfo shows it: a 128 GB Spark (seed 000: CUDA sees 119.67 GiB) and a 96 GB node.
TOTAL = {128: 125483648, 96: 94112000}  # kB


def meminfo(node_gb, free_gib, available_gib=None):
    free_kb = int(free_gib * GIB / 1024)
    avail_kb = int((available_gib if available_gib is not None else free_gib + 60) * GIB / 1024)
    return ('MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\nBuffers:            2048 kB\n'
            'HugePages_Total:       0\n' % (TOTAL[node_gb], free_kb, avail_kb))


def psi(some=0.0, full=0.0):
    return ('some avg10=%.2f avg60=0.00 avg300=0.00 total=1234\nfull avg10=%.2f avg60=0.00 avg300=0.00 total=567\n'
            % (some, full))


ROWS = list(mg.DEFAULT_THRESHOLDS)


def test_parsers():
    info = mg.parse_meminfo(meminfo(128, 4.0))
    assert info['MemTotal'] == TOTAL[128] * 1024 and info['MemFree'] == 4 * GIB and info['HugePages_Total'] == 0
    assert mg.parse_psi(psi(12.5, 3.0)) == {
        'some': {'avg10': 12.5, 'avg60': 0.0, 'avg300': 0.0, 'total': 1234.0},
        'full': {'avg10': 3.0, 'avg60': 0.0, 'avg300': 0.0, 'total': 567.0}}
    assert mg.parse_psi('') == {} and mg.parse_psi('garbage\nsome nothing\n') == {}


@pytest.mark.parametrize('node_gb,row_gb', [(128, 128), (96, 96)])
def test_thresholds_follow_the_node_size(node_gb, row_gb):
    assert mg.thresholds_for(TOTAL[node_gb] * 1024, ROWS)['node_gb'] == row_gb


# (node size, MemFree GiB, PSI some, PSI full) -> level; each threshold of each size on both sides
@pytest.mark.parametrize('node_gb,free,some,full,level', [
    (128, 4.0, 0.0, 0.0, 'ok'),        # seed 000: the head under 8 concurrent requests
    (128, 2.01, 9.9, 24.9, 'ok'),
    (128, 1.99, 0.0, 0.0, 'gate'),     # MemFree below gate_free_gib 2.0
    (128, 3.0, 10.0, 0.0, 'gate'),     # PSI some at gate_psi_some_avg10 10
    (128, 1.01, 0.0, 0.0, 'gate'),
    (128, 0.99, 0.0, 0.0, 'stop'),     # below the floor stop_free_gib 1.0
    (128, 3.0, 50.0, 25.0, 'stop'),    # PSI full at stop_psi_full_avg10 25
    (96, 1.51, 0.0, 0.0, 'ok'),
    (96, 1.49, 0.0, 0.0, 'gate'),      # a 96 GB node: gate_free_gib 1.5
    (96, 1.2, 0.0, 0.0, 'gate'),       # ... which is a stop on no node but would gate a 128 GB one
    (96, 0.76, 0.0, 0.0, 'gate'),
    (96, 0.74, 0.0, 0.0, 'stop'),      # stop_free_gib 0.75
    (96, 3.0, 9.99, 0.0, 'ok'),
    (96, 3.0, 0.0, 25.0, 'stop'),
])
def test_level_per_threshold(node_gb, free, some, full, level):
    reading = mg.assess('spark1', meminfo(node_gb, free), psi(some, full), ROWS)
    assert reading['level'] == level, reading['why']
    assert reading['node_gb'] == node_gb


def test_memavailable_does_not_hide_the_squeeze():
    # seed 000: MemAvailable counts page cache that CUDA does not count as free; the guard reads MemFree
    reading = mg.assess('spark1', meminfo(128, 0.5, available_gib=100), psi(), ROWS)
    assert reading['level'] == 'stop'
    assert reading['why'] == 'spark1 (128 GB node): MemFree 0.50 GiB < floor 1.00 GiB (MemAvailable 100.0 GiB)'


def test_no_psi_file_judges_memfree_only_and_no_meminfo_judges_nothing():
    assert mg.assess('spark2', meminfo(128, 1.5), '', ROWS)['level'] == 'gate'
    assert mg.assess('spark2', '', psi(99, 99), ROWS)['level'] is None


def readings(*levels):
    free = {'ok': 4.0, 'gate': 1.5, 'stop': 0.5}
    return [mg.assess('spark%d' % (i + 1), meminfo(128, free[lvl]), psi(), ROWS) for i, lvl in enumerate(levels)]


def test_rising_pressure_gates_first_then_stops_after_stop_polls_then_nothing():
    guard = mg.MemoryGuard({'memory_stop_polls': 2})
    seq = [guard.decide(readings(*pair)) for pair in
           [('ok', 'ok'), ('ok', 'gate'), ('gate', 'gate'), ('ok', 'stop'), ('ok', 'stop'), ('stop', 'stop'), ('stop', 'stop')]]
    assert seq == [None, 'gate', None, None, 'stop', None, None]
    assert guard.level() == 'stop' and 'spark2 (128 GB node): MemFree 0.50 GiB < floor' in guard.why


def test_a_jump_straight_to_the_floor_still_gates_first():
    guard = mg.MemoryGuard({'memory_stop_polls': 1})
    assert [guard.decide(readings('stop', 'ok')) for _poll in range(3)] == ['gate', 'stop', None]


def test_a_stop_level_blip_does_not_stop():
    guard = mg.MemoryGuard({'memory_stop_polls': 2})
    assert [guard.decide(readings(lvl)) for lvl in ('gate', 'stop', 'gate', 'stop', 'gate')] == ['gate', None, None, None, None]


def test_the_gate_lifts_after_clear_polls_at_ok_and_a_new_head_rearms():
    guard = mg.MemoryGuard({'memory_clear_polls': 2})
    assert [guard.decide(readings(lvl)) for lvl in ('gate', 'ok', 'gate', 'ok', 'ok', 'ok')] == [
        'gate', None, None, None, 'clear', None]
    guard = mg.MemoryGuard({'memory_stop_polls': 1})
    assert [guard.decide(readings('stop')) for _poll in range(2)] == ['gate', 'stop']
    guard.reset()
    assert guard.decide(readings('stop')) == 'gate'


def test_unreadable_node_keeps_its_last_reading_out_of_the_decision():
    guard = mg.MemoryGuard({})
    assert guard.decide([mg.assess('spark2', '', '', ROWS)]) is None and guard.level() is None


@pytest.mark.parametrize('rows,fragment', [
    ([], 'vllm_service_memory_guard_thresholds = []: must be a non-empty list'),
    ('128', 'must be a non-empty list'),
    ([{'node_gb': 128}], 'vllm_service_memory_guard_thresholds[0] = '),
    ([dict(ROWS[0], gate_free_gib=0)], 'vllm_service_memory_guard_thresholds[0]: gate_free_gib must be numbers > 0'),
    ([dict(ROWS[0], stop_free_gib='1')], 'stop_free_gib must be numbers > 0'),
    ([dict(ROWS[0], stop_free_gib=True)], 'stop_free_gib must be numbers > 0'),
    ([dict(ROWS[0], stop_free_gib=2.0)], 'stop_free_gib 2.0 must be below gate_free_gib 2.0'),
    ([dict(ROWS[0], gate_free_gib=130, stop_free_gib=1)], 'gate_free_gib 130 must be below the node size node_gb 128'),
    ([dict(ROWS[0], gate_psi_some_avg10=101)], 'gate_psi_some_avg10 101 is a percentage of time: at most 100'),
    ([dict(ROWS[0], stop_psi_full_avg10=250)], 'stop_psi_full_avg10 250 is a percentage'),
    ([ROWS[0], ROWS[0]], 'node_gb [128, 128] appears twice'),
])
def test_bad_thresholds_are_refused_naming_the_variable(rows, fragment):
    problems = mg.check_thresholds(rows)
    assert problems and fragment in problems[0], problems


def test_default_thresholds_and_settings_are_usable():
    assert mg.check_thresholds(ROWS) == []
    assert memory_guard_problems({'memory_guard': True, 'memory_guard_thresholds': ROWS, 'memory_poll_s': 5,
                                  'memory_stop_polls': 2, 'memory_clear_polls': 3, 'meminfo_path': '/proc/meminfo',
                                  'psi_path': '/proc/pressure/memory'}) == []


@pytest.mark.parametrize('key,value,variable', [
    ('memory_poll_s', 0, 'vllm_service_memory_guard_poll_s'),
    ('memory_stop_polls', 'two', 'vllm_service_memory_guard_stop_polls'),
    ('memory_clear_polls', True, 'vllm_service_memory_guard_clear_polls'),
    ('meminfo_path', 'proc/meminfo', 'vllm_service_memory_guard_meminfo_path'),
    ('psi_path', '', 'vllm_service_memory_guard_psi_path'),
])
def test_bad_settings_are_refused_naming_the_variable(key, value, variable):
    problems = memory_guard_problems({'memory_guard': True, key: value})
    assert len(problems) == 1 and variable in problems[0] and repr(value) in problems[0]


def test_settings_are_not_judged_when_the_guard_is_off():
    assert memory_guard_problems({'memory_guard': False, 'memory_poll_s': 0}) == []
