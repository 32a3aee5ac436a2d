# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The test harness's shared AnsiballZ cache (tests/harness/callback_plugins/ansiballz_share.py): its key moves
with any module or module_utils file (never a payload built from other code), and through ansible-playbook a second
run takes the payload the first built while a changed module_utils file gets a new one."""


import os
import shutil
import subprocess
import sys

import pytest

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'harness')
sys.path.insert(0, os.path.join(HARNESS, 'callback_plugins'))
import ansiballz_share as cache  # noqa: E402  pylint: disable=wrong-import-position,import-error

BIN = os.path.dirname(sys.executable)


def _tree(root, util='VALUE = 1\n'):
    os.makedirs(os.path.join(root, 'plugins', 'modules'), exist_ok=True)
    os.makedirs(os.path.join(root, 'plugins', 'module_utils', 'sub'), exist_ok=True)
    with open(os.path.join(root, 'plugins', 'modules', 'm.py'), 'w') as handle:
        handle.write('# module\n')
    with open(os.path.join(root, 'plugins', 'module_utils', 'sub', 'u.py'), 'w') as handle:
        handle.write(util)


def test_the_key_moves_with_any_module_or_module_utils_file_and_not_with_other_files(tmp_path):
    _tree(str(tmp_path))
    first = cache.cache_key(str(tmp_path))
    assert cache.cache_key(str(tmp_path)) == first
    (tmp_path / 'README.md').write_text('not part of a payload')
    assert cache.cache_key(str(tmp_path)) == first
    _tree(str(tmp_path), util='VALUE = 2\n')
    changed = cache.cache_key(str(tmp_path))
    assert changed != first
    (tmp_path / 'plugins' / 'modules' / 'n.py').write_text('# another module\n')
    assert cache.cache_key(str(tmp_path)) not in (first, changed)


def test_share_links_the_runs_cache_and_keeps_one_the_run_built_already(tmp_path):
    run, other = tmp_path / 'run', tmp_path / 'other'
    run.mkdir()
    other.mkdir()
    target = cache.share(str(run), str(tmp_path / 'shared'), 'k1')
    assert target == str(tmp_path / 'shared' / 'k1') and os.path.islink(str(run / 'ansiballz_cache'))
    (other / 'ansiballz_cache').mkdir()
    assert cache.share(str(other), str(tmp_path / 'shared'), 'k1') == str(other / 'ansiballz_cache')


PLAYBOOK = '''
- hosts: localhost
  gather_facts: false
  tasks:
    - name: A module of the collection, with a module_utils file
      ds4test.cc.echo:
      register: echoed
    - name: Its value
      ansible.builtin.debug:
        msg: "echo={{ echoed.value }}"
'''
MODULE = '''#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ds4test.cc.plugins.module_utils.value import VALUE
AnsibleModule(argument_spec={}).exit_json(changed=False, value=VALUE)
'''


@pytest.mark.skipif(not os.path.isfile(os.path.join(BIN, 'ansible-playbook')), reason='needs the venv')
def test_a_second_run_takes_the_first_runs_payload_and_a_changed_module_utils_file_a_new_one(tmp_path):
    coll = tmp_path / 'colls' / 'ansible_collections' / 'ds4test' / 'cc'
    (coll / 'plugins' / 'modules').mkdir(parents=True)
    (coll / 'plugins' / 'module_utils').mkdir(parents=True)
    (coll / 'galaxy.yml').write_text('namespace: ds4test\nname: cc\nversion: 1.0.0\nreadme: README.md\nauthors: [t]\n')
    (coll / 'plugins' / 'modules' / 'echo.py').write_text(MODULE)
    (coll / 'plugins' / 'module_utils' / 'value.py').write_text('VALUE = "one"\n')
    plugin_dir = tmp_path / 'callbacks'
    plugin_dir.mkdir()
    # the callback keys on the tree it sits in: a copy inside this test's collection (three levels under its root)
    harness_copy = coll / 'tests' / 'harness' / 'callback_plugins'
    harness_copy.mkdir(parents=True)
    shutil.copy(cache.__file__, str(harness_copy))
    (tmp_path / 'pb.yml').write_text(PLAYBOOK)
    (tmp_path / 'ansible.cfg').write_text('[defaults]\n')
    shared = tmp_path / 'shared'
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(tmp_path / 'colls'), ANSIBLE_CALLBACK_PLUGINS=str(harness_copy),
               ANSIBLE_CALLBACKS_ENABLED='ansiballz_share', ANSIBALLZ_SHARE_DIR=str(shared), ANSIBLE_DEBUG='1',
               ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'), ANSIBLE_CONFIG=str(tmp_path / 'ansible.cfg'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)

    def run():
        proc = subprocess.run([os.path.join(BIN, 'ansible-playbook'), '-c', 'local', '-i', 'localhost,', str(tmp_path / 'pb.yml')],
                              env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, check=False)
        assert proc.returncode == 0, proc.stdout[-3000:]
        return proc.stdout

    first = run()
    assert 'echo=one' in first and 'ANSIBALLZ: Creating module' in first
    keys = os.listdir(str(shared))
    assert len(keys) == 1
    second = run()
    assert 'echo=one' in second and 'ANSIBALLZ: using cached module' in second and 'ANSIBALLZ: Creating module' not in second
    (coll / 'plugins' / 'module_utils' / 'value.py').write_text('VALUE = "two"\n')
    third = run()
    assert 'echo=two' in third and 'ANSIBALLZ: Creating module' in third
    assert len(os.listdir(str(shared))) == 2
