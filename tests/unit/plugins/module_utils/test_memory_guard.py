# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for memory_guard on the fixtures of tests/fixtures/memory (the kernel's formulas at the collection's own
settings: 128 GB Spark, vm.min_free_kbytes 1572864; see make_fixtures.py): the watermarks it reads are the kernel's
(worked by hand here), MemFree anywhere in the reclaim band with PSI 0 is no action, PSI some gates, MemFree below min
or PSI full stops (after the gate), recovery clears; the parsers, the fallback, and the settings check."""


import os
import sys

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import memory_guard as mg
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe


GIB = 1 << 30
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'fixtures', 'memory')
ZONEINFO = ('zoneinfo-spark128-normal.txt', 'zoneinfo-spark128-dma-normal.txt')
BAND = ('meminfo-band-min.txt', 'meminfo-band-low.txt', 'meminfo-band-mid.txt', 'meminfo-band-high.txt')

# The kernel's formula worked by hand (mm/page_alloc.c, __setup_per_zone_wmarks), one Normal zone, 4 KiB pages:
# pages_min = 1572864 KiB >> 2 = 393216 pages (1.5 GiB); managed = MemTotal 125489508 kB / 4 = 31372377 pages;
# step = max(393216 >> 2 = 98304, mult_frac(31372377, 10, 10000) = 31372) = 98304 pages (0.375 GiB);
# low = 491520 pages (1.875 GiB), high = 589824 pages (2.25 GiB).
MIN, LOW, HIGH = 393216 * 4096, 491520 * 4096, 589824 * 4096


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def reading(meminfo, psi='pressure-memory-idle.txt', zoneinfo=ZONEINFO[0], node='spark2', min_free=''):
    return mg.assess(node, fixture(meminfo), fixture(psi), None, fixture(zoneinfo) if zoneinfo else '',
                     fixture(min_free) if min_free else '')


def test_the_fixtures_are_what_make_fixtures_writes():
    sys.path.insert(0, FIXTURES)
    try:
        import make_fixtures  # pylint: disable=import-error,import-outside-toplevel
    finally:
        sys.path.pop(0)
    for name, text in make_fixtures.scenarios().items():
        assert fixture(name) == text, name


def test_watermarks_read_from_zoneinfo_are_the_kernel_formula():
    info = node_probe.parse_meminfo(fixture('meminfo-band-mid.txt'), in_bytes=True)
    zones = mg.parse_zoneinfo(fixture(ZONEINFO[0]))
    assert [(z['zone'], z['managed']) for z in zones] == [('DMA', 0), ('DMA32', 0), ('Normal', 31372377), ('Movable', 0),
                                                          ('Device', 0)]
    # the empty Movable zone carries min 32 (clamp(managed/1024, 32, 128)); only populated zones count
    assert zones[3]['min'] == 32
    assert mg.page_size_of(info['MemTotal'], zones) == 4096
    assert mg.watermarks(info, zones) == {'min': MIN, 'low': LOW, 'high': HIGH, 'source': 'zoneinfo', 'page_size': 4096}
    # the same formula in the module (used for the fallback) agrees
    assert mg.kernel_watermarks(1572864, [('Normal', 31372377)])[0] == {
        'zone': 'Normal', 'managed': 31372377, 'min': 393216, 'low': 491520, 'high': 589824, 'promo': 688128}
    # DMA + Normal: the same min_free_kbytes spread over two zones; the sums differ by the per-zone rounding only
    marks = mg.watermarks(info, mg.parse_zoneinfo(fixture(ZONEINFO[1])))
    assert [MIN - marks['min'], LOW - marks['low'], HIGH - marks['high']] == [4096, 2 * 4096, 3 * 4096]


def test_watermarks_fall_back_to_min_free_kbytes_and_a_boost_is_not_the_floor():
    info = node_probe.parse_meminfo(fixture('meminfo-band-mid.txt'), in_bytes=True)
    assert mg.parse_min_free_kbytes(fixture('min_free_kbytes.txt')) == 1572864
    marks = mg.watermarks(info, [], 1572864)
    assert (marks['source'], marks['min'], marks['low'], marks['high']) == ('min_free_kbytes', MIN, LOW, HIGH)
    assert mg.watermarks(info, [], None) is None
    # a transient watermark boost (zoneinfo "boost", added to min/low/high by the kernel) is taken off
    boosted = fixture(ZONEINFO[0]).replace('boost    0\n        min      393216', 'boost    5000\n        min      398216')
    assert mg.watermarks(info, mg.parse_zoneinfo(boosted))['min'] == MIN
    # zoneinfo whose managed and present pages do not make MemTotal at any page size (another host's file): not
    # trusted. Managed pages alone may fall short of MemTotal on a real kernel (test_memory_guard_real_host.py).
    other = fixture(ZONEINFO[0]).replace('managed  31372377', 'managed  4000000')
    other = other.replace('present  31380569', 'present  4000000')
    assert mg.watermarks(info, mg.parse_zoneinfo(other), 1572864)['source'] == 'min_free_kbytes'
    managed_short = fixture(ZONEINFO[0]).replace('managed  31372377', 'managed  4000000')
    assert mg.watermarks(info, mg.parse_zoneinfo(managed_short), 1572864)['source'] == 'zoneinfo'
    # 64 KiB pages: the same bytes in 16x fewer pages
    zones64 = [{'zone': 'Normal', 'managed': 31372377 // 16, 'min': 24576, 'low': 30720, 'high': 36864}]
    assert mg.page_size_of(info['MemTotal'], zones64) == 65536
    assert mg.watermarks(info, zones64)['min'] == MIN


def test_one_cat_of_all_four_sources_parses_each():
    text = ''.join(fixture(n) for n in ('meminfo-band-mid.txt', 'pressure-memory-some-high.txt', ZONEINFO[0],
                                        'min_free_kbytes.txt'))
    assert node_probe.parse_meminfo(text, in_bytes=True)['MemTotal'] == 125489508 * 1024
    assert mg.parse_psi(text)['some']['avg10'] == 35.0
    assert len(mg.parse_zoneinfo(text)) == 5 and mg.parse_min_free_kbytes(text) == 1572864
    one = mg.assess('spark2', text, text, None, text, text)
    assert one['level'] == 'gate' and one['watermarks']['source'] == 'zoneinfo'


@pytest.mark.parametrize('zoneinfo', ZONEINFO)
@pytest.mark.parametrize('meminfo', BAND)
def test_memfree_anywhere_in_the_reclaim_band_with_psi_zero_is_no_action(meminfo, zoneinfo):
    r = reading(meminfo, zoneinfo=zoneinfo)
    assert MIN <= r['mem_free'] < HIGH and r['mem_available'] > 20 * GIB
    assert r['level'] == 'ok', r['why']
    guard = mg.MemoryGuard({})
    assert [guard.decide([r]) for _poll in range(20)] == [None] * 20 and not guard.gated


def test_the_old_gate_would_have_fired_inside_the_band():
    # the table this replaces gated at MemFree < 2.0 GiB and stopped below 1.0 GiB: three of the four band points are
    # below 2.0 GiB, and its floor was below min, where ordinary allocations never take MemFree
    frees = [reading(m)['mem_free'] for m in BAND]
    assert [f < 2 * GIB for f in frees] == [True, True, False, False]
    assert MIN > 1 * GIB and all(reading(m)['level'] == 'ok' for m in BAND)


def test_psi_some_high_gates_without_stopping():
    r = reading('meminfo-under-load.txt', 'pressure-memory-some-high.txt')
    assert r['level'] == 'gate'
    assert r['why'] == ('spark2: PSI some avg10 35.0% >= 10.0%, MemFree 9.00 GiB (above the reclaim band: min 1.50 GiB, '
                        'high 2.25 GiB, from zoneinfo), MemAvailable 8.25 GiB')
    guard = mg.MemoryGuard({'memory_stop_polls': 2})
    assert [guard.decide([r]) for _poll in range(10)] == ['gate'] + [None] * 9
    # the same stalls with MemFree in the band: still a gate, never a stop
    assert reading('meminfo-band-min.txt', 'pressure-memory-some-high.txt')['level'] == 'gate'


def test_below_min_and_psi_full_gate_first_then_stop_on_the_second_poll():
    below = reading('meminfo-below-min.txt', 'pressure-memory-full-high.txt')
    assert below['level'] == 'stop'
    assert below['why'] == ("spark2: MemFree 1.20 GiB < the kernel's min watermark 1.50 GiB (zoneinfo), PSI full avg10 "
                            '30.0% >= 25.0%, MemAvailable 0.00 GiB')
    head = reading('meminfo-band-mid.txt', node='spark1')
    guard = mg.MemoryGuard({'memory_stop_polls': 2})
    # the first poll at the stop level gates (the gate always comes first) and counts; the second stops; then nothing
    assert [guard.decide([head, below]) for _poll in range(4)] == ['gate', 'stop', None, None]
    assert guard.level() == 'stop' and guard.why == below['why']


@pytest.mark.parametrize('meminfo,psi', [
    ('meminfo-below-min.txt', 'pressure-memory-idle.txt'),        # MemFree below min alone
    ('meminfo-band-mid.txt', 'pressure-memory-full-high.txt'),    # PSI full alone
])
def test_each_severe_signal_alone_is_the_stop_level(meminfo, psi):
    assert reading(meminfo, psi)['level'] == 'stop'


def test_a_stop_level_blip_does_not_stop_and_recovery_clears():
    stop = reading('meminfo-below-min.txt', 'pressure-memory-full-high.txt')
    gate = reading('meminfo-under-load.txt', 'pressure-memory-some-high.txt')
    ok = reading('meminfo-band-mid.txt', 'pressure-memory-recovered.txt')
    assert ok['level'] == 'ok'
    guard = mg.MemoryGuard({'memory_stop_polls': 2, 'memory_clear_polls': 2})
    seq = [guard.decide([r]) for r in (gate, stop, gate, stop, gate, ok, ok, ok)]
    assert seq == ['gate', None, None, None, None, None, 'clear', None]
    assert not guard.gated and not guard.stopped


def test_after_a_stop_nothing_until_a_new_head_rearms():
    stop = reading('meminfo-below-min.txt', 'pressure-memory-full-high.txt')
    guard = mg.MemoryGuard({'memory_stop_polls': 1})
    assert [guard.decide([stop]) for _poll in range(4)] == ['gate', 'stop', None, None]
    guard.observe([reading('meminfo-band-mid.txt')])
    assert guard.level() == 'ok' and guard.stopped
    guard.reset()
    assert guard.decide([stop]) == 'gate'


def test_without_watermarks_memfree_is_not_judged_and_psi_still_is():
    r = reading('meminfo-below-min.txt', zoneinfo=None)
    assert r['level'] == 'ok' and 'watermarks unknown' in r['why'] and r['watermarks'] is None
    assert reading('meminfo-below-min.txt', 'pressure-memory-full-high.txt', zoneinfo=None)['level'] == 'stop'
    assert reading('meminfo-below-min.txt', zoneinfo=None, min_free='min_free_kbytes.txt')['level'] == 'stop'


def test_no_psi_file_judges_memfree_only_and_no_meminfo_judges_nothing():
    assert mg.assess('spark2', fixture('meminfo-below-min.txt'), '', None, fixture(ZONEINFO[0]))['level'] == 'stop'
    assert mg.assess('spark2', fixture('meminfo-band-min.txt'), '', None, fixture(ZONEINFO[0]))['level'] == 'ok'
    assert mg.assess('spark2', '', fixture('pressure-memory-full-high.txt'))['level'] is None
    guard = mg.MemoryGuard({})
    assert guard.decide([mg.assess('spark2', '', '')]) is None and guard.level() is None


def test_psi_thresholds_are_settings():
    r = mg.assess('spark2', fixture('meminfo-under-load.txt'), fixture('pressure-memory-some-high.txt'),
                  mg.settings_of({'memory_gate_psi_some_avg10': 40.0}), fixture(ZONEINFO[0]))
    assert r['level'] == 'ok'
    r = mg.assess('spark2', fixture('meminfo-under-load.txt'), fixture('pressure-memory-full-high.txt'),
                  mg.settings_of({'memory_stop_psi_full_avg10': 50.0}), fixture(ZONEINFO[0]))
    assert r['level'] == 'gate'


def test_default_settings_are_usable():
    assert mg.check_config({'memory_guard': True, 'memory_gate_psi_some_avg10': 10.0, 'memory_stop_psi_full_avg10': 25.0,
                            'memory_poll_s': 5, 'memory_stop_polls': 2, 'memory_clear_polls': 3,
                            'meminfo_path': '/proc/meminfo', 'psi_path': '/proc/pressure/memory',
                            'zoneinfo_path': '/proc/zoneinfo', 'min_free_kbytes_path': '/proc/sys/vm/min_free_kbytes',
                            'memory_guard_thresholds': None}) == []


@pytest.mark.parametrize('key,value,variable', [
    ('memory_poll_s', 0, 'vllm_service_memory_guard_poll_s'),
    ('memory_stop_polls', 'two', 'vllm_service_memory_guard_stop_polls'),
    ('memory_clear_polls', True, 'vllm_service_memory_guard_clear_polls'),
    ('memory_gate_psi_some_avg10', 0, 'vllm_service_memory_guard_gate_psi_some_avg10'),
    ('memory_stop_psi_full_avg10', 250, 'vllm_service_memory_guard_stop_psi_full_avg10'),
    ('memory_stop_psi_full_avg10', '25', 'vllm_service_memory_guard_stop_psi_full_avg10'),
    ('meminfo_path', 'proc/meminfo', 'vllm_service_memory_guard_meminfo_path'),
    ('psi_path', '', 'vllm_service_memory_guard_psi_path'),
    ('zoneinfo_path', 'zoneinfo', 'vllm_service_memory_guard_zoneinfo_path'),
    ('min_free_kbytes_path', 5, 'vllm_service_memory_guard_min_free_kbytes_path'),
])
def test_bad_settings_are_refused_naming_the_variable(key, value, variable):
    problems = mg.check_config({'memory_guard': True, key: value})
    assert len(problems) == 1 and variable in problems[0] and repr(value) in problems[0], problems


@pytest.mark.parametrize('on', [True, False])
def test_the_old_threshold_table_is_refused_naming_its_replacement(on):
    problems = mg.check_config({'memory_guard': on, 'memory_guard_thresholds': [
        {'node_gb': 128, 'gate_free_gib': 2.0, 'stop_free_gib': 1.0, 'gate_psi_some_avg10': 10.0, 'stop_psi_full_avg10': 25.0}]})
    assert len(problems) == 1
    assert problems[0].startswith('vllm_service_memory_guard_thresholds is no longer read')
    assert 'vllm_service_memory_guard_gate_psi_some_avg10' in problems[0] and 'host_hardening_vm_min_free_kbytes' in problems[0]


def test_settings_are_not_judged_when_the_guard_is_off():
    assert mg.check_config({'memory_guard': False, 'memory_poll_s': 0}) == []
