# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`vllm serve` of the simulator: startup sequence, rendezvous, failures, HTTP serving.

A STAND-IN for vLLM (test code only, never deployed to real nodes). Environment knobs are
listed in README.md; every one is read here through `_env_*`.
"""


import json
import os
import queue
import signal
import sys
import threading
import time

from vllm_sim import STAND_IN_NOTICE
from vllm_sim import api
from vllm_sim import checks
from vllm_sim import dist
from vllm_sim import engine as eng
from vllm_sim import logs
from vllm_sim.cli import non_default_args

NCCL_VERSION = '2.27.7'
ENGINE_INIT_FAILED = 'RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}'
# What vLLM 0.26.0 logged when its worker rank died (real-vllm-on-device notes, Part 1 §3).
RPC_TIMEOUT = 'TimeoutError: RPC call to sample_tokens timed out.'
ENGINE_DEAD = ('vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) '
               'for the root cause.')
NCCL_REMOTE_EXITED = 'NCCL error: remote process exited or there was a network error'
WORKER_FAILED = ("RuntimeError: Worker failed with error '%s', please check the stack trace above for the root cause"
                 % NCCL_REMOTE_EXITED)
# Every engine step needs the worker rank: it completes only once the worker answered a ping sent after the step
# began (one ping in flight serves every step waiting; state.step_barrier). A step that waited this long freezes the
# published gauges (the engine core publishes nothing while a step hangs).
FREEZE_AFTER_S = 0.05
FREE_MEMORY = ('ValueError: Free memory on device cuda:0 (%.2f/%.2f GiB) on startup is less than desired GPU memory '
               'utilization (%s, %.2f GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.')
SHM_NOT_FOUND = "FileNotFoundError: [Errno 2] No such file or directory: '/psm_%s'"
SHM_ATTR = "AttributeError: 'ShmRingBuffer' object has no attribute 'shared_memory'"
FAILURES = ('free_memory', 'shm_ring', 'worker_die', 'hang', 'load_crash')


def _env_f(name, default):
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return float(default)


def _image_settings(path):
    """The image's baked settings ({} when the file is absent or unreadable)."""
    try:
        with open(path) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _env_i(name, default):
    return int(_env_f(name, default))


