# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/ports.py: the servers' ports come from below the kernel's ephemeral range (no outgoing connection can take
one between the check and the server's bind) and are free when handed out."""


import os
import socket
import sys

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
