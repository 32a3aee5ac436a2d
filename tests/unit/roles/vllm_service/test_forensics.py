# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for roles/vllm_service/files/forensics.py (the previous boot's kernel log of both nodes, at boot).

The fixtures (tests/fixtures/kernel) are replayed through the real reader: `cat` run by pairguard.run on this
machine for the head, and for the worker the same command behind an ssh prefix that the fake runner strips.
"""

from __future__ import absolute_import, division, print_function

import json
import os

import pytest

from .role_files import load

forensics = load('forensics.py')
prestart = load('prestart.py')
pairguard = load('pairguard.py')

FIXTURES = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures', 'kernel'))
FREEZE = os.path.join(FIXTURES, 'prev-boot-gb10-freeze.log')
CLEAN = os.path.join(FIXTURES, 'prev-boot-clean.log')
SSH = ['ssh', '-i', '/etc/dgxspark-ds4/peer/id_ed25519', 'root@10.77.0.12']
WORKER = 'dgxspark-ds4-worker.service'


class Nodes(object):
    """Runs every command for real on this machine; a worker's file is another path (the ssh prefix picks it)."""

    def __init__(self, head_file, worker_file):
        self.files = {'head': head_file, 'worker': worker_file}
        self.calls = []

    def __call__(self, argv, timeout=30):
        where = 'head'
        if argv[:len(SSH)] == SSH:
            where, argv = 'worker', argv[len(SSH):]
        self.calls.append((where, list(argv)))
        if argv[0] == 'cat':
            argv = ['cat', self.files[where]]
        elif argv[0] == 'systemctl':
            return 0, '', ''
        return pairguard.run(argv, timeout=timeout)


def config(tmp_path, mode='hold'):
    return {'role': 'head', 'head_name': 'spark1', 'unit_name': 'dgxspark-ds4-head.service',
            'peers': [{'name': 'spark2', 'addr': '10.77.0.12', 'unit': WORKER, 'ssh': SSH}],
            'forensics': {'enabled': True, 'after_crash': mode, 'source': 'file', 'file': '/var/lib/ds4-test/prev-boot.log',
                          'evidence_dir': str(tmp_path / 'evidence'), 'state_file': str(tmp_path / 'forensics-state.json'),
                          'hold_file': str(tmp_path / 'crash-hold.json'), 'textfile': str(tmp_path / 'forensics.prom')}}


def textfile(c):
    with open(c['forensics']['textfile']) as fh:
        return fh.read()


def records(c):
    base = c['forensics']['evidence_dir']
    return sorted(os.listdir(base)) if os.path.isdir(base) else []


def test_gb10_freeze_on_the_head_holds_the_pair_with_one_record_of_both_nodes(tmp_path):
    c = config(tmp_path)
    nodes = Nodes(FREEZE, CLEAN)
    record = forensics.check(c, runner=nodes, clock=lambda: 1764040000)
    assert record['held'] is True
    assert [f['id'] for f in record['findings']] == [
        'nv-err-no-memory', 'gsp-timeout', 'nvrm-xid', 'kernel-hang', 'unclean-shutdown']
    assert {f['node'] for f in record['findings']} == {'spark1'}
    # the same reader on both nodes: cat of the configured file, locally and over the peer key
    assert ('head', ['cat', '/var/lib/ds4-test/prev-boot.log']) in nodes.calls
    assert ('worker', ['cat', '/var/lib/ds4-test/prev-boot.log']) in nodes.calls
    (name,) = records(c)
    assert name == 'crash-20251125T030640Z-%s' % record['incident']
    path = os.path.join(c['forensics']['evidence_dir'], name)
    assert sorted(os.listdir(path)) == ['kernel-spark1.txt', 'kernel-spark2.txt', 'summary.json']
    with open(os.path.join(path, 'kernel-spark2.txt')) as fh:
        assert 'Journal stopped' in fh.read()
    with open(os.path.join(path, 'summary.json')) as fh:
        summary = json.load(fh)
    assert summary['nodes'] == ['spark1', 'spark2'] and summary['after_crash'] == 'hold'
    assert summary['findings'][0]['source'].startswith('vllm-ops.md')
    with open(c['forensics']['hold_file']) as fh:
        assert json.load(fh)['incident'] == record['incident']
    prom = textfile(c)
    assert 'dgxspark_ds4_previous_boot_held 1' in prom
    assert 'dgxspark_ds4_previous_boot_unacknowledged 5' in prom
    assert 'dgxspark_ds4_previous_boot_signature_info{node="spark1",signature="gsp-timeout"} 1' in prom
    line = forensics.held_message(record)
    assert line.startswith('pair held: the previous boot crashed (incident %s: spark1: nv-err-no-memory' % record['incident'])
    assert 'Fix: lower --gpu-memory-utilization' in line and 'playbooks/ack.yml' in line and path in line