class Config:
    """Everything the simulator needs, from argv + VLLM_SIM_* env."""

    def __init__(self, args):
        def arg(name, default=None):
            """argv value (the schema of the image's vLLM decides which flags exist)."""
            value = getattr(args, name, None)
            return default if value is None else value
        self.args = args
        self.model = arg('model') or arg('model_tag') or 'Qwen/Qwen3-0.6B'
        self.revision = arg('revision')
        self.load_format = arg('load_format')
        self.compilation_config = arg('compilation_config')
        self.fail_on_environ_validation = bool(arg('fail_on_environ_validation'))
        self.served_names = list(arg('served_model_name') or [self.model])
        self.host = arg('host')
        self.port = arg('port', 8000)
        self.tp = arg('tensor_parallel_size') or 1
        self.pp = arg('pipeline_parallel_size') or 1
        self.nnodes = arg('nnodes') or 1
        self.node_rank = arg('node_rank') or 0
        self.headless = bool(arg('headless'))
        self.master_addr = arg('master_addr') or '127.0.0.1'
        self.master_port = arg('master_port', 29501)
        self.backend = arg('distributed_executor_backend')
        max_len = arg('max_model_len')
        self.max_model_len = max_len if max_len and max_len > 0 else _env_i('VLLM_SIM_MODEL_MAX_LEN', 1048576)
        self.max_num_seqs = arg('max_num_seqs') or 256
        # vLLM's default KV block on CUDA: 16 tokens (recorded cache_config_info); the profiles set 256
        self.block_size = arg('block_size') or 16
        self.kv_cache_dtype = arg('kv_cache_dtype') or 'auto'
        self.gpu_mem_util = arg('gpu_memory_utilization', 0.9)
        self.prefix_caching = arg('enable_prefix_caching') is not False and arg('prefix_caching') is not False
        self.enforce_eager = bool(arg('enforce_eager'))
        self.api_keys = [k for k in (arg('api_key') or [os.environ.get('VLLM_API_KEY', '')]) if k]
        self.chat_template_kwargs = dict(arg('default_chat_template_kwargs') or {})
        self.reasoning_parser = arg('reasoning_parser')
        self.tool_call_parser = arg('tool_call_parser')
        self.auto_tool_choice = bool(arg('enable_auto_tool_choice'))
        self.disable_log_stats = bool(arg('disable_log_stats'))
        self.disable_access_log = bool(arg('disable_uvicorn_access_log'))
        self.force_usage = bool(arg('enable_force_include_usage'))
        spec = arg('speculative_config') or {}
        self.spec_k = int(spec.get('num_speculative_tokens') or 0) if isinstance(spec, dict) else 0
        acc = [float(x) for x in os.environ.get('VLLM_SIM_SPEC_ACCEPTANCE', '0.91,0.81,0.72,0.67,0.57').split(',') if x.strip()]
        while len(acc) < self.spec_k:
            acc.append(round(acc[-1] * 0.85, 4) if acc else 0.5)
        self.spec_acceptance = acc[:self.spec_k]
        # timing
        scale = _env_f('VLLM_SIM_TIME_SCALE', 1.0)
        self.t_init = scale * _env_f('VLLM_SIM_INIT_S', 0.3)
        self.t_load = scale * _env_f('VLLM_SIM_LOAD_S', 1.5)
        self.t_profile = scale * _env_f('VLLM_SIM_PROFILE_S', 0.4)
        self.t_graphs = scale * _env_f('VLLM_SIM_GRAPH_S', 0.6)
        self.t_api = scale * _env_f('VLLM_SIM_API_S', 0.2)
        self.tokens_per_s = _env_f('VLLM_SIM_TOKENS_PER_S', 50.0)
        self.agg_tokens_per_s = _env_f('VLLM_SIM_AGG_TOKENS_PER_S', 0.0)
        self.prefill_tokens_per_s = _env_f('VLLM_SIM_PREFILL_TOKENS_PER_S', 5000.0)
        # A test image's own speed (tests/harness/build-sim-image.sh bakes /opt/vllm_sim/image-settings.json into the
        # `slower` variant): an image that silently serves slower, as upgrade.yml's regression kit must catch. The
        # factors multiply the rates above, whatever the unit's environment says.
        self.image_settings = _image_settings(os.environ.get('VLLM_SIM_IMAGE_SETTINGS', '/opt/vllm_sim/image-settings.json'))
        self.tokens_per_s *= float(self.image_settings.get('tokens_per_s_factor', 1.0))
        self.prefill_tokens_per_s *= float(self.image_settings.get('prefill_tokens_per_s_factor', 1.0))
        self.ttft_base_s = _env_f('VLLM_SIM_TTFT_BASE_S', 0.02)
        self.default_reply_tokens = _env_i('VLLM_SIM_DEFAULT_REPLY_TOKENS', 48)
        self.rendezvous_timeout = _env_f('VLLM_SIM_RENDEZVOUS_TIMEOUT_S', 600.0)
        self.rpc_timeout = _env_f('VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS', 300.0)
        # after an engine death vLLM 0.26 shut down 0.5 s later with exit status 0 (real-vllm-on-device notes §3)
        self.watchdog_s = _env_f('VLLM_SIM_WATCHDOG_S', 0.5)
        self.dead_exit_code = _env_i('VLLM_SIM_ENGINE_DEAD_EXIT_CODE', 0)
        self.orphan_exit_s = _env_f('VLLM_SIM_ORPHAN_EXIT_S', 30.0)
        # the head's rank-0 worker process left behind after an RPC-timeout death (0 = none)
        self.orphan_worker_s = _env_f('VLLM_SIM_ORPHAN_WORKER_S', 150.0)
        self.stats_interval = _env_f('VLLM_SIM_STATS_INTERVAL_S', 10.0)
        # memory
        self.total_gib = _env_f('VLLM_SIM_TOTAL_GIB', 119.67)
        self.weights_gib = _env_f('VLLM_SIM_WEIGHTS_GIB', 75.0)
        # failures
        self.fail = os.environ.get('VLLM_SIM_FAIL', '').strip()
        self.fail_after = _env_f('VLLM_SIM_FAIL_AFTER_S', 5.0)
        self.garble = os.environ.get('VLLM_SIM_GARBLE', '').strip() or None
        self.garble_min_concurrency = _env_i('VLLM_SIM_GARBLE_MIN_CONCURRENCY', 0)
        self.garble_concurrent_mode = os.environ.get('VLLM_SIM_GARBLE_CONCURRENT_MODE', 'cjk')
        # runtime wedge (hang drills): after N generated tokens the engine stops (no token, no prompt
        # token, no step; gauges frozen; /health 200), like an NCCL collective that never returns
        wedge = os.environ.get('VLLM_SIM_WEDGE_AFTER_TOKENS', '').strip()
        self.wedge_after_tokens = int(wedge) if wedge.lstrip('-').isdigit() and int(wedge) >= 0 else None
        self.shm_wait_log_s = scale * _env_f('VLLM_SIM_SHM_WAIT_LOG_S', 60.0)
        # chunked prefill: prompt tokens and engine steps advance per chunk while a prompt is prefilled
        self.prefill_chunk_tokens = max(1, _env_i('VLLM_SIM_PREFILL_CHUNK_TOKENS', 8192))
        # the engine step's token budget (vLLM V1 Scheduler.schedule()): --max-num-batched-tokens, else the env knob
        # above (default 8192, vLLM's default budget for the API server)
        self.max_num_batched_tokens = max(1, arg('max_num_batched_tokens') or self.prefill_chunk_tokens)
        # vLLM 0.26.0's default 0: no cap on a prefilling request's tokens per step
        self.long_prefill_token_threshold = arg('long_prefill_token_threshold', 0)
        # step (vLLM V1's scheduler) or per_request (the former model, kept for the test that shows it fails)
        self.scheduler = os.environ.get('VLLM_SIM_SCHEDULER', '').strip() or 'step'
        # shards
        # the shard count shown while loading: the weight files found by the start-up checks, unless set here
        self.shards = _env_i('VLLM_SIM_SHARDS', 8)
        self.model_dir = None     # set by the start-up checks (the directory vLLM loads), else a non-path model id
        # KV cache sizing (GiB -> tokens) like a DSV4-Flash rank: ~20k tokens per GiB of fp8 KV.
        self.kv_gib = max(0.5, self.total_gib * self.gpu_mem_util - self.weights_gib - 3.0)
        kv_override = _env_i('VLLM_SIM_KV_TOKENS', 0)
        tokens = kv_override or int(self.kv_gib * _env_f('VLLM_SIM_KV_TOKENS_PER_GIB', 20600.0))
        self.num_gpu_blocks = max(1, tokens // self.block_size)
        self.kv_tokens = self.num_gpu_blocks * self.block_size

    def cache_info(self):
        return {'block_size': self.block_size, 'cache_dtype': self.kv_cache_dtype, 'calculate_kv_scales': 'False',
                'cpu_offload_gb': 0, 'enable_prefix_caching': str(self.prefix_caching), 'engine': '0',
                'gpu_memory_utilization': self.gpu_mem_util, 'is_attention_free': 'False', 'num_cpu_blocks': 'None',
                'num_gpu_blocks': self.num_gpu_blocks, 'num_gpu_blocks_override': 'None',
                'prefix_caching_hash_algo': 'sha256', 'sliding_window': 'None'}


class State:
    def __init__(self, cfg, version):
        self.cfg = cfg
        self.version = version
        self.engine = eng.Engine(cfg)
        self.engine.peer_gate = self.peer_gate
        self.api_keys = cfg.api_keys
        # garbled mode of every reply: VLLM_SIM_GARBLE at start, switched while serving by POST /sim/garble
        self.garble = cfg.garble
        self.conn = None
        self.replies = queue.Queue()
        self.peer_gone = False
        self.ping_cond = threading.Condition()
        self.ping_wanted = 0
        self.ping_sent = 0
        self.pong_seen = 0
        self.dead_lock = threading.Lock()
        self.rpc_lock = threading.Lock()
        self.created = int(time.time())

    def models_body(self):
        return {'object': 'list', 'data': [{
            'id': name, 'object': 'model', 'created': self.created, 'owned_by': 'vllm', 'root': self.cfg.model,
            'parent': None, 'max_model_len': self.cfg.max_model_len,
            'permission': [{'id': 'modelperm-sim', 'object': 'model_permission', 'created': self.created,
                            'allow_create_engine': False, 'allow_sampling': True, 'allow_logprobs': True,
                            'allow_search_indices': False, 'allow_view': True, 'allow_fine_tuning': False,
                            'organization': '*', 'group': None, 'is_blocking': False}]} for name in self.cfg.served_names]}

    # ------------------------------------------------------------------ stalls: wedge, frozen or lost rank
    def peer_gate(self):
        """Before every engine step: the worker rank must answer a ping sent after the step began. While it does
        not (SIGSTOP), the step waits with the scheduler gauges frozen, and goes on when it answers (SIGCONT).
        EngineDead once the engine died; a worker that is gone wedges the engine (peer_lost)."""
        if self.conn is None:
            return
        engine = self.engine
        with self.ping_cond:
            ticket = self.ping_sent + 1
            self.ping_wanted = max(self.ping_wanted, ticket)
            self.ping_cond.notify_all()
            started = time.monotonic()
            froze = False
            while self.pong_seen < ticket and not engine.wedged.is_set() and not engine.stop.is_set():
                self.ping_cond.wait(0.05)
                if not froze and time.monotonic() - started >= FREEZE_AFTER_S:
                    froze = True
                    engine.freeze()
        if engine.wedged.is_set() or engine.stop.is_set():
            engine.stop.wait()
            raise eng.EngineDead()
        if froze:
            engine.thaw()

    def start_pinger(self):
        """One ping in flight at a time, sent whenever a step waits for one (peer_gate)."""
        def loop():
            while not self.engine.stop.is_set():
                with self.ping_cond:
                    while self.ping_wanted <= self.ping_sent and not self.engine.stop.is_set():
                        self.ping_cond.wait(0.5)
                    self.ping_sent += 1
                    seq = self.ping_sent
                try:
                    self.conn.send('PING %d' % seq)
                except OSError:
                    return
        threading.Thread(target=loop, name='sim-pinger', daemon=True).start()

    def start_monitor(self):
        """The engine core waiting on its workers (vLLM's shm_broadcast reader): while a step cannot finish (wedge,
        frozen or lost rank with work in flight) log the no-broadcast-block line every shm_wait_log_s, and after
        VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS the RPC times out and the engine dies (notes Part 1 §3 B, §4)."""
        engine = self.engine

        def loop():
            logged = 0
            while not engine.stop.wait(0.05):
                since = engine.stalled_at
                if since is None:
                    logged = 0
                    continue
                stalled = time.monotonic() - since
                if stalled >= self.cfg.rpc_timeout:
                    self.engine_dead('rpc_timeout')
                    return
                if self.cfg.shm_wait_log_s > 0 and stalled >= (logged + 1) * self.cfg.shm_wait_log_s:
                    logged += 1
                    logs.log(eng.SHM_WAIT_MSG, level='WARNING', src='shm_broadcast.py:542', proc='EngineCore_DP0')
        threading.Thread(target=loop, name='sim-engine-monitor', daemon=True).start()

    # ------------------------------------------------------------------ head <-> worker
    def start_reader(self):
        def reader():
            while True:
                try:
                    line = self.conn.recv_line(None)
                except dist.PeerLost:
                    self.peer_lost()
                    return
                if line.startswith('PONG '):
                    with self.ping_cond:
                        self.pong_seen = max(self.pong_seen, int(line.split()[1]))
                        self.ping_cond.notify_all()
                else:
                    self.replies.put(line)
        threading.Thread(target=reader, name='sim-reader', daemon=True).start()
        self.start_pinger()

    def peer_lost(self):
        """The worker rank's process is gone (its sockets closed). Idle: nothing is logged until the next request,
        whose first collective fails at once. With a request in flight the engine core keeps waiting for its RPC
        reply (gauges frozen, /health 200) until the RPC timeout. (One recording on the GPU showed the rank-0
        worker's NCCL error at once then, the committed one did not: not logged here, and not relied upon.)"""
        engine = self.engine
        if engine.running > 0 and not engine.errored:
            engine.wedge_now()
        self.peer_gone = True
        with self.ping_cond:
            self.ping_cond.notify_all()

    def execute_model_rpc(self):
        """The first collective of a new request. A worker that is gone fails it at once (NCCL notices the closed
        peer): engine death. A frozen worker holds it until it answers or the RPC times out."""
        if self.conn is None:
            return
        if self.engine.errored:
            raise eng.EngineDead()
        if self.peer_gone:
            if self.engine.wedged.is_set():
                return   # the engine core is still waiting for the reply of the step in flight (hold_if_wedged)
            self.engine_dead('nccl')
            raise eng.EngineDead()
        with self.rpc_lock:
            if self.engine.errored:
                raise eng.EngineDead()
            deadline = time.monotonic() + self.cfg.rpc_timeout
            try:
                self.conn.send('EXEC')
            except OSError:
                pass
            while not self.engine.errored:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    if self.replies.get(timeout=min(left, 0.2)) == 'OK':
                        return
                except queue.Empty:
                    if self.peer_gone:
                        break
        self.engine_dead('nccl' if self.peer_gone else 'rpc_timeout')
        raise eng.EngineDead()

    def engine_dead(self, kind):
        """vLLM's engine death as 0.26.0 logged it, then `Shutting down` and exit VLLM_SIM_ENGINE_DEAD_EXIT_CODE (0)
        VLLM_SIM_WATCHDOG_S (0.5 s) later."""
        with self.dead_lock:
            if self.engine.errored:
                return
            self.engine.errored = True
        if kind == 'nccl':
            logs.error('WorkerProc hit an exception.', src='multiproc_executor.py:862', proc='Worker_TP0')
            logs.traceback_lines(['RuntimeError: ' + NCCL_REMOTE_EXITED], proc='Worker_TP0')
            logs.error('EngineCore encountered a fatal error.', src='core.py:1046', proc='EngineCore_DP0')
            logs.traceback_lines([WORKER_FAILED], proc='EngineCore_DP0')
        else:
            logs.error('EngineCore encountered a fatal error.', src='core.py:1046', proc='EngineCore_DP0')
            logs.traceback_lines(['  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", '
                                  'line 1, in collective_rpc', RPC_TIMEOUT], proc='EngineCore_DP0')
            if self.cfg.orphan_worker_s > 0:
                _orphan_worker(self.cfg.orphan_worker_s)
        logs.error('AsyncLLM output_handler failed.', src='async_llm.py:560')
        logs.traceback_lines([ENGINE_DEAD])
        self.engine.stop.set()
        with self.engine.cond:
            self.engine.cond.notify_all()

        def shutdown():
            time.sleep(max(0.0, self.cfg.watchdog_s))
            logs.uvicorn('Shutting down')
            logs.uvicorn('Finished server process [%d]' % os.getpid())
            sys.stdout.flush()
            os._exit(self.cfg.dead_exit_code)  # pylint: disable=protected-access
        threading.Thread(target=shutdown, name='sim-shutdown', daemon=True).start()


def _orphan_worker(seconds):
    """After a 300-s hang vLLM 0.26.0's head exited but its VLLM::Worker_TP0 process, stuck on the GPU, stayed
    alive in the head's process group, logging `Parent process exited, terminating worker queues` (notes Part 1
    §3 B). A forked child plays it for VLLM_SIM_ORPHAN_WORKER_S seconds (a container's end kills it earlier)."""
    pid = os.fork()
    if pid:
        return
    try:  # the child: no lock of the parent's threads is taken here (os.write only)
        os.closerange(3, 65536)   # not the API socket: the port must refuse connections once the head is gone
        parent = os.getppid()
        end = time.monotonic() + seconds
        while os.getppid() == parent and time.monotonic() < end:
            time.sleep(0.05)
        logs.PROC['name'] = 'Worker_TP0'
        logs.unlocked('Parent process exited, terminating worker queues', src='multiproc_executor.py:702')
        while time.monotonic() < end:
            time.sleep(0.2)
    finally:
        os._exit(0)  # pylint: disable=protected-access


def _fail(lines, head_wrapper, proc=None):
    logs.traceback_lines(lines, proc=proc)
    if head_wrapper:
        logs.traceback_lines([ENGINE_INIT_FAILED])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)  # pylint: disable=protected-access


