# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark-ds4 forensics after a hard reset: the previous boot of both nodes, before the pair starts.

The node package's module; its entry point is roles/vllm_service/files/forensics.py (`forensics.py ack CONFIG.json`),
installed by dgxspark.ds4.vllm_service next to prestart.py, and the head's prestart (the node package's prestart.py)
calls it. The signatures are failure_catalogue.py's 'kernel' entries (one matcher for the controller and the node).
Python 3 standard library only.

After unified-memory exhaustion or a GSP hang a GB10 freezes or hard-resets; the evidence is in the previous boot's
kernel log (field notes 2026-11, what users report, item 3). The head's prestart (step "previous boot") reads it on
the head and, over the peer key, on each worker, through ONE reader whose source is configurable:
  * source 'journal' (default): journalctl -b -1 for the kernel and journald's own lines (_TRANSPORT=kernel +
    _TRANSPORT=driver: journalctl -k plus "Journal started/stopped", journald's and systemd-shutdown's lines), then
    every file of the pstore directory (/sys/fs/pstore) if any;
  * source 'file': a file replayed through the same reader (`cat`, locally or over ssh): the test nodes share the CI
    machine's kernel, so Molecule and the unit tests replay a fixture.

What the pair does: it is held only for a crash it would repeat. Per node (failure_catalogue.boot_end): the boot ended
'clean' (a shutdown sequence after the last "Journal started": systemd-shutdown's lines, journald's SIGTERM from
systemd-shutdown; a journald restart inside the boot writes "Journal stopped" and is no end), 'unclean' (the log just
stops) or 'unknown' (no journald line: nothing to judge). Then:
  * HOLD: an unclean end within FAULT_WINDOW_S of a host-killing GPU fault (catalogue entries with gpu_fault: GSP
    timeouts, Xid 119/120, reset-class Xids 79/62/48/95/140/154; the unified-memory freeze, NV_ERR_NO_MEMORY within
    its own 600 s of the end), or an unclean end of a boot in which the pair was
    loading: the head's phase marker (the pair guard's pair.set_phase: prestart writes 'starting' durably before the container
    starts, the pair guard 'serving' once the head answers with every rank up) still said 'starting' (finding
    'pair-load-crash': the seed-000 GSP hang and the seed-002 compile freeze leave no kernel line at all);
  * START, recorded: everything else that was seen: a clean reboot with application-class Xids (13/31/43/45), a
    survived OOM kill, an uncorrectable AER, a power cut or a wedge while serving (unclean, no GPU fault). One
    NV_ERR_NO_MEMORY appears on every successful engine start (vllm#56824): it is recorded only within FAULT_WINDOW_S
    of an unclean end, and holds only within 600 s of it (the freeze). Correctable AER is 'info' and never recorded.
    A clean reboot with nothing else is not an incident.
A signature found on any node is one incident (its id: a hash of the nodes' findings and lines, so the same old
evidence is the same incident at every later start). Once per incident: one record (crash-<UTC>-<id>/ under
evidence_dir: each node's log, summary.json with the verdict, each node's end, the findings, causes, fixes, sources).
Then, for a holding incident, per after_crash (vllm_service_after_crash):
  * hold: the pair is not started: the worker unit is stopped, the head unit is stopped (a stop job, so systemd's
    Restart= does not retry it) and the prestart fails naming the cause, the fix and the ack;
  * fallback:<recipe>: held the same way; the line names the safer recipe to switch to (playbooks/switch.yml);
  * start: the pair starts; the incident stays in status.yml and the alert until acknowledged.
`forensics.py ack CONFIG.json` (playbooks/ack.yml) acknowledges the incident: its hold is released, and a later
boot that reads the same old evidence (pstore kept, journal of a boot before) does not hold again.
State: hold_file (the incident, held or started, read by status.yml), state_file ({'seen': {id: record}, 'acked':
[ids]}), phase_file (the marker above); metrics: textfile (node-exporter textfile collector).
"""

from __future__ import annotations

# A node script's code, run by the node's own python3 (not an Ansible module): print and subprocess are its I/O.
# pylint: disable=ansible-bad-function
import calendar
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import failure_catalogue
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import jobs, pair

TAG = 'dgxspark-ds4 forensics'
MODES = ('hold', 'start', 'fallback')
JOURNAL_ARGV = ['journalctl', '-b', '-1', '--no-pager', '-o', 'short-iso', '_TRANSPORT=kernel', '_TRANSPORT=driver']
# A GPU fault or an NV_ERR_NO_MEMORY counts as the cause of an unclean end when the log ended at most this long after it
# (journald syncs warnings to disk only every few minutes, so the last lines may be missing: a generous window).
FAULT_WINDOW_S = 1800


class ForensicsError(Exception):
    pass


def say(msg: str) -> None:
    print('%s: %s' % (TAG, msg))
    sys.stdout.flush()


def parse_mode(value: object) -> tuple[str, str | None]:
    """'hold' | 'start' | 'fallback:<recipe>' -> (mode, recipe); raises ForensicsError naming the variable."""
    mode, _sep, recipe = str(value).partition(':')
    if mode not in MODES or (mode == 'fallback') != bool(recipe) or (recipe and not recipe.replace('-', '').replace('_', '').isalnum()):
        raise ForensicsError('vllm_service_after_crash = %r: must be hold, start or fallback:<recipe> (a recipe name of '
                             'roles/config/files/recipes). Fix: set it to hold' % (value,))
    return mode, recipe or None


def reader_commands(fcfg: Mapping[str, Any], ssh: Sequence[str] | None = None) -> list[tuple[str, list[str]]]:
    """The reader's commands for one node: [(label, argv)], the same for the head (ssh None) and a worker."""
    if fcfg.get('source') == 'file':
        return [('file %s' % fcfg['file'], ['cat', fcfg['file']])]
    commands = [('journalctl -b -1 (kernel + journald)', list(JOURNAL_ARGV))]
    pstore = fcfg.get('pstore_dir')
    if pstore:
        script = ('for f in %s/*; do [ -f "$f" ] && { echo "== pstore $f"; cat "$f"; }; done; true' % pstore)
        commands.append(('pstore %s' % pstore, [script] if ssh else ['sh', '-c', script]))
    return commands


def read_node(fcfg: Mapping[str, Any], runner: Callable[..., tuple[int, str, str]], ssh: Sequence[str] | None = None) -> tuple[str, list[str]]:
    """The previous boot's kernel log of one node -> (text, [notes]) ; a source that cannot be read is a note."""
    texts: list[str] = []
    notes: list[str] = []
    for label, argv in reader_commands(fcfg, ssh):
        rc, out, err = runner(list(ssh or []) + argv, timeout=int(fcfg.get('timeout_s', 60)))
        if rc != 0:
            notes.append('%s: rc %d %s' % (label, rc, (err or out).strip()[:200]))
        if out:
            texts.append(out if out.endswith('\n') else out + '\n')
    return ''.join(texts), notes


def line_time(text: str) -> int | None:
    """Epoch seconds of a journalctl short-iso line ('2026-11-25T02:41:13+0000 host ...'), or None."""
    stamp = text.split(' ', 1)[0]
    try:
        parsed = time.strptime(stamp[:19], '%Y-%m-%dT%H:%M:%S')
    except ValueError:
        return None
    offset = stamp[19:]
    secs = calendar.timegm(parsed)
    if len(offset) == 5 and offset[0] in '+-' and offset[1:].isdigit():
        secs -= (1 if offset[0] == '+' else -1) * (int(offset[1:3]) * 3600 + int(offset[3:5]) * 60)
    elif offset not in ('', 'Z'):
        return None
    return secs


def near_end(finding: Mapping[str, Any], end: Mapping[str, Any], window_s: float) -> bool:
    """True when the log ended at most window_s after the finding's last line (or the times cannot be read)."""
    last = line_time(end.get('text') or '')
    times = [line_time(ln['text']) for ln in finding['lines']]
    seen = [t for t in times if t is not None]
    if last is None or not seen:
        return True
    return last - max(seen) <= window_s


def judge_node(node: str, text: str, role: str | None, window_s: float = FAULT_WINDOW_S) -> dict[str, Any]:
    """One node's previous boot -> {'node', 'end' (boot_end), 'findings', 'faults'}: the catalogue's findings ('info'
    left out; an only_if_unclean one only within window_s of an unclean end) and the host-killing GPU faults among
    them (gpu_fault, within window_s of an unclean end)."""
    end = failure_catalogue.boot_end(text)
    found: list[dict[str, Any]] = []
    faults: list[dict[str, Any]] = []
    for f in failure_catalogue.match(text, node=node, source='kernel', role=role):
        if f['severity'] == 'info':
            continue
        ent = failure_catalogue.entry(f['id'])
        unclean_near = end['end'] == 'unclean' and near_end(f, end, window_s)
        if ent.get('only_if_unclean') and not unclean_near:
            continue
        found.append(f)
        if ent.get('gpu_fault') and unclean_near and near_end(f, end, min(window_s, ent.get('fault_window_s', window_s))):
            faults.append(f)
    return {'node': node, 'end': end, 'findings': found, 'faults': faults}


def findings_of(node: str, text: str, role: str | None) -> list[dict[str, Any]]:
    """The findings of one node's previous boot (judge_node)."""
    return judge_node(node, text, role)['findings']


def previous_phase(fcfg: Mapping[str, Any], clock: Callable[[], float]) -> dict[str, Any] | None:
    """The head's phase marker of the previous boot ({'phase', 'since', 'boot_id'}) or None (no marker configured, none
    written: the pair guard is off or the pair never started). Rotates the marker at the first start of a boot."""
    path = fcfg.get('phase_file')
    if not path:
        return None
    try:
        record = pair.phase_record(path, fcfg.get('boot_id_file'), clock)
    except (IOError, OSError) as exc:
        say('cannot read or rotate the phase marker %s: %s' % (path, exc))
        return None
    previous = record.get('previous')
    return previous if isinstance(previous, dict) and previous.get('phase') else None


def load_crash_finding(node: str, phase: Mapping[str, Any]) -> dict[str, Any]:
    """The collection's own record as a finding: the pair was loading when the boot ended."""
    ent = failure_catalogue.entry('pair-load-crash')
    text = ('phase marker: the pair was starting since %s (boot %s) and never reached readiness'
            % (time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(int(phase.get('since') or 0))), phase.get('boot_id', '?')))
    return {'id': ent['id'], 'cause': ent['cause'], 'fix': ent['fix'], 'severity': ent['severity'], 'source': ent['source'],
            'rank': ent['rank'], 'node': node, 'lines': [{'lineno': 0, 'text': text}]}


