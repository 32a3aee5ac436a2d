# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node scripts prestart.py, forensics.py, pairguard.py, verify_unit.py (roles/vllm_service/files) and routerpool.py
(roles/router/files) are thin entry points: their directory on sys.path, the node package's main, nothing else. Run as the node runs them
(python3 -I, the script beside ansible_collections/dgxspark/ds4), they keep their command lines, exit codes and
messages."""

import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import forensics
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import prestart
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import routerpool
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import verify_unit
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import cli as pairguard_cli

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..'))
SCRIPTS = {'prestart.py': ('vllm_service', prestart), 'forensics.py': ('vllm_service', forensics),
           'pairguard.py': ('vllm_service', pairguard_cli), 'verify_unit.py': ('vllm_service', verify_unit),
           'routerpool.py': ('router', routerpool)}


def _script(name):
    return os.path.join(REPO, 'roles', SCRIPTS[name][0], 'files', name)


@pytest.mark.parametrize('name', sorted(SCRIPTS))
def test_the_script_is_the_node_package_main_and_nothing_else(name):
    loader = importlib.machinery.SourceFileLoader('ds4_entry_' + name[:-3], _script(name))
    mod = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(mod)
    assert mod.main is SCRIPTS[name][1].main
    assert sorted(k for k in vars(mod) if not k.startswith('__')) == ['main', 'os', 'sys']


@pytest.fixture(name='libexec')
def _libexec(tmp_path):
    """A node's libexec: the scripts beside ansible_collections/dgxspark/ds4 (this checkout)."""
    os.makedirs(str(tmp_path / 'ansible_collections' / 'dgxspark'))
    os.symlink(REPO, str(tmp_path / 'ansible_collections' / 'dgxspark' / 'ds4'))
    for name in SCRIPTS:
        shutil.copy(_script(name), str(tmp_path / name))
    return tmp_path


def _run(libexec, name, *args):
    proc = subprocess.run([sys.executable, '-I', str(libexec / name)] + list(args), cwd=str(libexec), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=60, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def test_the_command_lines_exit_codes_and_messages(libexec):
    rc, out, err = _run(libexec, 'prestart.py')
    assert (rc, out) == (2, '') and err == 'usage: %s [--stopped] CONFIG.json\n' % (libexec / 'prestart.py')
    rc, out, err = _run(libexec, 'prestart.py', '--stopped', str(libexec / 'absent.json'))
    assert rc == 1 and err.startswith('dgxspark-ds4 prestart: cannot read config %s: ' % (libexec / 'absent.json')), err
    (libexec / 'cfg.json').write_text('{"role": "worker"}')
    assert _run(libexec, 'prestart.py', '--stopped', str(libexec / 'cfg.json')) == (0, '', '')
    rc, out, err = _run(libexec, 'forensics.py', 'release')
    assert (rc, out) == (2, '') and err == 'usage: %s ack CONFIG.json\n' % (libexec / 'forensics.py')
    rc, out, err = _run(libexec, 'forensics.py', 'ack', str(libexec / 'absent.json'))
    assert rc == 1 and err.startswith('dgxspark-ds4 forensics: cannot read config'), err
    rc, out, err = _run(libexec, 'pairguard.py', 'watch')
    assert (rc, out) == (2, '') and err == 'usage: %s watch|reset-window CONFIG.json\n' % (libexec / 'pairguard.py')
    rc, out, err = _run(libexec, 'pairguard.py', 'reset-window', str(libexec / 'absent.json'))
    assert rc == 1 and err.startswith('dgxspark-ds4 pairguard: cannot read config %s: ' % (libexec / 'absent.json')), err
    (libexec / 'guard.json').write_text('[]')
    rc, out, err = _run(libexec, 'pairguard.py', 'watch', str(libexec / 'guard.json'))
    assert (rc, out, err) == (2, '', 'dgxspark-ds4 pairguard: config %s: the config is not a JSON object\n' % (libexec / 'guard.json'))
    rc, out, err = _run(libexec, 'verify_unit.py', 'unit-file-only')
    assert (rc, out) == (2, '') and err == 'usage: %s UNIT_FILE UNIT_NAME [DOCKER_CLI]\n' % (libexec / 'verify_unit.py')
    rc, out, err = _run(libexec, 'verify_unit.py', '--dropins', 'dgxspark-ds4-head.service')
    assert (rc, out) == (2, '') and err == 'usage: %s --dropins UNIT_NAME UNIT_FILE [ALLOWED_DROPIN ...]\n' % (
        libexec / 'verify_unit.py')
    (libexec / 'x.service').write_text('[Service]\nExecStart=/nonexistent/launch.sh\n')
    rc, out, err = _run(libexec, 'verify_unit.py', str(libexec / 'x.service'), 'x.service')
    assert rc == 1 and out == '' and err.startswith('dgxspark-ds4 verify-unit x.service: ExecStart: executable /nonexistent/'
                                                    'launch.sh does not exist or is not executable'), err
    rc, out, err = _run(libexec, 'routerpool.py')
    assert (rc, out, err) == (1, '', 'usage: routerpool.py <config.json>\n')
    (libexec / 'pool.json').write_text('{"router_url": "http://127.0.0.1:9"}')
    rc, out, err = _run(libexec, 'routerpool.py', str(libexec / 'pool.json'))
    assert rc == 1 and 'needs router_url and a workers list (missing: workers)' in err, err
