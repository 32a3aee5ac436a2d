# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One directory per model revision: adopt a flat directory, switch atomically, prune on request."""


import os
import shutil

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._model import model_revision as mr
from ansible_collections.dgxspark.ds4.plugins.module_utils._model import model_sync as ms

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))
REV1 = '1' * 40
REV2 = '2' * 40


def write(path, data):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(str(path), 'wb') as f:
        f.write(data)


def read(path):
    with open(str(path), 'rb') as f:
        return f.read()


@pytest.fixture
def host_dir(tmp_path):
    return str(tmp_path / 'models' / 'DeepSeek-V4-Flash')


def test_revision_key():
    assert mr.revision_key(REV1) == REV1
    assert mr.revision_key(None) == mr.revision_key('') == 'unpinned'
    assert mr.revision_key('main') == 'main'
    for bad in ('../x', 'a/b', '.hidden', 'x.revs', 'x' * 200):
        key = mr.revision_key(bad)
        assert key.startswith('rev-') and '/' not in key and key == mr.revision_key(bad)


def test_layout_is_beside_host_dir_with_a_relative_target(host_dir):
    lay = mr.layout(host_dir + '/', REV1)
    assert lay['host_dir'] == host_dir
    assert lay['revs_dir'] == host_dir + '.revs' and lay['rev_dir'] == host_dir + '.revs/' + REV1
    assert lay['link_target'] == 'DeepSeek-V4-Flash.revs/' + REV1
    with pytest.raises(mr.RevisionError):
        mr.layout('relative/dir', REV1)
    with pytest.raises(mr.RevisionError):
        mr.layout('/', REV1)


def test_fresh_prepare_then_switch_is_atomic_and_idempotent(host_dir, monkeypatch):
    lay = mr.layout(host_dir, REV1)
    os.makedirs(os.path.dirname(host_dir))
    assert mr.prepare(lay, check_mode=True)['changed'] and not os.path.exists(lay['revs_dir'])
    res = mr.prepare(lay)
    assert res['changed'] and res['mode'] == 'revisions' and res['rev_dir'] == lay['rev_dir'] and res['adopted'] is None
    assert os.path.isdir(lay['rev_dir']) and not os.path.lexists(host_dir)
    assert not mr.prepare(lay)['changed']
    write(os.path.join(lay['rev_dir'], 'config.json'), b'r1')
    # the switch is one rename of a temporary link over host_dir
    renames = []
    real_rename = os.rename
    monkeypatch.setattr(mr.os, 'rename', lambda a, b: (renames.append((a, b)), real_rename(a, b))[1])
    res = mr.switch(lay)
    assert res['changed'] and res['frm'] is None and res['to'] == REV1
    assert len(renames) == 1 and renames[0][1] == host_dir and os.path.basename(renames[0][0]).startswith('.DeepSeek-V4-Flash.tmp-')
    assert os.readlink(host_dir) == 'DeepSeek-V4-Flash.revs/' + REV1
    assert read(os.path.join(host_dir, 'config.json')) == b'r1'
    # second run: nothing changes
    assert not mr.switch(lay)['changed']
    assert not mr.prepare(lay)['changed']
    assert [n for n in os.listdir(os.path.dirname(host_dir)) if '.tmp-' in n] == []


def test_new_revision_keeps_the_old_one_until_pruned(host_dir):
    os.makedirs(os.path.dirname(host_dir))
    lay1 = mr.layout(host_dir, REV1)
    mr.prepare(lay1)
    write(os.path.join(lay1['rev_dir'], 'model.safetensors'), b'old' * 10)
    mr.switch(lay1)
    lay2 = mr.layout(host_dir, REV2)
    res = mr.prepare(lay2)
    assert res['changed'] and res['current'] == REV1 and res['previous'] == [REV1]
    # fetching into the new revision does not touch what is served
    write(os.path.join(lay2['rev_dir'], 'model.safetensors'), b'new')
    assert read(os.path.join(host_dir, 'model.safetensors')) == b'old' * 10
    with pytest.raises(mr.RevisionError):
        mr.plan_prune(lay2, {'kind': 'dir', 'current': None, 'revisions': []})  # no link: nothing proven served
    res = mr.switch(lay2, check_mode=True)
    assert res['changed'] and os.readlink(host_dir).endswith(REV1)
    res = mr.switch(lay2)
    assert res['changed'] and res['frm'] == REV1 and res['to'] == REV2 and res['previous'] == [REV1]
    assert read(os.path.join(host_dir, 'model.safetensors')) == b'new'
    assert os.path.isdir(lay1['rev_dir'])  # the previous revision is kept
    # prune removes everything but the served revision (and keep)
    assert mr.prune(lay2, keep=[REV1])['removed'] == []
    res = mr.prune(lay2, check_mode=True)
    assert res['removed'] == [REV1] and res['bytes_freed'] == 30 and os.path.isdir(lay1['rev_dir'])
    res = mr.prune(lay2)
    assert res['changed'] and res['removed'] == [REV1] and not os.path.exists(lay1['rev_dir'])
    assert not mr.prune(lay2)['changed']
    assert read(os.path.join(host_dir, 'model.safetensors')) == b'new'


