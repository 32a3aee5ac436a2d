# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real service_preflight main() (vllm_service's one read of a node before it changes anything) with mocked
exit_json/fail_json, a fake systemctl and docker CLI on PATH and the drop-in directories under tmp_path; and its
action's direct run (the source sent through the connection, no module upload), which must return what the module
returns.

The drop-in check is the node package's verify_unit one (the same problems and lines as `verify_unit.py --dropins`).
"""


import json
import os
import subprocess
import sys

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import verify_unit
from ansible_collections.dgxspark.ds4.plugins.modules import service_preflight as mod
from .module_harness import ExitJson, FailJson, bare_action, patch_exit, run_main

UNIT = 'dgxspark-ds4-head.service'
GUARD = 'dgxspark-ds4-pairguard.service'
UNIT_FILE = '/etc/systemd/system/dgxspark-ds4-head.service'
OVERRIDE = '/etc/systemd/system/dgxspark-ds4-head.service.d/override.conf'
IMAGE_ID = 'sha256:4f2a9c0d1e2b3a4f5e6d7c8b9a0f1e2d3c4b5a6f7e8d9c0b1a2f3e4d5c6b7a8f'
# systemctl show of the drop-in check (verify_unit.SHOW_PROPERTIES)
SHOW = ('ExecStart={ path=/usr/local/bin/launch-old.sh ; argv[]=/usr/local/bin/launch-old.sh --port 8000 ; '
        'ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\n'
        'FragmentPath=/etc/systemd/system/dgxspark-ds4-head.service\n'
        'DropInPaths=%s /usr/lib/systemd/system/service.d/10-timeout-abort.conf\n'
        'NeedDaemonReload=no\n' % OVERRIDE)
# systemctl show of two units (a block each, in the order asked; properties in systemd's own order)
UNITS_SHOW = ('LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n\n'
              'LoadState=not-found\nActiveState=inactive\nUnitFileState=\n')
SYSTEMCTL = '''#!/bin/sh
echo "systemctl $*" >> %(log)s
case "$*" in
  *DropInPaths*) cat <<"EOF"
%(show)sEOF
  ;;
  *LoadState*) cat <<"EOF"
%(units)sEOF
  ;;
esac
'''
DOCKER = '''#!/bin/sh
echo "docker $*" >> %(log)s
case "$1 $2" in
  "image inspect") if [ "$5" = "ds4-vllm-sim:test" ]; then echo %(id)s; else echo "Error response from daemon: No such image: $5" >&2; exit 1; fi ;;
  "info --format") echo '{"nvidia":{"path":"nvidia-container-runtime"},"runc":{"path":"runc"}}' ;;
esac
'''


@pytest.fixture(autouse=True)
def node(tmp_path, monkeypatch):
    patch_exit(monkeypatch)
    fake = tmp_path / 'bin'
    fake.mkdir()
    values = dict(log=tmp_path / 'argv', show=SHOW, units=UNITS_SHOW, id=IMAGE_ID)
    (fake / 'systemctl').write_text(SYSTEMCTL % values)
    (fake / 'docker').write_text(DOCKER % values)
    (fake / 'systemd-analyze').write_text(u'#!/bin/sh\necho "systemd-analyze $*" >> %s\n' % (tmp_path / 'argv'))
    for name in ('systemctl', 'docker', 'systemd-analyze'):
        os.chmod(str(fake / name), 0o755)
    monkeypatch.setenv('PATH', '%s:%s' % (fake, os.environ['PATH']))
    monkeypatch.setattr(verify_unit, 'DROPIN_ROOTS', (str(tmp_path / 'etc'),))
    return tmp_path


def args(node, **extra):
    base = {'docker_bin': str(node / 'bin' / 'docker'), 'image': 'ds4-vllm-sim:test'}
    base.update(extra)
    return base


def calls(node):
    return (node / 'argv').read_text().splitlines() if (node / 'argv').exists() else []


def test_one_read_answers_every_check_and_the_restart_plan(node):
    device = node / 'dev-ok'
    device.write_text(u'')
    marker = node / 'restart-pending-head'
    cache = node / 'cache'
    kind, res = run_main(mod.main, args(node, runtimes=True, devices=[str(device), str(node / 'dev-gone')],
                                        unit=UNIT, unit_file=UNIT_FILE, allowed=[OVERRIDE],
                                        paths=[UNIT_FILE, str(marker)], units=[UNIT, GUARD],
                                        compile_cache={'path': str(cache), 'custom_ops_all': True, 'node_memory_gib': 96,
                                                       'launch_digest': 'abc'}))
    assert kind is ExitJson and res['changed'] is False
    bin_docker = str(node / 'bin' / 'docker')
    assert res['docker_cli'] == {'path': bin_docker, 'exists': True, 'executable': True}
    assert res['image'] == {'ref': 'ds4-vllm-sim:test', 'id': IMAGE_ID, 'error': None}
    assert res['runtimes'] == {'names': ['nvidia', 'runc'], 'error': None}
    assert res['devices'] == {str(device): True, str(node / 'dev-gone'): False}
    assert res['dropins']['problems'] == []
    assert res['dropins']['msg'] == 'dgxspark-ds4 verify-unit %s: no foreign drop-in (%s allowed)' % (UNIT, OVERRIDE)
    assert res['paths'] == {UNIT_FILE: os.path.lexists(UNIT_FILE), str(marker): False}
    assert res['units'] == {UNIT: {'LoadState': 'loaded', 'ActiveState': 'active', 'UnitFileState': 'enabled'},
                            GUARD: {'LoadState': 'not-found', 'ActiveState': 'inactive', 'UnitFileState': ''}}
    # the compile cache judged for the image found: no directory yet, cold, seed 002's warning on a 96 GiB node
    assert res['compile_cache']['state'] == 'missing' and res['compile_cache']['warm'] is False
    assert res['compile_cache']['warning'] and res['compile_cache']['artifacts'] == 0
    assert calls(node) == [
        'docker image inspect --format {{.Id}} ds4-vllm-sim:test',
        'docker info --format {{json .Runtimes}}',
        'systemctl show %s -p DropInPaths,FragmentPath,ExecStart,NeedDaemonReload' % UNIT,
        'systemctl show %s %s -p LoadState,ActiveState,UnitFileState' % (UNIT, GUARD)]
    marker.write_text(u'restart\n')
    kind, res = run_main(mod.main, dict(args(node, paths=[str(marker)]), _ansible_check_mode=True))
    assert kind is ExitJson and res['paths'] == {str(marker): True}
    # nothing asked, nothing read beyond the CLI and the image
    assert res['runtimes'] is None and res['dropins'] is None and res['units'] == {} and res['compile_cache'] is None


def test_a_missing_image_and_a_missing_cli_are_reported_not_failed(node):
    kind, res = run_main(mod.main, args(node, image='vllm/vllm-openai:gone', runtimes=True))
    assert kind is ExitJson and res['image']['id'] is None
    assert res['image']['error'] == 'Error response from daemon: No such image: vllm/vllm-openai:gone'
    gone = str(node / 'bin' / 'docker-gone')
    before = len(calls(node))
    kind, res = run_main(mod.main, args(node, docker_bin=gone, runtimes=True,
                                        compile_cache={'path': str(node / 'cache'), 'custom_ops_all': True}))
    assert kind is ExitJson and res['docker_cli'] == {'path': gone, 'exists': False, 'executable': False}
    assert res['image'] == {'ref': 'ds4-vllm-sim:test', 'id': None, 'error': 'not looked up: the docker CLI %s is missing' % gone}
    assert res['runtimes'] == {'names': [], 'error': 'not looked up: the docker CLI %s is missing' % gone}
    # no image, no verdict on its cache; and no docker run at all
    assert res['compile_cache'] is None and len(calls(node)) == before


def test_verify_fails_naming_every_missing_path_of_an_installed_unit(node):
    """The installed unit's check after install (verify_unit.unit_problems, as the unit file's validate command runs
    it): a launch script removed since fails the run with the node script's lines; the unit as written passes."""
    script = node / 'launch.sh'
    script.write_text(u'#!/bin/sh\n')
    os.chmod(str(script), 0o755)
    unit = node / UNIT
    unit.write_text(u'[Service]\nExecStartPre=/usr/bin/env true\nExecStart=%s --port 8000\n' % script)
    verify = [{'unit_file': str(unit), 'unit': UNIT, 'docker_cli': str(node / 'bin' / 'docker')}]
    kind, res = run_main(mod.main, {'verify': verify})
    assert kind is ExitJson and res['verify'] == [] and res['docker_cli'] is None and res['image'] is None, res
    assert calls(node) == ['systemd-analyze verify %s' % os.path.join(os.path.dirname(calls(node)[0].split()[-1]), UNIT)]
    script.unlink()
    kind, res = run_main(mod.main, {'verify': verify})
    assert kind is FailJson
    assert res['msg'] == ('dgxspark-ds4 verify-unit %s: ExecStart: executable %s does not exist or is not executable '
                          '(systemd would fail with status=127/203)' % (UNIT, script)), res['msg']
    assert res['verify'] == [res['msg']]
    kind, res = run_main(mod.main, {'verify': [dict(verify[0], unit_file=str(node / 'gone.service'))]})
    assert kind is FailJson and 'cannot read %s' % (node / 'gone.service') in res['msg']


