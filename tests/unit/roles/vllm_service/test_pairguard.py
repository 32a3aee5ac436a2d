# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for roles/vllm_service/files/pairguard.py (both ranks live and die together).

A fake systemd (local head unit, the worker unit behind an ssh prefix) records every command,
so the tests show which rank is restarted, in which order, and when the guard gives up.
"""


import json

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import pair as pg_pair
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import watch as pg_watch
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import prestart

SSH = ['ssh', '-i', '/etc/dgxspark-ds4/peer/id_ed25519', 'root@10.77.0.12']
HEAD = 'dgxspark-ds4-head.service'
WORKER = 'dgxspark-ds4-worker.service'


class FakeSystemd(object):
    """Units by (where, name): where is 'local' or the ssh target."""

    def __init__(self, head='active', worker='active', worker_inv='w1', fail_restart=False, restart_to='active'):
        self.units = {('local', HEAD): {'ActiveState': head, 'SubState': 'running', 'InvocationID': 'h1'},
                      (SSH[-1], WORKER): {'ActiveState': worker, 'SubState': 'running', 'InvocationID': worker_inv}}
        self.calls = []
        self.n = 1
        self.fail_restart = fail_restart
        self.restart_to = restart_to
        self.unreachable = False

    def __call__(self, argv, timeout=30):
        where = 'local'
        if argv[:len(SSH)] == SSH:
            where = SSH[-1]
            argv = argv[len(SSH):]
            if self.unreachable:
                return 255, '', 'ssh: connect to host 10.77.0.12 port 22: No route to host'
        self.calls.append((where, argv[1], argv[-1]))
        unit = self.units[(where, argv[-1])]
        if argv[1] == 'show':
            return 0, ''.join('%s=%s\n' % kv for kv in sorted(unit.items())), ''
        if argv[1] == 'restart':
            if self.fail_restart:
                return 1, '', 'Job for %s failed.' % argv[-1]
            self.n += 1
            unit.update({'ActiveState': self.restart_to, 'InvocationID': 'new%d' % self.n})
        if argv[1] == 'stop':
            unit['ActiveState'] = 'inactive'
        return 0, '', ''

    def actions(self):
        return [c for c in self.calls if c[1] != 'show']


def cfg(tmp_path, record=None):
    path = str(tmp_path / 'pair-head.json')
    if record is not None:
        with open(path, 'w') as fh:
            json.dump({'workers': record}, fh)
    return {'head_unit': HEAD, 'pair_state_file': path, 'peer_wait_s': 5, 'max_restarts': 2, 'window_s': 600,
            'unreachable_polls': 3,
            'peers': [{'name': 'spark2', 'addr': '10.77.0.12', 'unit': WORKER, 'ssh': SSH}]}


def recorded(c):
    with open(c['pair_state_file']) as fh:
        return json.load(fh)['workers']


def test_fresh_worker_is_kept_and_recorded(tmp_path):
    c = cfg(tmp_path, record={'spark2': 'old-w'})
    fake = FakeSystemd(worker_inv='w1')
    assert pg_pair.ensure_fresh_workers(c, runner=fake, sleep=lambda s: None) == {'spark2': 'w1'}
    assert fake.actions() == []
    assert recorded(c) == {'spark2': 'w1'}


def test_first_deploy_without_record_keeps_running_worker(tmp_path):
    c = cfg(tmp_path)
    fake = FakeSystemd(worker_inv='w1')
    pg_pair.ensure_fresh_workers(c, runner=fake, sleep=lambda s: None)
    assert fake.actions() == []
    assert recorded(c) == {'spark2': 'w1'}


def test_worker_paired_with_previous_head_is_restarted_first(tmp_path, capsys):
    c = cfg(tmp_path, record={'spark2': 'w1'})
    fake = FakeSystemd(worker_inv='w1')
    pg_pair.ensure_fresh_workers(c, runner=fake, sleep=lambda s: None)
    assert fake.actions() == [('root@10.77.0.12', 'reset-failed', WORKER), ('root@10.77.0.12', 'restart', WORKER)]
    assert recorded(c) == {'spark2': 'new2'}
    assert 'paired with the previous head' in capsys.readouterr().out


@pytest.mark.parametrize('state,sub', [('failed', 'failed'), ('inactive', 'dead'), ('activating', 'auto-restart')])
def test_worker_not_running_is_started_before_the_head(tmp_path, state, sub):
    c = cfg(tmp_path, record={'spark2': 'w0'})
    fake = FakeSystemd(worker=state, worker_inv='w1')
    fake.units[(SSH[-1], WORKER)]['SubState'] = sub
    pg_pair.ensure_fresh_workers(c, runner=fake, sleep=lambda s: None)
    assert ('root@10.77.0.12', 'restart', WORKER) in fake.actions()
    assert recorded(c) == {'spark2': 'new2'}


def test_fresh_worker_still_starting_is_waited_for_not_restarted(tmp_path):
    c = cfg(tmp_path, record={'spark2': 'w0'})
    fake = FakeSystemd(worker='activating', worker_inv='w1')
    fake.units[(SSH[-1], WORKER)]['SubState'] = 'start-pre'
    ticks = []

    def sleep(_s):
        ticks.append(1)
        if len(ticks) == 2:
            fake.units[(SSH[-1], WORKER)].update({'ActiveState': 'active', 'SubState': 'running'})
    pg_pair.ensure_fresh_workers(c, runner=fake, sleep=sleep, clock=lambda: 0.0)
    assert fake.actions() == []
    assert recorded(c) == {'spark2': 'w1'}


def test_worker_that_fails_to_restart_stops_the_head_start(tmp_path):
    c = cfg(tmp_path, record={'spark2': 'w1'})
    fake = FakeSystemd(worker_inv='w1', restart_to='failed')
    with pytest.raises(pg_pair.GuardError, match=r'worker spark2: dgxspark-ds4-worker.service is failed/running after the restart'):
        pg_pair.ensure_fresh_workers(c, runner=fake, sleep=lambda s: None)
    assert recorded(c) == {'spark2': 'w1'}


def test_prestart_step_turns_guard_errors_into_prestart_failures(tmp_path):
    c = cfg(tmp_path, record={'spark2': 'w1'})
    c['peers'][0]['ssh'] = ['false']
    with pytest.raises(prestart.PrestartError, match='cannot read dgxspark-ds4-worker.service on false'):
        prestart.fresh_workers(c)


def test_prestart_step_skipped_without_pair_state(tmp_path):
    assert prestart.fresh_workers({'peers': [{'name': 'x', 'ssh': ['false'], 'unit': WORKER}]}) is None


def test_watch_does_nothing_while_the_pair_matches_the_record(tmp_path):
    c = cfg(tmp_path, record={'spark2': 'w1'})
    fake = FakeSystemd(worker_inv='w1')
    watch = pg_watch.Watch(c, runner=fake, clock=lambda: 100.0)
    assert [watch.step() for _i in range(5)] == [None] * 5
    assert fake.actions() == []


def test_watch_restarts_the_head_when_the_worker_restarted_on_its_own(tmp_path, capsys):
    c = cfg(tmp_path, record={'spark2': 'w1'})
    fake = FakeSystemd(worker_inv='w2')
    watch = pg_watch.Watch(c, runner=fake, clock=lambda: 100.0)
    assert watch.step() == 'restart'
    assert fake.actions() == [('local', 'restart', HEAD)]
    assert 'restarted on its own' in capsys.readouterr().out


def test_watch_restarts_the_head_when_the_worker_is_down(tmp_path):
    """Down on down_polls (default 3) consecutive polls: then the pair restarts."""
    c = cfg(tmp_path, record={'spark2': 'w1'})
    fake = FakeSystemd(worker='failed', worker_inv='w1')
    watch = pg_watch.Watch(c, runner=fake, clock=lambda: 1.0)
    assert [watch.step() for _i in range(3)] == [None, None, 'restart']
    assert fake.actions() == [('local', 'restart', HEAD)]


def test_watch_one_inactive_poll_is_not_a_cold_restart(tmp_path, capsys):
    """A worker seen inactive once (a blip between polls) and then active again, same invocation: nothing done."""
    c = cfg(tmp_path, record={'spark2': 'w1'})
    c['down_polls'] = 3
    fake = FakeSystemd(worker_inv='w1')
    watch = pg_watch.Watch(c, runner=fake, clock=lambda: 1.0)
    worker = fake.units[(SSH[-1], WORKER)]
    results = []
    for state in ('active', 'inactive', 'active', 'deactivating', 'inactive', 'active', 'active'):
        worker['ActiveState'] = state
        results.append(watch.step())
    assert results == [None] * 7
    assert fake.actions() == []
    assert 'poll 1 of 3 before the pair restarts' in capsys.readouterr().out


def test_watch_down_polls_are_configurable(tmp_path):
    c = cfg(tmp_path, record={'spark2': 'w1'})
    c['down_polls'] = 1
    fake = FakeSystemd(worker='inactive', worker_inv='w1')
    assert pg_watch.Watch(c, runner=fake, clock=lambda: 1.0).step() == 'restart'
    c['down_polls'] = 5
    fake = FakeSystemd(worker='inactive', worker_inv='w1')
    watch = pg_watch.Watch(c, runner=fake, clock=lambda: 1.0)
    assert [watch.step() for _i in range(5)] == [None] * 4 + ['restart']


@pytest.mark.parametrize('state', ['active', 'activating', 'inactive'])
def test_watch_worker_with_a_new_invocation_is_acted_on_at_once(tmp_path, state, capsys):
    """Restarted on its own (new InvocationID): the head's peer is gone for good, no waiting for down_polls."""
    c = cfg(tmp_path, record={'spark2': 'w1'})
    c['down_polls'] = 5
    fake = FakeSystemd(worker=state, worker_inv='w2')
    assert pg_watch.Watch(c, runner=fake, clock=lambda: 1.0).step() == 'restart'
    assert 'restarted on its own' in capsys.readouterr().out