def _sleep(seconds):
    if seconds > 0:
        time.sleep(seconds)


def _mem_free_gib():
    """MemFree of VLLM_SIM_MEMINFO (default /proc/meminfo) in GiB: on GB10 CUDA's free memory leaves
    out the page cache (seed 000: 4.75/119.67 GiB free with 110 GiB in cache), so not MemAvailable."""
    try:
        with open(os.environ.get('VLLM_SIM_MEMINFO') or '/proc/meminfo') as handle:
            for line in handle:
                if line.startswith('MemFree:'):
                    return int(line.split()[1]) / (1024.0 * 1024.0)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _install_signals():
    def on_term(signum, _frame):
        # No logs.log here: the main thread may hold the log lock when the signal lands.
        logs.unlocked('Shutting down', uvicorn_style=True)
        logs.unlocked('Received signal %d; exiting.' % signum, src='launcher.py:120')
        os._exit(0)  # pylint: disable=protected-access
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)


def _check_failed(exc, head_wrapper=False, proc=None):
    """A start-up check failed: vLLM's traceback lines, the simulator's note, exit 1."""
    if exc.note:
        logs.raw('vllm-sim: start-up check: %s' % exc.note, sys.stderr)
    _fail([line for text in exc.lines for line in text.split('\n')], head_wrapper, proc=proc)


