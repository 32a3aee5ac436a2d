# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""hf_hub: revision pinning, backend choice, metadata, space and the download flow with a fake hub."""


import os

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._model import hf_hub
from ansible_collections.dgxspark.ds4.plugins.module_utils._model.model_sync import SyncError

SHA = '0123456789abcdef0123456789abcdef01234567'


def test_pinned():
    assert hf_hub.is_pinned(SHA)
    for rev in (None, '', 'main', 'v1.0', SHA[:-1], SHA.upper()):
        assert not hf_hub.is_pinned(rev)


def test_unpinned_refused_unless_acknowledged():
    assert hf_hub.check_revision(SHA, False) is None
    with pytest.raises(SyncError) as e:
        hf_hub.check_revision('main', False)
    assert "revision='main'" in e.value.msg and 'allow_unpinned' in e.value.msg
    assert 'acknowledged' in hf_hub.check_revision(None, True)


def test_backend_choice():
    env = {}
    assert hf_hub.prepare_backend(env, True, True) == 'hf_xet' and env == {}
    assert hf_hub.prepare_backend(env, True, False) == 'hf_transfer' and env['HF_HUB_ENABLE_HF_TRANSFER'] == '1'
    assert hf_hub.prepare_backend({}, False, False) == 'http'


class Lfs(object):
    def __init__(self, sha256, size):
        self.sha256 = sha256
        self.size = size


class Sibling(object):
    def __init__(self, name, size, lfs=None):
        self.rfilename = name
        self.size = size
        self.lfs = lfs


def test_siblings_metadata_objects_and_dicts():
    meta = hf_hub.siblings_metadata([Sibling('b.safetensors', None, Lfs('ab' * 32, 5)), Sibling('a.json', 3),
                                     {'rfilename': 'c.json', 'size': 1}])
    assert meta == [{'rfilename': 'a.json', 'size': 3}, {'rfilename': 'b.safetensors', 'size': 5, 'lfs': {'sha256': 'ab' * 32}},
                    {'rfilename': 'c.json', 'size': 1}]


def test_bytes_needed():
    meta = [{'rfilename': 'a', 'size': 10}, {'rfilename': 'b', 'size': 10}, {'rfilename': 'c', 'size': 10}]
    assert hf_hub.bytes_needed(meta, {'a': (10, 0), 'b': (4, 0), 'z': (100, 0)}) == 16


class FakeHub(object):
    """Stands in for the huggingface_hub module."""

    def __init__(self, files):
        self.files = files
        self.calls = []
        hub = self

        class Api(object):
            def model_info(self, repo_id, revision=None, files_metadata=False):
                hub.calls.append(('model_info', repo_id, revision, files_metadata))
                info = type('Info', (), {})()
                info.sha = revision
                info.siblings = [Sibling(n, len(d), Lfs('00' * 32, len(d)) if n.endswith('.safetensors') else None)
                                 for n, d in sorted(hub.files.items())]
                return info
        self.HfApi = Api

    def snapshot_download(self, repo_id, revision, local_dir, max_workers):
        self.calls.append(('snapshot_download', repo_id, revision, local_dir, max_workers))
        for name, data in self.files.items():
            path = os.path.join(local_dir, name)
            if not os.path.exists(path) or os.path.getsize(path) != len(data):
                with open(path, 'wb') as f:
                    f.write(data)
        return local_dir


def test_download_flow_and_rerun(tmp_path, monkeypatch):
    monkeypatch.delenv('HF_HUB_ENABLE_HF_TRANSFER', raising=False)
    hub = FakeHub({'model.safetensors': b'x' * 100, 'config.json': b'{}'})
    d = str(tmp_path / 'm')
    calls = []

    def runner(argv):
        calls.append(argv)
        return 0, '', ''
    r = hf_hub.download('org/m', SHA, d, hub=hub, max_workers=3, runner=runner)
    assert r['changed'] and r['bytes_downloaded'] == 102 and r['files_downloaded'] == ['config.json', 'model.safetensors']
    # the page cache is dropped behind the files written, only those
    assert calls == [['sh', '-c', "cd %s && sync -d -- config.json model.safetensors && for f in config.json "
                      "model.safetensors; do dd if=\"$f\" iflag=nocache count=0 status=none || exit 1; done" % d]]
    assert r['drop_behind_warnings'] == []
    assert ('snapshot_download', 'org/m', SHA, d, 3) in hub.calls
    assert {'rfilename': 'model.safetensors', 'size': 100, 'lfs': {'sha256': '00' * 32}} in r['hub_metadata']
    r = hf_hub.download('org/m', SHA, d, hub=hub)
    assert not r['changed'] and r['bytes_needed'] == 0 and r['bytes_downloaded'] == 0


def test_download_check_mode_and_space(tmp_path, monkeypatch):
    hub = FakeHub({'model.safetensors': b'x' * 100})
    d = str(tmp_path / 'm')
    r = hf_hub.download('org/m', SHA, d, hub=hub, check_mode=True)
    assert r['changed'] and r['bytes_needed'] == 100 and not os.path.exists(d)
    monkeypatch.setattr(hf_hub, 'free_bytes', lambda path: 50)
    with pytest.raises(SyncError) as e:
        hf_hub.download('org/m', SHA, d, hub=hub)
    assert 'not enough disk space on the head' in e.value.msg and 'free 50 B (50 bytes)' in e.value.msg
    assert not [c for c in hub.calls if c[0] == 'snapshot_download']


def test_download_refuses_unpinned_before_contacting_the_hub(tmp_path):
    hub = FakeHub({})
    with pytest.raises(SyncError):
        hf_hub.download('org/m', 'main', str(tmp_path), hub=hub)
    assert hub.calls == []


def test_hub_error_is_wrapped(tmp_path):
    class Broken(FakeHub):
        def __init__(self):
            super(Broken, self).__init__({})

            class Api(object):
                def model_info(self, *a, **k):
                    raise RuntimeError('401 Unauthorized')
            self.HfApi = Api
    with pytest.raises(SyncError) as e:
        hf_hub.download('org/m', SHA, str(tmp_path), hub=Broken())
    assert '401 Unauthorized' in e.value.msg and 'HF token' in e.value.msg
