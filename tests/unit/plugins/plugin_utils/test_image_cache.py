# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""image_cache: the derived-image cache's restore decision (keep, tag, load, build, refuse) and its index (keys kept,
tarballs dropped, no save without room)."""


import pytest

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import image_cache as c

K1, K2, K3 = 'a' * 64, 'b' * 64, 'c' * 64
REF = 'dgxspark-ds4/vllm:' + K1[:16]
ID1, ID2, ID3 = 'sha256:' + '1' * 64, 'sha256:' + '2' * 64, 'sha256:' + '3' * 64
DIR = '/var/lib/dgxspark-ds4/image-cache'


def _index(*entries):
    return {'version': 1, 'entries': [{'key': k, 'id': i, 'ref': 'dgxspark-ds4/vllm:' + k[:16], 'tarball': k + '.tar'}
                                      for k, i in entries]}


def _img(image_id, *tags):
    return {'Id': image_id, 'RepoTags': list(tags)}


def test_first_build_for_new_inputs():
    p = c.plan({}, K1, REF, [], False, False, DIR)
    assert p['action'] == 'build' and p['id'] is None and 'first build for these inputs' in p['message']


def test_present_image_without_entry_is_kept_and_recorded():
    p = c.plan({}, K1, REF, [_img(ID1, REF)], False, False, DIR)
    assert (p['action'], p['id']) == ('keep', ID1)


def test_recorded_image_under_its_tag_is_kept():
    p = c.plan(_index((K1, ID1)), K1, REF, [_img(ID1, REF)], True, False, DIR)
    assert (p['action'], p['id']) == ('keep', ID1)


def test_untagged_recorded_image_is_tagged_again():
    # docker rmi -f <ref> while a container uses the image: the tag goes, the image stays
    p = c.plan(_index((K1, ID1)), K1, REF, [_img(ID1)], True, False, DIR)
    assert (p['action'], p['id']) == ('tag', ID1) and 'no restart' in p['message']


def test_deleted_image_is_restored_from_its_tarball():
    p = c.plan(_index((K1, ID1)), K1, REF, [], True, False, DIR)
    assert (p['action'], p['id']) == ('load', ID1)
    assert '%s/%s.tar' % (DIR, K1) in p['message'] and 'gave nothing' in p['message']


def test_another_image_under_the_tag_gives_way_to_the_recorded_one():
    p = c.plan(_index((K1, ID1)), K1, REF, [_img(ID2, REF)], True, False, DIR)
    assert (p['action'], p['id']) == ('load', ID1) and 'gave %s' % ID2 in p['message']


@pytest.mark.parametrize('images', [[], [_img(ID2, REF)]])
def test_rebuild_that_changes_the_id_is_refused_naming_the_variable(images):
    p = c.plan(_index((K1, ID1)), K1, REF, images, False, False, DIR)
    assert p['action'] == 'refuse'
    assert 'Fix: -e container_image_rebuild=true' in p['message'] and ID1 in p['message']
    assert 'new image ID' in p['message'] and 'restarts both ranks' in p['message']


def test_entry_without_tarball_is_not_loaded():
    index = _index((K1, ID1))
    index['entries'][0]['tarball'] = None
    assert c.plan(index, K1, REF, [], True, False, DIR)['action'] == 'refuse'


@pytest.mark.parametrize('images', [[], [_img(ID1, REF)]])
def test_rebuild_true_builds_and_says_the_ranks_restart(images):
    p = c.plan(_index((K1, ID1)), K1, REF, images, True, True, DIR)
    assert p['action'] == 'build' and 'container_image_rebuild=true' in p['message'] and ID1 in p['message']


def test_key_must_be_a_sha256_hex():
    with pytest.raises(ValueError, match='not a sha256 hex digest'):
        c.plan({}, '../../etc/passwd', REF, [], False, False, DIR)


def test_record_saves_once_then_nothing():
    first = c.record({}, K1, REF, ID1, False)
    assert first['save'] and first['remove'] == [] and first['index']['entries'] == [
        {'key': K1, 'id': ID1, 'ref': REF, 'tarball': K1 + '.tar'}]
    again = c.record(first['index'], K1, REF, ID1, True)
    assert not again['save'] and again['index'] == first['index']


def test_record_saves_again_when_the_tarball_is_gone_or_the_id_changed():
    assert c.record(_index((K1, ID1)), K1, REF, ID1, False)['save']
    rebuilt = c.record(_index((K1, ID1)), K1, REF, ID2, True)
    assert rebuilt['save'] and rebuilt['index']['entries'][-1]['id'] == ID2 and rebuilt['remove'] == []


def test_record_keeps_the_previous_key_for_rollback_and_drops_older_ones():
    r = c.record(_index((K1, ID1), (K2, ID2)), K3, 'dgxspark-ds4/vllm:' + K3[:16], ID3, False)
    assert [e['key'] for e in r['index']['entries']] == [K2, K3]
    assert r['remove'] == [K1 + '.tar']
    # back to an older key (rollback): it becomes current, the other stays as previous
    back = c.record(r['index'], K2, 'dgxspark-ds4/vllm:' + K2[:16], ID2, True)
    assert [e['key'] for e in back['index']['entries']] == [K3, K2] and not back['save'] and back['remove'] == []


def test_record_without_room_does_not_save_and_says_so():
    # df's figure arrives as text
    r = c.record({}, K1, REF, ID1, False, free_bytes=str(10 * 2 ** 30), size_bytes=20 * 2 ** 30)
    assert not r['save'] and r['index']['entries'][-1]['tarball'] is None
    assert 'not saving' in r['message'] and 'container_image_cache_dir' in r['message'] and '22.0 GiB needed' in r['message']
    assert c.record({}, K1, REF, ID1, False, free_bytes=30 * 2 ** 30, size_bytes=20 * 2 ** 30)['save']
