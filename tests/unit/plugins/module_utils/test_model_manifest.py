# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""model_manifest logic on small synthetic model directories."""


import hashlib
import json
import os
import threading

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._model import model_manifest as mm

SHARDS = ['model-00001-of-00003.safetensors', 'model-00002-of-00003.safetensors', 'model-00003-of-00003.safetensors']


def sha(data):
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def model(tmp_path):
    """Three 'shards' of pseudo-random bytes plus configs, like a small HF snapshot."""
    root = tmp_path / 'model'
    root.mkdir()
    content = {}
    for i, name in enumerate(SHARDS):
        data = os.urandom(200000 + i * 4096 + 7)
        (root / name).write_bytes(data)
        content[name] = data
    for name, data in (('config.json', b'{"model_type": "deepseek_v4"}\n'),
                       ('tokenizer/tokenizer.json', b'{"version": "1.0"}\n')):
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_bytes(data)
        content[name] = data
    # things that must be ignored by default
    (root / '.cache' / 'huggingface').mkdir(parents=True)
    (root / '.cache' / 'huggingface' / 'download.metadata').write_bytes(b'x')
    (root / 'model-00001-of-00003.safetensors.lock').write_bytes(b'')
    return root, content


def hub_siblings(content):
    sibs = []
    for name, data in sorted(content.items()):
        entry = {'rfilename': name, 'size': len(data), 'blob_id': sha(data)[:40]}
        if name.endswith('.safetensors'):
            entry['lfs'] = {'sha256': sha(data), 'size': len(data), 'pointer_size': 134}
        else:
            entry['lfs'] = None
        sibs.append(entry)
    return sibs


def test_scan_excludes_defaults(model):
    root, content = model
    sizes, unreadable = mm.scan(str(root))
    assert sizes == dict((k, len(v)) for k, v in content.items())
    assert unreadable == []


def test_scan_follows_file_symlinks_like_hf_snapshots(tmp_path):
    blobs = tmp_path / 'blobs'
    snap = tmp_path / 'snap'
    blobs.mkdir()
    snap.mkdir()
    (blobs / 'abc').write_bytes(b'12345')
    os.symlink(str(blobs / 'abc'), str(snap / 'model.safetensors'))
    sizes, dummy = mm.scan(str(snap))
    assert sizes == {'model.safetensors': 5}
    digests, errors, num = mm.hash_files(str(snap), ['model.safetensors'])
    assert digests == {'model.safetensors': sha(b'12345')} and num == 5


def test_build_hashes_everything(model):
    root, content = model
    res = mm.build(str(root), workers=2)
    assert res['ok'] is True
    assert res['manifest']['files'] == dict((k, {'size': len(v), 'sha256': sha(v)}) for k, v in content.items())
    assert res['manifest']['source'] == 'local'
    assert res['bytes_hashed'] == sum(len(v) for v in content.values())


def test_manifest_text_is_deterministic(model):
    root, dummy = model
    first = mm.dumps(mm.build(str(root))['manifest'])
    second = mm.dumps(mm.build(str(root), workers=1)['manifest'])
    assert first == second
    assert mm.load_manifest(first) == json.loads(first)


def test_full_check_clean(model):
    root, dummy = model
    ref = mm.build(str(root))['manifest']
    res = mm.check(str(root), ref, mode='full', workers=3)
    assert res['ok'] is True and res['mismatches'] == 0 and res['problems'] == ''
    assert res['files_hashed'] == 5


def test_shard_truncated_by_one_byte(model):
    root, content = model
    ref = mm.build(str(root))['manifest']
    victim = root / SHARDS[1]
    victim.write_bytes(content[SHARDS[1]][:-1])
    for mode in ('quick', 'full'):
        res = mm.check(str(root), ref, mode=mode)
        assert res['ok'] is False
        assert res['truncated'] == [dict(name=SHARDS[1], expected_size=len(content[SHARDS[1]]),
                                         actual_size=len(content[SHARDS[1]]) - 1)]
        assert res['missing'] == [] and res['extra'] == [] and res['sha256_mismatch'] == []
        assert '1 truncated: %s (%d of %d bytes)' % (SHARDS[1], len(content[SHARDS[1]]) - 1,
                                                     len(content[SHARDS[1]])) in res['problems']


