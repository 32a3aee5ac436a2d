# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""drop_caches logic against a fake proc root (never the real /proc/sys)."""


import errno
import json
import os
import shutil
import stat
import tempfile

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._model import drop_caches as dc

GIB = 1024 ** 3


def write_meminfo(root, available_kib):
    with open(os.path.join(str(root), 'meminfo'), 'w') as handle:
        handle.write('MemTotal:       127605836 kB\n'
                     'MemFree:          3915668 kB\n'
                     'MemAvailable:    %d kB\n'
                     'Buffers:           12345 kB\n' % available_kib)


@pytest.fixture
def proc(tmp_path):
    os.makedirs(str(tmp_path / 'sys' / 'vm'))
    (tmp_path / 'sys' / 'vm' / 'drop_caches').write_text(u'0\n')
    write_meminfo(tmp_path, 11 * 1024 * 1024)  # 11 GiB
    return tmp_path


def freeing_sync(root, new_kib, calls):
    """A sync stand-in that records the call and makes the fake kernel 'free' memory."""
    def _sync():
        calls.append('sync')
        write_meminfo(root, new_kib)
    return _sync


@pytest.mark.parametrize('text,expected', [
    ('100GiB', 100 * GIB),
    ('1.5 GiB', int(1.5 * GIB)),
    ('512MiB', 512 * 1024 ** 2),
    ('100GB', 100 * 1000 ** 3),
    ('4096', 4096),
    ('7B', 7),
    (123, 123),
    (None, None),
])
def test_parse_size(text, expected):
    assert dc.parse_size(text) == expected


@pytest.mark.parametrize('text', ['100G', 'lots', '-5', '1.2.3GiB', True])
def test_parse_size_refuses_ambiguous_or_garbage(text):
    with pytest.raises(dc.DropCachesError) as err:
        dc.parse_size(text)
    assert 'min_available' in err.value.msg


def test_reads_mem_available_in_bytes(proc):
    assert dc.read_mem_available(str(proc)) == 11 * GIB


def test_missing_meminfo_names_the_path(tmp_path):
    with pytest.raises(dc.DropCachesError) as err:
        dc.read_mem_available(str(tmp_path))
    assert str(tmp_path / 'meminfo') in err.value.msg


def test_meminfo_without_memavailable(tmp_path):
    (tmp_path / 'meminfo').write_text(u'MemTotal: 1 kB\n')
    with pytest.raises(dc.DropCachesError) as err:
        dc.read_mem_available(str(tmp_path))
    assert 'no MemAvailable' in err.value.msg


def test_sync_then_write_and_report_freed(proc):
    calls = []
    result = dc.drop_caches(str(proc), level=3, sync_fn=freeing_sync(proc, 116 * 1024 * 1024, calls))
    assert calls == ['sync']
    assert (proc / 'sys' / 'vm' / 'drop_caches').read_text() == u'3\n'
    assert result['changed'] is True
    assert result['synced'] is True
    assert result['mem_available_before'] == 11 * GIB
    assert result['mem_available_after'] == 116 * GIB
    assert result['freed_bytes'] == 105 * GIB


def test_sync_can_be_disabled(proc):
    calls = []
    result = dc.drop_caches(str(proc), level=1, do_sync=False, sync_fn=freeing_sync(proc, 1, calls))
    assert calls == []
    assert result['synced'] is False
    assert (proc / 'sys' / 'vm' / 'drop_caches').read_text() == u'1\n'


def test_min_available_met(proc):
    result = dc.drop_caches(str(proc), min_available='100GiB', sync_fn=freeing_sync(proc, 116 * 1024 * 1024, []))
    assert result['min_available_bytes'] == 100 * GIB
    assert result['min_available_met'] is True


def test_min_available_short_fails_with_numbers(proc):
    with pytest.raises(dc.DropCachesError) as err:
        dc.drop_caches(str(proc), min_available='100GiB', sync_fn=freeing_sync(proc, 30 * 1024 * 1024, []))
    msg = err.value.msg
    assert '30.00 GiB' in msg and '11.00 GiB' in msg and '19.00 GiB freed' in msg
    assert 'min_available=100GiB' in msg and str(100 * GIB) in msg
    # the write did happen, so the failure result says changed
    assert err.value.fields['changed'] is True
    assert err.value.fields['mem_available_after'] == 30 * GIB


def test_check_mode_writes_nothing(proc):
    calls = []
    result = dc.drop_caches(str(proc), level=3, check_mode=True, min_available='500GiB',
                            sync_fn=freeing_sync(proc, 116 * 1024 * 1024, calls))
    assert calls == []
    assert (proc / 'sys' / 'vm' / 'drop_caches').read_text() == u'0\n'
    assert result['changed'] is True
    assert result['mem_available_after'] is None
    assert result['min_available_met'] is None
    assert 'would sync and write 3' in result['reason']


def deny(monkeypatch, err):
    """Make opening the fake drop_caches file fail like the kernel would (works as root too)."""
    import errno
    real_open = os.open

    def fake_open(path, flags, *args):
        if str(path).endswith('drop_caches'):
            raise OSError(getattr(errno, err), os.strerror(getattr(errno, err)), path)
        return real_open(path, flags, *args)
    monkeypatch.setattr(dc.os, 'open', fake_open)
    monkeypatch.setattr(dc.os, 'access', lambda path, mode: False)