def test_clean_previous_boots_start_the_pair_and_write_nothing(tmp_path):
    c = config(tmp_path)
    assert forensics.check(c, runner=Nodes(CLEAN, CLEAN)) is None
    assert records(c) == [] and not os.path.exists(c['forensics']['hold_file'])
    assert 'dgxspark_ds4_previous_boot_unacknowledged 0' in textfile(c)
    assert 'dgxspark_ds4_previous_boot_held 0' in textfile(c)


def test_a_signature_on_the_worker_only_holds_the_pair_too(tmp_path):
    c = config(tmp_path)
    record = forensics.check(c, runner=Nodes(CLEAN, FREEZE))
    assert record and {f['node'] for f in record['findings']} == {'spark2'}


def test_ack_releases_the_hold_once_and_the_same_old_evidence_does_not_hold_again(tmp_path):
    c = config(tmp_path)
    first = forensics.check(c, runner=Nodes(FREEZE, CLEAN))
    line = forensics.ack(c)
    assert line == ('acknowledged incident %s (gsp-timeout, kernel-hang, nv-err-no-memory, nvrm-xid, unclean-shutdown); '
                    'the pair may start' % first['incident'])
    assert not os.path.exists(c['forensics']['hold_file'])
    assert 'dgxspark_ds4_previous_boot_held 0' in textfile(c)
    # the next boot still reads the same evidence (pstore kept, or the same fixture): acknowledged, not held again
    assert forensics.check(c, runner=Nodes(FREEZE, CLEAN)) is None
    assert len(records(c)) == 1
    assert 'dgxspark_ds4_previous_boot_unacknowledged 0' in textfile(c)
    assert forensics.ack(c) == 'nothing to acknowledge: no crash incident is held'


def test_a_new_crash_after_an_ack_is_a_new_incident(tmp_path):
    c = config(tmp_path)
    forensics.check(c, runner=Nodes(FREEZE, CLEAN))
    forensics.ack(c)
    assert forensics.check(c, runner=Nodes(FREEZE, FREEZE))['held'] is True
    assert len(records(c)) == 2


def test_a_held_pair_restarted_again_keeps_one_record(tmp_path):
    c = config(tmp_path)
    one = forensics.check(c, runner=Nodes(FREEZE, CLEAN))
    two = forensics.check(c, runner=Nodes(FREEZE, CLEAN))
    assert one['incident'] == two['incident'] and len(records(c)) == 1


def test_mode_start_starts_the_pair_but_keeps_the_incident_until_ack(tmp_path, capsys):
    c = config(tmp_path, mode='start')
    assert forensics.check(c, runner=Nodes(FREEZE, CLEAN)) is None
    out = capsys.readouterr().out
    assert 'starting anyway (vllm_service_after_crash: start)' in out and out.count('\n') == 1
    with open(c['forensics']['hold_file']) as fh:
        assert json.load(fh)['held'] is False
    assert 'dgxspark_ds4_previous_boot_unacknowledged 5' in textfile(c)
    assert 'dgxspark_ds4_previous_boot_held 0' in textfile(c)
    forensics.ack(c)
    assert 'dgxspark_ds4_previous_boot_unacknowledged 0' in textfile(c)


def test_mode_fallback_holds_and_names_the_safer_recipe(tmp_path):
    c = config(tmp_path, mode='fallback:latency')
    record = forensics.check(c, runner=Nodes(FREEZE, CLEAN))
    assert record['held'] and record['fallback_recipe'] == 'latency'
    assert 'playbooks/switch.yml -e ds4_profile=latency' in forensics.held_message(record)


