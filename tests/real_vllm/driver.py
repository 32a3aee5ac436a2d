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
        'starv': {'engine': {'max-model-len': 262144, 'enable-chunked-prefill': True, 'max-num-seqs': 8,
                             'gpu-memory-utilization': 0.85},
                  'long_tokens': 250000, 'long_timeout_s': 240.0, 'stop_s': 20.0},
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
        # the simulator sizes its KV cache from a 119.67 GiB node: the real flags fit as they are. 'pace' rows
        # (min_budget, L's tokens, env), the first with min_budget <= budget applies (starv_pace): a step lasts 10 ms
        # (VLLM_SIM_TOKENS_PER_S 100) + its prompt tokens / VLLM_SIM_PREFILL_TOKENS_PER_S (tests/vllm_sim/README.md,
        # "Scheduler and pacing"). Shapes are compared, not seconds, so L is smaller than real (250,000) and a config
        # takes ~10 s, yet L still spans >= 13 steps and an S sent at t0 + 5 s (t0 + 3 s at 8192) waits >= 2 s of
        # it. Budget 8192: the simulator's calibration against the real traces (29700 prompt tokens/s, a 0.29-s step).
        # Budget 256: 1500 prompt tokens/s (a 0.18-s step, real ~11 ms; the calibrated 91000 gives 12.8 ms), L 8000
        # tokens (~6 s of prefill). An S served at once still waits the rest of the step it arrived in and the step that
        # prefills it (1-2 steps); "within 3 steps" (observe.WITHIN_STEPS) leaves the rest, ~0.18-0.35 s here, for a
        # loaded CI host's scheduling delay of S's own request. At 8000 (a 42-ms step, 2026-12-06) that room was
        # ~0.03-0.1 s and one S, delayed 0.12 s by the host (CI64: S during L 0.148/0.207/0.12/0.045 s, the steps around
        # it normal), read as 'mixed'.
        'starv': {'engine': {'max-model-len': 262144, 'enable-chunked-prefill': True, 'max-num-seqs': 8,
                             'gpu-memory-utilization': 0.85},
                  'long_tokens': 30000, 'long_timeout_s': 120.0, 'stop_s': 5.0,
                  'pace': ((8192, 100000, {'VLLM_SIM_TOKENS_PER_S': '100', 'VLLM_SIM_PREFILL_TOKENS_PER_S': '29700'}),
                           (0, 8000, {'VLLM_SIM_TOKENS_PER_S': '100', 'VLLM_SIM_PREFILL_TOKENS_PER_S': '1500'}))},
    },
}


def sim_word_tokenizer(model_dir, vocab=32000):
    """tokenizer.json of make_model.py's vocabulary (WordLevel, one word wN = one token) in the simulator's model
    directory, so that it counts prompt tokens as real vLLM did: an S of 30 words is 30 tokens (the recorded
    starvation traces: vllm:prompt_tokens_total +30 per S); the stand-in model alone counts ceil(chars / 4) = 45, which
    at budget 256 and threshold 224 does not fit beside L's chunk and D (224 + 1 + 30 = 255) and splits S over two
    steps. The simulator reads it with `tokenizers` or, without it, by the WordLevel + Whitespace rule."""
    from real_vllm import make_model  # pylint: disable=import-outside-toplevel,import-error
    words = make_model.SPECIALS + [make_model.word(i) for i in range(len(make_model.SPECIALS), vocab)]
    spec = {'version': '1.0', 'truncation': None, 'padding': None, 'added_tokens': [], 'normalizer': None,
            'pre_tokenizer': {'type': 'Whitespace'}, 'post_processor': None, 'decoder': None,
            'model': {'type': 'WordLevel', 'vocab': dict((w, i) for i, w in enumerate(words)), 'unk_token': '<unk>'}}
    with open(os.path.join(model_dir, 'tokenizer.json'), 'w') as f:
        json.dump(spec, f)


def starv_pace(backend, budget):
    """-> (L's default tokens, env pacing the engine) for the starvation scenario at this budget: the first
    'pace' row (min_budget, tokens, env) with min_budget <= budget; the backend's long_tokens and {} without one."""
    starv = BACKENDS[backend]['starv']
    for min_budget, tokens, env in starv.get('pace', ()):
        if budget >= min_budget:
            return tokens, dict(env)
    return starv['long_tokens'], {}


