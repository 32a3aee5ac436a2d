# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Draining a pair at the real vllm-router (plugins/module_utils/_node/router_admin.py, the module router_pool),
with the rig of test_router_sim.py (router_rig.py, conftest.py): two vLLM simulators as pair heads on
127.0.0.1, the router with the role's command line.

Shown: pair A drained under a steady load (4 clients, ~1 s requests) - no request fails, the requests A had
in flight finish, A gets no new request once the drain returns (the router's count of A's requests may stand
above the real load, vllm-router's own race, as tasks/drain.yml meets it: then A's engine must read nothing in
flight, and the count stays where it stood); A's simulator stopped and started again, then
restored - A serves again; drain and restore a second time change nothing. And the admin API facts
router_admin rests on (vllm-router 0.1.17): POST /remove_worker answers 200 for an unknown worker,
POST /add_worker refuses an existing worker and, after --worker-startup-timeout-secs, a down one; a worker
evicted by the health checker stays in /list_workers (unhealthy in /workers); the client's Authorization
header reaches the worker as it is, --api-key is neither asked of clients nor sent to workers, and the admin
endpoints take no key. Timings are printed (pytest -s)."""


import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import router_admin, vllm_client
from router_rig import Load, Router, free_port, wait_until  # pylint: disable=import-error

LONG_TOKENS = 100  # the simulators make 100 tokens/s: ~1 s per request
STOOD_S = 5  # a count above 0 that stands still this long, with ~1 s requests, is not a request running


def test_drain_under_load_then_restore(rig):
    sims, router = rig()
    pair_a, pair_b = sims
    read_a = router_admin.in_flight_reader(pair_a.url, metrics_url=pair_a.url, router_metrics_url=router.metrics_base)
    load = Load(router, n=4, max_tokens=LONG_TOKENS)
    try:
        assert wait_until(lambda: router_admin.vllm_in_flight(pair_a.url) >= 1, 10), "no load reached A"
        served_a0 = pair_a.served()
        t_start = time.monotonic()
        # as tasks/drain.yml waits: the router's count (vllm_router_running_requests) can stay above the real load
        # (vllm-router 0.1.17 sets it after its load counter, not atomically; test_drain_stale_sim.py), so a count
        # that stands still ends the wait, and then A's own engine must read nothing in flight
        drained = router_admin.drain(router.base, pair_a.url, in_flight_fn=read_a, timeout=30,
                                     hold_dir=router.hold_dir, stale_after=STOOD_S)
        stood = drained.get('stood_at') or 0
        if drained.get('stale'):
            router_admin.wait_engine_quiet(pair_a.url, quiet_for=2, timeout=30)
            assert router_admin.router_in_flight(router.metrics_base, pair_a.url) == stood, drained
        t_drained = time.monotonic()
        served_a1 = pair_a.served()
        assert drained['changed'] is True and drained['workers_after'] == [pair_b.url], drained
        assert drained['in_flight_initial'] >= 1, drained
        assert served_a1 - served_a0 >= drained['in_flight_initial'] - stood, (served_a0, served_a1, drained)
        # A gets nothing new while the load goes on through B: its engine reads 0, the router's count stays put
        served_b = pair_b.served()
        engine, counted = [], []
        while time.monotonic() < t_drained + 2.0:
            engine.append(router_admin.vllm_in_flight(pair_a.url))
            counted.append(router_admin.router_in_flight(router.metrics_base, pair_a.url))
            time.sleep(0.1)
        assert set(engine) == {0} and set(counted) == {stood}, (engine, counted, drained)
        assert pair_a.served() == served_a1 and pair_b.served() > served_b
        again = router_admin.drain(router.base, pair_a.url, in_flight_fn=read_a, timeout=30,
                                   hold_dir=router.hold_dir, stale_after=STOOD_S)
        assert again['changed'] is False and again['workers_before'] == again['workers_after'] == [pair_b.url]
        assert (again.get('stood_at') or 0) == stood, again
        # the restart of pair A, then back
        pair_a.stop()
        t_up = pair_a.start()
        restored = router_admin.restore(router.base, pair_a.url, timeout=30, hold_dir=router.hold_dir)
        t_restored = time.monotonic()
        assert restored['changed'] is True and sorted(restored['workers_after']) == sorted([pair_a.url, pair_b.url])
        served_again = wait_until(lambda: pair_a.served() > 0, 10)
        assert served_again is not None, "A restored but no request reached it: %s" % router.tail()
        again = router_admin.restore(router.base, pair_a.url, timeout=30, hold_dir=router.hold_dir)
        assert again['changed'] is False
    finally:
        load.stop()
    results = load.between(0)
    failed = [r for r in results if not r[1]]
    print("\ndrain under load (4 clients, ~1 s requests): drain returned %.2f s after it began (%s in flight on A, "
          "waited %s s); A got no request in the 2 s after; restore %.2f s after A's restart, A served again "
          "%.2f s after the restore; %d requests, %d failed; the router's count stood at %d"
          % (t_drained - t_start, drained['in_flight_initial'], drained['in_flight_waited_s'],
             t_restored - t_up, served_again - t_restored, len(results), len(failed), stood))
    assert not failed, failed[:5]


def test_admin_api_facts(rig):
    sims, router = rig(worker_startup_timeout_s=2)
    pair_a, pair_b = sims
    both = sorted([pair_a.url, pair_b.url])
    assert sorted(router_admin.list_workers(router.base)) == both
    # remove_worker of an unknown worker: 200, nothing changes
    assert router_admin.remove_worker(router.base, "http://127.0.0.1:9").startswith("Successfully removed")
    assert sorted(router_admin.list_workers(router.base)) == both
    status, text = router_admin.add_worker(router.base, pair_a.url, 10)
    assert status == 400 and "already exists" in text
    # add_worker of a down worker: refused after --worker-startup-timeout-secs
    down = "http://127.0.0.1:%d" % free_port()
    t_add = time.monotonic()
    status, text = router_admin.add_worker(router.base, down, 10)
    refused_after = time.monotonic() - t_add
    assert status == 400 and "Timeout 2s waiting for worker" in text, (status, text)
    assert down not in router_admin.list_workers(router.base)
    # a dead pair is evicted by the health checker but stays listed
    pair_b.stop()
    assert wait_until(lambda: not router_admin.worker_states(router.base)[pair_b.url]["healthy"], 10)
    assert sorted(router_admin.list_workers(router.base)) == both
    # draining A now would leave nothing healthy: refused; draining the dead B is allowed
    try:
        router_admin.drain(router.base, pair_a.url)
        raise AssertionError("drain of the last healthy pair was not refused")
    except router_admin.RouterAdminError as exc:
        assert "would leave no healthy worker" in exc.msg
    dead = router_admin.drain(router.base, pair_b.url,
                              in_flight_fn=router_admin.in_flight_reader(pair_b.url, metrics_url=pair_b.url), timeout=5)
    assert dead["changed"] is True and dead["in_flight_initial"] == 0
    print("\nadmin API: add_worker of a down worker refused after %.1f s (--worker-startup-timeout-secs 2)"
          % refused_after)


class _EchoWorker(object):
    """A pair head that answers like vLLM and records the headers of every request it gets."""

    def __init__(self):
        self.seen = []
        worker = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self, obj):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                worker.seen.append((self.command, self.path, self.headers.get("Authorization")))
                data = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._answer({})

            def do_POST(self):
                self._answer({"id": "cmpl-1", "object": "text_completion", "model": "m",
                              "choices": [{"index": 0, "text": "x", "finish_reason": "length"}],
                              "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

            def log_message(self, *args):  # pylint: disable=arguments-differ
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def test_authorization_is_passed_through_and_api_key_is_not_used(router_bin, tmp_path):
    worker = _EchoWorker()
    router = Router(router_bin, [worker], tmp_path, extra_args=["--api-key", "ROUTERKEY"])
    try:
        body = {"model": "m", "prompt": "x", "max_tokens": 1}
        status_with = vllm_client.post(router.base, "/v1/completions", body, api_key="CLIENTKEY")[0]
        status_without = vllm_client.post(router.base, "/v1/completions", body)[0]
        assert (status_with, status_without) == (200, 200)
        assert router_admin.list_workers(router.base) == ["http://127.0.0.1:%d" % worker.port]
        posts = [seen[2] for seen in worker.seen if seen[1] == "/v1/completions"]
        assert posts == ["Bearer CLIENTKEY", None], worker.seen
        health = [seen[2] for seen in worker.seen if seen[1] == "/health"]
        assert health and set(health) == {None}, worker.seen
    finally:
        router.stop()
        worker.stop()
