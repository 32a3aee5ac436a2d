# -*- coding: utf-8 -*-
# Copyright: dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The converge shortcut: a role's inputs digest and the recorded state of what it manages.

A role that converged successfully records, on each node, the digest of its inputs (every
variable it reads, plus the collection's own code) and what it observed afterwards of the things
it manages (file checksums and modes, unit states, the output of read-only commands such as
``nft list table``, a directory tree's names, sizes and mtimes). The next run probes the same
things again: when the inputs digest and every observation equal the record on every node of the
pair, nothing the role would do can change anything, and its tasks are skipped. Any difference
(an input, the code, a file edited by hand, a unit disabled, a table flushed) is named in the
result and the whole role runs, which repairs it.

Drift is repaired, never recorded (`unrepaired`): when the role ran with the inputs of its last
record and a check had drifted from that record, the record step refuses to take the state the
probe found, left as it was, for the new baseline (a role that "ran and changed nothing" would
otherwise bless the drift: every later run would say "as recorded"). The role fails instead,
naming the check, and the last good record stays (moved aside), so the next run refuses again
until the state is repaired. Checks a role only observes and does not render (sysfs, a file it
shares with the user) are listed under ``observed`` and exempt.

Pure Python (no Ansible imports): the controller side (digests) and the node side (observe,
compare, record) are tested without Ansible.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import stat
import tempfile
from collections.abc import Callable, Collection, Container, Iterable, Mapping
from typing import Any

# The direct probe (plugins/action/converge_state.py) sends node_probe's source with this file's and registers it
# under this name before it runs this file, so this import is the same on the node as in the module.
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.node_probe import parse_units_show, run_command

RECORD_VERSION = 1
CHECK_KINDS = ('files', 'units', 'commands', 'trees')
# Names and files that never feed a role's behaviour (bytecode, editor droppings).
_SKIP_DIRS = ('__pycache__', '.pytest_cache')
_SKIP_SUFFIXES = ('.pyc', '.pyo', '~', '.swp')
# observe's `run(argv)`: (rc, stdout, stderr).
Runner = Callable[[list[str]], tuple[int, str, str]]
# A check that differs: (kind, name, recorded, now).
Drift = tuple[str, str, str, str]


def value_hash(value: Any) -> str:
    """Stable short hash of any JSON-able value (secrets are only ever stored hashed)."""
    blob = json.dumps(value, sort_keys=True, separators=(',', ':'), default=str)
    return hashlib.sha256(blob.encode('utf-8')).hexdigest()[:16]


def tree_chunks(root_path: str) -> list[bytes]:
    """What content_hash feeds its digest for one path: every file under it (name and the SHA-256 of its bytes) in
    name order, or that it is absent."""
    if not os.path.exists(root_path):
        return [('absent:%s\n' % root_path).encode('utf-8')]
    entries: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root_path):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in filenames:
            if name.endswith(_SKIP_SUFFIXES):
                continue
            entries.append(os.path.join(dirpath, name))
    chunks = []
    for path in sorted(entries):
        chunks.append(os.path.relpath(path, root_path).encode('utf-8') + b'\0')
        with open(path, 'rb') as handle:
            chunks.append(hashlib.sha256(handle.read()).digest())
    return chunks


def content_hash(paths: Iterable[str], chunks: Callable[[str], list[bytes]] = tree_chunks) -> str:
    """Hash of every file under `paths` (names and bytes), independent of walk order. chunks: tree_chunks, or a caller's
    memo of it (the controller hashes the same plugins/ for every role of a plan)."""
    digest = hashlib.sha256()
    for root_path in sorted(paths):
        for chunk in chunks(root_path):
            digest.update(chunk)
    return digest.hexdigest()[:16]


# Inputs hashed on the node under its own salt, never on the controller: their hashes show in -v output and a plain
# sha256 of a short secret (a VRRP password) could be guessed back from it. A secret by its name's last word (an API
# key, a token, a password): not a count or a kind that holds such a word inside (vllm_service_canary_decode_tokens,
# peer_access_host_key_type), whose value Ansible would otherwise mask in every result of the module (below).
SECRET_NAME_RE = re.compile(r'(^|_)(api_keys?|key|token|secrets?|password|pass|passphrase|credentials?)$', re.I)
SALT_NAME = '.salt'
# How a secret input travels to the node: its canonical JSON text, base64, behind this prefix. Ansible masks the
# values of a no_log parameter wherever they occur in the module's results, and the probe's digest and per-input
# hashes come back through the controller into the record: a bare value (a numeric password, '"a"') found inside a
# hex hash would be masked there and recorded so, and every later probe would differ from that record (the role ran
# on every deploy). Only this form is masked, and it occurs nowhere else.
SECRET_WIRE_PREFIX = 'ds4-secret:'


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME_RE.search(name))


