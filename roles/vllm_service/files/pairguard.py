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

  * Hang watchdog (same loop, cfg hang_watchdog): a live pair that produces nothing (an NCCL
    collective or the engine wedged, a rank frozen; /health and /v1/models stay green, real-vllm-on-device
    notes Part 1 §3-4). Every hang_poll_s the head's /metrics (Prometheus text, parsed here) is read.
    Progress is any of vllm:generation_tokens_total, vllm:prompt_tokens_total,
    vllm:iteration_tokens_total_count moving OR vllm:kv_cache_usage_perc changing: during a chunked
    prefill real vLLM 0.26.0 moves none of the counters until the first token (it records iteration
    stats only for steps that return outputs) and the KV-cache usage gauge rises at every step (notes
    Part 1 §2). A hang: requests running (vllm:num_requests_running > 0) and no progress for
    hang_after_s, the window the role derives from the longest single engine step the recipe allows
    (one prefill chunk; the whole prompt when chunked prefill is off) at a conservative prefill rate
    (README "Hang watchdog window"); a vLLM that publishes no KV-cache gauge gets hang_after_no_kv_s,
    the whole longest prefill. So is /metrics not answering for hang_after_s, once it had answered,
    while the head container runs. On a hang the pair is restarted at once (worker first, within the
    same storm limit), in one line, and the evidence (hang-<UTC>/ under evidence_dir: metrics before
    and after, last journal lines, docker top, py-spy dump when the image has it, /proc/meminfo,
    nvidia-smi, of both ranks) is collected by a child process with a hard deadline
    (evidence_timeout_s): the guard loop never waits for it.
  * A head that exits by itself is restarted by systemd (Restart=always: vLLM 0.26.0 exits with status 0
    after an engine death, notes Part 1 §3, which Restart=on-failure would leave down; a systemctl stop
    is never restarted). Its prestart takes a fresh worker first. The guard sees it in the head unit's
    NRestarts and counts it in the same storm window: past max_restarts it stops the pair.
  * Guard state (restarts, hangs, storm stops, last cause, last hang, and the restart times of the storm
    window, so a restarted guard keeps counting) is kept in state_file (JSON, read by status.yml) and
    exported as a node-exporter textfile (textfile, written atomically).
  * Health gate (health_gate, a file path): while the guard sees a worker rank not active or unreadable
    (from the FIRST such poll, before down_polls confirm it), a hang, or a pair restart it started, the
    file exists and holds the reason; the head's API proxy then answers /health with 503, so a router in
    front of several pairs takes this pair out of rotation within its health-check bound instead of
    sending requests to a head whose peer is gone (vLLM's own /health stays 200 then, vllm-ops 2.3 F).
    The first poll that sees the pair whole again removes it. A blip costs one poll out of rotation,
    never a restart.

  * Memory guard (same loop, cfg memory_guard; the logic in memory_guard.py): memory PSI and MemFree of both
    nodes every memory_poll_s (the head's files, the worker's over the same ssh connection), MemFree against
    the node's own min watermark (its /proc/zoneinfo). Stalls (PSI some) gate the pair out of rotation (one
    line); severe pressure (PSI full, or MemFree below min) for memory_stop_polls polls stops it cleanly,
    worker first (one line): a stopped pair restarts in minutes, a frozen GB10 needs the power button. MemFree
    inside the kernel's reclaim band (min..high) is never acted on. Once per head: never a restart loop.

  * One ssh connection, and no cold restart for a blip: the watch loop reaches each worker over ONE
    OpenSSH connection (ControlMaster=auto, ControlPersist, ControlPath ssh-%C in ssh_control_dir, a
    root-only 0700 runtime directory; ServerAlive* drops a dead master within ~10 s) instead of a new
    root login every poll. A worker seen not active must be seen so on down_polls consecutive polls
    (and an unreadable one on unreachable_polls) before the pair is restarted: one failed poll or a
    slow ssh does not turn into a cold restart of both ranks. A worker with a new InvocationID (it
    restarted on its own: a stale head is certain) is acted on at the first poll that sees it.

The worker is reached with the peer_access key (ssh options + root@<worker fabric ip>); there the
guard runs `systemctl show/start/restart/reset-failed/stop <worker unit>` and, on a hang only, reads
evidence (journalctl, docker top/exec, /proc/meminfo, nvidia-smi).
"""


import calendar
import json
import math
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time

try:
    import http.client as httplib
except ImportError:  # pragma: no cover - python 2 is not supported on the nodes
    import httplib  # type: ignore

# memory_guard.py (the collection's plugins/module_utils/memory_guard.py) is installed next to this file; the unit
# tests load this file from the source tree, where it is in plugins/module_utils.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'plugins', 'module_utils'))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memory_guard as memguard  # noqa: E402  pylint: disable=wrong-import-position,import-error
# The quality canary and the detectors it shares with validate.yml: installed by the role under
# <libexec>/ansible_collections/dgxspark/ds4/plugins/module_utils/ (this file's directory is on sys.path); the unit
# tests import them from the working tree.
from ansible_collections.dgxspark.ds4.plugins.module_utils import quality_canary  # noqa: E402  pylint: disable=wrong-import-position,import-error

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
    except OSError as exc:
        return 127, '', str(exc)
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
    argv = list(ssh or []) + ['systemctl', 'show', '-p', 'ActiveState', '-p', 'SubState', '-p', 'InvocationID',
                              '-p', 'NRestarts', unit]
    rc, out, err = runner(argv)
    if rc != 0:
        raise GuardError('cannot read %s%s (rc %d): %s' % (unit, ' on ' + ssh[-1] if ssh else '', rc, err or out))
    state = parse_show(out)
    if 'ActiveState' not in state:
        raise GuardError('no ActiveState for %s in %r' % (unit, out))
    return state


def ssh_control_options(cfg):
    """ssh -o options that share one connection per worker (OpenSSH multiplexing); [] when ssh_control_dir is unset."""
    directory = (cfg.get('ssh_control_dir') or '').rstrip('/')
    if not directory:
        return []
    return ['-o', 'ControlMaster=auto', '-o', 'ControlPersist=%ds' % int(cfg.get('ssh_control_persist_s', 60)),
            '-o', 'ControlPath=%s/ssh-%%C' % directory,
            '-o', 'ServerAliveInterval=5', '-o', 'ServerAliveCountMax=2']


def with_ssh_options(ssh, options):
    """The ssh prefix (ssh ... user@host) with options inserted before the target (its last word)."""
    ssh = list(ssh or [])
    if not options or len(ssh) < 2:
        return ssh
    return ssh[:-1] + list(options) + ssh[-1:]


def prepare_control_dir(path, uid=None):
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


# --------------------------------------------------------------------------- the pair's phase marker (boot forensics)
# What the pair was doing when a boot ended, kept by the collection itself (the kernel's last lines may never reach the
# disk): prestart writes 'starting' right before the head container starts, the guard 'serving' once the head answers
# /metrics with every rank up; forensics.py reads it at the next boot ('previous': the record of the boot before).
BOOT_ID_FILE = '/proc/sys/kernel/random/boot_id'


def boot_id(path=None):
    try:
        with open(path or BOOT_ID_FILE) as fh:
            return fh.read().strip()
    except (IOError, OSError):
        return ''


def save_durable(path, record):
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


def phase_record(path, boot_id_file=None, clock=time.time):
    """The marker for this boot: a record written in an earlier boot becomes 'previous' (phase 'down' now)."""
    record = load_record(path)
    now_boot = boot_id(boot_id_file)
    if record.get('boot_id') != now_boot:
        previous = dict((k, v) for k, v in record.items() if k != 'previous') if record.get('boot_id') else None
        record = {'boot_id': now_boot, 'phase': 'down', 'since': int(clock()), 'previous': previous}
        save_durable(path, record)
    return record


def set_phase(path, phase, boot_id_file=None, clock=time.time, only_from=None):
    """Durably mark the pair's phase for this boot; only_from: change it only from that phase. Returns the record."""
    record = phase_record(path, boot_id_file, clock)
    if only_from is not None and record.get('phase') != only_from:
        return record
    record = dict(record, phase=phase, since=int(clock()))
    save_durable(path, record)
    return record


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


# --------------------------------------------------------------------------- Prometheus text format
_SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+-?\d+)?\s*$')
_LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def _prom_float(text):
    low = text.lower()
    if low in ('nan',):
        return float('nan')
    if low in ('+inf', 'inf'):
        return float('inf')
    if low == '-inf':
        return float('-inf')
    return float(text)