def test_renamed_file_is_missing_plus_extra(model):
    root, dummy = model
    ref = mm.build(str(root))['manifest']
    os.rename(str(root / SHARDS[2]), str(root / (SHARDS[2] + '.bak')))
    res = mm.check(str(root), ref, mode='quick')
    assert res['missing'] == [SHARDS[2]]
    assert res['extra'] == [SHARDS[2] + '.bak']
    assert res['mismatches'] == 2
    assert '1 missing: %s' % SHARDS[2] in res['problems']
    assert '1 extra: %s.bak' % SHARDS[2] in res['problems']


def test_same_size_corruption_only_full_detects(model):
    root, content = model
    ref = mm.build(str(root))['manifest']
    data = bytearray(content[SHARDS[0]])
    data[1000] ^= 0xFF
    (root / SHARDS[0]).write_bytes(bytes(data))
    assert mm.check(str(root), ref, mode='quick')['ok'] is True
    res = mm.check(str(root), ref, mode='full')
    assert [d['name'] for d in res['sha256_mismatch']] == [SHARDS[0]]
    assert res['sha256_mismatch'][0]['actual_sha256'] == sha(bytes(data))


def test_larger_file_is_size_mismatch(model):
    root, content = model
    ref = mm.build(str(root))['manifest']
    (root / 'config.json').write_bytes(content['config.json'] + b' ')
    res = mm.check(str(root), ref, mode='full')
    size = len(content['config.json'])
    assert res['size_mismatch'] == [dict(name='config.json', expected_size=size, actual_size=size + 1)]
    assert res['truncated'] == []


def test_hub_metadata_to_manifest(model):
    root, content = model
    hub = mm.manifest_from_hub(hub_siblings(content))
    assert hub['files'][SHARDS[0]] == {'size': len(content[SHARDS[0]]), 'sha256': sha(content[SHARDS[0]])}
    assert hub['files']['config.json'] == {'size': len(content['config.json']), 'sha256': None}
    # the hub API JSON shape (a dict with siblings) is accepted too
    assert mm.manifest_from_hub({'siblings': hub_siblings(content)}) == hub


def test_hub_reference_checks_non_lfs_by_size_only(model):
    root, content = model
    hub = mm.manifest_from_hub(hub_siblings(content))
    (root / 'config.json').write_bytes(b'{"model_type": "deepseek_v5"}\n')  # same length, different bytes
    res = mm.check(str(root), hub, mode='full')
    assert res['ok'] is True
    assert res['size_only'] == ['config.json', 'tokenizer/tokenizer.json']
    assert res['files_hashed'] == 3


def test_head_manifest_fills_non_lfs_sha256(model):
    root, content = model
    head = mm.build(str(root))['manifest']
    reference = mm.merge_head(mm.manifest_from_hub(hub_siblings(content)), head)
    assert reference['source'] == 'hub+head'
    (root / 'config.json').write_bytes(b'{"model_type": "deepseek_v5"}\n')
    res = mm.check(str(root), reference, mode='full')
    assert [d['name'] for d in res['sha256_mismatch']] == ['config.json']
    assert res['size_only'] == []


def test_build_from_hub_hashes_only_non_lfs(model):
    root, content = model
    res = mm.build(str(root), hub=mm.manifest_from_hub(hub_siblings(content)))
    assert res['ok'] is True
    assert res['files_hashed'] == 2
    assert res['manifest']['files'] == dict((k, {'size': len(v), 'sha256': sha(v)}) for k, v in content.items())
    assert res['manifest']['source'] == 'hub+head'


def test_build_from_hub_reports_bad_head_copy(model):
    root, content = model
    (root / SHARDS[0]).write_bytes(content[SHARDS[0]][:-1])
    res = mm.build(str(root), hub=mm.manifest_from_hub(hub_siblings(content)))
    assert res['ok'] is False
    assert [d['name'] for d in res['truncated']] == [SHARDS[0]]
    # the reference keeps the hub's size and sha256, not the broken local ones
    assert res['manifest']['files'][SHARDS[0]]['size'] == len(content[SHARDS[0]])