@pytest.mark.parametrize('value', ['', 'HOLD', 'restart', 'fallback', 'fallback:', 'fallback:../x', 'start:now', None, 3])
def test_bad_after_crash_is_refused_naming_the_variable(tmp_path, value):
    c = config(tmp_path, mode=value)
    with pytest.raises(forensics.ForensicsError) as err:
        forensics.check(c, runner=Nodes(FREEZE, CLEAN))
    assert str(err.value).startswith('vllm_service_after_crash = %r: must be hold, start or fallback:<recipe>' % (value,))
    assert not os.path.exists(c['forensics']['hold_file']) and records(c) == []


def test_journal_source_reads_only_the_previous_boot_and_pstore(tmp_path):
    fcfg = dict(config(tmp_path)['forensics'], source='journal', pstore_dir='/sys/fs/pstore')
    head = forensics.reader_commands(fcfg)
    worker = forensics.reader_commands(fcfg, ssh=SSH)
    assert head[0][1][:3] == ['journalctl', '-b', '-1'] and '_TRANSPORT=kernel' in head[0][1]
    assert head[1][1][:2] == ['sh', '-c'] and '/sys/fs/pstore/*' in head[1][1][2]
    assert worker[0][1] == head[0][1] and worker[1][1] == [head[1][1][2]]


def test_no_previous_boot_in_the_journal_is_not_a_crash(tmp_path):
    c = config(tmp_path)
    c['forensics'].update(source='journal', pstore_dir='')

    def runner(argv, timeout=30):
        return 1, '', 'Data from the specified boot (-1) is not available: No such boot ID in journal'
    assert forensics.check(c, runner=runner) is None
    assert records(c) == []


def test_pstore_dump_is_evidence(tmp_path):
    c = config(tmp_path)
    c['forensics'].update(source='journal', pstore_dir='/sys/fs/pstore')

    def runner(argv, timeout=30):
        if 'journalctl' in argv:
            return 0, '-- No entries --\n', ''
        return 0, '== pstore /sys/fs/pstore/dmesg-efi-1\n<0>[ 9021.1] Kernel panic - not syncing: hung_task: blocked tasks\n', ''
    record = forensics.check(c, runner=runner)
    assert [f['id'] for f in record['findings']] == ['kernel-hang', 'kernel-hang']
    assert [f['node'] for f in record['findings']] == ['spark1', 'spark2']


def test_forensics_off_or_on_a_worker_reads_nothing(tmp_path):
    c = config(tmp_path)
    c['forensics']['enabled'] = False
    assert forensics.check(c, runner=None) is None
    c['role'] = 'worker'
    assert prestart.previous_boot(c) is None


def test_prestart_step_holds_before_the_worker_rank_starts(tmp_path, capsys):
    steps = [label for label, _step in prestart.STEPS]
    assert steps.index('workers') < steps.index('previous boot') < steps.index('worker ranks')
    c = config(tmp_path)
    nodes = Nodes(FREEZE, CLEAN)
    with pytest.raises(prestart.PrestartError) as err:
        prestart.previous_boot(c, runner=nodes)
    assert str(err.value) == 'pair held for a crash of the previous boot (the line above says why and how to release it)'
    # the line is out before the stops are queued (the head's own stop may end the prestart at once)
    assert capsys.readouterr().out.startswith('dgxspark-ds4 prestart: pair held: the previous boot crashed (incident ')
    # held: the worker unit is stopped first, then a stop job for this head unit (no Restart= retry)
    assert [call for call in nodes.calls if call[1][0] == 'systemctl'] == [
        ('worker', ['systemctl', 'stop', '--no-block', WORKER]),
        ('head', ['systemctl', 'stop', '--no-block', 'dgxspark-ds4-head.service'])]


def test_ack_command_line(tmp_path, capsys):
    c = config(tmp_path)
    forensics.check(c, runner=Nodes(FREEZE, CLEAN))
    path = tmp_path / 'prestart-head.json'
    path.write_text(json.dumps(c))
    assert forensics.main(['forensics.py', 'ack', str(path)]) == 0
    assert capsys.readouterr().out.startswith('dgxspark-ds4 forensics: acknowledged incident ')
    assert forensics.main(['forensics.py', 'nope']) == 2
