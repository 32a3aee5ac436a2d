# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""mxfp4_patch logic on the fixture files in tests/fixtures/mxfp4/."""


import os

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._image import mxfp4_patch as mp

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures', 'mxfp4')
DEL = '        del w13, w2, w13_scale, w2_scale, w13_bias, w2_bias\n'


def fixture(name):
    with open(os.path.join(FIXTURES, name + '.py.txt')) as handle:
        return handle.read()


def run_process_weights(text, cls_name):
    """Execute the fixture with a stub torch and call process_weights_after_loading like vLLM's loader does."""
    import sys
    import types

    calls = []
    torch = types.ModuleType('torch')
    torch.cuda = types.SimpleNamespace(is_available=lambda: True, empty_cache=lambda: calls.append('empty_cache'))
    saved = sys.modules.get('torch')
    sys.modules['torch'] = torch
    try:
        namespace = {'__name__': 'mxfp4_fixture'}
        exec(compile(text, 'mxfp4.py', 'exec'), namespace)
    finally:
        if saved is None:
            del sys.modules['torch']
        else:
            sys.modules['torch'] = saved

    class Tensor(object):
        def contiguous(self):
            return self

    layer = types.SimpleNamespace(w13_weight=Tensor(), w2_weight=Tensor(), w13_weight_scale=1, w2_weight_scale=2,
                                  w13_bias=None, w2_bias=None)
    namespace[cls_name](moe=None).process_weights_after_loading(layer)
    return calls


@pytest.mark.parametrize('name,state,blocks,grep', [
    ('unpatched', 'unpatched', 0, 0),
    ('patched', 'patched', 2, 2),
    ('double_patched', 'double-patched', 4, 4),
    ('triple_patched', 'double-patched', 6, 6),
])
def test_counts_and_status(name, state, blocks, grep):
    analysis = mp.analyse(fixture(name))
    assert analysis['blocks'] == blocks
    assert analysis['empty_cache_count'] == grep
    assert [s['scope'] for s in analysis['sites']] == [
        'Mxfp4MoEMethod.process_weights_after_loading', 'GptOssMxfp4MoEMethod.process_weights_after_loading']
    assert mp.status(analysis, 2)[0] == state


def test_messages_name_the_problem():
    assert mp.status(mp.analyse(fixture('unpatched')), 2)[1] == 'unpatched (0 blocks, expected 2)'
    msg = mp.status(mp.analyse(fixture('double_patched')), 2)[1]
    assert msg.startswith('double-patched (4 blocks, expected 2)')
    assert 'UnboundLocalError' in msg
    assert 'Mxfp4MoEMethod.process_weights_after_loading): 2' in msg


def test_report_block_locations():
    rep = mp.report(mp.analyse(fixture('double_patched')), 2)
    first = rep['sites'][0]
    assert first['names'] == ['w13', 'w2', 'w13_scale', 'w2_scale', 'w13_bias', 'w2_bias']
    assert [(b['start_line'], b['end_line']) for b in first['blocks']] == [
        (first['line'] + 1, first['line'] + 3), (first['line'] + 4, first['line'] + 6)]
    lines = fixture('double_patched').splitlines()
    assert lines[first['line'] - 1].strip().startswith('self._setup_kernel(')
    assert lines[first['blocks'][1]['start_line'] - 1] == DEL.rstrip('\n')


def test_double_patched_fixture_really_raises_unboundlocalerror():
    """The fixture reproduces the seed's failure; the normalised text does not."""
    with pytest.raises(UnboundLocalError):
        run_process_weights(fixture('double_patched'), 'Mxfp4MoEMethod')
    fixed, dummy = mp.normalise(fixture('double_patched'))
    assert run_process_weights(fixed, 'Mxfp4MoEMethod') == ['empty_cache']
    assert run_process_weights(fixed, 'GptOssMxfp4MoEMethod') == ['empty_cache']


@pytest.mark.parametrize('name', ['unpatched', 'double_patched', 'triple_patched'])
def test_normalise_reaches_the_correct_file(name):
    fixed, before = mp.normalise(fixture(name))
    assert fixed == fixture('patched').replace(fixture('patched').splitlines()[0], fixture(name).splitlines()[0], 1)
    assert mp.status(mp.analyse(fixed), 2)[0] == 'patched'
    assert before['blocks'] != 2


def test_normalise_is_idempotent():
    text = fixture('patched')
    fixed, dummy = mp.normalise(text)
    assert fixed == text