def parse_prometheus(text):
    """Prometheus text exposition -> [(name, {label: value}, float)]; comments and bad lines skipped."""
    out = []
    for line in (text or '').splitlines():
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        m = _SAMPLE_RE.match(line)
        if not m:
            continue
        labels = {}
        if m.group(3):
            for lm in _LABEL_RE.finditer(m.group(3)):
                labels[lm.group(1)] = lm.group(2).replace('\\"', '"').replace('\\n', '\n').replace('\\\\', '\\')
        try:
            value = _prom_float(m.group(4))
        except ValueError:
            continue
        out.append((m.group(1), labels, value))
    return out


def metric_total(samples, name):
    """Sum of every sample of that name (all engines / label sets); None when the series is absent."""
    values = [v for n, _l, v in samples if n == name and not math.isnan(v)]
    return sum(values) if values else None


def fetch_metrics(url, timeout):
    """GET url (http://host:port/path) -> body text; raises on a timeout, a refusal or a non-200."""
    m = re.match(r'^http://([^/:]+)(?::(\d+))?(/.*)?$', url)
    if not m:
        raise GuardError('metrics_url %r: only http://host:port/path is supported' % url)
    conn = httplib.HTTPConnection(m.group(1), int(m.group(2) or 80), timeout=timeout)
    try:
        conn.request('GET', m.group(3) or '/metrics')
        resp = conn.getresponse()
        body = resp.read().decode('utf-8', 'replace')
        if resp.status != 200:
            raise GuardError('GET %s: HTTP %d' % (url, resp.status))
        return body
    finally:
        conn.close()


# --------------------------------------------------------------------------- hang watchdog
# What moves while vLLM makes progress. The three counters move only on engine steps that return output
# tokens; during a chunked prefill only the KV-cache usage gauge changes (every step), real-vllm-on-device
# notes Part 1 §2. Order matters: the hang line and evidence name them in this order.
PROGRESS_SERIES = ('vllm:generation_tokens_total', 'vllm:prompt_tokens_total', 'vllm:iteration_tokens_total_count',
                   'vllm:kv_cache_usage_perc')
KV_USAGE = 'vllm:kv_cache_usage_perc'


def progress_values(samples):
    """The progress signals of one scrape, in PROGRESS_SERIES order (None for a series that is absent)."""
    return tuple(metric_total(samples, name) for name in PROGRESS_SERIES)


class HangDetector(object):
    """Decides from successive /metrics scrapes whether the engine is hung; pure logic, clock given by the caller.

    A stall: requests running while no progress signal (generation tokens, prompt tokens, engine steps with
    output, KV-cache usage) changed for hang_after_s. Idle (nothing running) is never a hang. Without a
    KV-cache usage series (a vLLM that does not publish it) the window is hang_after_no_kv_s, the longest
    prefill, since nothing else moves during one. A silence: the API answered /metrics once since the head
    started and has not answered for hang_after_s since (a head still loading never answered: not a hang).
    """

    def __init__(self, cfg, fetch):
        self.after = float(cfg.get('hang_after_s', 120))
        self.after_no_kv = max(self.after, float(cfg.get('hang_after_no_kv_s') or self.after))
        self.fetch = fetch
        self.reset()

    def reset(self):
        self.counters = None
        self.progress_at = None
        self.progress_text = None
        self.answered = False
        self.silent_since = None
        self.silent_error = None
        self.last_text = None
        self.running = None

    def poll(self, now):
        """One scrape. Returns None, or a dict describing the hang (kind stall/silent, why, numbers)."""
        try:
            text = self.fetch()
        except Exception as exc:  # pylint: disable=broad-except
            if not self.answered:
                return None
            if self.silent_since is None:
                self.silent_since = now
            self.silent_error = '%s: %s' % (type(exc).__name__, exc)
            silent = now - self.silent_since
            if silent >= self.after:
                return {'kind': 'silent', 'cause': 'hang_api_silent', 'silent_s': silent, 'since': self.silent_since,
                        'before_text': self.last_text, 'error': self.silent_error,
                        'why': 'hang: the API has not answered /metrics for %.0f s (limit %.0f s; last error %s) while the '
                               'head container runs' % (silent, self.after, self.silent_error)}
            return None
        self.answered = True
        self.silent_since = None
        samples = parse_prometheus(text)
        running = metric_total(samples, 'vllm:num_requests_running')
        counters = progress_values(samples)
        was_running, self.running = self.running, running
        if (not running or not was_running or self.counters is None or counters != self.counters
                or self.progress_at is None):
            self.progress_at = now
            self.progress_text = text
        self.counters = counters
        self.last_text = text
        stalled = now - self.progress_at
        gen, prompt, steps, kv = counters
        limit = self.after if kv is not None else self.after_no_kv
        if running and running > 0 and stalled >= limit:
            return {'kind': 'stall', 'cause': 'hang_no_tokens', 'stalled_s': stalled, 'since': self.progress_at,
                    'running': running, 'generation_tokens': gen, 'prompt_tokens': prompt, 'steps': steps,
                    'kv_cache_usage': kv, 'limit_s': limit, 'before_text': self.progress_text,
                    'why': 'hang: %d requests running, generation tokens stuck at %s, prompt tokens at %s, engine steps at %s, '
                           'KV cache usage at %s for %.0f s (limit %.0f s)'
                           % (running, _num(gen), _num(prompt), _num(steps), _ratio(kv), stalled, limit)}
        return None

    def stalled_s(self, now):
        """Seconds requests have been running without progress (0 when idle or progressing)."""
        if self.silent_since is not None:
            return now - self.silent_since
        if not self.running or self.progress_at is None:
            return 0.0
        return now - self.progress_at


def _num(value):
    return '-' if value is None else '%d' % value


def _ratio(value):
    return '- (not published)' if value is None else '%.4f' % value


def _utc_stamp(now):
    return time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now))


def _write(path, text):
    with open(path, 'w') as fh:
        fh.write(text if text.endswith('\n') or not text else text + '\n')


def _cmd_text(argv, result):
    rc, out, err = result
    return '$ %s\n# rc %d\n%s%s' % (' '.join(argv), rc, out, ('\n# stderr:\n%s\n' % err) if err else '')


def pyspy_script(docker, container):
    """Shell run on a node: a py-spy dump of every Python process of the container, when the image has py-spy."""
    return ("if %(d)s exec %(c)s sh -c 'command -v py-spy' >/dev/null 2>&1; then "
            "for p in $(%(d)s exec %(c)s pgrep -f 'python|vllm|VLLM'); do echo \"== py-spy dump --pid $p\"; "
            "%(d)s exec %(c)s py-spy dump --pid $p 2>&1; done; "
            "else echo 'py-spy is not in the image of %(c)s (no stack dump)'; fi" % {'d': docker, 'c': container})


def evidence_path(cfg, now, kind='hang'):
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


def evidence_problems(cfg):
    """Problems of the pruning settings (whole numbers >= 1), one line each naming the key and the role variable."""
    problems = []
    for key, variable, _default in EVIDENCE_KEYS:
        value = cfg.get(key)
        if key in cfg and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            problems.append('%s = %r: must be a whole number >= 1. Fix: set %s and re-run the role' % (key, value, variable))
    return problems


def _evidence_time(stamp):
    return calendar.timegm(time.strptime(stamp, '%Y%m%dT%H%M%SZ'))


def prune_evidence(cfg, now, keep_paths=()):
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
    kinds = {}
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
    removed = []
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


