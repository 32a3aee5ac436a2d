# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's one client for vllm-router's admin API: take a pair out of rotation and wait for its
in-flight requests (drain), put it back and wait until the router routes to it (restore).

Pure Python (no Ansible imports); HTTP through vllm_client, /metrics parsed by bench_stats / ops_status.
The module ``dgxspark.ds4.router_pool`` calls it; the drain integration test (docs/testing.md) runs it against the
real router.

What vllm-router 0.1.17 offers (measured with the real binary by the drain integration test, docs/testing.md):

- ``GET /list_workers`` -> ``{"urls": [...]}``: every worker in the registry, healthy or not. A pair evicted by
  the health checker stays listed; it shows as ``is_healthy: false`` in ``GET /workers``
  (``{"workers": [{"url", "is_healthy", "load", ...}], "total", "stats"}``), in ``GET /health`` (503
  ``Unhealthy servers: [...]``) and in ``GET /readiness`` (``healthy_workers``).
- ``POST /remove_worker?url=U`` -> 200 ``Successfully removed worker: U``, also when U is not in the registry
  (the router only logs "not found"): whether anything changed is read from ``/list_workers``. The worker gets no
  new request from then on; requests already sent to it (streams too) run to completion.
- ``POST /add_worker?url=U`` waits until U's health check passes, up to the router's
  ``--worker-startup-timeout-secs``, then 200 ``Successfully added worker: U``; 400 ``Worker U already exists``;
  400 ``Timeout Ns waiting for worker U to become healthy ...`` (not added). A down worker is not accepted.