def verdict_of(judged: Sequence[Mapping[str, Any]], phase: Mapping[str, Any] | None, head: str) -> tuple[list[dict[str, Any]], str]:
    """(hold findings, why) for the nodes judged (judge_node) and the head's previous-boot phase."""
    holds = [f for j in judged for f in j['faults']]
    unclean = [j['node'] for j in judged if j['end']['end'] == 'unclean']
    if phase and phase.get('phase') == 'starting' and unclean:
        holds.insert(0, load_crash_finding(head, phase))
    if holds:
        return holds, 'held: %s' % ', '.join(sorted({'%s: %s' % (f['node'], f['id']) for f in holds}))
    if unclean:
        return [], 'started: unclean end of %s with no GPU fault%s' % (
            ', '.join(unclean), ' while the pair was %s' % phase['phase'] if phase else '')
    return [], 'started: the previous boot ended cleanly'


def incident_id(findings: Iterable[Mapping[str, Any]]) -> str:
    digest = hashlib.sha256()
    for f in sorted(findings, key=lambda f: (f['node'], f['id'])):
        digest.update(('%s|%s|%s\n' % (f['node'], f['id'], '|'.join(ln['text'] for ln in f['lines']))).encode('utf-8'))
    return digest.hexdigest()[:12]


def summary_line(findings: Iterable[Mapping[str, Any]]) -> str:
    return '; '.join('%s: %s (%s)' % (f['node'], f['id'], f['lines'][0]['text'].strip()[:120]) for f in findings)


