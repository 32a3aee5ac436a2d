# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The memory guard in the pair guard's loop (roles/vllm_service/files/pairguard.py + memory_guard.py), driven by the
fixtures of tests/fixtures/memory (the kernel's formulas at the collection's settings: 128 GB Spark,
vm.min_free_kbytes 1572864, watermarks min 1.50 / low 1.875 / high 2.25 GiB): the head's meminfo/PSI/zoneinfo files
and the worker's (read with one `cat` over the ssh prefix, which the fake runner serves). MemFree moving through the
reclaim band with PSI 0: nothing, for many polls. Stalls: out of rotation (health gate). MemFree below min with PSI full:
a clean stop, worker first, one line each, and no restart afterwards; the metrics stay current while the pair is down.
Recovery: back in rotation."""


import os

from .test_pairguard import HEAD, SSH, WORKER, FakeSystemd

from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import pair as pg_pair
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import watch as pg_watch
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import memory_guard

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'fixtures', 'memory')
BAND = ('band-min', 'band-low', 'band-mid', 'band-high')


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


class Nodes(FakeSystemd):
    """systemd of both nodes (FakeSystemd) plus `cat` of the worker's sources over ssh."""

    def __init__(self, tmp_path, zoneinfo='zoneinfo-spark128-normal.txt'):
        super(Nodes, self).__init__()
        self.sources = {}
        self.argvs = []
        self.zoneinfo = fixture(zoneinfo)
        self.paths = [str(tmp_path / n) for n in ('meminfo', 'pressure-memory', 'zoneinfo', 'min_free_kbytes')]
        self.set('head', 'under-load')
        self.set('worker', 'band-mid')

    def set(self, node, meminfo, psi='idle'):
        texts = (fixture('meminfo-%s.txt' % meminfo), fixture('pressure-memory-%s.txt' % psi), self.zoneinfo,
                 fixture('min_free_kbytes.txt'))
        if node == 'head':
            for path, text in zip(self.paths, texts):
                with open(path, 'w') as fh:
                    fh.write(text)
        else:
            self.sources[node] = ''.join(texts)

    def __call__(self, argv, timeout=30):
        self.argvs.append(list(argv))
        if argv[:len(SSH)] == SSH and argv[len(SSH)] == 'cat':
            self.calls.append((SSH[-1], 'cat', tuple(argv[len(SSH) + 1:])))
            return 0, self.sources['worker'], ''
        return super(Nodes, self).__call__(argv, timeout)

    def actions(self):
        """What changed a unit (reads of units and sources left out)."""
        return [c for c in self.calls if c[1] not in ('show', 'cat')]


def watch(tmp_path, nodes, clock):
    cfg = {'head_unit': HEAD, 'head_name': 'spark1', 'pair_state_file': str(tmp_path / 'pair-head.json'),
           'max_restarts': 3, 'window_s': 600, 'health_gate': str(tmp_path / 'health-gate'),
           'state_file': str(tmp_path / 'state.json'), 'textfile': str(tmp_path / 'guard.prom'), 'textfile_every_s': 0,
           'memory_guard': True, 'memory_poll_s': 5, 'memory_stop_polls': 2, 'memory_clear_polls': 2,
           'memory_gate_psi_some_avg10': 10.0, 'memory_stop_psi_full_avg10': 25.0,
           'meminfo_path': nodes.paths[0], 'psi_path': nodes.paths[1], 'zoneinfo_path': nodes.paths[2],
           'min_free_kbytes_path': nodes.paths[3],
           'peers': [{'name': 'spark2', 'addr': '10.77.0.12', 'unit': WORKER, 'ssh': SSH}]}
    pg_pair.save_record(cfg['pair_state_file'], {'workers': {'spark2': 'w1'}})
    return pg_watch.Watch(cfg, runner=nodes, clock=clock)


class Clock(object):
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def gate(tmp_path):
    path = tmp_path / 'health-gate'
    return path.read_text() if path.exists() else None