def collect_evidence(cfg, hang, runner, fetch, now, path=None):
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
    nodes = [(cfg.get('head_name') or 'head', None, cfg['head_unit'], cfg.get('container') or 'dgxspark-ds4-head')]
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

    def __init__(self, work, limit, monotonic=time.monotonic):
        self.limit = float(limit)
        self.monotonic = monotonic
        self.deadline = monotonic() + self.limit
        self.status = None
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

    def ok(self):
        """The child ended by itself with status 0."""
        return self.status is not None and self.status >= 0 and os.WIFEXITED(self.status) and os.WEXITSTATUS(self.status) == 0

    def poll(self):
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

    def _cut_short(self, deadline, status):
        """Kill what the child left running (its process group), then tell the subclass."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass
        self.cut(deadline, status)

    def cut(self, deadline, status):
        """Hook: the child was killed at its deadline (deadline True) or failed with wait status `status`."""

    def kill(self):
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

    def wait(self, timeout=None):
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

    def __init__(self, cfg, hang, runner, fetch, now, monotonic=time.monotonic):
        self.path = evidence_path(cfg, now)
        ChildJob.__init__(self, lambda: collect_evidence(cfg, hang, runner, fetch, now, path=self.path),
                          cfg.get('evidence_timeout_s', 120), monotonic)

    def cut(self, deadline, status):
        why = ('evidence collection stopped at its deadline (%.0f s)' % self.limit if deadline
               else 'evidence collection failed (wait status %s)' % status)
        try:
            _write(os.path.join(self.path, 'INCOMPLETE'), why + '\n')
        except (IOError, OSError):
            pass
        say('hang evidence in %s: %s' % (self.path, why))


def run_canary_child(cfg, result_path):
    """The canary's requests (quality_canary.run_canary), in the CanaryJob's child: the result as JSON in result_path.
    TLS fronts: the CA the fronts' certificates chain to (canary_ca_file) is the one trusted."""
    if cfg.get('canary_ca_file'):
        os.environ['SSL_CERT_FILE'] = cfg['canary_ca_file']

    def gauges():
        """The head's queue gauges, read while a canary request awaits its answer (load or decay?)."""
        samples = parse_prometheus(fetch_metrics(cfg['metrics_url'], float(cfg.get('metrics_timeout_s', 10))))
        return dict((name, metric_total(samples, name)) for name in CANARY_GAUGES)
    probe = gauges if cfg.get('metrics_url') else None
    timeout = canary_request_timeout_s(cfg)
    result = quality_canary.run_canary(
        cfg['canary_url'], cfg['canary_model'], api_key=cfg.get('canary_api_key') or None,
        tools=bool(cfg.get('canary_tools', True)), tool_choice=cfg.get('canary_tool_choice') or 'auto',
        timeout=timeout, decode_tokens=int(cfg.get('canary_decode_tokens', 64)), probe=probe,
        probe_every_s=max(0.5, min(float(cfg.get('hang_poll_s', 5)), timeout / 4.0)))
    tmp = result_path + '.tmp'
    _write(tmp, json.dumps(result, sort_keys=True))
    os.rename(tmp, result_path)


class CanaryJob(ChildJob):
    """One canary in a child with a hard deadline (canary_request_timeout_s per request, the whole canary bounded by
    canary_deadline_s); result() reads what it found, or names the timeout or the crash as the failure."""

    def __init__(self, cfg, monotonic=time.monotonic, work=None, limit=None):
        self.result_path = cfg.get('canary_result_file') or os.path.join(
            os.path.dirname(cfg.get('state_file') or '/tmp/x'), 'canary-result.json')
        if os.path.exists(self.result_path):
            os.unlink(self.result_path)
        self.cut_why = None
        ChildJob.__init__(self, work or (lambda: run_canary_child(cfg, self.result_path)),
                          canary_deadline_s(cfg) if limit is None else limit, monotonic)

    def cut(self, deadline, status):
        self.cut_why = ('the canary did not finish within %g s' % self.limit if deadline
                        else 'the canary process failed (wait status %s)' % status)

    def result(self):
        if self.ok():
            result = load_record(self.result_path)
            if 'ok' in result:
                return result
            self.cut_why = 'no result in %s' % self.result_path
        return {'ok': False, 'requests': [], 'skipped_checks': [], 'ttft_s': None, 'decode_tps': None, 'failures': [
            {'request': 'canary', 'check': 'deadline' if 'within' in (self.cut_why or '') else 'canary',
             'excerpt': '', 'detail': self.cut_why or 'the canary process ended without a result'}]}


# The head's queue gauges the canary reads: what it waits behind (quality_canary.busy_reason).
CANARY_GAUGES = ('vllm:num_requests_running', 'vllm:num_requests_waiting')


def canary_request_timeout_s(cfg):
    """Each canary request's read timeout: canary_request_timeout_s as the role derived it from the recipe (the longest
    engine step, as the hang window; vllm_service_canary_timeout_s its floor), else canary_timeout_s."""
    return float(cfg.get('canary_request_timeout_s') or cfg.get('canary_timeout_s', 120))


def canary_deadline_s(cfg):
    """The whole canary's bound: as the role rendered it, else every request (2 known answers, the tool call, the
    decode) at its timeout, plus 10 s."""
    return float(cfg.get('canary_deadline_s') or 4 * canary_request_timeout_s(cfg) + 10)


# --------------------------------------------------------------------------- guard state + textfile
# The state fields the quality canary owns (GuardState.save_canary writes only these).
CANARY_PREFIXES = ('canary_', 'last_canary_')
KNOWN_CAUSES = ('hang_api_silent', 'hang_no_tokens', 'head_exited', 'quality_canary', 'worker_down', 'worker_restarted',
                'worker_unreadable')