def test_not_writable_fails_with_reason(proc, monkeypatch):
    deny(monkeypatch, 'EACCES')
    target = proc / 'sys' / 'vm' / 'drop_caches'
    with pytest.raises(dc.DropCachesError) as err:
        dc.drop_caches(str(proc), sync_fn=lambda: None)
    assert str(target) in err.value.msg
    assert 'become: true' in err.value.msg
    assert 'skip_if_readonly' in err.value.msg
    assert err.value.fields['changed'] is False
    assert target.read_text() == u'0\n'


@pytest.mark.parametrize('check_mode', [False, True])
def test_not_writable_skipped(proc, monkeypatch, check_mode):
    deny(monkeypatch, 'EACCES')
    result = dc.drop_caches(str(proc), skip_if_readonly=True, check_mode=check_mode, sync_fn=lambda: None)
    assert result['changed'] is False
    assert result['skipped'] is True
    assert 'not writable' in result['reason']


NOBODY = 65534


def _denied_run(root):
    """Open the 0400 file for writing as this user (expecting the kernel's EACCES), then run drop_caches."""
    try:
        os.close(os.open(os.path.join(root, 'sys', 'vm', 'drop_caches'), os.O_WRONLY))
        opened = 'opened'
    except OSError as exc:
        opened = errno.errorcode.get(exc.errno, str(exc.errno))
    result = dc.drop_caches(root, skip_if_readonly=True, sync_fn=lambda: None)
    return {'euid': os.geteuid(), 'open': opened, 'skipped': result['skipped'], 'reason': result.get('reason', '')}


def _denied_run_unprivileged(root):
    """As root, file modes do not bind: run the check in a forked child that has dropped to nobody (65534)."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 1
        try:
            os.close(rfd)
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            os.write(wfd, json.dumps(_denied_run(root)).encode())
            code = 0
        except BaseException as exc:  # pylint: disable=broad-except
            os.write(wfd, json.dumps({'error': repr(exc)}).encode())
        finally:
            os._exit(code)
    os.close(wfd)
    chunks = []
    while True:
        chunk = os.read(rfd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(rfd)
    os.waitpid(pid, 0)
    return json.loads(b''.join(chunks).decode())


def test_real_file_mode_denial():
    """A real EACCES from the kernel (a 0400 root-owned file opened for writing by another user) is a skip, not a
    failure. As root (CI) the check runs in a child that drops to uid/gid 65534, in a tree it can traverse."""
    root = tempfile.mkdtemp(prefix='ds4-drop-caches-')
    try:
        os.chmod(root, 0o755)
        os.makedirs(os.path.join(root, 'sys', 'vm'))
        os.chmod(os.path.join(root, 'sys'), 0o755)
        os.chmod(os.path.join(root, 'sys', 'vm'), 0o755)
        target = os.path.join(root, 'sys', 'vm', 'drop_caches')
        with open(target, 'w') as handle:
            handle.write('0\n')
        write_meminfo(root, 11 * 1024 * 1024)
        os.chmod(os.path.join(root, 'meminfo'), 0o444)
        os.chmod(target, stat.S_IRUSR)
        got = _denied_run_unprivileged(root) if os.geteuid() == 0 else _denied_run(root)
        assert 'error' not in got, got
        assert got['euid'] != 0
        assert got['open'] == 'EACCES', got  # the kernel refused, not a stand-in
        assert got['skipped'] is True and 'not writable' in got['reason'], got
        with open(target) as handle:
            assert handle.read() == '0\n'
    finally:
        shutil.rmtree(root)


@pytest.mark.parametrize('check_mode', [False, True])
def test_read_only_filesystem_reason(proc, monkeypatch, check_mode):
    deny(monkeypatch, 'EROFS')
    result = dc.drop_caches(str(proc), skip_if_readonly=True, check_mode=check_mode, sync_fn=lambda: None)
    assert result['skipped'] is True and result['changed'] is False
    assert 'read-only file system' in result['reason']
    with pytest.raises(dc.DropCachesError) as err:
        dc.drop_caches(str(proc), check_mode=check_mode, sync_fn=lambda: None)
    assert 'read-only file system' in err.value.msg


def test_wrong_proc_root_creates_nothing(tmp_path):
    write_meminfo(tmp_path, 1024)
    with pytest.raises(dc.DropCachesError) as err:
        dc.drop_caches(str(tmp_path), sync_fn=lambda: None)
    assert 'does not exist' in err.value.msg
    assert not (tmp_path / 'sys').exists()


def test_invalid_level(proc):
    with pytest.raises(dc.DropCachesError) as err:
        dc.drop_caches(str(proc), level=4)
    assert 'level=4' in err.value.msg


@pytest.mark.parametrize('text,unit', [('3 TiB', 'T'), ('0.5GiB', 'G'), ('64kib', 'K'), ('4096', 'B')])
def test_the_binary_units_are_ansible_cores_human_to_bytes(text, unit):
    """Bytes and KiB..TiB through ansible-core's own converter (its K/M/G/T are powers of 1024); the decimal units,
    which it reads as powers of 1024 too, are multiplied in drop_caches (test_parse_size: 100GB)."""
    from ansible.module_utils.common.text.formatters import human_to_bytes
    number = text.rstrip('TtGgKkIiBb ').strip()
    assert dc.parse_size(text) == human_to_bytes(number, default_unit=unit)
