# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""model_sync planning, balancing, space checks and real local rsync copies (resume, repair)."""


import os
import shutil
import subprocess

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._model import model_sync as ms

# Under CI=true a missing rsync fails these tests (tests/harness/bootstrap.sh installs it) instead of skipping them.
HAVE_RSYNC = shutil.which('rsync') is not None or bool(os.environ.get('CI'))


def write(path, data, mtime=None):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(str(path), 'wb') as f:
        f.write(data)
    if mtime is not None:
        os.utime(str(path), (mtime, mtime))


@pytest.fixture
def src(tmp_path):
    root = tmp_path / 'src'
    for i in range(1, 4):
        write(root / ('model-0000%d-of-00003.safetensors' % i), os.urandom(300000 + i), 1700000000 + i)
    write(root / 'config.json', b'{"a": 1}\n', 1700000100)
    write(root / 'sub' / 'tokenizer.json', b'{}\n', 1700000200)
    write(root / '.cache' / 'huggingface' / 'x.lock', b'', 1700000300)
    return root


def test_plan_classifies_missing_shorter_different_identical():
    src = {'a': (10, 1), 'b': (10, 1), 'c': (10, 1), 'd': (10, 1), 'e': (10, 1)}
    dst = {'b': (4, 5), 'c': (10, 2), 'd': (10, 1), 'e': (12, 1), 'z': (1, 1)}
    p = ms.plan(src, dst)
    assert p['whole'] == ['a', 'c', 'e']
    assert p['append'] == ['b']
    assert p['skip'] == ['d']
    assert p['extra'] == ['z']
    # a: missing (10); b: resumed (6 more); c, e: held in full and replaced, written aside first (10 each)
    assert p['replace'] == ['c', 'e']
    assert p['bytes_needed'] == 10 + 6 + 10 + 10
    assert p['bytes_to_send'] == 10 + 10 + 10 + 6
    assert p['bytes_total'] == 50


def test_plan_force_recopies_identical_file():
    p = ms.plan({'a': (10, 1)}, {'a': (10, 1)}, force=['a'])
    # the new copy is written aside before the old one goes: its whole size must fit
    assert p['whole'] == ['a'] and p['replace'] == ['a'] and p['skip'] == [] and p['bytes_needed'] == 10


def test_balance_spreads_bytes():
    sizes = dict(('s%d' % i, 100) for i in range(8))
    sizes['small'] = 1
    parts = ms.balance(list(sizes), sizes, 4)
    assert len(parts) == 4
    totals = sorted(sum(sizes[n] for n in p) for p in parts)
    assert totals == [200, 200, 200, 201]
    assert sorted(n for p in parts for n in p) == sorted(sizes)
    assert ms.balance(['a'], {'a': 1}, 4) == [['a']]


def test_local_listing_excludes_cache_and_locks(src):
    listing = ms.local_listing(str(src))
    assert sorted(listing) == ['config.json', 'model-00001-of-00003.safetensors', 'model-00002-of-00003.safetensors',
                               'model-00003-of-00003.safetensors', 'sub/tokenizer.json']
    assert listing['config.json'] == (9, 1700000100)


def test_parse_remote_listing():
    text = '1000 4096 /srv\nmodel.safetensors\x0012\x001700000000.5\x00sub/a b\x003\x001700000001.0\x00x.lock\x001\x001.0\x00'
    free, fs, listing = ms.parse_remote_listing(text)
    assert free == 4096000 and fs == '/srv'
    assert listing == {'model.safetensors': (12, 1700000000), 'sub/a b': (3, 1700000001)}
    with pytest.raises(ms.SyncError):
        ms.parse_remote_listing('garbage\n')


def test_remote_listing_script_runs_in_a_shell(src, tmp_path):
    out = subprocess.check_output(['sh', '-c', ms.remote_listing_script(str(src))]).decode()
    free, fs, listing = ms.parse_remote_listing(out)
    assert free > 0 and fs == str(src)
    assert listing == ms.local_listing(str(src))
    # a destination that does not exist yet: free space of the nearest existing parent, empty listing
    out = subprocess.check_output(['sh', '-c', ms.remote_listing_script(str(tmp_path / 'no' / 'such'))]).decode()
    free, fs, listing = ms.parse_remote_listing(out)
    assert fs == str(tmp_path) and listing == {}