def test_switch_refuses_a_revision_not_fetched(host_dir):
    os.makedirs(os.path.dirname(host_dir))
    with pytest.raises(mr.RevisionError) as exc:
        mr.switch(mr.layout(host_dir, REV1))
    assert 'does not exist' in exc.value.msg


@pytest.mark.parametrize('recorded,expect', [(None, REV1), (REV2, REV2)])
def test_flat_directory_adopted_never_lost(host_dir, recorded, expect):
    """A flat host_dir from before the layout is renamed into .revs/<revision it holds> and stays served."""
    write(os.path.join(host_dir, 'model-00001-of-00001.safetensors'), b'user bytes')
    ino = os.stat(host_dir).st_ino
    lay = mr.layout(host_dir, REV1)
    plan = mr.prepare(lay, adopt_revision=recorded, check_mode=True)
    assert plan['changed'] and plan['adopted']['revision'] == expect and os.path.isdir(host_dir) and not os.path.islink(host_dir)
    res = mr.prepare(lay, adopt_revision=recorded)
    assert res['adopted'] == dict(frm=host_dir, to=os.path.join(lay['revs_dir'], expect), revision=expect)
    assert os.stat(os.path.join(lay['revs_dir'], expect)).st_ino == ino  # renamed, not copied
    assert os.readlink(host_dir) == 'DeepSeek-V4-Flash.revs/' + expect
    assert read(os.path.join(host_dir, 'model-00001-of-00001.safetensors')) == b'user bytes'
    assert res['current'] == expect
    assert os.path.isdir(lay['rev_dir'])
    if expect == REV1:
        assert res['previous'] == [] and not mr.switch(lay)['changed']
    else:
        assert res['previous'] == [REV2]
        with pytest.raises(mr.RevisionError):  # the adopted revision is what is served: never pruned before a switch
            mr.plan_prune(lay, dict(mr.inspect(lay), kind='dir'))
        assert mr.prune(lay)['removed'] == [REV1]  # only the empty, unserved new one would go
    assert not mr.prepare(mr.layout(host_dir, expect), adopt_revision=recorded)['changed']


def test_adoption_never_overwrites_an_existing_revision(host_dir):
    lay = mr.layout(host_dir, REV1)
    write(os.path.join(lay['rev_dir'], 'config.json'), b'kept')
    write(os.path.join(host_dir, 'config.json'), b'flat')
    res = mr.prepare(lay)
    assert res['adopted']['revision'] == REV1 + '.adopted-1'
    assert read(os.path.join(lay['rev_dir'], 'config.json')) == b'kept'
    assert read(os.path.join(lay['revs_dir'], REV1 + '.adopted-1', 'config.json')) == b'flat'
    assert read(os.path.join(host_dir, 'config.json')) == b'flat'  # still serving what it served
    assert mr.switch(lay)['changed'] and read(os.path.join(host_dir, 'config.json')) == b'kept'


def _tree(top):
    out = {}
    for dirpath, _dirs, files in os.walk(top):
        for f in files:
            path = os.path.join(dirpath, f)
            out[os.path.relpath(path, top)] = (read(path), os.stat(path).st_ino)
    return out