def write_record(fcfg: Mapping[str, Any], incident: str, logs: Mapping[str, tuple[str, list[str]]], findings: Iterable[Mapping[str, Any]],
                 mode: str, now: float, verdict: str = '', ends: Mapping[str, str] | None = None) -> str:
    """crash-<UTC>-<id>/ under evidence_dir: kernel-<node>.txt per node and summary.json; returns its path. A new
    record prunes the older evidence directories (jobs.prune_evidence: never the held incident's)."""
    path = os.path.join(fcfg.get('evidence_dir') or '/var/lib/dgxspark-ds4/evidence',
                        'crash-%s-%s' % (time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now)), incident))
    if not os.path.isdir(path):
        os.makedirs(path, 0o755)
        jobs.prune_evidence(fcfg, now, keep_paths=(path,))
    for node, (text, notes) in logs.items():
        header = ''.join('# %s\n' % n for n in notes)
        with open(os.path.join(path, 'kernel-%s.txt' % node), 'w') as fh:
            fh.write(header + (text or '# nothing read\n'))
    summary = {'incident': incident, 'detected_at': now, 'after_crash': mode, 'nodes': sorted(logs), 'verdict': verdict,
               'ends': ends or {},
               'findings': [dict((k, f[k]) for k in ('node', 'id', 'cause', 'fix', 'source', 'severity', 'lines'))
                            for f in findings]}
    with open(os.path.join(path, 'summary.json'), 'w') as fh:
        json.dump(summary, fh, indent=1, sort_keys=True)
        fh.write('\n')
    return path


