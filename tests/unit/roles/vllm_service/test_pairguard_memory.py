# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The memory guard in the pair guard's loop (roles/vllm_service/files/pairguard.py + memory_guard.py), driven by
fixture sources: the head's meminfo/PSI files and the worker's (read with `cat` over the ssh prefix, which the fake
runner serves from other files). Rising pressure: out of rotation (health gate), then a clean stop, worker first,
one line each, and no restart afterwards."""

from __future__ import absolute_import, division, print_function

from .role_files import load
from .test_pairguard import HEAD, SSH, WORKER, FakeSystemd

pairguard = load('pairguard.py')

GIB = 1 << 30


def meminfo(free_gib):
    return ('MemTotal:       125483648 kB\nMemFree:        %d kB\nMemAvailable:   %d kB\n'
            % (free_gib * GIB // 1024, (free_gib + 60) * GIB // 1024))


PSI = 'some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n'


class Nodes(FakeSystemd):
    """systemd of both nodes (FakeSystemd) plus `cat` of the worker's sources over ssh."""

    def __init__(self, tmp_path):
        super(Nodes, self).__init__()
        self.sources = {}
        self.argvs = []
        self.paths = [str(tmp_path / 'meminfo'), str(tmp_path / 'pressure-memory')]
        self.set('head', 4.0)
        self.set('worker', 9.8)  # seed 000: a healthy pair under 8 concurrent requests

    def set(self, node, free_gib, psi=PSI):
        if node == 'head':
            for path, text in zip(self.paths, (meminfo(free_gib), psi)):
                with open(path, 'w') as fh:
                    fh.write(text)
        else:
            self.sources[node] = meminfo(free_gib) + psi

    def __call__(self, argv, timeout=30):
        self.argvs.append(list(argv))
        if argv[:len(SSH)] == SSH and argv[len(SSH)] == 'cat':
            self.calls.append((SSH[-1], 'cat', argv[-1]))
            return 0, self.sources['worker'], ''
        return super(Nodes, self).__call__(argv, timeout)

    def actions(self):
        """What changed a unit (reads of units and sources left out)."""
        return [c for c in self.calls if c[1] not in ('show', 'cat')]


def watch(tmp_path, nodes, clock):
    cfg = {'head_unit': HEAD, 'head_name': 'spark1', 'pair_state_file': str(tmp_path / 'pair-head.json'),
           'max_restarts': 3, 'window_s': 600, 'health_gate': str(tmp_path / 'health-gate'),
           'state_file': str(tmp_path / 'state.json'), 'textfile': str(tmp_path / 'guard.prom'),
           'memory_guard': True, 'memory_poll_s': 5, 'memory_stop_polls': 2, 'memory_clear_polls': 2,
           'meminfo_path': nodes.paths[0], 'psi_path': nodes.paths[1],
           'peers': [{'name': 'spark2', 'addr': '10.77.0.12', 'unit': WORKER, 'ssh': SSH}]}
    pairguard.save_record(cfg['pair_state_file'], {'workers': {'spark2': 'w1'}})
    return pairguard.Watch(cfg, runner=nodes, clock=clock)


class Clock(object):
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def gate(tmp_path):
    path = tmp_path / 'health-gate'
    return path.read_text() if path.exists() else None


def test_rising_pressure_gates_then_stops_worker_first_one_line_each_and_no_restart(tmp_path, capsys):
    nodes, clock = Nodes(tmp_path), Clock()
    guard = watch(tmp_path, nodes, clock)
    capsys.readouterr()

    assert guard.step() is None and gate(tmp_path) is None
    # the worker's MemFree falls below the 128 GB node's gate (2 GiB): out of rotation, one line
    nodes.set('worker', 1.5)
    clock.now += 5
    assert guard.step() is None
    assert gate(tmp_path).startswith('memory guard: spark2 (128 GB node): MemFree 1.50 GiB < 2.00 GiB')
    out = capsys.readouterr().out.splitlines()
    assert out == ['dgxspark-ds4 pairguard: memory guard: spark2 (128 GB node): MemFree 1.50 GiB < 2.00 GiB '
                   '(MemAvailable 61.5 GiB): pair out of rotation (health gate)']
    # still gated on a poll between two readings (no new line)
    clock.now += 2
    assert guard.step() is None and gate(tmp_path) is not None and capsys.readouterr().out == ''
    # past the floor on the head (PSI full too): the first poll at the stop level waits, the second stops the pair
    nodes.set('head', 0, psi='some avg10=80.00 avg60=40.00 avg300=9.00 total=9\nfull avg10=30.00 avg60=9.00 avg300=1.00 '
                             'total=9\n')
    clock.now += 5
    assert guard.step() is None and nodes.actions() == []
    clock.now += 5
    assert guard.step() == 'stop'
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith('dgxspark-ds4 pairguard: memory guard: spark1 (128 GB node): MemFree 0.00 '
                                               'GiB < floor 1.00 GiB, PSI full avg10 30.0% >= 25.0%')
    assert 'stopping the pair, worker first' in out[0]
    assert nodes.actions() == [(SSH[-1], 'stop', WORKER), ('local', 'stop', HEAD)]
    # the worker's stop is queued, the guard sees it begin (the worker left 'active'), then the head's stop follows at
    # once (it cancels a restart of a head whose peer went)
    stop_and_after = [a[len(SSH):] if a[:len(SSH)] == SSH else a for a in nodes.argvs]
    first = stop_and_after.index(['systemctl', 'stop', '--no-block', WORKER])
    assert stop_and_after[first + 1][:2] == ['systemctl', 'show'] and stop_and_after[first + 1][-1] == WORKER
    assert stop_and_after[first + 2] == ['systemctl', 'stop', HEAD]
    assert guard.state.data['memory_gates_total'] == 1 and guard.state.data['memory_stops_total'] == 1
    prom = (tmp_path / 'guard.prom').read_text()
    assert 'dgxspark_ds4_memguard_stops_total 1' in prom and 'dgxspark_ds4_memguard_level{node="spark1"} 2' in prom
    assert 'dgxspark_ds4_memguard_psi_full_avg10{node="spark1"} 30.00' in prom
    # no restart loop: pressure stays, the guard keeps polling, nobody starts the pair again
    for _poll in range(10):
        clock.now += 5
        assert guard.step() is None
    assert nodes.actions() == [(SSH[-1], 'stop', WORKER), ('local', 'stop', HEAD)]
    assert capsys.readouterr().out == ''
    assert guard.state.data['restarts_total'] == 0 and guard.state.data['storm_stops_total'] == 0


def test_pressure_that_recedes_puts_the_pair_back_without_a_stop(tmp_path, capsys):
    nodes, clock = Nodes(tmp_path), Clock()
    guard = watch(tmp_path, nodes, clock)
    nodes.set('head', 3, psi='some avg10=12.00 avg60=1.00 avg300=0.10 total=9\nfull avg10=0.00 avg60=0 avg300=0 total=0\n')
    assert guard.step() is None and gate(tmp_path).startswith('memory guard: spark1 (128 GB node): PSI some avg10 12.0% >= 10.0%')
    nodes.set('head', 4.0)
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
    nodes.set('worker', 0)
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
    nodes.set('worker', 0)
    assert guard.step() is None
    assert [c for c in nodes.calls if c[1] == 'cat'] == [] and gate(tmp_path) is None


def test_config_check_names_the_memory_guard_variables():
    problems = pairguard.memguard.check_config({'memory_guard': True, 'memory_stop_polls': 0})
    assert problems == ['memory_stop_polls = 0: must be a number >= 1. Fix: set vllm_service_memory_guard_stop_polls and '
                        're-run the role']
