# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two-node rendezvous over real TCP (simulator: a stand-in for vLLM, test code only).

Head (node-rank 0) plays PyTorch's TCPStore server on --master-port (all interfaces);
the headless worker connects to --master-addr:--master-port. Line protocol:
worker `HELLO <rank>` -> head `WELCOME`; worker `LOADED` when its weights are in;
head `EXEC` per request -> worker `OK` (the execute_model RPC); head `PING n` per engine step (one in flight for
all waiting steps) -> worker `PONG n`: a stopped worker holds every step.
"""


import errno
import math
import socket
import threading
import time

EADDRINUSE_MSG = ('torch.distributed.DistNetworkError: The server socket has failed to listen on any local network '
                  'address. port: %d, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use')
STORE_TIMEOUT_MSG = 'torch.distributed.DistStoreError: Timed out after %d seconds waiting for clients. %d/%d clients joined.'
CLIENT_TIMEOUT_MSG = ('torch.distributed.DistNetworkError: The client socket has timed out after %dms while trying to '
                      'connect to (%s, %d).')
RECV_FAILED_MSG = ('[c10d] recvValue failed on SocketImpl(fd=%d, addr=%s, remote=%s): Failed to recv, got 0 bytes. '
                   'Connection was likely closed. Did the remote server shutdown or crash?')


class DistError(Exception):
    pass


class PeerLost(Exception):
    pass


def _fmt(addr):
    return '[%s]:%d' % (addr[0], addr[1])


class Conn:
    """Line-oriented wrapper around a connected socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b''
        self.lock = threading.Lock()

    def send(self, line):
        with self.lock:   # the worker's heartbeat thread and its RPC replies share the socket
            self.sock.sendall((line + '\n').encode())

    def recv_line(self, timeout):
        """Next line, or None on timeout; raises PeerLost on EOF/reset."""
        deadline = time.monotonic() + timeout if timeout is not None else None
        while b'\n' not in self.buf:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.sock.settimeout(left)
            else:
                self.sock.settimeout(None)
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                return None
            except OSError:
                raise PeerLost()
            if not data:
                raise PeerLost()
            self.buf += data
        line, _sep, self.buf = self.buf.partition(b'\n')
        return line.decode(errors='replace').strip()

    def describe(self):
        try:
            return RECV_FAILED_MSG % (self.sock.fileno(), _fmt(self.sock.getsockname()), _fmt(self.sock.getpeername()))
        except OSError:
            return RECV_FAILED_MSG % (self.sock.fileno(), '[?]:0', '[?]:0')


def listen_store(port):
    """Bind the TCPStore port on all interfaces like torch does; DistError(EADDRINUSE text) if taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(('0.0.0.0', port))
        sock.listen(8)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise DistError(EADDRINUSE_MSG % port)
        raise DistError('torch.distributed.DistNetworkError: The server socket has failed to bind. port: %d, %s' % (port, exc))
    return sock


def accept_worker(server_sock, timeout, world_size):
    """Wait for the worker's HELLO; DistError(DistStoreError text) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise DistError(STORE_TIMEOUT_MSG % (int(math.ceil(timeout)), 1, world_size))
        server_sock.settimeout(left)
        try:
            sock, _addr = server_sock.accept()
        except socket.timeout:
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Conn(sock)
        try:
            hello = conn.recv_line(max(0.1, min(5.0, deadline - time.monotonic())))
        except PeerLost:
            sock.close()
            continue
        if hello and hello.startswith('HELLO'):
            conn.send('WELCOME')
            return conn
        sock.close()


def connect_head(addr, port, timeout):
    """Worker side: retry connecting until `timeout`; DistError(client timeout text) otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise DistError(CLIENT_TIMEOUT_MSG % (int(timeout * 1000), addr, port))
        try:
            sock = socket.create_connection((addr, port), timeout=min(2.0, left))
        except OSError:
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Conn(sock)
        try:
            conn.send('HELLO 1')
            reply = conn.recv_line(max(0.1, deadline - time.monotonic()))
        except (PeerLost, OSError):
            sock.close()
            time.sleep(0.1)
            continue
        if reply == 'WELCOME':
            return conn
        sock.close()