def test_the_worker_is_read_with_one_cat_of_the_four_sources(tmp_path):
    nodes, clock = Nodes(tmp_path), Clock()
    guard = watch(tmp_path, nodes, clock)
    assert guard.step() is None
    assert [c for c in nodes.calls if c[1] == 'cat'] == [(SSH[-1], 'cat', tuple(nodes.paths))]
    assert guard.memory.readings['spark2']['watermarks']['source'] == 'zoneinfo'
    assert guard.memory.readings['spark1']['watermarks']['source'] == 'zoneinfo'


def test_memfree_through_the_reclaim_band_with_psi_zero_does_nothing_on_either_node(tmp_path, capsys):
    for zoneinfo in ('zoneinfo-spark128-normal.txt', 'zoneinfo-spark128-dma-normal.txt'):
        nodes, clock = Nodes(tmp_path, zoneinfo), Clock()
        guard = watch(tmp_path, nodes, clock)
        capsys.readouterr()
        for poll in range(24):
            nodes.set('head', BAND[poll % 4])
            nodes.set('worker', BAND[(poll + 2) % 4])
            assert guard.step() is None
            assert gate(tmp_path) is None
            clock.now += 5
        assert nodes.actions() == [] and capsys.readouterr().out == ''
        assert guard.state.data['memory_gates_total'] == 0 and guard.state.data['memory_stops_total'] == 0
        prom = (tmp_path / 'guard.prom').read_text()
        assert 'dgxspark_ds4_memguard_level{node="spark1"} 0' in prom and 'dgxspark_ds4_memguard_level{node="spark2"} 0' in prom
        assert 'dgxspark_ds4_memguard_watermark_bytes{node="spark2",watermark="min"} %d' % (1572864 * 1024
                                                                                            - (4096 if 'dma' in zoneinfo else 0)) in prom


def test_stalls_gate_then_below_min_stops_worker_first_one_line_each_and_no_restart(tmp_path, capsys):
    nodes, clock = Nodes(tmp_path), Clock()
    guard = watch(tmp_path, nodes, clock)
    capsys.readouterr()
    assert guard.step() is None and gate(tmp_path) is None
    # the worker's tasks stall on memory (PSI some 35 %): out of rotation, one line; MemFree is fine
    nodes.set('worker', 'under-load', 'some-high')
    clock.now += 5
    assert guard.step() is None
    assert gate(tmp_path).startswith('memory guard: spark2: PSI some avg10 35.0% >= 10.0%, MemFree 9.00 GiB')
    out = capsys.readouterr().out.splitlines()
    assert out == ['dgxspark-ds4 pairguard: memory guard: spark2: PSI some avg10 35.0% >= 10.0%, MemFree 9.00 GiB (above the '
                   'reclaim band: min 1.50 GiB, high 2.25 GiB, from zoneinfo), MemAvailable 8.25 GiB: pair out of rotation '
                   '(health gate)']
    # still gated between two readings (no new line), and the gate alone never stops the pair
    for _poll in range(4):
        clock.now += 5
        assert guard.step() is None and gate(tmp_path) is not None
    assert capsys.readouterr().out == '' and nodes.actions() == []
    # the worker's MemFree falls below the kernel's min watermark with every task stalled: the first poll at the stop
    # level waits, the second stops the pair
    nodes.set('worker', 'below-min', 'full-high')
    clock.now += 5
    assert guard.step() is None and nodes.actions() == []
    clock.now += 5
    assert guard.step() == 'stop'
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("dgxspark-ds4 pairguard: memory guard: spark2: MemFree 1.20 GiB < the kernel's "
                                               'min watermark 1.50 GiB (zoneinfo), PSI full avg10 30.0% >= 25.0%')
    assert 'stopping the pair, worker first' in out[0]
    assert nodes.actions() == [(SSH[-1], 'stop', WORKER), ('local', 'stop', HEAD)]
    stop_and_after = [a[len(SSH):] if a[:len(SSH)] == SSH else a for a in nodes.argvs]
    first = stop_and_after.index(['systemctl', 'stop', '--no-block', WORKER])
    assert stop_and_after[first + 1][:2] == ['systemctl', 'show'] and stop_and_after[first + 1][-1] == WORKER
    assert stop_and_after[first + 2] == ['systemctl', 'stop', HEAD]
    assert guard.state.data['memory_gates_total'] == 1 and guard.state.data['memory_stops_total'] == 1
    prom = (tmp_path / 'guard.prom').read_text()
    assert 'dgxspark_ds4_memguard_stops_total 1' in prom and 'dgxspark_ds4_memguard_level{node="spark2"} 2' in prom
    assert 'dgxspark_ds4_memguard_psi_full_avg10{node="spark2"} 30.00' in prom
    # no restart loop: the guard keeps polling, nobody starts the pair again; the readings stay current (the memory
    # came back once the pair was stopped), so the textfile does not keep showing the stop level
    nodes.set('worker', 'band-mid')
    for _poll in range(10):
        clock.now += 5
        assert guard.step() is None
    assert nodes.actions() == [(SSH[-1], 'stop', WORKER), ('local', 'stop', HEAD)]
    assert capsys.readouterr().out == ''
    assert guard.state.data['restarts_total'] == 0 and guard.state.data['storm_stops_total'] == 0
    assert 'dgxspark_ds4_memguard_level{node="spark2"} 0' in (tmp_path / 'guard.prom').read_text()


