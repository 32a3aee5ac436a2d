# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real unit_dropins main() (the vllm_service preflight's drop-in check) with mocked exit_json/fail_json, a fake
systemctl on PATH and the drop-in directories under tmp_path: the same problems and lines as `verify_unit.py --dropins`
(the node package's verify_unit, one copy of the check), in check mode too."""


import os

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import verify_unit
from ansible_collections.dgxspark.ds4.plugins.modules import unit_dropins as mod
from .module_harness import ExitJson, patch_exit, run_main

UNIT = 'dgxspark-ds4-head.service'
UNIT_FILE = '/etc/systemd/system/dgxspark-ds4-head.service'
OVERRIDE = '/etc/systemd/system/dgxspark-ds4-head.service.d/override.conf'
SHOW = ('ExecStart={ path=/usr/local/bin/launch-old.sh ; argv[]=/usr/local/bin/launch-old.sh --port 8000 ; '
        'ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\n'
        'FragmentPath=/etc/systemd/system/dgxspark-ds4-head.service\n'
        'DropInPaths=%s /usr/lib/systemd/system/service.d/10-timeout-abort.conf\n'
        'NeedDaemonReload=no\n' % OVERRIDE)


@pytest.fixture(autouse=True)
def node(tmp_path, monkeypatch):
    patch_exit(monkeypatch)
    fake = tmp_path / 'bin'
    fake.mkdir()
    (fake / 'systemctl').write_text(u'#!/bin/sh\necho "$@" >> %s\ncat <<"EOF"\n%sEOF\n' % (tmp_path / 'argv', SHOW))
    os.chmod(str(fake / 'systemctl'), 0o755)
    monkeypatch.setenv('PATH', '%s:%s' % (fake, os.environ['PATH']))
    monkeypatch.setattr(verify_unit, 'DROPIN_ROOTS', (str(tmp_path / 'etc'),))
    return tmp_path


def test_a_foreign_dropin_is_a_problem_with_the_clis_line(node, capsys):
    kind, res = run_main(mod.main, {'unit': UNIT, 'unit_file': UNIT_FILE})
    assert kind is ExitJson and res['changed'] is False
    assert len(res['problems']) == 1 and res['problems'][0].startswith('drop-in %s was not written by dgxspark.ds4' % OVERRIDE)
    assert 'ExecStart now: /usr/local/bin/launch-old.sh --port 8000' in res['problems'][0]
    assert 'vllm_service_allowed_dropins: [%s]' % OVERRIDE in res['problems'][0]
    assert res['msg'] == 'dgxspark-ds4 verify-unit %s: %s' % (UNIT, res['problems'][0])
    assert (node / 'argv').read_text().split() == ['show', UNIT, '-p', 'DropInPaths,FragmentPath,ExecStart,NeedDaemonReload']
    # the node script's --dropins prints the same line
    assert verify_unit.main(['verify-unit', '--dropins', UNIT, UNIT_FILE]) == 1
    assert capsys.readouterr().err == res['msg'] + '\n'


def test_allowed_dropins_and_one_waiting_for_a_daemon_reload(node):
    kind, res = run_main(mod.main, {'unit': UNIT, 'unit_file': UNIT_FILE, 'allowed': [OVERRIDE]})
    assert kind is ExitJson and res['problems'] == []
    assert res['msg'] == 'dgxspark-ds4 verify-unit %s: no foreign drop-in (%s allowed)' % (UNIT, OVERRIDE)
    waiting = node / 'etc' / 'dgxspark-ds4-.service.d' / 'env.conf'
    waiting.parent.mkdir(parents=True)
    waiting.write_text(u'[Service]\nEnvironment=A=1\n')
    kind, res = run_main(mod.main, {'unit': UNIT, 'unit_file': UNIT_FILE, 'allowed': [OVERRIDE], '_ansible_check_mode': True})
    assert kind is ExitJson and res['changed'] is False and len(res['problems']) == 1, res
    assert 'drop-in %s was not written' % waiting in res['msg'] and 'takes effect at the next daemon-reload' in res['msg']


def test_a_shadowing_unit_file_and_an_allowed_entry_that_is_not_a_dropin(node):
    kind, res = run_main(mod.main, {'unit': UNIT, 'unit_file': '/usr/local/lib/systemd/system/' + UNIT,
                                    'allowed': [OVERRIDE, 'override.conf']})
    assert kind is ExitJson and len(res['problems']) == 2, res
    assert res['problems'][0].startswith("vllm_service_allowed_dropins entry 'override.conf' is not the absolute path")
    assert res['problems'][1].startswith('systemd loads the unit from %s, not from /usr/local/lib/systemd/system/' % UNIT_FILE)
    assert res['msg'].split('\n') == ['dgxspark-ds4 verify-unit %s: %s' % (UNIT, p) for p in res['problems']]