@pytest.mark.parametrize('layout,why', [
    # a shared models folder given as host_dir: other models in sub-directories, none at the top
    ({'Llama-3-70B/config.json': b'{}', 'Llama-3-70B/model-00001-of-00002.safetensors': b'other model',
      'qwen/config.json': b'{}', 'qwen/model.safetensors': b'q', 'notes.txt': b'mine'}, 'holds no model file at its top'),
    # a model at the top and another one nested in it (the user's fine-tune beside the base)
    ({'config.json': b'{}', 'model.safetensors': b'base', 'my-finetune/config.json': b'{}',
      'my-finetune/adapter.safetensors': b'ft'}, 'holds another model in my-finetune'),
    # a system or user directory (e.g. /opt, /srv): no model file at all
    ({'bin/tool': b'#!/bin/sh', 'etc/tool.conf': b'x', 'README': b'r'}, 'holds no model file at its top'),
])
def test_a_folder_with_foreign_content_is_never_adopted_and_stays_intact(host_dir, layout, why):
    """Issue 46: a host_dir holding other data was adopted whole as a revision, and the opt-in prune later deleted it
    with the user's other model in it. Now it is refused before anything changes (check mode and plain), every file
    where it was, same inode; prune finds nothing of it to remove."""
    for rel, data in layout.items():
        write(os.path.join(host_dir, rel), data)
    before = _tree(host_dir)
    lay = mr.layout(host_dir, REV1)
    for check in (True, False):
        with pytest.raises(mr.RevisionError) as exc:
            mr.prepare(lay, check_mode=check)
        assert why in exc.value.msg and 'Nothing was changed' in exc.value.msg and 'Fix:' in exc.value.msg
    assert _tree(host_dir) == before and not os.path.islink(host_dir) and not os.path.lexists(lay['revs_dir'])


def test_an_empty_folder_is_adopted(host_dir):
    os.makedirs(host_dir)
    res = mr.prepare(mr.layout(host_dir, REV1))
    assert res['adopted']['revision'] == REV1 and os.path.islink(host_dir)


def test_mount_point_kept_and_served_in_place(host_dir, monkeypatch):
    write(os.path.join(host_dir, 'a'), b'x')
    monkeypatch.setattr(mr.os.path, 'ismount', lambda p: p == host_dir)
    lay = mr.layout(host_dir, REV1)
    res = mr.prepare(lay)
    assert res['mode'] == 'flat' and res['rev_dir'] == host_dir and not res['changed']
    assert 'mount point' in res['warnings'][0]
    assert not os.path.exists(lay['revs_dir']) and os.path.isdir(host_dir) and not os.path.islink(host_dir)
    assert mr.switch(lay) == dict(changed=False, mode='flat', frm=None, to=None, current=None, previous=[])


@pytest.mark.parametrize('make', ['file', 'foreign-link', 'dangling'])
def test_unexpected_host_dir_refused_untouched(host_dir, tmp_path, make):
    os.makedirs(os.path.dirname(host_dir))
    if make == 'file':
        write(host_dir, b'x')
    elif make == 'foreign-link':
        os.makedirs(str(tmp_path / 'elsewhere'))
        os.symlink(str(tmp_path / 'elsewhere'), host_dir)
    else:
        os.symlink('DeepSeek-V4-Flash.revs/gone', host_dir)
    lay = mr.layout(host_dir, REV1)
    for call in (mr.prepare, mr.switch):
        with pytest.raises(mr.RevisionError):
            call(lay)
    assert os.path.lexists(host_dir) and not os.path.exists(lay['revs_dir'])


def make_hub_cache(root):
    """A Hugging Face hub cache: snapshots/<rev>/ holds relative symlinks into ../../blobs/."""
    repo = os.path.join(str(root), 'hub', 'models--deepseek-ai--DeepSeek-V4-Flash')
    snap = os.path.join(repo, 'snapshots', REV1)
    for name, data in (('config.json', b'{"cfg": 1}'), ('model-00001-of-00001.safetensors', b'weights')):
        blob = os.path.join(repo, 'blobs', 'sha-' + name.replace('.', '-'))
        write(blob, data)
        link = os.path.join(snap, name)
        os.makedirs(snap, exist_ok=True)
        os.symlink(os.path.relpath(blob, snap), link)
    return snap


def test_hub_snapshot_as_host_dir_refused_before_any_change(tmp_path):
    """A hub snapshot at host_dir is not adopted: renaming it would break its ../../blobs links (the user's hub
    cache) and the container, which mounts only host_dir, could not follow them anyway."""
    snap = make_hub_cache(tmp_path)
    lay = mr.layout(snap, REV1)
    for call in (lambda: mr.prepare(lay, check_mode=True), lambda: mr.prepare(lay),
                 lambda: mr.plan_prepare(lay, mr.inspect(lay))):
        with pytest.raises(mr.RevisionError) as exc:
            call()
        msg = exc.value.msg
        assert 'ds4_effective.model.host_dir=' + snap in msg
        link = exc.value.fields['link']
        assert os.path.dirname(link) == snap and exc.value.fields['target'] == os.readlink(link)
        assert '%s -> ../../blobs/sha-' % link in msg
        assert 'model_cache_local_dir=' + snap in msg and 'model_cache_source=local' in msg
        assert 'ds4_site_overrides.model.host_dir' in msg and 'nothing was changed' in msg.lower()
    # nothing moved: the snapshot is still a directory whose links resolve, no .revs beside it
    assert os.path.isdir(snap) and not os.path.islink(snap)
    assert os.path.islink(os.path.join(snap, 'config.json'))
    assert read(os.path.join(snap, 'config.json')) == b'{"cfg": 1}'
    assert not os.path.lexists(lay['revs_dir'])
    assert sorted(os.listdir(os.path.dirname(snap))) == [REV1]