class MuxRunner(object):
    """Records the raw argv, strips the connection-sharing options and hands the rest to FakeSystemd."""

    def __init__(self, fake, options):
        self.fake = fake
        self.options = options
        self.raw = []

    def __call__(self, argv, timeout=30):
        self.raw.append(list(argv))
        if argv[:len(SSH) - 1] == SSH[:-1] and argv[len(SSH) - 1:len(SSH) - 1 + len(self.options)] == self.options:
            argv = SSH[:-1] + argv[len(SSH) - 1 + len(self.options):]
        return self.fake(argv, timeout=timeout)


def test_watch_reuses_one_ssh_connection_per_worker(tmp_path):
    c = cfg(tmp_path, record={'spark2': 'w1'})
    c['ssh_control_dir'] = str(tmp_path / 'run')
    c['ssh_control_persist_s'] = 90
    options = pg_pair.ssh_control_options(c)
    assert options == ['-o', 'ControlMaster=auto', '-o', 'ControlPersist=90s',
                       '-o', 'ControlPath=%s/ssh-%%C' % (tmp_path / 'run'),
                       '-o', 'ServerAliveInterval=5', '-o', 'ServerAliveCountMax=2']
    fake = FakeSystemd(worker_inv='w1')
    runner = MuxRunner(fake, options)
    watch = pg_watch.Watch(c, runner=runner, clock=lambda: 1.0)
    assert [watch.step() for _i in range(4)] == [None] * 4
    remote = [a for a in runner.raw if a[0] == 'ssh']
    assert len(remote) == 4
    for argv in remote:
        # every poll goes through the same control socket, the options before the target
        assert argv[:len(SSH) - 1] == SSH[:-1]
        assert argv[len(SSH) - 1:len(SSH) - 1 + len(options)] == options
        assert argv[len(SSH) - 1 + len(options)] == SSH[-1]
    # root-only runtime directory
    st = (tmp_path / 'run').stat()
    assert st.st_mode & 0o777 == 0o700
    # the worker-down path (stop on a failed head) uses the shared connection too
    fake.units[('local', HEAD)]['ActiveState'] = 'failed'
    assert watch.step() == 'stop'
    assert runner.raw[-1][:len(SSH) - 1 + len(options)] == SSH[:-1] + options
    # the caller's config is left as it was (prestart builds its own argv)
    assert c['peers'][0]['ssh'] == SSH


