# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The memory guard over a REAL kernel filling its page cache (tests/fixtures/memory/real-x86-host/memory_band.json).

Recorded on the lent GPU machine (x86 VM, kernel 6.18, 125.8 GiB, vm.min_free_kbytes 67584; not a GB10) on
2026-12-01 by tests/harness/memory_band_real.py: a sparse file of 1.2 x MemTotal read once through the page cache
(151 GiB in 72 s), /proc/meminfo, /proc/pressure/memory and /proc/zoneinfo read every 0.5 s. The page cache grew to
124.8 GiB and kswapd held MemFree at 0.7-1.0 GiB, with MemAvailable at 124.5 GiB and PSI 0: the "full page cache"
of every serving node after its model load, with no pressure at all.

Proven here, replayed through the guard as it is now (not the judgement recorded at the time):
  * every recorded reading (MemFree, MemAvailable, Cached, PSI, the real zoneinfo's watermarks) reads 'ok' and the
    guard takes no action over the whole sequence: quiet on this normal signal;
  * the real lowest-MemFree reading's own /proc texts read 'ok' with the watermarks from its zoneinfo;
  * the recording reaches the state the former absolute gate misjudged: MemFree under its 2.0 GiB gate and its
    1.0 GiB stop floor (that guard would have taken the node out of rotation, then stopped the pair);
  * the same readings with PSI raised (some 35 %, then full 30 % with MemFree below min: edited values, said so)
    gate, then stop: the replay can fail.
"""


import json
import os

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import memory_guard as mg
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe

BAND = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'fixtures', 'memory', 'real-x86-host',
                    'memory_band.json')
GIB = float(1 << 30)


def recording():
    with open(BAND) as handle:
        return json.load(handle)


def meminfo_text(total_kb, sample):
    return ('MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\nCached:         %d kB\n'
            % (total_kb, sample['mem_free'] // 1024, sample['mem_available'] // 1024, sample['cached'] // 1024))


def psi_text(some, full):
    return ('some avg10=%.2f avg60=0.00 avg300=0.00 total=0\nfull avg10=%.2f avg60=0.00 avg300=0.00 total=0\n'
            % (some, full))


def replay(rec, samples, guard):
    texts = rec['lowest']['texts']
    total_kb = node_probe.parse_meminfo(texts['meminfo'], in_bytes=True)['MemTotal'] // 1024
    out = []
    for sample in samples:
        reading = guard.assess('host', meminfo_text(total_kb, sample),
                               psi_text(sample['psi_some_avg10'] or 0.0, sample['psi_full_avg10'] or 0.0),
                               zoneinfo_text=texts['zoneinfo'], min_free_text=texts['min_free_kbytes'])
        out.append((reading, guard.decide([reading])))
    return out


def test_the_recording_is_a_full_page_cache_without_pressure():
    rec = recording()
    samples = rec['samples']
    assert len(samples) > 100
    assert max(s['cached'] for s in samples) > 120 * GIB
    assert min(s['mem_available'] for s in samples) > 120 * GIB
    assert min(s['mem_free'] for s in samples) < 1.0 * GIB
    assert all((s['psi_some_avg10'] or 0) == 0 and (s['psi_full_avg10'] or 0) == 0 for s in samples)
    assert 'copied' in rec['recorded']['dd_stderr'] and rec['recorded']['sparse_file']['fstype'] != 'tmpfs'


def test_every_reading_is_quiet_under_the_guard_as_it_is_now():
    rec = recording()
    guard = mg.MemoryGuard({'memory_guard': True})
    results = replay(rec, rec['samples'], guard)
    assert [r['level'] for r, _act in results] == ['ok'] * len(results)
    assert [a for _read, a in results if a] == []
    assert all(r['watermarks']['source'] == 'zoneinfo' and r['mem_free'] >= r['watermarks']['min'] for r, _act in results)


def test_the_lowest_real_reading_reads_ok_from_its_own_texts():
    rec = recording()
    texts = rec['lowest']['texts']
    reading = mg.assess('host', texts['meminfo'], texts['psi'], zoneinfo_text=texts['zoneinfo'],
                        min_free_text=texts['min_free_kbytes'])
    assert reading['level'] == 'ok', reading['why']
    assert reading['watermarks']['source'] == 'zoneinfo' and reading['watermarks']['page_size'] == 4096
    assert reading['mem_free'] < 1.0 * GIB < reading['mem_available']


def test_the_former_absolute_gate_would_have_acted_on_this_recording():
    samples = recording()['samples']
    assert sum(1 for s in samples if s['mem_free'] < 2.0 * GIB) >= 10   # the former gate_free_gib of a 128 GB node
    assert sum(1 for s in samples if s['mem_free'] < 1.0 * GIB) >= 10   # the former stop_free_gib: a pair stop


def test_the_same_readings_under_pressure_gate_then_stop():
    rec = recording()
    low = [dict(s) for s in rec['samples'] if s['mem_free'] < 1.0 * GIB][:6]
    marks = replay(rec, low[:1], mg.MemoryGuard({'memory_guard': True}))[0][0]['watermarks']
    for sample in low[:2]:
        sample['psi_some_avg10'] = 35.0                       # edited: PSI some high
    for sample in low[2:]:
        sample['psi_some_avg10'], sample['psi_full_avg10'] = 60.0, 30.0   # edited: every task stalled
        sample['mem_free'] = marks['min'] - 4096              # edited: below the real zoneinfo's min watermark
    actions = [a for _read, a in replay(rec, low, mg.MemoryGuard({'memory_guard': True})) if a]
    assert actions[:2] == ['gate', 'stop']