def test_split_ssh_and_rsync_argv():
    ssh = ['ssh', '-i', '/k ey', '-o', 'BatchMode=yes', 'root@10.0.0.2']
    rsh, host = ms.split_ssh(ssh)
    assert rsh == "ssh -i '/k ey' -o BatchMode=yes" and host == 'root@10.0.0.2'
    argv = ms.rsync_argv('rsync', '/m', '/d', '/tmp/l', 'append', ssh)
    assert '--append-verify' in argv and argv[-2:] == ['/m/', 'root@10.0.0.2:/d/']
    argv = ms.rsync_argv('rsync', '/m', '/d', '/tmp/l', 'whole')
    assert '--whole-file' in argv and '--ignore-times' in argv and argv[-2:] == ['/m/', '/d/']
    with pytest.raises(ms.SyncError):
        ms.split_ssh(['root@x'])


def test_parse_bytes_sent():
    assert ms.parse_bytes_sent('Number of files: 3\nTotal bytes sent: 1,234,567\n') == 1234567
    assert ms.parse_bytes_sent('') == 0


def test_space_check_fails_with_numbers(src, tmp_path, monkeypatch):
    monkeypatch.setattr(ms, 'free_bytes', lambda path: 1000)
    with pytest.raises(ms.SyncError) as e:
        ms.sync(str(src), str(tmp_path / 'dst'), check_mode=True)
    assert 'not enough disk space on this host (local copy)' in e.value.msg
    assert 'free 1000 B (1000 bytes)' in e.value.msg
    assert e.value.fields['bytes_needed'] == sum(s for s, _m in ms.local_listing(str(src)).values())


def test_space_counts_what_is_already_there(src, tmp_path, monkeypatch):
    dst = tmp_path / 'dst'
    shutil.copytree(str(src), str(dst))
    os.truncate(str(dst / 'model-00001-of-00003.safetensors'), 1000)
    monkeypatch.setattr(ms, 'free_bytes', lambda path: 300001 - 1000)
    r = ms.sync(str(src), str(dst), check_mode=True)
    assert r['bytes_needed'] == 300001 - 1000 and r['files_resumed'] == ['model-00001-of-00003.safetensors']


def test_remote_listing_failure_is_reported(src):
    def runner(argv):
        return 255, '', 'Permission denied (publickey).'
    with pytest.raises(ms.SyncError) as e:
        ms.sync(str(src), '/d', ssh=['ssh', 'root@h'], runner=runner)
    assert 'root@h' in e.value.msg and 'Permission denied' in e.value.msg


@pytest.mark.skipif(not HAVE_RSYNC, reason='rsync not installed')
def test_copy_resume_repair_and_noop(src, tmp_path):
    dst = str(tmp_path / 'dst')
    r = ms.sync(str(src), dst, streams=2)
    total = r['bytes_total']
    assert r['changed'] and r['bytes_copied'] == total and r['streams_used'] == 2
    assert ms.local_listing(dst) == ms.local_listing(str(src))
    # second run: nothing to do
    r = ms.sync(str(src), dst, streams=2)
    assert not r['changed'] and r['bytes_copied'] == 0 and r['files_skipped'] == 5
    # interrupted copy: a shard cut short is resumed, only its tail is counted
    shard = 'model-00002-of-00003.safetensors'
    os.truncate(os.path.join(dst, shard), 1000)
    r = ms.sync(str(src), dst, streams=2)
    assert r['files_resumed'] == [shard] and r['bytes_copied'] == 300002 - 1000
    with open(os.path.join(dst, shard), 'rb') as a, open(str(src / shard), 'rb') as b:
        assert a.read() == b.read()
    # corrupted prefix under a short file: append-verify detects it and resends the whole file
    with open(os.path.join(dst, shard), 'r+b') as f:
        f.truncate(5000)
        f.seek(10)
        f.write(b'XXXX')
    ms.sync(str(src), dst)
    with open(os.path.join(dst, shard), 'rb') as a, open(str(src / shard), 'rb') as b:
        assert a.read() == b.read()
    # same size and mtime but corrupt: only `force` re-copies it
    path = os.path.join(dst, shard)
    st = os.stat(path)
    with open(path, 'r+b') as f:
        f.seek(100)
        f.write(b'YYYY')
    os.utime(path, (st.st_atime, st.st_mtime))
    assert not ms.sync(str(src), dst)['changed']
    r = ms.sync(str(src), dst, force=[shard])
    assert r['files_copied'] == [shard] and r['bytes_copied'] == 300002
    with open(path, 'rb') as a, open(str(src / shard), 'rb') as b:
        assert a.read() == b.read()
    # files only on the destination are reported, never deleted
    write(os.path.join(dst, 'mine.txt'), b'keep')
    r = ms.sync(str(src), dst)
    assert r['extra'] == ['mine.txt'] and os.path.exists(os.path.join(dst, 'mine.txt'))


