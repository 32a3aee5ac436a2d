# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the real drop_caches main() with mocked exit_json/fail_json and a fake proc root."""


import os

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.ds4.plugins.modules import drop_caches as mod
from .module_harness import ExitJson, FailJson, patch_exit


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    patch_exit(monkeypatch)
    # never sync the real machine from a unit test
    monkeypatch.setattr(os, 'sync', lambda: None)


@pytest.fixture
def proc(tmp_path):
    os.makedirs(str(tmp_path / 'sys' / 'vm'))
    (tmp_path / 'sys' / 'vm' / 'drop_caches').write_text(u'0\n')
    (tmp_path / 'meminfo').write_text(u'MemTotal: 127605836 kB\nMemAvailable: 2097152 kB\n')
    return tmp_path


def run(args):
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as info:
            mod.main()
    return info.type, info.value.args[0]


def test_writes_level_and_reports(proc):
    kind, res = run({'proc_root': str(proc), 'level': 2})
    assert kind is ExitJson
    assert res['changed'] is True
    assert (proc / 'sys' / 'vm' / 'drop_caches').read_text() == u'2\n'
    assert res['mem_available_before'] == 2 * 1024 ** 3
    assert res['freed_bytes'] == 0
    assert 'MemAvailable 2.00 GiB -> 2.00 GiB' in res['msg']


def test_check_mode_does_not_write(proc):
    kind, res = run({'proc_root': str(proc), '_ansible_check_mode': True})
    assert kind is ExitJson
    assert res['changed'] is True
    assert (proc / 'sys' / 'vm' / 'drop_caches').read_text() == u'0\n'
    assert res['mem_available_after'] is None


def test_min_available_failure_carries_numbers(proc):
    kind, res = run({'proc_root': str(proc), 'min_available': '100GiB'})
    assert kind is FailJson
    assert 'below min_available=100GiB' in res['msg']
    assert res['mem_available_after'] == 2 * 1024 ** 3
    assert res['changed'] is True


def test_bad_unit_fails_naming_option(proc):
    kind, res = run({'proc_root': str(proc), 'min_available': '100G'})
    assert kind is FailJson
    assert "min_available='100G'" in res['msg']
    assert (proc / 'sys' / 'vm' / 'drop_caches').read_text() == u'0\n'


def test_invalid_level_rejected_by_argument_spec(proc):
    kind, res = run({'proc_root': str(proc), 'level': 5})
    assert kind is FailJson
    assert 'level' in res['msg']


def test_readonly_skip(proc, monkeypatch):
    import errno
    real_open = os.open

    def erofs(path, flags, *args):
        if str(path).endswith('drop_caches'):
            raise OSError(errno.EROFS, 'Read-only file system', path)
        return real_open(path, flags, *args)
    monkeypatch.setattr(os, 'open', erofs)
    monkeypatch.setattr(os, 'access', lambda path, mode: False)
    kind, res = run({'proc_root': str(proc), 'skip_if_readonly': True})
    assert kind is ExitJson
    assert res['changed'] is False and res['skipped'] is True
    assert res['msg'] == res['reason']
    kind, res = run({'proc_root': str(proc)})
    assert kind is FailJson
    assert 'skip_if_readonly' in res['msg']
