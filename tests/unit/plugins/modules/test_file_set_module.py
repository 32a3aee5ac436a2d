# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""file_set main(): a set of files written in one run, each only where it differs (content, or mode alone), in
order; a validate command refuses a file (and the ones after it) before it replaces the old one; check mode writes
nothing and runs no validate; diff mode shows each changed file, a secret one without its content; bad input refused
before anything is written."""


import os
import stat
import sys

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.ds4.plugins.modules import file_set as mod
from .module_harness import ExitJson, FailJson, bare_action, patch_exit

ME = str(os.getuid())
GROUP = str(os.getgid())


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    patch_exit(monkeypatch)


def call(files, expect=ExitJson, check=False, diff=False):
    args = dict(files=[dict(dict(owner=ME, group=GROUP), **f) for f in files], _ansible_check_mode=check, _ansible_diff=diff)
    with patch_module_args(args):
        with pytest.raises(expect) as exc:
            mod.main()
    return exc.value.args[0]


def mode_of(path):
    return stat.S_IMODE(os.stat(str(path)).st_mode)


def test_only_what_differs_is_written_in_order_and_named(tmp_path):
    script, unit, env = tmp_path / 'launch.sh', tmp_path / 'x.service', tmp_path / 'nccl.env'
    env.write_text('NCCL_IB_HCA=mlx5_0\n')
    os.chmod(str(env), 0o644)
    unit.write_text('[Service]\n')
    os.chmod(str(unit), 0o600)  # same content, wrong mode: only the mode is set
    inode = os.stat(str(unit)).st_ino
    files = [dict(path=str(script), content='#!/bin/bash\nexec vllm serve\n', mode='0755'),
             dict(path=str(env), content='NCCL_IB_HCA=mlx5_0\n', mode='0644'),
             dict(path=str(unit), content='[Service]\n', mode='0644')]
    result = call(files)
    assert result['changed'] is True and result['changed_paths'] == [str(script), str(unit)]
    assert script.read_text() == '#!/bin/bash\nexec vllm serve\n' and mode_of(script) == 0o755
    assert mode_of(unit) == 0o644 and os.stat(str(unit)).st_ino == inode
    assert 'diff' not in result
    # the second run changes nothing; no temporary file left behind
    again = call(files)
    assert again['changed'] is False and again['changed_paths'] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ['launch.sh', 'nccl.env', 'x.service']


def test_check_mode_writes_nothing_and_diff_hides_a_secret(tmp_path):
    script, secrets = tmp_path / 'launch.sh', tmp_path / 'secrets.env'
    script.write_text('old\n')
    os.chmod(str(script), 0o755)
    validate = '%s -c "import sys; sys.exit(1)" %%s' % sys.executable  # would refuse: not run in check mode
    result = call([dict(path=str(script), content='new\n', mode='0755', validate=validate),
                   dict(path=str(secrets), content='VLLM_API_KEY=sk-secret-1234\n', mode='0600', diff=False)],
                  check=True, diff=True)
    assert result['changed'] is True and result['changed_paths'] == [str(script), str(secrets)]
    assert script.read_text() == 'old\n' and not secrets.exists()
    shown = result['diff']
    assert shown[0] == {'before_header': str(script), 'after_header': str(script), 'before': 'old\n', 'after': 'new\n'}
    assert 'sk-secret-1234' not in repr(shown) and shown[1]['after'] == '(content hidden: 28 bytes)\n'
    assert shown[1]['before_header'] == '%s (absent)' % secrets


def test_a_refused_file_stops_there_and_keeps_the_old_one(tmp_path):
    first, unit, last = tmp_path / 'a.sh', tmp_path / 'x.service', tmp_path / 'z.json'
    unit.write_text('[Service]\nExecStart=/old\n')
    os.chmod(str(unit), 0o644)
    refuse = '%s -c "import sys; print(\'references a missing path: /nowhere\', file=sys.stderr); sys.exit(2)" %%s' % sys.executable
    failed = call([dict(path=str(first), content='a\n', mode='0644'),
                   dict(path=str(unit), content='[Service]\nExecStart=/nowhere\n', mode='0644', validate=refuse),
                   dict(path=str(last), content='{}\n', mode='0644')], expect=FailJson)
    assert str(unit) in failed['msg'] and 'references a missing path: /nowhere' in failed['msg'] and 'exit 2' in failed['msg']
    assert failed['changed_paths'] == [str(first)] and failed['changed'] is True
    assert unit.read_text() == '[Service]\nExecStart=/old\n' and first.read_text() == 'a\n' and not last.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ['a.sh', 'x.service']


def test_validate_sees_the_new_content(tmp_path):
    unit = tmp_path / 'x.service'
    seen = tmp_path / 'seen'
    copy = '%s -c "import shutil, sys; shutil.copy(sys.argv[1], %r)" %%s' % (sys.executable, str(seen))
    result = call([dict(path=str(unit), content='[Service]\nExecStart=/new\n', mode='0644', validate=copy)])
    assert result['changed_paths'] == [str(unit)] and seen.read_text() == '[Service]\nExecStart=/new\n'


@pytest.mark.parametrize('bad, words', [
    (dict(path='etc/x.conf', content='', mode='0644'), ['etc/x.conf', 'absolute']),
    (dict(path='/etc/x.conf', content='', mode='644x'), ['/etc/x.conf', 'octal', '644x']),
    (dict(path='/etc/x.conf', content='', mode='0644', validate='/bin/true'), ['/etc/x.conf', '%s', '/bin/true']),
])
def test_bad_input_is_refused_before_anything_is_written(tmp_path, bad, words):
    good = tmp_path / 'good.conf'
    failed = call([dict(path=str(good), content='x\n', mode='0644'), bad], expect=FailJson)
    assert all(w in failed['msg'] for w in words), failed['msg']
    assert 'Nothing was written' in failed['msg'] and not good.exists()


def test_an_unknown_owner_is_named(tmp_path):
    failed = call([dict(path=str(tmp_path / 'x'), content='x\n', mode='0644', owner='no-such-user-ds4')], expect=FailJson)
    assert 'no user named no-such-user-ds4' in failed['msg'] and not (tmp_path / 'x').exists()


# -- the action: no node call where the converge probe of this run already found every file as it would be written --

def _seen(paths):
    """What the converge probe reports for these paths (converge_state.observe_file, the probe's own function)."""
    from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import converge_state as cs
    return dict((str(p), cs.observe_file(str(p))) for p in paths)


def test_as_seen_holds_only_where_content_mode_and_owner_all_equal_what_the_probe_found(tmp_path):
    """The files the module just wrote, observed as the probe observes them: as seen. Any difference the module
    would write (content, mode, owner, group, a file absent or not in the look) is not."""
    from ansible_collections.dgxspark.ds4.plugins.action.file_set import as_seen
    script, secrets = tmp_path / 'launch.sh', tmp_path / 'secrets.env'
    files = [dict(path=str(script), content='#!/bin/bash\nexec vllm serve --max-num-seqs 6\n', mode='0755', owner=ME, group=GROUP),
             dict(path=str(secrets), content='HF_TOKEN=hf_x\u00e9\n', mode='0600', owner=ME, group=GROUP)]
    call(files)
    seen = _seen([script, secrets])
    assert as_seen(files, seen) is True
    assert call(files)['changed'] is False          # the module agrees: it would write nothing
    one_flag = [dict(files[0], content=files[0]['content'].replace('6', '4')), files[1]]
    assert as_seen(one_flag, seen) is False and call(one_flag, check=True)['changed_paths'] == [str(script)]
    assert as_seen([dict(files[0], mode='0700'), files[1]], seen) is False
    other = str(int(ME) + 1)
    assert as_seen([dict(files[0], owner=other), files[1]], seen) is False
    assert as_seen([dict(files[0], group=str(int(GROUP) + 1)), files[1]], seen) is False
    # an owner by name: the node's to resolve (root is 0 everywhere)
    assert as_seen([dict(files[0], owner='vllm'), files[1]], seen) is False
    assert as_seen(files + [dict(path=str(tmp_path / 'new.env'), content='', mode='0644', owner=ME, group=GROUP)],
                   dict(seen, **_seen([tmp_path / 'new.env']))) is False      # absent
    assert as_seen(files, {str(script): seen[str(script)]}) is False           # a path the look did not hold
    assert as_seen([], seen) is False and as_seen(files, None) is False
    os.chmod(str(script), 0o700)
    assert as_seen(files, _seen([script, secrets])) is False


def test_the_action_skips_the_node_only_when_as_seen_and_never_passes_seen_on(monkeypatch, tmp_path):
    from ansible.plugins.action import ActionBase
    from ansible_collections.dgxspark.ds4.plugins.action import file_set as action

    path = tmp_path / 'x.service'
    files = [dict(path=str(path), content='[Service]\n', mode='0644', owner=ME, group=GROUP)]
    call(files)
    calls = []
    plugin = bare_action(action.ActionModule)
    monkeypatch.setattr(ActionBase, 'run', lambda self, tmp=None, task_vars=None: {})
    monkeypatch.setattr(action.ActionModule, '_execute_module', lambda self, module_name, module_args, task_vars: calls.append(
        (module_name, module_args)) or {'changed': True, 'changed_paths': [str(path)]})

    class Task(object):
        delegate_to = None

        def __init__(self, args):
            self.args = args
    plugin._task = Task(dict(files=files, seen=_seen([path])))
    assert plugin.run(task_vars={}) == {'changed': False, 'changed_paths': [],
                                        'msg': 'every file as the read-only look of this run found it (seen): no node call'}
    assert calls == []
    changed = [dict(files[0], content='[Service]\nRestart=always\n')]
    plugin._task = Task(dict(files=changed, seen=_seen([path])))
    assert plugin.run(task_vars={})['changed_paths'] == [str(path)]
    plugin._task = Task(dict(files=files))
    plugin.run(task_vars={})
    assert calls == [('dgxspark.ds4.file_set', dict(files=changed)), ('dgxspark.ds4.file_set', dict(files=files))]


def test_the_direct_run_writes_as_the_module_does(tmp_path):
    """The action's direct run (plugins/action/file_set.py: module_utils/_converge/file_set.py's write through the
    direct probe's bootstrap, no module upload) gives the module's result for the same files: a new file written with
    its diff, a secret's content hidden, the same files again unchanged, and a refused validate named with what was
    written before it."""
    import json
    import subprocess
    import sys
    from ansible_collections.dgxspark.ds4.plugins.action import converge_state as action

    def direct(files, check_mode=False):
        params = dict(files=[dict(dict(owner='root', group='root', validate=None, diff=True), **f) for f in files])
        proc = subprocess.run([sys.executable, '-I', '-c', action._PROBE_BOOT],
                              input=action.direct_payload(params, 'write', check_mode), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, check=True)
        return json.loads(proc.stdout)

    script, secrets = tmp_path / 'launch.sh', tmp_path / 'secrets.env'
    files = [dict(path=str(script), content='#!/bin/sh\nexec vllm serve\n', mode='0755', owner=ME, group=GROUP),
             dict(path=str(secrets), content='HF_TOKEN=hf_secret\n', mode='0600', owner=ME, group=GROUP, diff=False)]
    checked = direct(files, check_mode=True)
    assert checked['changed'] is True and not script.exists() and not secrets.exists()
    res = direct(files)
    assert res['changed'] is True and res['changed_paths'] == [str(script), str(secrets)]
    assert res['diff'][0]['after'] == files[0]['content'] and res['diff'][0]['before_header'] == '%s (absent)' % script
    assert res['diff'][1]['after'] == '(content hidden: 19 bytes)\n' and 'hf_secret' not in json.dumps(res)
    assert script.read_text() == files[0]['content'] and oct(os.stat(str(secrets)).st_mode & 0o777) == '0o600'
    assert direct(files) == {'changed': False, 'changed_paths': [], 'diff': []}
    # the module on the same files: unchanged too
    assert call(files)['changed'] is False
    refused = direct([dict(files[0], content='#!/bin/sh\nexit 1\n'),
                      dict(path=str(tmp_path / 'x.service'), content='x', mode='0644', owner=ME, group=GROUP,
                           validate='/bin/false %s')])
    assert refused['failed'] is True and refused['changed_paths'] == [str(script)]
    assert 'x.service: refused by its validate command (exit 1)' in refused['msg'] and 'Written before it: %s' % script in refused['msg']
    assert not (tmp_path / 'x.service').exists()
    relative = direct([dict(files[0], path='etc/x')])
    assert relative['failed'] is True and 'path must be absolute, got etc/x' in relative['msg'] and 'Nothing was written' in relative['msg']


def test_the_action_writes_directly_only_where_converge_state_would(monkeypatch, tmp_path):
    """converge_state's _direct_interpreter decides; a delegated task and a path not absolute as written (the module
    expands ~) go to the module; seen is never passed on."""
    from ansible.plugins.action import ActionBase
    from ansible_collections.dgxspark.ds4.plugins.action import file_set as action

    calls = []
    plugin = bare_action(action.ActionModule)
    plugin._templar = None
    monkeypatch.setattr(ActionBase, 'run', lambda self, tmp=None, task_vars=None: {})
    monkeypatch.setattr(action.ActionModule, '_probe_directly', lambda self, interp, args, entry='probe': calls.append(
        ('direct', interp, entry, sorted(args))) or {'changed': True, 'changed_paths': [], 'diff': [{'after': 'x'}]})
    monkeypatch.setattr(action.ActionModule, '_execute_module', lambda self, module_name, module_args, task_vars: calls.append(
        ('module', module_name)) or {'changed': True})

    class Task(object):
        delegate_to = None
        diff = False

        def __init__(self, args):
            self.args = args
    files = [dict(path=str(tmp_path / 'a'), content='a', mode='0644')]
    known = {'ansible_facts': {'discovered_interpreter_python': '/usr/bin/python3'}}
    plugin._task = Task(dict(files=files, seen={}))
    assert 'diff' not in plugin.run(task_vars=known)
    plugin._task.diff = True
    assert plugin.run(task_vars=known)['diff'] == [{'after': 'x'}]
    plugin.run(task_vars={})
    plugin._task = Task(dict(files=[dict(path='~/a', content='a', mode='0644')]))
    plugin.run(task_vars=known)
    plugin._task = Task(dict(files=files))
    plugin._task.delegate_to = 'spark2'
    plugin.run(task_vars=known)
    assert calls == [('direct', '/usr/bin/python3', 'write', ['files', 'remove']),
                     ('direct', '/usr/bin/python3', 'write', ['files', 'remove']),
                     ('module', 'dgxspark.ds4.file_set'), ('module', 'dgxspark.ds4.file_set'),
                     ('module', 'dgxspark.ds4.file_set')]


def test_remove_after_the_writes_only_where_present_and_never_a_directory(tmp_path):
    """remove (the restart contract's pending-restart markers): each path removed where it exists, after the files,
    named in changed_paths with a diff; absent is no change; check mode removes nothing; a directory or a relative
    path is refused; nothing at all to do is refused. The direct run and the module agree."""
    import json
    import subprocess
    import sys
    from ansible.module_utils.testing import patch_module_args as _args
    from ansible_collections.dgxspark.ds4.plugins.action import converge_state as action

    def direct(params, check_mode=False):
        params = dict(dict(files=[], remove=[]), **params)
        proc = subprocess.run([sys.executable, '-I', '-c', action._PROBE_BOOT],
                              input=action.direct_payload(params, 'write', check_mode), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, check=True)
        return json.loads(proc.stdout)

    def module(params, check=False):
        with _args(dict(params, _ansible_check_mode=check, _ansible_diff=True)):
            with pytest.raises((ExitJson, FailJson)) as info:
                mod.main()
        return info.value.args[0]

    marker = tmp_path / 'restart-pending-head'
    marker.write_text(u'restart\n')
    checked = direct({'remove': [str(marker)]}, check_mode=True)
    assert checked['changed'] is True and marker.exists()
    assert module({'remove': [str(marker)]}, check=True)['changed'] is True and marker.exists()
    res = direct({'remove': [str(marker)]})
    assert res == {'changed': True, 'changed_paths': [str(marker)],
                   'diff': [{'before_header': str(marker), 'after_header': '%s (absent)' % marker,
                             'before': '(removed: 8 bytes)\n', 'after': ''}]}
    assert not marker.exists()
    assert direct({'remove': [str(marker)]}) == {'changed': False, 'changed_paths': [], 'diff': []}
    assert module({'remove': [str(marker)]})['changed'] is False
    marker.write_text(u'restart\n')
    out = module({'remove': [str(marker)]})
    assert out['changed'] is True and out['changed_paths'] == [str(marker)] and not marker.exists()
    # written first, then removed
    new = tmp_path / 'new.env'
    both = direct({'files': [dict(path=str(new), content='A=1\n', mode='0644', owner=ME, group=GROUP, validate=None,
                                  diff=True)], 'remove': [str(new)]})
    assert both['changed_paths'] == [str(new), str(new)] and not new.exists()
    directory = direct({'remove': [str(tmp_path)]})
    assert directory['failed'] is True and '%s is a directory, not a file to remove' % tmp_path in directory['msg']
    assert tmp_path.is_dir()
    relative = direct({'remove': ['var/x']})
    assert relative['failed'] is True and 'remove: path must be absolute, got var/x' in relative['msg']
    empty = module({})
    assert empty['failed'] is True and 'nothing to write or remove' in empty['msg']
