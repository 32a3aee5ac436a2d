# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reproduce vllm-router 0.1.17 leaving vllm_router_running_requests above the real load (not a test: a race,
seen about once in 80 rounds here; why the drain no longer trusts that count: roles/router/README.md).

The real router (the pinned wheel: router_rig.find_router) with --policy cache_aware in front of fake workers on
127.0.0.1 that hold every completion until N have arrived, then answer them all in one loop, so that N releases
reach the router at once (the router's POST /v1/completions/render, its tokenizing step, is answered 404 at once).
After each round every gauge must read what GET /workers says (its atomic load, 0 once all are answered); a gauge
still above it 0.5 s later is a stale round. With --remove, the first stale worker is then removed
(POST /remove_worker) and its gauge read again: it stays, as on a drained pair.

  .venv/bin/python tests/harness/router_gauge_race.py --seconds 120 [--workers 8] [--n 64] [--tokio 64] [--remove]
"""


import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import router_rig  # noqa: E402  pylint: disable=import-error,wrong-import-position


def _http(code, body, ctype=b"application/json"):
    return b"HTTP/1.1 %d OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n" % (code, ctype, len(body)) + body


_DONE = json.dumps({"id": "x", "object": "text_completion", "model": "m", "usage": {
    "prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    "choices": [{"index": 0, "text": "ok", "finish_reason": "length"}]}).encode()
_SSE = b"data: " + json.dumps({"id": "x", "object": "text_completion", "model": "m",
                               "choices": [{"index": 0, "text": "ok", "finish_reason": None}]}).encode() \
    + b"\n\ndata: [DONE]\n\n"
ANSWER = {False: _http(200, _DONE),
          True: b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                + b"%x\r\n" % len(_SSE) + _SSE + b"\r\n0\r\n\r\n"}


class Workers(object):
    """Fake workers on several ports: completions held until n arrived (over all ports) or 3 s passed."""

    def __init__(self, n):
        self.n, self.pending, self.timer = n, [], None

    def flush(self):
        if self.timer:
            self.timer.cancel()
            self.timer = None
        pending, self.pending = self.pending, []
        for transport, stream in pending:
            if not transport.is_closing():
                transport.write(ANSWER[stream])

    def protocol(self):
        workers = self

        class Proto(asyncio.Protocol):
            def connection_made(self, transport):  # pylint: disable=attribute-defined-outside-init
                self.transport, self.buf = transport, b""

            def data_received(self, data):
                self.buf += data
                while b"\r\n\r\n" in self.buf:
                    head, rest = self.buf.split(b"\r\n\r\n", 1)
                    lines = head.decode("latin1").split("\r\n")
                    size = sum(int(line.split(":", 1)[1]) for line in lines[1:]
                               if line.lower().startswith("content-length:"))
                    if len(rest) < size:
                        return
                    body, self.buf = rest[:size], rest[size:]
                    method, path = lines[0].split(" ")[:2]
                    if "render" in path:
                        self.transport.write(_http(404, b"{}"))
                    elif method == "POST" and "completions" in path:
                        workers.pending.append((self.transport, b'"stream":true' in body.replace(b" ", b"")))
                        if len(workers.pending) >= workers.n:
                            workers.flush()
                        elif workers.timer is None:
                            workers.timer = asyncio.get_running_loop().call_later(3.0, workers.flush)
                    elif path.startswith("/v1/models"):
                        self.transport.write(_http(200, json.dumps({"object": "list", "data": [
                            {"id": "m", "object": "model"}]}).encode()))
                    else:
                        self.transport.write(_http(200, b"{}"))
        return Proto


def _get(url):
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read().decode()


def snapshot(port, metrics_port):
    """({worker: gauge}, {worker: load of GET /workers})"""
    gauges = dict((m.group(1), float(m.group(2))) for m in re.finditer(
        r'vllm_router_running_requests\{worker="([^"]+)"\} (\S+)', _get("http://127.0.0.1:%d/metrics" % metrics_port)))
    loads = dict((w["url"], w["load"]) for w in json.loads(_get("http://127.0.0.1:%d/workers" % port))["workers"])
    return gauges, loads


async def _request(conn, i, k):
    reader, writer = conn
    body = json.dumps({"model": "m", "prompt": "%x %d %d" % (random.getrandbits(64), k, i), "max_tokens": 1,
                       "stream": i % 2 == 0}).encode()
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body)
    head = await reader.readuntil(b"\r\n\r\n")
    size = re.search(rb"(?i)content-length: *(\d+)", head)
    if size:
        await reader.readexactly(int(size.group(1)))
    else:
        await reader.readuntil(b"\r\n0\r\n\r\n")
    return int(head.split(b" ", 2)[1])


async def drive(args, port, metrics_port, worker_ports):
    loop = asyncio.get_running_loop()
    workers = Workers(args.n)
    for wport in worker_ports:
        await loop.create_server(workers.protocol(), "127.0.0.1", wport, backlog=4096)
    router = subprocess.Popen(
        [args.router, "--host", "127.0.0.1", "--port", str(port), "--policy", "cache_aware", "--prometheus-port",
         str(metrics_port), "--log-level", "warning", "--worker-urls"] + ["http://127.0.0.1:%d" % p for p in worker_ports],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        env=dict(os.environ, **({"TOKIO_WORKER_THREADS": str(args.tokio)} if args.tokio else {})))
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                await asyncio.to_thread(_get, "http://127.0.0.1:%d/health" % port)
                break
            except OSError:
                assert time.monotonic() < deadline and router.poll() is None, "vllm-router did not start"
                await asyncio.sleep(0.2)
        conns = [await asyncio.open_connection("127.0.0.1", port) for dummy in range(args.n)]
        stale, rounds, start = [], 0, time.monotonic()
        while time.monotonic() - start < args.seconds:
            answers = await asyncio.gather(*(_request(c, i, rounds) for i, c in enumerate(conns)),
                                           return_exceptions=True)
            rounds += 1
            if any(not isinstance(a, int) for a in answers):
                for conn in conns:
                    conn[1].close()
                conns = [await asyncio.open_connection("127.0.0.1", port) for dummy in range(args.n)]
            gauges, _loads = await asyncio.to_thread(snapshot, port, metrics_port)
            if not any(gauges.values()):
                continue
            await asyncio.sleep(0.5)
            gauges, loads = await asyncio.to_thread(snapshot, port, metrics_port)
            off = dict((u, (gauges.get(u), load)) for u, load in loads.items() if gauges.get(u, 0) != load)
            if off:
                stale.append(off)
                print("round %d at %.0f s: gauge, load %s" % (rounds, time.monotonic() - start, off), flush=True)
                if args.remove:
                    url = sorted(off)[0]
                    await asyncio.to_thread(urllib.request.urlopen, urllib.request.Request(
                        "http://127.0.0.1:%d/remove_worker?url=%s" % (port, url), data=b"", method="POST"), None, 10)
                    await asyncio.sleep(2)
                    gauges, loads = await asyncio.to_thread(snapshot, port, metrics_port)
                    print("removed %s: listed %s, its gauge %s 2 s later" % (url, url in loads, gauges.get(url)),
                          flush=True)
                    break
        print("RESULT %d stale rounds of %d in %.0f s (n=%d, workers=%d, TOKIO_WORKER_THREADS=%s)"
              % (len(stale), rounds, time.monotonic() - start, args.n, len(worker_ports), args.tokio or "default"))
        return stale
    finally:
        router.kill()
        router.wait()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--n", type=int, default=64, help="requests per round, released together")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--tokio", type=int, default=64, help="TOKIO_WORKER_THREADS of the router (0: its default)")
    parser.add_argument("--remove", action="store_true", help="remove the first stale worker and read its gauge again")
    args = parser.parse_args(argv)
    args.router, why = router_rig.find_router()
    if not args.router:
        sys.exit(why)
    ports = [router_rig.free_port() for dummy in range(args.workers + 2)]
    asyncio.run(drive(args, ports[0], ports[1], ports[2:]))


if __name__ == "__main__":
    main()