def export(fcfg: Mapping[str, Any], findings: Sequence[Mapping[str, Any]], held: bool, now: float) -> None:
    """The node-exporter textfile: unacknowledged signatures per node, held or not; never raises."""
    path = fcfg.get('textfile')
    if not path:
        return
    lines = ['# HELP dgxspark_ds4_previous_boot_unacknowledged Crash signatures of the previous boot not acknowledged yet.',
             '# TYPE dgxspark_ds4_previous_boot_unacknowledged gauge',
             'dgxspark_ds4_previous_boot_unacknowledged %d' % len(findings),
             '# HELP dgxspark_ds4_previous_boot_held 1 while the pair is held at boot for an unacknowledged crash.',
             '# TYPE dgxspark_ds4_previous_boot_held gauge',
             'dgxspark_ds4_previous_boot_held %d' % int(bool(held)),
             '# HELP dgxspark_ds4_previous_boot_signature_info A crash signature found in the previous boot, per node.',
             '# TYPE dgxspark_ds4_previous_boot_signature_info gauge']
    lines.extend('dgxspark_ds4_previous_boot_signature_info{node="%s",signature="%s"} 1' % (f['node'], f['id'])
                 for f in findings)
    lines.extend(['# HELP dgxspark_ds4_previous_boot_checked_timestamp_seconds When the previous boot was last read.',
                  '# TYPE dgxspark_ds4_previous_boot_checked_timestamp_seconds gauge',
                  'dgxspark_ds4_previous_boot_checked_timestamp_seconds %d' % now])
    try:
        directory = os.path.dirname(path)
        if directory and not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        tmp = os.path.join(directory, '.%s.tmp' % os.path.basename(path))
        with open(tmp, 'w') as fh:
            fh.write('\n'.join(lines) + '\n')
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    except (IOError, OSError) as exc:
        say('cannot write %s: %s' % (path, exc))


def check(cfg: Mapping[str, Any], runner: Callable[..., tuple[int, str, str]] = pair.run, clock: Callable[[], float] = time.time) -> dict[str, Any] | None:
    """The prestart step (head). Returns the hold record (dict) when the pair is held, else None."""
    fcfg = cfg.get('forensics') or {}
    if not fcfg.get('enabled'):
        say('previous-boot forensics off')
        return None
    mode, recipe = parse_mode(fcfg.get('after_crash', 'hold'))
    now = clock()
    head = cfg.get('head_name') or 'head'
    nodes: list[tuple[str, str, Any]] = [(head, 'head', None)]
    nodes += [(p['name'], 'worker', p['ssh']) for p in cfg.get('peers') or [] if p.get('ssh')]
    window_s = float(fcfg.get('fault_window_s') or FAULT_WINDOW_S)
    logs: dict[str, tuple[str, list[str]]] = {}
    judged: list[dict[str, Any]] = []
    for name, role, ssh in nodes:
        text, notes = read_node(fcfg, runner, ssh)
        logs[name] = (text, notes)
        judged.append(judge_node(name, text, role, window_s))
        if notes and not text:
            say('previous boot of %s not readable (%s): nothing to judge there' % (name, '; '.join(notes)))
    phase = previous_phase(fcfg, clock)
    holds, why = verdict_of(judged, phase, head)
    ends = dict((j['node'], j['end']['end']) for j in judged)
    seen_ids = set((f['node'], f['id']) for f in holds)
    findings = holds + [f for j in judged for f in j['findings'] if (f['node'], f['id']) not in seen_ids]
    state = pair.load_record(fcfg['state_file'])
    seen = state.get('seen') if isinstance(state.get('seen'), dict) else {}
    acked = state.get('acked') if isinstance(state.get('acked'), list) else []
    ended = ', '.join('%s %s' % (n, ends[n]) for n in sorted(ends))
    if not findings:
        say('previous boot of %s: nothing seen (%s)' % (', '.join(sorted(logs)), ended))
        export(fcfg, [], False, now)
        return None
    incident = incident_id(findings)
    if incident in acked:
        say('previous boot: incident %s (%s) was acknowledged; not held again' % (incident, ', '.join(sorted({f['id'] for f in findings}))))
        export(fcfg, [], False, now)
        return None
    held = bool(holds) and mode != 'start'
    if incident not in seen:
        seen[incident] = write_record(fcfg, incident, logs, findings, fcfg.get('after_crash', 'hold'), now, why, ends)
        pair.save_record(fcfg['state_file'], {'seen': dict(list(seen.items())[-100:]), 'acked': acked})
    record = {'incident': incident, 'after_crash': fcfg.get('after_crash', 'hold'), 'evidence': seen[incident],
              'found_at': now, 'held': held, 'fallback_recipe': recipe, 'verdict': why, 'ends': ends,
              'holding': bool(holds),
              'findings': [{'node': f['node'], 'id': f['id'], 'cause': f['cause'], 'fix': f['fix'], 'source': f['source'],
                            'line': f['lines'][0]['text']} for f in findings]}
    pair.save_record(fcfg['hold_file'], record)
    export(fcfg, findings, held, now)
    first = findings[0]
    if not holds:
        say('previous boot (%s): %s seen, not a crash the pair would repeat: starting (incident %s: %s). Evidence in %s; '
            'acknowledge with playbooks/ack.yml'
            % (ended, ', '.join(sorted({f['id'] for f in findings})), incident, summary_line(findings), seen[incident]))
        return None
    if mode == 'start':
        say('previous boot crashed (incident %s: %s); starting anyway (vllm_service_after_crash: start). Fix: %s. Evidence '
            'in %s; acknowledge with playbooks/ack.yml' % (incident, summary_line(findings), first['fix'], seen[incident]))
        return None
    return record


