# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Units, ssh, the records and the phase marker; the fresh worker a new head takes (prestart)."""

# A node script's code, run by the node's own python3 (not an Ansible module): print and subprocess are its I/O.
# pylint: disable=ansible-bad-function
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe


TAG = 'dgxspark-ds4 pairguard'
# runner(argv, timeout=...) -> (rc, stdout, stderr): run() below, or a fake in the unit tests
Runner = Callable[..., 'tuple[int, str, str]']


class GuardError(Exception):
    pass


def read_config(path: str, tag: str = TAG) -> tuple[Any, str | None]:
    """(the JSON config of a node script's command line, None), or (None, the line to print on stderr)."""
    try:
        with open(path) as fh:
            return json.load(fh), None
    except (IOError, OSError, ValueError) as exc:
        return None, '%s: cannot read config %s: %s' % (tag, path, exc)


def say(msg: str) -> None:
    print('%s: %s' % (TAG, msg))
    sys.stdout.flush()


def run(argv: Sequence[str], timeout: float = 30) -> tuple[int, str, str]:
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return 124, '', 'timed out after %ss' % timeout
    except OSError as exc:
        return 127, '', str(exc)
    return proc.returncode, proc.stdout, proc.stderr.strip()


def unit_state(unit: str, ssh: Sequence[str] | None = None, runner: Runner = run) -> dict[str, str]:
    """ActiveState, SubState, InvocationID of a unit, local or over ssh; raises GuardError if unreadable."""
    argv = list(ssh or []) + ['systemctl', 'show', '-p', 'ActiveState', '-p', 'SubState', '-p', 'InvocationID',
                              '-p', 'NRestarts', unit]
    rc, out, err = runner(argv)
    if rc != 0:
        raise GuardError('cannot read %s%s (rc %d): %s' % (unit, ' on ' + ssh[-1] if ssh else '', rc, err or out))
    state = node_probe.parse_unit_show(out)
    if 'ActiveState' not in state:
        raise GuardError('no ActiveState for %s in %r' % (unit, out))
    return state


def ssh_control_options(cfg: Mapping[str, Any]) -> list[str]:
    """ssh -o options that share one connection per worker (OpenSSH multiplexing); [] when ssh_control_dir is unset."""
    directory = (cfg.get('ssh_control_dir') or '').rstrip('/')
    if not directory:
        return []
    return ['-o', 'ControlMaster=auto', '-o', 'ControlPersist=%ds' % int(cfg.get('ssh_control_persist_s', 60)),
            '-o', 'ControlPath=%s/ssh-%%C' % directory,
            '-o', 'ServerAliveInterval=5', '-o', 'ServerAliveCountMax=2']


def with_ssh_options(ssh: Iterable[str] | None, options: Iterable[str] | None) -> list[str]:
    """The ssh prefix (ssh ... user@host) with options inserted before the target (its last word)."""
    ssh = list(ssh or [])
    if not options or len(ssh) < 2:
        return ssh
    return ssh[:-1] + list(options) + ssh[-1:]


def prepare_control_dir(path: str, uid: int | None = None) -> str | None:
    """Create the ControlPath directory 0700; None when it is usable, else why not (then no multiplexing).

    A control socket gives a root shell on the worker to whoever can connect to it: the directory must be
    ours and closed to group and others."""
    uid = os.geteuid() if uid is None else uid
    try:
        if not os.path.isdir(path):
            os.makedirs(path, 0o700)
        os.chmod(path, 0o700)
        st = os.lstat(path)
    except (IOError, OSError) as exc:
        return 'cannot prepare %s: %s' % (path, exc)
    if os.path.islink(path) or st.st_uid != uid or st.st_mode & 0o077:
        return '%s is not a directory owned by uid %d with mode 0700 (mode %o, owner %d)' % (
            path, uid, st.st_mode & 0o7777, st.st_uid)
    return None


def load_record(path: str) -> Any:
    try:
        with open(path) as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (IOError, OSError, ValueError):
        return {}


def save_record(path: str, record: Mapping[str, Any]) -> None:
    tmp = path + '.tmp'
    directory = os.path.dirname(path)
    if directory and not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    with open(tmp, 'w') as fh:
        json.dump(record, fh, indent=1, sort_keys=True)
        fh.write('\n')
    os.rename(tmp, path)


# --------------------------------------------------------------------------- the pair's phase marker (boot forensics)
# What the pair was doing when a boot ended, kept by the collection itself (the kernel's last lines may never reach the
# disk): prestart writes 'starting' right before the head container starts, the guard 'serving' once the head answers
# /metrics with every rank up; forensics.py reads it at the next boot ('previous': the record of the boot before).
BOOT_ID_FILE = '/proc/sys/kernel/random/boot_id'


def boot_id(path: str | None = None) -> str:
    try:
        with open(path or BOOT_ID_FILE) as fh:
            return fh.read().strip()
    except (IOError, OSError):
        return ''


def save_durable(path: str, record: Mapping[str, Any]) -> None:
    """save_record, and on the disk before it returns: fsync of the file, then of its directory (the rename)."""
    tmp = path + '.tmp'
    directory = os.path.dirname(path) or '.'
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    with open(tmp, 'w') as fh:
        json.dump(record, fh, indent=1, sort_keys=True)
        fh.write('\n')
        fh.flush()
        os.fsync(fh.fileno())
    os.rename(tmp, path)
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def phase_record(path: str, boot_id_file: str | None = None, clock: Callable[[], float] = time.time) -> dict[str, Any]:
    """The marker for this boot: a record written in an earlier boot becomes 'previous' (phase 'down' now)."""
    record = load_record(path)
    now_boot = boot_id(boot_id_file)
    if record.get('boot_id') != now_boot:
        previous = dict((k, v) for k, v in record.items() if k != 'previous') if record.get('boot_id') else None
        record = {'boot_id': now_boot, 'phase': 'down', 'since': int(clock()), 'previous': previous}
        save_durable(path, record)
    return record


def set_phase(path: str, phase: str, boot_id_file: str | None = None, clock: Callable[[], float] = time.time,
              only_from: str | None = None) -> dict[str, Any]:
    """Durably mark the pair's phase for this boot; only_from: change it only from that phase. Returns the record."""
    record = phase_record(path, boot_id_file, clock)
    if only_from is not None and record.get('phase') != only_from:
        return record
    record = dict(record, phase=phase, since=int(clock()))
    save_durable(path, record)
    return record


def ensure_fresh_workers(cfg: Mapping[str, Any], runner: Runner = run, sleep: Callable[[float], object] = time.sleep,
                         clock: Callable[[], float] = time.time) -> dict[str, str]:
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