class GuardState(object):
    """Counters and last events of the guard, persisted (JSON) and exported for the node exporter.
    Every known cause is exported from 0 on, so increase() sees the first restart of each cause."""

    # restart_times: the pair restarts of the storm window (epoch seconds), kept so that a restarted guard
    # (crash, upgrade, reboot of the guard unit) does not start counting from zero.
    FIELDS = {'restarts_total': 0, 'hangs_total': 0, 'storm_stops_total': 0, 'last_cause': '', 'last_why': '',
              'last_action': '', 'last_restart_at': None, 'last_hang_at': None, 'last_hang_why': '',
              'last_hang_evidence': '', 'restarts_by_cause': {}, 'restart_times': [],
              'memory_gates_total': 0, 'memory_stops_total': 0, 'last_memory_at': None, 'last_memory_why': '',
              'canary_runs_total': 0, 'canary_failures_total': 0, 'canary_skips_total': 0, 'canary_consecutive': 0,
              'last_canary_at': None, 'last_canary_ok': None, 'last_canary_why': '', 'last_canary_evidence': '',
              'last_canary_ttft_s': None, 'last_canary_decode_tps': None, 'last_canary_skip': '', 'canary_baseline': {},
              'canary_head': '', 'last_canary_started_at': None, 'last_canary_load': None,
              'canary_inconclusive_total': 0, 'last_canary_inconclusive': '', 'last_canary_inconclusive_at': None}

    def __init__(self, cfg):
        self.path = cfg.get('state_file')
        self.textfile = cfg.get('textfile')
        self.watchdog = bool(cfg.get('hang_watchdog'))
        self.memory_guard = bool(cfg.get('memory_guard'))
        self.canary = bool(cfg.get('canary'))
        self.memory = {}
        self.data = dict((k, (type(v)(v) if isinstance(v, (dict, list)) else v)) for k, v in self.FIELDS.items())
        if self.path:
            self.data.update(dict((k, v) for k, v in load_record(self.path).items()
                                  if k in self.FIELDS and _fits(self.FIELDS[k], v)))
        self.data['restart_times'] = [float(t) for t in self.data['restart_times'] if isinstance(t, (int, float))]
        self.ranks = {}
        self.stalled_s = 0.0
        self.written_at = None
        self.dirty = True

    def event(self, action, cause, why, now, evidence=None):
        if action not in ('restart', 'stop'):
            # only a pair restart (or the storm stop) changes the storm window, from the file as act() re-read it;
            # any other event keeps the window the file holds now (a deliberate restart may have cleared it)
            self.reload_window()
        d = self.data
        d['last_action'], d['last_cause'], d['last_why'] = action, cause, why
        if action == 'restart':
            d['restarts_total'] += 1
            d['last_restart_at'] = now
            d['restarts_by_cause'][cause] = d['restarts_by_cause'].get(cause, 0) + 1
        elif action == 'stop':
            d['storm_stops_total'] += 1
        elif action in ('memory_gate', 'memory_stop'):
            d[action + 's_total'] += 1
            d['last_memory_at'] = now
            d['last_memory_why'] = why
        if cause.startswith('hang'):
            d['hangs_total'] += 1
            d['last_hang_at'] = now
            d['last_hang_why'] = why
            d['last_hang_evidence'] = evidence or ''
        self.dirty = True
        self.save()

    def rank(self, role, node, up):
        if self.ranks.get((role, node)) != up:
            self.ranks[(role, node)] = up
            self.dirty = True

    def save(self):
        if self.path:
            save_record(self.path, self.data)

    def save_canary(self):
        """Write the canary's fields only (read, update, write): the storm window in the file may have been cleared by a
        deliberate restart (reset_window) since this guard last wrote it, and a canary must not bring it back."""
        if self.path:
            record = load_record(self.path)
            record.update((k, v) for k, v in self.data.items() if k.startswith(CANARY_PREFIXES))
            save_record(self.path, record)

    def reload_window(self):
        """The storm window as the state file holds it now: a deliberate pair restart (the role's restart contract,
        restart.yml) clears it there (reset_window) while this guard runs."""
        if self.path and os.path.exists(self.path):
            times = load_record(self.path).get('restart_times')
            self.data['restart_times'] = [float(t) for t in times if isinstance(t, (int, float))] if isinstance(times, list) else []

    def render(self, now):
        d = self.data
        out = []

        def metric(name, kind, text, samples):
            out.append('# HELP %s %s' % (name, text))
            out.append('# TYPE %s %s' % (name, kind))
            out.extend(samples)

        metric('dgxspark_ds4_guard_last_poll_timestamp_seconds', 'gauge', 'When the pair guard last polled the pair.',
               ['dgxspark_ds4_guard_last_poll_timestamp_seconds %d' % now])
        metric('dgxspark_ds4_guard_watchdog_enabled', 'gauge', '1 when the hang watchdog is on.',
               ['dgxspark_ds4_guard_watchdog_enabled %d' % int(self.watchdog)])
        metric('dgxspark_ds4_guard_rank_up', 'gauge', '1 when the rank unit is active, as the pair guard sees it.',
               ['dgxspark_ds4_guard_rank_up{role="%s",node="%s"} %d' % (r, _esc(n), int(u))
                for (r, n), u in sorted(self.ranks.items())])
        metric('dgxspark_ds4_guard_restarts_total', 'counter', 'Pair restarts made by the guard, by cause.',
               ['dgxspark_ds4_guard_restarts_total{cause="%s"} %d' % (_esc(c), d['restarts_by_cause'].get(c, 0))
                for c in sorted(set(KNOWN_CAUSES) | set(d['restarts_by_cause']))])
        metric('dgxspark_ds4_guard_hangs_total', 'counter', 'Hangs found by the watchdog.',
               ['dgxspark_ds4_guard_hangs_total %d' % d['hangs_total']])
        metric('dgxspark_ds4_guard_storm_stops_total', 'counter', 'Times the guard stopped the pair at its storm limit.',
               ['dgxspark_ds4_guard_storm_stops_total %d' % d['storm_stops_total']])
        metric('dgxspark_ds4_guard_stalled_seconds', 'gauge', 'Seconds requests have been running with no progress.',
               ['dgxspark_ds4_guard_stalled_seconds %.1f' % self.stalled_s])
        metric('dgxspark_ds4_guard_last_restart_timestamp_seconds', 'gauge', 'Time of the last pair restart (0 = none).',
               ['dgxspark_ds4_guard_last_restart_timestamp_seconds %d' % (d['last_restart_at'] or 0)])
        metric('dgxspark_ds4_guard_last_hang_timestamp_seconds', 'gauge', 'Time of the last hang (0 = none).',
               ['dgxspark_ds4_guard_last_hang_timestamp_seconds %d' % (d['last_hang_at'] or 0)])
        metric('dgxspark_ds4_memguard_enabled', 'gauge', '1 when the memory guard is on.',
               ['dgxspark_ds4_memguard_enabled %d' % int(self.memory_guard)])
        if self.memory_guard:
            self.render_memory(metric)
        metric('dgxspark_ds4_canary_enabled', 'gauge', '1 when the quality canary is on.',
               ['dgxspark_ds4_canary_enabled %d' % int(self.canary)])
        if self.canary:
            self.render_canary(metric)
        metric('dgxspark_ds4_guard_last_cause_info', 'gauge', 'Cause and action of the last guard event.',
               ['dgxspark_ds4_guard_last_cause_info{cause="%s",action="%s"} 1'
                % (_esc(d['last_cause'] or 'none'), _esc(d['last_action'] or 'none'))])
        return '\n'.join(out) + '\n'

    def render_memory(self, metric):
        """The memory guard's series (counters, and per node its level, MemFree and PSI of the last reading)."""
        d = self.data
        metric('dgxspark_ds4_memguard_gates_total', 'counter', 'Times the memory guard took the pair out of rotation.',
               ['dgxspark_ds4_memguard_gates_total %d' % d['memory_gates_total']])
        metric('dgxspark_ds4_memguard_stops_total', 'counter', 'Times the memory guard stopped the pair (worker first).',
               ['dgxspark_ds4_memguard_stops_total %d' % d['memory_stops_total']])
        readings = [r for _n, r in sorted(self.memory.items()) if r.get('level')]
        metric('dgxspark_ds4_memguard_level', 'gauge', 'Memory guard level per node: 0 ok, 1 out of rotation, 2 stop.',
               ['dgxspark_ds4_memguard_level{node="%s"} %d' % (_esc(r['node']), memguard.LEVELS.index(r['level']))
                for r in readings])
        metric('dgxspark_ds4_memguard_memfree_bytes', 'gauge', 'MemFree as the memory guard read it (not MemAvailable).',
               ['dgxspark_ds4_memguard_memfree_bytes{node="%s"} %d' % (_esc(r['node']), r['mem_free']) for r in readings])
        metric('dgxspark_ds4_memguard_memavailable_bytes', 'gauge', 'MemAvailable as the memory guard read it (reported, '
               'never acted on).', ['dgxspark_ds4_memguard_memavailable_bytes{node="%s"} %d' % (_esc(r['node']), r['mem_available'])
                                    for r in readings if r.get('mem_available') is not None])
        metric('dgxspark_ds4_memguard_watermark_bytes', 'gauge', "The kernel's min/low/high watermarks of the node (summed over "
               'its zones), as the memory guard read them: MemFree between min and high is the kernel reclaiming, not pressure.',
               ['dgxspark_ds4_memguard_watermark_bytes{node="%s",watermark="%s"} %d' % (_esc(r['node']), mark, r['watermarks'][mark])
                for r in readings if r.get('watermarks') for mark in ('min', 'low', 'high')])
        for kind in ('some', 'full'):
            metric('dgxspark_ds4_memguard_psi_%s_avg10' % kind, 'gauge',
                   'Memory PSI %s avg10 (percent of time), as the memory guard read it.' % kind,
                   ['dgxspark_ds4_memguard_psi_%s_avg10{node="%s"} %.2f' % (kind, _esc(r['node']), r['psi_%s_avg10' % kind])
                    for r in readings if r.get('psi_%s_avg10' % kind) is not None])

    def render_canary(self, metric):
        """The quality canary's series: runs by result, failures in a row, last run, last passing timings."""
        d = self.data
        passed = d['canary_runs_total'] - d['canary_failures_total']
        metric('dgxspark_ds4_canary_runs_total', 'counter',
               'Quality canary runs by result (skipped: the pair was saturated or its serving path did not answer; '
               'inconclusive: a request got no answer while the engine was busy with other work).',
               ['dgxspark_ds4_canary_runs_total{result="%s"} %d' % (r, n)
                for r, n in (('fail', d['canary_failures_total']), ('pass', passed), ('skipped', d['canary_skips_total']),
                             ('inconclusive', d['canary_inconclusive_total']))])
        metric('dgxspark_ds4_canary_consecutive_failures', 'gauge', 'Quality canary failures in a row (0 after a pass).',
               ['dgxspark_ds4_canary_consecutive_failures %d' % d['canary_consecutive']])
        metric('dgxspark_ds4_canary_last_run_timestamp_seconds', 'gauge', 'When the quality canary last ran (0 = never).',
               ['dgxspark_ds4_canary_last_run_timestamp_seconds %d' % (d['last_canary_at'] or 0)])
        for name, key, text in (('ttft_seconds', 'last_canary_ttft_s', 'Time to first token of the last passing canary.'),
                                ('decode_tokens_per_second', 'last_canary_decode_tps',
                                 'Decode rate of the last passing canary.')):
            if d[key] is not None:
                metric('dgxspark_ds4_canary_' + name, 'gauge', text, ['dgxspark_ds4_canary_%s %s' % (name, d[key])])

    def canary_run(self, result, now, evidence=''):
        """A finished canary (pass or fail) into the counters and the last-run fields."""
        d = self.data
        d['canary_runs_total'] += 1
        d['last_canary_at'] = now
        d['last_canary_ok'] = bool(result.get('ok'))
        if result.get('ok'):
            d['canary_consecutive'] = 0
            d['last_canary_why'] = ''
            d['last_canary_ttft_s'], d['last_canary_decode_tps'] = result.get('ttft_s'), result.get('decode_tps')
        else:
            d['canary_failures_total'] += 1
            d['canary_consecutive'] += 1
            d['last_canary_why'] = quality_canary.summary(result)
            d['last_canary_evidence'] = evidence
        self.dirty = True
        self.save_canary()

    def canary_inconclusive(self, why, now):
        """A canary whose request got no answer while the engine was busy (quality_canary.busy_reason): counted apart,
        neither a pass nor a failure (failures in a row unchanged)."""
        self.data['canary_inconclusive_total'] += 1
        self.data['last_canary_inconclusive'] = '%s (%s)' % (why, _utc_stamp(now))
        self.data['last_canary_inconclusive_at'] = now
        self.dirty = True
        self.save_canary()

    def canary_skip(self, why, now):
        self.data['canary_skips_total'] += 1
        self.data['last_canary_skip'] = '%s (%s)' % (why, _utc_stamp(now))
        self.dirty = True
        self.save_canary()

    def canary_new_head(self, head):
        """A new head (restarted, or first seen): its baseline is taken again, its failures count from 0."""
        d = self.data
        if d['canary_head'] != head:
            d['canary_head'], d['canary_baseline'], d['canary_consecutive'] = head, {}, 0
            self.dirty = True
            self.save_canary()

    def export(self, now, every_s=10.0):
        """Write the textfile atomically when something changed or every_s passed; never raises."""
        if not self.textfile or (not self.dirty and self.written_at is not None and now - self.written_at < every_s):
            return False
        try:
            directory = os.path.dirname(self.textfile)
            if directory and not os.path.isdir(directory):
                os.makedirs(directory, 0o755)
            tmp = os.path.join(directory, '.%s.tmp' % os.path.basename(self.textfile))
            with open(tmp, 'w') as fh:
                fh.write(self.render(now))
            os.chmod(tmp, 0o644)
            os.rename(tmp, self.textfile)
        except (IOError, OSError) as exc:
            say('cannot write %s: %s' % (self.textfile, exc))
            self.written_at = now
            return False
        self.written_at = now
        self.dirty = False
        return True


