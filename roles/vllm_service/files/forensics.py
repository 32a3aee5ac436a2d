# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark-ds4 forensics after a hard reset: the previous boot's kernel log of both nodes, before the pair starts.

Installed by dgxspark.ds4.vllm_service next to prestart.py, with failure_catalogue.py (the collection's
plugins/module_utils/failure_catalogue.py: its 'kernel' entries are the signatures, one matcher for the
controller and the node). Python 3 standard library only.

After unified-memory exhaustion a GB10 freezes or hard-resets; the evidence is in the previous boot's kernel
log (NVRM, NV_ERR_NO_MEMORY, Xid, GSP timeouts, mlx5/AER, the OOM killer, an unclean shutdown) and nobody
collects it (field notes 2026-11, what users report, item 3). The head's prestart (step "previous boot")
reads it on the head and, over the peer key, on each worker, through ONE reader whose source is configurable:
  * source 'journal' (default): journalctl -b -1 for the kernel and journald's own lines
    (_TRANSPORT=kernel + _TRANSPORT=driver, i.e. journalctl -k plus "Journal started/stopped", which tell a
    clean shutdown from an unclean one), then every file of the pstore directory (/sys/fs/pstore) if any;
  * source 'file': a file replayed through the same reader (`cat`, locally or over ssh): the test nodes share
    the CI machine's kernel, so Molecule and the unit tests replay a fixture.
