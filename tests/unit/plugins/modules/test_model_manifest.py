# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the real model_manifest main() with mocked exit_json/fail_json."""


import hashlib
import json
import os

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.ds4.plugins.modules import model_manifest as mod
from .module_harness import ExitJson, FailJson, patch_exit


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    patch_exit(monkeypatch)


@pytest.fixture
def model(tmp_path):
    root = tmp_path / 'model'
    root.mkdir()
    for i in range(3):
        (root / ('model-0000%d-of-00003.safetensors' % (i + 1))).write_bytes(os.urandom(65536 + i))
    (root / 'config.json').write_bytes(b'{"a": 1}\n')
    return root


def run(args):
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as info:
            mod.main()
    return info.type, info.value.args[0]


def test_build_writes_then_is_idempotent(model, tmp_path):
    out = tmp_path / 'state' / 'manifest.json'
    out.parent.mkdir()
    kind, res = run({'path': str(model), 'mode': 'build', 'manifest': str(out), '_ansible_diff': True})
    assert kind is ExitJson and res['changed'] is True
    assert res['diff']['before'] == '' and json.loads(res['diff']['after']) == res['manifest']
    assert json.loads(out.read_text()) == res['manifest']
    assert oct(os.stat(str(out)).st_mode & 0o777) == '0o644'
    kind, res = run({'path': str(model), 'mode': 'build', 'manifest': str(out), '_ansible_diff': True})
    assert kind is ExitJson and res['changed'] is False and 'diff' not in res


def test_build_check_mode_writes_nothing(model, tmp_path):
    out = tmp_path / 'manifest.json'
    kind, res = run({'path': str(model), 'mode': 'build', 'manifest': str(out), '_ansible_check_mode': True})
    assert kind is ExitJson and res['changed'] is True
    assert not out.exists()
    assert len(res['manifest']['files']) == 4


def test_build_into_missing_directory_fails_clearly(model, tmp_path):
    out = tmp_path / 'nope' / 'manifest.json'
    kind, res = run({'path': str(model), 'mode': 'build', 'manifest': str(out)})
    assert kind is FailJson
    assert 'directory %s does not exist' % (tmp_path / 'nope') in res['msg']


def test_full_check_against_inline_manifest_fails_naming_files(model):
    kind, built = run({'path': str(model), 'mode': 'build'})
    assert kind is ExitJson and built['changed'] is False
    victim = model / 'model-00002-of-00003.safetensors'
    victim.write_bytes(victim.read_bytes()[:-1])
    kind, res = run({'path': str(model), 'mode': 'full', 'manifest_content': built['manifest']})
    assert kind is FailJson
    assert res['changed'] is False
    assert 'does not match the local reference (full)' in res['msg']
    assert 'model-00002-of-00003.safetensors (65536 of 65537 bytes)' in res['msg']
    assert res['truncated'][0]['name'] == 'model-00002-of-00003.safetensors'


def test_quick_check_from_file_ok(model, tmp_path):
    out = tmp_path / 'manifest.json'
    run({'path': str(model), 'mode': 'build', 'manifest': str(out)})
    kind, res = run({'path': str(model), 'manifest': str(out)})
    assert kind is ExitJson
    assert res['ok'] is True and res['changed'] is False and res['files_hashed'] == 0
    assert res['msg'].startswith('%s: 4 files' % model)


def test_mismatch_reported_without_failing(model):
    kind, built = run({'path': str(model), 'mode': 'build'})
    os.rename(str(model / 'config.json'), str(model / 'config.json.old'))
    kind, res = run({'path': str(model), 'mode': 'quick', 'manifest_content': json.dumps(built['manifest']),
                     'fail_on_mismatch': False})
    assert kind is ExitJson
    assert res['ok'] is False and res['missing'] == ['config.json'] and res['extra'] == ['config.json.old']


def test_hub_metadata_reference(model):
    sibs = []
    for name in sorted(os.listdir(str(model))):
        data = (model / name).read_bytes()
        lfs = {'sha256': hashlib.sha256(data).hexdigest(), 'size': len(data)} if name.endswith('.safetensors') else None
        sibs.append({'rfilename': name, 'size': len(data), 'lfs': lfs})
    kind, res = run({'path': str(model), 'mode': 'full', 'hub_metadata': sibs})
    assert kind is ExitJson, res['msg']
    assert res['size_only'] == ['config.json'] and res['reference_source'] == 'hub'


def test_missing_manifest_file(model, tmp_path):
    kind, res = run({'path': str(model), 'manifest': str(tmp_path / 'none.json')})
    assert kind is FailJson
    assert 'does not exist; build it on the head with mode=build first' in res['msg']


def test_check_without_reference(model):
    kind, res = run({'path': str(model), 'mode': 'full'})
    assert kind is FailJson
    assert 'needs a reference' in res['msg']


def test_manifest_content_refused_for_build(model):
    kind, res = run({'path': str(model), 'mode': 'build', 'manifest_content': {}})
    assert kind is FailJson
    assert 'manifest_content is the reference' in res['msg']


def test_bad_workers(model):
    kind, res = run({'path': str(model), 'mode': 'full', 'workers': 0, 'manifest_content': {}})
    assert kind is FailJson
    assert 'workers=0' in res['msg']