def _startup_checks(parser, cfg):
    """What vLLM checks before its engine starts (checks.py): env names, the model, writable caches."""
    if parser.sim_schema is not None:
        for name in checks.unknown_env(set(parser.sim_schema.get('env') or [])):
            if cfg.fail_on_environ_validation:
                _fail(['ValueError: ' + checks.UNKNOWN_ENV % name], False)
            logs.log(checks.UNKNOWN_ENV % name, level='WARNING', src='envs.py:1744')
    try:
        cfg.model_dir = checks.resolve_model(cfg.model, cfg.revision)
        rule = eng.use_tokenizer(cfg.model_dir and checks.container_path(cfg.model_dir))
        if cfg.model_dir and rule != eng.DEFAULT_COUNT_RULE:
            logs.log('vllm-sim: prompt tokens counted by %s' % rule)
        for what, path in checks.cache_dirs(cfg.compilation_config, cfg.enforce_eager):
            checks.check_writable(what, path)
    except checks.StartupError as exc:
        _check_failed(exc)


def _check_weights(cfg, is_head, proc):
    """The loader's view of the weights (at `Starting to load model`): the shard count, or exit 1."""
    if cfg.model_dir is None:
        return cfg.shards
    try:
        files = checks.weight_files(cfg.model_dir, cfg.model, cfg.load_format)
    except checks.StartupError as exc:
        _check_failed(exc, is_head, proc=proc)
        return cfg.shards   # not reached: _check_failed ends the process
    return cfg.shards if os.environ.get('VLLM_SIM_SHARDS') else (len(files) or cfg.shards)