def test_watch_without_a_usable_control_dir_falls_back_to_one_login_per_poll(tmp_path, capsys):
    c = cfg(tmp_path, record={'spark2': 'w1'})
    c['ssh_control_dir'] = str(tmp_path / 'run')
    fake = FakeSystemd(worker_inv='w1')
    watch = pg_watch.Watch(c, runner=fake, clock=lambda: 1.0, prepare=lambda path: '%s is world-writable' % path)
    assert watch.step() is None
    assert watch.cfg['peers'][0]['ssh'] == SSH
    assert 'ssh connection sharing off' in capsys.readouterr().out


def test_prepare_control_dir_refuses_an_open_or_foreign_directory(tmp_path):
    d = tmp_path / 'ctl'
    assert pg_pair.prepare_control_dir(str(d)) is None
    assert d.stat().st_mode & 0o777 == 0o700
    assert 'owned by uid' in pg_pair.prepare_control_dir(str(d), uid=d.stat().st_uid + 1)
    link = tmp_path / 'link'
    link.symlink_to(d)
    assert pg_pair.prepare_control_dir(str(link)) is not None
    assert pg_pair.ssh_control_options({}) == []
    assert pg_pair.with_ssh_options(SSH, []) == SSH


def test_watch_leaves_a_stopped_head_alone(tmp_path):
    c = cfg(tmp_path, record={'spark2': 'w1'})
    fake = FakeSystemd(head='inactive', worker='failed')
    assert pg_watch.Watch(c, runner=fake, clock=lambda: 1.0).step() is None
    assert fake.actions() == []


