# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/_node_package as vllm_service and router run it (ansible-playbook on this machine, the lookup
dgxspark.ds4.node_package's files into a temporary libexec, one file_set run): the tree it writes is what the node scripts import. Each
node script, copied beside it, is loaded by the system's own python3 in isolated mode (-I: no PYTHONPATH, no user
site, no collections path), as the node's python3 runs it; a second run changes nothing and notifies no handler."""

import os
import shutil
import subprocess
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..'))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
NODE_PYTHON = shutil.which('python3', path='/usr/bin:/bin')
SCRIPTS = [os.path.join(REPO, 'roles', 'vllm_service', 'files', n) for n in ('prestart.py', 'pairguard.py', 'forensics.py', 'verify_unit.py')]
SCRIPTS.append(os.path.join(REPO, 'roles', 'router', 'files', 'routerpool.py'))

pytestmark = [pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason='ansible-playbook not next to the test interpreter'),
              pytest.mark.skipif(os.geteuid() != 0, reason='the role writes root-owned files (CI runs as root)')]


def _run(tmp_path, root):
    play = [{'hosts': 'localhost', 'gather_facts': False,
             'tasks': [{'name': 'The node package', 'ansible.builtin.include_role': {'name': 'dgxspark.ds4._node_package'},
                        'vars': {'_node_package_root': str(root), '_node_package_notify': 'test package changed'}}],
             'handlers': [{'name': 'test package changed', 'ansible.builtin.copy': {
                 'dest': str(tmp_path / 'handler-ran'), 'content': 'ran\n', 'mode': '0644'}}]}]
    path = tmp_path / 'play.yml'
    path.write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1')
    argv = [PLAYBOOK, '-i', 'localhost,', '-c', 'local', '-e', 'ansible_python_interpreter=%s' % sys.executable, str(path)]
    proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=300, check=False)
    return proc.returncode, proc.stdout


def test_the_shipped_tree_is_what_the_node_scripts_import_and_a_second_run_changes_nothing(tmp_path):
    if NODE_PYTHON is None:
        pytest.skip('no system python3')
    root = tmp_path / 'libexec'
    rc, out = _run(tmp_path, root)
    assert rc == 0, out[-3000:]
    assert (tmp_path / 'handler-ran').exists(), 'a first install notifies the caller'
    package = root / 'ansible_collections' / 'dgxspark' / 'ds4' / 'plugins' / 'module_utils' / '_node'
    shipped = sorted(str(p.relative_to(package.parent)) for p in package.rglob('*.py'))
    source = os.path.join(REPO, 'plugins', 'module_utils')
    expected = sorted(os.path.relpath(os.path.join(d, f), source) for d, _s, fs in os.walk(os.path.join(source, '_node'))
                      for f in fs if f.endswith('.py'))
    assert shipped == expected and '_node/pairguard/watch.py' in shipped, shipped
    for path in package.rglob('*.py'):
        assert oct(path.stat().st_mode & 0o777) == '0o644', path
        with open(os.path.join(source, str(path.relative_to(package.parent))), 'rb') as handle:
            assert path.read_bytes() == handle.read(), path  # byte for byte (nothing templated, no newline lost)
    # the node scripts beside the tree, each loaded (imports and module body, not main) by the node's python3 -I
    for script in SCRIPTS:
        shutil.copy(script, root / os.path.basename(script))
    loader = ('import importlib.util, sys\n'
              'for path in sys.argv[1:]:\n'
              '    spec = importlib.util.spec_from_file_location("node_script", path)\n'
              '    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n'
              'print("loaded", len(sys.argv) - 1)\n')
    proc = subprocess.run([NODE_PYTHON, '-I', '-c', loader] + [str(root / os.path.basename(s)) for s in SCRIPTS],
                          cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=120, check=False)
    assert proc.returncode == 0 and proc.stdout.strip().endswith('loaded %d' % len(SCRIPTS)), proc.stdout[-3000:]
    # idempotent: nothing changes, no handler
    (tmp_path / 'handler-ran').unlink()
    rc, out = _run(tmp_path, root)
    assert rc == 0 and 'changed=0' in out and not (tmp_path / 'handler-ran').exists(), out[-3000:]


def test_the_load_check_fails_without_the_package(tmp_path):
    """The import check above is not blind: the same scripts without the tree beside them fail to load."""
    if NODE_PYTHON is None:
        pytest.skip('no system python3')
    for script in SCRIPTS:
        shutil.copy(script, tmp_path / os.path.basename(script))
    proc = subprocess.run([NODE_PYTHON, '-I', '-c', 'import importlib.util, sys\n'
                           'spec = importlib.util.spec_from_file_location("node_script", sys.argv[1])\n'
                           'spec.loader.exec_module(importlib.util.module_from_spec(spec))\n', str(tmp_path / 'pairguard.py')],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=120, check=False)
    assert proc.returncode != 0 and 'ModuleNotFoundError' in proc.stdout, proc.stdout[-2000:]
