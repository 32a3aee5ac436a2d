# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""model_revision module: the role's preflight runs state=prepare in check mode; a host_dir it would refuse fails
there, with the plan's message, before anything changes."""


import os

import pytest

from ansible.module_utils.testing import patch_module_args
from ansible_collections.dgxspark.ds4.plugins.modules import model_revision as mod
from .module_harness import ExitJson, FailJson, patch_exit

REV = '1' * 40


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    patch_exit(monkeypatch)


def run(args):
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as info:
            mod.main()
    return info.type, info.value.args[0]


@pytest.mark.parametrize('check_mode', [True, False])
def test_hub_snapshot_host_dir_fails_prepare_untouched(tmp_path, check_mode):
    repo = tmp_path / 'hub' / 'models--org--name'
    os.makedirs(str(repo / 'blobs'))
    (repo / 'blobs' / 'abc').write_text(u'{}')
    snap = repo / 'snapshots' / REV
    os.makedirs(str(snap))
    os.symlink('../../blobs/abc', str(snap / 'config.json'))
    kind, res = run({'path': str(snap), 'revision': REV, 'state': 'prepare', '_ansible_check_mode': check_mode})
    assert kind is FailJson
    assert 'ds4_effective.model.host_dir=%s' % snap in res['msg'] and 'model_cache_local_dir=%s' % snap in res['msg']
    assert res['link'] == str(snap / 'config.json') and res['target'] == '../../blobs/abc'
    assert os.path.isdir(str(snap)) and not os.path.islink(str(snap)) and (snap / 'config.json').read_text() == u'{}'
    assert not os.path.lexists(str(snap) + '.revs')


def test_flat_directory_check_mode_plans_the_adoption(tmp_path):
    host_dir = tmp_path / 'models' / 'M'
    os.makedirs(str(host_dir))
    (host_dir / 'config.json').write_text(u'{}')
    kind, res = run({'path': str(host_dir), 'revision': REV, 'state': 'prepare', '_ansible_check_mode': True})
    assert kind is ExitJson and res['adopted']['from'] == str(host_dir) and res['changed']
    assert os.path.isdir(str(host_dir)) and not os.path.islink(str(host_dir))