def test_hashing_runs_in_parallel(model, monkeypatch):
    """Several files are hashed at the same time by the pool (not one after another)."""
    root, dummy = model
    active = [0]
    peak = [0]
    lock = threading.Lock()
    barrier = threading.Barrier(3, timeout=5)
    real = mm.hash_file

    def tracking(path, read_size, evict):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            if path.endswith('.safetensors'):
                barrier.wait()  # only passes if 3 shards are in flight together
            return real(path, read_size, evict)
        finally:
            with lock:
                active[0] -= 1
    monkeypatch.setattr(mm, 'hash_file', tracking)
    digests, errors, dummy = mm.hash_files(str(root), SHARDS + ['config.json'], workers=4)
    assert errors == [] and len(digests) == 4
    assert peak[0] >= 3


def test_small_read_size_gives_same_digest(model):
    root, content = model
    digest, num = mm.hash_file(str(root / SHARDS[2]), read_size=4096, evict=True)
    assert digest == sha(content[SHARDS[2]]) and num == len(content[SHARDS[2]])


def test_unreadable_file_reported(model, monkeypatch):
    root, dummy = model
    ref = mm.build(str(root))['manifest']
    real = mm.hash_file

    def failing(path, read_size, evict):
        if path.endswith(SHARDS[0]):
            raise IOError(5, 'Input/output error')
        return real(path, read_size, evict)
    monkeypatch.setattr(mm, 'hash_file', failing)
    res = mm.check(str(root), ref, mode='full')
    assert res['ok'] is False
    assert [u['name'] for u in res['unreadable']] == [SHARDS[0]]
    assert 'Input/output error' in res['problems']


def test_custom_excludes_and_manifest_inside_dir(model):
    root, dummy = model
    manifest_path = root / 'manifest.json'
    manifest_path.write_text(u'{}')
    sizes, dummy = mm.scan(str(root), excludes=['tokenizer/**'], skip=[str(manifest_path)])
    assert 'tokenizer/tokenizer.json' not in sizes
    assert 'manifest.json' not in sizes
    assert '.cache/huggingface/download.metadata' in sizes  # defaults replaced, not merged


@pytest.mark.parametrize('bad,needle', [
    ('not json', 'is not valid JSON'),
    ({'files': {'a': {'size': -1, 'sha256': None}}}, "has size -1"),
    ({'files': {'a': {'size': 1, 'sha256': 'xyz'}}}, 'expected 64 hex digits'),
    ({'files': {'../etc/passwd': {'size': 1, 'sha256': None}}}, 'not a relative path'),
    ({'format': 'other', 'files': {}}, "has format 'other'"),
    (42, 'must be a manifest mapping or list'),
])
def test_bad_manifest_is_explained(bad, needle):
    with pytest.raises(mm.ManifestError) as err:
        mm.load_manifest(bad)
    assert needle in err.value.msg and 'manifest_content' in err.value.msg


def test_hub_metadata_without_size():
    with pytest.raises(mm.ManifestError) as err:
        mm.manifest_from_hub([{'rfilename': 'a.safetensors', 'lfs': None}])
    assert 'files_metadata=True' in err.value.msg


def test_not_a_directory(tmp_path):
    with pytest.raises(mm.ManifestError) as err:
        mm.scan(str(tmp_path / 'nope'))
    assert 'is not a directory' in err.value.msg


def test_long_lists_are_capped_in_the_message():
    diff = dict(missing=['f%02d' % i for i in range(15)], extra=[], truncated=[], size_mismatch=[],
                sha256_mismatch=[], size_only=[])
    text = mm.describe(diff)
    assert text.startswith('15 missing: f00, f01') and text.endswith('f09 and 5 more')


# --------------------------------------------------------------------------- hub cache snapshots (files are links into blobs/)

