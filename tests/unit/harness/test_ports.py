# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/ports.py: the servers' ports come from below the kernel's ephemeral range (no outgoing connection can take
one between the check and the server's bind) and are free when handed out; start_server returns a server only once
its ready line came and its port listens, and otherwise names what was missing."""


import os
import socket
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
import ports  # noqa: E402  pylint: disable=import-error,wrong-import-position


def test_ports_are_below_the_ephemeral_range_and_free():
    low = ports.ephemeral_low()
    for dummy in range(50):
        port = ports.free_port()
        assert ports.LOW <= port < low
        sock = socket.socket()
        try:
            sock.bind(('127.0.0.1', port))
        finally:
            sock.close()


def test_a_taken_port_is_never_handed_out(monkeypatch):
    held = socket.socket()
    held.bind(('127.0.0.1', 0))
    held.listen(1)
    taken = held.getsockname()[1]
    draws = iter([taken, taken, taken + 1 if taken + 1 != taken else taken - 1])
    monkeypatch.setattr(ports.random, 'randint', lambda a, b: next(draws))
    try:
        assert ports.free_port() != taken
    finally:
        held.close()


def test_the_range_is_read_from_the_kernel(tmp_path):
    path = tmp_path / 'range'
    path.write_text('40000\t60999\n')
    assert ports.ephemeral_low(str(path)) == 40000
    assert ports.ephemeral_low(str(tmp_path / 'missing')) == 32768


# A stand-in server: prints its ready line, sleeps, then listens on argv[1] (unless argv[2] is "never"), then prints
# ~1 MB more (far past a pipe's buffer: it gets through only if its output is read) and writes the file argv[3].
SERVER = r'''
import socket, sys, time
print("starting", flush=True)
print("Application startup complete.", flush=True)
time.sleep(0.3)
if sys.argv[2] != "never":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
for i in range(100000):
    print("line %d" % i)
sys.stdout.flush()
open(sys.argv[3], "w").close()
time.sleep(60)
'''


def _start(tmp_path, mode, **kwargs):
    script = tmp_path / 'server.py'
    script.write_text(SERVER)
    port = ports.free_port()
    argv = [sys.executable, str(script), str(port), mode, str(tmp_path / 'printed')]
    return port, ports.start_server(argv, dict(os.environ), port, **kwargs)


def test_start_server_returns_once_the_line_came_and_the_port_listens(tmp_path):
    port, proc = _start(tmp_path, 'listen')
    try:
        socket.create_connection(('127.0.0.1', port), timeout=2).close()
        # its output is read on: the ~1 MB after the line gets through (a pipe holds 64 KiB)
        deadline = time.monotonic() + 30
        while not (tmp_path / 'printed').exists():
            assert time.monotonic() < deadline and proc.poll() is None, 'the server stopped on its output'
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()


def test_start_server_names_a_port_that_never_listens_and_a_process_that_exits_first(tmp_path):
    with pytest.raises(AssertionError, match='not listening after'):
        _start(tmp_path, 'never', timeout=2)
    with pytest.raises(AssertionError, match=r'exited \(rc 3\) before .Application startup complete'):
        ports.start_server([sys.executable, '-c', 'print("no line"); raise SystemExit(3)'], dict(os.environ), ports.free_port())