- URLs are compared as strings (``http://h:p/`` is not ``http://h:p``); the admin endpoints take no key, also
  with ``--api-key`` (that key is for intra-node data parallel; the router neither asks clients for it nor sends
  it to workers). A client's ``Authorization`` header is passed to the worker as it is.
- The router's Prometheus endpoint (``--prometheus-port``) has ``vllm_router_running_requests{worker="U"}``:
  the requests it has sent to U and not finished, kept (and counted down) after U was removed.
- ``GET /workers/{url-encoded U}`` answers 404 for an unknown worker, but its ``is_healthy`` stayed true for a
  killed worker: not used here.

  list_workers(router_url) -> [url, ...]
  worker_states(router_url) -> {url: {'healthy': bool, 'load': int}}
  vllm_in_flight(metrics_url, api_key=None) -> vllm:num_requests_running + vllm:num_requests_waiting
  router_in_flight(router_metrics_url, worker_url) -> vllm_router_running_requests of that worker
  in_flight_reader(worker_url, metrics_url=None, router_metrics_url=None, api_key=None) -> fn or None
  wait_listening(router_url, timeout=LISTEN_WAIT_S) -> seconds waited while the router's port refused connections
  drain(router_url, worker_url, in_flight_fn=None, timeout=600, ..., hold_dir=None, wait=True,
        stale_after=None) -> result
  wait_engine_quiet(metrics_url, api_key=None, quiet_for=ENGINE_QUIET_S, timeout=600) -> result
  drain_report(removal, wait, engine=None, again=None) -> one line (tasks/drain.yml's steps at one router)
  restore(router_url, worker_url, timeout=600, ..., hold_dir=None) -> result
  reconcile(router_url, wanted, hold_dir=None) -> {listed, added, waiting, held}  (the pool keeper's one pass)
  hold(hold_dir, url) / release(hold_dir, url) / held(hold_dir)

The router runs without ``--worker-urls`` (0.1.17 does not listen until every one of them answers): the pool
keeper (``roles/router/files/routerpool.py``, a loop over ``reconcile``) adds every wanted worker that answers
``/health`` and is not held. A drain holds the worker first (a file in ``hold_dir``) so that the keeper does not
put it back; the restore releases it once the router has it again. Hold files live in /run: a reboot forgets them.

The router's count is not trusted alone. vllm-router 0.1.17 (src/routers/http/router.rs, RequestLoadGuard) moves
a worker's load counter atomically, then reads it and sets the gauge, as two more steps: a release that reads the
counter, then sets the gauge after other releases decremented it and set theirs, leaves the gauge above the counter
(by as many as finished meanwhile: 1 to 6 seen, docs/measurements.md). A worker that gets requests
has it corrected at the next one; a drained worker gets none, and its gauge stays. A drain that trusted it waited
for its timeout, then failed (seen once in seven runs of the replicas drill, 3 then 1 for 100 s with the engine
idle). So a drain takes the pair out of every router first (wait=False), then
waits at each router with stale_after: a count above 0 that has not moved for that long returns stale instead of
waiting on; tasks/drain.yml then asks the pair's own engine on the head (wait_engine_quiet: nothing running or
waiting, continuously, for ENGINE_QUIET_S) and reads the router again. A long request holds the engine busy, so the
drain still waits for it; only a count with nothing behind it at the engine is passed over, and said so.

A router that is starting refuses connections until it has checked its workers (vllm-router binds its port last):
drain and restore first wait for it to listen (bounded by listen_timeout, the wait reported in the result and its
message), so a deploy or an operation that meets a router still starting waits instead of failing.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

try:  # Python 3
    from http.client import HTTPException
    from urllib.parse import quote
except ImportError:  # pragma: no cover  (Python 2 is not supported by the collection)
    from httplib import HTTPException  # type: ignore
    from urllib import quote  # type: ignore

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import bench_stats
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import ops_status
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import vllm_client

HTTP_TIMEOUT_S = 10.0
POLL_S = 0.5
# in-flight must read 0 this many times in a row (POLL_S apart): a request the router sent just before the
# removal may not have reached the engine's counters at the first read
SETTLE_READS = 2
HEALTH_PATH = '/health'
# How long a router that refuses connections (starting) is waited for before that is an error.
LISTEN_WAIT_S = 120
ROUTER_RUNNING = 'vllm_router_running_requests'
# How long the pair's engine must read nothing running or waiting, every read, before a count that stood still is
# passed over: a request the router sent reaches the engine's counters within this (the API server tokenizes first).
ENGINE_QUIET_S = 10


class RouterAdminError(Exception):
    """A failure with a message meant for the user, plus result fields."""

    def __init__(self, msg: str, **fields: Any) -> None:
        super(RouterAdminError, self).__init__(msg)
        self.msg = msg
        self.fields = fields


def normalize_url(url: object) -> str:
    """A worker URL as the router keeps it: no surrounding blanks, no trailing slash."""
    return str(url or '').strip().rstrip('/')


def _call(router_url: str, method: str, path: str, timeout: float) -> tuple[int, str]:
    try:
        if method == 'POST':
            return vllm_client.post(router_url, path, None, timeout=timeout)
        return vllm_client.get(router_url, path, timeout=timeout)
    except (socket.timeout, OSError, HTTPException, ValueError) as exc:
        raise RouterAdminError('vllm-router at %s does not answer %s %s: %s: %s'
                               % (router_url, method, path, type(exc).__name__, exc))


def _json(router_url: str, path: str, timeout: float) -> Any:
    status, text = _call(router_url, 'GET', path, timeout)
    if status != 200:
        raise RouterAdminError('vllm-router at %s: GET %s answered HTTP %s: %s' % (router_url, path, status, text[:300]))
    try:
        return json.loads(text)
    except ValueError:
        raise RouterAdminError('vllm-router at %s: GET %s is not JSON: %s' % (router_url, path, text[:300]))


def list_workers(router_url: str, timeout: float = HTTP_TIMEOUT_S) -> list[str]:
    """The worker URLs in the router's registry (in rotation, healthy or not)."""
    obj = _json(router_url, '/list_workers', timeout)
    urls = obj.get('urls') if isinstance(obj, dict) else None
    if not isinstance(urls, list):
        raise RouterAdminError('vllm-router at %s: GET /list_workers has no "urls" list: %r' % (router_url, obj))
    return [normalize_url(u) for u in urls]


def worker_states(router_url: str, timeout: float = HTTP_TIMEOUT_S) -> dict[str, dict[str, Any]]:
    """{url: {'healthy': bool, 'load': int}} from GET /workers (the health checker's view)."""
    obj = _json(router_url, '/workers', timeout)
    workers = obj.get('workers') if isinstance(obj, dict) else None
    if not isinstance(workers, list):
        raise RouterAdminError('vllm-router at %s: GET /workers has no "workers" list: %r' % (router_url, obj))
    return dict((normalize_url(w.get('url')), {'healthy': w.get('is_healthy') is True, 'load': w.get('load')})
                for w in workers if isinstance(w, dict) and w.get('url'))


def wait_listening(router_url: str, timeout: float = LISTEN_WAIT_S, clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep, poll_s: float | None = None) -> float:
    """Wait while the router's admin port refuses connections (a router still starting); -> seconds waited
    (0.0 when it answered at once). Any other failure, or refusals past timeout, raise RouterAdminError."""
    router_url = normalize_url(router_url)
    start = clock()
    refused = False
    while True:
        try:
            vllm_client.get(router_url, '/list_workers', timeout=HTTP_TIMEOUT_S)
            # the time of the answer itself is not a wait: 0.0 unless the port refused at least once
            return round(clock() - start, 3) if refused else 0.0
        except ConnectionRefusedError as exc:
            refused = True
            if clock() - start >= timeout:
                raise RouterAdminError('vllm-router at %s still refuses connections after %.0f s (%s): it is not '
                                       'listening. Fix: check its unit (systemctl status dgxspark-ds4-router; journalctl '
                                       '-u dgxspark-ds4-router), or give listen_timeout more time if it is still '
                                       'checking its workers' % (router_url, clock() - start, exc))
        except (socket.timeout, OSError, HTTPException, ValueError) as exc:
            raise RouterAdminError('vllm-router at %s does not answer GET /list_workers: %s: %s'
                                   % (router_url, type(exc).__name__, exc))
        sleep(poll_s or POLL_S)


def _waited_note(waited: float) -> str:
    return ' (vllm-router was not listening yet: waited %.1f s for it)' % waited if waited else ''


def _query(worker_url: str) -> str:
    return '?url=' + quote(worker_url, safe='')


def remove_worker(router_url: str, worker_url: str, timeout: float = HTTP_TIMEOUT_S) -> str:
    """POST /remove_worker?url=...; the router answers 200 whether or not the worker was there."""
    status, text = _call(router_url, 'POST', '/remove_worker' + _query(worker_url), timeout)
    if status != 200:
        raise RouterAdminError('vllm-router at %s refused to remove %s: HTTP %s: %s'
                               % (router_url, worker_url, status, text[:300]))
    return text


def add_worker(router_url: str, worker_url: str, timeout: float) -> tuple[int, str]:
    """POST /add_worker?url=...: (status, text). The router answers once the worker's health check passes
    (200), or 400 when it exists already or did not become healthy within --worker-startup-timeout-secs."""
    return _call(router_url, 'POST', '/add_worker' + _query(worker_url), timeout)


def vllm_in_flight(metrics_url: str, api_key: str | None = None, timeout: float = 5.0) -> int:
    """vllm:num_requests_running + vllm:num_requests_waiting of the vLLM server at metrics_url (its base URL).
    0 when nothing listens there (connection refused: no request can be in flight on a stopped server)."""
    try:
        status, text = vllm_client.get(metrics_url, '/metrics', api_key=api_key, timeout=timeout)
    except ConnectionRefusedError:
        return 0
    if status != 200:
        raise RouterAdminError('GET %s/metrics answered HTTP %s: %s' % (metrics_url, status, text[:200]))
    summary = ops_status.metrics_summary(text)
    if summary['requests_running'] is None and summary['requests_waiting'] is None:
        raise RouterAdminError('%s/metrics has neither vllm:num_requests_running nor vllm:num_requests_waiting'
                               % metrics_url)
    return int((summary['requests_running'] or 0) + (summary['requests_waiting'] or 0))


def router_in_flight(router_metrics_url: str, worker_url: str, timeout: float = 5.0) -> int:
    """The requests the router has sent to worker_url and not finished (vllm_router_running_requests on the
    router's Prometheus endpoint); 0 when the router has no such series (nothing sent since its start)."""
    status, text = vllm_client.get(router_metrics_url, '/metrics', timeout=timeout)
    if status != 200:
        raise RouterAdminError('GET %s/metrics answered HTTP %s: %s' % (router_metrics_url, status, text[:200]))
    total: float | None = None
    for sample in bench_stats.parse_prometheus(text):
        if sample['name'] == ROUTER_RUNNING and normalize_url(sample['labels'].get('worker')) == worker_url:
            total = (total or 0.0) + sample['value']
    return int(total or 0)


def in_flight_reader(worker_url: str, metrics_url: str | None = None, router_metrics_url: str | None = None,
                     api_key: str | None = None) -> Callable[[], int] | None:
    """One function reading the in-flight requests of worker_url from every source given (the largest
    count), or None when no source is given."""
    worker_url = normalize_url(worker_url)
    readers: list[Callable[[], int]] = []
    if metrics_url:
        readers.append(lambda: vllm_in_flight(normalize_url(metrics_url), api_key=api_key))
    if router_metrics_url:
        readers.append(lambda: router_in_flight(normalize_url(router_metrics_url), worker_url))
    if not readers:
        return None
    return lambda: max(read() for read in readers)


def _hold_path(hold_dir: str, url: str) -> str:
    return os.path.join(hold_dir, quote(normalize_url(url), safe=''))


def hold(hold_dir: str | None, url: str) -> None:
    """Mark url as held out of rotation (the pool keeper does not add it). No-op without hold_dir."""
    if not hold_dir:
        return
    if not os.path.isdir(hold_dir):
        os.makedirs(hold_dir, 0o755)
    with open(_hold_path(hold_dir, url), 'w') as handle:
        handle.write(normalize_url(url) + '\n')


def release(hold_dir: str | None, url: str) -> None:
    """Let the pool keeper add url again. No-op without hold_dir or hold."""
    if hold_dir and os.path.exists(_hold_path(hold_dir, url)):
        os.remove(_hold_path(hold_dir, url))


def held(hold_dir: str | None) -> set[str]:
    """The worker URLs held out of rotation (set)."""
    if not hold_dir or not os.path.isdir(hold_dir):
        return set()
    out: set[str] = set()
    for name in os.listdir(hold_dir):
        with open(os.path.join(hold_dir, name)) as handle:
            out.add(normalize_url(handle.read()))
    return out


def _health_problem(worker_url: str, timeout: float, health_path: str = HEALTH_PATH) -> str | None:
    """None when worker_url + health_path answers 200, else why not (one line)."""
    try:
        status, text = vllm_client.get(worker_url, health_path, timeout=timeout)
    except (socket.timeout, OSError, HTTPException, ValueError) as exc:
        return '%s: %s' % (type(exc).__name__, exc)
    return None if status == 200 else 'HTTP %s: %s' % (status, text[:120])


def reconcile(router_url: str, wanted: Collection[str], hold_dir: str | None = None, health_timeout: float = 2.0,
              health_path: str = HEALTH_PATH) -> dict[str, Any]:
    """One pass of the pool keeper: every wanted worker the router does not list, that is not held and whose
    health_path answers 200 now, is added (POST /add_worker). Never removes anything (a worker evicted by the
    router's health checks stays listed and comes back by itself; a drained one is held).
    Returns listed (after), added, waiting ({url: why}), held (sorted). A router that does not answer raises
    RouterAdminError."""
    router_url = normalize_url(router_url)
    listed = list_workers(router_url)
    holds = held(hold_dir)
    added, waiting = [], {}
    for url in [normalize_url(u) for u in wanted]:
        if url in listed or url in holds:
            continue
        problem = _health_problem(url, health_timeout, health_path)
        if problem is None:
            status, text = add_worker(router_url, url, HTTP_TIMEOUT_S + 30.0)
            if status == 200 or (status == 400 and 'already exists' in text):
                added.append(url)
                continue
            problem = 'POST /add_worker answered HTTP %s: %s' % (status, text[:160])
        waiting[url] = problem
    if added:
        listed = list_workers(router_url)
    return {'listed': listed, 'added': added, 'waiting': waiting,
            'held': sorted(u for u in holds if u in [normalize_url(w) for w in wanted])}


def _wait_idle(in_flight_fn: Callable[[], int], timeout: float, clock: Callable[[], float], sleep: Callable[[float], None],
               poll_s: float, stale_after: float | None = None
               ) -> tuple[float, int | None, int | None, str | None, float | None]:
    """Poll until in_flight_fn() reads 0 SETTLE_READS times in a row. Returns (waited_s, first, last, error,
    stood_from): with stale_after, a count above 0 that read the same for stale_after seconds ends the wait early,
    stood_from then the second of the wait from which it stood (else None)."""
    start = clock()
    first = last = error = None
    zeros = 0
    since = None  # when the count above 0 read now was first read (without a change since)
    while True:
        previous: int | None = last
        try:
            last = in_flight_fn()
            error = None
        except (RouterAdminError, socket.timeout, OSError, HTTPException, ValueError) as exc:
            error = getattr(exc, 'msg', None) or '%s: %s' % (type(exc).__name__, exc)
            last = None
        now = clock()
        if first is None:
            first = last
        zeros = zeros + 1 if last == 0 else 0
        if zeros >= SETTLE_READS:
            return now - start, first, last, None, None
        since = (since if since is not None and last == previous else now) if last else None
        if stale_after is not None and since is not None and now - since >= stale_after:
            return now - start, first, last, None, since - start
        if now - start >= timeout:
            return now - start, first, last, error or 'still %s in flight' % last, None
        sleep(poll_s)


def wait_engine_quiet(metrics_url: str, api_key: str | None = None, quiet_for: float = ENGINE_QUIET_S, timeout: float = 600,
                      clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                      poll_s: float | None = None) -> dict[str, Any]:
    """Wait until the vLLM server at metrics_url has read nothing in flight (vllm_in_flight: running + waiting)
    on every read for quiet_for seconds. Connection refused reads 0 (a stopped server has nothing in flight).
    Returns waited_s, in_flight_initial, in_flight_max, quiet_for_s, reads; a server still busy (or unreadable)
    at timeout raises RouterAdminError with those fields."""
    metrics_url = normalize_url(metrics_url)
    start = clock()
    quiet_since = first = None
    peak = reads = 0
    error = None
    while True:
        try:
            count = vllm_in_flight(metrics_url, api_key=api_key)
            error = None
        except (RouterAdminError, socket.timeout, OSError, HTTPException, ValueError) as exc:
            error = getattr(exc, 'msg', None) or '%s: %s' % (type(exc).__name__, exc)
            count = None
        now = clock()
        reads += 1
        if first is None:
            first = count
        peak = max(peak, count or 0)
        quiet_since = (now if quiet_since is None else quiet_since) if count == 0 else None
        fields = {'waited_s': round(now - start, 3), 'in_flight_initial': first, 'in_flight_max': peak,
                  'quiet_for_s': quiet_for, 'reads': reads}
        if quiet_since is not None and now - quiet_since >= quiet_for:
            return fields
        if now - start >= timeout:
            raise RouterAdminError('the vLLM server at %s did not stay without requests in flight for %s s within %s s '
                                   '(last read: %s)' % (metrics_url, quiet_for, timeout,
                                                        error or '%s running or waiting' % count),
                                   in_flight_final=count, **fields)
        sleep(poll_s or POLL_S)


def drain(router_url: str, worker_url: str, in_flight_fn: Callable[[], int] | None = None, timeout: float = 600,
          check_mode: bool = False, allow_last: bool = False, clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep, poll_s: float | None = None, listen_timeout: float = LISTEN_WAIT_S,
          hold_dir: str | None = None, waits_for: str | None = None, wait: bool = True,
          stale_after: float | None = None) -> dict[str, Any]:
    """Take worker_url out of the router's rotation, then wait until in_flight_fn() reads 0.

    wait=False: out of rotation (held), nothing awaited. stale_after: a count above 0 that stands still that many
    seconds ends the wait without error, with stale True, stood_at (the count) and stood_from_s (when it began to
    stand, in seconds of the wait); the caller decides from the engine. waited_msg: the wait in words, without the
    removal (msg has both).

    Not in rotation: nothing is removed (changed False), the in-flight wait still runs. Refused (nothing
    changed) when no other healthy worker would stay in rotation, unless allow_last. Check mode: reads only.
    Returns changed, workers_before, workers_after, in_flight_initial, in_flight_waited_s (None when nothing
    was waited for), router_wait_s, msg. A timeout raises RouterAdminError with those fields; the worker stays
    drained. hold_dir: the worker is held there first (the pool keeper leaves it out). waits_for: what the
    timeout stands for, said in the message (e.g. "the router's request timeout 1800 s + 10 s")."""
    router_url, worker_url = normalize_url(router_url), normalize_url(worker_url)
    router_wait = wait_listening(router_url, listen_timeout, clock, sleep, poll_s)
    before = list_workers(router_url)
    result: dict[str, Any] = {'changed': worker_url in before, 'workers_before': before,
                              'workers_after': [u for u in before if u != worker_url], 'in_flight_initial': None,
                              'in_flight_waited_s': None, 'router_wait_s': router_wait}
    if result['changed'] and not allow_last:
        states = worker_states(router_url)
        others = [u for u in before if u != worker_url and states.get(u, {}).get('healthy')]
        if not others:
            raise RouterAdminError(
                'draining %s would leave no healthy worker in rotation at %s (listed: %s; healthy: %s): clients '
                'would get 503 "No available workers". Fix: bring another pair back first, or allow_last=true'
                % (worker_url, router_url, ', '.join(before),
                   ', '.join(u for u in before if states.get(u, {}).get('healthy')) or 'none'),
                changed=False, workers_before=before, workers_after=before)
    if check_mode:
        result['msg'] = ('would take %s out of rotation' % worker_url if result['changed']
                         else '%s is not in rotation' % worker_url) + _waited_note(router_wait)
        return result
    hold(hold_dir, worker_url)
    if result['changed']:
        remove_worker(router_url, worker_url)
        result['workers_after'] = list_workers(router_url)
        if worker_url in result['workers_after']:
            raise RouterAdminError('vllm-router at %s still lists %s after POST /remove_worker'
                                   % (router_url, worker_url), changed=False, workers_before=before,
                                   workers_after=result['workers_after'])
    done = ('took %s out of rotation' % worker_url if result['changed']
            else '%s was not in rotation' % worker_url) + _waited_note(router_wait)
    result['stale'] = False
    if not wait:
        result['msg'] = done
        return result
    if in_flight_fn is None:
        result['waited_msg'] = 'in-flight requests not awaited (no in-flight source)'
        result['msg'] = done + '; ' + result['waited_msg']
        return result
    bound = result['wait_bound'] = 'up to %s s%s' % (timeout, ' (%s)' % waits_for if waits_for else '')
    waited, first, last, error, stood_from = _wait_idle(in_flight_fn, timeout, clock, sleep, poll_s or POLL_S,
                                                        stale_after)
    result.update(in_flight_initial=first, in_flight_waited_s=round(waited, 3), drain_timeout_s=timeout)
    if error:
        raise RouterAdminError('%s, but its in-flight requests did not reach 0 within %s s (%s); it stays out of '
                               'rotation' % (done, timeout, error), in_flight_final=last, **result)
    if stood_from is not None:
        result.update(stale=True, stood_at=last, stood_from_s=round(stood_from, 3))
        result['waited_msg'] = _waited(bound, '%s in flight, the count stood at %s from %.1f s to %.1f s'
                                       % (first, last, stood_from, waited))
    else:
        result['waited_msg'] = _waited(bound, '%s finished in %.1f s' % (first, waited))
    result['msg'] = done + '; ' + result['waited_msg']
    return result


def _waited(bound: str, what: str) -> str:
    return 'waited %s for its in-flight requests: %s' % (bound, what)


def drain_report(removal: Mapping[str, Any], wait: Mapping[str, Any], engine: Mapping[str, Any] | None = None,
                 again: Mapping[str, Any] | None = None) -> str:
    """One line for a drain at one router, from the results of tasks/drain.yml's steps there: removal (drain with
    wait=False), wait (the wait, with stale_after), engine (wait_engine_quiet, when a count stood still) and again
    (that router read again). A count that stood still is reported as finished when it came down once the engine
    was quiet, else as passed over."""
    line = removal.get('msg') or ''
    if not wait.get('waited_msg'):  # check mode, or no in-flight source
        return line
    if not wait.get('stale'):
        return '%s; %s' % (line, wait['waited_msg'])
    engine, again = engine or {}, again or {}
    total = sum(float(part.get(key) or 0) for part, key in ((wait, 'in_flight_waited_s'), (engine, 'waited_s'),
                                                            (again, 'in_flight_waited_s')))
    stood = ("the router's count stood at %s from %.1f s; the pair's engine had at most %s running or waiting, then "
             "nothing for %s s" % (wait.get('stood_at'), float(wait.get('stood_from_s') or 0),
                                   engine.get('in_flight_max', '?'), engine.get('quiet_for_s', '?')))
    if again and not again.get('stale'):
        what = '%s finished in %.1f s (%s, and the count came down)' % (wait.get('in_flight_initial'), total, stood)
    else:
        what = ('%s in flight, ended in %.1f s: %s, and the count still reads %s - a router count that did not come '
                'down (vllm-router sets it after its load counter, not atomically), passed over'
                % (wait.get('in_flight_initial'), total, stood, again.get('stood_at', '?')))
    return '%s; %s' % (line, _waited(wait['wait_bound'], what))


def models_through(router_url: str, api_key: str | None = None, timeout: float = 120, clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep, poll_s: float = 2.0) -> dict[str, Any]:
    """GET /v1/models through the router (a request it forwards to a pair, with the clients' key when the heads' proxies
    want one) until it answers 200, for up to ``timeout`` s: ``{'models_status': 200, 'models': [ids], 'models_waited_s'}``;
    RouterAdminError with the last answer otherwise."""
    router_url = normalize_url(router_url)
    start = clock()
    while True:
        try:
            status, text = vllm_client.get(router_url, '/v1/models', api_key=api_key or None, timeout=HTTP_TIMEOUT_S)
        except (socket.timeout, OSError, HTTPException, ValueError) as exc:
            status, text = None, '%s: %s' % (type(exc).__name__, exc)
        if status == 200:
            try:
                ids = [m.get('id') for m in json.loads(text).get('data') or [] if isinstance(m, dict)]
            except (ValueError, AttributeError):
                ids = []
            return {'models_status': 200, 'models': ids, 'models_waited_s': round(clock() - start, 3)}
        if clock() - start >= timeout:
            raise RouterAdminError('GET /v1/models through vllm-router at %s did not answer 200 within %s s (last: %s %s)'
                                   % (router_url, timeout, 'HTTP %s:' % status if status else 'no answer:', text[:200]),
                                   changed=False, models_status=status)
        sleep(poll_s)


def _wait_healthy_url(worker_url: str, deadline: float, clock: Callable[[], float], sleep: Callable[[float], None],
                      poll_s: float, health_path: str) -> str | None:
    while True:
        last = _health_problem(worker_url, min(HTTP_TIMEOUT_S, max(1.0, deadline - clock())), health_path)
        if last is None:
            return None
        if clock() >= deadline:
            return last
        sleep(poll_s)


def restore(router_url: str, worker_url: str, timeout: float = 600, check_mode: bool = False,
            health_path: str = HEALTH_PATH, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
            poll_s: float | None = None, listen_timeout: float = LISTEN_WAIT_S, hold_dir: str | None = None,
            replaces: str | None = None) -> dict[str, Any]:
    """Put worker_url back in rotation and wait until the router lists it healthy.

    First worker_url + health_path must answer 200 (polled here, so that the router's own wait in
    POST /add_worker is short and nothing is added after this call gave up); then POST /add_worker; then
    GET /workers must show it healthy. In rotation already: nothing is added (changed False), its health is
    still awaited. Check mode: reads the list only. Returns changed, workers_before, workers_after,
    waited_s, router_wait_s, msg; failures raise RouterAdminError. hold_dir: its hold is released once the
    router lists it healthy (the pool keeper adds it again after a router restart), and so is the hold of
    replaces (the URL the pair was drained under when it now serves on another port)."""
    router_url, worker_url = normalize_url(router_url), normalize_url(worker_url)
    poll_s = poll_s or POLL_S
    router_wait = wait_listening(router_url, listen_timeout, clock, sleep, poll_s)
    start = clock()
    deadline = start + timeout
    before = list_workers(router_url)
    changed = worker_url not in before
    result = {'changed': changed, 'workers_before': before,
              'workers_after': before + [worker_url] if changed else list(before), 'waited_s': None,
              'router_wait_s': router_wait}
    if check_mode:
        result['msg'] = ('would put %s back in rotation' % worker_url if changed
                         else '%s is in rotation' % worker_url) + _waited_note(router_wait)
        return result
    if changed:
        problem = _wait_healthy_url(worker_url, deadline, clock, sleep, poll_s, health_path)
        if problem:
            raise RouterAdminError('%s%s did not answer 200 within %s s (%s); not put back in rotation'
                                   % (worker_url, health_path, timeout, problem), changed=False,
                                   workers_before=before, workers_after=before)
        try:
            status, text = add_worker(router_url, worker_url, max(5.0, deadline - clock()) + 5.0)
        except RouterAdminError as exc:
            raise RouterAdminError('%s; the router may still add %s once its health check passes'
                                   % (exc.msg, worker_url), changed=False, workers_before=before)
        if status == 400 and 'already exists' in text:  # added by someone else since the list was read
            changed = result['changed'] = False
        elif status != 200:
            raise RouterAdminError('vllm-router at %s did not add %s: HTTP %s: %s'
                                   % (router_url, worker_url, status, text[:300]), changed=False,
                                   workers_before=before, workers_after=list_workers(router_url))
    while True:
        states = worker_states(router_url)
        state = states.get(worker_url)
        if state and state['healthy']:
            break
        if clock() >= deadline:
            raise RouterAdminError('%s is %s at %s after %s s' % (
                worker_url, 'listed but not healthy' if state else 'not listed', router_url, timeout),
                changed=changed, workers_before=before, workers_after=sorted(states))
        sleep(poll_s)
    release(hold_dir, worker_url)
    if replaces:
        release(hold_dir, replaces)
    waited = round(clock() - start, 3)
    result.update(workers_after=list_workers(router_url), waited_s=waited,
                  msg=('put %s back in rotation (healthy after %.1f s)' % (worker_url, waited) if changed
                       else '%s is in rotation and healthy' % worker_url) + _waited_note(router_wait))
    return result