def test_unit_without_unit_file_is_refused(node):
    kind, res = run_main(mod.main, args(node, unit=UNIT))
    assert kind is FailJson and 'unit_file' in res['msg']


def test_a_foreign_dropin_is_a_problem_with_the_clis_line(node, capsys):
    kind, res = run_main(mod.main, args(node, unit=UNIT, unit_file=UNIT_FILE))
    assert kind is ExitJson and res['changed'] is False
    problems = res['dropins']['problems']
    assert len(problems) == 1 and problems[0].startswith('drop-in %s was not written by dgxspark.ds4' % OVERRIDE)
    assert 'ExecStart now: /usr/local/bin/launch-old.sh --port 8000' in problems[0]
    assert 'vllm_service_allowed_dropins: [%s]' % OVERRIDE in problems[0]
    assert res['dropins']['msg'] == 'dgxspark-ds4 verify-unit %s: %s' % (UNIT, problems[0])
    # the node script's --dropins prints the same line
    assert verify_unit.main(['verify-unit', '--dropins', UNIT, UNIT_FILE]) == 1
    assert capsys.readouterr().err == res['dropins']['msg'] + '\n'


def test_a_dropin_waiting_for_a_daemon_reload_counts(node):
    waiting = node / 'etc' / 'dgxspark-ds4-.service.d' / 'env.conf'
    waiting.parent.mkdir(parents=True)
    waiting.write_text(u'[Service]\nEnvironment=A=1\n')
    kind, res = run_main(mod.main, dict(args(node, unit=UNIT, unit_file=UNIT_FILE, allowed=[OVERRIDE]), _ansible_check_mode=True))
    assert kind is ExitJson and res['changed'] is False and len(res['dropins']['problems']) == 1, res
    msg = res['dropins']['msg']
    assert 'drop-in %s was not written' % waiting in msg and 'takes effect at the next daemon-reload' in msg