def split_secrets(inputs: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, str]]:
    """(plain inputs, {name: wire form of its canonical JSON text} of the inputs whose name says secret)."""
    plain: dict[str, Any] = {}
    secret: dict[str, str] = {}
    for name, value in (inputs or {}).items():
        if is_secret_name(name):
            text = json.dumps(value, sort_keys=True, separators=(',', ':'), default=str)
            secret[name] = SECRET_WIRE_PREFIX + base64.b64encode(text.encode('utf-8')).decode('ascii')
        else:
            plain[name] = value
    return plain, secret


def secret_text(wire: str) -> str:
    """The canonical JSON text of a secret input from its wire form (split_secrets)."""
    if not wire.startswith(SECRET_WIRE_PREFIX):
        raise ValueError('a secret input not in its wire form (%s...)' % SECRET_WIRE_PREFIX)
    return base64.b64decode(wire[len(SECRET_WIRE_PREFIX):].encode('ascii')).decode('utf-8')


def node_salt(state_dir: str, create: bool = True) -> bytes:
    """This node's random salt (<state_dir>/.salt, 32 bytes, root only), made on first use; in check mode (create
    False) a missing salt is a fresh random one (nothing was recorded under it: the inputs differ, as they would)."""
    path = os.path.join(state_dir, SALT_NAME)
    try:
        with open(path, 'rb') as handle:
            salt = handle.read()
        if len(salt) == 32:
            return salt
    except OSError:
        pass
    salt = os.urandom(32)
    if create:
        if not os.path.isdir(state_dir):
            os.makedirs(state_dir, 0o700)
        fd, tmp = tempfile.mkstemp(dir=state_dir, prefix='.salt.')
        with os.fdopen(fd, 'wb') as handle:
            handle.write(salt)
        os.chmod(tmp, 0o600)
        os.rename(tmp, path)
    return salt


def fold_secrets(digest: str, per_input: dict[str, str], secrets: Mapping[str, str],
                 salt: bytes) -> tuple[str, dict[str, str]]:
    """(digest, per-input hashes) with each secret input hashed under the node's salt (HMAC-SHA256) and folded in."""
    if not secrets:
        return digest, per_input
    hashed = dict((name, hmac.new(salt, (name + '\0' + secret_text(wire)).encode('utf-8'), hashlib.sha256).hexdigest()[:16])
                  for name, wire in secrets.items())
    merged = dict(per_input)
    merged.update(hashed)
    return value_hash({'inputs': digest, 'secrets': hashed}), merged


def inputs_digest(inputs: Mapping[str, Any] | None, code_hash: str) -> tuple[str, dict[str, str]]:
    """(digest, per-input hashes) of a role's inputs mapping and its code hash."""
    per_input = dict((name, value_hash(value)) for name, value in (inputs or {}).items())
    per_input['(collection code)'] = code_hash
    return value_hash(per_input), per_input


def check_name(item: str | list[str]) -> str:
    """The name a check is reported and recorded under (a command: its argv joined by blanks)."""
    return ' '.join(item) if isinstance(item, list) else item


def normalise_checks(checks: Mapping[str, Any] | None) -> tuple[Any, str | None]:
    """Validate the checks mapping; returns (checks, error or None).

    ``observed`` (optional): checks of the other kinds (paths, unit names, argv lists) the role observes but does
    not render, so that it cannot restore them (sysfs, a file shared with the user): exempt from `unrepaired`."""
    checks = dict(checks or {})
    unknown = sorted(set(checks) - set(CHECK_KINDS) - set(['observed']))
    if unknown:
        return None, 'unknown check kind(s) %s; known: %s, observed' % (', '.join(unknown), ', '.join(CHECK_KINDS))
    observed = checks.get('observed') or []
    if not isinstance(observed, list) or not all(isinstance(o, str) and o or isinstance(o, list) and o for o in observed):
        return None, 'checks.observed must be a list of paths, unit names or argv lists, got %r' % (observed,)
    out: dict[str, list[Any]] = {'observed': sorted(set(check_name(o) for o in observed))}
    for kind in CHECK_KINDS:
        items = checks.get(kind) or []
        if not isinstance(items, list):
            return None, 'checks.%s must be a list, got %r' % (kind, items)
        if kind == 'commands':
            for argv in items:
                if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
                    return None, 'checks.commands entries must be non-empty argv lists of strings, got %r' % (argv,)
            out[kind] = [list(a) for a in items]
        else:
            for item in items:
                if not isinstance(item, str) or not item:
                    return None, 'checks.%s entries must be non-empty strings, got %r' % (kind, item)
            out[kind] = sorted(set(items))
    return out, None


