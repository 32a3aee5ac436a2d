# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the node package's prestart.py and verify_unit.py (the unit's guards; the entry points
roles/vllm_service/files/prestart.py and verify_unit.py are their mains), run against a fake /proc, a fake /dev/shm
and a fake docker CLI.
"""


import os
import socket

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import prestart
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import verify_unit

CID_DEAD = 'a' * 64
CID_LIVE = 'b' * 64


def fake_proc(tmp_path, procs, meminfo=(100 * 1024 * 1024, 50 * 1024 * 1024), listen=None):
    root = tmp_path / 'proc'
    (root / 'net').mkdir(parents=True)
    for pid, title, cgroup in procs:
        d = root / str(pid)
        (d / 'fd').mkdir(parents=True)
        (d / 'cmdline').write_bytes(title.encode() + b'\0--flag\0')
        (d / 'cgroup').write_text(cgroup)
    total_kb, avail_kb = meminfo[:2]
    free_kb = meminfo[2] if len(meminfo) > 2 else avail_kb
    (root / 'meminfo').write_text('MemTotal: %d kB\nMemFree: %d kB\nMemAvailable: %d kB\n' % (total_kb, free_kb, avail_kb))
    header = '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n'
    rows = ''
    if listen:
        port, inode, pid = listen
        rows = '   0: 00000000:%04X 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 %d 1\n' % (port, inode)
        os.symlink('socket:[%d]' % inode, str(root / str(pid) / 'fd' / '3'))
    (root / 'net' / 'tcp').write_text(header + rows)
    (root / 'net' / 'tcp6').write_text(header)
    return str(root)


def base_cfg(proc_root, **kw):
    cfg = {'container_name': 'dgxspark-ds4-head', 'proc_root': proc_root, 'docker': '/bin/false',
           'process_title_prefixes': ['VLLM::'], 'kill_wait_s': 0.1}
    cfg.update(kw)
    return cfg


def test_vllm_processes_are_matched_by_title_and_container(tmp_path):
    root = fake_proc(tmp_path, [
        (10, 'VLLM::Worker_TP0', '0::/system.slice/docker-%s.scope\n' % CID_DEAD),
        (11, 'VLLM::Worker_TP1', '12:memory:/docker/%s\n' % CID_LIVE),
        (12, 'python3', '0::/system.slice/docker-%s.scope\n' % CID_DEAD),
        (13, 'VLLM::EngineCore', '0::/user.slice\n'),
    ])
    found = prestart.vllm_processes(base_cfg(root))
    assert sorted(found) == [(10, 'VLLM::Worker_TP0', CID_DEAD), (11, 'VLLM::Worker_TP1', CID_LIVE),
                             (13, 'VLLM::EngineCore', None)]


def test_only_processes_of_dead_containers_are_killed(tmp_path, monkeypatch):
    root = fake_proc(tmp_path, [
        (10, 'VLLM::Worker_TP0', '0::/system.slice/docker-%s.scope\n' % CID_DEAD),
        (11, 'VLLM::Worker_TP1', '0::/system.slice/docker-%s.scope\n' % CID_LIVE),
        (13, 'VLLM::EngineCore', '0::/user.slice\n'),
    ])
    killed = []
    monkeypatch.setattr(prestart, 'running_container_ids', lambda cfg: {CID_LIVE})
    monkeypatch.setattr(prestart.os, 'kill', lambda pid, sig: killed.append(pid))
    with pytest.raises(prestart.PrestartError, match='still alive'):
        prestart.end_leftover_processes(base_cfg(root))  # the fake pid 10 never goes away
    assert killed == [10]


def test_busy_port_names_its_owner(tmp_path):
    root = fake_proc(tmp_path, [(42, 'VLLM::Worker_TP0', '')], listen=(29501, 777, 42))
    cfg = base_cfg(root, ports=[{'port': 29501, 'what': 'master_port'}, {'port': 8000, 'what': 'API port'}])
    with pytest.raises(prestart.PrestartError) as err:
        prestart.check_ports(cfg)
    assert 'port 29501 (master_port)' in str(err.value)
    assert 'pid 42 "VLLM::Worker_TP0 --flag"' in str(err.value)
    assert 'EADDRINUSE' in str(err.value)
    assert '8000' not in str(err.value)


def test_shm_cleared_only_when_no_vllm_runs(tmp_path, monkeypatch):
    shm = tmp_path / 'shm'
    shm.mkdir()
    for name in ('psm_1234', 'sem.mp-abc', 'nccl-keep', 'other'):
        (shm / name).write_text('x')
    root = fake_proc(tmp_path, [])
    monkeypatch.setattr(prestart, 'docker', lambda cfg, *a: (0, 'dgxspark-ds4-worker', ''))
    prestart.clear_shm(base_cfg(root, shm_dir=str(shm)))
    assert len(os.listdir(str(shm))) == 4
    monkeypatch.setattr(prestart, 'docker', lambda cfg, *a: (0, 'unrelated', ''))
    prestart.clear_shm(base_cfg(root, shm_dir=str(shm)))
    assert sorted(os.listdir(str(shm))) == ['nccl-keep', 'other']


def test_memory_gate_fails_with_the_numbers(tmp_path):
    root = fake_proc(tmp_path, [], meminfo=(100 * 1024 * 1024, 50 * 1024 * 1024))
    with pytest.raises(prestart.PrestartError) as err:
        prestart.memory_gate(base_cfg(root, memory_fraction=0.9, memory_wait_s=0))
    msg = str(err.value)
    assert '50.0 GiB' in msg and '0.90' in msg and '100.0 GiB' in msg and '90.0 GiB' in msg
    prestart.memory_gate(base_cfg(root, memory_fraction=0.4, memory_wait_s=0))
    prestart.memory_gate(base_cfg(root, memory_fraction=0))


def test_memory_gate_counts_memfree_not_the_page_cache(tmp_path):
    """Seed 000: CUDA reported 4.75/119.67 GiB free with 110 GiB in page cache. MemAvailable counts
    that cache as free; the gate must not, and the refusal shows both numbers."""
    gib_kb = 1024 * 1024
    root = fake_proc(tmp_path, [], meminfo=(int(119.67 * gib_kb), 115 * gib_kb, int(4.75 * gib_kb)))
    with pytest.raises(prestart.PrestartError) as err:
        prestart.memory_gate(base_cfg(root, memory_fraction=0.9, memory_wait_s=0))
    msg = str(err.value)
    assert 'MemFree 4.8 GiB' in msg and 'MemAvailable 115.0 GiB' in msg, msg
    assert 'reclaimable page cache' in msg and 'vllm_service_drop_caches' in msg, msg
    # after the drop the cache is free again: the gate opens
    root2 = fake_proc(tmp_path / 'after', [], meminfo=(int(119.67 * gib_kb), 116 * gib_kb, 116 * gib_kb))
    prestart.memory_gate(base_cfg(root2, memory_fraction=0.9, memory_wait_s=0))


def test_meminfo_without_memfree_is_refused(tmp_path):
    root = tmp_path / 'proc'
    root.mkdir()
    (root / 'meminfo').write_text('MemTotal: 100 kB\nMemAvailable: 50 kB\n')
    with pytest.raises(prestart.PrestartError, match='cannot read MemFree from'):
        prestart.meminfo(base_cfg(str(root)))


def test_drop_caches_skip_and_readonly(tmp_path):
    root = fake_proc(tmp_path, [])
    prestart.drop_caches(base_cfg(root, drop_caches=False))
    with pytest.raises(prestart.PrestartError, match='vllm_service_drop_caches: false'):
        prestart.drop_caches(base_cfg(root, drop_caches=True))  # no <root>/sys/vm: not writable
    (tmp_path / 'proc' / 'sys' / 'vm').mkdir(parents=True)
    prestart.drop_caches(base_cfg(root, drop_caches=True))
    assert (tmp_path / 'proc' / 'sys' / 'vm' / 'drop_caches').read_text() == '3\n'


def test_peer_reachable_when_refused_and_bounded_wait(monkeypatch):
    srv = socket.socket()
    srv.bind(('127.0.0.1', 0))
    port = srv.getsockname()[1]
    srv.close()  # nothing listens: refused means the host is up
    assert prestart.reachable('127.0.0.1', port, 1)
    prestart.wait_for_peers({'peers': [{'name': 'w', 'addr': '127.0.0.1', 'port': port}], 'peer_wait_s': 0})
    monkeypatch.setattr(prestart, 'reachable', lambda addr, port, timeout: False)
    with pytest.raises(prestart.PrestartError, match='not reachable'):
        prestart.wait_for_peers({'peers': [{'name': 'w', 'addr': '192.0.2.1', 'port': 22}], 'peer_wait_s': 0,
                                 'peer_poll_s': 0})


UNIT = """[Unit]
Description=x
[Service]
ExecStartPre={prestart} {cfg}
ExecStart={docker} run \\
    --rm --name dgxspark-ds4-head \\
    --log-driver none \\
    -v {script}:/etc/dgxspark-ds4/launch-head.sh:ro \\
    --env-file {env} \\
    --entrypoint /etc/dgxspark-ds4/launch-head.sh \\
    sha256:abc
