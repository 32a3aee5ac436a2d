"""compile_cache: the custom_ops ["all"] guard looks into vLLM's torch.compile cache (vLLM's layout
torch_compile_cache/<hash>/rank_<r>_<dp>/...) and the marker the collection writes after readiness; cold on a
96 GiB node -> seed 002's warning, quoted."""
import json
import os

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._image import compile_cache as cc

IMG = 'sha256:' + 'a' * 64
OTHER = 'sha256:' + 'b' * 64
DIGEST = '0123456789abcdef'


def _compiled(root, hash_dir='1517964802', rank='rank_0_0', files=('backbone/computation_graph.py', 'vllm_compile_cache.py')):
    """A cache as vLLM writes it (backends.py: <VLLM_CACHE_ROOT>/torch_compile_cache/<hash>/rank_<r>_<dp>/<prefix>)."""
    for name in files:
        path = os.path.join(str(root), hash_dir, rank, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as handle:
            handle.write('# compiled\n')


def _mark(root, image_id, digest=DIGEST):
    with open(os.path.join(str(root), cc.MARKER), 'w') as handle:
        handle.write(cc.marker_content(image_id, 'dgxspark-ds4/vllm:0123', digest))


def _verdict(root, image_id=IMG, custom_ops_all=True, gib=96, digest=DIGEST):
    return cc.verdict(cc.inspect(str(root)), str(root), image_id, custom_ops_all, gib, digest)


def test_warm_when_non_empty_and_marked_by_the_same_image_and_flags(tmp_path):
    _compiled(tmp_path)
    _mark(tmp_path, IMG)
    out = _verdict(tmp_path)
    assert out['state'] == 'warm' and out['warm'] and out['warning'] is None
    assert '2 compiled file(s) written by this image' in out['msg']


def test_missing_directory_is_cold_and_warns_on_a_96_gib_node(tmp_path):
    out = _verdict(tmp_path / 'torch_compile_cache')
    assert out['state'] == 'missing' and not out['warm']
    warning = out['warning']
    assert warning.startswith('custom_ops ["all"] starts with a cold compile cache on a 96 GiB node')
    # seed 002's own words, quoted
    assert ('"The crash was caused by custom_ops: ["all"] in the --compilation-config, which triggers nvcc/cicc '
            'compilation of fusion kernels. On GB10 with only ~3 GiB RAM available during model load (CUDA allocates '
            '~95 GiB), the TileLang JIT compilation exhausts system memory and causes a full system freeze."') in warning
    assert ('"The custom_ops: ["all"] path remains usable only if compiled kernels are cached (persistent volume mount). '
            'First-run compilation needs system RAM headroom."') in warning
    assert 'Fix: drop custom_ops' in warning


def test_marker_without_compiled_files_is_empty(tmp_path):
    """Hash and rank directories without a file (a start that compiled nothing) do not count."""
    os.makedirs(str(tmp_path / '1517964802' / 'rank_0_0'))
    _mark(tmp_path, IMG)
    out = _verdict(tmp_path)
    assert out['state'] == 'empty' and out['warning'] and 'no compiled artifact' in out['warning']


def test_files_outside_rank_directories_do_not_count(tmp_path):
    _compiled(tmp_path, rank='not_a_rank')
    _mark(tmp_path, IMG)
    assert _verdict(tmp_path)['state'] == 'empty'


def test_written_by_another_image_is_cold(tmp_path):
    _compiled(tmp_path)
    _mark(tmp_path, OTHER)
    out = _verdict(tmp_path)
    assert out['state'] == 'other-image'
    assert 'written by image %s, not %s' % (OTHER, IMG) in out['warning']


def test_same_image_other_flags_is_cold(tmp_path):
    _compiled(tmp_path)
    _mark(tmp_path, IMG, digest='ffffffffffffffff')
    out = _verdict(tmp_path)
    assert out['state'] == 'other-config' and out['warning']


def test_artifacts_without_marker_are_unmarked_cold(tmp_path):
    _compiled(tmp_path)
    out = _verdict(tmp_path)
    assert out['state'] == 'unmarked' and 'which image wrote them is unknown' in out['warning']


def test_unreadable_marker_is_named(tmp_path):
    _compiled(tmp_path)
    (tmp_path / cc.MARKER).write_text('{not json')
    info = cc.inspect(str(tmp_path))
    assert info['marker'] is None and info['marker_error'].startswith(str(tmp_path / cc.MARKER))
    assert cc.verdict(info, str(tmp_path), IMG, True, 96)['state'] == 'unmarked'


@pytest.mark.parametrize('gib, custom_ops_all', [(128, True), (96, False)])
def test_no_warning_on_a_128_gib_node_or_without_custom_ops(tmp_path, gib, custom_ops_all):
    out = _verdict(tmp_path / 'absent', gib=gib, custom_ops_all=custom_ops_all)
    assert out['state'] == 'missing' and out['warning'] is None


def test_count_stops_at_the_limit(tmp_path):
    _compiled(tmp_path, files=['f%d' % i for i in range(7)])
    assert cc.inspect(str(tmp_path), limit=5)['artifacts'] == 5


def test_marker_content_is_stable_and_names_image_and_digest():
    text = cc.marker_content(IMG, 'ref:1', DIGEST)
    assert text == cc.marker_content(IMG, 'ref:1', DIGEST)
    assert json.loads(text)['image_id'] == IMG and json.loads(text)['launch_digest'] == DIGEST


@pytest.mark.parametrize('path, vols, host', [
    ('/cache/vllm/torch_compile_cache', {'/var/cache/dgxspark-ds4/vllm': '/cache/vllm'},
     '/var/cache/dgxspark-ds4/vllm/torch_compile_cache'),
    ('/root/.cache/vllm/torch_compile_cache', {'/h/root': '/root', '/h/vllm': '/root/.cache/vllm/'},
     '/h/vllm/torch_compile_cache'),  # the deepest volume wins
    ('/cache/vllm', {'/h/vllm': '/cache/vllm'}, '/h/vllm'),
    ('/cache/vllmx/torch_compile_cache', {'/h/vllm': '/cache/vllm'}, None),
    ('/cache/vllm/torch_compile_cache', {'/h/vllm': 42}, None),
])
def test_host_path_through_the_cache_volumes(path, vols, host):
    assert cc.host_path(path, vols) == host