def test_a_shadowing_unit_file_and_an_allowed_entry_that_is_not_a_dropin(node):
    kind, res = run_main(mod.main, args(node, unit=UNIT, unit_file='/usr/local/lib/systemd/system/' + UNIT,
                                        allowed=[OVERRIDE, 'override.conf']))
    problems = res['dropins']['problems']
    assert kind is ExitJson and len(problems) == 2, res
    assert problems[0].startswith("vllm_service_allowed_dropins entry 'override.conf' is not the absolute path")
    assert problems[1].startswith('systemd loads the unit from %s, not from /usr/local/lib/systemd/system/' % UNIT_FILE)
    assert res['dropins']['msg'].split('\n') == ['dgxspark-ds4 verify-unit %s: %s' % (UNIT, p) for p in problems]


def test_the_direct_run_gives_the_modules_result(node):
    """The action's direct run (plugins/action/service_preflight.py: the module_utils source and the collection files it
    imports through the direct probe's bootstrap, no module upload) returns what the module returns."""
    from ansible_collections.dgxspark.ds4.plugins.action import converge_state as action
    device = node / 'dev-ok'
    device.write_text(u'')
    params = args(node, runtimes=True, devices=[str(device), '/dev/nowhere'], unit=UNIT, unit_file=UNIT_FILE,
                  allowed=[], paths=[str(device)], units=[UNIT, GUARD],
                  compile_cache={'path': str(node / 'cache'), 'custom_ops_all': False, 'node_memory_gib': 128,
                                 'launch_digest': None})
    kind, module = run_main(mod.main, dict(params))
    assert kind is ExitJson
    payload = json.loads(action.direct_payload(params, 'preflight'))
    assert payload['name'] == 'service_preflight'
    # verify_unit's drop-in roots are the real ones in a process of its own: point them at tmp_path there too
    payload['modules'] = [[name, src.replace('DROPIN_ROOTS = (', 'DROPIN_ROOTS = (%r,) or (' % str(node / 'etc'))
                           if name.endswith('.verify_unit') else src] for name, src in payload['modules']]
    assert [name.rpartition('.')[2] for name, src in payload['modules']] == ['compile_cache', 'node_probe', 'verify_unit']
    proc = subprocess.run([sys.executable, '-I', '-c', action._PROBE_BOOT], input=json.dumps(payload),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=True,
                          env=dict(os.environ))
    direct = json.loads(proc.stdout)
    module.pop('invocation', None)
    assert direct == module
    assert direct['dropins']['problems'] and direct['units'][UNIT]['ActiveState'] == 'active'