def run_serve(parser, args, version):
    logs.raw(STAND_IN_NOTICE)
    logs.raw('vllm-sim: argv: vllm serve %s' % ' '.join(sys.argv[2:] if len(sys.argv) > 2 else []))
    _install_signals()
    cfg = Config(args)
    is_head = cfg.node_rank == 0 and not cfg.headless
    logs.PROC['name'] = 'APIServer' if not cfg.headless else 'Worker_TP%d' % cfg.node_rank
    if cfg.fail and cfg.fail not in FAILURES:
        logs.error('vllm-sim: unknown VLLM_SIM_FAIL=%r (known: %s)' % (cfg.fail, ', '.join(FAILURES)))
        return 2
    if cfg.scheduler not in eng.SCHEDULERS:
        logs.error('vllm-sim: unknown VLLM_SIM_SCHEDULER=%r (known: %s)' % (cfg.scheduler, ', '.join(eng.SCHEDULERS)))
        return 2
    if parser.sim_schema_problem:
        logs.raw('vllm-sim: %s; the serve flags are the simulator\'s built-in list' % parser.sim_schema_problem, sys.stderr)
    if not cfg.headless:
        logs.log('vLLM server version %s, serving model %s' % (version, cfg.model), src='api_server.py:1895')
    logs.log('non-default args: %s' % non_default_args(parser, args), src='utils.py:328')
    _startup_checks(parser, cfg)

    world = cfg.tp * cfg.pp
    local_world = max(1, world // cfg.nnodes)
    gpus = _env_i('VLLM_SIM_GPUS_PER_NODE', 1)
    if cfg.nnodes > 1 and cfg.backend not in (None, 'mp', 'uni', 'external_launcher'):
        _fail(['ValueError: nnodes > 1 can only be set when distributed executor backend is mp, uni or external_launcher.'], False)
    if local_world > gpus:
        _fail(["ValueError: World size (%d) is larger than the number of available GPUs (%d) in this node. If this is "
               "intentional and you are using:\n- ray, set '--distributed-executor-backend ray'.\n- multiprocessing, "
               "set '--nnodes' appropriately." % (world, gpus)], False)

    store = None
    if cfg.nnodes > 1 and cfg.node_rank > 0 and not cfg.headless:
        # seed 000 failure #5: without --headless rank 1 also tries to host the TCPStore (before anything else).
        try:
            store = dist.listen_store(cfg.master_port)
        except dist.DistError as exc:
            _fail([str(exc)], False, proc='Worker_TP%d' % (cfg.node_rank * local_world))
    server = None
    if not cfg.headless:
        try:
            server = api.make_server(cfg.host, cfg.port, None)
        except OSError as exc:
            _fail(['OSError: [Errno %s] %s' % (exc.errno, exc.strerror or 'Address already in use')], False)
    state = State(cfg, version)
    if server is not None:
        server.RequestHandlerClass = api.make_handler(state)

    proc = 'EngineCore_DP0' if not cfg.headless else None
    if not cfg.headless:
        logs.log('Initializing a V1 LLM engine (v%s) with config: model=%r, speculative_config=%s, tokenizer=%r, '
                 'tokenizer_mode=%s, revision=%s, trust_remote_code=%s, max_seq_len=%d, load_format=%s, '
                 'tensor_parallel_size=%d, pipeline_parallel_size=%d, disable_custom_all_reduce=%s, enforce_eager=%s, '
                 'kv_cache_dtype=%s, served_model_name=%s, enable_prefix_caching=%s, enable_chunked_prefill=%s, '
                 'compilation_config=%s'
                 % (version, cfg.model, getattr(args, 'speculative_config', None), cfg.model,
                    getattr(args, 'tokenizer_mode', None) or 'auto', cfg.revision, bool(getattr(args, 'trust_remote_code', None)),
                    cfg.max_model_len, cfg.load_format or 'auto', cfg.tp, cfg.pp,
                    bool(getattr(args, 'disable_custom_all_reduce', None)), cfg.enforce_eager, cfg.kv_cache_dtype,
                    cfg.served_names[0], cfg.prefix_caching, getattr(args, 'enable_chunked_prefill', None) is not False,
                    cfg.compilation_config or {}),
                 src='core.py:93', proc=proc)
    _sleep(cfg.t_init)
    if cfg.nnodes > 1:
        if cfg.headless:
            logs.log('Launching vLLM (v%s) headless multiproc executor, with head node address %s for torch.distributed '
                     'process group.' % (version, cfg.master_addr), src='serve.py:280')
        else:
            logs.log('DP group leader: node_rank=%d, node_rank_within_dp=%d, master_addr=%s, mq_connect_ip=%s (local), '
                     'world_size=%d, local_world_size=%d' % (cfg.node_rank, cfg.node_rank, cfg.master_addr,
                                                             os.environ.get('VLLM_HOST_IP', cfg.master_addr), world,
                                                             local_world), src='multiproc_executor.py:120', proc=proc)
    if cfg.fail == 'shm_ring' or (os.environ.get('VLLM_WORKER_MULTIPROC_METHOD') == 'fork'
                                  and os.environ.get('VLLM_SIM_FORK_IS_FATAL', '1') != '0'):
        _fail([SHM_NOT_FOUND % 'dee74a05', '', 'During handling of the above exception, another exception occurred:', '',
               SHM_ATTR], is_head, proc='Worker_TP%d' % cfg.node_rank)

    rank = cfg.node_rank * local_world
    init_method = 'tcp://%s:%d' % (cfg.master_addr, cfg.master_port)
    logs.log('world_size=%d rank=%d local_rank=0 distributed_init_method=%s backend=nccl' % (world, rank, init_method),
             src='parallel_state.py:1208', proc='Worker_TP%d' % rank)
    if cfg.nnodes > 1:
        try:
            if cfg.headless:
                state.conn = dist.connect_head(cfg.master_addr, cfg.master_port, cfg.rendezvous_timeout)
            else:
                if store is None:
                    store = dist.listen_store(cfg.master_port)
                state.conn = dist.accept_worker(store, cfg.rendezvous_timeout, cfg.nnodes)
        except dist.DistError as exc:
            _fail([str(exc)], is_head, proc='Worker_TP%d' % rank)
    if not cfg.headless:   # rank 0 only (the headless worker's log has no such line: notes Part 1 §1)
        logs.log('vLLM is using nccl==%s' % NCCL_VERSION, src='pynccl.py:103', proc='Worker_TP%d' % rank)

    requested = cfg.total_gib * cfg.gpu_mem_util
    free = None
    if cfg.fail == 'free_memory':
        free = _env_f('VLLM_SIM_FREE_GIB', max(1.0, requested - 12.5))
    elif '1' in (os.environ.get('VLLM_SIM_CHECK_MEMFREE', '0'), os.environ.get('VLLM_SIM_CHECK_MEMAVAILABLE', '0')):
        # VLLM_SIM_CHECK_MEMAVAILABLE: the old name of the switch; it checks MemFree too.
        mem_free = _mem_free_gib()
        if mem_free is not None and mem_free < requested:
            free = mem_free
    if free is not None:
        _fail([FREE_MEMORY % (free, cfg.total_gib, cfg.gpu_mem_util, requested)], is_head, proc='Worker_TP%d' % rank)

    logs.log('Starting to load model %s...' % cfg.model, src='gpu_model_runner.py:2602', proc='Worker_TP%d' % rank)
    t_load0 = time.monotonic()
    n = max(1, _check_weights(cfg, is_head, 'Worker_TP%d' % rank))
    crash_at = n // 2 if cfg.fail == 'load_crash' else None
    logs.raw('(Worker_TP%d pid=%d) Loading safetensors checkpoint shards:   0%% Completed | 0/%d [00:00<?, ?it/s]'
             % (rank, os.getpid(), n), sys.stderr)
    for i in range(1, n + 1):
        _sleep(cfg.t_load / n)
        if crash_at is not None and i > crash_at:
            logs.error('Worker proc VllmWorker-%d died unexpectedly (exit code: -9), shutting down executor.' % rank,
                       src='multiproc_executor.py:540', proc=proc)
            _fail(['RuntimeError: Worker failed with error \'killed during weight loading (vllm-sim load_crash)\''],
                  is_head, proc=proc)
        logs.raw('(Worker_TP%d pid=%d) Loading safetensors checkpoint shards: %3d%% Completed | %d/%d'
                 % (rank, os.getpid(), int(100 * i / n), i, n), sys.stderr)
    load_s = time.monotonic() - t_load0
    logs.log('Loading weights took %.2f seconds' % load_s, src='default_loader.py:267', proc='Worker_TP%d' % rank)
    logs.log('Model loading took %.4f GiB memory and %.6f seconds' % (cfg.weights_gib, load_s + cfg.t_init),
             src='gpu_model_runner.py:2634', proc='Worker_TP%d' % rank)

    if cfg.headless:
        _sleep(cfg.t_profile)
        _log_kv_reserved(cfg, rank)
        # vLLM 0.26.0's headless worker logs its graph capture, not the KV-cache sizing (notes Part 1 §1)
        if not cfg.enforce_eager:
            _sleep(cfg.t_graphs)
            logs.log('Graph capturing finished in %.0f secs, took %.2f GiB' % (cfg.t_graphs, 0.61),
                     src='gpu_model_runner.py:3450', proc='Worker_TP%d' % rank)
        try:
            state.conn.send('LOADED')
        except OSError:
            pass
        return _worker_loop(state)

    t_engine0 = time.monotonic()
    if state.conn is not None:
        try:
            line = None
            deadline = time.monotonic() + cfg.rendezvous_timeout
            while line != 'LOADED':
                line = state.conn.recv_line(max(0.01, deadline - time.monotonic()))
                if line is None:
                    raise dist.PeerLost()
        except dist.PeerLost:
            logs.error('Remote rank 1 did not finish loading (connection to %s lost).' % init_method,
                       src='multiproc_executor.py:560', proc=proc)
            _fail([ENGINE_INIT_FAILED], False)
    _sleep(cfg.t_profile)
    if not _log_kv_reserved(cfg, 0):   # a given KV size is not profiled: no "Available KV cache memory"
        logs.log('Available KV cache memory: %.2f GiB' % cfg.kv_gib, src='gpu_worker.py:298', proc='Worker_TP0')
    conc = cfg.kv_tokens / float(cfg.max_model_len)
    one_line = os.environ.get('VLLM_SIM_KV_LOG_FORM', '') == 'one' or (
        os.environ.get('VLLM_SIM_KV_LOG_FORM', '') != 'two' and _version_tuple(version) >= (0, 33))
    if one_line:
        logs.log('GPU KV cache size: {:,} tokens, Maximum concurrency for {:,} tokens per request: {:.2f}x'
                 .format(cfg.kv_tokens, cfg.max_model_len, conc), src='kv_cache_utils.py:1290', proc=proc)
    else:
        logs.log('GPU KV cache size: {:,} tokens'.format(cfg.kv_tokens), src='kv_cache_utils.py:1087', proc=proc)
        logs.log('Maximum concurrency for {:,} tokens per request: {:.2f}x'.format(cfg.max_model_len, conc),
                 src='kv_cache_utils.py:1091', proc=proc)
    if not cfg.enforce_eager:
        steps = 5
        for i in range(steps + 1):
            logs.raw('(Worker_TP0 pid=%d) Capturing CUDA graphs (decode, FULL): %3d%%|%s| %d/%d'
                     % (os.getpid(), 100 * i // steps, '#' * i + ' ' * (steps - i), i, steps), sys.stderr)
            if i < steps:
                _sleep(cfg.t_graphs / steps)
        logs.log('Graph capturing finished in %.0f secs, took %.2f GiB' % (cfg.t_graphs, 0.61),
                 src='gpu_model_runner.py:3450', proc='Worker_TP0')
    logs.log('init engine (profile, create kv cache, warmup model) took %.2f s' % (time.monotonic() - t_engine0),
             src='core.py:210', proc=proc)
    _sleep(cfg.t_api)
    url_host = cfg.host if cfg.host else '0.0.0.0'
    logs.log("Supported tasks: ['generate']", src='api_server.py:1620')
    logs.log('Starting vLLM server on http://%s:%d' % (url_host, cfg.port), src='api_server.py:1900')
    logs.log('Available routes are:', src='launcher.py:34')
    for route, methods in (('/health', 'GET'), ('/metrics', 'GET'), ('/version', 'GET'), ('/v1/models', 'GET'),
                           ('/v1/chat/completions', 'POST'), ('/v1/completions', 'POST')):
        logs.log('Route: %s, Methods: %s' % (route, methods), src='launcher.py:42')
    logs.uvicorn('Started server process [%d]' % os.getpid())
    logs.uvicorn('Waiting for application startup.')
    if state.conn is not None:
        state.start_reader()
    # As vLLM: uvicorn's Server.startup logs this at the end of the app's lifespan startup and only then calls
    # loop.create_server on the socket vLLM bound (create_server_socket binds, never listens), whose _start_serving
    # calls listen(): the line comes first, then the port accepts.
    logs.uvicorn('Application startup complete.')
    server.server_activate()
    state.start_monitor()
    if cfg.fail != 'hang':   # a hung engine core never runs a step
        state.engine.start()
    _start_stats(state)
    server.serve_forever(poll_interval=0.2)
    return 0


KV_RESERVED = ('Initial free memory %.2f GiB, reserved %.1f GiB memory for KV Cache as specified by kv_cache_memory_bytes '
               'config and skipped memory profiling. This does not respect the gpu_memory_utilization config. Only use '
               'kv_cache_memory_bytes config when you want manual control of KV cache memory size. If OOM\'ed, check the '
               'difference of initial free memory between the current run and the previous run where kv_cache_memory_bytes '
               'is suggested and update it correspondingly.')


def _log_kv_reserved(cfg, rank):
    """With --kv-cache-memory-bytes vLLM 0.26.0 logs this on both ranks instead of profiling (recorded startup);
    True when it did."""
    size = getattr(cfg.args, 'kv_cache_memory_bytes', None)
    if not size:
        return False
    logs.log(KV_RESERVED % (cfg.total_gib - cfg.weights_gib, float(size) / (1 << 30)), src='gpu_worker.py:479',
             proc='Worker_TP%d' % rank)
    return True


def _version_tuple(text):
    parts = []
    for p in text.split('.')[:2]:
        digits = ''.join(c for c in p if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def _worker_loop(state):
    cfg = state.cfg
    if cfg.fail == 'worker_die':
        def die():
            time.sleep(cfg.fail_after)
            logs.error('Worker proc VllmWorker-1 died unexpectedly (exit code: -9), shutting down executor.',
                       src='multiproc_executor.py:540')
            os._exit(1)  # pylint: disable=protected-access
        threading.Thread(target=die, name='sim-worker-die', daemon=True).start()
    while True:
        try:
            line = state.conn.recv_line(None)
        except dist.PeerLost:
            break
        if line == 'EXEC' or line.startswith('PING '):
            try:
                state.conn.send('OK' if line == 'EXEC' else 'PONG ' + line[5:])
            except OSError:
                break
    msg = state.conn.describe()
    start = time.monotonic()
    while True:
        logs.raw('(Worker_TP1 pid=%d) %s' % (os.getpid(), msg), sys.stderr)
        logs.raw('(Worker_TP1 pid=%d) [PG ID 0 PG GUID 0 Rank 1] Failed to check the "should dump" flag on TCPStore, '
                 '(maybe TCPStore server has shut down too early), with error: Failed to recv, got 0 bytes. Connection '
                 'was likely closed. Did the remote server shutdown or crash?' % os.getpid(), sys.stderr)
        if 0 <= cfg.orphan_exit_s <= time.monotonic() - start:
            logs.error('vllm-sim: head rank gone; headless worker exiting after %.1f s.' % cfg.orphan_exit_s)
            os._exit(1)  # pylint: disable=protected-access
        wait = 1.0 if cfg.orphan_exit_s < 0 else min(1.0, max(0.0, cfg.orphan_exit_s - (time.monotonic() - start)))
        time.sleep(wait)


def _start_stats(state):
    cfg = state.cfg
    if cfg.disable_log_stats or cfg.stats_interval <= 0:
        return

    def loop():
        engine = state.engine
        last_p, last_g, last_t = engine.prompt_tokens, engine.generation_tokens, time.monotonic()
        while not engine.stop.wait(cfg.stats_interval):
            now = time.monotonic()
            p, g = engine.prompt_tokens, engine.generation_tokens
            if (p == last_p and g == last_g and engine.running == 0) or engine.frozen is not None:
                # idle, or the engine core is stuck in a step: no stats line (notes Part 1 §3 B, §4)
                continue
            dt = max(1e-6, now - last_t)
            hit = 100.0 * engine.prefix_hits / engine.prefix_queries if engine.prefix_queries else 0.0
            logs.log('Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, '
                     'Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%'
                     % ((p - last_p) / dt, (g - last_g) / dt, engine.running, engine.waiting,
                        100.0 * engine.kv_usage(), hit), src='loggers.py:123')
            if cfg.spec_k:
                drafts, draft_tokens, per_pos = engine.spec_counts()
                if drafts:
                    logs.log('SpecDecoding metrics: Mean acceptance length: %.2f, Accepted: %d tokens, Drafted: %d tokens, '
                             'Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%'
                             % (1 + sum(per_pos) / float(drafts), sum(per_pos), draft_tokens,
                                ', '.join('%.3f' % (v / float(drafts)) for v in per_pos),
                                100.0 * sum(per_pos) / max(1, draft_tokens)), src='metrics.py:90')
            last_p, last_g, last_t = p, g, now
    threading.Thread(target=loop, name='sim-stats', daemon=True).start()