def test_watch_stops_the_worker_once_when_the_head_failed_for_good(tmp_path, capsys):
    c = cfg(tmp_path, record={'spark2': 'w1'})
    fake = FakeSystemd(head='failed', worker='active', worker_inv='w1')
    watch = pg_watch.Watch(c, runner=fake, clock=lambda: 1.0)
    assert watch.step() == 'stop'
    assert fake.actions() == [('root@10.77.0.12', 'stop', WORKER)]
    assert 'the pair lives and dies together' in capsys.readouterr().out
    assert [watch.step() for _i in range(3)] == [None] * 3
    assert len(fake.actions()) == 1


def test_watch_tolerates_short_ssh_outages_then_acts(tmp_path):
    c = cfg(tmp_path, record={'spark2': 'w1'})
    fake = FakeSystemd(worker_inv='w1')
    fake.unreachable = True
    watch = pg_watch.Watch(c, runner=fake, clock=lambda: 1.0)
    assert [watch.step() for _i in range(3)] == [None, None, 'restart']


def test_watch_rate_limit_stops_the_head_instead_of_a_storm(tmp_path, capsys):
    c = cfg(tmp_path, record={'spark2': 'w1'})
    fake = FakeSystemd(worker_inv='w9')
    now = [0.0]
    watch = pg_watch.Watch(c, runner=fake, clock=lambda: now[0])
    results = []
    for _i in range(3):
        fake.units[('local', HEAD)]['ActiveState'] = 'active'
        results.append(watch.step())
        now[0] += 10
    assert results == ['restart', 'restart', 'stop']
    assert fake.actions()[-2:] == [('local', 'stop', HEAD), ('root@10.77.0.12', 'stop', WORKER)]
    assert 'instead of feeding a crash loop' in capsys.readouterr().out
    # outside the window the guard acts again
    now[0] += 1000
    fake.units[('local', HEAD)]['ActiveState'] = 'active'
    assert watch.step() == 'restart'


def _gate(c, tmp_path):
    c['health_gate'] = str(tmp_path / 'dgxspark-ds4-head.unhealthy')
    return c['health_gate']


def _gate_text(path):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except IOError:
        return None


def test_health_gate_closes_on_the_first_down_poll_and_opens_when_the_worker_is_back(tmp_path):
    """A router in front of several pairs sees /health 503 from the first poll a worker is seen down (before
    down_polls confirm it for a restart); the first poll that sees the pair whole again removes the gate."""
    c = cfg(tmp_path, record={'spark2': 'w1'})
    gate = _gate(c, tmp_path)
    fake = FakeSystemd(worker_inv='w1')
    watch = pg_watch.Watch(c, runner=fake, clock=lambda: 1.0)
    worker = fake.units[(SSH[-1], WORKER)]
    assert watch.step() is None and _gate_text(gate) is None
    worker['ActiveState'] = 'inactive'
    assert watch.step() is None
    assert _gate_text(gate) == 'worker spark2: %s is inactive' % WORKER
    worker['ActiveState'] = 'active'
    assert watch.step() is None and _gate_text(gate) is None
    assert fake.actions() == []


def test_health_gate_stays_closed_through_a_pair_restart_and_an_unreadable_worker(tmp_path):
    c = cfg(tmp_path, record={'spark2': 'w1'})
    gate = _gate(c, tmp_path)
    fake = FakeSystemd(worker_inv='w2')  # restarted on its own: the head restarts at once
    watch = pg_watch.Watch(c, runner=fake, clock=lambda: 1.0)
    assert watch.step() == 'restart'
    assert _gate_text(gate) == 'pair restarting by the pair guard'
    c2 = cfg(tmp_path, record={'spark2': 'w1'})
    gate2 = _gate(c2, tmp_path)
    fake2 = FakeSystemd(worker_inv='w1')
    fake2.unreachable = True
    watch2 = pg_watch.Watch(c2, runner=fake2, clock=lambda: 1.0)
    assert watch2.step() is None
    assert _gate_text(gate2).startswith('worker spark2 unreadable (')


def test_health_gate_left_from_before_is_redecided_at_start(tmp_path):
    c = cfg(tmp_path, record={'spark2': 'w1'})
    gate = _gate(c, tmp_path)
    with open(gate, 'w') as fh:
        fh.write('old reason\n')
    pg_watch.Watch(c, runner=FakeSystemd(worker_inv='w1'), clock=lambda: 1.0)
    assert _gate_text(gate) is None