def file_observation(data: bytes, mode: int, uid: int, gid: int) -> str:
    """How observe_file names a regular file with this content, mode and owner (file_set's action compares a file it
    would write against what a probe saw with it)."""
    return 'sha1:%s:%o:%d:%d' % (hashlib.sha1(data).hexdigest(), mode, uid, gid)


def observe_file(path: str) -> str:
    """A file by its SHA-1, mode and owner; a directory or a symlink by what it is; absent or unreadable."""
    path = os.path.expanduser(path)
    try:
        st = os.lstat(path)
    except OSError:
        return 'absent'
    meta = '%o:%d:%d' % (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
    if stat.S_ISLNK(st.st_mode):
        return 'link:%s:%s' % (os.readlink(path), meta)
    if stat.S_ISDIR(st.st_mode):
        return 'dir:%s' % meta
    try:
        with open(path, 'rb') as handle:
            return file_observation(handle.read(), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
    except OSError as exc:
        return 'unreadable:%s' % exc.strerror


def _observe_tree(path: str) -> str:
    """Names, sizes and mtimes under `path` (symlinks not followed; no file is read)."""
    if not os.path.isdir(path):
        return 'absent'
    digest = hashlib.sha256()
    count = 0
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            digest.update(('%s\0%d\0%d\n' % (os.path.relpath(full, path), st.st_size, st.st_mtime_ns)).encode('utf-8'))
            count += 1
    return '%d files:%s' % (count, digest.hexdigest()[:16])


def observe(checks: Mapping[str, Any], run: Runner) -> dict[str, dict[str, str]]:
    """Observe every check. `run(argv)` returns (rc, stdout, stderr) and never raises."""
    seen: dict[str, dict[str, str]] = {'files': {}, 'units': {}, 'commands': {}, 'trees': {}}
    for path in checks.get('files', []):
        seen['files'][path] = observe_file(path)
    for path in checks.get('trees', []):
        seen['trees'][path] = _observe_tree(path)
    units = checks.get('units', [])
    if units:
        argv = ['systemctl', 'show', '--property=Id,UnitFileState,ActiveState'] + list(units)
        rc, out, err = run(argv)
        parsed = ['%s/%s' % (props.get('UnitFileState', '') or 'none', props.get('ActiveState', '') or 'none')
                  for props in (parse_units_show(out) if rc == 0 else [])]
        for index, unit in enumerate(units):
            seen['units'][unit] = parsed[index] if index < len(parsed) else 'unknown (systemctl rc=%s: %s)' % (rc, err.strip()[:200])
    for argv in checks.get('commands', []):
        rc, out, err = run(argv)
        seen['commands'][' '.join(argv)] = 'rc=%d:%s' % (rc, hashlib.sha1((out + '\0' + err).encode('utf-8')).hexdigest())
    return seen


def probe(params: Mapping[str, Any], run: Runner = run_command, check_mode: bool = False) -> dict[str, Any]:
    """state=probe (read-only) on this node: the result the module returns, from its parameters (role, digest, inputs,
    checks, secret_inputs, state_dir). A dict with failed and msg when the checks are malformed. The module and the
    action plugin's direct run (no module upload: plugins/action/converge_state.py) both call it."""
    checks, error = normalise_checks(params.get('checks'))
    if error:
        return {'failed': True, 'msg': 'converge_state %s: %s' % (params['role'], error)}
    digest, per_input = params['digest'], params.get('inputs') or {}
    if params.get('secret_inputs'):
        # the secret inputs, hashed under this node's salt (their plain hashes would show in -v output)
        digest, per_input = fold_secrets(digest, per_input, params['secret_inputs'],
                                         node_salt(params['state_dir'], create=not check_mode))
    path = record_path(params['state_dir'], params['role'])
    seen = observe(checks, run)
    previous = load_record(path)
    reasons = compare(previous, params['role'], digest, per_input, seen)
    return dict(changed=False, current=not reasons, reasons=reasons, record=path, digest=digest, inputs=per_input,
                published=(previous or {}).get('published', {}) if not reasons else {}, seen=seen,
                differs=differences(previous, digest, per_input, seen))


def begin_state(params: Mapping[str, Any], run: Runner = run_command, check_mode: bool = False) -> dict[str, Any]:
    """state=begin on this node: the record moved aside before the role changes anything (not in check mode). The
    module and the action plugin's direct run both call it; `run` is not used (one signature for every entry)."""
    del run
    dummy, error = normalise_checks(params.get('checks'))
    if error:
        return {'failed': True, 'msg': 'converge_state %s: %s' % (params['role'], error)}
    path = record_path(params['state_dir'], params['role'])
    moved = False if check_mode else begin(path)
    return dict(changed=False, current=False, reasons=[], record=path, digest=params['digest'],
                inputs=params.get('inputs') or {}, published={}, moved_aside=moved)


def record_state(params: Mapping[str, Any], run: Runner = run_command, check_mode: bool = False) -> dict[str, Any]:
    """state=record on this node: what the role manages observed again and written as the new record with the digest
    the probe computed, unless something that drifted before the role ran is still exactly so (params['found'], the
    probe's seen: then a failure that says so, and no record). Not written in check mode (nothing was repaired then, by
    design). The result carries the record's diff (before, after) for a caller in diff mode. The module and the action
    plugin's direct run both call it."""
    checks, error = normalise_checks(params.get('checks'))
    if error:
        return {'failed': True, 'msg': 'converge_state %s: %s' % (params['role'], error)}
    path = record_path(params['state_dir'], params['role'])
    seen = observe(checks, run)
    previous = load_record(path)
    per_input, published = params.get('inputs') or {}, params.get('published') or {}
    record = build_record(params['role'], params['digest'], per_input, seen, published)
    previous = previous or load_record(running_path(path))
    problems = [] if check_mode else unrepaired(previous, params['digest'], params.get('found') or {}, seen,
                                                checks['observed'])
    if problems:
        return dict(failed=True, msg=describe_unrepaired(params['role'], problems, path), record=path, seen=seen,
                    unrepaired=[dict(kind=k, name=n, recorded=w, found=f) for k, n, w, f in problems])
    if not check_mode:
        finish(path, record)
    return dict(changed=False, updated=previous != record, current=True, reasons=[], record=path, published=published,
                digest=params['digest'], inputs=per_input, seen=seen,
                diff=dict(before=previous or {}, after=record, before_header=path, after_header=path))


def plan(params: Mapping[str, Any], run: Runner = run_command, check_mode: bool = False) -> dict[str, Any]:
    """Several roles in one node call (read-only; the deploy's converge plan, plugins/action/converge_plan.py).
    params: state_dir, phase and roles. phase ``published``: roles is a list of role names; returns, per role, the
    facts its record published (None without a usable record): the values later roles read as inputs, and with
    ``files`` (absolute paths) what ``files`` returns for them under ``files``. phase
    ``probe``: roles is a list of probe parameters (role, digest, inputs, checks, secret_inputs); returns each role's
    probe result, as ``probe`` gives it, under ``roles``. Phase ``published`` with ``expect`` (the published facts the
    caller templated ``probe``, a list of probe parameters, with): when the records publish exactly those, the probes
    run in the same call and their results come under ``roles`` (one call where nothing changed); otherwise only the
    published facts come back, for the caller to template its probes with them."""
    state_dir = params['state_dir']
    if params.get('phase') == 'published':
        published: dict[str, Any] = {}
        for role in params['roles']:
            record = load_record(record_path(state_dir, role))
            usable = isinstance(record, dict) and record.get('version') == RECORD_VERSION
            published[role] = (record.get('published') or {}) if usable else None
        out = {'changed': False, 'published': published}
        if params.get('files') is not None:
            # the deploy's look at the fronts' TLS material in the same call (dgxspark.ds4.converge_plan look)
            looked = files({'paths': params['files']}, run)
            if looked.get('failed'):
                return looked
            out['files'] = looked['files']
        if params.get('expect') is not None and published == params['expect']:
            out['roles'] = dict((item['role'], probe(dict(item, state_dir=state_dir), run, check_mode))
                                for item in params['probe'])
        return out
    results: dict[str, Any] = {}
    for item in params['roles']:
        results[item['role']] = probe(dict(item, state_dir=state_dir), run, check_mode)
    return {'changed': False, 'roles': results}


def files(params: Mapping[str, Any], run: Runner = run_command, check_mode: bool = False) -> dict[str, Any]:
    """dgxspark.ds4.file_state on this node: each of params['paths'] (absolute) as observe_file sees it, the result
    the module returns. The module and its action plugin's direct run (no module upload: plugins/action/file_state.py)
    both call it; `run` and `check_mode` are unused (the entry signature of a direct run; it reads only)."""
    del run, check_mode
    relative = [path for path in params['paths'] if not path.startswith('/')]
    if relative:
        return {'failed': True, 'msg': 'file_state: paths must be absolute, got %s' % ', '.join(relative)}
    return {'changed': False, 'files': dict((path, observe_file(path)) for path in params['paths'])}


def _walk(record: Mapping[str, Any] | None, digest: str, per_input: Mapping[str, str],
          seen: Mapping[str, Any]) -> tuple[list[str], list[Drift]] | None:
    """(the input names whose hash changed, [(kind, name, recorded, now)] of every check that differs) against a usable
    record; None when there is none (absent, or of another version)."""
    if not record or record.get('version') != RECORD_VERSION:
        return None
    inputs: list[str] = []
    if record.get('digest') != digest:
        before = record.get('inputs') or {}
        inputs = sorted(name for name in set(before) | set(per_input) if before.get(name) != per_input.get(name))
    recorded_state = record.get('state') or {}
    checks: list[Drift] = []
    for kind in CHECK_KINDS:
        was = recorded_state.get(kind) or {}
        now = seen.get(kind) or {}
        checks.extend((kind, name, was.get(name, 'not checked'), now.get(name, 'not checked'))
                      for name in sorted(set(was) | set(now)) if was.get(name) != now.get(name))
    return inputs, checks


def compare(record: Mapping[str, Any] | None, role: str, digest: str, per_input: Mapping[str, str],
            seen: Mapping[str, Any]) -> list[str]:
    """Reasons why the recorded state does not stand for this run (empty list: current)."""
    if not record:
        return ['%s has no converge record on this node (first run, or the last run of the role failed)' % role]
    if record.get('version') != RECORD_VERSION:
        return ['converge record version %r, expected %d' % (record.get('version'), RECORD_VERSION)]
    walked = _walk(record, digest, per_input, seen)
    if walked is None:  # pragma: no cover - a record of this version (above) is always walked
        raise AssertionError('converge record of version %d not walked' % RECORD_VERSION)
    inputs, checks = walked
    reasons = ['inputs changed: %s' % (', '.join(inputs) or 'digest differs')] if record.get('digest') != digest else []
    reasons.extend('%s %s: recorded %s, now %s' % (kind[:-1], name, was, now) for kind, name, was, now in checks)
    return reasons


def differences(record: Mapping[str, Any] | None, digest: str, per_input: Mapping[str, str],
                seen: Mapping[str, Any]) -> dict[str, Any]:
    """What differs between the record and now, by name: {'recorded': a usable record exists, 'inputs': the input
    names whose hash changed ('(collection code)' among them when the collection's code did), 'checks': the check
    names (paths, units, argv lines) whose observation changed or that the record does not hold}. A role reads it to
    skip work whose own inputs are as recorded (vllm_service: its node scripts on a launch-flag change)."""
    walked = _walk(record, digest, per_input, seen)
    if walked is None:
        return {'recorded': False, 'inputs': [], 'checks': []}
    inputs, checks = walked
    return {'recorded': True, 'inputs': inputs, 'checks': sorted(set(name for _kind, name, _was, _now in checks))}


def unrepaired(reference: Mapping[str, Any] | None, digest: str, found: Mapping[str, Any] | None,
               after: Mapping[str, Any], observed: Container[str] = ()) -> list[Drift]:
    """Checks the role ran for and left as it found them, when that must not happen: [(kind, name, recorded, found)].

    ``reference``: the record of the role's last successful run (moved aside while the role runs); ``digest``: the
    inputs digest of this run; ``found``: what the probe observed before the role ran; ``after``: what is observed
    now that it ran. Only with the same inputs (and code) as the reference, where the role renders what it rendered
    then: a check that differed from the reference and is still exactly as found was not repaired, and recording it
    would make it the baseline. ``observed`` names the checks the role does not render (exempt)."""
    if not reference or reference.get('version') != RECORD_VERSION or reference.get('digest') != digest or not found:
        return []
    out: list[Drift] = []
    recorded_state = reference.get('state') or {}
    for kind in CHECK_KINDS:
        was = recorded_state.get(kind) or {}
        before = found.get(kind) or {}
        now = after.get(kind) or {}
        for name in sorted(before):
            if name in observed or name not in was or name not in now:
                continue
            if before[name] != was[name] and now[name] == before[name]:
                out.append((kind, name, was[name], before[name]))
    return out


def describe_unrepaired(role: str, problems: Iterable[Drift], path: str) -> str:
    """The failure message for `unrepaired` problems, with the way out."""
    items = '; '.join('%s %s: recorded %s, found and left %s' % (kind[:-1], name, was, found)
                      for kind, name, was, found in problems)
    return ('%s ran because what it manages differed from the record of its last run (same inputs), and left it as it '
            'found it: %s. Recording that would make the drift the new baseline, so nothing is recorded and every run '
            'refuses again until it is repaired. Fix: restore it by hand (or find what keeps changing it: another tool, '
            'a service reloading its own copy), then rerun; to accept the present state as intended instead, remove %s '
            'and rerun.' % (role, items, running_path(path)))


def record_path(state_dir: str, role: str) -> str:
    return os.path.join(state_dir, '%s.json' % role)


def running_path(path: str) -> str:
    """Where the record waits while the role runs: a run that fails leaves no record behind."""
    return path + '.running'


def begin(path: str) -> bool:
    """Move the record aside before the role changes anything. Returns True if there was one."""
    if os.path.exists(path):
        os.rename(path, running_path(path))
        return True
    return False


def finish(path: str, record: Mapping[str, Any]) -> bool:
    """Write the record and drop the one moved aside. Returns True if the record differs from the last one."""
    previous = load_record(path) or load_record(running_path(path))
    write_record(path, record)
    if os.path.exists(running_path(path)):
        os.unlink(running_path(path))
    return previous != record


def load_record(path: str) -> Any:
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def build_record(role: str, digest: str, per_input: Mapping[str, str], seen: Mapping[str, Any],
                 published: Mapping[str, Any] | None) -> dict[str, Any]:
    return {'version': RECORD_VERSION, 'role': role, 'digest': digest, 'inputs': per_input,
            'state': seen, 'published': published or {}}


def write_record(path: str, record: Mapping[str, Any]) -> bool:
    """Atomic write (0600: published values may name hosts and keys' paths). Returns True if changed."""
    text = json.dumps(record, sort_keys=True, indent=1) + '\n'
    try:
        with open(path) as handle:
            if handle.read() == text:
                return False
    except OSError:
        pass
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o700)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.%s.' % os.path.basename(path))
    try:
        with os.fdopen(fd, 'w') as handle:
            handle.write(text)
        os.chmod(tmp, 0o600)
        os.rename(tmp, path)
    except Exception:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


def needed_facts(needed: Mapping[str, bool]) -> dict[str, Any]:
    """The facts of the deploy's decisions so far: __converge_needed (role -> whether it runs) and __converge_ran (any
    role runs on this node's pair: validate.yml's smoke checks follow a deploy that ran one, site.yml and
    tasks/rolling.yml), set together wherever a decision is (decide, converge_plan), so that no task derives the one from
    the other."""
    return {'__converge_needed': dict(needed), '__converge_ran': any(needed.values())}


def decide(role: str, probe: Mapping[str, Any], pair_current: Iterable[bool], full: bool = False,
           roles: Collection[str] | None = (),
           needed: Mapping[str, bool] | None = None) -> tuple[dict[str, bool], dict[str, Any], str]:
    """Whether the role runs in this deploy, from this node's probe and the probes of every node of its pair.

    role: the calling role; probe: this node's state=probe result; pair_current: the probes' ``current`` of every
    node of the pair in the play; full: ds4_converge_full; roles: ds4_converge_roles; needed: __converge_needed so
    far (role -> bool). Returns (needed with this role's entry, the facts to set, the one line that says why).
    When the role is skipped its published facts (from the record) are set, for the roles that follow."""
    runs = bool(full) or role in (roles or ()) or not all(pair_current)
    needed = dict(needed or {})
    needed[role] = runs
    facts: dict[str, Any] = dict(needed_facts(needed), **{'__%s_converge' % role: probe})
    if runs:
        why = '; '.join(probe.get('reasons') or ()) or 'the other node of the pair differs, ds4_converge_full or ds4_converge_roles'
        line = '%s: runs (%s)' % (role, why)
    else:
        facts.update(probe.get('published') or {})
        line = '%s: as recorded on every node, skipped' % role
    return needed, facts, line
