# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scenario driver: real vLLM (GPU machine) or the simulator (any machine) in the collection's two-rank layout.

    python3 tests/real_vllm/driver.py --backend real --model /tmp/model --out OUT [--deadline-s 560]
    python3 tests/real_vllm/driver.py --backend sim --out OUT [--scenarios startup,prefill]

Both ranks are started as the collection renders them (recipe.render_cluster): worker first (its own
process group, CUDA_VISIBLE_DEVICES=1), head HEAD_DELAY later (CUDA_VISIBLE_DEVICES=0). Each scenario
writes OUT/<scenario>.json in the trace format of tests/real_vllm/README.md. Scenarios sharing a cluster
run in SCENARIO_ORDER on one cluster (B); the worker-killed-while-idle scenario needs its own cluster (A),
started at the same time on the same GPUs. `t` is seconds since that cluster's worker was started.
Standard library only (plus the collection's module_utils), so the same file runs on the GPU machine.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import argparse
import datetime
import json
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from http.client import HTTPConnection, HTTPException

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

from real_vllm import recipe  # noqa: E402  pylint: disable=wrong-import-position,import-error

SCENARIO_ORDER = ('startup', 'engine_error', 'wrong_api_key', 'prefill', 'concurrent_decode', 'bench', 'worker_frozen',
                  'worker_killed_serving')
IDLE_KILL = 'worker_killed_idle'
ALL_SCENARIOS = SCENARIO_ORDER + (IDLE_KILL,)
TRACE_SCENARIOS = tuple(s for s in ALL_SCENARIOS if s != 'bench')   # one <name>.json trace each
BENCH_RESULT = 'bench_result.json'
PROBE_PATHS = ('/health', '/v1/models', '/metrics')
WRONG_KEY = 'sk-wrong-key'

COMMON_ENV = {'PYTHONUNBUFFERED': '1', 'VLLM_API_KEY': recipe.API_KEY, 'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1',
              'VLLM_NO_USAGE_STATS': '1', 'DO_NOT_TRACK': '1'}
REAL_ENV = {
    # required on the lent machines (NVLink multicast off)
    'NCCL_NVLS_ENABLE': '0', 'TORCH_SYMM_MEM_DISABLE_MULTICAST': '1', 'NVSHMEM_DISABLE_NVLS': '1',
    # both "nodes" are one host: loopback, NCCL over its socket transport as between two hosts
    'VLLM_HOST_IP': '127.0.0.1', 'GLOO_SOCKET_IFNAME': 'lo', 'NCCL_SOCKET_IFNAME': 'lo', 'TP_SOCKET_IFNAME': 'lo',
    'NCCL_P2P_DISABLE': '1', 'NCCL_SHM_DISABLE': '1',
    'VLLM_ALLREDUCE_USE_SYMM_MEM': '0', 'VLLM_USE_FLASHINFER_SAMPLER': '0',
}

# Per backend: engine flags of the two clusters and the scenario sizes / rates (shapes are compared, not seconds).
BACKENDS = {
    'real': {
        'entrypoint': [sys.executable, '-m', 'vllm.entrypoints.cli.main', 'serve'],
        'engine_b': {'max-model-len': 131072, 'max-num-batched-tokens': 256, 'max-num-seqs': 8,
                     'gpu-memory-utilization': 0.5, 'kv-cache-memory-bytes': '12G'},
        'engine_a': {'max-model-len': 32768, 'max-num-batched-tokens': 256, 'max-num-seqs': 8,
                     'gpu-memory-utilization': 0.3, 'kv-cache-memory-bytes': '4G', 'enforce-eager': True},
        'env': {'VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS': '30'},
        'head_delay': 5.0, 'startup_timeout': 400.0, 'probe_dt': 0.5, 'metrics_dt': 0.25, 'slow_dt': 1.0,
        'prefill_words': 130000, 'decode_tokens': 64, 'long_tokens': 20000, 'warm_s': 3.0, 'freeze_s': 20.0, 'settle_s': 1.0,
        'thaw_s': 5.0, 'idle_s': 8.0, 'second_request_after_s': 8.0, 'exit_wait_s': 60.0, 'post_s': 3.0,
        'bench_levels': [1, 2, 4], 'bench_tokens': 64,
    },
    'sim': {
        'entrypoint': [os.path.join(TESTS, 'vllm_sim', 'bin', 'vllm'), 'serve'],
        # the real recipe's flags; max-model-len smaller (shorter prompts, seconds of CI) and the memory
        # utilisation of a GB10 profile (the simulator sizes its KV cache from a 119.67 GiB node)
        'engine_b': {'max-model-len': 16384, 'max-num-batched-tokens': 256, 'max-num-seqs': 8,
                     'gpu-memory-utilization': 0.9, 'kv-cache-memory-bytes': '12G'},
        'engine_a': {'max-model-len': 16384, 'max-num-batched-tokens': 256, 'max-num-seqs': 8,
                     'gpu-memory-utilization': 0.9, 'kv-cache-memory-bytes': '4G', 'enforce-eager': True},
        # the no-shared-memory line's interval (60 s x 0.05 = 3 s) stays longer than the RPC timeout (2 s), as in the
        # recording (60 s > VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS 30): real vLLM never logged it before the timeout
        'env': {'VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS': '2', 'VLLM_SIM_TIME_SCALE': '0.05', 'VLLM_SIM_TOKENS_PER_S': '100',
                'VLLM_SIM_PREFILL_TOKENS_PER_S': '6000', 'VLLM_SIM_PREFILL_CHUNK_TOKENS': '256',
                'VLLM_SIM_STATS_INTERVAL_S': '1', 'VLLM_SIM_WATCHDOG_S': '0.5', 'VLLM_SIM_SHM_WAIT_LOG_S': '60',
                'VLLM_SIM_RENDEZVOUS_TIMEOUT_S': '20', 'VLLM_SIM_PYTHON': sys.executable},
        'head_delay': 0.3, 'startup_timeout': 30.0, 'probe_dt': 0.1, 'metrics_dt': 0.1, 'slow_dt': 0.2,
        'prefill_words': 9000, 'decode_tokens': 32, 'long_tokens': 5000, 'warm_s': 1.0, 'freeze_s': 1.5, 'settle_s': 0.3,
        'thaw_s': 1.0, 'idle_s': 1.0, 'second_request_after_s': 0.6, 'exit_wait_s': 15.0, 'post_s': 0.5,
        'bench_levels': [1, 2], 'bench_tokens': 16,
    },
}


def words(n, seed):
    """n vocabulary words of the test tokenizer (one token each on real vLLM): 'w123 w4567 ...'."""
    rng = random.Random(seed)
    return ' '.join('w%d' % rng.randint(7, 31999) for _i in range(n))


def free_port_base(count):
    """The first of `count` consecutive loopback ports that are free now."""
    for _try in range(50):
        probe = socket.socket()
        probe.bind(('127.0.0.1', 0))
        base = probe.getsockname()[1]
        probe.close()
        socks = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(('127.0.0.1', port))
            return base
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError('no %d consecutive free ports on 127.0.0.1' % count)


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


class Deadline(Exception):
    """The run's --deadline-s passed; the current scenario stops and is written as far as it got."""


class Trace:
    """One scenario's trace (README 'Trace format')."""

    def __init__(self, name, backend, recorded):
        self.name = name
        self.doc = {'scenario': name, 'backend': backend, 'recorded': recorded, 'events': []}

    def add(self, event):
        self.doc['events'].append(event)

    def write(self, out_dir):
        path = os.path.join(out_dir, '%s.json' % self.name)
        events = self.doc['events']
        head = dict((k, v) for k, v in self.doc.items() if k != 'events')
        with open(path, 'w') as f:
            f.write(json.dumps(head, sort_keys=True)[:-1])
            f.write(', "events": [\n')
            f.write(',\n'.join(json.dumps(e, sort_keys=True) for e in events))
            f.write('\n]}\n')
        return path


def _metric_key(sample):
    labels = sample['labels']
    if not labels:
        return sample['name']
    return '%s{%s}' % (sample['name'], ','.join('%s="%s"' % (k, labels[k]) for k in sorted(labels)))


def metric_series(text):
    """Every `vllm:` series of a /metrics text except histogram buckets and `_created` timestamps."""
    from ansible_collections.dgxspark.ds4.plugins.module_utils import bench_stats  # pylint: disable=import-error
    out = {}
    for s in bench_stats.parse_prometheus(text):
        name = s['name']
        if not name.startswith('vllm:') or name.endswith('_bucket') or name.endswith('_created'):
            continue
        out[_metric_key(s)] = s['value']
    return out


class Rank:
    def __init__(self, role, proc):
        self.role = role
        self.proc = proc
        self.exit_status = None
        self.exited = threading.Event()


class Cluster:
    """One head + headless worker, their logs and every HTTP exchange, recorded into the current Trace."""

    def __init__(self, name, backend, cfg, argv, env, port, deadline):
        self.name = name
        self.backend = backend
        self.cfg = cfg
        self.argv = argv
        self.env = env
        self.port = port
        self.deadline = deadline
        self.lock = threading.Lock()
        self.trace = None
        self.t0 = None
        self.ranks = {}
        self.traces = []
        self.exit_marks = {}

    # -- recording ---------------------------------------------------------------------------
    def now(self):
        return round(time.monotonic() - self.t0, 3)

    def emit(self, event):
        with self.lock:
            if self.trace is not None:
                self.trace.add(event)
        return event

    def mark(self, name, **extra):
        event = {'t': self.now(), 'kind': 'mark', 'name': name}
        event.update(extra)
        return self.emit(event)

    def begin(self, scenario, recorded):
        with self.lock:
            self.trace = Trace(scenario, self.backend, recorded)
            self.traces.append(self.trace)
        return self.trace

    def check_deadline(self):
        if time.monotonic() > self.deadline:
            raise Deadline('deadline reached')

    # -- processes ---------------------------------------------------------------------------
    def _start(self, role, gpu):
        env = dict(os.environ)
        env.update(self.env)
        env['CUDA_VISIBLE_DEVICES'] = gpu
        proc = subprocess.Popen(self.argv[role], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, text=True, encoding='utf-8', errors='replace', bufsize=1)
        rank = Rank(role, proc)
        self.ranks[role] = rank

        def reader():
            for line in proc.stdout:
                line = line.rstrip('\r\n')
                if line.strip():
                    self.emit({'t': self.now(), 'kind': 'log', 'rank': role, 'line': line})

        def waiter():
            status = proc.wait()
            rank.exit_status = status
            self.emit({'t': self.now(), 'kind': 'exit', 'rank': role, 'status': status})
            if role in self.exit_marks:   # the phase boundary at the exit itself, not when a poll noticed it
                self.mark(self.exit_marks[role], status=status)
            rank.exited.set()
        for fn in (reader, waiter):
            threading.Thread(target=fn, daemon=True, name='%s-%s-%s' % (self.name, role, fn.__name__)).start()
        return rank

    def start_worker(self):
        return self._start('worker', '1')

    def start_head(self):
        return self._start('head', '0')

    def signal_worker(self, sig):
        os.killpg(self.ranks['worker'].proc.pid, sig)

    def group_left(self, role):
        """Names of the processes still alive in a rank's process group (e.g. an orphaned VLLM::Worker_TP0)."""
        pgid = self.ranks[role].proc.pid
        names = []
        for pid in os.listdir('/proc'):
            if not pid.isdigit():
                continue
            try:
                with open('/proc/%s/stat' % pid) as f:
                    stat = f.read()
            except OSError:
                continue
            rest = stat[stat.rindex(')') + 2:].split()
            if int(rest[2]) == pgid and rest[0] != 'Z':
                names.append(stat[stat.index('(') + 1:stat.rindex(')')])
        return sorted(names)

    def kill_all(self):
        for rank in self.ranks.values():
            try:
                os.killpg(rank.proc.pid, signal.SIGKILL)
            except OSError:
                pass

    # -- HTTP --------------------------------------------------------------------------------
    def _conn(self, timeout):
        return HTTPConnection('127.0.0.1', self.port, timeout=timeout)

    def http(self, method, path, body=None, key=recipe.API_KEY, timeout=10.0):
        """(status or None, body text, ms); None = connection refused / reset / timed out."""
        t0 = time.monotonic()
        headers = {'Content-Type': 'application/json'} if body is not None else {}
        if key:
            headers['Authorization'] = 'Bearer %s' % key
        conn = self._conn(timeout)
        try:
            conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
            resp = conn.getresponse()
            text = resp.read().decode('utf-8', 'replace')
            return resp.status, text, (time.monotonic() - t0) * 1000.0
        except (OSError, HTTPException) as exc:
            return None, '%s: %s' % (type(exc).__name__, exc), (time.monotonic() - t0) * 1000.0
        finally:
            conn.close()

    def probe(self, path, key=recipe.API_KEY):
        t = self.now()
        status, text, ms = self.http('GET', path, key=key, timeout=5.0)
        self.emit({'t': t, 'kind': 'probe', 'path': path, 'status': status, 'ms': round(ms, 1)})
        return status, text

    def metrics(self):
        t = self.now()
        status, text, _ms = self.http('GET', '/metrics', key=None, timeout=5.0)
        if status == 200:
            self.emit({'t': t, 'kind': 'metrics', 'series': metric_series(text)})
        return status

    def respond(self, name, method, path, body=None, key=recipe.API_KEY, timeout=120.0):
        status, text, _ms = self.http(method, path, body=body, key=key, timeout=timeout)
        return self.emit({'t': self.now(), 'kind': 'response', 'name': name, 'status': status, 'body': text[:2000],
                          'stream': []})

    def completion(self, prompt, max_tokens, **extra):
        body = {'model': recipe.SERVED_NAME, 'prompt': prompt, 'max_tokens': max_tokens, 'temperature': 0.0}
        body.update(extra)
        return body

    # -- samplers ----------------------------------------------------------------------------
    def sampler(self, stop, metrics_dt=None, probe_paths=('/health',), probe_dt=None):
        """Background loop: /metrics every metrics_dt and the probe paths every probe_dt until stop is set."""
        def loop():
            next_m = next_p = time.monotonic()
            while not stop.is_set():
                now = time.monotonic()
                if metrics_dt and now >= next_m:
                    self.metrics()
                    next_m += metrics_dt
                if probe_dt and now >= next_p:
                    for path in probe_paths:
                        self.probe(path)
                    next_p += probe_dt
                wake = min([x for x, on in ((next_m, metrics_dt), (next_p, probe_dt)) if on] or [now + 0.1])
                stop.wait(max(0.0, wake - time.monotonic()))
        thread = threading.Thread(target=loop, daemon=True, name='%s-sampler' % self.name)
        thread.start()
        return thread


class Stream:
    """One streamed request in a thread: every SSE line kept (head and tail when long), first token marked."""

    KEEP = 40

    def __init__(self, cluster, name, body, first_mark=None, timeout=900.0):
        self.c = cluster
        self.name = name
        self.body = dict(body, stream=True)
        self.first_mark = first_mark
        self.timeout = timeout
        self.lines = []
        self.count = 0
        self.status = None
        self.first = threading.Event()
        self.done = threading.Event()
        self.conn = None
        self.thread = threading.Thread(target=self._run, daemon=True, name='%s-stream-%s' % (cluster.name, name))

    def start(self):
        self.thread.start()
        return self

    def _keep(self, line):
        self.count += 1
        if len(self.lines) < self.KEEP:
            self.lines.append(line)
        else:
            self.lines.append(line)
            if len(self.lines) > 2 * self.KEEP:
                del self.lines[self.KEEP]

    def _run(self):
        body_text = ''
        try:
            self.conn = self.c._conn(self.timeout)  # pylint: disable=protected-access
            self.conn.request('POST', '/v1/completions', body=json.dumps(self.body),
                              headers={'Content-Type': 'application/json', 'Authorization': 'Bearer %s' % recipe.API_KEY})
            resp = self.conn.getresponse()
            self.status = resp.status
            if resp.status != 200:
                body_text = resp.read().decode('utf-8', 'replace')
            else:
                while True:
                    raw = resp.readline()
                    if not raw:
                        break
                    line = raw.decode('utf-8', 'replace').rstrip('\r\n')
                    if not line:
                        continue
                    self._keep(line)
                    if not self.first.is_set() and '"text"' in line and '"text":""' not in line.replace(' ', ''):
                        self.first.set()
                        if self.first_mark:
                            self.c.mark(self.first_mark)
        except (OSError, HTTPException, ValueError) as exc:
            body_text = body_text or '%s: %s' % (type(exc).__name__, exc)
        finally:
            event = {'t': self.c.now(), 'kind': 'response', 'name': self.name, 'status': self.status,
                     'body': body_text[:2000], 'stream': list(self.lines)}
            if self.count > len(self.lines):
                event['stream_lines'] = self.count
            self.c.emit(event)
            self.done.set()

    def close(self):
        if self.conn is not None and self.conn.sock is not None:
            try:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def wait_for(pred, timeout, cluster, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        cluster.check_deadline()
        time.sleep(step)
    return pred()


def wait_quiet(cluster, stream, quiet_s, timeout):
    """Until `stream` has counted no new chunk for quiet_s (at least quiet_s from now), at most `timeout`."""
    start = last_change = time.monotonic()
    last = stream.count
    while time.monotonic() - start < timeout:
        sleep_checked(cluster, min(0.05, quiet_s))
        now = time.monotonic()
        if stream.count != last:
            last, last_change = stream.count, now
        elif now - last_change >= quiet_s:
            return True
    return False


def sleep_checked(cluster, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        cluster.check_deadline()
        time.sleep(min(0.1, max(0.0, end - time.monotonic())))


# -- scenarios -------------------------------------------------------------------------------------

def sc_startup(c, cfg):
    """Both ranks' log lines; /health, /v1/models (with key), /metrics probed from before the worker starts."""
    stop = threading.Event()
    ready = threading.Event()
    pre = cfg['probe_dt'] * 2

    def probes():
        while not stop.is_set():
            statuses = [c.probe(p)[0] for p in PROBE_PATHS]
            if statuses[0] == 200 and not ready.is_set():
                ready.set()
                c.mark('ready')
            stop.wait(cfg['probe_dt'])
    c.t0 = time.monotonic() + pre
    c.mark('probing')
    threading.Thread(target=probes, daemon=True).start()
    time.sleep(pre)
    c.start_worker()
    c.mark('worker_started')
    time.sleep(cfg['head_delay'])
    c.start_head()
    c.mark('head_started')
    try:
        if not wait_for(lambda: ready.is_set() or c.ranks['head'].exited.is_set() or c.ranks['worker'].exited.is_set(),
                        cfg['startup_timeout'], c):
            c.mark('startup_timeout')
            raise RuntimeError('%s: not ready after %ss' % (c.name, cfg['startup_timeout']))
        if not ready.is_set():
            raise RuntimeError('%s: a rank exited during startup' % c.name)
        sleep_checked(c, cfg['post_s'])
    finally:
        stop.set()
    c.mark('done')


def sc_engine_error(c, cfg):
    """What the API answers to requests the engine refuses (status, body); /health after each."""
    max_len = int(c.cfg['engine_b']['max-model-len'])
    c.mark('requests')
    c.respond('prompt_longer_than_max_model_len', 'POST', '/v1/completions', c.completion(words(max_len + 16, 1), 4))
    c.probe('/health')
    c.respond('negative_max_tokens', 'POST', '/v1/completions', c.completion('w10 w11 w12', -1))
    c.probe('/health')
    c.respond('unknown_model', 'POST', '/v1/completions', dict(c.completion('w10 w11 w12', 4), model='no-such-model'))
    c.probe('/health')
    c.respond('negative_temperature', 'POST', '/v1/completions', dict(c.completion('w10 w11 w12', 4), temperature=-1.0))
    for path in PROBE_PATHS:
        c.probe(path)
    c.mark('done')


def sc_wrong_api_key(c, cfg):
    """Which endpoints the API key guards, and what a wrong or missing key gets."""
    c.mark('requests')
    c.respond('models_wrong_key', 'GET', '/v1/models', key=WRONG_KEY)
    c.respond('models_no_key', 'GET', '/v1/models', key=None)
    c.respond('completion_wrong_key', 'POST', '/v1/completions', c.completion('w10 w11', 2), key=WRONG_KEY)
    c.respond('health_wrong_key', 'GET', '/health', key=WRONG_KEY)
    c.respond('metrics_no_key', 'GET', '/metrics', key=None)
    c.respond('models_right_key', 'GET', '/v1/models')
    c.mark('done')


def sc_prefill(c, cfg):
    """One long chunked prefill then a short decode, /metrics at a fixed rate (every vllm: series)."""
    stop = threading.Event()
    c.sampler(stop, metrics_dt=cfg['metrics_dt'], probe_dt=cfg['slow_dt'])
    try:
        sleep_checked(c, cfg['metrics_dt'] * 4)
        body = c.completion(words(cfg['prefill_words'], 2), 8, ignore_eos=True)
        c.mark('prefill_start', prompt_words=cfg['prefill_words'])
        stream = Stream(c, 'long_prompt', body, first_mark='first_token').start()
        wait_for(stream.done.is_set, cfg['startup_timeout'], c)
        c.mark('finished')
        sleep_checked(c, cfg['metrics_dt'] * 6)
    finally:
        stop.set()
    c.mark('done')


def sc_concurrent_decode(c, cfg):
    """Four streams decoding at once, /metrics at a fixed rate."""
    stop = threading.Event()
    c.sampler(stop, metrics_dt=cfg['metrics_dt'], probe_dt=cfg['slow_dt'])
    try:
        sleep_checked(c, cfg['metrics_dt'] * 4)
        c.mark('decode_start')
        streams = [Stream(c, 'decode_%d' % i, c.completion(words(64, 10 + i), cfg['decode_tokens'], ignore_eos=True),
                          first_mark='first_token' if i == 0 else None).start() for i in range(4)]
        wait_for(lambda: all(s.done.is_set() for s in streams), cfg['startup_timeout'], c)
        c.mark('finished')
        sleep_checked(c, cfg['metrics_dt'] * 6)
    finally:
        stop.set()
    c.mark('done')


def sc_bench(c, cfg):
    """The collection's bench (bench_sweep.run_sweep) and, on real vLLM, llama-benchy; written to bench.json."""
    from real_vllm import bench  # pylint: disable=import-error
    c.mark('collection_bench')
    result = bench.record_collection_bench('http://127.0.0.1:%d' % c.port, recipe.SERVED_NAME, recipe.API_KEY,
                                           cfg['bench_levels'], cfg['bench_tokens'])
    c.mark('llama_benchy')
    result['llama_benchy'] = bench.run_llama_benchy(c) if c.backend == 'real' else None
    c.mark('done')
    c.bench_result = result


def sc_worker_frozen(c, cfg):
    """SIGSTOP to the worker's whole process group during a decode, SIGCONT after freeze_s."""
    stop = threading.Event()
    c.sampler(stop, metrics_dt=cfg['metrics_dt'] * 2, probe_paths=PROBE_PATHS, probe_dt=cfg['slow_dt'])
    stream = None
    try:
        sleep_checked(c, cfg['metrics_dt'] * 4)
        c.mark('decode_start')
        stream = Stream(c, 'long_decode', c.completion(words(64, 20), cfg['long_tokens'], ignore_eos=True),
                        first_mark='first_token').start()
        wait_for(stream.first.is_set, 60.0, c)
        sleep_checked(c, cfg['warm_s'])
        c.signal_worker(signal.SIGSTOP)
        # what was produced before the stop (the step in flight, chunks already in the socket) reaches the client
        # first: the frozen window starts once that has arrived. A fixed settle_s was not enough on a loaded
        # machine (the simulator, whose steps are 10 ms, delivered a chunk after the mark once with settle_s alone,
        # and again in a CI run with a load average of 12): the window starts when the stream has received nothing
        # for settle_s, at most 10 x settle_s after the stop (a stream that never goes quiet is then measured as
        # progressing, which the comparison names).
        wait_quiet(c, stream, cfg['settle_s'], 10 * cfg['settle_s'])
        c.mark('worker_stopped', chunks=stream.count)
        sleep_checked(c, cfg['freeze_s'])
        # the count that ends the frozen window is read before the SIGCONT: read after it, a starved client thread
        # could count chunks the thawed worker already helped produce (seen under a load average of 12)
        frozen = stream.count
        c.signal_worker(signal.SIGCONT)
        c.mark('worker_continued', chunks=frozen)
        sleep_checked(c, cfg['thaw_s'])
        c.mark('stream_closed', chunks=stream.count)
        stream.close()
        wait_for(stream.done.is_set, 10.0, c)
        sleep_checked(c, cfg['slow_dt'] * 3)
    finally:
        stop.set()
        if stream is not None:
            stream.close()
    c.mark('done')


def _kill_and_watch(c, cfg, serving):
    stream = None
    if serving:
        c.mark('decode_start')
        stream = Stream(c, 'long_decode', c.completion(words(64, 30), cfg['long_tokens'], ignore_eos=True),
                        first_mark='first_token').start()
        wait_for(stream.first.is_set, 60.0, c)
        sleep_checked(c, cfg['warm_s'])
    else:
        sleep_checked(c, cfg['idle_s'])
    c.signal_worker(signal.SIGKILL)
    c.mark('worker_killed', chunks=stream.count if stream else None)
    sleep_checked(c, cfg['second_request_after_s'] if serving else cfg['idle_s'])
    c.mark('request_sent')
    done = threading.Event()

    def request():
        c.respond('completion_after_kill', 'POST', '/v1/completions', c.completion('w10 w11 w12', 4),
                  timeout=cfg['exit_wait_s'] + 60.0)
        done.set()
    head = c.ranks['head']
    c.exit_marks['head'] = 'head_exited'
    threading.Thread(target=request, daemon=True).start()
    if not wait_for(head.exited.is_set, cfg['exit_wait_s'], c, step=0.1):
        c.mark('head_still_running')
    wait_for(done.is_set, 5.0, c)
    sleep_checked(c, cfg['post_s'])
    c.mark('head_group_left', processes=c.group_left('head'))
    if stream is not None:
        stream.close()


def sc_worker_killed_serving(c, cfg):
    """SIGKILL to the worker's process group while a stream decodes; a second request later; the head's exit."""
    stop = threading.Event()
    c.sampler(stop, metrics_dt=cfg['slow_dt'], probe_paths=PROBE_PATHS, probe_dt=cfg['slow_dt'])
    try:
        sleep_checked(c, cfg['metrics_dt'] * 4)
        _kill_and_watch(c, cfg, serving=True)
    finally:
        stop.set()
    c.mark('done')


def sc_worker_killed_idle(c, cfg):
    """Cluster A: startup, idle, SIGKILL to the worker's process group, idle, one request, the head's exit."""
    sc_startup(c, cfg)
    stop = threading.Event()
    c.sampler(stop, metrics_dt=cfg['slow_dt'], probe_paths=PROBE_PATHS, probe_dt=cfg['slow_dt'])
    try:
        c.mark('idle')
        _kill_and_watch(c, cfg, serving=False)
    finally:
        stop.set()
    c.mark('done')


SCENARIOS = {
    'startup': sc_startup, 'engine_error': sc_engine_error, 'wrong_api_key': sc_wrong_api_key, 'prefill': sc_prefill,
    'concurrent_decode': sc_concurrent_decode, 'bench': sc_bench, 'worker_frozen': sc_worker_frozen,
    'worker_killed_serving': sc_worker_killed_serving, IDLE_KILL: sc_worker_killed_idle,
}


# -- environment per backend ---------------------------------------------------------------------

def backend_setup(backend, model, workdir):
    """-> (model argument, env common to both ranks of every cluster, {cluster: extra env})."""
    cfg = BACKENDS[backend]
    env = dict(COMMON_ENV)
    env.update(cfg['env'])
    if backend == 'real':
        env.update(REAL_ENV)
        per_cluster = dict((n, {'VLLM_CACHE_ROOT': os.path.join(workdir, 'vllm-cache-%s' % n)}) for n in 'AB')
        return model, env, per_cluster
    from vllm_sim import standin  # pylint: disable=import-error
    root = standin.make_root(os.path.join(workdir, 'sim-root'), models=('/models/tiny',))
    env['VLLM_SIM_ROOT'] = root
    return '/models/tiny', env, {'A': {}, 'B': {}}


def device_facts(backend):
    if backend != 'real':
        return {'vllm_version': 'simulator (tests/vllm_sim, VLLM_SIM_VERSION %s)' % os.environ.get('VLLM_SIM_VERSION', '0.27.1'),
                'gpu': None, 'driver': None}
    facts = {'gpu': None, 'driver': None}
    try:
        out = subprocess.run(['nvidia-smi', '--query-gpu=name,memory.total,driver_version', '--format=csv,noheader'],
                             capture_output=True, text=True, timeout=30, check=False).stdout.strip().splitlines()
        facts['gpu'] = ['%s (%s)' % (row.split(',')[0].strip(), row.split(',')[1].strip()) for row in out]
        facts['driver'] = out[0].split(',')[2].strip() if out else None
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    try:
        from importlib import metadata
        facts['vllm_version'] = metadata.version('vllm')
    except Exception:  # pylint: disable=broad-except
        facts['vllm_version'] = None
    return facts


def run(args):
    backend = args.backend
    cfg = BACKENDS[backend]
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    workdir = os.path.join(out, '.work') if backend == 'sim' else '/tmp/real-vllm-work'
    os.makedirs(workdir, exist_ok=True)
    model, env, per_cluster = backend_setup(backend, args.model, workdir)
    wanted = list(args.scenarios.split(',') if args.scenarios else ALL_SCENARIOS)
    unknown = [s for s in wanted if s not in SCENARIOS]
    if unknown:
        raise SystemExit('--scenarios: unknown %s (known: %s)' % (unknown, ', '.join(ALL_SCENARIOS)))
    deadline = time.monotonic() + args.deadline_s
    if backend == 'sim' and not args.port_base:
        args.port_base = free_port_base(4)
    facts = device_facts(backend)
    facts['date'] = utcnow()
    facts['recorder'] = 'python3 tests/real_vllm/driver.py ' + ' '.join(shlex.quote(a) for a in sys.argv[1:])
    clusters = []
    spec = {'B': ('engine_b', 8000 if backend == 'real' else args.port_base, 29501 if backend == 'real' else args.port_base + 1),
            'A': ('engine_a', 8001 if backend == 'real' else args.port_base + 2, 29511 if backend == 'real' else args.port_base + 3)}

    def make(name):
        engine, port, mport = spec[name]
        argv = recipe.render_cluster(cfg['entrypoint'], model, cfg[engine], port, mport)
        cenv = dict(env)
        cenv.update(per_cluster[name])
        recorded = dict(facts, commands=argv, env=dict((k, v) for k, v in sorted(cenv.items()) if k != 'VLLM_SIM_PYTHON'),
                        cluster=name)
        c = Cluster(name, backend, cfg, argv, cenv, port, deadline)
        c.cfg = dict(cfg, engine_b=cfg[engine])
        c.recorded = recorded
        clusters.append(c)
        return c

    def drive(c, names):
        for name in names:
            c.begin(name, c.recorded)
            try:
                SCENARIOS[name](c, cfg)
            except Exception as exc:  # pylint: disable=broad-except
                c.mark('error', error='%s: %s' % (type(exc).__name__, exc))
                print('%s/%s: %s: %s' % (c.name, name, type(exc).__name__, exc), file=sys.stderr)
                if name == 'startup' or c.ranks.get('head') is None or c.ranks['head'].exited.is_set():
                    break
            finally:
                print('%s/%s done at t=%.1f' % (c.name, name, c.now() if c.t0 else 0.0), file=sys.stderr)
        time.sleep(0.3)
        with c.lock:
            c.trace = None

    threads = []
    if IDLE_KILL in wanted:
        a = make('A')
        threads.append(threading.Thread(target=drive, args=(a, [IDLE_KILL]), name='cluster-A'))
    names_b = [s for s in SCENARIO_ORDER if s in wanted]
    if names_b:
        if names_b[0] != 'startup':
            names_b.insert(0, 'startup')
        b = make('B')
        threads.append(threading.Thread(target=drive, args=(b, names_b), name='cluster-B'))
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for c in clusters:
            c.kill_all()
    written = []
    for c in clusters:
        for trace in c.traces:
            if trace.name in wanted and trace.name != 'bench':   # the bench writes bench_result.json instead
                written.append(trace.write(out))
        if getattr(c, 'bench_result', None) is not None:
            result = dict(c.bench_result, recorded=c.recorded)
            with open(os.path.join(out, BENCH_RESULT), 'w') as f:
                json.dump(result, f, indent=1, sort_keys=True)
            written.append(os.path.join(out, BENCH_RESULT))
    print('\n'.join(written))
    return written


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    p.add_argument('--backend', choices=sorted(BACKENDS), required=True)
    p.add_argument('--out', required=True, help='directory for <scenario>.json')
    p.add_argument('--model', default='/tmp/model', help='real: the model directory (make_model.py)')
    p.add_argument('--scenarios', default='', help='comma-separated subset of: %s' % ', '.join(ALL_SCENARIOS))
    p.add_argument('--deadline-s', type=float, default=560.0, help='stop scenarios after this many seconds')
    p.add_argument('--port-base', type=int, default=0, help='sim: first of four consecutive free ports (0: find some)')
    return run(p.parse_args(argv))


if __name__ == '__main__':
    main()
