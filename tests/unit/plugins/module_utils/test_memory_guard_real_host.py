# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""memory_guard on the real /proc files of an x86 Linux host (tests/fixtures/memory/real-x86-host/proc-files.txt: the
lent GPU machine, kernel 6.18, read there on 2026-12-01; README there). Not a GB10: what it proves is the reader against
a real kernel's own output, not a Spark's numbers.

  * the kernel's per-zone watermarks in that zoneinfo are memory_guard.kernel_watermarks' formula over the zones'
    managed pages at the host's vm.min_free_kbytes (67584) and watermark_scale_factor (10), zone by zone, the empty
    Movable zone (managed 0, min 32) and the Device zone included;
  * the reader takes the min watermark from that zoneinfo (source 'zoneinfo', 4 KiB pages, unpopulated zones left
    out), and it is min_free_kbytes as the kernel split it (within its per-zone rounding);
  * this idle host (MemFree 120 GiB, PSI 0) reads 'ok' and the guard takes no action, whether its sources are read
    one by one (the head) or come in one `cat` (a worker over ssh).

On this host the zones manage 11.2 GiB of MemTotal 125.8 GiB (Normal: present 32768000 pages, managed 2162688):
before page_size_of's second rule (present pages) the reader refused this zoneinfo and fell back to the one-zone
formula (min equal, low/high 2x-3x the kernel's)."""


import os

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import memory_guard as mg
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe

PROC = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'fixtures', 'memory', 'real-x86-host',
                    'proc-files.txt')
MIN_FREE_KBYTES = 67584
POPULATED = ('DMA', 'DMA32', 'Normal')


def sections():
    """{path: text} of the `== /path` sections; the last line (uname -a) as 'uname'."""
    with open(PROC) as handle:
        lines = handle.read().splitlines()
    out, current = {'uname': lines[-1]}, None
    for line in lines[:-1]:
        if line.startswith('== '):
            current = line[3:].strip()
            out[current] = ''
        elif current:
            out[current] += line + '\n'
    return out


def test_the_file_is_the_host_it_says():
    s = sections()
    assert s['uname'].startswith('Linux ') and ' 6.18.' in s['uname'] and s['uname'].endswith('x86_64 GNU/Linux')
    assert mg.parse_min_free_kbytes(s['/proc/sys/vm/min_free_kbytes']) == MIN_FREE_KBYTES
    assert s['/proc/sys/vm/watermark_scale_factor'].strip() == str(mg.WATERMARK_SCALE_FACTOR)
    zones = mg.parse_zoneinfo(s['/proc/zoneinfo'])
    assert [(z['node'], z['zone']) for z in zones] == [(0, 'DMA'), (0, 'DMA32'), (0, 'Normal'), (0, 'Movable'), (0, 'Device')]


def test_every_zone_watermark_is_the_kernel_formula_at_the_hosts_settings():
    zones = mg.parse_zoneinfo(sections()['/proc/zoneinfo'])
    derived = mg.kernel_watermarks(MIN_FREE_KBYTES, [(z['zone'], z['managed']) for z in zones], page_size=4096,
                                   scale_factor=10)
    for zone, kernel in zip(zones, derived):
        assert zone['boost'] == 0, zone
        assert dict((k, zone[k]) for k in ('min', 'low', 'high', 'promo')) == dict(
            (k, kernel[k]) for k in ('min', 'low', 'high', 'promo')), (zone, kernel)
    movable = [z for z in zones if z['zone'] == 'Movable'][0]
    assert movable['managed'] == 0 and movable['min'] == 32    # the Movable clamp, with no page behind it


def test_the_reader_takes_the_min_watermark_from_this_zoneinfo_and_it_is_min_free_kbytes():
    s = sections()
    info = node_probe.parse_meminfo(s['/proc/meminfo'], in_bytes=True)
    zones = mg.parse_zoneinfo(s['/proc/zoneinfo'])
    marks = mg.watermarks(info, zones, mg.parse_min_free_kbytes(s['/proc/sys/vm/min_free_kbytes']))
    assert marks['source'] == 'zoneinfo' and marks['page_size'] == 4096
    populated = [z for z in zones if z['zone'] in POPULATED]
    assert all(z['managed'] > 0 for z in populated) and all(z['managed'] == 0 for z in zones if z not in populated)
    assert marks['min'] == sum(z['min'] for z in populated) * 4096 == 16895 * 4096    # 22 + 4443 + 12430 pages
    assert marks['high'] == sum(z['high'] for z in populated) * 4096                 # Movable's 32 pages left out
    # the kernel floors each populated zone's share of pages_min = 67584 KiB >> 2 = 16896 pages: less than one page
    # per zone is lost (here 4 KiB)
    lost_kib = MIN_FREE_KBYTES - marks['min'] // 1024
    assert 0 <= lost_kib < 4 * len(populated), lost_kib


def test_the_idle_host_reads_ok_and_the_guard_takes_no_action():
    s = sections()
    head = mg.assess('vm', s['/proc/meminfo'], s['/proc/pressure/memory'], None, s['/proc/zoneinfo'],
                     s['/proc/sys/vm/min_free_kbytes'])
    with open(PROC) as handle:
        blob = handle.read()          # a worker's sources come in one `cat`: every parser skips the other files' lines
    worker = mg.assess('vm-cat', blob, blob, None, blob, blob)
    for reading in (head, worker):
        assert reading['level'] == 'ok', reading['why']
        assert reading['watermarks']['source'] == 'zoneinfo' and reading['watermarks']['min'] == 16895 * 4096
        assert reading['psi_some_avg10'] == 0.0 and reading['psi_full_avg10'] == 0.0
        assert reading['mem_free'] == 125788512 * 1024
        assert 'above the reclaim band' in reading['why'] and 'from zoneinfo' in reading['why']
    guard = mg.MemoryGuard({'memory_guard': True})
    assert [guard.decide([head, worker]) for _poll in range(5)] == [None] * 5
    assert guard.level() == 'ok' and not guard.gated and not guard.stopped


def test_the_same_zones_with_free_memory_below_their_min_is_acted_on():
    """The other direction on the same real zoneinfo (MemFree alone edited, to 58.6 MiB: below its min watermark of
    66.0 MiB; not a recorded reading): the stop level, after the gate."""
    s = sections()
    meminfo = s['/proc/meminfo'].replace('MemFree:        125788512 kB', 'MemFree:            60000 kB')
    assert meminfo != s['/proc/meminfo']
    reading = mg.assess('vm', meminfo, s['/proc/pressure/memory'], None, s['/proc/zoneinfo'],
                        s['/proc/sys/vm/min_free_kbytes'])
    assert reading['level'] == 'stop' and "< the kernel's min watermark 0.06 GiB (zoneinfo)" in reading['why']
    guard = mg.MemoryGuard({'memory_guard': True, 'memory_stop_polls': 2})
    assert [guard.decide([reading]) for _poll in range(3)] == ['gate', 'stop', None]