def test_link_leading_outside_found_in_a_subdirectory(host_dir, tmp_path):
    write(os.path.join(host_dir, 'config.json'), b'{}')
    write(str(tmp_path / 'outside' / 'tok.json'), b't')
    os.makedirs(os.path.join(host_dir, 'a', 'b'))
    os.symlink(str(tmp_path / 'outside' / 'tok.json'), os.path.join(host_dir, 'a', 'b', 'tok.json'))
    lay = mr.layout(host_dir, REV1)
    with pytest.raises(mr.RevisionError) as exc:
        mr.prepare(lay)
    assert os.path.join(host_dir, 'a', 'b', 'tok.json') + ' -> ' + str(tmp_path / 'outside' / 'tok.json') in exc.value.msg
    assert os.path.isdir(host_dir) and not os.path.islink(host_dir) and not os.path.lexists(lay['revs_dir'])


def test_flat_directory_with_links_inside_itself_still_adopted(host_dir):
    """Links that stay inside host_dir resolve the same after the rename: the directory is adopted."""
    write(os.path.join(host_dir, 'data', 'model.safetensors'), b'bytes')
    os.symlink('data/model.safetensors', os.path.join(host_dir, 'model.safetensors'))
    os.symlink('data', os.path.join(host_dir, 'weights'))
    os.symlink(os.path.join('..', 'data', 'model.safetensors'), os.path.join(host_dir, 'data', 'self.safetensors'))
    lay = mr.layout(host_dir, REV1)
    res = mr.prepare(lay)
    assert res['adopted']['revision'] == REV1 and os.readlink(host_dir) == 'DeepSeek-V4-Flash.revs/' + REV1
    assert read(os.path.join(host_dir, 'model.safetensors')) == b'bytes'
    assert read(os.path.join(host_dir, 'weights', 'self.safetensors')) == b'bytes'


def test_unit_mounts_the_stable_path_not_a_revision():
    """Docker resolves a link when it creates the container: the unit must mount host_dir (the link). The unit's
    docker run words are built once by the config play (plugins/plugin_utils/service_layout.py docker_run) and the
    template renders them."""
    with open(os.path.join(REPO, 'plugins', 'plugin_utils', 'service_layout.py')) as f:
        builder = f.read()
    with open(os.path.join(REPO, 'roles', 'vllm_service', 'templates', 'vllm.service.j2')) as f:
        unit = f.read()
    assert "'%s:%s:ro' % (model['host_dir'], model['container_dir'])" in builder
    assert "ds4_effective['service']['docker_run']" in unit
    for text in (builder, unit):
        assert '.revs' not in text and 'rev_dir' not in text


@pytest.mark.skipif(shutil.which('rsync') is None and not os.environ.get('CI'), reason='rsync not installed (CI=true makes this a failure)')
def test_new_revision_space_check_counts_both_copies(host_dir, tmp_path, monkeypatch):
    """The new revision is fetched into its own directory while the served one stays: the copy needs the whole
    new revision free beside it (nothing is shared with, or written into, the served revision)."""
    src = tmp_path / 'source'
    write(src / 'model.safetensors', b'm' * 5000)
    write(src / 'config.json', b'{}')
    os.makedirs(os.path.dirname(host_dir))
    lay1 = mr.layout(host_dir, REV1)
    mr.prepare(lay1)
    ms.sync(str(src), lay1['rev_dir'])
    mr.switch(lay1)
    lay2 = mr.layout(host_dir, REV2)
    mr.prepare(lay2)
    r = ms.sync(str(src), lay2['rev_dir'], check_mode=True)
    assert r['bytes_needed'] == 5002  # identical files in the kept revision do not count as already there
    monkeypatch.setattr(ms, 'free_bytes', lambda path: 5001)
    with pytest.raises(ms.SyncError) as exc:
        ms.sync(str(src), lay2['rev_dir'])
    assert 'not enough disk space' in exc.value.msg and os.listdir(lay2['rev_dir']) == []
    assert read(os.path.join(host_dir, 'model.safetensors')) == b'm' * 5000