# The starvation scenario (real-vllm-on-device notes, Part 1b), in seconds after D is sent (t0); the same on both
# backends (real time: the simulator's prefill pace is its own, set by VLLM_SIM_PREFILL_TOKENS_PER_S).
STARVATION = {
    'alone': 3,               # S sent one after the other before D and L ("S alone")
    'decode_tokens': 3000,    # D: max_tokens, ignore_eos, short prompt
    'decode_words': 32,
    'long_after_s': 2.0,      # L sent at t0 + 2 s
    'shorts_after_s': 5.0,    # S from t0 + 5 s ...
    'shorts_after_s_big': 3.0,   # ... t0 + 3 s at a budget >= BIG_BUDGET (L prefills faster)
    'big_budget': 8192,
    'short_words': 30,        # S: ~30 tokens, max_tokens 8
    'short_tokens': 8,
    'long_max_tokens': 8,
    'short_gap_s': 0.25,      # between one S's end and the next S
    'after': 3,               # S sent after L's first token
    'short_timeout_s': 180.0,
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
    from ansible_collections.dgxspark.ds4.plugins.module_utils._node import bench_stats  # pylint: disable=import-error
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

    def __init__(self, cluster, name, body, first_mark=None, timeout=900.0, timed=False, extra=None):
        self.c = cluster
        self.name = name
        self.body = dict(body, stream=True)
        self.first_mark = first_mark
        self.timeout = timeout
        # timed: the response event also carries t_sent, t_first (first token) and chunk_t (every token chunk's t)
        self.timed = timed
        self.extra = dict(extra or {})
        self.t_sent = None
        self.t_first = None
        self.chunk_t = []
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
        self.t_sent = self.c.now()
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
                    token = '"text"' in line and '"text":""' not in line.replace(' ', '')
                    if token and self.timed:
                        self.chunk_t.append(self.c.now())
                    if not self.first.is_set() and token:
                        self.t_first = self.c.now()
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
            if self.timed:
                event.update(self.extra, t_sent=self.t_sent, t_first=self.t_first, chunk_t=self.chunk_t)
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


def token_ids(n, seed):
    """n random token ids of the test vocabulary (ids 7 ... 31999: one `wN` word each): an exact prompt length."""
    rng = random.Random(seed)
    return [rng.randint(7, 31999) for _i in range(n)]


def starvation_name(budget, threshold):
    return 'starvation_b%d_t%d' % (budget, threshold)


def sc_start_single(c, cfg):
    """One rank (--ranks 1): the engine started, /health probed every probe_dt until 200 (marks head_started, ready)."""
    c.t0 = time.monotonic()
    c.mark('probing')
    c.start_head()
    c.mark('head_started')
    end = time.monotonic() + cfg['startup_timeout']
    head = c.ranks['head']
    while time.monotonic() < end:
        c.check_deadline()
        if c.probe('/health')[0] == 200:
            c.mark('ready')
            return
        if head.exited.is_set():
            raise RuntimeError('%s: the engine exited during startup (status %s)' % (c.name, head.exit_status))
        time.sleep(cfg['probe_dt'])
    c.mark('startup_timeout')
    raise RuntimeError('%s: not ready after %ss' % (c.name, cfg['startup_timeout']))


def sc_starvation(c, cfg, budget, long_tokens, st=None):
    """Part 1b of the real-vllm-on-device notes: S alone; D decoding from t0; L (long_tokens prompt ids) from t0 + 2 s;
    S one after the other from t0 + 5 s (t0 + 3 s at budget >= 8192) until L's first token and `after` more.
    Every S, D and L is a `response` event with t_sent, t_first, chunk_t and (S) group: alone | during | after."""
    st = dict(STARVATION, **(st or {}))
    stop = threading.Event()
    c.sampler(stop, metrics_dt=cfg['metrics_dt'])
    streams = []
    count = [0]

    def short(group):
        i = count[0]
        count[0] += 1
        s = Stream(c, 'short_%d' % i, c.completion(words(st['short_words'], 1000 + i), st['short_tokens'], ignore_eos=True),
                   timed=True, extra={'group': group}).start()
        streams.append(s)
        if not wait_for(s.done.is_set, st['short_timeout_s'], c):
            raise RuntimeError('short_%d: no answer in %ss' % (i, st['short_timeout_s']))
        sleep_checked(c, st['short_gap_s'])
        return s
    try:
        sleep_checked(c, cfg['metrics_dt'] * 4)
        c.mark('alone')
        for _i in range(st['alone']):
            short('alone')
        c.mark('decode_start', max_tokens=st['decode_tokens'])
        t0 = time.monotonic()
        decode = Stream(c, 'decode', c.completion(words(st['decode_words'], 7), st['decode_tokens'], ignore_eos=True),
                        first_mark='decode_first_token', timed=True).start()
        streams.append(decode)
        prompt = token_ids(long_tokens, 8)
        body = c.completion(prompt, st['long_max_tokens'], ignore_eos=True)
        sleep_checked(c, max(0.0, t0 + st['long_after_s'] - time.monotonic()))
        c.mark('long_start', prompt_tokens=long_tokens)
        long_req = Stream(c, 'long', body, first_mark='long_first_token', timed=True,
                          timeout=cfg['starv']['long_timeout_s'] + 60.0).start()
        streams.append(long_req)
        after_s = st['shorts_after_s_big'] if budget >= st['big_budget'] else st['shorts_after_s']
        sleep_checked(c, max(0.0, t0 + after_s - time.monotonic()))
        c.mark('shorts_start')
        end = time.monotonic() + cfg['starv']['long_timeout_s']
        after = 0
        while after < st['after']:
            if long_req.done.is_set() and not long_req.first.is_set():
                raise RuntimeError('long: ended without a token (status %s)' % long_req.status)
            if time.monotonic() > end:
                raise RuntimeError('long: no first token in %ss' % cfg['starv']['long_timeout_s'])
            group = 'after' if long_req.first.is_set() else 'during'
            short(group)
            after += group == 'after'
        wait_for(long_req.done.is_set, 30.0, c)
        c.mark('shorts_done', shorts=count[0])
        sleep_checked(c, cfg['metrics_dt'] * 4)
        c.mark('decode_closed', chunks=decode.count)
        decode.close()
        wait_for(decode.done.is_set, 10.0, c)
    finally:
        stop.set()
        for s in streams:
            s.close()
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


def single_argv(argv):
    """The head's argv as one rank: --tensor-parallel-size 1; no --nnodes, --node-rank, --master-addr, --master-port,
    --headless, --distributed-executor-backend (one process: vLLM's default executor for one GPU)."""
    drop_valued = ('--nnodes', '--node-rank', '--master-addr', '--master-port', '--distributed-executor-backend')
    out = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in drop_valued:
            i += 2
            continue
        if a == '--headless':
            i += 1
            continue
        out.append(a)
        if a == '--tensor-parallel-size':
            out.append('1')
            i += 2
            continue
        i += 1
    return out


def run_bench_mixed(c, out, name, long_tokens, timeout_s):
    """Optional hook: plugins/module_utils/_bench/bench_mixed.run_mixed against the running engine, result saved as
    bench_mixed_<b..>_<t..>.json; a missing module, an exception or a hang never breaks the trace run."""
    path = os.path.join(out, name.replace('starvation_', 'bench_mixed_') + '.json')
    try:
        from ansible_collections.dgxspark.ds4.plugins.module_utils._bench import bench_mixed  # pylint: disable=import-error
        run_mixed = bench_mixed.run_mixed
    except (ImportError, AttributeError) as exc:
        print('bench_mixed: skipped (%s)' % exc, file=sys.stderr)
        return None
    box = {}

    def call():
        try:
            box['result'] = run_mixed('http://127.0.0.1:%d' % c.port, recipe.SERVED_NAME, api_key=recipe.API_KEY,
                                      long_tokens=long_tokens, short_requests=5, timeout_s=timeout_s)
        except Exception as exc:  # pylint: disable=broad-except
            box['error'] = '%s: %s' % (type(exc).__name__, exc)
    thread = threading.Thread(target=call, daemon=True, name='bench-mixed')
    thread.start()
    thread.join(timeout_s + 10.0)
    doc = {'recorded': c.recorded, 'long_tokens': long_tokens, 'short_requests': 5}
    if 'result' in box:
        doc['result'] = box['result']
    else:
        doc['error'] = box.get('error', 'no result within %.0f s' % (timeout_s + 10.0))
    try:
        with open(path, 'w') as f:
            json.dump(doc, f, indent=1, sort_keys=True, default=str)
    except (OSError, TypeError, ValueError) as exc:
        print('bench_mixed: not written (%s)' % exc, file=sys.stderr)
        return None
    print('bench_mixed: %s (%s)' % (path, 'result' if 'result' in box else doc['error']), file=sys.stderr)
    return path


def run_single(args):
    """--ranks 1: one engine (CUDA_VISIBLE_DEVICES=0, TP 1), the starvation scenario at --budget / --threshold,
    OUT/starvation_b<budget>_t<threshold>.json; then, with --bench-mixed, the optional bench_mixed hook."""
    backend = args.backend
    cfg = BACKENDS[backend]
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    workdir = os.path.join(out, '.work') if backend == 'sim' else '/tmp/real-vllm-work'
    os.makedirs(workdir, exist_ok=True)
    model, env, per_cluster = backend_setup(backend, args.model, workdir)
    if backend == 'sim':
        sim_word_tokenizer(os.path.join(env['VLLM_SIM_ROOT'], model.lstrip('/')))
    wanted = [s for s in (args.scenarios.split(',') if args.scenarios else ['starvation']) if s]
    if wanted != ['starvation']:
        raise SystemExit('--ranks 1 runs the starvation scenario only (got --scenarios %s)' % ','.join(wanted))
    deadline = time.monotonic() + args.deadline_s
    port = args.port_base or (8000 if backend == 'real' else free_port_base(2))
    engine = dict(cfg['starv']['engine'], **{'max-num-batched-tokens': args.budget})
    if args.threshold > 0:
        engine['long-prefill-token-threshold'] = args.threshold
    argv = {'head': single_argv(recipe.render_cluster(cfg['entrypoint'], model, engine, port, port + 1)['head'])}
    cenv = dict(env)
    cenv.update(per_cluster['B'])
    cenv.update(starv_pace(backend, args.budget)[1])
    if backend == 'sim' and os.environ.get('VLLM_SIM_SCHEDULER'):
        # passed on anyway (the ranks inherit os.environ); copied here so that the trace records a run of the former
        # per-request model (VLLM_SIM_SCHEDULER=per_request, tests/unit/real_vllm/test_conformance_starvation.py)
        cenv['VLLM_SIM_SCHEDULER'] = os.environ['VLLM_SIM_SCHEDULER']
    facts = device_facts(backend)
    facts['date'] = utcnow()
    facts['recorder'] = 'python3 tests/real_vllm/driver.py ' + ' '.join(shlex.quote(a) for a in sys.argv[1:])
    recorded = dict(facts, commands=argv, env=dict((k, v) for k, v in sorted(cenv.items()) if k != 'VLLM_SIM_PYTHON'),
                    cluster='single', ranks=1, gpus='CUDA_VISIBLE_DEVICES=0', budget=args.budget,
                    threshold=args.threshold, long_tokens=args.long_tokens)
    c = Cluster('S', backend, cfg, argv, cenv, port, deadline)
    c.recorded = recorded
    name = starvation_name(args.budget, args.threshold)
    trace = c.begin(name, recorded)
    written = []
    ok = False
    try:
        try:
            sc_start_single(c, cfg)
            sc_starvation(c, cfg, args.budget, args.long_tokens)
            ok = True
        except (Exception, KeyboardInterrupt) as exc:  # pylint: disable=broad-except  # (Deadline, timeout -s INT too)
            c.mark('error', error='%s: %s' % (type(exc).__name__, exc))
            print('%s: %s: %s' % (name, type(exc).__name__, exc), file=sys.stderr)
        print('%s done at t=%.1f' % (name, c.now() if c.t0 else 0.0), file=sys.stderr)
        if ok and args.bench_mixed:
            left = deadline - time.monotonic() - cfg['starv']['stop_s'] - 10.0
            if left > 30.0:
                with c.lock:
                    c.trace = None   # the bench's own requests are not part of the trace
                got = run_bench_mixed(c, out, name, args.long_tokens, min(240.0, left))
                if got:
                    written.append(got)
            else:
                print('bench_mixed: skipped, %.0f s left before the deadline' % max(0.0, left), file=sys.stderr)
    finally:
        head = c.ranks.get('head')
        if head is not None and not head.exited.is_set():
            with c.lock:
                c.trace = trace   # the engine's shutdown lines and exit
            try:
                os.killpg(head.proc.pid, signal.SIGTERM)
            except OSError:
                pass
            head.exited.wait(cfg['starv']['stop_s'])
        c.kill_all()
        if head is not None:   # the GPU is free for the next config once the engine's whole group is gone
            end = time.monotonic() + 20.0
            while c.group_left('head') and time.monotonic() < end:
                time.sleep(0.2)
        time.sleep(0.3)
        with c.lock:
            c.trace = None
    written.insert(0, trace.write(out))
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
    p.add_argument('--ranks', type=int, choices=(1, 2), default=2,
                   help='2: the two-rank scenarios; 1: one engine (TP 1, GPU 0), the starvation scenario')
    p.add_argument('--budget', type=int, default=256, help='--ranks 1: --max-num-batched-tokens')
    p.add_argument('--threshold', type=int, default=0, help='--ranks 1: --long-prefill-token-threshold (0: flag left out)')
    p.add_argument('--long-tokens', type=int, default=0, help='--ranks 1: the long prompt L in token ids (0: the backend default)')
    p.add_argument('--bench-mixed', action='store_true',
                   help='--ranks 1: after the scenario, plugins/module_utils/_bench/bench_mixed.run_mixed if it exists')
    args = p.parse_args(argv)
    if args.ranks == 1:
        args.long_tokens = args.long_tokens or starv_pace(args.backend, args.budget)[0]
        return run_single(args)
    return run(args)


if __name__ == '__main__':
    main()
