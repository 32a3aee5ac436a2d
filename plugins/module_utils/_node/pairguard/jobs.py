# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Child jobs with a hard deadline, and the evidence one collects (and the pruning of old evidence)."""

from __future__ import annotations

import calendar
import json
import math
import os
import re
import shutil
import signal
import stat
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.pair import Runner, load_record, say


def _num(value: float | None) -> str:
    return '-' if value is None else '%d' % value


def _ratio(value: float | None) -> str:
    return '- (not published)' if value is None else '%.4f' % value


def _utc_stamp(now: float) -> str:
    return time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now))


def _write(path: str, text: str) -> None:
    with open(path, 'w') as fh:
        fh.write(text if text.endswith('\n') or not text else text + '\n')


def _cmd_text(argv: Sequence[str], result: tuple[int, str, str]) -> str:
    rc, out, err = result
    return '$ %s\n# rc %d\n%s%s' % (' '.join(argv), rc, out, ('\n# stderr:\n%s\n' % err) if err else '')


def pyspy_script(docker: str, container: str) -> str:
    """Shell run on a node: a py-spy dump of every Python process of the container, when the image has py-spy."""
    return ("if %(d)s exec %(c)s sh -c 'command -v py-spy' >/dev/null 2>&1; then "
            "for p in $(%(d)s exec %(c)s pgrep -f 'python|vllm|VLLM'); do echo \"== py-spy dump --pid $p\"; "
            "%(d)s exec %(c)s py-spy dump --pid $p 2>&1; done; "
            "else echo 'py-spy is not in the image of %(c)s (no stack dump)'; fi" % {'d': docker, 'c': container})


def evidence_path(cfg: Mapping[str, Any], now: float, kind: str = 'hang') -> str:
    """A new <kind>-<UTC>[-n]/ directory under evidence_dir (kind: hang, canary), created now; returns its path.
    The older evidence directories are pruned then (prune_evidence)."""
    base = cfg.get('evidence_dir') or '/var/lib/dgxspark-ds4/evidence'
    path = os.path.join(base, '%s-%s' % (kind, _utc_stamp(now)))
    n = 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(base, '%s-%s-%d' % (kind, _utc_stamp(now), n))
    os.makedirs(path, 0o755)
    prune_evidence(cfg, now, keep_paths=(path,))
    return path


# The evidence directories the writers make: evidence_path (hang-<UTC>[-n], canary-<UTC>[-n]) and forensics.write_record
# (crash-<UTC>-<incident id, 12 hex>). Nothing else under evidence_dir is ever pruned.
EVIDENCE_NAME = re.compile(r'^(hang|canary|crash)-(\d{8}T\d{6}Z)(?:-([0-9a-f]+))?$')
EVIDENCE_KEEP = 20
EVIDENCE_MAX_AGE_DAYS = 30
# config key -> (role variable that sets it, default)
EVIDENCE_KEYS = (('evidence_keep', 'vllm_service_evidence_keep', EVIDENCE_KEEP),
                 ('evidence_max_age_days', 'vllm_service_evidence_max_age_days', EVIDENCE_MAX_AGE_DAYS))


def evidence_problems(cfg: Mapping[str, Any]) -> list[str]:
    """Problems of the pruning settings (whole numbers >= 1), one line each naming the key and the role variable."""
    problems = []
    for key, variable, _default in EVIDENCE_KEYS:
        value = cfg.get(key)
        if key in cfg and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            problems.append('%s = %r: must be a whole number >= 1. Fix: set %s and re-run the role' % (key, value, variable))
    return problems


def _evidence_time(stamp: str) -> int:
    return calendar.timegm(time.strptime(stamp, '%Y%m%dT%H%M%SZ'))