def test_the_action_runs_directly_only_where_converge_state_would(monkeypatch):
    """converge_state's _direct_interpreter decides; a delegated task goes to the module (task_vars are the inventory
    host's, not the delegate's)."""
    from ansible.plugins.action import ActionBase
    from ansible_collections.dgxspark.ds4.plugins.action import service_preflight as action

    seen = []
    plugin = bare_action(action.ActionModule)
    plugin._templar = None
    monkeypatch.setattr(ActionBase, 'run', lambda self, tmp=None, task_vars=None: {})
    monkeypatch.setattr(action.ActionModule, '_probe_directly',
                        lambda self, interp, a, entry='probe': seen.append(('direct', interp, entry, a['image'])) or {})
    monkeypatch.setattr(action.ActionModule, '_execute_module',
                        lambda self, module_name, module_args, task_vars: seen.append(('module', module_name)) or {})
    monkeypatch.setattr(action.ActionModule, 'validate_argument_spec',
                        lambda self, argument_spec=None, required_by=None: (None, dict(plugin._task.args)))

    class Task(object):
        args = {'docker_bin': '/usr/bin/docker', 'image': 'ds4-vllm-sim:test'}
        delegate_to = None
    plugin._task = Task()
    known = {'ansible_facts': {'discovered_interpreter_python': '/usr/bin/python3'}}
    plugin.run(task_vars=known)
    plugin.run(task_vars={})
    Task.delegate_to = 'spark2'
    plugin.run(task_vars=known)
    plugin._connection.pipelining = False
    Task.delegate_to = None
    plugin.run(task_vars=known)
    assert seen == [('direct', '/usr/bin/python3', 'preflight', 'ds4-vllm-sim:test'),
                    ('module', 'dgxspark.ds4.service_preflight'), ('module', 'dgxspark.ds4.service_preflight'),
                    ('module', 'dgxspark.ds4.service_preflight')]