def test_manifest_reads_through_hub_cache_links(tmp_path):
    """snapshots/<rev>/<file> -> ../../blobs/<sha256>: sizes and sha256 are the blobs', a bad blob is found,
    a link whose blob is missing (what a link copied to another node is) is reported, not skipped."""
    repo = tmp_path / 'models--deepseek-ai--DeepSeek-V4-Flash'
    snap = repo / 'snapshots' / ('a' * 40)
    (snap / 'sub').mkdir(parents=True)
    (repo / 'blobs').mkdir()
    files = {'model-00001-of-00001.safetensors': os.urandom(200001), 'config.json': b'{}\n', 'sub/tok.json': b'[1]\n'}
    for rel, data in files.items():
        blob = repo / 'blobs' / sha(data)
        blob.write_bytes(data)
        os.symlink(os.path.relpath(str(blob), str((snap / rel).parent)), str(snap / rel))
    built = mm.build(str(snap))
    assert built['ok'] and built['files_hashed'] == 3
    assert built['manifest']['files'] == dict((r, {'size': len(d), 'sha256': sha(d)}) for r, d in files.items())
    ref = mm.load_manifest(built['manifest'])
    assert mm.check(str(snap), ref, 'full')['ok']
    # a corrupt blob is seen through its link
    shard = 'model-00001-of-00001.safetensors'
    with open(str(snap / shard), 'r+b') as f:
        f.seek(7)
        f.write(b'XXXX')
    r = mm.check(str(snap), ref, 'full')
    assert not r['ok'] and [d['name'] for d in r['sha256_mismatch']] == [shard]
    # links without their blobs (a copy that shipped the links): every file reported
    other = tmp_path / 'worker'
    (other / 'sub').mkdir(parents=True)
    for rel in files:
        os.symlink(os.readlink(str(snap / rel)), str(other / rel))
    r = mm.check(str(other), ref, 'quick')
    assert not r['ok'] and sorted(d['name'] for d in r['unreadable']) == sorted(files)


def test_changed_since_hashes_only_the_files_rewritten_since_the_verified_state(model):
    """The head's tree changed under the same identity: a same-size rewrite (new mtime) is hashed and named; the
    files unchanged since the last verified check are not read again."""
    root, content = model
    ref = mm.build(str(root))['manifest']
    verified = mm.check(str(root), ref, mode='quick')
    assert verified['ok'] and sorted(verified['listing']) == sorted(content)
    assert all(len(entry) == 2 for entry in verified['listing'].values())
    # nothing changed: nothing hashed
    res = mm.check(str(root), ref, mode='full', changed_since=verified['listing'])
    assert res['ok'] and res['hashed_files'] == [] and res['files_hashed'] == 0
    # one shard rewritten with the same size (its mtime moves), one config only touched (same bytes)
    data = bytearray(content[SHARDS[1]])
    data[4242] ^= 0xFF
    (root / SHARDS[1]).write_bytes(bytes(data))
    st = os.stat(str(root / 'config.json'))
    os.utime(str(root / 'config.json'), ns=(st.st_atime_ns, st.st_mtime_ns + 10 ** 9))
    os.utime(str(root / SHARDS[1]), ns=(st.st_atime_ns, st.st_mtime_ns + 2 * 10 ** 9))
    assert mm.check(str(root), ref, mode='quick')['ok'] is True
    res = mm.check(str(root), ref, mode='full', changed_since=verified['listing'])
    assert res['hashed_files'] == ['config.json', SHARDS[1]]
    assert [d['name'] for d in res['sha256_mismatch']] == [SHARDS[1]] and not res['ok']
    # no verified state at all (evidence from before): every file is hashed once
    assert mm.check(str(root), ref, mode='full', changed_since={})['files_hashed'] == 5
    with pytest.raises(mm.ManifestError):
        mm.check(str(root), ref, mode='full', changed_since=['x'])


def test_changed_names():
    assert mm.changed_names({'a': [1, 5], 'b': [2, 6], 'c': [3, 7]}, {'a': [1, 5], 'b': (2, 9)}) == ['b', 'c']
    assert mm.changed_names({'a': [1, 5]}, None) == ['a']
