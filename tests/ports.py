# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A loopback TCP port for a server a test starts in another process (the simulator, vllm-router), the wait for it to
listen, and the starter of the rigs that need only the server running (start_server: the router rig, the
hang-watchdog rig; the vllm_sim tests' own Sim keeps the output it reads).

Not the usual bind-to-port-0-and-close: that port comes from the kernel's ephemeral range, which every outgoing
connection on the machine also takes its local port from, so in the gap between the close and the server's own bind a
client connection elsewhere can take it (CI34: a simulator's listen failed with "Address already in use" while three
lanes ran ssh, HTTP and simulator traffic). The port here is drawn at random below that range (no outgoing connection
ever gets one there) and checked free by a bind; two tests drawing the same one at the same moment is the only race
left (one in thousands).
"""


import random
import socket
import subprocess
import threading
import time

LOW = 20000


def ephemeral_low(path='/proc/sys/net/ipv4/ip_local_port_range'):
    """The first port of the kernel's ephemeral range (32768 when it cannot be read: Linux's default)."""
    try:
        with open(path) as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host='127.0.0.1', tries=200):
    """A port on `host` that is free now and outside the ephemeral range."""
    high = max(ephemeral_low() - 1, LOW + 1000)
    for dummy in range(tries):
        port = random.randint(LOW, high)
        sock = socket.socket()
        try:
            sock.bind((host, port))
        except OSError:
            continue
        finally:
            sock.close()
        return port
    raise RuntimeError('no free port in %d-%d on %s after %d tries' % (LOW, high, host, tries))


def wait_listening(port, host='127.0.0.1', timeout=10.0, alive=None):
    """Connect to `port` until it accepts (True) or `timeout` passes or `alive()` turns false (False).

    vLLM logs "Application startup complete." before its socket listens, and the simulator does the same
    (tests/vllm_sim/serve.py, run_serve, says why): a client that starts on the line retries its connection, as the
    collection's readiness checks do.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (alive is None or alive()):
        try:
            socket.create_connection((host, port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.01)
    return False


def _drain(stream):
    for _line in stream:
        pass


def start_server(argv, env, port, ready='Application startup complete.', timeout=30.0):
    """Start `argv` (merged stdout and stderr), read its output until the `ready` line, then wait until `port` listens;
    the rest of the output is read and dropped by a thread (a full pipe would stop the server). Returns the process.
    When it exits first or `timeout` passes, the process is killed and an AssertionError names what was missing."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    deadline = time.monotonic() + timeout
    seen = []
    try:
        for line in proc.stdout:
            if ready in line:
                break
            seen.append(line)
            assert time.monotonic() < deadline, '%r not seen in %.0f s; output:\n%s' % (ready, timeout, ''.join(seen[-40:]))
        else:
            raise AssertionError('exited (rc %s) before %r; output:\n%s' % (proc.wait(), ready, ''.join(seen[-40:])))
        threading.Thread(target=_drain, args=(proc.stdout,), daemon=True).start()
        assert wait_listening(port, timeout=max(deadline - time.monotonic(), 1.0), alive=lambda: proc.poll() is None), \
            'port %d not listening after %r (rc %s)' % (port, ready, proc.poll())
    except AssertionError:
        proc.kill()
        proc.wait()
        raise
    return proc
