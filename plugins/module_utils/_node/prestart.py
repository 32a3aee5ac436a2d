# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark-ds4 prestart: the ExecStartPre of dgxspark-ds4-{head,worker}.service.

The node package's module; its entry point is roles/vllm_service/files/prestart.py, installed by the
dgxspark.ds4.vllm_service role as <libexec>/prestart.py (`prestart.py [--stopped] CONFIG.json`); reads its settings from
the JSON file named on the command line (rendered by the role). Python 3 standard library only. Every step prints what it did; every failure says why,
with the numbers, and exits 1 so systemd does not start the container.

Steps, in order (seed 000 "required cleanup sequence before any cold restart"):
  1. remove a leftover container of this unit's name (docker rm -f);
  2. SIGKILL leftover vLLM processes (title starts with VLLM::) whose cgroup belongs to a
     container that is no longer running -- never a broad pattern such as `pkill python`;
  3. check the ports this rank binds (head: master port + API port) are free, naming the owner;
  4. clear vLLM's /dev/shm segments (psm_*, sem.mp-*) only when no vLLM container runs;
  5. head only: wait (bounded) until every worker host answers over the fabric, then make sure
     every worker rank is a fresh one (pairguard.py: a worker that was paired with the previous
     head, or is down, is restarted first -- the pair restarts worker first);
  5b. head only: the previous boot of both nodes (forensics.py): a host-killing GPU fault before an unclean end,
     or an unclean end while the pair was loading, that is not acknowledged holds the pair (not started) or lets
     it start, per vllm_service_after_crash; anything else seen is recorded and the pair starts;
  6. sync + drop the page cache (skippable on test hosts that share a kernel), then wait
     (bounded) until MemFree >= fraction x MemTotal. MemFree, not MemAvailable: on GB10 CUDA's
     free memory leaves out the page cache (seed 000: "Free memory on device cuda:0
     (4.75/119.67 GiB)" with 110 GiB in page cache), and MemFree >= the request also satisfies
     the vLLM releases that count reclaimable cache as free (vllm-ops 2.3 D); the message shows both;
  7. head only: the pair's phase marker 'starting', written durably (forensics.py reads it at the next boot);
     `prestart.py --stopped CONFIG.json` (the head unit's ExecStopPost) marks it 'stopped'.
"""

from __future__ import annotations

# A node script's code, run by the node's own python3 (not an Ansible module): print and subprocess are its I/O.
# pylint: disable=ansible-bad-function
import errno
import fnmatch
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import forensics
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import pair

TAG = 'dgxspark-ds4 prestart'
CID_RE = re.compile(r'(?:docker[-/]|/docker/)([0-9a-f]{64})')


class PrestartError(Exception):
    pass


def say(msg: str) -> None:
    print('%s: %s' % (TAG, msg))
    sys.stdout.flush()


def gib(n_bytes: float) -> str:
    return '%.1f GiB' % (n_bytes / float(1 << 30))


def docker(cfg: Mapping[str, Any], *args: str) -> tuple[int, str, str]:
    proc = subprocess.run([cfg.get('docker', '/usr/bin/docker')] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    return proc.returncode, proc.stdout.strip(), proc.stderr.strip()


# ------------------------------------------------------------------ 1. leftover container

def remove_leftover_container(cfg: Mapping[str, Any]) -> None:
    name = cfg['container_name']
    rc, out, _err = docker(cfg, 'inspect', '--format', '{{.State.Status}}', name)
    if rc != 0:
        say('no leftover container %s' % name)
        return
    rc, _out, err = docker(cfg, 'rm', '-f', name)
    if rc != 0:
        raise PrestartError('could not remove leftover container %s (state %s): %s' % (name, out, err))
    say('removed leftover container %s (it was %s)' % (name, out))


# ------------------------------------------------------------------ 2. leftover processes

def _read(path: str, binary: bool = False) -> Any:
    try:
        with open(path, 'rb' if binary else 'r') as fh:
            return fh.read()
    except (IOError, OSError):
        return None


def vllm_processes(cfg: Mapping[str, Any]) -> list[tuple[int, str, str | None]]:
    """[(pid, title, container_id or None)] for processes whose title starts with a vLLM prefix."""
    proc_root = cfg.get('proc_root', '/proc')
    prefixes = tuple(cfg.get('process_title_prefixes') or ['VLLM::'])
    found: list[tuple[int, str, str | None]] = []
    for entry in os.listdir(proc_root):
        if not entry.isdigit():
            continue
        raw = _read(os.path.join(proc_root, entry, 'cmdline'), binary=True)
        if not raw:
            continue
        title = raw.split(b'\0')[0].decode('utf-8', 'replace').strip()
        if not title.startswith(prefixes):
            continue
        cgroup = _read(os.path.join(proc_root, entry, 'cgroup')) or ''
        match = CID_RE.search(cgroup)
        found.append((int(entry), title, match.group(1) if match else None))
    return found


def running_container_ids(cfg: Mapping[str, Any]) -> set[str]:
    rc, out, err = docker(cfg, 'ps', '-q', '--no-trunc')
    if rc != 0:
        raise PrestartError('docker ps failed (is docker.service up?): %s' % err)
    return set(out.split())


def end_leftover_processes(cfg: Mapping[str, Any]) -> None:
    running = running_container_ids(cfg)
    victims: list[tuple[int, str, str]] = []
    for pid, title, cid in vllm_processes(cfg):
        if cid is None:
            say('WARNING: pid %d "%s" is a vLLM process outside any container; left alone '
                '(the port check below names it if it holds a port we need)' % (pid, title))
        elif cid in running:
            say('pid %d "%s" belongs to running container %s; left alone' % (pid, title, cid[:12]))
        else:
            victims.append((pid, title, cid))
    for pid, title, cid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
            say('killed leftover pid %d "%s" of dead container %s (seed 000: host-side VLLM::Worker held the '
                'master port, EADDRINUSE)' % (pid, title, cid[:12]))
        except OSError as exc:
            if exc.errno != errno.ESRCH:
                raise PrestartError('could not kill leftover pid %d "%s": %s' % (pid, title, exc))
    deadline = time.time() + float(cfg.get('kill_wait_s', 15))
    while victims and time.time() < deadline:
        victims = [v for v in victims if os.path.exists(os.path.join(cfg.get('proc_root', '/proc'), str(v[0])))]
        if victims:
            time.sleep(0.5)
    if victims:
        raise PrestartError('leftover vLLM processes still alive after SIGKILL: %s'
                            % ', '.join('%d "%s"' % (p, t) for p, t, _c in victims))
    if not victims:
        say('no leftover vLLM processes of dead containers')


# ------------------------------------------------------------------ 3. ports

def listening_inodes(cfg: Mapping[str, Any], port: int) -> set[str]:
    proc_root = cfg.get('proc_root', '/proc')
    inodes: set[str] = set()
    for name in ('tcp', 'tcp6'):
        text = _read(os.path.join(proc_root, 'net', name)) or ''
        for line in text.splitlines()[1:]:
            cols = line.split()
            if len(cols) < 10 or cols[3] != '0A':
                continue
            if int(cols[1].rsplit(':', 1)[1], 16) == port:
                inodes.add(cols[9])
    return inodes


def socket_owners(cfg: Mapping[str, Any], inodes: Iterable[str]) -> list[str]:
    proc_root = cfg.get('proc_root', '/proc')
    owners: list[str] = []
    wanted = set('socket:[%s]' % i for i in inodes)
    for entry in os.listdir(proc_root):
        if not entry.isdigit():
            continue
        fd_dir = os.path.join(proc_root, entry, 'fd')
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) in wanted:
                    raw = _read(os.path.join(proc_root, entry, 'cmdline'), binary=True) or b''
                    owners.append('pid %s "%s"' % (entry, raw.replace(b'\0', b' ').decode('utf-8', 'replace').strip()[:120]))
                    break
            except OSError:
                continue
    return owners


def check_ports(cfg: Mapping[str, Any]) -> None:
    busy: list[str] = []
    for item in cfg.get('ports') or []:
        inodes = listening_inodes(cfg, int(item['port']))
        if inodes:
            owners = socket_owners(cfg, inodes) or ['an unknown process (another network namespace?)']
            busy.append('port %s (%s) is already listening, held by %s' % (item['port'], item['what'], ', '.join(owners)))
        else:
            say('port %s (%s) is free' % (item['port'], item['what']))
    if busy:
        raise PrestartError('; '.join(busy) + '. vLLM would fail with EADDRINUSE (vllm-ops 2.3 A). Stop that process '
                            'or change the port in the profile')


# ------------------------------------------------------------------ 4. /dev/shm

def clear_shm(cfg: Mapping[str, Any]) -> None:
    prefix = cfg.get('container_prefix', 'dgxspark-ds4-')
    rc, out, err = docker(cfg, 'ps', '--format', '{{.Names}}')
    if rc != 0:
        raise PrestartError('docker ps failed: %s' % err)
    running = [n for n in out.split() if n.startswith(prefix)]
    alive = vllm_processes(cfg)
    if running or alive:
        say('vLLM still runs here (containers: %s; processes: %d); /dev/shm left alone'
            % (', '.join(running) or 'none', len(alive)))
        return
    shm_dir = cfg.get('shm_dir', '/dev/shm')
    removed = 0
    for name in sorted(os.listdir(shm_dir)):
        if any(fnmatch.fnmatch(name, pat) for pat in cfg.get('shm_patterns') or ['psm_*', 'sem.mp-*']):
            path = os.path.join(shm_dir, name)
            if os.path.isfile(path) and not os.path.islink(path):
                os.unlink(path)
                removed += 1
    say('cleared %d stale vLLM segment(s) from %s' % (removed, shm_dir))


# ------------------------------------------------------------------ 5. peers

def reachable(addr: str, port: int, timeout: float) -> bool:
    """True when the host answers: a TCP accept OR a refusal (RST) both prove the host is up."""
    try:
        sock = socket.create_connection((addr, port), timeout=timeout)
        sock.close()
        return True
    except socket.timeout:
        return False
    except OSError as exc:
        return exc.errno == errno.ECONNREFUSED


def wait_for_peers(cfg: Mapping[str, Any]) -> None:
    peers = cfg.get('peers') or []
    if not peers:
        return
    limit = float(cfg.get('peer_wait_s', 600))
    deadline = time.time() + limit
    pending = list(peers)
    while True:
        pending = [p for p in pending if not reachable(p['addr'], int(p.get('port', 22)), 3)]
        if not pending:
            say('worker host(s) reachable over the fabric: %s' % ', '.join('%s (%s)' % (p['name'], p['addr']) for p in peers))
            return
        if time.time() >= deadline:
            raise PrestartError('worker host(s) not reachable over the fabric after %ds: %s. The head would wait in the '
                                'rendezvous for a rank that is not there; check the worker node and the cable'
                                % (limit, ', '.join('%s (%s)' % (p['name'], p['addr']) for p in pending)))
        time.sleep(float(cfg.get('peer_poll_s', 5)))


def fresh_workers(cfg: Mapping[str, Any]) -> None:
    if not cfg.get('pair_state_file'):
        return
    try:
        pair.ensure_fresh_workers(cfg)
    except pair.GuardError as exc:
        raise PrestartError(str(exc))


def previous_boot(cfg: Mapping[str, Any], runner: Callable[..., tuple[int, str, str]] | None = None) -> None:
    if cfg.get('role') != 'head':
        return
    runner = runner or pair.run
    try:
        record = forensics.check(cfg, runner=runner)
    except forensics.ForensicsError as exc:
        raise PrestartError(str(exc))
    if record:
        # Said before the stops are queued: the stop of this unit ends this process (SIGTERM) at any moment after.
        say(forensics.held_message(record))
        forensics.hold(cfg, runner=runner)
        raise PrestartError('pair held for a crash of the previous boot (the line above says why and how to release it)')


# ------------------------------------------------------------------ 6. memory

def meminfo(cfg: Mapping[str, Any]) -> dict[str, int]:
    try:
        _text, out = node_probe.read_meminfo(os.path.join(cfg.get('proc_root', '/proc'), 'meminfo'), in_bytes=True)
    except (IOError, OSError):
        out = {}
    missing = [k for k in ('MemTotal', 'MemFree', 'MemAvailable') if k not in out]
    if missing:
        raise PrestartError('cannot read %s from %s/meminfo' % ('/'.join(missing), cfg.get('proc_root', '/proc')))
    return out


def mem_line(info: Mapping[str, int]) -> str:
    """'MemFree X (n bytes), MemAvailable Y (n bytes)': both numbers, for every memory message."""
    return 'MemFree %s (%d bytes), MemAvailable %s (%d bytes)' % (
        gib(info['MemFree']), info['MemFree'], gib(info['MemAvailable']), info['MemAvailable'])


def drop_caches(cfg: Mapping[str, Any]) -> None:
    if not cfg.get('drop_caches', True):
        say('page-cache drop skipped (vllm_service_drop_caches: false; test host sharing a kernel)')
        return
    before = meminfo(cfg)
    os.sync()
    path = os.path.join(cfg.get('proc_root', '/proc'), 'sys/vm/drop_caches')
    try:
        with open(path, 'w') as fh:
            fh.write('3\n')
    except (IOError, OSError) as exc:
        raise PrestartError('cannot write %s (%s). On a host that shares its kernel (a test container) set '
                            'vllm_service_drop_caches: false' % (path, exc))
    after = meminfo(cfg)
    say('dropped the page cache: MemFree %s -> %s, MemAvailable %s -> %s'
        % (gib(before['MemFree']), gib(after['MemFree']), gib(before['MemAvailable']), gib(after['MemAvailable'])))


def memory_gate(cfg: Mapping[str, Any]) -> None:
    """Wait (bounded) until MemFree >= fraction x MemTotal (see the module docstring: not MemAvailable)."""
    fraction = cfg.get('memory_fraction')
    if not fraction:
        say('memory gate off')
        return
    limit = float(cfg.get('memory_wait_s', 300))
    deadline = time.time() + limit
    while True:
        info = meminfo(cfg)
        need = int(float(fraction) * info['MemTotal'])
        if info['MemFree'] >= need:
            say('MemFree %s >= %.2f x MemTotal %s = %s (MemAvailable %s)'
                % (gib(info['MemFree']), float(fraction), gib(info['MemTotal']), gib(need), gib(info['MemAvailable'])))
            return
        if time.time() >= deadline:
            hint = ''
            if info['MemAvailable'] >= need:
                hint = (' MemAvailable is enough, so the difference is reclaimable page cache: on GB10 CUDA counts '
                        'it as used (seed 000: 4.75 GiB free with 110 GiB in cache); drop it (vllm_service_drop_caches: '
                        'true, the default) or find what refills it.')
            raise PrestartError('MemFree below gpu_memory_utilization %.2f x MemTotal %s = %s (%d bytes) after waiting '
                                '%ds: %s.%s vLLM would fail with "Free memory on device ... is less than desired GPU '
                                'memory utilization" (vllm-ops 2.3 D). Find what holds the memory (another container, '
                                '/dev/shm, page cache) or lower gpu-memory-utilization'
                                % (float(fraction), gib(info['MemTotal']), gib(need), need, limit, mem_line(info), hint))
        time.sleep(float(cfg.get('memory_poll_s', 5)))


# ------------------------------------------------------------------ 7. phase marker

def mark_starting(cfg: Mapping[str, Any]) -> None:
    """Head: the pair's phase marker says 'starting', on the disk (fsync of the file and its directory) before the
    container starts. The pair guard sets 'serving' once the head answers with every rank up; a boot that ends
    uncleanly while it still says 'starting' holds the pair at the next boot (forensics.py: the seed-000 GSP hang)."""
    fcfg = cfg.get('forensics') or {}
    if cfg.get('role') != 'head' or not fcfg.get('enabled') or not fcfg.get('phase_file'):
        return
    try:
        pair.set_phase(fcfg['phase_file'], 'starting', fcfg.get('boot_id_file'))
        say('phase marker %s: starting (the pair guard marks it serving at readiness)' % fcfg['phase_file'])
    except (IOError, OSError) as exc:
        say('WARNING: cannot write the phase marker %s (%s): a crash during this load will not be recognised at the '
            'next boot' % (fcfg['phase_file'], exc))


STEPS = (
    ('leftover container', remove_leftover_container),
    ('leftover processes', end_leftover_processes),
    ('ports', check_ports),
    ('shared memory', clear_shm),
    ('workers', wait_for_peers),
    ('previous boot', previous_boot),
    ('worker ranks', fresh_workers),
    ('page cache', drop_caches),
    ('memory', memory_gate),
    ('phase marker', mark_starting),
)


def mark_stopped(cfg: Mapping[str, Any]) -> None:
    """Head, ExecStopPost: the unit stopped (a systemctl stop, a clean shutdown, vLLM exiting): the phase marker says
    'stopped', so a later end of this boot (a BMC power cycle after maintenance.yml stopped the pair) is no load crash."""
    fcfg = cfg.get('forensics') or {}
    if cfg.get('role') != 'head' or not fcfg.get('enabled') or not fcfg.get('phase_file'):
        return
    try:
        pair.set_phase(fcfg['phase_file'], 'stopped', fcfg.get('boot_id_file'))
    except (IOError, OSError) as exc:
        say('WARNING: cannot write the phase marker %s: %s' % (fcfg['phase_file'], exc))


def main(argv: Sequence[str]) -> int:
    stopped = len(argv) == 3 and argv[1] == '--stopped'
    if len(argv) != 2 and not stopped:
        print('usage: %s [--stopped] CONFIG.json' % argv[0], file=sys.stderr)
        return 2
    try:
        with open(argv[-1]) as fh:
            cfg = json.load(fh)
    except (IOError, OSError, ValueError) as exc:
        print('%s: cannot read config %s: %s' % (TAG, argv[-1], exc), file=sys.stderr)
        return 1
    if stopped:
        mark_stopped(cfg)
        return 0
    for label, step in STEPS:
        try:
            step(cfg)
        except PrestartError as exc:
            print('%s: FAILED at %s: %s' % (TAG, label, exc), file=sys.stderr)
            return 1
    say('ok, starting %s' % cfg.get('container_name'))
    return 0
