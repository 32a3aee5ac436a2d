# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the real mxfp4_patch main() with mocked exit_json/fail_json on fixture copies."""


import os
import shutil

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.ds4.plugins.modules import mxfp4_patch as mod
from .module_harness import ExitJson, FailJson, patch_exit

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures', 'mxfp4')


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    patch_exit(monkeypatch)


def copy_fixture(tmp_path, name):
    dest = tmp_path / 'mxfp4.py'
    shutil.copy(os.path.join(FIXTURES, name + '.py.txt'), str(dest))
    return dest


def run(args):
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as info:
            mod.main()
    return info.type, info.value.args[0]


def test_check_passes_on_patched(tmp_path):
    path = copy_fixture(tmp_path, 'patched')
    kind, res = run({'path': str(path)})
    assert kind is ExitJson
    assert res['changed'] is False
    assert res['status'] == 'patched' and res['blocks_before'] == 2 and res['empty_cache_before'] == 2


@pytest.mark.parametrize('name,needle', [
    ('unpatched', 'is unpatched (0 blocks, expected 2)'),
    ('double_patched', 'is double-patched (4 blocks, expected 2)'),
    ('triple_patched', 'is double-patched (6 blocks, expected 2)'),
])
def test_check_fails_naming_state(tmp_path, name, needle):
    path = copy_fixture(tmp_path, name)
    before = path.read_text()
    kind, res = run({'path': str(path), 'state': 'check'})
    assert kind is FailJson
    assert needle in res['msg']
    assert path.read_text() == before


def test_present_fixes_double_patched_with_diff_and_backup(tmp_path):
    path = copy_fixture(tmp_path, 'double_patched')
    kind, res = run({'path': str(path), 'state': 'present', 'backup': True, '_ansible_diff': True})
    assert kind is ExitJson, res
    assert res['changed'] is True
    assert (res['blocks_before'], res['blocks_after']) == (4, 2)
    assert res['status_before'] == 'double-patched' and res['status'] == 'patched'
    assert res['diff']['before'].count('torch.cuda.empty_cache()') == 4
    assert res['diff']['after'].count('torch.cuda.empty_cache()') == 2
    assert path.read_text() == res['diff']['after']
    assert os.path.isfile(res['backup_file'])
    with open(res['backup_file']) as handle:
        assert handle.read() == res['diff']['before']
    assert os.path.isdir(str(tmp_path / '__pycache__'))  # byte-compiled
    # second run: nothing to do
    kind, res = run({'path': str(path), 'state': 'present'})
    assert kind is ExitJson and res['changed'] is False and res['blocks_after'] == 2


def test_present_check_mode_does_not_write(tmp_path):
    path = copy_fixture(tmp_path, 'unpatched')
    before = path.read_text()
    kind, res = run({'path': str(path), 'state': 'present', '_ansible_check_mode': True, '_ansible_diff': True})
    assert kind is ExitJson
    assert res['changed'] is True
    assert path.read_text() == before
    assert 'torch.cuda.empty_cache()' in res['diff']['after']
    assert res['message'].startswith('would rewrite: unpatched (0 blocks, expected 2)')
    assert not (tmp_path / '__pycache__').exists()


@pytest.mark.parametrize('state', ['check', 'present'])
def test_unrecognised_refused_in_both_states(tmp_path, state):
    path = copy_fixture(tmp_path, 'unrecognised_inline')
    before = path.read_text()
    kind, res = run({'path': str(path), 'state': state})
    assert kind is FailJson
    assert 'refusing to guess' in res['msg'] and str(path) in res['msg']
    assert path.read_text() == before


def test_image_with_present_is_refused():
    kind, res = run({'image': 'vllm:x', 'state': 'present'})
    assert kind is FailJson
    assert 'state=present is not allowed with image=vllm:x' in res['msg']


def test_image_check_uses_docker_cli(tmp_path, monkeypatch):
    src = os.path.join(FIXTURES, 'double_patched.py.txt')
    calls = []

    def fake_run_command(self, argv, **kwargs):
        calls.append(argv[1])
        if argv[1] == 'create':
            return 0, 'cid42\n', ''
        if argv[1] == 'cp':
            shutil.copy(src, argv[-1])
        return 0, '', ''
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', fake_run_command)
    kind, res = run({'image': 'vllm:x', 'docker_cli': '/usr/bin/docker',
                     'path_in_image': '/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/quantization/mxfp4.py'})
    assert kind is FailJson
    assert res['msg'].startswith('vllm:x:/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/'
                                 'quantization/mxfp4.py is double-patched (4 blocks, expected 2)')
    assert calls == ['create', 'cp', 'rm']


VENV = '/opt/venv/lib/python3.12/site-packages/vllm/model_executor/layers/quantization/mxfp4.py'


def test_image_path_from_the_image_python_when_omitted(monkeypatch):
    src = os.path.join(FIXTURES, 'patched.py.txt')
    calls = []

    def fake_run_command(self, argv, **kwargs):
        calls.append(list(argv))
        if argv[1] == 'run':
            return 0, VENV + '\n', ''
        if argv[1] == 'create':
            return 0, 'cid42\n', ''
        if argv[1] == 'cp':
            assert argv[-2] == 'cid42:' + VENV
            shutil.copy(src, argv[-1])
        return 0, '', ''
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', fake_run_command)
    kind, res = run({'image': 'b12x:x', 'docker_cli': '/usr/bin/docker', 'python': '/opt/venv/bin/python3'})
    assert kind is ExitJson, res
    assert res['source'] == 'b12x:x:' + VENV and res['status'] == 'patched'
    assert calls[0][:9] == ['/usr/bin/docker', 'run', '--rm', '--network', 'none', '--entrypoint', '/opt/venv/bin/python3',
                            'b12x:x', '-c']
    assert [c[1] for c in calls] == ['run', 'create', 'cp', 'rm']


def test_image_without_vllm_names_the_fix(monkeypatch):
    def fake_run_command(self, argv, **kwargs):
        return 1, '', 'vllm is not importable by /usr/bin/python3'
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', fake_run_command)
    kind, res = run({'image': 'x:y', 'docker_cli': '/usr/bin/docker'})
    assert kind is FailJson
    assert 'python3 in image x:y does not find vllm' in res['msg'] and 'path_in_image' in res['msg']


def test_missing_path(tmp_path):
    kind, res = run({'path': str(tmp_path / 'nope.py')})
    assert kind is FailJson
    assert 'does not exist' in res['msg']


def test_path_and_image_are_exclusive(tmp_path):
    kind, res = run({'path': str(tmp_path / 'x.py'), 'image': 'i'})
    assert kind is FailJson
    assert 'mutually exclusive' in res['msg']
