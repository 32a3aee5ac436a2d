# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The head's files are verified before any copy, as the role runs it: the tasks of
roles/model_cache/tasks/fetch.yml that hash the files changed since the last verified state, name a bad one as the
head's, and remove it for the re-fetch (or stop when there is no other source), taken from the file as they are and
run by ansible-playbook on a real directory with the real model_manifest module."""


import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.dgxspark.ds4.plugins.module_utils._model import model_manifest as mm

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
FETCH = os.path.join(REPO, 'roles', 'model_cache', 'tasks', 'fetch.yml')
NAMES = ("Fetch | Hash the head's files changed since their last verified state against the manifest (before any copy)",
         "Fetch | The head's files that failed their hash",
         "Fetch | A bad head file with no other source is not repaired here (nothing copied to the worker)",
         "Fetch | Name the bad head files, repaired from the source before any copy",
         "Fetch | Remove the bad head files (fetched again below)")
SHARDS = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']

pytestmark = pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason='ansible-playbook not next to the test interpreter')


def _tasks():
    with open(FETCH) as handle:
        tasks = dict((t['name'], t) for t in yaml.safe_load(handle))
    return [tasks[name] for name in NAMES]


def _model(root):
    os.makedirs(root)
    for i, name in enumerate(SHARDS):
        with open(os.path.join(root, name), 'wb') as handle:
            handle.write(os.urandom(65536 + i))
    manifest = mm.build(root)['manifest']
    return manifest, mm.check(root, manifest, mode='quick')['listing']


def _play(rev_dir, manifest_path, listing, copy_src):
    return {'hosts': 'localhost', 'gather_facts': False, 'vars': {
        '__model_cache_rev_dir': rev_dir, '__model_cache_manifest': manifest_path, '__model_cache_copy_src': copy_src,
        '__model_cache_prev': {'check': {'ok': True}, 'verified_listing': listing},
        '__model_cache_head_quick': {'ok': True}, '__model_cache_workers': ['spark2'], 'model_cache_hash_workers': 0,
        'model_cache_source': 'local', '__model_cache_model': {'repo_id': 'org/m', 'revision': 'r'}},
        'tasks': _tasks()}


def _corrupt_same_size(path):
    with open(path, 'r+b') as handle:
        handle.seek(1000)
        handle.write(b'ZZZZ')
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5 * 10 ** 9))


def test_a_bad_head_shard_is_named_and_removed_for_the_refetch_or_stops_without_a_source(tmp_path):
    plays = []
    for case in ('source', 'nosource'):
        rev = str(tmp_path / case / 'rev')
        manifest, listing = _model(rev)
        manifest_path = str(tmp_path / case / 'manifest.json')
        with open(manifest_path, 'w') as handle:
            handle.write(mm.dumps(manifest))
        _corrupt_same_size(os.path.join(rev, SHARDS[1]))
        plays.append(_play(rev, manifest_path, listing, str(tmp_path / 'src') if case == 'source' else rev))
    (tmp_path / 'play.yml').write_text(yaml.safe_dump(plays))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_STDOUT_CALLBACK='ansible.builtin.json')
    argv = [PLAYBOOK, '-i', 'localhost,', '-c', 'local', '-e', 'ansible_python_interpreter=%s' % sys.executable,
            str(tmp_path / 'play.yml')]
    proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300, check=False)
    result = json.loads(proc.stdout)
    by_play = [dict((t['task']['name'], t['hosts']['localhost']) for t in play['tasks']) for play in result['plays']]
    # with a source: only the rewritten shard was hashed; it is named as the head's file, then removed
    hashed = by_play[0][NAMES[0]]
    assert hashed['hashed_files'] == [SHARDS[1]] and [m['name'] for m in hashed['sha256_mismatch']] == [SHARDS[1]]
    named = by_play[0][NAMES[3]]['msg']
    assert named.startswith('WARNING: localhost (head): %s/source/rev/%s changed since the last verified state'
                            % (tmp_path, SHARDS[1])), named
    assert '1 sha256 mismatch: %s' % SHARDS[1] in named and 'fetched again from the local source %s/src' % tmp_path in named
    assert sorted(os.listdir(str(tmp_path / 'source' / 'rev'))) == [SHARDS[0]]
    # without another source: the run stops naming the file, which stays for a repair by hand
    stopped = by_play[1][NAMES[2]]
    assert stopped.get('failed') and 'localhost (head): %s/nosource/rev/%s' % (tmp_path, SHARDS[1]) in stopped['msg']
    assert 'restore the file on the head from a good copy' in stopped['msg']
    assert sorted(os.listdir(str(tmp_path / 'nosource' / 'rev'))) == SHARDS
    assert proc.returncode != 0
