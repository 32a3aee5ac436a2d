# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark-ds4 verify-unit: refuse a systemd unit that references a path that does not exist, and the drop-ins that
would replace what the collection renders.

The node package's module. Its entry point is roles/vllm_service/files/verify_unit.py (this main and nothing else),
installed by dgxspark.ds4.vllm_service next to prestart.py, the `validate` command of the unit template:
    verify-unit UNIT_FILE UNIT_NAME [DOCKER_CLI]
(DOCKER_CLI: the docker CLI the unit runs, vllm_service_docker_bin, when it is not named `docker`), so a unit pointing
at a missing file is never installed (seed 000: ExecStart pointed at a launch script that only lived in a recreated
container's writable layer; systemd looped on status=127 for hours). Checks, and names every missing path:
  * the executable of every Exec* line exists and is executable;
  * every absolute-path argument of a non-docker Exec* line exists;
  * for `docker run`: the host side of every -v/--volume, --env-file and --device exists, and the host file bound at
    the --entrypoint is an executable file (the argv's own rules - one bounded log driver, never journald, the
    entrypoint a read-only bind of the launch script, no container path mounted twice - are the config play's,
    checked before any host changes: plugins/plugin_utils/service_layout.py docker_run);
  * `systemd-analyze verify` accepts the unit (copied under its real name).

    verify-unit --dropins UNIT_NAME UNIT_FILE [ALLOWED_DROPIN ...]
(the role's preflight runs the same check, before the node package is on the host, in the module
dgxspark.ds4.service_preflight: check_unit_dropins below) - what systemd would run instead of the rendered unit: every
drop-in of the unit (`systemctl show -p DropInPaths`, read by node_probe, and the *.conf files of its `.d` directories
on disk, which a daemon-reload would load) that is not listed as allowed (vllm_service_allowed_dropins) is refused with
its path and the fix (seed 000 recovered with "a systemd drop-in override repoints ExecStart", which silently replaces
the launch), as is a FragmentPath other than UNIT_FILE (a copy elsewhere on the unit search path shadowing it); the
ExecStart systemd has loaded is named in the message.
Python 3 standard library only.
"""

# A node script's code, run by the node's own python3 (not an Ansible module): print and subprocess are its I/O.
# pylint: disable=ansible-bad-function
from __future__ import annotations

import glob
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe

TAG = 'dgxspark-ds4 verify-unit'
EXEC_KEYS = ('ExecStartPre', 'ExecStart', 'ExecStartPost', 'ExecStop', 'ExecStopPost', 'ExecReload', 'ExecCondition')
# (rc, stdout, stderr) of an argv: a module's run_command, or run() below
Runner = Callable[[List[str]], Tuple[int, str, str]]


def exec_lines(text: str) -> Iterator[Tuple[str, str]]:
    """(key, value) of every Exec* line of a unit's text (continuation lines joined)."""
    joined: List[str] = []
    buf = ''
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.endswith('\\'):
            buf += line[:-1] + ' '
            continue
        joined.append(buf + line)
        buf = ''
    if buf:
        joined.append(buf)
    for line in joined:
        key, sep, value = line.strip().partition('=')
        if sep and key.strip() in EXEC_KEYS and value.strip():
            yield key.strip(), value.strip()


def check_docker_run(words: Sequence[str], problems: List[str]) -> None:
    """The host paths a docker run argv names exist on this node, and the launch script at its entrypoint is
    executable."""
    mounts: Dict[str, str] = {}
    entrypoint: Optional[str] = None
    i = 0
    take_value = ('--name', '--network', '--ipc', '--shm-size', '--ulimit', '--cap-add', '--cap-drop', '--gpus',
                  '--runtime', '--memory', '--restart', '--security-opt', '--log-driver', '--log-opt', '--label',
                  '-e', '--env', '--stop-timeout', '--stop-signal', '--user', '--workdir', '--hostname', '--pids-limit')
    while i < len(words):
        w = words[i]
        val = ''
        if '=' in w and w.startswith('--'):
            w, val = w.split('=', 1)
        elif w in ('-v', '--volume', '--env-file', '--device', '--entrypoint') or w in take_value:
            i += 1
            val = words[i] if i < len(words) else ''
        elif not w.startswith('-'):
            break  # the image; what follows is the container's command
        if w in ('-v', '--volume'):
            parts = val.split(':')
            src = parts[0]
            mounts[parts[1] if len(parts) > 1 else src] = src
            if src.startswith('/') and not os.path.exists(src):
                problems.append('volume source %s (mounted at %s) does not exist' % (src, parts[1] if len(parts) > 1 else src))
        elif w == '--env-file' and not os.path.isfile(val):
            problems.append('--env-file %s does not exist' % val)
        elif w == '--device' and not os.path.exists(val.split(':')[0]):
            problems.append('--device %s does not exist' % val.split(':')[0])
        elif w == '--entrypoint':
            entrypoint = val
        i += 1
    if entrypoint is None:
        return
    src = mounts.get(entrypoint, entrypoint)
    if not os.path.isfile(src):
        problems.append('launch script %s (the container entrypoint %s) does not exist on the host' % (src, entrypoint))
    elif not os.access(src, os.X_OK):
        problems.append('launch script %s is not executable' % src)


def is_docker(exe: str, docker_cli: Optional[str] = None) -> bool:
    """The docker CLI: named docker, or the one the role was given (a wrapper at another path)."""
    if os.path.basename(exe) == 'docker':
        return True
    return bool(docker_cli) and (exe == docker_cli or os.path.realpath(exe) == os.path.realpath(str(docker_cli)))


def unit_problems(path: str, name: str, docker_cli: Optional[str] = None) -> List[str]:
    """Problems (one sentence each) with the unit file at `path`, installed as `name`: every missing path it references,
    and what `systemd-analyze verify` says."""
    with open(path) as fh:
        text = fh.read()
    problems: List[str] = []
    for key, value in exec_lines(text):
        words = shlex.split(value)
        exe = words[0].lstrip('-@:+!')
        if not exe.startswith('/'):
            problems.append('%s: executable %r is not an absolute path' % (key, exe))
        elif not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            problems.append('%s: executable %s does not exist or is not executable (systemd would fail with '
                            'status=127/203)' % (key, exe))
        if len(words) > 1 and is_docker(exe, docker_cli) and words[1] == 'run':
            check_docker_run(words[2:], problems)
        elif not is_docker(exe, docker_cli):
            for arg in words[1:]:
                if arg.startswith('/') and not os.path.exists(arg):
                    problems.append('%s: argument %s does not exist' % (key, arg))
    analyze = shutil.which('systemd-analyze')
    if analyze:
        tmp = tempfile.mkdtemp(prefix='dgxspark-ds4-verify.')
        try:
            shutil.copyfile(path, os.path.join(tmp, name))
            proc = subprocess.run([analyze, 'verify', os.path.join(tmp, name)], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, universal_newlines=True, check=False)
            if proc.returncode != 0:
                problems.append('systemd-analyze verify %s failed: %s' % (name, proc.stdout.strip()))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    else:
        problems.append('systemd-analyze not found; cannot verify %s' % name)
    return problems


# ---------------------------------------------------------------------------------------------
# drop-ins

# Where systemd reads a unit's drop-ins from (unit search path, highest priority first; /lib for unmerged /usr).
DROPIN_ROOTS = ('/etc/systemd/system.control', '/run/systemd/system.control', '/run/systemd/transient',
                '/run/systemd/generator.early', '/etc/systemd/system', '/etc/systemd/system.attached',
                '/run/systemd/system', '/run/systemd/system.attached', '/run/systemd/generator',
                '/usr/local/lib/systemd/system', '/usr/lib/systemd/system', '/lib/systemd/system',
                '/run/systemd/generator.late')
SHOW_PROPERTIES = ('DropInPaths', 'FragmentPath', 'ExecStart', 'NeedDaemonReload')


def dropin_dir_names(unit: str) -> List[str]:
    """The `.d` directories that apply to this unit by name: its own and its dash prefixes
    (dgxspark-ds4-head.service.d, dgxspark-ds4-.service.d, dgxspark-.service.d). Type-wide `service.d`
    directories apply to every service on the host and are not this unit's."""
    name, _dot, suffix = unit.rpartition('.')
    parts = name.split('-')
    return [unit + '.d'] + ['%s-.%s.d' % ('-'.join(parts[:i]), suffix) for i in range(len(parts) - 1, 0, -1)]


def dropins_on_disk(unit: str, roots: Optional[Sequence[str]] = None) -> List[str]:
    """The *.conf drop-ins of the unit in the directories systemd reads (`roots`, DROPIN_ROOTS by default), loaded or
    not yet (no daemon-reload)."""
    found: List[str] = []
    for root in DROPIN_ROOTS if roots is None else roots:
        for dirname in dropin_dir_names(unit):
            found.extend(glob.glob(os.path.join(root, dirname, '*.conf')))
    return sorted(set(found))


def exec_start_summary(value: str) -> str:
    """The argv systemd has loaded for ExecStart (from `argv[]=... ;`), shortened for a message."""
    start = value.find('argv[]=')
    argv = value[start + 7:value.find(' ;', start)] if start >= 0 else value
    return argv if len(argv) <= 160 else argv[:157] + '...'


def dropin_problems(unit: str, unit_file: str, allowed: Sequence[str], props: Dict[str, str],
                    on_disk: Sequence[str]) -> List[str]:
    """Problems (one sentence each) with what systemd would run for `unit` instead of `unit_file`; `props`:
    node_probe.parse_unit_show of SHOW_PROPERTIES."""
    own_dirs = set(dropin_dir_names(unit))
    loaded = [p for p in props.get('DropInPaths', '').split() if os.path.basename(os.path.dirname(p)) in own_dirs]
    problems = ['vllm_service_allowed_dropins entry %r is not the absolute path of a drop-in (*.conf) in a directory of '
                'the unit %s (%s). Fix: list only drop-ins of this unit kept on purpose, e.g. /etc/systemd/system/%s.d/'
                'override.conf' % (path, unit, ', '.join(dropin_dir_names(unit)), unit)
                for path in allowed if not (os.path.isabs(path) and path.endswith('.conf')
                                            and os.path.basename(os.path.dirname(path)) in own_dirs)]
    allowed_set = set(allowed)
    exec_start = exec_start_summary(props.get('ExecStart', '')) or 'not loaded yet'
    for path in sorted(set(loaded) | set(on_disk)):
        if path in allowed_set:
            continue
        problems.append('drop-in %s was not written by dgxspark.ds4: it changes the unit the collection renders (a '
                        'repointed ExecStart replaces the launch; systemd\'s ExecStart now: %s)%s. Fix: remove it '
                        '(rm %s && systemctl daemon-reload), or adopt it explicitly: vllm_service_allowed_dropins: [%s]'
                        % (path, exec_start, '' if path in loaded else ' and takes effect at the next daemon-reload',
                           shlex.quote(path), path))
    fragment = props.get('FragmentPath', '')
    if fragment and os.path.realpath(fragment) != os.path.realpath(unit_file):
        problems.append('systemd loads the unit from %s, not from %s which the collection writes (a copy earlier on the '
                        'unit search path shadows it; ExecStart now: %s). Fix: remove %s and run systemctl daemon-reload, '
                        'or set vllm_service_unit_dir to its directory' % (fragment, unit_file, exec_start, fragment))
    return problems


def run(argv: List[str]) -> Tuple[int, str, str]:
    """(rc, stdout, stderr) of argv (the entry point's runner; a module passes its run_command)."""
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def check_unit_dropins(unit: str, unit_file: str, allowed: Sequence[str], runner: Runner = run,
                       roots: Optional[Sequence[str]] = None) -> Tuple[List[str], List[str]]:
    """(problems, the report's lines): what `verify-unit --dropins` prints, each problem a line of its own (on stderr,
    exit 1), else one line saying no foreign drop-in was found (on stdout, exit 0). The preflight's module
    dgxspark.ds4.service_preflight returns the same lines."""
    probed = node_probe.probe_unit(runner, unit, SHOW_PROPERTIES)
    props = probed.value if probed.rc == 0 else {}
    problems = dropin_problems(unit, unit_file, allowed, props, dropins_on_disk(unit, roots))
    if problems:
        return problems, ['%s %s: %s' % (TAG, unit, problem) for problem in problems]
    return problems, ['%s %s: no foreign drop-in (%s)' % (
        TAG, unit, ', '.join(sorted(set(allowed))) + ' allowed' if allowed else 'none allowed')]


def check_dropins(argv: Sequence[str]) -> int:
    """--dropins UNIT_NAME UNIT_FILE [ALLOWED ...]: exit 1 naming every drop-in not allowed."""
    if len(argv) < 4:
        print('usage: %s --dropins UNIT_NAME UNIT_FILE [ALLOWED_DROPIN ...]' % argv[0], file=sys.stderr)
        return 2
    problems, lines = check_unit_dropins(argv[2], argv[3], argv[4:])
    for line in lines:
        print(line, file=sys.stderr if problems else sys.stdout)
    return 1 if problems else 0


def main(argv: Sequence[str]) -> int:
    if len(argv) > 1 and argv[1] == '--dropins':
        return check_dropins(argv)
    if len(argv) not in (3, 4):
        print('usage: %s UNIT_FILE UNIT_NAME [DOCKER_CLI]' % argv[0], file=sys.stderr)
        return 2
    path, name = argv[1], argv[2]
    problems = unit_problems(path, name, argv[3] if len(argv) == 4 else None)
    if problems:
        for p in problems:
            print('%s %s: %s' % (TAG, name, p), file=sys.stderr)
        return 1
    print('%s %s: ok' % (TAG, name))
    return 0