def test_same_dir_refused(src):
    with pytest.raises(ms.SyncError):
        ms.sync(str(src), str(src))


def test_missing_src_refused(tmp_path):
    with pytest.raises(ms.SyncError) as e:
        ms.sync(str(tmp_path / 'nope'), str(tmp_path / 'd'))
    assert 'not a directory' in e.value.msg


def test_human():
    assert ms.human(512) == '512 B'
    assert ms.human(1536) == '1.5 KiB'
    assert ms.human(149 * 1024 ** 3) == '149.0 GiB'


# --------------------------------------------------------------------------- hub cache snapshots (files are links into blobs/)

def hub_snapshot(tmp_path, rev='0123456789abcdef0123456789abcdef01234567'):
    """A Hugging Face hub cache: snapshots/<rev>/<file> are relative symlinks to ../../blobs/<sha256>."""
    import hashlib
    repo = tmp_path / 'hub' / 'models--deepseek-ai--DeepSeek-V4-Flash'
    files = {'model-00001-of-00002.safetensors': os.urandom(250000), 'model-00002-of-00002.safetensors': os.urandom(123457),
             'config.json': b'{"model_type": "deepseek_v4"}\n', 'tokenizer/tokenizer.json': b'{"v": 1}\n'}
    snap = repo / 'snapshots' / rev
    for i, (rel, data) in enumerate(sorted(files.items())):
        sha = hashlib.sha256(data).hexdigest()
        write(repo / 'blobs' / sha, data, 1700000000 + i)
        link = snap / rel
        os.makedirs(str(link.parent), exist_ok=True)
        os.symlink(os.path.relpath(str(repo / 'blobs' / sha), str(link.parent)), str(link))
    (repo / 'refs').mkdir()
    (repo / 'refs' / 'main').write_text(rev)
    return snap, files


def fake_ssh(tmp_path):
    """An ``ssh`` stand-in that runs the remote command here (rsync -e and the listing go through it)."""
    path = tmp_path / 'fake-ssh'
    # rsync -e runs `<rsh> -l root worker rsync --server ...`; the listing runs `<rsh> root@worker '<script>'`.
    path.write_text('#!/bin/sh\nwhile [ "$1" = -l ]; do shift 2; done\nshift\nexec sh -c "$*"\n')
    os.chmod(str(path), 0o755)
    return [str(path), 'root@worker']


def assert_regular_copy(dst, files):
    for rel, data in files.items():
        path = os.path.join(dst, rel)
        assert not os.path.islink(path), rel
        assert os.path.isfile(path), rel
        with open(path, 'rb') as f:
            assert f.read() == data, rel
    assert sorted(ms.local_listing(dst, follow=False)) == sorted(files)


@pytest.mark.skipif(not HAVE_RSYNC, reason='rsync not installed')
@pytest.mark.parametrize('remote', [False, True], ids=['local', 'over-ssh'])
def test_hub_cache_snapshot_copied_as_regular_files_with_the_bytes(tmp_path, remote):
    """A snapshot of links into ../../blobs/ arrives as regular files with the blobs' bytes, never as links."""
    snap, files = hub_snapshot(tmp_path)
    assert all(os.path.islink(str(snap / rel)) for rel in files)
    dst = str(tmp_path / 'worker' / 'DeepSeek-V4-Flash')
    ssh = fake_ssh(tmp_path) if remote else None
    r = ms.sync(str(snap), dst, ssh=ssh, streams=2)
    assert r['changed'] and r['bytes_total'] == sum(len(d) for d in files.values())
    assert r['bytes_copied'] == r['bytes_total'] and r['bytes_total'] > 370000
    assert_regular_copy(dst, files)
    # same size and mtime as the blobs: a second run copies nothing
    r = ms.sync(str(snap), dst, ssh=ssh, streams=2)
    assert not r['changed'] and r['files_skipped'] == len(files)


