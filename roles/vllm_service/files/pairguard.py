# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark-ds4 pair guard: the two vLLM ranks live and die together (head side).

Installed by dgxspark.ds4.vllm_service as /usr/local/libexec/dgxspark-ds4/pairguard.py on the head.
Python 3 standard library only. Two entry points share one record, the worker unit's systemd
InvocationID that the running head was paired with (state file, JSON):

  * prestart.py (ExecStartPre of the head unit) calls ensure_fresh_workers(cfg): before the head
    starts, every worker rank must be a fresh one. A worker whose InvocationID equals the record
    was paired with the previous head (it survived a head crash: a stale rank that would never
    rejoin the new rendezvous) or is not running: it is (re)started over the peer key, the head
    waits (bounded) until it is active, and the new InvocationID becomes the record. At boot
    this is also "the head waits for the worker's rank to be up".
  * `python3 pairguard.py watch CONFIG.json` (dgxspark-ds4-pairguard.service): every interval,
    while the head unit is active, reads each worker unit over ssh. A worker that is no longer
    the recorded one (it died and systemd restarted it, or it is down) leaves the head serving
    /health 200 with a dead peer (vllm-ops 2.6): the guard restarts the head unit, whose
    prestart then takes a fresh worker. Result: both ranks restarted, worker first.
    A rate limit (max_restarts per window_s) stops the guard from feeding a crash loop: past it,
    the head is stopped and the reason printed (systemd's start limits do the same per unit).
    When the head has given up (unit failed, e.g. its start limit hit) or the guard stopped it,
    the worker rank is stopped too: it would otherwise wait for a rendezvous that never comes.

The worker is reached with the peer_access key (ssh options + root@<worker fabric ip>); only
`systemctl show/start/restart/reset-failed <worker unit>` is run there.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys
import time

TAG = 'dgxspark-ds4 pairguard'


class GuardError(Exception):
    pass


def say(msg):
    print('%s: %s' % (TAG, msg))
    sys.stdout.flush()


def run(argv, timeout=30):
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return 124, '', 'timed out after %ss' % timeout
    return proc.returncode, proc.stdout, proc.stderr.strip()


def parse_show(text):
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition('=')
        if sep:
            out[key.strip()] = value.strip()
    return out


def unit_state(unit, ssh=None, runner=run):
    """ActiveState, SubState, InvocationID of a unit, local or over ssh; raises GuardError if unreadable."""
    argv = list(ssh or []) + ['systemctl', 'show', '-p', 'ActiveState', '-p', 'SubState', '-p', 'InvocationID', unit]
    rc, out, err = runner(argv)
    if rc != 0:
        raise GuardError('cannot read %s%s (rc %d): %s' % (unit, ' on ' + ssh[-1] if ssh else '', rc, err or out))
    state = parse_show(out)
    if 'ActiveState' not in state:
        raise GuardError('no ActiveState for %s in %r' % (unit, out))
    return state


def load_record(path):
    try:
        with open(path) as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (IOError, OSError, ValueError):
        return {}


def save_record(path, record):
    tmp = path + '.tmp'
    directory = os.path.dirname(path)
    if directory and not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    with open(tmp, 'w') as fh:
        json.dump(record, fh, indent=1, sort_keys=True)
        fh.write('\n')
    os.rename(tmp, path)


def ensure_fresh_workers(cfg, runner=run, sleep=time.sleep, clock=time.time):
    """Head prestart step: every worker rank running and not the one the previous head had."""
    peers = [p for p in (cfg.get('peers') or []) if p.get('unit') and p.get('ssh')]
    if not peers:
        say('pair guard off (no worker unit reachable over the peer key configured)')
        return {}
    path = cfg['pair_state_file']
    record = load_record(path)
    paired = record.get('workers') or {}
    limit = float(cfg.get('peer_wait_s', 600))
    new = {}
    for peer in peers:
        name, unit, ssh = peer['name'], peer['unit'], peer['ssh']
        state = unit_state(unit, ssh, runner)
        inv = state.get('InvocationID', '')
        if (state['ActiveState'] == 'activating' and state.get('SubState') != 'auto-restart'
                and inv and inv != paired.get(name)):
            # A fresh worker still in its own prestart (at boot both units start together): wait for it.
            deadline = clock() + limit
            while state['ActiveState'] == 'activating' and clock() < deadline:
                sleep(1)
                state = unit_state(unit, ssh, runner)
            inv = state.get('InvocationID', '')
        active = state['ActiveState'] == 'active'
        if active and inv and inv != paired.get(name):
            say('worker %s: %s is a fresh rank (invocation %s)' % (name, unit, inv[:12]))
        else:
            why = ('it was paired with the previous head (invocation %s): a stale rank never rejoins a new '
                   'rendezvous' % inv[:12]) if active else 'it is %s/%s' % (state['ActiveState'], state.get('SubState', '?'))
            say('worker %s: restarting %s first, %s' % (name, unit, why))
            runner(list(ssh) + ['systemctl', 'reset-failed', unit])
            rc, out, err = runner(list(ssh) + ['systemctl', 'restart', unit], timeout=limit)
            if rc != 0:
                raise GuardError('could not restart %s on %s (rc %d): %s. Fix the worker first: journalctl -u %s on %s'
                                 % (unit, name, rc, err or out, unit, name))
            deadline = clock() + limit
            while True:
                state = unit_state(unit, ssh, runner)
                if state['ActiveState'] == 'active' and state.get('InvocationID') and state['InvocationID'] != inv:
                    break
                if state['ActiveState'] == 'failed' or clock() >= deadline:
                    raise GuardError('worker %s: %s is %s/%s after the restart (waited up to %ds): the head would wait '
                                     'in the rendezvous for a rank that is not there. See journalctl -u %s on %s'
                                     % (name, unit, state['ActiveState'], state.get('SubState', '?'), limit, unit, name))
                sleep(1)
            inv = state['InvocationID']
            say('worker %s: %s restarted (invocation %s)' % (name, unit, inv[:12]))
        new[name] = inv
    save_record(path, {'workers': new, 'recorded_at': int(clock())})
    return new


class Watch(object):
    """One guard loop; step() is one poll, unit-tested with a fake runner and clock."""

    def __init__(self, cfg, runner=run, clock=time.time):
        self.cfg = cfg
        self.runner = runner
        self.clock = clock
        self.restarts = []
        self.failures = {}
        self.stopped_workers = False

    def step(self):
        """Returns the action taken: None, 'restart' or 'stop'."""
        cfg = self.cfg
        head = unit_state(cfg['head_unit'], None, self.runner)
        if head['ActiveState'] == 'failed':
            # The head gave up (start limit): a worker left running would wait for a rendezvous
            # that never comes. Stop it once; the next deploy or restart starts both again.
            self.failures = {}
            return 'stop' if self.stop_workers('%s failed (%s)' % (cfg['head_unit'], head.get('SubState', '?'))) else None
        self.stopped_workers = False
        if head['ActiveState'] != 'active':
            self.failures = {}
            return None
        record = load_record(cfg['pair_state_file']).get('workers') or {}
        for peer in cfg.get('peers') or []:
            name = peer['name']
            try:
                state = unit_state(peer['unit'], peer['ssh'], self.runner)
            except GuardError as exc:
                self.failures[name] = self.failures.get(name, 0) + 1
                if self.failures[name] < int(cfg.get('unreachable_polls', 5)):
                    continue
                return self.act('worker %s unreadable %d polls in a row (%s)' % (name, self.failures[name], exc))
            self.failures[name] = 0
            inv = state.get('InvocationID', '')
            if state['ActiveState'] != 'active':
                return self.act('worker %s: %s is %s/%s while the head serves' % (name, peer['unit'], state['ActiveState'],
                                                                                  state.get('SubState', '?')))
            if record.get(name) and inv != record[name]:
                return self.act('worker %s: %s restarted on its own (invocation %s, head was paired with %s)'
                                % (name, peer['unit'], inv[:12], record[name][:12]))
        return None

    def stop_workers(self, why):
        """Stop every worker rank that still runs; True when one was stopped."""
        if self.stopped_workers:
            return False
        stopped = False
        for peer in self.cfg.get('peers') or []:
            try:
                state = unit_state(peer['unit'], peer['ssh'], self.runner)
            except GuardError as exc:
                say('%s; cannot read the worker %s to stop it: %s' % (why, peer['name'], exc))
                continue
            if state['ActiveState'] in ('active', 'activating', 'reloading'):
                say('%s: stopping %s on %s too (the pair lives and dies together)' % (why, peer['unit'], peer['name']))
                self.runner(list(peer['ssh']) + ['systemctl', 'stop', peer['unit']], timeout=120)
                stopped = True
        self.stopped_workers = True
        return stopped

    def act(self, why):
        cfg = self.cfg
        now = self.clock()
        window = float(cfg.get('window_s', 1800))
        self.restarts = [t for t in self.restarts if now - t < window]
        if len(self.restarts) >= int(cfg.get('max_restarts', 3)):
            say('%s; %d pair restarts within %ds already: stopping %s instead of feeding a crash loop. '
                'Find the cause (ansible-playbook playbooks/doctor.yml), then restart the pair'
                % (why, len(self.restarts), window, cfg['head_unit']))
            self.runner(['systemctl', 'stop', cfg['head_unit']])
            self.stopped_workers = False
            self.stop_workers('pair guard gave up')
            return 'stop'
        self.restarts.append(now)
        say('%s: restarting %s so both ranks restart, worker first' % (why, cfg['head_unit']))
        rc, out, err = self.runner(['systemctl', 'restart', '--no-block', cfg['head_unit']])
        if rc != 0:
            say('systemctl restart %s failed (rc %d): %s' % (cfg['head_unit'], rc, err or out))
        self.failures = {}
        return 'restart'


def watch_forever(cfg):
    loop = Watch(cfg)
    interval = float(cfg.get('interval_s', 2))
    workers = ', '.join('%s on %s' % (p['unit'], p['name']) for p in cfg.get('peers') or [])
    say('watching %s and %s every %.1fs' % (cfg['head_unit'], workers, interval))
    while True:
        try:
            if loop.step() == 'restart':
                # Let the head leave "active" before the next poll looks at it again.
                time.sleep(max(interval, float(cfg.get('settle_s', 5))))
        except GuardError as exc:
            say('head unit unreadable: %s' % exc)
        time.sleep(interval)


def main(argv):
    if len(argv) != 3 or argv[1] != 'watch':
        print('usage: %s watch CONFIG.json' % argv[0], file=sys.stderr)
        return 2
    try:
        with open(argv[2]) as fh:
            cfg = json.load(fh)
    except (IOError, OSError, ValueError) as exc:
        print('%s: cannot read config %s: %s' % (TAG, argv[2], exc), file=sys.stderr)
        return 1
    watch_forever(cfg)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