def held_message(record: Mapping[str, Any]) -> str:
    first = record['findings'][0]
    then = ('then switch the pair to the safer recipe: playbooks/switch.yml -e ds4_profile=%s' % record['fallback_recipe']
            if record.get('fallback_recipe') else 'then the pair starts')
    return ('pair held: the previous boot crashed (incident %s: %s). Cause: %s. Fix: %s. Evidence in %s. Release: '
            'ansible-playbook playbooks/ack.yml (vllm_service_after_crash: %s), %s'
            % (record['incident'], summary_line([dict(f, lines=[{'text': f['line']}]) for f in record['findings']]),
               first['cause'], first['fix'], record['evidence'], record['after_crash'], then))


def hold(cfg: Mapping[str, Any], runner: Callable[..., tuple[int, str, str]] = pair.run) -> None:
    """Keep the pair down: stop each worker unit, then queue a stop of this head unit (systemd's Restart= does not
    retry a stopped unit; the prestart's own failure would be retried)."""
    for peer in cfg.get('peers') or []:
        if peer.get('ssh') and peer.get('unit'):
            runner(list(peer['ssh']) + ['systemctl', 'stop', '--no-block', peer['unit']], timeout=60)
    if cfg.get('unit_name'):
        runner(['systemctl', 'stop', '--no-block', cfg['unit_name']], timeout=60)


def ack(cfg: Mapping[str, Any], clock: Callable[[], float] = time.time) -> str:
    """Acknowledge the held (or started-anyway) incident; returns the line to print."""
    fcfg = cfg.get('forensics') or {}
    record = pair.load_record(fcfg.get('hold_file') or '/nonexistent')
    if not record.get('incident'):
        return 'nothing to acknowledge: no crash incident is held'
    state = pair.load_record(fcfg['state_file'])
    acked = state.get('acked') if isinstance(state.get('acked'), list) else []
    if record['incident'] not in acked:
        acked.append(record['incident'])
    state['acked'] = acked[-100:]
    pair.save_record(fcfg['state_file'], state)
    os.unlink(fcfg['hold_file'])
    export(fcfg, [], False, clock())
    return 'acknowledged incident %s (%s); the pair may start' % (
        record['incident'], ', '.join(sorted({f['id'] for f in record.get('findings') or []})))


def main(argv: Sequence[str]) -> int:
    if len(argv) != 3 or argv[1] != 'ack':
        print('usage: %s ack CONFIG.json' % argv[0], file=sys.stderr)
        return 2
    cfg, error = pair.read_config(argv[2], TAG)
    if error:
        print(error, file=sys.stderr)
        return 1
    say(ack(cfg))
    return 0
