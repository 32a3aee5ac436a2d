# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""container_image's decisions: digest pinning (record / use the record / update), the DeepGEMM commit
(pinned / recorded / resolved), and which derived images are pruned."""


import os

import pytest
import yaml

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import image_pins as ip

REF = 'ghcr.io/spark-arena/dgx-vllm-eugr-nightly:latest'
OLD = 'sha256:' + 'a' * 64
NEW = 'sha256:' + 'b' * 64
D_OLD = 'ghcr.io/spark-arena/dgx-vllm-eugr-nightly@sha256:' + '1' * 64
D_NEW = 'ghcr.io/spark-arena/dgx-vllm-eugr-nightly@sha256:' + '2' * 64
C1, C2 = '1' * 40, '2' * 40


def _img(image_id, digests=(), labels=None, tags=()):
    return {'Id': image_id, 'RepoDigests': list(digests), 'RepoTags': list(tags), 'Config': {'Labels': labels}}


def _recorded(image_id=OLD, digest=D_OLD):
    return {'version': 1, 'images': {REF: {'id': image_id, 'digest': digest, 'source': 'pull', 'history': []}},
            'deepgemm': {}}


@pytest.mark.parametrize('ref, expected', [
    ('ubuntu', ('ubuntu', None, None)),
    ('ubuntu:24.04', ('ubuntu', '24.04', None)),
    ('registry:5000/a/b:tag', ('registry:5000/a/b', 'tag', None)),
    ('registry:5000/a/b', ('registry:5000/a/b', None, None)),
    ('a/b:t@sha256:' + '1' * 64, ('a/b', 't', 'sha256:' + '1' * 64)),
])
def test_split_ref(ref, expected):
    assert ip.split_ref(ref) == expected


def test_repo_digest_matches_the_ref_repository():
    assert ip.repo_digest(REF, ['other/x@sha256:' + '9' * 64, D_OLD]) == D_OLD
    assert ip.repo_digest('ubuntu:24.04', ['docker.io/library/ubuntu@sha256:' + '3' * 64]).endswith('3' * 64)
    assert ip.repo_digest('ds4-test/vllm:unpatched', []) is None


def test_first_run_obtains_and_records_the_digest():
    assert ip.plan(None, REF)['action'] == 'obtain'
    out = ip.settle(None, REF, tag_image=_img(OLD, [D_OLD]))
    assert out['error'] is None and out['id'] == OLD and out['inspect'] == OLD and out['digest'] == D_OLD
    assert out['record']['images'][REF] == {'id': OLD, 'digest': D_OLD, 'source': 'pull', 'history': []}
    assert 'recorded as' in out['messages'][0] and not out['moved']


def test_later_run_keeps_the_recorded_image_when_the_tag_moved():
    rec = _recorded()
    assert ip.plan(rec, REF, recorded_present=True)['action'] == 'keep'
    out = ip.settle(rec, REF, tag_image=_img(NEW, [D_NEW]), recorded_image=_img(OLD, [D_OLD]))
    assert out['error'] is None and out['id'] == OLD and out['inspect'] == OLD
    assert out['drift'] and not out['moved'] and out['record'] == ip.load_record(rec)
    assert 'container_image_update=true' in out['messages'][0] and NEW in out['messages'][0]


def test_later_run_pulls_exactly_the_recorded_digest_when_the_image_is_gone():
    plan = ip.plan(_recorded(), REF, source='pull', recorded_present=False)
    assert plan['action'] == 'pull-digest' and plan['pull_ref'] == D_OLD
    out = ip.settle(_recorded(), REF, tag_image=None, recorded_image=_img(OLD, [D_OLD]))
    assert out['error'] is None and out['id'] == OLD


def test_recorded_image_gone_without_digest_is_obtained_again_and_must_match():
    rec = _recorded(digest=None)
    assert ip.plan(rec, REF, source='load', recorded_present=False)['action'] == 'reobtain'
    out = ip.settle(rec, REF, source='load', tag_image=_img(NEW), recorded_image=None)
    assert out['error'] and 'container_image_update=true' in out['error'] and OLD in out['error'] and NEW in out['error']


def test_update_moves_the_record_and_keeps_old_and_new():
    rec = _recorded()
    assert ip.plan(rec, REF, update=True, recorded_present=True)['action'] == 'refresh'
    out = ip.settle(rec, REF, update=True, tag_image=_img(NEW, [D_NEW]), recorded_image=_img(OLD))
    assert out['moved'] and out['id'] == NEW and out['digest'] == D_NEW
    entry = out['record']['images'][REF]
    assert entry['id'] == NEW and entry['history'] == [{'from_id': OLD, 'from_digest': D_OLD, 'to_id': NEW, 'to_digest': D_NEW}]
    assert OLD in out['messages'][0] and NEW in out['messages'][0]


def test_update_to_the_same_image_moves_nothing():
    rec = _recorded()
    out = ip.settle(rec, REF, update=True, tag_image=_img(OLD, [D_OLD]), recorded_image=_img(OLD))
    assert not out['moved'] and out['record'] == ip.load_record(rec) and 'nothing moves' in out['messages'][0]


def test_other_refs_records_are_kept():
    rec = _recorded()
    out = ip.settle(rec, 'ds4-test/vllm:x', source='load', tag_image=_img(NEW))
    assert set(out['record']['images']) == {REF, 'ds4-test/vllm:x'} and out['digest'] is None


def test_missing_tag_on_first_run_is_an_error_with_the_fix():
    out = ip.settle(None, REF, tag_image=None)
    assert out['error'] and 'Fix:' in out['error']


def test_local_image_missing_on_first_run_says_it_is_built_on_the_head_not_pulled():
    """source=local (the DSpark family: seed 003 builds the image on the head): nothing is obtained, absent is refused."""
    assert ip.plan(None, REF, source='local')['action'] == 'obtain'
    out = ip.settle(None, REF, source='local', tag_image=None)
    assert out['error'].startswith('%s is not on the head: container_image_source=local' % REF)
    assert 'never pulled' in out['error'] and 'Fix: build it on the head first' in out['error']
    found = ip.settle(None, REF, source='local', tag_image=_img(NEW))
    assert found['error'] is None and found['record']['images'][REF]['source'] == 'local'


def test_deepgemm_pinned_wins_then_recorded_then_resolve():
    rec = {'deepgemm': {'r': {'commit': C1, 'history': []}}}
    assert ip.deepgemm_choice(rec, 'r', pinned=C2) == {'commit': C2, 'source': 'pinned', 'resolve': False}
    assert ip.deepgemm_choice(rec, 'r') == {'commit': C1, 'source': 'recorded', 'resolve': False}
    assert ip.deepgemm_choice(rec, 'r', update=True)['resolve'] is True
    assert ip.deepgemm_choice(None, 'r')['resolve'] is True


def test_deepgemm_resolved_commit_is_recorded_and_moved_on_update():
    first = ip.deepgemm_settle(None, 'r', ip.deepgemm_choice(None, 'r'), '%s\tHEAD\n' % C1)
    assert first['commit'] == C1 and first['source'] == 'resolved' and first['record']['deepgemm']['r']['commit'] == C1
    again = ip.deepgemm_choice(first['record'], 'r')
    assert ip.deepgemm_settle(first['record'], 'r', again)['commit'] == C1
    moved = ip.deepgemm_settle(first['record'], 'r', ip.deepgemm_choice(first['record'], 'r', update=True), C2 + ' HEAD')
    assert moved['moved'] and moved['record']['deepgemm']['r']['history'] == [{'from': C1, 'to': C2}]


@pytest.mark.parametrize('stdout', ['', 'fatal: unable to access', '%s\trefs/heads/main' % C1, 'abc HEAD'])
def test_deepgemm_unresolvable_names_the_fix(stdout):
    out = ip.deepgemm_settle(None, 'r', {'resolve': True}, stdout)
    assert out['commit'] is None and 'container_image_deepgemm_ref' in out['error'] and 'Fix:' in out['error']


def test_prune_only_unkept_derived_images_never_a_users():
    cur, rollback, running, old, user, child = ('sha256:%s' % (c * 64) for c in 'cdefab')
    hx, hy, hz, ho = ('%s' % (c * 64) for c in '1234')
    repo = 'dgxspark-ds4/vllm'
    images = [
        _img(cur, labels={ip.DERIVED_LABEL: hx}, tags=['%s:%s' % (repo, hx[:16])]),
        _img(rollback, labels={ip.DERIVED_LABEL: hy}, tags=['%s:%s' % (repo, hy[:16])]),
        _img(running, labels={ip.DERIVED_LABEL: hz}, tags=['%s:%s' % (repo, hz[:16])]),
        _img(old, labels={ip.DERIVED_LABEL: ho}, tags=['%s:%s' % (repo, ho[:16]), 'other/name:x']),
        # built FROM the old derived image: inherits its label, not its tag
        _img(child, labels={ip.DERIVED_LABEL: ho}, tags=['%s:mine' % repo, 'me/app:1']),
        _img('sha256:' + '9' * 64, labels={ip.DERIVED_LABEL: ho}, tags=[]),
        _img(user, labels={'org.example': '1'}, tags=['%s:%s' % (repo, ho[:16])]),
        _img(user, labels=None),
    ]
    unit = 'ExecStart=/usr/bin/docker run ... --entrypoint /etc/dgxspark-ds4/launch-head.sh %s\n' % running
    kept = 'ExecStart=... %s' % rollback
    keep = [cur] + sorted(ip.referenced_ids([unit, kept, None]))
    assert ip.prune_plan(images, keep, repo) == [{'id': old, 'tags': ['%s:%s' % (repo, ho[:16]), 'other/name:x']}]
    assert ip.prune_plan(images, [cur, rollback, running, old], repo) == []
    assert ip.prune_plan(images, [], 'another/repo') == []


ROLE = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'roles', 'container_image')


def _role_yaml(*parts):
    with open(os.path.join(ROLE, *parts)) as handle:
        return yaml.safe_load(handle)


def test_role_inputs_defaults_and_specs_agree():
    defaults = _role_yaml('defaults', 'main.yml')
    specs = _role_yaml('meta', 'argument_specs.yml')['argument_specs']['main']['options']
    new = {'container_image_update': False, 'container_image_pins_path': '/var/lib/dgxspark-ds4/image-pins.json',
           'container_image_deepgemm_ref': '', 'container_image_deepgemm_resolve': ['git', 'ls-remote', '{repo}', 'HEAD'],
           'container_image_mxfp4_path': '', 'container_image_prune': True,
           'container_image_prune_keep_files': ['/etc/systemd/system/dgxspark-ds4-head.service',
                                                '/etc/systemd/system/dgxspark-ds4-worker.service',
                                                '/etc/dgxspark-ds4/previous/unit']}
    for name, value in new.items():
        assert defaults[name] == value and specs[name]['default'] == value, name


def test_first_deploy_does_not_stop_for_a_deepgemm_commit():
    """The old derive.yml refused to build without container_image_deepgemm_ref; now the commit is resolved."""
    tasks = _role_yaml('tasks', 'derive.yml') + _role_yaml('tasks', 'derive_build.yml')
    for task in tasks:
        if 'ansible.builtin.assert' in task:
            assert 'container_image_deepgemm_ref | length > 0' not in str(task['ansible.builtin.assert']['that'])
    names = [t['name'] for t in tasks]
    assert any('Resolve the default branch' in n for n in names)
    with open(os.path.join(ROLE, 'templates', 'Dockerfile.derived.j2')) as handle:
        assert "container_image_deepgemm_pin['commit']" in handle.read()


def test_converge_shortcut_observes_the_pins():
    with open(os.path.join(ROLE, 'vars', 'main.yml')) as handle:
        text = handle.read()
    checks = yaml.safe_load(text)['__container_image_converge_checks']
    assert '{{ container_image_pins_path }}' in checks['files']


def test_the_record_passed_in_is_never_changed():
    """load_record copies one level (every function replaces an entry, none changes one in place): a move, a DeepGEMM
    resolution and a new ref leave the caller's record as it was."""
    import copy  # pylint: disable=import-outside-toplevel
    rec = _recorded()
    rec['deepgemm'] = {'https://example.invalid/DeepGEMM.git': {'commit': 'a' * 40, 'history': []}}
    before = copy.deepcopy(rec)
    moved = ip.settle(rec, REF, update=True, tag_image=_img(NEW, [D_NEW]), recorded_image=_img(OLD))
    added = ip.settle(rec, 'other/x:1', tag_image=_img(NEW))
    resolved = ip.deepgemm_settle(rec, 'https://example.invalid/DeepGEMM.git', {'resolve': True},
                                  'b' * 40 + '\tHEAD\n')
    assert moved['moved'] and added['record']['images']['other/x:1']['id'] == NEW and resolved['moved']
    assert rec == before
