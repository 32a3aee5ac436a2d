# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for roles/vllm_service/files/forensics.py (the previous boot of both nodes, at boot).

The fixtures (tests/fixtures/kernel, each line's public source in its .sources file) are replayed through the real
reader: `cat` run by pg_pair.run on this machine for the head, and for the worker the same command behind an ssh
prefix that the fake runner strips. The phase marker is a real file written by the real pg_pair.set_phase; the boot
id comes from a file the test writes (a "reboot" is a new boot id).
"""


import json
import os
import types

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import forensics
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import pair as pg_pair
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import watch as pg_watch
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import prestart

FIXTURES = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures', 'kernel'))
CLEAN = os.path.join(FIXTURES, 'prev-boot-clean-benign.log')
OOM = os.path.join(FIXTURES, 'prev-boot-clean-oom-survived.log')
CUT = os.path.join(FIXTURES, 'prev-boot-power-cut.log')
GSP = os.path.join(FIXTURES, 'prev-boot-gsp-timeout.log')
FREEZE = os.path.join(FIXTURES, 'prev-boot-memory-freeze.log')
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
        return pg_pair.run(argv, timeout=timeout)


def config(tmp_path, mode='hold'):
    (tmp_path / 'boot_id').write_text('boot-B\n')
    return {'role': 'head', 'head_name': 'spark1', 'unit_name': 'dgxspark-ds4-head.service',
            'peers': [{'name': 'spark2', 'addr': '10.77.0.12', 'unit': WORKER, 'ssh': SSH}],
            'forensics': {'enabled': True, 'after_crash': mode, 'source': 'file', 'file': '/var/lib/ds4-test/prev-boot.log',
                          'evidence_dir': str(tmp_path / 'evidence'), 'state_file': str(tmp_path / 'forensics-state.json'),
                          'hold_file': str(tmp_path / 'crash-hold.json'), 'textfile': str(tmp_path / 'forensics.prom'),
                          'phase_file': str(tmp_path / 'pair-phase.json'), 'boot_id_file': str(tmp_path / 'boot_id')}}


def reboot(c, boot):
    with open(c['forensics']['boot_id_file'], 'w') as fh:
        fh.write(boot + '\n')


def previous_boot_was(c, phase):
    """The marker as the previous boot (boot-A) left it: prestart wrote 'starting', the guard maybe 'serving'."""
    if phase is None:
        return
    reboot(c, 'boot-A')
    pg_pair.set_phase(c['forensics']['phase_file'], 'starting', c['forensics']['boot_id_file'], clock=lambda: 1764018820)
    if phase == 'serving':
        pg_pair.set_phase(c['forensics']['phase_file'], 'serving', c['forensics']['boot_id_file'], only_from='starting')
    if phase == 'stopped':  # the head unit's ExecStopPost
        cfg = os.path.join(os.path.dirname(c['forensics']['phase_file']), 'prestart-head.json')
        with open(cfg, 'w') as fh:
            json.dump(c, fh)
        assert prestart.main(['prestart.py', '--stopped', cfg]) == 0
    reboot(c, 'boot-B')


def textfile(c):
    with open(c['forensics']['textfile']) as fh:
        return fh.read()


def records(c):
    base = c['forensics']['evidence_dir']
    return sorted(os.listdir(base)) if os.path.isdir(base) else []


def hold_record(c):
    with open(c['forensics']['hold_file']) as fh:
        return json.load(fh)


# Both ways over every fixture: (head log, worker log, the pair's phase when the boot ended) ->
# (held?, the findings that hold, the findings recorded). Nothing recorded and nothing held: no incident at all.
CASES = [
    # a clean reboot with benign noise (correctable AER, the engine start's NV_ERR_NO_MEMORY, an application Xid burst, a
    # journald restart) and a survived OOM kill on the worker: start, the Xids and the OOM kill recorded
    ('clean+oom', CLEAN, OOM, 'serving', False, [], ['spark1:nvrm-xid', 'spark2:oom-killer']),
    # maintenance.yml's reboot (a clean reboot) while the pair was still loading: start
    ('clean-while-loading', OOM, OOM, 'starting', False, [], ['spark1:oom-killer', 'spark2:oom-killer']),
    # a power cut (the log just stops, no GPU fault) while serving, or with no marker (pair guard off): start, recorded
    ('power-cut-serving', CUT, OOM, 'serving', False, [], ['spark1:unclean-shutdown', 'spark2:oom-killer']),
    ('power-cut-no-marker', CUT, OOM, None, False, [], ['spark1:unclean-shutdown', 'spark2:oom-killer']),
    # maintenance.yml stopped the pair during its load, then a BMC power cycle (ds4_maintenance_reboot_command): start
    ('power-cut-after-a-stop', CUT, OOM, 'stopped', False, [], ['spark1:unclean-shutdown', 'spark2:oom-killer']),
    # the same log while the pair was loading: the seed-000 GSP hang leaves no kernel line at all: hold
    ('silent-hang-while-loading', CUT, OOM, 'starting', True, ['spark1:pair-load-crash'],
     ['spark1:pair-load-crash', 'spark1:unclean-shutdown', 'spark2:oom-killer']),
    # a GSP timeout, then the log stops: hold whatever the marker says (and on either node)
    # (its NV_ERR_NO_MEMORY, 82 s before the GSP stopped answering, counts: part of the unclean end, within 600 s)
    ('gsp-timeout', GSP, OOM, 'serving', True, ['spark1:gsp-timeout', 'spark1:nv-err-no-memory'],
     ['spark1:gsp-timeout', 'spark1:nv-err-no-memory', 'spark1:unclean-shutdown', 'spark2:oom-killer']),
    ('gsp-timeout-worker', CLEAN, GSP, None, True, ['spark2:gsp-timeout', 'spark2:nv-err-no-memory'],
     ['spark2:gsp-timeout', 'spark2:nv-err-no-memory', 'spark1:nvrm-xid', 'spark2:unclean-shutdown']),
    # the unified-memory freeze (NV_ERR_NO_MEMORY, then nothing) during the load (seed 002): hold
    ('memory-freeze-while-loading', FREEZE, OOM, 'starting', True, ['spark1:pair-load-crash', 'spark1:nv-err-no-memory'],
     ['spark1:pair-load-crash', 'spark1:nv-err-no-memory', 'spark1:unclean-shutdown', 'spark2:oom-killer']),
    # the same freeze while serving: NV_ERR_NO_MEMORY, then the log ends within 600 s: the unified-memory freeze, held
    ('memory-freeze-serving', FREEZE, OOM, 'serving', True, ['spark1:nv-err-no-memory'],
     ['spark1:nv-err-no-memory', 'spark1:unclean-shutdown', 'spark2:oom-killer']),
]


@pytest.mark.parametrize('name,head,worker,phase,held,holding,recorded', CASES, ids=[c[0] for c in CASES])
def test_every_fixture_both_ways(tmp_path, name, head, worker, phase, held, holding, recorded):
    c = config(tmp_path)
    previous_boot_was(c, phase)
    record = forensics.check(c, runner=Nodes(head, worker), clock=lambda: 1764040000)
    assert (record is not None) is held, name
    saved = hold_record(c)
    got = ['%s:%s' % (f['node'], f['id']) for f in saved['findings']]
    assert got == recorded, name
    assert saved['held'] is held and saved['holding'] is bool(holding)
    assert 'dgxspark_ds4_previous_boot_held %d' % int(held) in textfile(c)
    assert 'dgxspark_ds4_previous_boot_unacknowledged %d' % len(recorded) in textfile(c)
    assert len(records(c)) == 1
    if held:
        assert got[:len(holding)] == holding
        assert saved['verdict'].startswith('held: ')
    else:
        assert saved['verdict'].startswith('started: ')
    # the engine start's NV_ERR_NO_MEMORY (hours before the end) is never a finding
    assert not (head in (CLEAN, CUT) and 'spark1:nv-err-no-memory' in got)


def test_a_clean_reboot_with_nothing_seen_is_no_incident(tmp_path, capsys):
    c = config(tmp_path)
    previous_boot_was(c, 'serving')
    clean_only = tmp_path / 'clean-only.log'
    with open(OOM) as fh:
        clean_only.write_text(''.join(ln for ln in fh if 'oom' not in ln.lower() and 'Out of memory' not in ln))
    assert forensics.check(c, runner=Nodes(str(clean_only), str(clean_only))) is None
    assert records(c) == [] and not os.path.exists(c['forensics']['hold_file'])
    assert 'dgxspark_ds4_previous_boot_unacknowledged 0' in textfile(c)
    assert 'nothing seen (spark1 clean, spark2 clean)' in capsys.readouterr().out


def test_gsp_hold_names_cause_fix_and_release(tmp_path):
    c = config(tmp_path)
    nodes = Nodes(GSP, OOM)
    record = forensics.check(c, runner=nodes, clock=lambda: 1764040000)
    # the same reader on both nodes: cat of the configured file, locally and over the peer key
    assert ('head', ['cat', '/var/lib/ds4-test/prev-boot.log']) in nodes.calls
    assert ('worker', ['cat', '/var/lib/ds4-test/prev-boot.log']) in nodes.calls
    (name,) = records(c)
    assert name == 'crash-20251125T030640Z-%s' % record['incident']
    path = os.path.join(c['forensics']['evidence_dir'], name)
    assert sorted(os.listdir(path)) == ['kernel-spark1.txt', 'kernel-spark2.txt', 'summary.json']
    with open(os.path.join(path, 'summary.json')) as fh:
        summary = json.load(fh)
    assert summary['ends'] == {'spark1': 'unclean', 'spark2': 'clean'}
    assert summary['verdict'] == 'held: spark1: gsp-timeout, spark1: nv-err-no-memory' and summary['findings'][0]['id'] == 'gsp-timeout'
    assert 'docs.nvidia.com/deploy/xid-errors' in summary['findings'][0]['source']
    line = forensics.held_message(record)
    assert line.startswith('pair held: the previous boot crashed (incident %s: spark1: gsp-timeout' % record['incident'])
    assert 'Fix: apply the mxfp4 per-layer tensor release' in line and 'playbooks/ack.yml' in line and path in line
    assert 'dgxspark_ds4_previous_boot_signature_info{node="spark1",signature="gsp-timeout"} 1' in textfile(c)


def test_a_gpu_fault_long_before_the_end_does_not_hold(tmp_path):
    """A GSP timeout the host survived for hours (the log went on) is recorded, not held; so is one before a clean end."""
    c = config(tmp_path)
    with open(GSP) as fh:
        lines = fh.read().splitlines()
    with open(CUT) as fh:
        later = [ln for ln in fh.read().splitlines() if ln.startswith('2026-11-25T05:17:44')]
    survived = tmp_path / 'gsp-survived.log'
    survived.write_text('\n'.join(lines + later) + '\n')  # the log goes on 8 hours after the fault, then stops
    assert forensics.check(c, runner=Nodes(str(survived), OOM)) is None
    assert hold_record(c)['holding'] is False and hold_record(c)['findings'][0]['id'] == 'gsp-timeout'
    (tmp_path / 'two').mkdir()
    c2 = config(tmp_path / 'two')
    with open(OOM) as fh:
        tail = [ln for ln in fh.read().splitlines() if 'systemd-shutdown' in ln or 'SIGTERM' in ln or 'Journal stopped' in ln]
    clean_after = tmp_path / 'gsp-then-clean.log'
    clean_after.write_text('\n'.join(lines + tail) + '\n')
    assert forensics.check(c2, runner=Nodes(str(clean_after), OOM)) is None
    assert hold_record(c2)['verdict'] == 'started: the previous boot ended cleanly'


def test_the_marker_of_the_boot_before_is_kept_for_every_start_of_this_boot(tmp_path):
    """prestart rewrites the marker ('starting') at each start of this boot; the judgement of the previous boot stays
    the same (same incident, one record); the boot after that sees this boot's marker."""
    c = config(tmp_path)
    previous_boot_was(c, 'starting')
    first = forensics.check(c, runner=Nodes(CUT, OOM))
    assert first['findings'][0]['id'] == 'pair-load-crash'
    assert 'the pair was starting since 2025-11-24T21:13:40Z (boot boot-A)' in first['findings'][0]['line']
    forensics.ack(c)
    prestart.mark_starting(c)  # this boot's start, after the ack
    again = forensics.check(c, runner=Nodes(CUT, OOM))  # a head restart in the same boot
    assert again is None and len(records(c)) == 1
    marker = json.load(open(c['forensics']['phase_file']))
    assert marker['boot_id'] == 'boot-B' and marker['phase'] == 'starting' and marker['previous']['boot_id'] == 'boot-A'
    # this boot reached readiness, then a power cut: the next boot starts the pair
    pg_pair.set_phase(c['forensics']['phase_file'], 'serving', c['forensics']['boot_id_file'], only_from='starting')
    reboot(c, 'boot-C')
    assert forensics.check(c, runner=Nodes(CUT, OOM)) is None
    assert hold_record(c)['verdict'] == 'started: unclean end of spark1 with no GPU fault while the pair was serving'


def test_set_phase_is_durable_and_only_from_guards_it(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(pg_pair.os, 'fsync', lambda fd: synced.append(fd) or real_fsync(fd))
    c = config(tmp_path)
    path = c['forensics']['phase_file']
    prestart.mark_starting(c)
    assert len(synced) >= 2  # the file, then its directory (after the rotation's own write)
    assert json.load(open(path))['phase'] == 'starting' and not os.path.exists(path + '.tmp')
    # the guard never turns a later phase back: only 'starting' becomes 'serving'
    pg_pair.set_phase(path, 'serving', c['forensics']['boot_id_file'], only_from='starting')
    pg_pair.set_phase(path, 'serving', c['forensics']['boot_id_file'], only_from='starting')
    assert json.load(open(path))['phase'] == 'serving'
    # no marker configured (the pair guard off): prestart writes nothing
    c['forensics']['phase_file'] = ''
    os.unlink(path)
    prestart.mark_starting(c)
    assert not os.path.exists(path)


def test_the_guard_marks_serving_once_the_head_answers(tmp_path):
    c = config(tmp_path)
    path = c['forensics']['phase_file']
    prestart.mark_starting(c)
    answers = {'ok': False}

    def fetch():
        if not answers['ok']:
            raise pg_pair.GuardError('connection refused')
        return 'vllm:num_requests_running 0\n'
    guard = types.SimpleNamespace(cfg={'phase_file': path, 'boot_id_file': c['forensics']['boot_id_file']}, fetch=fetch,
                                  clock=lambda: 1764040000)
    pg_watch.Watch.mark_serving(guard, 'inv-1')  # loading: /metrics does not answer
    assert json.load(open(path))['phase'] == 'starting'
    answers['ok'] = True
    pg_watch.Watch.mark_serving(guard, 'inv-1')
    assert json.load(open(path))['phase'] == 'serving' and guard.phase_marked == 'inv-1'


def test_ack_releases_the_hold_once_and_the_same_old_evidence_does_not_hold_again(tmp_path):
    c = config(tmp_path)
    first = forensics.check(c, runner=Nodes(GSP, OOM))
    line = forensics.ack(c)
    assert line == ('acknowledged incident %s (gsp-timeout, nv-err-no-memory, oom-killer, unclean-shutdown); the pair may start'
                    % first['incident'])
    assert not os.path.exists(c['forensics']['hold_file'])
    assert 'dgxspark_ds4_previous_boot_held 0' in textfile(c)
    # the next start still reads the same evidence (pstore kept, or the same fixture): acknowledged, not held again
    assert forensics.check(c, runner=Nodes(GSP, OOM)) is None
    assert len(records(c)) == 1
    assert 'dgxspark_ds4_previous_boot_unacknowledged 0' in textfile(c)
    assert forensics.ack(c) == 'nothing to acknowledge: no crash incident is held'


def test_a_recorded_start_is_acknowledged_the_same_way(tmp_path):
    c = config(tmp_path)
    assert forensics.check(c, runner=Nodes(CLEAN, OOM)) is None
    assert 'dgxspark_ds4_previous_boot_unacknowledged 2' in textfile(c)
    assert forensics.ack(c).startswith('acknowledged incident ')
    assert 'dgxspark_ds4_previous_boot_unacknowledged 0' in textfile(c)


def test_a_new_crash_after_an_ack_is_a_new_incident(tmp_path):
    c = config(tmp_path)
    forensics.check(c, runner=Nodes(GSP, OOM))
    forensics.ack(c)
    assert forensics.check(c, runner=Nodes(GSP, GSP))['held'] is True
    assert len(records(c)) == 2


def test_a_held_pair_restarted_again_keeps_one_record(tmp_path):
    c = config(tmp_path)
    one = forensics.check(c, runner=Nodes(GSP, OOM))
    two = forensics.check(c, runner=Nodes(GSP, OOM))
    assert one['incident'] == two['incident'] and len(records(c)) == 1


def test_mode_start_starts_a_holding_crash_but_keeps_the_incident_until_ack(tmp_path, capsys):
    c = config(tmp_path, mode='start')
    assert forensics.check(c, runner=Nodes(GSP, OOM)) is None
    out = capsys.readouterr().out
    assert 'starting anyway (vllm_service_after_crash: start)' in out and out.count('\n') == 1
    assert hold_record(c)['held'] is False and hold_record(c)['holding'] is True
    assert 'dgxspark_ds4_previous_boot_unacknowledged 4' in textfile(c)
    assert 'dgxspark_ds4_previous_boot_held 0' in textfile(c)
    forensics.ack(c)
    assert 'dgxspark_ds4_previous_boot_unacknowledged 0' in textfile(c)


def test_mode_fallback_holds_and_names_the_safer_recipe(tmp_path):
    c = config(tmp_path, mode='fallback:latency')
    record = forensics.check(c, runner=Nodes(GSP, OOM))
    assert record['held'] and record['fallback_recipe'] == 'latency'
    assert 'playbooks/switch.yml -e ds4_profile=latency' in forensics.held_message(record)


@pytest.mark.parametrize('value', ['', 'HOLD', 'restart', 'fallback', 'fallback:', 'fallback:../x', 'start:now', None, 3])
def test_bad_after_crash_is_refused_naming_the_variable(tmp_path, value):
    c = config(tmp_path, mode=value)
    with pytest.raises(forensics.ForensicsError) as err:
        forensics.check(c, runner=Nodes(GSP, OOM))
    assert str(err.value).startswith('vllm_service_after_crash = %r: must be hold, start or fallback:<recipe>' % (value,))
    assert not os.path.exists(c['forensics']['hold_file']) and records(c) == []


def test_journal_source_reads_only_the_previous_boot_and_pstore(tmp_path):
    fcfg = dict(config(tmp_path)['forensics'], source='journal', pstore_dir='/sys/fs/pstore')
    head = forensics.reader_commands(fcfg)
    worker = forensics.reader_commands(fcfg, ssh=SSH)
    assert head[0][1][:3] == ['journalctl', '-b', '-1'] and '_TRANSPORT=kernel' in head[0][1]
    assert '_TRANSPORT=driver' in head[0][1] and ['-o', 'short-iso'] == head[0][1][4:6]
    assert head[1][1][:2] == ['sh', '-c'] and '/sys/fs/pstore/*' in head[1][1][2]
    assert worker[0][1] == head[0][1] and worker[1][1] == [head[1][1][2]]


def test_no_previous_boot_in_the_journal_is_not_a_crash(tmp_path):
    c = config(tmp_path)
    c['forensics'].update(source='journal', pstore_dir='')

    def runner(argv, timeout=30):
        return 1, '', 'Data from the specified boot (-1) is not available: No such boot ID in journal'
    assert forensics.check(c, runner=runner) is None
    assert records(c) == []


def test_a_pstore_panic_without_a_journal_is_recorded_not_held(tmp_path):
    c = config(tmp_path)
    c['forensics'].update(source='journal', pstore_dir='/sys/fs/pstore')

    def runner(argv, timeout=30):
        if 'journalctl' in argv:
            return 0, '-- No entries --\n', ''
        return 0, '== pstore /sys/fs/pstore/dmesg-efi-1\n<0>[ 9021.1] Kernel panic - not syncing: hung_task: blocked tasks\n', ''
    assert forensics.check(c, runner=runner) is None
    saved = hold_record(c)
    assert [(f['node'], f['id']) for f in saved['findings']] == [('spark1', 'kernel-hang'), ('spark2', 'kernel-hang')]
    assert saved['ends'] == {'spark1': 'unknown', 'spark2': 'unknown'}


def test_forensics_off_or_on_a_worker_reads_nothing(tmp_path):
    c = config(tmp_path)
    c['forensics']['enabled'] = False
    assert forensics.check(c, runner=None) is None
    c['role'] = 'worker'
    assert prestart.previous_boot(c) is None
    prestart.mark_starting(c)
    assert not os.path.exists(c['forensics']['phase_file'])


def test_prestart_holds_before_the_worker_rank_starts_and_marks_starting_last(tmp_path, capsys):
    steps = [label for label, _step in prestart.STEPS]
    assert steps.index('workers') < steps.index('previous boot') < steps.index('worker ranks')
    assert steps[-1] == 'phase marker'
    c = config(tmp_path)
    nodes = Nodes(GSP, OOM)
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
    forensics.check(c, runner=Nodes(GSP, OOM))
    path = tmp_path / 'prestart-head.json'
    path.write_text(json.dumps(c))
    assert forensics.main(['forensics.py', 'ack', str(path)]) == 0
    assert capsys.readouterr().out.startswith('dgxspark-ds4 forensics: acknowledged incident ')
    assert forensics.main(['forensics.py', 'nope']) == 2


def test_every_fixture_line_has_its_public_source():
    logs = sorted(n for n in os.listdir(FIXTURES) if n.endswith('.log'))
    assert len(logs) == 5
    for name in logs:
        with open(os.path.join(FIXTURES, name)) as fh:
            count = len(fh.read().splitlines())
        with open(os.path.join(FIXTURES, name + '.sources')) as fh:
            cited = [ln for ln in fh.read().splitlines() if ln.startswith('L')]
        assert [ln.split(':', 1)[0] for ln in cited] == ['L%d' % n for n in range(1, count + 1)], name
        assert all(('http' in ln or 'systemd src/' in ln or 'seed 0' in ln) for ln in cited), name