def test_partial_patch_is_completed():
    # only the first site patched (e.g. a hand edit): 1 block
    patched = fixture('patched')
    first_block = DEL + '        if torch.cuda.is_available():\n            torch.cuda.empty_cache()\n'
    idx = patched.rindex(first_block)
    partial = patched[:idx] + patched[idx + len(first_block):]
    analysis = mp.analyse(partial)
    assert analysis['blocks'] == 1
    assert mp.status(analysis, 2)[0] == 'partially-patched'
    fixed, dummy = mp.normalise(partial)
    assert fixed == patched


def test_two_blocks_on_one_site_none_on_other_is_not_patched():
    double = fixture('double_patched')
    block = DEL + '        if torch.cuda.is_available():\n            torch.cuda.empty_cache()\n'
    idx = double.rindex(block + block)
    lopsided = double[:idx] + double[idx + 2 * len(block):]
    analysis = mp.analyse(lopsided)
    assert analysis['blocks'] == 2
    assert mp.status(analysis, 2)[0] == 'double-patched'
    fixed, dummy = mp.normalise(lopsided)
    assert mp.status(mp.analyse(fixed), 2)[0] == 'patched'


def test_del_without_empty_cache_is_incomplete():
    text = fixture('unpatched').replace(
        '        self._setup_kernel(layer, w13, w2, w13_scale, w2_scale, w13_bias, w2_bias)\n',
        '        self._setup_kernel(layer, w13, w2, w13_scale, w2_scale, w13_bias, w2_bias)\n' + DEL)
    analysis = mp.analyse(text)
    assert analysis['blocks'] == 2
    state, msg = mp.status(analysis, 2)
    assert state == 'partially-patched' and 'lacks' in msg
    fixed, dummy = mp.normalise(text)
    assert mp.status(mp.analyse(fixed), 2)[0] == 'patched'


@pytest.mark.parametrize('name,needle', [
    ('unrecognised_inline', 'no "self._setup_kernel(layer, w13, w2, ...)" call found'),
    ('unrecognised_multiline', 'not as the single line'),
])
def test_unrecognised_structure_is_refused(name, needle):
    with pytest.raises(mp.Mxfp4PatchError) as err:
        mp.analyse(fixture(name))
    assert needle in err.value.msg
    assert 'refusing to guess' in err.value.msg
    with pytest.raises(mp.Mxfp4PatchError):
        mp.normalise(fixture(name))


def test_empty_cache_elsewhere_is_refused():
    text = fixture('patched') + '\n\ndef helper():\n    torch.cuda.empty_cache()\n'
    with pytest.raises(mp.Mxfp4PatchError) as err:
        mp.analyse(text)
    assert 'outside a cleanup block' in err.value.msg


def test_foreign_del_after_call_is_refused():
    text = fixture('unpatched').replace(
        '        self._setup_kernel(layer, w13, w2, w13_scale, w2_scale, w13_bias, w2_bias)\n',
        '        self._setup_kernel(layer, w13, w2, w13_scale, w2_scale, w13_bias, w2_bias)\n        del w13\n', 1)
    with pytest.raises(mp.Mxfp4PatchError) as err:
        mp.analyse(text)
    assert 'deletes w13' in err.value.msg


def test_wrong_expected_refuses_to_patch():
    with pytest.raises(mp.Mxfp4PatchError) as err:
        mp.normalise(fixture('unpatched'), expected=3)
    assert 'expected=3' in err.value.msg and '2 _setup_kernel calls' in err.value.msg
    assert mp.status(mp.analyse(fixture('patched')), 3)[0] == 'unexpected-layout'


def test_crlf_and_tabs_are_preserved():
    text = fixture('unpatched').replace('\n', '\r\n')
    fixed, dummy = mp.normalise(text)
    assert '\r\n' in fixed and '\n' not in fixed.replace('\r\n', '')
    assert mp.status(mp.analyse(fixed), 2)[0] == 'patched'
    tabbed = 'class A:\n\tdef f(self, layer, w13):\n\t\tself._setup_kernel(layer, w13)\n'
    fixed, dummy = mp.normalise(tabbed, expected=1)
    assert fixed.endswith('\t\tdel w13\n\t\tif torch.cuda.is_available():\n\t\t\ttorch.cuda.empty_cache()\n')


def test_compile_text_rejects_broken_python():
    with pytest.raises(mp.Mxfp4PatchError) as err:
        mp.compile_text('def f(:\n', '/x/mxfp4.py')
    assert '/x/mxfp4.py does not compile' in err.value.msg
    mp.compile_text(fixture('patched'), 'mxfp4.py')