ExecStopPost=-{docker} rm -f dgxspark-ds4-head
"""


def _unit(tmp_path, **over):
    paths = {}
    for name in ('prestart', 'docker', 'script', 'env', 'cfg'):
        p = tmp_path / name
        p.write_text('#!/bin/sh\n')
        p.chmod(0o755)
        paths[name] = str(p)
    paths.update(over)
    unit = tmp_path / 'dgxspark-ds4-head.service'
    unit.write_text(UNIT.format(**paths))
    return str(unit)


def test_verify_unit_names_every_missing_path(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(verify_unit.shutil, 'which', lambda name: None)
    unit = _unit(tmp_path, script='/nonexistent/launch-head-090.sh', prestart='/nonexistent/prestart')
    assert verify_unit.main(['verify-unit', unit, 'dgxspark-ds4-head.service']) == 1
    err = capsys.readouterr().err
    assert 'ExecStartPre: executable /nonexistent/prestart does not exist' in err
    assert 'volume source /nonexistent/launch-head-090.sh' in err
    assert 'launch script /nonexistent/launch-head-090.sh' in err


def test_verify_unit_accepts_a_complete_unit(tmp_path, monkeypatch):
    monkeypatch.setattr(verify_unit.shutil, 'which', lambda name: None)
    unit = _unit(tmp_path)
    # Without systemd-analyze the script refuses (cannot verify); everything else is fine.
    problems = []
    for key, value in verify_unit.exec_lines(open(unit).read()):
        words = verify_unit.shlex.split(value)
        if words[1:2] == ['run']:
            verify_unit.check_docker_run(words[2:], problems)
    assert problems == []
    assert verify_unit.main(['verify-unit', unit, 'dgxspark-ds4-head.service']) == 1


def test_verify_unit_leaves_the_argv_rules_to_the_config_play(tmp_path):
    """The node checks what only it knows (the paths exist, the launch script is executable); the docker run argv's own
    rules (one bounded log driver, the entrypoint a read-only bind, no path mounted twice) are the config play's
    (plugins/plugin_utils/service_layout.py; tests/unit/plugins/plugin_utils/test_docker_run.py), not re-derived here."""
    script = tmp_path / 'launch-head.sh'
    script.write_text('#!/bin/sh\n')
    script.chmod(0o755)
    for args in ([], ['--log-driver', 'journald'], ['-v', '%s:/etc/dgxspark-ds4/launch-head.sh' % script]):
        problems = []
        verify_unit.check_docker_run(['--rm'] + args + ['-v', '%s:/etc/dgxspark-ds4/launch-head.sh:ro' % script,
                                                        '--entrypoint', '/etc/dgxspark-ds4/launch-head.sh', 'sha256:abc'], problems)
        assert problems == [], problems
    # what the node knows: the launch script at the entrypoint must be an executable file
    script.chmod(0o644)
    problems = []
    verify_unit.check_docker_run(['-v', '%s:/x/launch.sh:ro' % script, '--entrypoint', '/x/launch.sh', 'sha256:abc'], problems)
    assert problems == ['launch script %s is not executable' % script]


def test_verify_unit_knows_a_docker_cli_at_another_path(tmp_path, monkeypatch, capsys):
    """vllm_service_docker_bin need not be named docker: the role passes it, and its `run` is checked as docker run
    (not every `src:dst:ro` volume taken for a missing path, which refused every unit with a wrapper CLI)."""
    monkeypatch.setattr(verify_unit.shutil, 'which', lambda name: None)
    wrapper = tmp_path / 'ds4-docker'
    wrapper.write_text('#!/bin/sh\n')
    wrapper.chmod(0o755)
    unit = _unit(tmp_path, docker=str(wrapper))
    assert verify_unit.main(['verify-unit', unit, 'dgxspark-ds4-head.service']) == 1
    assert ':/etc/dgxspark-ds4/launch-head.sh:ro does not exist' in capsys.readouterr().err
    assert verify_unit.main(['verify-unit', unit, 'dgxspark-ds4-head.service', str(wrapper)]) == 1
    err = capsys.readouterr().err
    assert 'does not exist' not in err and 'systemd-analyze not found' in err, err
    # a link to the CLI is the CLI too
    link = tmp_path / 'docker-link'
    link.symlink_to(wrapper)
    assert verify_unit.is_docker(str(wrapper), str(link)) and not verify_unit.is_docker(str(tmp_path / 'prestart'), str(link))


# ---------------------------------------------------------------- foreign drop-ins (verify-unit --dropins)

DROPIN_UNIT = 'dgxspark-ds4-head.service'
DROPIN_UNIT_FILE = '/etc/systemd/system/dgxspark-ds4-head.service'
# `systemctl show -p DropInPaths,FragmentPath,ExecStart,NeedDaemonReload` of a unit with seed 000's override
SHOW = ('ExecStart={ path=/usr/local/bin/launch-old.sh ; argv[]=/usr/local/bin/launch-old.sh --port 8000 ; '
        'ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\n'
        'FragmentPath=/etc/systemd/system/dgxspark-ds4-head.service\n'
        'DropInPaths=/etc/systemd/system/dgxspark-ds4-head.service.d/override.conf '
        '/usr/lib/systemd/system/service.d/10-timeout-abort.conf\n'
        'NeedDaemonReload=no\n')


def test_dropin_dirs_are_the_units_own_and_its_prefixes():
    assert verify_unit.dropin_dir_names(DROPIN_UNIT) == [
        'dgxspark-ds4-head.service.d', 'dgxspark-ds4-.service.d', 'dgxspark-.service.d']


def test_foreign_dropin_is_named_with_its_path_exec_start_and_the_fix():
    props = node_probe.parse_unit_show(SHOW)
    problems = verify_unit.dropin_problems(DROPIN_UNIT, DROPIN_UNIT_FILE, [], props, [])
    assert len(problems) == 1  # the type-wide service.d drop-in is every service's, not refused
    text = problems[0]
    assert text.startswith('drop-in /etc/systemd/system/dgxspark-ds4-head.service.d/override.conf was not written by')
    assert "ExecStart now: /usr/local/bin/launch-old.sh --port 8000" in text
    assert 'rm /etc/systemd/system/dgxspark-ds4-head.service.d/override.conf && systemctl daemon-reload' in text
    assert 'vllm_service_allowed_dropins: [/etc/systemd/system/dgxspark-ds4-head.service.d/override.conf]' in text
    # adopted explicitly: no problem
    assert verify_unit.dropin_problems(
        DROPIN_UNIT, DROPIN_UNIT_FILE, ['/etc/systemd/system/dgxspark-ds4-head.service.d/override.conf'], props, []) == []


def test_dropin_on_disk_before_a_daemon_reload_and_a_prefix_dropin(tmp_path):
    roots = [str(tmp_path / 'etc'), str(tmp_path / 'run')]
    own = tmp_path / 'etc' / 'dgxspark-ds4-head.service.d'
    own.mkdir(parents=True)
    (own / 'override.conf').write_text(u'[Service]\nExecStart=\nExecStart=/bin/true\n')
    (own / 'notes.txt').write_text(u'not a drop-in')
    prefix = tmp_path / 'run' / 'dgxspark-.service.d'
    prefix.mkdir(parents=True)
    (prefix / 'env.conf').write_text(u'[Service]\nEnvironment=A=1\n')
    (tmp_path / 'etc' / 'other.service.d').mkdir()
    (tmp_path / 'etc' / 'other.service.d' / 'x.conf').write_text(u'[Service]\n')
    on_disk = verify_unit.dropins_on_disk(DROPIN_UNIT, roots)
    assert on_disk == [str(own / 'override.conf'), str(prefix / 'env.conf')]
    problems = verify_unit.dropin_problems(DROPIN_UNIT, DROPIN_UNIT_FILE, [str(prefix / 'env.conf')], {}, on_disk)
    assert len(problems) == 1 and str(own / 'override.conf') in problems[0]
    assert 'takes effect at the next daemon-reload' in problems[0] and 'ExecStart now: not loaded yet' in problems[0]


def test_fragment_elsewhere_is_refused():
    props = node_probe.parse_unit_show('FragmentPath=/etc/systemd/system/dgxspark-ds4-head.service\nDropInPaths=\n')
    problems = verify_unit.dropin_problems(DROPIN_UNIT, '/usr/local/lib/systemd/system/dgxspark-ds4-head.service', [], props, [])
    assert len(problems) == 1 and problems[0].startswith('systemd loads the unit from /etc/systemd/system/dgxspark-ds4-head')
    assert verify_unit.dropin_problems(DROPIN_UNIT, DROPIN_UNIT_FILE, [], props, []) == []
    # not installed yet: nothing loaded, nothing to refuse
    assert verify_unit.dropin_problems(DROPIN_UNIT, DROPIN_UNIT_FILE, [], node_probe.parse_unit_show('FragmentPath=\nDropInPaths=\n'), []) == []


def test_dropins_cli_exit_status(tmp_path, monkeypatch, capsys):
    fake = tmp_path / 'bin'
    fake.mkdir()
    (fake / 'systemctl').write_text(u'#!/bin/sh\ncat <<"EOF"\n%sEOF\n' % SHOW)
    os.chmod(str(fake / 'systemctl'), 0o755)
    monkeypatch.setenv('PATH', '%s:%s' % (fake, os.environ['PATH']))
    monkeypatch.setattr(verify_unit, 'DROPIN_ROOTS', (str(tmp_path / 'none'),))
    override = '/etc/systemd/system/dgxspark-ds4-head.service.d/override.conf'
    assert verify_unit.main(['verify-unit', '--dropins', DROPIN_UNIT, DROPIN_UNIT_FILE]) == 1
    out, err = capsys.readouterr()
    assert out == '' and err.startswith('dgxspark-ds4 verify-unit %s: drop-in %s was not written by' % (DROPIN_UNIT, override))
    assert verify_unit.main(['verify-unit', '--dropins', DROPIN_UNIT, DROPIN_UNIT_FILE, override]) == 0
    assert capsys.readouterr() == ('dgxspark-ds4 verify-unit %s: no foreign drop-in (%s allowed)\n' % (DROPIN_UNIT, override), '')
    assert verify_unit.main(['verify-unit', '--dropins', DROPIN_UNIT]) == 2
    # DROPIN_ROOTS is read when the check runs: a drop-in on disk there, not loaded yet, is refused too
    waiting = tmp_path / 'none' / 'dgxspark-ds4-.service.d' / 'env.conf'
    waiting.parent.mkdir(parents=True)
    waiting.write_text(u'[Service]\n')
    assert verify_unit.main(['verify-unit', '--dropins', DROPIN_UNIT, DROPIN_UNIT_FILE, override]) == 1
    assert 'drop-in %s was not written by' % waiting in capsys.readouterr().err


def test_allowed_dropins_that_are_not_this_units_are_refused_naming_the_variable():
    good = '/etc/systemd/system/dgxspark-ds4-head.service.d/override.conf'
    for bad in ('override.conf', '/etc/systemd/system/other.service.d/x.conf',
                '/etc/systemd/system/dgxspark-ds4-head.service.d/notes.txt'):
        problems = verify_unit.dropin_problems(DROPIN_UNIT, DROPIN_UNIT_FILE, [good, bad], {}, [])
        assert len(problems) == 1, bad
        assert problems[0].startswith("vllm_service_allowed_dropins entry %r is not the absolute path" % bad)
        assert 'dgxspark-ds4-head.service.d, dgxspark-ds4-.service.d, dgxspark-.service.d' in problems[0]
    assert verify_unit.dropin_problems(DROPIN_UNIT, DROPIN_UNIT_FILE,
                                       [good, '/run/systemd/system/dgxspark-.service.d/a.conf'], {}, []) == []