@pytest.mark.skipif(not HAVE_RSYNC, reason='rsync not installed')
def test_links_left_on_the_destination_are_replaced_by_files(tmp_path):
    """A destination holding links (what `rsync -a` used to ship: dangling on the worker) is not a copy."""
    snap, files = hub_snapshot(tmp_path)
    dst = tmp_path / 'worker' / 'DeepSeek-V4-Flash'
    for rel in files:
        os.makedirs(str((dst / rel).parent), exist_ok=True)
        os.symlink(os.readlink(str(snap / rel)), str(dst / rel))  # ../../blobs/<sha>: dangling here
    r = ms.sync(str(snap), str(dst), ssh=fake_ssh(tmp_path))
    assert sorted(r['files_copied']) == sorted(files)
    assert_regular_copy(str(dst), files)


# --------------------------------------------------------------------------- never in place over a held copy; drop-behind

def test_plan_and_argv_replace_a_held_file_aside_never_in_place():
    p = ms.plan({'a': (10, 1), 'b': (10, 1), 'c': (10, 1)}, {'a': (10, 2), 'c': (4, 1)}, force=[])
    assert p['whole'] == ['a', 'b'] and p['replace'] == ['a'] and p['append'] == ['c']
    argv = ms.rsync_argv('rsync', '/m', '/d', '/tmp/l', 'replace')
    assert '--inplace' not in argv and '--partial' not in argv and '--temp-dir=/d/.cache/dgxspark-ds4-sync' in argv
    assert '--inplace' in ms.rsync_argv('rsync', '/m', '/d', '/tmp/l', 'whole')


@pytest.mark.skipif(not HAVE_RSYNC, reason='rsync not installed')
@pytest.mark.parametrize('remote', [False, True], ids=['local', 'over-ssh'])
def test_a_replaced_file_is_renamed_over_the_old_copy_never_rewritten_in_place(src, tmp_path, remote):
    dst = str(tmp_path / 'dst')
    ssh = fake_ssh(tmp_path) if remote else None
    r = ms.sync(str(src), dst, ssh=ssh)
    assert r['drop_behind_warnings'] == []
    shard = 'model-00001-of-00003.safetensors'
    path = os.path.join(dst, shard)
    with open(path, 'rb') as f:
        good = f.read()
    inode = os.stat(path).st_ino
    # the head's file changes (another mtime): the worker's copy is replaced by a new file, not rewritten
    os.utime(str(src / shard), (1700009999, 1700009999))
    r = ms.sync(str(src), dst, ssh=ssh)
    assert r['files_copied'] == [shard] and r['files_replaced'] == [shard]
    assert os.stat(path).st_ino != inode
    with open(path, 'rb') as f:
        assert f.read() == good
    assert os.listdir(os.path.join(dst, ms.TEMP_DIR)) == []


def test_drop_behind_runs_the_same_command_here_and_over_ssh():
    from ansible_collections.dgxspark.ds4.plugins.module_utils._model import drop_caches as dc
    calls = []

    def run(argv):
        calls.append(argv)
        return (0, '', '') if len(calls) == 1 else (1, '', 'dd: failed to discard cache')
    assert dc.drop_behind(run, "/m dir", ['b.safetensors', "it's.json", 'b.safetensors']) is None
    assert calls[0][:2] == ['sh', '-c']
    assert calls[0][2] == ("cd '/m dir' && sync -d -- b.safetensors 'it'\"'\"'s.json' && for f in b.safetensors "
                           "'it'\"'\"'s.json'; do dd if=\"$f\" iflag=nocache count=0 status=none || exit 1; done")
    warning = dc.drop_behind(run, '/d', ['a'], ssh=['ssh', '-i', 'k', 'root@w'])
    assert calls[1][:4] == ['ssh', '-i', 'k', 'root@w'] and calls[1][4].startswith("cd /d && sync -d -- a")
    assert 'on root@w failed (rc=1): dd: failed to discard cache' in warning
    assert dc.drop_behind(run, '/d', []) is None and len(calls) == 2


def test_drop_behind_command_runs_for_real(tmp_path):
    from ansible_collections.dgxspark.ds4.plugins.module_utils._model import drop_caches as dc
    write(tmp_path / 'a b.bin', os.urandom(4096))
    proc = subprocess.run(['sh', '-c', dc.drop_behind_command(str(tmp_path), ['a b.bin'])], stderr=subprocess.PIPE,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run(['sh', '-c', dc.drop_behind_command(str(tmp_path), ['missing'])], stderr=subprocess.PIPE,
                          check=False)
    assert proc.returncode != 0