class FakeDocker(object):
    def __init__(self, content=None, create_rc=0, cp_rc=0):
        self.calls = []
        self.content = content
        self.create_rc = create_rc
        self.cp_rc = cp_rc

    def __call__(self, argv):
        self.calls.append(list(argv))
        if argv[1] == 'create':
            return self.create_rc, ('' if self.create_rc else 'abc123\n'), ('no such image' if self.create_rc else '')
        if argv[1] == 'cp':
            if self.cp_rc:
                return self.cp_rc, '', 'Could not find the file'
            with open(argv[-1], 'w') as handle:
                handle.write(self.content)
            return 0, '', ''
        return 0, 'abc123\n', ''


def test_read_from_image_creates_copies_and_removes():
    docker = FakeDocker(content=fixture('double_patched'))
    text, tmpdir = mp.read_from_image(docker, 'img:tag', '/venv/mxfp4.py')
    try:
        assert text == fixture('double_patched')
        assert docker.calls == [
            ['docker', 'create', 'img:tag', 'true'],
            ['docker', 'cp', '-L', 'abc123:/venv/mxfp4.py', os.path.join(tmpdir, 'mxfp4.py')],
            ['docker', 'rm', '-f', 'abc123'],
        ]
    finally:
        import shutil
        shutil.rmtree(tmpdir)


def test_read_from_image_missing_path_removes_container():
    docker = FakeDocker(cp_rc=1)
    with pytest.raises(mp.Mxfp4PatchError) as err:
        mp.read_from_image(docker, 'img:tag', '/nope.py')
    assert 'cannot copy /nope.py out of image img:tag' in err.value.msg
    assert docker.calls[-1] == ['docker', 'rm', '-f', 'abc123']


def test_read_from_image_unknown_image():
    docker = FakeDocker(create_rc=125)
    with pytest.raises(mp.Mxfp4PatchError) as err:
        mp.read_from_image(docker, 'missing:1', '/x.py')
    assert 'docker create missing:1 failed (rc=125): no such image' in err.value.msg
    assert len(docker.calls) == 1


def test_locate_in_image_asks_the_image_python():
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, '/opt/venv/lib/python3.12/site-packages/vllm/model_executor/layers/quantization/mxfp4.py\n', ''
    path = mp.locate_in_image(run, 'img', '/opt/venv/bin/python3')
    assert path == '/opt/venv/lib/python3.12/site-packages/vllm/model_executor/layers/quantization/mxfp4.py'
    assert calls == [['docker', 'run', '--rm', '--network', 'none', '--entrypoint', '/opt/venv/bin/python3', 'img',
                      '-c', mp.LOCATE_SCRIPT]]


@pytest.mark.parametrize('rc, out, err', [(1, '', 'vllm is not importable by /usr/bin/python3'), (0, 'garbage', ''),
                                          (127, '', 'exec: "python3": executable file not found')])
def test_locate_in_image_refuses_naming_the_fix(rc, out, err):
    with pytest.raises(mp.Mxfp4PatchError) as info:
        mp.locate_in_image(lambda argv: (rc, out, err), 'img')
    assert 'does not find vllm' in info.value.msg and 'path_in_image' in info.value.msg


def test_locate_script_really_finds_a_venv_vllm(tmp_path):
    """The script run by a Python whose sys.path holds a vllm package (as a venv's does) prints its mxfp4.py."""
    import subprocess
    import sys
    pkg = tmp_path / 'site' / 'vllm'
    pkg.mkdir(parents=True)
    (pkg / '__init__.py').write_text('raise RuntimeError("must not be imported")\n')
    env = dict(os.environ, PYTHONPATH=str(tmp_path / 'site'))
    out = subprocess.check_output([sys.executable, '-S', '-c', mp.LOCATE_SCRIPT], env=env).decode().strip()
    assert out == str(pkg / 'model_executor' / 'layers' / 'quantization' / 'mxfp4.py')
    env['PYTHONPATH'] = str(tmp_path)
    proc = subprocess.run([sys.executable, '-S', '-c', mp.LOCATE_SCRIPT], env=env, capture_output=True, check=False)
    assert proc.returncode == 1 and b'vllm is not importable' in proc.stderr


def test_role_locates_with_the_same_script():
    import yaml
    role_vars = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'roles', 'container_image', 'vars', 'main.yml')
    with open(role_vars) as handle:
        assert yaml.safe_load(handle)['container_image_vllm_locate'] == mp.LOCATE_SCRIPT