def reset_window(cfg):
    """Forget the storm window (a deliberate restart of the pair, like systemctl reset-failed for the start limit):
    the counters and the last events stay. Returns how many restart times were dropped."""
    path = cfg.get('state_file')
    if not path or not os.path.exists(path):
        return 0
    record = load_record(path)
    dropped = len(record.get('restart_times') or [])
    record['restart_times'] = []
    save_record(path, record)
    return dropped


def _fits(default, value):
    """A value read back from the state file may replace the default (a dict or list only by its kind)."""
    return not isinstance(default, (dict, list)) or isinstance(value, type(default))


def _esc(value):
    return str(value).replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')


class Watch(object):
    """One guard loop; step() is one poll, unit-tested with a fake runner and clock."""

    def __init__(self, cfg, runner=run, clock=time.time, fetch=None, prepare=prepare_control_dir, cfg_path=None):
        options = ssh_control_options(cfg)
        if options:
            problem = prepare(cfg['ssh_control_dir'])
            if problem:
                say('ssh connection sharing off (%s): one ssh login per poll' % problem)
                options = []
        cfg = dict(cfg)
        cfg['peers'] = [dict(p, ssh=with_ssh_options(p['ssh'], options)) if p.get('ssh') else dict(p)
                        for p in cfg.get('peers') or []]
        self.cfg = cfg
        self.runner = runner
        self.clock = clock
        self.failures = {}
        self.down = {}
        self.stopped_workers = False
        self.state = GuardState(cfg)
        self.hang = None
        self.hang_poll_s = float(cfg.get('hang_poll_s', 5))
        self.hang_polled_at = None
        self.head_invocation = None
        self.head_nrestarts = None
        self.evidence_jobs = []
        self.suspect = None
        self.memory = memguard.MemoryGuard(cfg) if cfg.get('memory_guard') else None
        self.memory_poll_s = float(cfg.get('memory_poll_s', 5))
        self.memory_polled_at = None
        self.memory_head = None
        self.gate = cfg.get('health_gate') or None
        if self.gate:
            gate_write(self.gate, None)  # a gate left from before (a crash, a reboot) is re-decided by the next poll
        self.fetch = None
        if cfg.get('metrics_url'):
            timeout = float(cfg.get('metrics_timeout_s', 10))
            self.fetch = fetch or (lambda: fetch_metrics(cfg['metrics_url'], timeout))
        if cfg.get('hang_watchdog') and self.fetch:
            self.hang = HangDetector(cfg, self.fetch)
        self.canary = bool(cfg.get('canary')) and self.fetch is not None
        self.canary_job = None
        self.canary_due = None
        self.canary_head = None
        self.canary_metrics = ''
        self.canary_load = 0
        self.canary_busy = ''
        self.canary_probed_at = None
        self.canary_ranks = {}
        self.canary_job_factory = CanaryJob
        self.cfg_path = cfg_path

    @property
    def restarts(self):
        """Times of the pair restarts in the storm window (persisted in the state file)."""
        return self.state.data['restart_times']

    def evidence_wait(self, timeout=None):
        """Wait for the evidence children still running; True when none is left."""
        for job in list(self.evidence_jobs):
            job.wait(timeout)
        self.evidence_jobs = [job for job in self.evidence_jobs if not job.poll()]
        return not self.evidence_jobs

    def step(self):
        """Returns the action taken: None, 'restart' or 'stop'."""
        self.suspect = None
        action = None
        self.evidence_jobs = [job for job in self.evidence_jobs if not job.poll()]
        try:
            action = self._step()
            return action
        finally:
            if self.hang is not None:
                self.state.stalled_s = self.hang.stalled_s(self.clock())
            self.state.export(self.clock(), float(self.cfg.get('textfile_every_s', 10)))
            if self.gate:
                if action in ('restart', 'stop') and not self.suspect:
                    self.suspect = 'pair %s by the pair guard' % ('restarting' if action == 'restart' else 'stopped')
                gate_write(self.gate, self.suspect)

    def _step(self):
        cfg = self.cfg
        head = unit_state(cfg['head_unit'], None, self.runner)
        self.state.rank('head', cfg.get('head_name') or 'head', head['ActiveState'] == 'active')
        if head['ActiveState'] == 'failed':
            # The head gave up (start limit): a worker left running would wait for a rendezvous
            # that never comes. Stop it once; the next deploy or restart starts both again.
            self.failures = {}
            self.reset_hang()
            why = '%s failed (%s)' % (cfg['head_unit'], head.get('SubState', '?'))
            if self.stop_workers(why):
                self.state.event('stop_worker', 'head_failed', why, self.clock())
                return 'stop'
            return None
        self.stopped_workers = False
        exited = self.head_exited(head)
        if exited:
            return exited
        if head['ActiveState'] != 'active':
            self.failures = {}
            self.down = {}
            self.reset_hang()
            self.observe_memory()
            return None
        if self.watch_memory(head.get('InvocationID', '')) == 'stop':
            return 'stop'
        if self.canary and head.get('InvocationID', '') != self.canary_head:
            self.canary_reset(head.get('InvocationID', ''))
        record = load_record(cfg['pair_state_file']).get('workers') or {}
        # every rank's invocation when the pair is whole at this poll (None otherwise): the canary runs and is judged
        # only then, and only on the ranks it started on
        ranks = {'head': head.get('InvocationID', '')}
        for peer in cfg.get('peers') or []:
            name = peer['name']
            try:
                state = unit_state(peer['unit'], peer['ssh'], self.runner)
            except GuardError as exc:
                self.failures[name] = self.failures.get(name, 0) + 1
                self.suspect = 'worker %s unreadable (%s)' % (name, exc)
                ranks = None
                if self.failures[name] < int(cfg.get('unreachable_polls', 5)):
                    continue
                self.state.rank('worker', name, False)
                return self.act('worker %s unreadable %d polls in a row (%s)' % (name, self.failures[name], exc),
                                cause='worker_unreadable')
            self.failures[name] = 0
            inv = state.get('InvocationID', '')
            active = state['ActiveState'] == 'active'
            self.state.rank('worker', name, active)
            if record.get(name) and inv and inv != record[name]:
                # A new invocation: the worker restarted on its own and the head's peer is gone for good.
                return self.act('worker %s: %s restarted on its own (invocation %s, head was paired with %s)'
                                % (name, peer['unit'], inv[:12], record[name][:12]), cause='worker_restarted')
            if ranks is not None:
                ranks[name] = inv
            if not active:
                self.suspect = 'worker %s: %s is %s' % (name, peer['unit'], state['ActiveState'])
                ranks = None
                self.down[name] = self.down.get(name, 0) + 1
                need = max(1, int(cfg.get('down_polls', 3)))
                if self.down[name] < need:
                    say('worker %s: %s is %s/%s (poll %d of %d before the pair restarts)' % (
                        name, peer['unit'], state['ActiveState'], state.get('SubState', '?'), self.down[name], need))
                    continue
                return self.act('worker %s: %s is %s/%s while the head serves (%d polls in a row)'
                                % (name, peer['unit'], state['ActiveState'], state.get('SubState', '?'), self.down[name]),
                                cause='worker_down')
            self.down[name] = 0
        if ranks is not None:
            self.mark_serving(head.get('InvocationID', ''))
        return self.watch_hang(head.get('InvocationID', '')) or self.watch_canary(ranks)

    def mark_serving(self, head_invocation):
        """Every rank is up and the head answers /metrics: the pair reached readiness. The phase marker that prestart set
        to 'starting' becomes 'serving' (once per head invocation): an unclean end from now on is no load crash."""
        path = self.cfg.get('phase_file')
        if not path or self.fetch is None or getattr(self, 'phase_marked', None) == head_invocation:
            return
        try:
            self.fetch()
        except Exception:  # pylint: disable=broad-except  # (not serving yet: loading)
            return
        try:
            set_phase(path, 'serving', self.cfg.get('boot_id_file'), self.clock, only_from='starting')
            self.phase_marked = head_invocation
        except (IOError, OSError) as exc:
            say('cannot write the phase marker %s: %s' % (path, exc))

    def head_exited(self, head):
        """systemd restarted the head by itself (NRestarts grew): vLLM exited, e.g. with status 0 after an engine
        death (real-vllm-on-device notes Part 1 §3). systemd's Restart=always restarts it and its prestart takes a
        fresh worker first; the guard counts it in the storm window and stops the pair past the limit."""
        try:
            count = int(head.get('NRestarts', ''))
        except ValueError:
            return None
        seen, self.head_nrestarts = self.head_nrestarts, count
        if seen is None or count <= seen:
            return None
        self.reset_hang()
        return self.act('%s exited by itself and systemd restarted it (NRestarts %d -> %d; vLLM exits 0 after an engine '
                        'death: look for EngineDeadError in journalctl -u %s)' % (self.cfg['head_unit'], seen, count,
                                                                                  self.cfg['head_unit']),
                        cause='head_exited', restart=False)

    def reset_hang(self):
        if self.hang is not None:
            self.hang.reset()
            self.hang_polled_at = None

    def watch_hang(self, head_invocation):
        """The pair is up: is it producing anything? Returns None or the action taken on a hang."""
        if self.hang is None:
            return None
        if head_invocation != self.head_invocation:
            # A new head (restarted, or first seen): its load phase is not a silence.
            self.head_invocation = head_invocation
            self.reset_hang()
        now = self.clock()
        if self.hang_polled_at is not None and now - self.hang_polled_at < self.hang_poll_s:
            return None
        self.hang_polled_at = now
        found = self.hang.poll(now)
        if found is None:
            return None
        if found['kind'] == 'silent' and not self.head_container_running():
            return None
        self.suspect = found['why']
        if self.gate:  # out of rotation at once
            gate_write(self.gate, self.suspect)
        # The evidence is collected by a child with a hard deadline; the restart does not wait for it.
        job = EvidenceJob(self.cfg, found, self.runner, self.fetch, now)
        self.evidence_jobs.append(job)
        self.reset_hang()
        return self.act('%s; evidence in %s' % (found['why'], job.path), cause=found['cause'], evidence=job.path)

    def read_memory(self):
        """One reading per node (memguard.assess): the head's sources directly, each worker's with `cat` over ssh."""
        cfg = self.cfg
        # meminfo, PSI, zoneinfo (the kernel's watermarks), min_free_kbytes (their fallback): memory_guard.SOURCES
        paths = [cfg.get(key) or memguard.SOURCES[key] for key in ('meminfo_path', 'psi_path', 'zoneinfo_path',
                                                                   'min_free_kbytes_path')]
        texts = []
        for path in paths:
            try:
                with open(path) as handle:
                    texts.append(handle.read())
            except (IOError, OSError):
                texts.append('')
        readings = [self.memory.assess(cfg.get('head_name') or 'head', *texts)]
        for peer in cfg.get('peers') or []:
            if peer.get('ssh'):
                # cat prints what it can read (a kernel without PSI: the others only, rc 1); each parser skips the
                # other files' lines (memory_guard.parse_*).
                _rc, out, _err = self.runner(list(peer['ssh']) + ['cat'] + paths, timeout=15)
                readings.append(self.memory.assess(peer['name'], out, out, out, out))
        return readings

    def observe_memory(self):
        """The pair is not running: keep the memory readings (and so the textfile) current, decide nothing."""
        if self.memory is None:
            return
        now = self.clock()
        if self.memory_polled_at is None or now - self.memory_polled_at >= self.memory_poll_s:
            self.memory_polled_at = now
            self.memory.observe(self.read_memory())
            self.state.memory = dict(self.memory.readings)
            self.state.dirty = True

    def watch_memory(self, head_invocation):
        """The memory guard's poll (memguard.py): gate the pair out of rotation, then stop it worker first."""
        if self.memory is None:
            return None
        if head_invocation != self.memory_head:
            self.memory_head = head_invocation
            self.memory.reset()
        now = self.clock()
        if self.memory_polled_at is None or now - self.memory_polled_at >= self.memory_poll_s:
            self.memory_polled_at = now
            action = self.memory.decide(self.read_memory())
            self.state.memory = dict(self.memory.readings)
            self.state.dirty = True
        else:
            action = None
        why = 'memory guard: %s' % self.memory.why
        if self.memory.gated or action == 'stop':
            self.suspect = why
        if action == 'gate':
            say('%s: pair out of rotation (health gate)' % why)
            self.state.event('memory_gate', 'memory_pressure', why, now)
        elif action == 'clear':
            say('memory guard: pressure gone on every node; pair back in rotation')
        elif action == 'stop':
            say('%s: stopping the pair, worker first (a stopped pair restarts in minutes, a frozen GB10 needs the power '
                'button); start it again with playbooks/restart.yml once the memory is found' % why)
            self.state.event('memory_stop', 'memory_pressure', why, now)
            # The worker's stop is queued first, the head's follows at once: a head that exits when its peer goes
            # (vLLM's engine death) waits RestartSec before systemd restarts it, and this stop cancels that restart;
            # a blocking worker stop (up to its TimeoutStopSec) could let the head restart and take a fresh worker.
            self.stop_workers(why, quiet=True, block=False)
            self.runner(['systemctl', 'stop', self.cfg['head_unit']], timeout=120)
            self.stopped_workers = False
            return 'stop'
        return None

    def canary_reset(self, head_invocation):
        """A new head (or the first seen): a canary still running is for the old one; the first canary of this head
        runs as soon as it serves (its baseline, taken after readiness)."""
        if self.canary_job is not None:
            self.canary_job.kill()
            self.canary_job = None
        self.reload_canary_settings()
        self.canary_head = head_invocation
        self.state.canary_new_head(head_invocation)
        self.canary_due = self.clock()

    def reload_canary_settings(self):
        """The canary's settings as the config file holds them now: a switch (another served name, another API port)
        rewrites it before it restarts the pair, and this guard's own restart (the role's handler) comes after the
        new head serves. A config that no longer passes the check keeps the settings in force."""
        if not self.cfg_path:
            return
        fresh = load_record(self.cfg_path)
        keys = [k for k in fresh if k.startswith('canary')]
        if keys and not quality_canary.check_config(fresh):
            changed = [k for k in keys if self.cfg.get(k) != fresh[k] and k != 'canary_api_key']
            self.cfg.update((k, fresh[k]) for k in keys)
            if changed:
                say('quality canary: settings reloaded for the new head (%s)' % ', '.join(sorted(changed)))

    def watch_canary(self, ranks=None):
        """The quality canary's poll (quality_canary.py): one canary at a time in a child; a failure takes the pair out
        of rotation at once (health gate) and restarts it after canary_failures_to_restart in a row (storm limit).
        ranks: every rank's invocation when the pair is whole at this poll, else None: a canary is started and judged
        only on a whole pair, and dropped when a rank restarted while it ran (the restart explains what it saw)."""
        if not self.canary:
            return None
        cfg, d = self.cfg, self.state.data
        now = self.clock()
        if d['canary_consecutive'] and not self.suspect:
            self.suspect = 'quality canary failed %d time(s) in a row: %s' % (d['canary_consecutive'], d['last_canary_why'])
        if ranks is None:
            return None
        if self.canary_job is not None:
            if not self.canary_job.poll():
                self.canary_probe(now)
                return None
            job, self.canary_job = self.canary_job, None
            if ranks != self.canary_ranks:
                say('quality canary dropped: a rank restarted while it ran (%s)' % ', '.join(
                    sorted(k for k in set(ranks) | set(self.canary_ranks) if ranks.get(k) != self.canary_ranks.get(k))))
                self.canary_due = now + float(cfg.get('canary_retry_s', 60))
                return None
            return self.canary_done(job.result(), now)
        if self.canary_due is None or now < self.canary_due:
            return None
        try:
            text = self.fetch()
        except Exception:  # pylint: disable=broad-except
            # not serving yet (loading) or not answering: readiness's and the hang watchdog's business, not a canary's
            self.canary_due = now + float(cfg.get('hang_poll_s', 5))
            return None
        samples = dict((name, metric_total(parse_prometheus(text), name))
                       for name in ('vllm:num_requests_running', 'vllm:num_requests_waiting'))
        skip = quality_canary.should_skip(samples, cfg.get('canary_max_num_seqs'))
        if skip:
            self.state.canary_skip(skip, now)
            self.canary_due = now + float(cfg.get('canary_retry_s', 60))
            return None
        self.canary_metrics = text
        self.canary_load = int(sum(v or 0 for v in samples.values()))
        self.canary_busy, self.canary_probed_at = '', now
        self.canary_due = None
        self.canary_ranks = dict(ranks)
        self.canary_job = self.canary_job_factory(cfg)
        d['last_canary_started_at'], d['last_canary_load'] = now, self.canary_load
        self.state.save_canary()
        return None

    def canary_probe(self, now):
        """While the canary's child runs: the head's queue gauges every hang_poll_s, kept when they show other work
        (quality_canary.busy_reason). A canary cut at its deadline while the engine was busy is inconclusive, and the
        timings of one that saw the pair busy are not judged."""
        if self.canary_busy or (self.canary_probed_at is not None
                                and now - self.canary_probed_at < float(self.cfg.get('hang_poll_s', 5))):
            return
        self.canary_probed_at = now
        try:
            parsed = parse_prometheus(self.fetch())
        except Exception:  # pylint: disable=broad-except
            return
        self.canary_busy = quality_canary.busy_reason(dict((n, metric_total(parsed, n)) for n in CANARY_GAUGES)) or ''

    def canary_done(self, result, now):
        """A finished canary: judged against the head's baseline (the first passing canary sets it). One whose request
        got no answer from the serving path (refused, reset, 502/503/504) is inconclusive: counted as skipped. One whose
        request got no answer while the engine was busy with other work (a long prefill it queued behind: the
        real-vllm-on-device notes, Part 1b), or that was cut at its deadline so, is inconclusive: counted apart, no gate,
        no restart. An answer that arrived is judged, busy or not."""
        cfg, d = self.cfg, self.state.data
        if result.get('unreachable'):
            self.state.canary_skip('unreachable: %s' % result['unreachable'][0], now)
            self.canary_due = now + float(cfg.get('canary_retry_s', 60))
            return None
        busy = result.get('busy') or self.canary_busy
        failures = result.get('failures') or []
        if self.canary_busy and failures and all(f.get('check') == 'deadline' for f in failures):
            why = 'the canary did not finish within its deadline (%g s) while %s' % (canary_deadline_s(cfg), self.canary_busy)
            result = dict(result, failures=[], inconclusive=[why])
        if result.get('inconclusive') and not result.get('failures'):
            why = 'quality canary inconclusive (the pair is busy; not a failure: no gate, no restart): %s' % (
                result['inconclusive'][0])
            self.state.canary_inconclusive(why, now)
            self.canary_due = now + float(cfg.get('canary_retry_s', 60))
            say('%s; next canary in %ss' % (why, cfg.get('canary_retry_s', 60)))
            return None
        settings = dict((k, cfg[k]) for k in quality_canary.DEFAULTS if k in cfg)
        baseline = d['canary_baseline']
        # Time to first token and decode rate follow the load (batching, a prefill it waited behind): they are judged,
        # and the baseline taken, only for a canary that found the pair idle and saw it idle while it ran; with other
        # requests in flight only the answers count.
        idle = self.canary_load == 0 and not busy
        if idle:
            quality_canary.judge_timings(result, baseline, settings)
        else:
            result['skipped_checks'] = list(result.get('skipped_checks') or []) + [
                'timings: %s (judged on an idle pair only)' % (
                    '%d request(s) in flight when the canary started' % self.canary_load if self.canary_load else busy)]
        if result.get('ok'):
            if not baseline and idle:
                d['canary_baseline'] = {'ttft_s': result['ttft_s'], 'decode_tps': result['decode_tps'], 'at': now}
            was = d['canary_consecutive']
            self.state.canary_run(result, now)
            if was:
                say('quality canary passed again after %d failure(s): pair back in rotation' % was)
            self.suspect = None
            self.canary_due = now + float(cfg.get('canary_interval_s', 600))
            return None
        path = evidence_path(cfg, now, 'canary')
        try:
            try:
                after = self.fetch()
            except Exception as exc:  # pylint: disable=broad-except
                after = '# /metrics did not answer after the canary: %s: %s\n' % (type(exc).__name__, exc)
            _write(os.path.join(path, 'canary.json'), json.dumps(dict(
                result, baseline=baseline, settings=settings, at=now, at_utc=_utc_stamp(now), url=cfg.get('canary_url'),
                model=cfg.get('canary_model')), indent=1, sort_keys=True))
            _write(os.path.join(path, 'metrics-before.txt'), self.canary_metrics or '# no scrape before the canary\n')
            _write(os.path.join(path, 'metrics-after.txt'), after)
        except (IOError, OSError) as exc:
            say('quality canary evidence %s: %s' % (path, exc))
        self.state.canary_run(result, now, evidence=path)
        count, need = d['canary_consecutive'], int(cfg.get('canary_failures_to_restart', 3))
        why = 'quality canary failed (%d of %d in a row before a pair restart): %s' % (count, need, d['last_canary_why'])
        self.suspect = why
        if count >= need:
            return self.act('%s; evidence in %s' % (why, path), cause='quality_canary', evidence=path)
        say('%s: pair out of rotation (health gate); evidence in %s; next canary in %ss'
            % (why, path, cfg.get('canary_retry_s', 60)))
        self.canary_due = now + float(cfg.get('canary_retry_s', 60))
        return None

    def head_container_running(self):
        cfg = self.cfg
        rc, out, _err = self.runner([cfg.get('docker') or 'docker', 'inspect', '-f', '{{.State.Running}}',
                                     cfg.get('container') or 'dgxspark-ds4-head'])
        return rc == 0 and out.strip() == 'true'

    def stop_workers(self, why, quiet=False, block=True):
        """Stop every worker rank that still runs; True when one was stopped. quiet: the caller said why already;
        block=False: only queue the stop (the caller stops the head right after)."""
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
                if not quiet:
                    say('%s: stopping %s on %s too (the pair lives and dies together)' % (why, peer['unit'], peer['name']))
                self.runner(list(peer['ssh']) + ['systemctl', 'stop'] + ([] if block else ['--no-block']) + [peer['unit']],
                            timeout=120)
                if not block:
                    self.left_active(peer)
                stopped = True
        self.stopped_workers = True
        return stopped

    def left_active(self, peer, tries=50):
        """After a queued stop: wait (bounded, ~5 s) until the worker unit has left 'active', so its stop has begun
        before the caller stops the head (a --no-block stop returns before systemd runs the job)."""
        for _try in range(tries):
            try:
                if unit_state(peer['unit'], peer['ssh'], self.runner)['ActiveState'] != 'active':
                    return True
            except GuardError:
                return False
            time.sleep(0.1)
        return False

    def act(self, why, cause='worker', evidence=None, restart=True):
        """Restart the pair (the head; its prestart restarts the worker first), or stop it past the storm limit.
        restart=False: systemd restarts the head already; only count it (and stop past the limit)."""
        cfg = self.cfg
        now = self.clock()
        window = float(cfg.get('window_s', 1800))
        self.state.reload_window()
        self.restarts[:] = [t for t in self.restarts if now - t < window]
        if len(self.restarts) >= int(cfg.get('max_restarts', 3)):
            say('%s; %d pair restarts within %ds already: stopping %s instead of feeding a crash loop. '
                'Find the cause (ansible-playbook playbooks/doctor.yml), then restart the pair'
                % (why, len(self.restarts), window, cfg['head_unit']))
            self.state.event('stop', cause, why, now, evidence)
            self.runner(['systemctl', 'stop', cfg['head_unit']])
            self.stopped_workers = False
            self.stop_workers('pair guard gave up')
            return 'stop'
        self.restarts.append(now)
        self.state.event('restart', cause, why, now, evidence)
        if not restart:
            say('%s: its prestart restarts the worker first (pair restart %d of %d within %ds)'
                % (why, len(self.restarts), int(cfg.get('max_restarts', 3)), window))
        else:
            say('%s: restarting %s so both ranks restart, worker first' % (why, cfg['head_unit']))
            rc, out, err = self.runner(['systemctl', 'restart', '--no-block', cfg['head_unit']])
            if rc != 0:
                say('systemctl restart %s failed (rc %d): %s' % (cfg['head_unit'], rc, err or out))
        self.failures = {}
        self.down = {}
        return 'restart'