def test_stalls_that_recede_put_the_pair_back_without_a_stop(tmp_path, capsys):
    nodes, clock = Nodes(tmp_path), Clock()
    guard = watch(tmp_path, nodes, clock)
    nodes.set('head', 'band-low', 'some-high')
    assert guard.step() is None and gate(tmp_path).startswith('memory guard: spark1: PSI some avg10 35.0% >= 10.0%')
    nodes.set('head', 'band-low', 'recovered')
    for _poll in range(2):
        clock.now += 5
        guard.step()
    assert gate(tmp_path) is None
    assert capsys.readouterr().out.splitlines()[-1] == (
        'dgxspark-ds4 pairguard: memory guard: pressure gone on every node; pair back in rotation')
    assert nodes.actions() == []


def test_a_new_head_rearms_the_guard(tmp_path):
    nodes, clock = Nodes(tmp_path), Clock()
    guard = watch(tmp_path, nodes, clock)
    nodes.set('worker', 'below-min', 'full-high')
    for _poll in range(2):
        guard.step()
        clock.now += 5
    assert nodes.actions() == [(SSH[-1], 'stop', WORKER), ('local', 'stop', HEAD)]
    # someone restarts the pair (playbooks/restart.yml): a new head invocation, the pressure is back
    nodes.units[('local', HEAD)].update({'ActiveState': 'active', 'InvocationID': 'h2'})
    nodes.units[(SSH[-1], WORKER)].update({'ActiveState': 'active'})
    assert guard.step() is None and gate(tmp_path) is not None
    clock.now += 5
    assert guard.step() == 'stop'


def test_memory_guard_off_reads_nothing(tmp_path):
    nodes, clock = Nodes(tmp_path), Clock()
    guard = watch(tmp_path, nodes, clock)
    guard.memory = None
    nodes.set('worker', 'below-min', 'full-high')
    assert guard.step() is None
    assert [c for c in nodes.calls if c[1] == 'cat'] == [] and gate(tmp_path) is None


def test_config_check_names_the_memory_guard_variables():
    problems = memory_guard.check_config({'memory_guard': True, 'memory_stop_polls': 0})
    assert problems == ['memory_stop_polls = 0: must be a number >= 1. Fix: set vllm_service_memory_guard_stop_polls and '
                        're-run the role']