A signature found on any node is one incident (its id: a hash of the nodes' matching lines, so the same old
evidence is the same incident at every later boot). Once per incident: one record (crash-<UTC>-<id>/ under
evidence_dir: each node's log, summary.json with the findings, causes, fixes and sources). Then, per
after_crash (vllm_service_after_crash):
  * hold: the pair is not started: the worker unit is stopped, the head unit is stopped (a stop job, so
    systemd's Restart= does not retry it) and the prestart fails naming the signature, the fix and the ack;
  * fallback:<recipe>: held the same way; the line names the safer recipe to switch to (playbooks/switch.yml);
  * start: the pair starts; the incident stays in status.yml and the alert until acknowledged.
`forensics.py ack CONFIG.json` (playbooks/ack.yml) acknowledges the incident: its hold is released, and a later
boot that reads the same old evidence (pstore kept, journal of a boot before) does not hold again.
State: hold_file (the incident held, read by status.yml) and state_file ({'seen': {id: record}, 'acked': [ids]});
metrics: textfile (node-exporter textfile collector).
"""

from __future__ import absolute_import, division, print_function

import hashlib
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# On a node failure_catalogue.py is installed next to this file; in the collection's source tree it is in
# plugins/module_utils (the unit tests load this file from roles/vllm_service/files).
sys.path.insert(0, HERE)
import pairguard  # noqa: E402  pylint: disable=wrong-import-position
import failure_catalogue  # noqa: E402  pylint: disable=wrong-import-position,import-error

TAG = 'dgxspark-ds4 forensics'
MODES = ('hold', 'start', 'fallback')
JOURNAL_ARGV = ['journalctl', '-b', '-1', '--no-pager', '-o', 'short-iso', '_TRANSPORT=kernel', '_TRANSPORT=driver']


class ForensicsError(Exception):
    pass


def say(msg):
    print('%s: %s' % (TAG, msg))
    sys.stdout.flush()


def parse_mode(value):
    """'hold' | 'start' | 'fallback:<recipe>' -> (mode, recipe); raises ForensicsError naming the variable."""
    mode, _sep, recipe = str(value).partition(':')
    if mode not in MODES or (mode == 'fallback') != bool(recipe) or (recipe and not recipe.replace('-', '').replace('_', '').isalnum()):
        raise ForensicsError('vllm_service_after_crash = %r: must be hold, start or fallback:<recipe> (a recipe name of '
                             'roles/config/files/recipes). Fix: set it to hold' % (value,))
    return mode, recipe or None


def reader_commands(fcfg, ssh=None):
    """The reader's commands for one node: [(label, argv)], the same for the head (ssh None) and a worker."""
    if fcfg.get('source') == 'file':
        return [('file %s' % fcfg['file'], ['cat', fcfg['file']])]
    commands = [('journalctl -b -1 (kernel + journald)', list(JOURNAL_ARGV))]
    pstore = fcfg.get('pstore_dir')
    if pstore:
        script = ('for f in %s/*; do [ -f "$f" ] && { echo "== pstore $f"; cat "$f"; }; done; true' % pstore)
        commands.append(('pstore %s' % pstore, [script] if ssh else ['sh', '-c', script]))
    return commands


def read_node(fcfg, runner, ssh=None):
    """The previous boot's kernel log of one node -> (text, [notes]) ; a source that cannot be read is a note."""
    texts, notes = [], []
    for label, argv in reader_commands(fcfg, ssh):
        rc, out, err = runner(list(ssh or []) + argv, timeout=int(fcfg.get('timeout_s', 60)))
        if rc != 0:
            notes.append('%s: rc %d %s' % (label, rc, (err or out).strip()[:200]))
        if out:
            texts.append(out if out.endswith('\n') else out + '\n')
    return ''.join(texts), notes


def findings_of(node, text, role):
    """Catalogue findings of a kernel log ('info' entries left out)."""
    return [f for f in failure_catalogue.match(text, node=node, source='kernel', role=role) if f['severity'] != 'info']


def incident_id(findings):
    digest = hashlib.sha256()
    for f in sorted(findings, key=lambda f: (f['node'], f['id'])):
        digest.update(('%s|%s|%s\n' % (f['node'], f['id'], '|'.join(ln['text'] for ln in f['lines']))).encode('utf-8'))
    return digest.hexdigest()[:12]


def summary_line(findings):
    return '; '.join('%s: %s (%s)' % (f['node'], f['id'], f['lines'][0]['text'].strip()[:120]) for f in findings)


def write_record(fcfg, incident, logs, findings, mode, now):
    """crash-<UTC>-<id>/ under evidence_dir: kernel-<node>.txt per node and summary.json; returns its path."""
    path = os.path.join(fcfg.get('evidence_dir') or '/var/lib/dgxspark-ds4/evidence',
                        'crash-%s-%s' % (time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now)), incident))
    if not os.path.isdir(path):
        os.makedirs(path, 0o755)
    for node, (text, notes) in logs.items():
        header = ''.join('# %s\n' % n for n in notes)
        with open(os.path.join(path, 'kernel-%s.txt' % node), 'w') as fh:
            fh.write(header + (text or '# nothing read\n'))
    summary = {'incident': incident, 'detected_at': now, 'after_crash': mode, 'nodes': sorted(logs),
               'findings': [dict((k, f[k]) for k in ('node', 'id', 'cause', 'fix', 'source', 'severity', 'lines'))
                            for f in findings]}
    with open(os.path.join(path, 'summary.json'), 'w') as fh:
        json.dump(summary, fh, indent=1, sort_keys=True)
        fh.write('\n')
    return path


def export(fcfg, findings, held, now):
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


