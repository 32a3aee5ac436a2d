# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""file_state main(): every path observed in one run as the converge shortcut observes it (a file by SHA-1, mode and
owner, a directory, absent - also below a missing directory - without a warning); a relative path refused."""


import hashlib
import os

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.ds4.plugins.modules import file_state as mod
from .module_harness import ExitJson, FailJson, bare_action, patch_exit


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    patch_exit(monkeypatch)


def call(paths, expect=ExitJson):
    with patch_module_args(dict(paths=paths)):
        with pytest.raises(expect) as exc:
            mod.main()
    return exc.value.args[0]


def test_files_directories_and_missing_paths_in_one_run(tmp_path):
    tls = tmp_path / 'tls'
    tls.mkdir(mode=0o755)
    os.chmod(str(tls), 0o755)
    key = tls / 'front.key'
    key.write_text('-----BEGIN PRIVATE KEY-----\nx\n')
    os.chmod(str(key), 0o600)
    uid, gid = os.getuid(), os.getgid()
    missing = tmp_path / 'nowhere' / 'front.crt'
    result = call([str(tls), str(key), str(missing)])
    assert result['changed'] is False and not result.get('warnings')
    assert result['files'] == {
        str(tls): 'dir:755:%d:%d' % (uid, gid),
        str(key): 'sha1:%s:600:%d:%d' % (hashlib.sha1(key.read_bytes()).hexdigest(), uid, gid),
        str(missing): 'absent',
    }
    # what a role compares it with: the SHA-1 of the text it would write, as ansible's hash('sha1') computes it
    assert result['files'][str(key)].split(':')[1] == hashlib.sha1(key.read_text().encode('utf-8')).hexdigest()
    key.write_text('-----BEGIN PRIVATE KEY-----\ny\n')
    assert call([str(key)])['files'][str(key)] != result['files'][str(key)]


def test_a_relative_path_is_refused_by_name():
    failed = call(['etc/dgxspark-ds4/tls', '/etc'], expect=FailJson)
    assert 'etc/dgxspark-ds4/tls' in failed['msg'] and 'absolute' in failed['msg']


def test_the_direct_run_gives_the_modules_result(tmp_path):
    """The action's direct run (plugins/action/file_state.py: converge_state.files through the direct probe's
    bootstrap, no module upload) returns what the module returns, for the same paths; a relative path is refused
    there by name too."""
    import json
    import subprocess
    import sys
    from ansible_collections.dgxspark.ds4.plugins.action import converge_state as action
    (tmp_path / 'front.crt').write_text('-----BEGIN CERTIFICATE-----\nx\n')
    os.chmod(str(tmp_path / 'front.crt'), 0o644)
    paths = [str(tmp_path), str(tmp_path / 'front.crt'), str(tmp_path / 'nowhere' / 'x')]

    def direct(args):
        proc = subprocess.run([sys.executable, '-I', '-c', action._PROBE_BOOT], input=action.direct_payload(args, 'files'),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=True, cwd=str(tmp_path))
        return json.loads(proc.stdout)

    module = call(paths)
    assert direct({'paths': paths}) == {'changed': False, 'files': module['files']}
    assert module['files'][paths[1]].startswith('sha1:') and module['files'][paths[2]] == 'absent'
    refused = direct({'paths': ['etc/x', '/etc']})
    assert refused['failed'] is True and 'etc/x' in refused['msg'] and 'absolute' in refused['msg'], refused


def test_the_action_runs_directly_only_where_converge_state_would(monkeypatch):
    """One decision (converge_state's _direct_interpreter): a direct run needs a pipelining connection and a known
    Python; file_state adds only that a path not absolute as written (~) goes to the module, which expands it."""
    from ansible.plugins.action import ActionBase
    from ansible_collections.dgxspark.ds4.plugins.action import file_state as action

    calls = []
    plugin = bare_action(action.ActionModule)
    plugin._templar = None
    monkeypatch.setattr(ActionBase, 'run', lambda self, tmp=None, task_vars=None: {})
    monkeypatch.setattr(action.ActionModule, '_probe_directly',
                        lambda self, interp, args, entry='probe': calls.append(('direct', interp, entry)) or {'files': {}})
    monkeypatch.setattr(action.ActionModule, '_execute_module',
                        lambda self, module_name, module_args, task_vars: calls.append(('module', module_name)) or {'files': {}})
    known = {'ansible_facts': {'discovered_interpreter_python': '/usr/bin/python3'}}

    def run(paths, task_vars):
        del calls[:]
        monkeypatch.setattr(action.ActionModule, 'validate_argument_spec', lambda self, argument_spec: (None, {'paths': paths}))
        plugin.run(task_vars=task_vars)
        return calls[0]
    assert run(['/etc/x'], known) == ('direct', '/usr/bin/python3', 'files')
    assert run(['~/x', '/etc/x'], known) == ('module', 'dgxspark.ds4.file_state')
    assert run(['/etc/x'], {}) == ('module', 'dgxspark.ds4.file_state')       # Python not known yet
    assert run(['/etc/x'], {'ansible_facts': {'discovered_interpreter_python': '/usr/bin/python3; rm -rf /'}}) == (
        'module', 'dgxspark.ds4.file_state')                                    # not an interpreter path
    plugin._connection.pipelining = False
    assert run(['/etc/x'], known) == ('module', 'dgxspark.ds4.file_state')


def test_the_plan_discovers_the_nodes_python_itself_only_where_a_direct_run_waits_for_it(monkeypatch):
    """converge_state's _discover_interpreter (the deploy's first node task, dgxspark.ds4.converge_plan): ansible-core's
    own discovery, one shell command, where the connection pipelines, nothing names or has found the node's Python and
    interpreter_python says to discover it; otherwise nothing (a module run discovers it, or needs not)."""
    from ansible import constants as C
    from ansible_collections.dgxspark.ds4.plugins.action import converge_state as action

    calls = []
    plugin = bare_action(action.ActionModule)
    mode = ['auto_silent']
    monkeypatch.setattr(C.config, 'get_config_value', lambda name, variables=None: mode[0] if name == 'INTERPRETER_PYTHON' else None)
    monkeypatch.setattr(action, 'discover_interpreter', lambda action, interpreter_name, discovery_mode, task_vars: calls.append(
        (action, interpreter_name, discovery_mode)) or '/usr/bin/python3.12')
    assert plugin._discover_interpreter({}) == {'discovered_interpreter_python': '/usr/bin/python3.12'}
    assert calls == [(plugin, 'python', 'auto_silent')]
    del calls[:]
    assert plugin._discover_interpreter({'ansible_facts': {'discovered_interpreter_python': '/usr/bin/python3'}}) == {}
    assert plugin._discover_interpreter({'ansible_python_interpreter': '/opt/py/bin/python3'}) == {}
    mode[0] = '/usr/bin/python3'                      # interpreter_python names one: the module run uses it
    assert plugin._discover_interpreter({}) == {}
    mode[0] = 'auto'
    plugin._connection.pipelining = False            # no direct run without pipelining: the module discovers it
    assert plugin._discover_interpreter({}) == {}
    assert calls == []