def gate_write(path, reason):
    """The health gate: the file (the reason in it) while the pair must not take requests, absent otherwise."""
    try:
        if reason:
            try:
                with open(path) as handle:
                    if handle.read().strip() == reason.strip():
                        return
            except (IOError, OSError):
                pass
            _write(path, reason.strip() + '\n')
        elif os.path.exists(path):
            os.unlink(path)
    except (IOError, OSError) as exc:
        say('health gate %s: %s' % (path, exc))


# config key -> (role variable that sets it, smallest value allowed)
POSITIVE_KEYS = (
    ('interval_s', 'vllm_service_pair_guard_interval_s', 1),
    ('max_restarts', 'vllm_service_pair_guard_max_restarts', 1),
    ('window_s', 'vllm_service_pair_guard_window_s', 1),
    ('hang_after_s', 'vllm_service_hang_after_s (with vllm_service_hang_prefill_tokens_per_s)', 1),
    ('hang_after_no_kv_s', 'vllm_service_hang_after_s (with vllm_service_hang_prefill_tokens_per_s)', 1),
    ('hang_poll_s', 'vllm_service_hang_poll_s', 1),
    ('metrics_timeout_s', 'vllm_service_hang_metrics_timeout_s', 1),
    ('evidence_timeout_s', 'vllm_service_hang_evidence_timeout_s', 1),
)