def check(cfg, runner=pairguard.run, clock=time.time):
    """The prestart step (head). Returns the hold record (dict) when the pair is held, else None."""
    fcfg = cfg.get('forensics') or {}
    if not fcfg.get('enabled'):
        say('previous-boot forensics off')
        return None
    mode, recipe = parse_mode(fcfg.get('after_crash', 'hold'))
    now = clock()
    nodes = [(cfg.get('head_name') or 'head', 'head', None)]
    nodes += [(p['name'], 'worker', p['ssh']) for p in cfg.get('peers') or [] if p.get('ssh')]
    logs, findings = {}, []
    for name, role, ssh in nodes:
        text, notes = read_node(fcfg, runner, ssh)
        logs[name] = (text, notes)
        findings.extend(findings_of(name, text, role))
        if notes and not text:
            say('previous boot of %s not readable (%s): nothing to judge there' % (name, '; '.join(notes)))
    state = pairguard.load_record(fcfg['state_file'])
    seen = state.get('seen') if isinstance(state.get('seen'), dict) else {}
    acked = state.get('acked') if isinstance(state.get('acked'), list) else []
    if not findings:
        say('previous boot of %s: no crash signature' % ', '.join(sorted(logs)))
        export(fcfg, [], False, now)
        return None
    incident = incident_id(findings)
    if incident in acked:
        say('previous boot: incident %s (%s) was acknowledged; not held again' % (incident, ', '.join(sorted({f['id'] for f in findings}))))
        export(fcfg, [], False, now)
        return None
    if incident not in seen:
        seen[incident] = write_record(fcfg, incident, logs, findings, fcfg.get('after_crash', 'hold'), now)
        pairguard.save_record(fcfg['state_file'], {'seen': dict(list(seen.items())[-100:]), 'acked': acked})
    record = {'incident': incident, 'after_crash': fcfg.get('after_crash', 'hold'), 'evidence': seen[incident],
              'found_at': now, 'held': mode != 'start', 'fallback_recipe': recipe,
              'findings': [{'node': f['node'], 'id': f['id'], 'cause': f['cause'], 'fix': f['fix'], 'source': f['source'],
                            'line': f['lines'][0]['text']} for f in findings]}
    pairguard.save_record(fcfg['hold_file'], record)
    export(fcfg, findings, mode != 'start', now)
    first = findings[0]
    if mode == 'start':
        say('previous boot crashed (incident %s: %s); starting anyway (vllm_service_after_crash: start). Fix: %s. Evidence '
            'in %s; acknowledge with playbooks/ack.yml' % (incident, summary_line(findings), first['fix'], seen[incident]))
        return None
    return record


def held_message(record):
    first = record['findings'][0]
    then = ('then switch the pair to the safer recipe: playbooks/switch.yml -e ds4_profile=%s' % record['fallback_recipe']
            if record.get('fallback_recipe') else 'then the pair starts')
    return ('pair held: the previous boot crashed (incident %s: %s). Cause: %s. Fix: %s. Evidence in %s. Release: '
            'ansible-playbook playbooks/ack.yml (vllm_service_after_crash: %s), %s'
            % (record['incident'], summary_line([dict(f, lines=[{'text': f['line']}]) for f in record['findings']]),
               first['cause'], first['fix'], record['evidence'], record['after_crash'], then))


def hold(cfg, runner=pairguard.run):
    """Keep the pair down: stop each worker unit, then queue a stop of this head unit (systemd's Restart= does not
    retry a stopped unit; the prestart's own failure would be retried)."""
    for peer in cfg.get('peers') or []:
        if peer.get('ssh') and peer.get('unit'):
            runner(list(peer['ssh']) + ['systemctl', 'stop', '--no-block', peer['unit']], timeout=60)
    if cfg.get('unit_name'):
        runner(['systemctl', 'stop', '--no-block', cfg['unit_name']], timeout=60)


def ack(cfg, clock=time.time):
    """Acknowledge the held (or started-anyway) incident; returns the line to print."""
    fcfg = cfg.get('forensics') or {}
    record = pairguard.load_record(fcfg.get('hold_file') or '/nonexistent')
    if not record.get('incident'):
        return 'nothing to acknowledge: no crash incident is held'
    state = pairguard.load_record(fcfg['state_file'])
    acked = state.get('acked') if isinstance(state.get('acked'), list) else []
    if record['incident'] not in acked:
        acked.append(record['incident'])
    state['acked'] = acked[-100:]
    pairguard.save_record(fcfg['state_file'], state)
    os.unlink(fcfg['hold_file'])
    export(fcfg, [], False, clock())
    return 'acknowledged incident %s (%s); the pair may start' % (
        record['incident'], ', '.join(sorted({f['id'] for f in record.get('findings') or []})))


def main(argv):
    if len(argv) != 3 or argv[1] != 'ack':
        print('usage: %s ack CONFIG.json' % argv[0], file=sys.stderr)
        return 2
    try:
        with open(argv[2]) as fh:
            cfg = json.load(fh)
    except (IOError, OSError, ValueError) as exc:
        print('%s: cannot read config %s: %s' % (TAG, argv[2], exc), file=sys.stderr)
        return 1
    say(ack(cfg))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