def prune_evidence(cfg: Mapping[str, Any], now: float, keep_paths: Iterable[str] = ()) -> list[str]:
    """Per kind (hang, canary, crash) under evidence_dir: remove the directories beyond the newest evidence_keep and
    those older than evidence_max_age_days (by the UTC time in their name). Never the newest of a kind, a path of
    keep_paths (the one just written), the directory the crash hold record (crash_hold_file, or hold_file in the
    forensics config) points to, nor anything that is not a real directory named as the writers name theirs (a
    user's file or directory, a link). One line per removal. Returns the paths removed; never raises."""
    problems = evidence_problems(cfg)
    if problems:
        say('evidence not pruned: %s' % '; '.join(problems))
        return []
    keep = int(cfg.get('evidence_keep', EVIDENCE_KEEP))
    max_age_s = int(cfg.get('evidence_max_age_days', EVIDENCE_MAX_AGE_DAYS)) * 86400
    base = cfg.get('evidence_dir') or '/var/lib/dgxspark-ds4/evidence'
    protected = set(os.path.normpath(os.path.abspath(p)) for p in keep_paths)
    hold_file = cfg.get('crash_hold_file') or cfg.get('hold_file')
    if hold_file:
        held = load_record(hold_file).get('evidence')
        if isinstance(held, str) and held:
            protected.add(os.path.normpath(os.path.abspath(held)))
    kinds: dict[str, list[tuple[tuple[int, int, str], str]]] = {}
    try:
        names = os.listdir(base)
    except (IOError, OSError) as exc:
        say('evidence not pruned: %s' % exc)
        return []
    for name in names:
        m = EVIDENCE_NAME.match(name)
        if not m:
            continue
        path = os.path.join(base, name)
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                continue
            at = _evidence_time(m.group(2))
        except (IOError, OSError, ValueError):
            continue
        suffix = m.group(3) or ''
        order = (at, int(suffix) if suffix.isdigit() and len(suffix) < 6 else 0, name)
        kinds.setdefault(m.group(1), []).append((order, path))
    removed: list[str] = []
    for kind in sorted(kinds):
        entries = sorted(kinds[kind], reverse=True)
        # the newest, the one just written and the held one count first; the others fill what is left of keep
        safe = set([entries[0][1]] + [p for _o, p in entries if os.path.normpath(os.path.abspath(p)) in protected])
        kept, gone = len(safe), 0
        for order, path in entries:
            if path in safe:
                continue
            why = ('beyond the newest %d' % keep if kept >= keep
                   else 'older than %d days' % (max_age_s // 86400) if now - order[0] > max_age_s else None)
            if why is None:
                kept += 1
                continue
            try:
                shutil.rmtree(path)
            except (IOError, OSError) as exc:
                say('evidence %s not removed: %s' % (path, exc))
                kept += 1
                continue
            removed.append(path)
            gone += 1
            left = len(entries) - gone
            say('evidence %s removed (%s; %d %s director%s left, keep %d, max age %d days)'
                % (path, why, left, kind, 'y' if left == 1 else 'ies', keep, max_age_s // 86400))
    return removed


def collect_evidence(cfg: Mapping[str, Any], hang: Mapping[str, Any], runner: Runner, fetch: Callable[[], str], now: float,
                     path: str | None = None) -> str:
    """Keep what a hang leaves behind; returns the directory. Never raises for a command that fails: its rc and
    stderr are written instead. The guard runs it in an EvidenceJob (a child process with a deadline)."""
    path = path or evidence_path(cfg, now)
    docker = cfg.get('docker') or 'docker'
    lines = str(int(cfg.get('journal_lines', 300)))
    _write(os.path.join(path, 'metrics-before.txt'), hang.get('before_text') or '# no successful scrape before the hang\n')
    try:
        after = fetch()
    except Exception as exc:  # pylint: disable=broad-except
        after = '# /metrics did not answer at evidence time: %s: %s\n' % (type(exc).__name__, exc)
    _write(os.path.join(path, 'metrics-after.txt'), after)
    nodes: list[tuple[str, list[str] | None, str, str]] = [
        (cfg.get('head_name') or 'head', None, cfg['head_unit'], cfg.get('container') or 'dgxspark-ds4-head')]
    for peer in cfg.get('peers') or []:
        if peer.get('ssh'):
            nodes.append((peer['name'], list(peer['ssh']), peer['unit'], peer.get('container') or 'dgxspark-ds4-worker'))
    for name, ssh, unit, container in nodes:
        prefix = list(ssh or [])
        probes = (
            ('journal', ['journalctl', '-u', unit, '-n', lines, '--no-pager', '-o', 'short-iso'], 60),
            ('docker-top', [docker, 'top', container], 30),
            ('py-spy', ['sh', '-c', pyspy_script(docker, container)] if not ssh else [pyspy_script(docker, container)], 120),
            ('nvidia-smi', ['nvidia-smi'], 30),
        )
        for label, argv, limit in probes:
            full = prefix + argv
            _write(os.path.join(path, '%s-%s.txt' % (label, name)), _cmd_text(full, runner(full, timeout=limit)))
        if ssh:
            result = runner(prefix + ['cat', '/proc/meminfo'], timeout=30)
            _write(os.path.join(path, 'meminfo-%s.txt' % name), _cmd_text(prefix + ['cat', '/proc/meminfo'], result))
        else:
            try:
                with open(cfg.get('meminfo_path') or '/proc/meminfo') as fh:
                    _write(os.path.join(path, 'meminfo-%s.txt' % name), fh.read())
            except (IOError, OSError) as exc:
                _write(os.path.join(path, 'meminfo-%s.txt' % name), '# cannot read meminfo: %s\n' % exc)
    summary = dict((k, v) for k, v in hang.items() if k != 'before_text')
    summary.update({'detected_at': now, 'detected_at_utc': _utc_stamp(now), 'hang_after_s': cfg.get('hang_after_s', 120),
                    'head_unit': cfg['head_unit'], 'nodes': [n[0] for n in nodes]})
    _write(os.path.join(path, 'summary.json'), json.dumps(summary, indent=1, sort_keys=True))
    return path


class ChildJob(object):
    """work() in a forked child (its own process group) with a hard deadline: the guard goes on polling; the child is
    killed, with whatever it started (ssh, docker exec, py-spy, an HTTP request), once `limit` seconds have passed.
    cut(deadline, status) is told when the child was killed at its deadline or failed (subclasses say what that
    means)."""

    def __init__(self, work: Callable[[], object], limit: float | str,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.limit = float(limit)
        self.monotonic = monotonic
        self.deadline = monotonic() + self.limit
        self.status: int | None = None
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; its work is checked through the files it writes
            code = 1
            try:
                os.setpgid(0, 0)
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                signal.alarm(max(1, int(math.ceil(self.limit))))
                work()
                code = 0
            except BaseException:  # pylint: disable=broad-except
                code = 1
            os._exit(code)  # pylint: disable=protected-access
        self.pid = pid
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass  # the child did it first, or already ended

    def ok(self) -> bool:
        """The child ended by itself with status 0."""
        return self.status is not None and self.status >= 0 and os.WIFEXITED(self.status) and os.WEXITSTATUS(self.status) == 0

    def poll(self) -> bool:
        """True once the child has ended (reaped); kills its process group past the deadline."""
        if self.status is not None:
            return True
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            self.status = -1
            return True
        if pid:
            self.status = status
            if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
                self._cut_short(os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGALRM, signal.SIGKILL), status)
            return True
        if self.monotonic() >= self.deadline:
            self._cut_short(True, None)
            os.waitpid(self.pid, 0)
            self.status = -9
            return True
        return False

    def _cut_short(self, deadline: bool, status: int | None) -> None:
        """Kill what the child left running (its process group), then tell the subclass."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass
        self.cut(deadline, status)

    def cut(self, deadline: bool, status: int | None) -> None:
        """Hook: the child was killed at its deadline (deadline True) or failed with wait status `status`."""

    def kill(self) -> None:
        """Stop the child now (a new head: its canary no longer applies)."""
        if self.status is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self.status = -9

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the child ends or the deadline (tests, and the guard's exit)."""
        end = None if timeout is None else self.monotonic() + timeout
        while not self.poll():
            if end is not None and self.monotonic() >= end:
                return False
            time.sleep(0.05)
        return True


class EvidenceJob(ChildJob):
    """collect_evidence in a child with a hard deadline (evidence_timeout_s): the guard restarts the pair and goes on
    polling. What it wrote until the deadline stays; INCOMPLETE names a collection cut short."""

    def __init__(self, cfg: Mapping[str, Any], hang: Mapping[str, Any], runner: Runner, fetch: Callable[[], str], now: float,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.path = evidence_path(cfg, now)
        ChildJob.__init__(self, lambda: collect_evidence(cfg, hang, runner, fetch, now, path=self.path),
                          cfg.get('evidence_timeout_s', 120), monotonic)

    def cut(self, deadline: bool, status: int | None) -> None:
        why = ('evidence collection stopped at its deadline (%.0f s)' % self.limit if deadline
               else 'evidence collection failed (wait status %s)' % status)
        try:
            _write(os.path.join(self.path, 'INCOMPLETE'), why + '\n')
        except (IOError, OSError):
            pass
        say('hang evidence in %s: %s' % (self.path, why))