def check_config(cfg):
    """Problems of a guard config (one line each, naming the key, the role variable and the fix); [] when usable."""
    problems = []
    if not cfg.get('head_unit'):
        problems.append('head_unit is missing: re-run the dgxspark.ds4.vllm_service role to render the config')
    for key, variable, least in POSITIVE_KEYS:
        if key not in cfg:
            continue
        value = cfg[key]
        try:
            ok = not isinstance(value, bool) and float(value) >= least
        except (TypeError, ValueError):
            ok = False
        if not ok:
            problems.append('%s = %r: must be a number >= %s. Fix: set %s and re-run the role' % (key, value, least, variable))
    if cfg.get('hang_watchdog') and not problems and 'hang_after_s' in cfg and 'hang_poll_s' in cfg:
        if float(cfg['hang_after_s']) < 2 * float(cfg['hang_poll_s']):
            problems.append('hang_after_s = %r is shorter than two polls (hang_poll_s = %r). Fix: raise vllm_service_hang_after_s '
                            'or lower vllm_service_hang_poll_s' % (cfg['hang_after_s'], cfg['hang_poll_s']))
    problems.extend(evidence_problems(cfg))
    return problems


def watch_forever(cfg, cfg_path=None):
    loop = Watch(cfg, cfg_path=cfg_path)
    interval = float(cfg.get('interval_s', 5))
    workers = ', '.join('%s on %s' % (p['unit'], p['name']) for p in cfg.get('peers') or [])
    say('watching %s and %s every %.1fs (worker down: %d polls, unreadable: %d polls; ssh %s); hang watchdog %s' % (
        cfg['head_unit'], workers, interval, int(cfg.get('down_polls', 3)), int(cfg.get('unreachable_polls', 5)),
        'one shared connection' if any('ControlMaster=auto' in (p.get('ssh') or []) for p in loop.cfg['peers'])
        else 'one login per poll',
        ('on (%s, no progress for %ss; %ss without a KV-cache usage series)'
         % (cfg.get('metrics_url'), cfg.get('hang_after_s', 120), cfg.get('hang_after_no_kv_s') or cfg.get('hang_after_s', 120)))
        if loop.hang else 'off'))
    if loop.memory:
        say("memory guard on: PSI and MemFree of %s and %s every %.0fs (sources %s): out of rotation at PSI some avg10 >= %s%%, "
            "stopped at PSI full avg10 >= %s%% or MemFree below the kernel's min watermark (each node's own, from its "
            'zoneinfo), never for MemFree inside the reclaim band' % (
                cfg.get('head_name') or 'head', ', '.join(p['name'] for p in cfg.get('peers') or []) or 'no worker',
                loop.memory_poll_s, ', '.join(cfg.get(key) or memguard.SOURCES[key] for key in
                                              ('meminfo_path', 'psi_path', 'zoneinfo_path', 'min_free_kbytes_path')),
                loop.memory.settings['memory_gate_psi_some_avg10'], loop.memory.settings['memory_stop_psi_full_avg10']))
    if loop.canary:
        say('quality canary on: %s (model %s%s) every %ss, retried after %ss when it fails, a pair restart after %s '
            'failures in a row; skipped while saturated (max-num-seqs %s); each request %g s, the whole canary %g s; '
            'inconclusive (no gate, no restart) when a request gets no answer behind other work; timing bounds: TTFT '
            'above %s x the baseline + %s s, decode below %s x the baseline' % (
                cfg['canary_url'], cfg['canary_model'], ', TLS trusting %s' % cfg['canary_ca_file'] if cfg.get('canary_ca_file') else '',
                cfg.get('canary_interval_s', 600), cfg.get('canary_retry_s', 60), cfg.get('canary_failures_to_restart', 3),
                cfg.get('canary_max_num_seqs'), canary_request_timeout_s(cfg), canary_deadline_s(cfg),
                cfg.get('canary_max_ttft_ratio', 5.0), cfg.get('canary_ttft_slack_s', 2.0),
                cfg.get('canary_min_decode_ratio', 0.3)))
    elif cfg.get('canary'):
        say('quality canary off: no metrics_url in the config (re-run the dgxspark.ds4.vllm_service role)')
    while True:
        try:
            if loop.step() == 'restart':
                # Let the head leave "active" before the next poll looks at it again.
                time.sleep(max(interval, float(cfg.get('settle_s', 5))))
        except GuardError as exc:
            say('head unit unreadable: %s' % exc)
        time.sleep(interval)


def main(argv):
    if len(argv) != 3 or argv[1] not in ('watch', 'reset-window'):
        print('usage: %s watch|reset-window CONFIG.json' % argv[0], file=sys.stderr)
        return 2
    try:
        with open(argv[2]) as fh:
            cfg = json.load(fh)
    except (IOError, OSError, ValueError) as exc:
        print('%s: cannot read config %s: %s' % (TAG, argv[2], exc), file=sys.stderr)
        return 1
    problems = ((check_config(cfg) + memguard.check_config(cfg) + quality_canary.check_config(cfg))
                if isinstance(cfg, dict) else ['the config is not a JSON object'])
    if problems:
        for problem in problems:
            print('%s: config %s: %s' % (TAG, argv[2], problem), file=sys.stderr)
        return 2
    if argv[1] == 'reset-window':
        say('storm window cleared (%d pair restarts forgotten): the pair was restarted deliberately' % reset_window(cfg))
        return 0
    watch_forever(cfg, argv[2])
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
