# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Token scheduler, canned replies and metrics (simulator: a stand-in for vLLM, test code only).

Scheduler (default, VLLM_SIM_SCHEDULER=step): one engine-core thread runs engine steps, as vLLM V1's
`Scheduler.schedule()` (vllm/v1/core/sched/scheduler.py) does: each step has a token budget of
--max-num-batched-tokens; the running requests are served first, in the order they were admitted (a decoding
request takes 1 token, a prefilling one min(remaining prompt, budget left, --long-prefill-token-threshold when > 0));
then, only while budget is left and fewer than --max-num-seqs run, waiting requests are admitted first come first
served with the same cap. A step lasts (decode part) + (prefill part): 1/VLLM_SIM_TOKENS_PER_S when it carries a
decode token (or its tokens / VLLM_SIM_AGG_TOKENS_PER_S when that is larger), plus its prompt tokens /
VLLM_SIM_PREFILL_TOKENS_PER_S. The first token comes out of the step that finishes the prefill. Steps follow an
absolute clock (no drift). README.md, "Scheduler and pacing", has where this was checked against real vLLM.

VLLM_SIM_SCHEDULER=per_request keeps the simulator's former model (tests only: it shows the conformance checks fail
without the shared budget): every request prefilled in its own thread, chunk by chunk, and its tokens paced by
absolute per-stream deadlines (1/VLLM_SIM_TOKENS_PER_S apart, and the next free slot of a global clock spaced
1/agg apart when VLLM_SIM_AGG_TOKENS_PER_S > 0).
"""


import collections
import hashlib
import json
import math
import os
import re
import threading
import time

# --------------------------------------------------------------------------- canned replies
FIXED_ANSWERS = (
    ('what is 2+2? answer with one word.', 'Four'),
    ('what is the capital of france? answer with one word.', 'Paris'),
    ('reply with exactly: ok', 'OK'),
    ('count from 1 to 5.', '1, 2, 3, 4, 5'),
)
FILLER = ('The quick brown fox jumps over the lazy dog while the engineers measure decode speed on two '
          'nodes and the cluster keeps serving requests with steady latency and clean English output').split()
REASONING = 'The user asks a short question. I will answer it directly and concisely.'
CJK = '我们 的 模型 在 这个 问题 上 给出 了 答案 。 然后 继续 生成 中文 文本 而 不是 英文 回答'.split()
LEAK = ('</think>', '<｜tool▁calls▁begin｜>', '<｜tool▁call▁begin｜>', 'function', '<｜tool▁sep｜>', 'get_weather',
        '<｜tool▁call▁end｜>', '<｜tool▁calls▁end｜>')
GARBLE_MODES = ('cjk', 'repeat', 'leak', 'empty')
MARKER = '[[vllm-sim:garble='
PROMPT_TOKENS_MARKER = '[[vllm-sim:prompt_tokens='
SCHEDULERS = ('step', 'per_request')
# after a stall this long (a frozen or lost rank, a wedge, an overloaded host) the step clock restarts from now instead
# of catching up with a burst of steps
CLOCK_RESET_S = 0.25
SHM_WAIT_MSG = ('No available shared memory broadcast block found in 60 seconds. This typically happens when some '
                'processes are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization).')


def words_to_tokens(words):
    return [w if i == 0 else ' ' + w for i, w in enumerate(words)]


# Prompt token counting. vLLM counts with the model's tokenizer; the simulator does the same when the model directory
# holds a tokenizer.json (use_tokenizer, called by the start-up checks): through the `tokenizers` library when it is
# importable, else, for a WordLevel model with the Whitespace pre-tokenizer only, by that pre-tokenizer's rule (one token
# per run of word characters or of other non-space characters: \w+|[^\w\s]+; WordLevel maps each piece to one id, an
# unknown piece to its unk token). Any other tokenizer without the library, or no tokenizer.json: ceil(chars / 4).
WHITESPACE_PIECE = re.compile(r'\w+|[^\w\s]+')
DEFAULT_COUNT_RULE = 'ceil(chars/4)'
_COUNTER = {'count': None, 'rule': DEFAULT_COUNT_RULE}


def use_tokenizer(model_dir):
    """Count prompt tokens like model_dir/tokenizer.json from now on (see above); returns the rule in use."""
    _COUNTER.update(count=None, rule=DEFAULT_COUNT_RULE)
    path = os.path.join(model_dir, 'tokenizer.json') if model_dir else ''
    if not path or not os.path.isfile(path):
        return _COUNTER['rule']
    try:
        from tokenizers import Tokenizer  # pylint: disable=import-outside-toplevel
    except ImportError:
        Tokenizer = None
    if Tokenizer is not None:
        tok = Tokenizer.from_file(path)
        _COUNTER.update(count=lambda text: len(tok.encode(text, add_special_tokens=False).ids), rule='tokenizers: %s' % path)
        return _COUNTER['rule']
    with open(path) as handle:
        spec = json.load(handle)
    if (spec.get('model') or {}).get('type') == 'WordLevel' and (spec.get('pre_tokenizer') or {}).get('type') == 'Whitespace' \
            and not spec.get('normalizer'):
        _COUNTER.update(count=lambda text: len(WHITESPACE_PIECE.findall(text)), rule='WordLevel+Whitespace rule: %s' % path)
    return _COUNTER['rule']


def count_prompt_tokens(text):
    count = _COUNTER['count']
    if count is not None:
        return max(1, count(text))
    return max(1, int(math.ceil(len(text) / 4.0)))


def base_answer(prompt):
    low = ' '.join(prompt.lower().split())
    for key, answer in FIXED_ANSWERS:
        if key in low:
            return answer.split(), True
    return None, False


def prompt_tokens_override(prompt):
    """`[[vllm-sim:prompt_tokens=N]]` in a prompt: count it as N prompt tokens (a long prefill without sending N tokens)."""
    idx = (prompt or '').find(PROMPT_TOKENS_MARKER)
    if idx < 0:
        return None
    value = prompt[idx + len(PROMPT_TOKENS_MARKER):].split(']]', 1)[0].strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def garble_mode_for(prompt, env_mode):
    idx = prompt.find(MARKER)
    if idx >= 0:
        mode = prompt[idx + len(MARKER):].split(']]', 1)[0].strip()
        if mode in GARBLE_MODES:
            return mode
    return env_mode if env_mode in GARBLE_MODES else None


def content_tokens(prompt, max_tokens, garble, default_len):
    """(tokens, finish_reason) for a plain text reply."""
    answer, fixed = base_answer(prompt)
    if garble == 'empty':
        return [], 'stop'
    if garble == 'cjk':
        words = (answer or FILLER[:3]) + [CJK[i % len(CJK)] for i in range(max(24, max_tokens or 0))]
        toks = words_to_tokens(words)
    elif garble == 'repeat':
        first = (answer or FILLER[:3])
        toks = words_to_tokens(first + ['the'] * max(40, max_tokens or 0))
    elif garble == 'leak':
        toks = words_to_tokens(answer or FILLER[:6]) + list(LEAK)
    elif fixed:
        toks = words_to_tokens(answer)
    else:
        n = max_tokens if max_tokens is not None else default_len
        toks = words_to_tokens([FILLER[i % len(FILLER)] for i in range(n)])
        if max_tokens is None:
            return toks, 'stop'
    if max_tokens is not None and len(toks) > max_tokens:
        return toks[:max_tokens], 'length'
    if max_tokens is not None and not fixed and garble is None:
        return toks, 'length'
    return toks, 'stop'


def tool_arguments(tool, prompt):
    params = ((tool.get('function') or {}).get('parameters') or {})
    props = params.get('properties') or {}
    out = {}
    for name, schema in props.items():
        schema = schema or {}
        kind = schema.get('type')
        if schema.get('enum'):
            out[name] = schema['enum'][0]
        elif kind in ('integer', 'number'):
            out[name] = 1
        elif kind == 'boolean':
            out[name] = True
        elif kind == 'array':
            out[name] = []
        elif kind == 'object':
            out[name] = {}
        elif name.lower() in ('city', 'location', 'place'):
            out[name] = 'Paris' if 'paris' in prompt.lower() else 'Berlin'
        else:
            out[name] = 'example'
    return json.dumps(out)


def split_pieces(text, size=4):
    return [text[i:i + size] for i in range(0, len(text), size)] or ['']


# --------------------------------------------------------------------------- metrics
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0)
ITER_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
               960.0, 1920.0, 7680.0)


class Histogram:
    def __init__(self, buckets):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0.0
        self.count = 0

    def observe(self, value):
        for i, edge in enumerate(self.buckets):
            if value <= edge:
                self.counts[i] += 1
        self.total += value
        self.count += 1

    def render(self, name, labels):
        lines = []
        for edge, cnt in zip(self.buckets, self.counts):
            lines.append('%s_bucket{%s,le="%s"} %s' % (name, labels, float(edge), float(cnt)))
        lines.append('%s_bucket{%s,le="+Inf"} %s' % (name, labels, float(self.count)))
        lines.append('%s_count{%s} %s' % (name, labels, float(self.count)))
        lines.append('%s_sum{%s} %r' % (name, labels, self.total))
        return lines


class EngineDead(Exception):
    pass


class Request:
    """One request inside the engine. plan_fn() -> (plan, finish) is called when the request is admitted (the plan is
    the list of (kind, text) tokens the API layer sends; max(1, len(plan)) tokens are generated)."""

    def __init__(self, rid, prompt_text, prompt_tokens, plan_fn, t_arrive, ready_at):
        self.rid = rid
        self.prompt_text = prompt_text
        self.prompt_tokens = prompt_tokens
        self.plan_fn = plan_fn
        self.t_arrive = t_arrive
        self.ready_at = ready_at      # when the engine core sees it (arrival + VLLM_SIM_TTFT_BASE_S)
        self.plan = []
        self.finish = 'stop'
        self.n_out = 1
        self.computed = 0             # prompt tokens prefilled so far
        self.emitted = 0              # tokens generated so far
        self.events = collections.deque()   # (token index, last) for the API thread
        self.admitted_step = None     # the step that admitted it (step scheduler)
        self.first_step = None        # the step that returned its first token
        self.t_first = None           # monotonic time of that step's end

    def make_plan(self):
        try:
            self.plan, self.finish = self.plan_fn()
        except Exception:  # pylint: disable=broad-except
            self.plan, self.finish = [], 'stop'
        self.n_out = max(1, len(self.plan))


class Engine:
    """Admission (max-num-seqs), the engine-step scheduler (or the former per-request pacing) and counters."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.scheduler = getattr(cfg, 'scheduler', 'step') or 'step'
        # step scheduler: vLLM V1's token budget per step and its per-request prefill cap (0: none)
        self.budget = max(1, int(getattr(cfg, 'max_num_batched_tokens', 0) or getattr(cfg, 'prefill_chunk_tokens', 8192)))
        self.threshold = int(getattr(cfg, 'long_prefill_token_threshold', 0) or 0)
        self.running_list = []        # admitted requests, in admission order (vLLM's self.running)
        self.waiting_list = collections.deque()   # FCFS (vLLM's self.waiting): seen by a step, not admitted
        # submitted, not yet seen by a step: not in the waiting gauge (vLLM publishes its scheduler stats after
        # schedule(), which admits a request that fits at once; only a request left waiting shows there)
        self.arrivals = collections.deque()
        self.steps = 0
        self.clock = 0.0              # end of the last step (absolute monotonic time)
        # time the step clock dropped after stalls (CLOCK_RESET_S): steps this engine did not run although requests
        # were there; tests that compare a rate with the configured one read it (GET /sim/clock)
        self.clock_resets = 0
        self.clock_dropped_s = 0.0
        # tests: one entry per step {'step', 'start', 'end', 'running', 'waiting', 'scheduled': {rid: (kind, tokens)}}
        self.step_log = [] if getattr(cfg, 'log_steps', False) else None
        self.cond = threading.Condition()
        self.clock_lock = threading.Lock()
        self.running = 0
        self.waiting = 0
        self.running_tokens = {}
        self.next_global = 0.0
        self.errored = False
        self.stop = threading.Event()
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.seen_prompts = set()
        self.success = {'stop': 0, 'length': 0, 'abort': 0, 'tool_calls': 0}
        self.ttft = Histogram(TTFT_BUCKETS)
        self.iteration = Histogram(ITER_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)
        self.spec_tokens = 0
        self.req_seq = 0
        self.pending_prompt = {}  # rid -> prompt tokens, credited by the step that returns the request's first token
        self.wedged = threading.Event()
        self.wedge_at_tokens = getattr(cfg, 'wedge_after_tokens', None)
        self.frozen = None  # (running, waiting, kv usage) published before the engine stalled (wedge or frozen rank)
        self.stalled_at = None  # monotonic time the current stall began (None while steps complete)
        self.peer_gate = None  # callable() before every step: blocks while the remote rank is frozen (serve.py)

    # ------------------------------------------------------------------ requests (both schedulers)
    def submit(self, prompt_text, prompt_tokens, plan_fn, t_arrive=None):
        """A new request. Step scheduler: it joins the waiting queue (the engine core sees it VLLM_SIM_TTFT_BASE_S
        after arrival) and is admitted by a step. Per-request model: blocks until a running slot is free (admit)."""
        t_arrive = time.monotonic() if t_arrive is None else t_arrive
        if self.scheduler == 'per_request':
            rid = self.admit(prompt_tokens)
            req = Request(rid, prompt_text, prompt_tokens, plan_fn, t_arrive, t_arrive)
            req.make_plan()
            return req
        with self.cond:
            if self.errored or self.stop.is_set():
                raise EngineDead()
            self.req_seq += 1
            req = Request(self.req_seq, prompt_text, prompt_tokens, plan_fn, t_arrive, t_arrive + self.cfg.ttft_base_s)
            self.arrivals.append(req)
            self.cond.notify_all()
            return req

    def outputs(self, req):
        """Yields the index of every token generated for req, when it is generated; EngineDead when the engine dies."""
        if self.scheduler == 'per_request':
            return self._per_request_outputs(req)
        return self._step_outputs(req)

    def _step_outputs(self, req):
        while True:
            with self.cond:
                while not req.events and not self.stop.is_set():
                    self.cond.wait(0.5)
                if not req.events:
                    raise EngineDead()
                idx, last = req.events.popleft()
            yield idx
            if last:
                return

    def _per_request_outputs(self, req):
        """The former model: the request's own prefill, then its tokens paced by absolute per-stream deadlines."""
        self.hold_if_wedged()
        due = self.prefill(req.rid, req.prompt_text, req.prompt_tokens, req.t_arrive)
        per = self.cfg.tokens_per_s
        for idx in range(req.n_out):
            slot = self.take_slot(due)
            self.sleep_until(slot)
            self.hold_if_wedged()
            if req.t_first is None:
                req.t_first = time.monotonic()
            yield idx
            self.token_emitted(req.rid)
            due = slot + (1.0 / per if per > 0 else 0.0)

    def discard(self, req):
        """The request leaves the engine (finished, aborted or failed); a second call changes nothing."""
        if self.scheduler == 'per_request':
            self.release(req.rid)
            return
        with self.cond:
            if req in self.arrivals:
                self.arrivals.remove(req)
            if req in self.waiting_list:
                self.waiting_list.remove(req)
            if req in self.running_list:
                self.running_list.remove(req)
            self.running_tokens.pop(req.rid, None)
            self._publish_counts_locked()
            self.cond.notify_all()

    def concurrency(self):
        """Requests in the engine for the garble-under-concurrency rule: running and queued (step scheduler; a burst
        that arrives together is one batch), running (per-request model)."""
        if self.scheduler == 'per_request':
            return self.running
        return self.running + self.waiting + len(self.arrivals)

    def load(self):
        """Requests in flight (/load): running, waiting and not yet seen by a step."""
        return self.running + self.waiting + len(self.arrivals)

    def _publish_counts_locked(self):
        self.running = len(self.running_list)
        self.waiting = len(self.waiting_list)

    # ------------------------------------------------------------------ the engine core (step scheduler)
    def start(self):
        """Start the engine-core thread (step scheduler only; the server calls it once serving)."""
        if self.scheduler != 'step':
            return
        threading.Thread(target=self._loop, name='sim-engine-core', daemon=True).start()

    def _ready_locked(self, now):
        return bool(self.running_list or self.waiting_list) or bool(self.arrivals and self.arrivals[0].ready_at <= now)

    def _loop(self):
        try:
            while not self.stop.is_set():
                idle = False
                with self.cond:
                    while not self.stop.is_set():
                        now = time.monotonic()
                        if self.wedged.is_set() or self._ready_locked(now):
                            break
                        idle = True
                        wait = 0.5
                        if self.arrivals:
                            wait = min(wait, max(0.0005, self.arrivals[0].ready_at - now))
                        self.cond.wait(wait)
                    if self.stop.is_set():
                        break
                    batch = {} if self.wedged.is_set() else self._schedule_locked(time.monotonic())
                # a wedged engine never returns from its step; a frozen rank holds it (peer_gate)
                self.hold_if_wedged()
                if not batch:
                    continue
                now = time.monotonic()
                start = self.clock if not idle and 0 <= now - self.clock <= CLOCK_RESET_S else now
                if not idle and self.clock and now - self.clock > CLOCK_RESET_S:
                    with self.clock_lock:
                        self.clock_resets += 1
                        self.clock_dropped_s += now - self.clock
                end = start + self._step_seconds(batch)
                self.sleep_until(end)
                self.clock = end
                with self.cond:
                    self._complete_locked(batch, end)
                    self.cond.notify_all()
        except EngineDead:
            pass
        finally:
            with self.cond:
                self.cond.notify_all()

    def _schedule_locked(self, now):
        """vLLM V1 Scheduler.schedule(): running requests first (in order), then waiting ones while budget is left.
        -> {rid: (req, kind, tokens)} in scheduling order; KV blocks are allocated here (the usage gauge rises)."""
        budget = self.budget
        thr = self.threshold
        batch = collections.OrderedDict()
        while self.arrivals and self.arrivals[0].ready_at <= now:
            self.waiting_list.append(self.arrivals.popleft())
        for req in list(self.running_list):
            if budget <= 0:
                break
            left = req.prompt_tokens - req.computed
            if left > 0:
                n = min(left, thr if thr > 0 else left, budget)
                batch[req.rid] = (req, 'prefill', n)
                self.running_tokens[req.rid] = self.running_tokens.get(req.rid, 0) + n
            else:
                n = 1
                batch[req.rid] = (req, 'decode', 1)
            budget -= n
        while self.waiting_list and budget > 0 and len(self.running_list) < self.cfg.max_num_seqs:
            req = self.waiting_list.popleft()
            # scheduled: the prefix cache is queried for the whole prompt once (vllm:prefix_cache_queries_total jumps)
            key = hashlib.sha256(req.prompt_text.encode('utf-8', 'replace')).hexdigest()
            self.prefix_queries += req.prompt_tokens
            if self.cfg.prefix_caching and key in self.seen_prompts:
                self.prefix_hits += req.prompt_tokens
                req.computed = req.prompt_tokens - 1   # vLLM recomputes the last prompt token of a full hit
            self.seen_prompts.add(key)
            self.running_list.append(req)
            self._publish_counts_locked()
            req.admitted_step = self.steps + 1
            req.make_plan()        # planned once admitted (the garble-under-concurrency rule counts it as running)
            left = req.prompt_tokens - req.computed
            n = min(left, thr if thr > 0 else left, budget)
            batch[req.rid] = (req, 'prefill', n)
            self.running_tokens[req.rid] = req.computed + n
            budget -= n
        self._publish_counts_locked()
        self.steps += 1
        if self.step_log is not None:
            self.step_log.append({'step': self.steps, 'start': now, 'running': self.running, 'waiting': self.waiting,
                                  'scheduled': dict((rid, (kind, n)) for rid, (_r, kind, n) in batch.items())})
        return batch

    def _step_seconds(self, batch):
        """Decode part + prefill part. Decode: 1/tokens_per_s when the step carries a decode token, or its output
        tokens / agg_tokens_per_s when that is longer. Prefill: prompt tokens / prefill_tokens_per_s."""
        cfg = self.cfg
        decodes = sum(1 for _r, kind, _n in batch.values() if kind == 'decode')
        outputs = decodes + sum(1 for r, kind, n in batch.values() if kind == 'prefill' and r.computed + n >= r.prompt_tokens)
        prompt = sum(n for _r, kind, n in batch.values() if kind == 'prefill')
        decode_s = 1.0 / cfg.tokens_per_s if decodes and cfg.tokens_per_s > 0 else 0.0
        if cfg.agg_tokens_per_s > 0 and outputs:
            decode_s = max(decode_s, outputs / cfg.agg_tokens_per_s)
        prefill_s = prompt / cfg.prefill_tokens_per_s if cfg.prefill_tokens_per_s > 0 else 0.0
        return decode_s + prefill_s

    def _complete_locked(self, batch, end):
        """The step's outputs: a partial prefill chunk returns none (no counter moves); the step that finishes a
        prefill returns the first token (the prompt tokens and one iteration for the whole prefill are credited
        then, as vLLM records iteration stats only for steps with outputs); a decode returns one token."""
        iteration = 0
        outputs = 0
        for rid, (req, kind, n) in batch.items():
            if rid not in self.running_tokens or req not in self.running_list:
                continue      # aborted by its client during the step
            if kind == 'prefill':
                req.computed += n
                if req.computed < req.prompt_tokens:
                    continue
            if self.wedge_at_tokens is not None and self.generation_tokens >= self.wedge_at_tokens:
                self._wedge_locked()
                break
            if kind == 'prefill':
                self.prompt_tokens += req.prompt_tokens
                iteration += req.prompt_tokens
                req.first_step = self.steps
                req.t_first = end
            iteration += 1
            outputs += 1
            self.generation_tokens += 1
            if self.cfg.spec_k:
                self.spec_tokens += 1
            self.running_tokens[rid] += 1
            req.emitted += 1
            last = req.emitted >= req.n_out
            req.events.append((req.emitted - 1, last))
            if last:
                # vLLM V1 frees a finished request's KV blocks before its last output reaches the API server
                self.running_list.remove(req)
                self.running_tokens.pop(rid, None)
        if outputs:
            self.iteration.observe(iteration)
        if self.step_log is not None and self.step_log:
            self.step_log[-1]['end'] = end
        self._publish_counts_locked()
        if self.wedge_at_tokens is not None and self.generation_tokens >= self.wedge_at_tokens:
            self._wedge_locked()

    # ------------------------------------------------------------------ admission (per-request model)
    def admit(self, prompt_tokens):
        with self.cond:
            self.waiting += 1
            try:
                while self.running >= self.cfg.max_num_seqs and not self.errored:
                    self.cond.wait(0.5)
            finally:
                self.waiting -= 1
            if self.errored:
                raise EngineDead()
            self.running += 1
            self.req_seq += 1
            rid = self.req_seq
            # KV blocks are allocated chunk by chunk as the prompt is prefilled (prefill())
            self.running_tokens[rid] = 0
            return rid

    def release(self, rid):
        """The request leaves the engine (finished, aborted or failed); a second call for it changes nothing."""
        with self.cond:
            if rid not in self.running_tokens:
                return
            self.running -= 1
            self.running_tokens.pop(rid)
            self.pending_prompt.pop(rid, None)
            self.cond.notify_all()

    # ------------------------------------------------------------------ wedge, frozen rank
    def wedge(self, after_tokens=0):
        """Wedge after after_tokens more generation tokens (0 = at the next engine step: token or prefill chunk)."""
        with self.cond:
            self.wedge_at_tokens = self.generation_tokens + max(0, int(after_tokens))

    def wedge_now(self):
        """The engine core waits for an RPC reply that never comes (a remote rank died mid-step)."""
        with self.cond:
            self._wedge_locked()

    def _wedge_locked(self):
        if self.wedged.is_set():
            return
        self._freeze_locked()
        self.wedged.set()

    def _freeze_locked(self):
        if self.frozen is None:
            self.frozen = (self.running, self.waiting, self._kv_usage_locked())
            self.stalled_at = time.monotonic()

    def freeze(self):
        """A remote rank stopped answering (SIGSTOP): the engine core publishes no new scheduler stats."""
        with self.cond:
            self._freeze_locked()

    def thaw(self):
        """The remote rank answers again: steps go on, the gauges are published again."""
        with self.cond:
            if not self.wedged.is_set():
                self.frozen = None
                self.stalled_at = None

    def hold_if_wedged(self):
        """Called before every engine step. A wedged engine never returns from its step: block until shutdown.
        A frozen remote rank holds the step until it answers again (peer_gate)."""
        with self.cond:
            if self.wedge_at_tokens is not None and self.generation_tokens >= self.wedge_at_tokens:
                self._wedge_locked()
        if self.wedged.is_set():
            self.stop.wait()
            raise EngineDead()
        if self.peer_gate is not None:
            self.peer_gate()

    # ------------------------------------------------------------------ pacing
    def prefill(self, rid, prompt_text, prompt_tokens, t_start):
        """Chunked prefill, as vLLM 0.26 did it on the GPU (real-vllm-on-device notes, Part 1 §2): the request is
        scheduled (prefix-cache queries jump by the whole prompt once), then one engine step per chunk of
        prefill_chunk_tokens allocates its KV blocks (vllm:kv_cache_usage_perc rises every step) and returns no
        output, so vllm:prompt_tokens_total and vllm:iteration_tokens_total stand still until the first token
        (token_emitted credits the whole prefill then). Blocks until the prefill is done; returns the absolute
        monotonic time it ended."""
        key = hashlib.sha256(prompt_text.encode('utf-8', 'replace')).hexdigest()
        with self.cond:
            self.prefix_queries += prompt_tokens
            cached = self.cfg.prefix_caching and key in self.seen_prompts
            if cached:
                self.prefix_hits += prompt_tokens
            self.seen_prompts.add(key)
            self.pending_prompt[rid] = prompt_tokens
        rate = self.cfg.prefill_tokens_per_s
        due = t_start + self.cfg.ttft_base_s
        if cached or rate <= 0:
            self.hold_if_wedged()
            self._allocate(rid, prompt_tokens)
            return due
        chunk = getattr(self.cfg, 'prefill_chunk_tokens', 8192) or prompt_tokens
        done = 0
        while done < prompt_tokens:
            n = min(chunk, prompt_tokens - done)
            self.hold_if_wedged()
            self._allocate(rid, n)
            due += n / rate
            self.sleep_until(due)
            done += n
        return due

    def _allocate(self, rid, n):
        with self.cond:
            if rid in self.running_tokens:
                self.running_tokens[rid] += n

    def clock_report(self):
        """{'steps', 'resets', 'dropped_s'}: engine steps so far, step-clock restarts after a stall while requests
        were there, and the seconds those restarts dropped (the simulator produced less than its rates then)."""
        with self.clock_lock:
            return {'steps': self.steps, 'resets': self.clock_resets, 'dropped_s': round(self.clock_dropped_s, 6)}

    def take_slot(self, due):
        """Absolute monotonic time at which the token may be emitted (caller sleeps until it)."""
        agg = self.cfg.agg_tokens_per_s
        if agg <= 0:
            return due
        with self.clock_lock:
            slot = max(due, self.next_global)
            self.next_global = slot + 1.0 / agg
            return slot

    def sleep_until(self, when):
        while True:
            left = when - time.monotonic()
            if left <= 0:
                return
            if self.stop.wait(left):
                raise EngineDead()

    def token_emitted(self, rid, n=1):
        with self.cond:
            wedged = self.wedged.is_set()
            if not wedged:
                self.generation_tokens += n
                if rid in self.running_tokens:
                    self.running_tokens[rid] += n
                pending = self.pending_prompt.pop(rid, None)
                if pending is not None:
                    # the step that returns the first token: vLLM records iteration stats only for steps with
                    # outputs, so the whole prefill is one step here (prompt + first token), credited at once
                    self.prompt_tokens += pending
                    self.iteration.observe(pending + n)
                else:
                    self.iteration.observe(self.running)
                if self.cfg.spec_k:
                    self.spec_tokens += n
                if self.wedge_at_tokens is not None and self.generation_tokens >= self.wedge_at_tokens:
                    self._wedge_locked()
        if wedged:
            self.hold_if_wedged()

    def finished(self, reason, ttft, e2e):
        with self.cond:
            self.success[reason] = self.success.get(reason, 0) + 1
            if ttft is not None:
                self.ttft.observe(ttft)
            self.e2e.observe(e2e)

    # ------------------------------------------------------------------ metrics
    def kv_usage(self):
        with self.cond:
            if self.frozen is not None:
                return self.frozen[2]
            return self._kv_usage_locked()

    def _kv_usage_locked(self):
        used = 0
        bs = self.cfg.block_size
        for toks in self.running_tokens.values():
            used += int(math.ceil(toks / float(bs))) * bs
        return min(1.0, used / float(self.cfg.kv_tokens)) if self.cfg.kv_tokens else 0.0

    def spec_counts(self):
        """(drafts, draft_tokens, accepted_per_pos): drafts = spec tokens / mean acceptance length."""
        acc = self.cfg.spec_acceptance
        mean_len = 1.0 + sum(acc)
        drafts = self.spec_tokens / mean_len
        per_pos = [int(drafts * p) for p in acc]
        return int(drafts), int(drafts) * len(acc), per_pos

    def render_metrics(self):
        cfg = self.cfg
        base = 'engine="0",model_name="%s"' % cfg.served_names[0]
        out = []

        def metric(name, kind, help_text, lines):
            out.append('# HELP %s %s' % (name, help_text))
            out.append('# TYPE %s %s' % (name, kind))
            out.extend(lines)

        if cfg.disable_log_stats:
            return '\n'.join(out) + '\n'
        kv = self.kv_usage()
        with self.cond:
            # a wedged engine core publishes no new scheduler stats: the gauges keep their last values
            running, waiting = self.frozen[:2] if self.frozen is not None else (self.running, self.waiting)
            prompt, gen = self.prompt_tokens, self.generation_tokens
            pq, ph = self.prefix_queries, self.prefix_hits
            success = dict(self.success)
            ttft_lines = self.ttft.render('vllm:time_to_first_token_seconds', base)
            iter_lines = self.iteration.render('vllm:iteration_tokens_total', base)
            e2e_lines = self.e2e.render('vllm:e2e_request_latency_seconds', base)
        metric('vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.',
               ['vllm:num_requests_running{%s} %s' % (base, float(running))])
        metric('vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.',
               ['vllm:num_requests_waiting{%s} %s' % (base, float(waiting))])
        metric('vllm:kv_cache_usage_perc', 'gauge', 'KV-cache usage. 1 means 100 percent usage.',
               ['vllm:kv_cache_usage_perc{%s} %r' % (base, kv)])
        info = cfg.cache_info()
        labels = ','.join('%s="%s"' % (k, info[k]) for k in sorted(info))
        metric('vllm:cache_config_info', 'gauge', 'Information of the LLMEngine CacheConfig',
               ['vllm:cache_config_info{%s} 1.0' % labels])
        metric('vllm:prefix_cache_queries', 'counter', 'Prefix cache queries, in terms of number of queried tokens.',
               ['vllm:prefix_cache_queries_total{%s} %s' % (base, float(pq))])
        metric('vllm:prefix_cache_hits', 'counter', 'Prefix cache hits, in terms of number of cached tokens.',
               ['vllm:prefix_cache_hits_total{%s} %s' % (base, float(ph))])
        metric('vllm:prompt_tokens', 'counter', 'Number of prefill tokens processed.',
               ['vllm:prompt_tokens_total{%s} %s' % (base, float(prompt))])
        metric('vllm:generation_tokens', 'counter', 'Number of generation tokens processed.',
               ['vllm:generation_tokens_total{%s} %s' % (base, float(gen))])
        metric('vllm:request_success', 'counter', 'Count of successfully processed requests.',
               ['vllm:request_success_total{%s,finished_reason="%s"} %s' % (base, k, float(v)) for k, v in sorted(success.items())])
        metric('vllm:iteration_tokens_total', 'histogram', 'Histogram of number of tokens per engine_step.', iter_lines)
        metric('vllm:time_to_first_token_seconds', 'histogram', 'Histogram of time to first token in seconds.', ttft_lines)
        metric('vllm:e2e_request_latency_seconds', 'histogram', 'Histogram of e2e request latency in seconds.', e2e_lines)
        if cfg.spec_k:
            drafts, draft_tokens, per_pos = self.spec_counts()
            metric('vllm:spec_decode_num_drafts', 'counter', 'Number of spec decoding drafts.',
                   ['vllm:spec_decode_num_drafts_total{%s} %s' % (base, float(drafts))])
            metric('vllm:spec_decode_num_draft_tokens', 'counter', 'Number of draft tokens.',
                   ['vllm:spec_decode_num_draft_tokens_total{%s} %s' % (base, float(draft_tokens))])
            metric('vllm:spec_decode_num_accepted_tokens', 'counter', 'Number of accepted tokens.',
                   ['vllm:spec_decode_num_accepted_tokens_total{%s} %s' % (base, float(sum(per_pos)))])
            metric('vllm:spec_decode_num_accepted_tokens_per_pos', 'counter', 'Accepted tokens per draft position.',
                   ['vllm:spec_decode_num_accepted_tokens_per_pos_total{%s,position="%d"} %s' % (base, i, float(v))
                    for i, v in enumerate(per_pos)])
        return '\n'.join(out) + '\n'
