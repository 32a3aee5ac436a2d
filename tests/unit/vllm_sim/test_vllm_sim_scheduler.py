# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulator's engine-step scheduler against what real vLLM 0.26.0 did (real-vllm-on-device notes, Part 1b):
one token budget per step (--max-num-batched-tokens) shared by the running requests first, in order, then the
waiting ones while budget is left, as vLLM V1's Scheduler.schedule(); --long-prefill-token-threshold caps what a
prefilling request takes per step.

Part 1b's scenario scaled down (budget 256, a 20,000-token prompt L instead of 250,000): a stream D decoding before L
arrives, then a short prompt S during L's prefill. Real vLLM, threshold 0: S waited for the rest of L's prefill
(10.28 s of 13.46 s) with num_requests_waiting 1 and num_requests_running 2 (D and L), D kept decoding, and
vllm:prompt_tokens_total stood still during L's prefill; threshold 224: S got its first token in 0.044-0.051 s
(about one engine step) and L's prefill took 13 % longer. The simulator's former model (every request prefilled in
its own thread: VLLM_SIM_SCHEDULER=per_request) fails the same shape check: S is served at once, nothing waits.
"""


import json
import threading
import time
import types
import urllib.request

import pytest

from vllm_sim import cli  # pylint: disable=import-error
from vllm_sim import engine as eng  # pylint: disable=import-error

BUDGET = 256
LONG = 20000
SHORT = 32
D_TOKENS = 600


def make_engine(scheduler='step', threshold=0, **extra):
    """An engine with the knobs the server's Config gives it (decode 200 tok/s: 5 ms a decode step; prefill 50,000
    tok/s: 255 prompt tokens in 5.1 ms). log_steps keeps one record per engine step."""
    cfg = dict(scheduler=scheduler, max_num_batched_tokens=BUDGET, long_prefill_token_threshold=threshold,
               max_num_seqs=8, block_size=16, kv_tokens=1000000, prefix_caching=True, tokens_per_s=200.0,
               agg_tokens_per_s=0.0, prefill_tokens_per_s=50000.0, ttft_base_s=0.0, prefill_chunk_tokens=BUDGET,
               spec_k=0, wedge_after_tokens=None, served_names=['m'], disable_log_stats=False, log_steps=True)
    cfg.update(extra)
    return eng.Engine(types.SimpleNamespace(**cfg))


def plan_of(n):
    return lambda: ([('content', ' w')] * n, 'length')


class Consumer(object):
    """The API thread of one request: takes its tokens as the engine generates them."""

    def __init__(self, engine, name, prompt_tokens, n_out):
        self.engine = engine
        self.req = engine.submit(name, prompt_tokens, plan_of(n_out))
        self.times = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for _idx in self.engine.outputs(self.req):
                self.times.append(time.monotonic())
        except eng.EngineDead:
            pass
        finally:
            self.engine.discard(self.req)


def run_starvation(engine):
    """D decoding, then L, then S once L is prefilling; the gauges sampled every 2 ms while S waits."""
    engine.start()
    try:
        d = Consumer(engine, 'decode stream D', 8, D_TOKENS)
        while len(d.times) < 5:
            time.sleep(0.002)
        long_ = Consumer(engine, 'long prompt L', LONG, 4)
        time.sleep(0.15)
        t_s = time.monotonic()
        short = Consumer(engine, 'short prompt S', SHORT, 2)
        samples = []
        while not short.times and time.monotonic() - t_s < 20:
            samples.append((engine.running, engine.waiting, engine.prompt_tokens))
            time.sleep(0.002)
        short.thread.join(20)
        long_.thread.join(20)
        return {'D': d, 'L': long_, 'S': short, 't_S': t_s, 'samples': samples}
    finally:
        engine.stop.set()
        with engine.cond:
            engine.cond.notify_all()


def shape_problems(obs, threshold):
    """What real vLLM showed in Part 1b, as checks on any scheduler; [] when the run has that shape."""
    d, long_, short = obs['D'], obs['L'], obs['S']
    problems = []
    if not (short.times and long_.times):
        return ['S or L got no token']
    s_ttft = short.times[0] - obs['t_S']
    l_first = long_.req.t_first
    if threshold == 0:
        if short.req.t_first < l_first:
            problems.append('S got its first token %.3f s before L finished its prefill (real vLLM: S waits for the '
                            'rest of L\'s prefill)' % (l_first - short.req.t_first))
        # from the first sample that saw S waiting (the engine's next step queues it) to the last one
        marks = [i for i, (_r, w, _p) in enumerate(obs['samples']) if w == 1]
        waits = obs['samples'][marks[0]:marks[-1] + 1] if marks else []
        if len(waits) < 5 or any(w != 1 for _r, w, _p in waits):
            problems.append('num_requests_waiting while S waited: %s (real vLLM: 1)' % sorted(set(w for _r, w, _p in waits)))
        if not waits or any(r != 2 for r, _w, _p in waits):
            problems.append('num_requests_running while S waited: %s (real vLLM: 2, D and L)' % sorted(set(r for r, _w, _p in waits)))
        if waits and len(set(p for _r, _w, p in waits)) != 1:
            problems.append('vllm:prompt_tokens_total moved during L\'s prefill')
    else:
        if s_ttft > 0.3 or short.req.t_first >= l_first:
            problems.append('S waited %.3f s (real vLLM with the threshold: about one engine step)' % s_ttft)
    during = [t for t in d.times if obs['t_S'] - 0.1 <= t <= l_first]
    if len(during) < 5:
        problems.append('D got %d tokens during L\'s prefill (real vLLM: it kept decoding)' % len(during))
    return problems


def steps_between(engine, first, last):
    return [s for s in engine.step_log if first <= s['step'] <= last]


def test_threshold_0_a_short_request_waits_for_the_whole_long_prefill():
    engine = make_engine(threshold=0)
    obs = run_starvation(engine)
    assert shape_problems(obs, 0) == []
    d, long_, short = (obs[k].req for k in ('D', 'L', 'S'))
    # in the engine's own record: from S's arrival until L's last chunk, every step carries D's token and 255 of L's
    # prompt tokens (the whole budget), S is not scheduled, 1 waits, 2 run
    arrived = next(s['step'] for s in engine.step_log if s['start'] > short.t_arrive) + 1   # S queued by then
    starved = steps_between(engine, arrived, long_.first_step - 1)
    assert len(starved) > 10
    for step in starved:
        assert step['scheduled'][d.rid] == ('decode', 1), step
        assert step['scheduled'][long_.rid] == ('prefill', BUDGET - 1), step
        assert short.rid not in step['scheduled'] and (step['running'], step['waiting']) == (2, 1), step
    # S is admitted with the budget L's last chunk leaves, and its first token comes out of that same step
    assert short.admitted_step == short.first_step == long_.first_step
    # L's prefill: 20,000 tokens at 255 a step
    assert long_.first_step - long_.admitted_step + 1 == -(-LONG // (BUDGET - 1))


def test_threshold_224_serves_the_short_request_within_two_steps():
    engine = make_engine(threshold=224)
    obs = run_starvation(engine)
    assert shape_problems(obs, 224) == []
    d, long_, short = (obs[k].req for k in ('D', 'L', 'S'))
    arrived = next(s['step'] for s in engine.step_log if s['start'] > short.t_arrive)
    assert short.admitted_step <= arrived + 1 and short.first_step <= short.admitted_step + 1
    admitted = engine.step_log[short.admitted_step - 1]
    # D 1 + L 224 + S the 31 tokens left of the budget
    assert admitted['scheduled'][d.rid] == ('decode', 1)
    assert admitted['scheduled'][long_.rid] == ('prefill', 224)
    assert admitted['scheduled'][short.rid] == ('prefill', BUDGET - 1 - 224)
    assert long_.first_step - long_.admitted_step + 1 >= LONG // 224


def test_the_former_per_request_model_fails_the_shape_check():
    """VLLM_SIM_SCHEDULER=per_request (the simulator before this scheduler): S is prefilled in its own thread at
    once, nothing waits; the shape check above names the differences from real vLLM."""
    obs = run_starvation(make_engine(scheduler='per_request'))
    problems = shape_problems(obs, 0)
    print('\nper_request model vs real vLLM (Part 1b):\n  ' + '\n  '.join(problems))
    assert any(p.startswith('S got its first token') for p in problems), problems
    assert any(p.startswith('num_requests_waiting while S waited') for p in problems), problems


def test_a_prefill_chunk_moves_only_kv_usage_and_the_first_token_credits_it_all():
    """Part 1 §2: partial chunks return no output; the step that ends the prefill credits the prompt and one
    iteration (prompt + first token); every later step one iteration per token."""
    engine = make_engine(tokens_per_s=1000.0, prefill_tokens_per_s=200000.0)
    engine.start()
    try:
        req = engine.submit('p', 2000, plan_of(3))
        kv = []
        counters = []
        while req.t_first is None:
            kv.append(engine.kv_usage())
            counters.append((engine.prompt_tokens, engine.generation_tokens, engine.iteration.count))
            time.sleep(0.001)
        assert set(counters[:-3]) == {(0, 0, 0)}
        assert kv == sorted(kv) and kv[-1] > kv[0]
        assert list(engine.outputs(req)) == [0, 1, 2]
        assert (engine.prompt_tokens, engine.generation_tokens) == (2000, 3)
        assert (engine.iteration.count, engine.iteration.total) == (3, 2001 + 2)
        assert engine.running == 0 and engine.kv_usage() == 0.0
    finally:
        engine.stop.set()


def test_max_num_seqs_keeps_later_requests_waiting():
    engine = make_engine(max_num_seqs=2, tokens_per_s=500.0)
    engine.start()
    try:
        reqs = [Consumer(engine, 'r%d' % i, 8, 20) for i in range(3)]
        deadline = time.monotonic() + 5
        seen = set()
        while time.monotonic() < deadline and not reqs[2].times:
            seen.add((engine.running, engine.waiting))
            time.sleep(0.001)
        assert (2, 1) in seen and all(r <= 2 for r, _w in seen)
        for c in reqs:
            c.thread.join(5)
        assert reqs[2].req.admitted_step > reqs[0].req.first_step
    finally:
        engine.stop.set()


def test_step_time_cost_model():
    """Decode part 1/tokens_per_s (or outputs/agg when larger) + prefill part prompt tokens/prefill rate."""
    engine = make_engine(tokens_per_s=100.0, prefill_tokens_per_s=10000.0, agg_tokens_per_s=200.0)
    dec = types.SimpleNamespace(prompt_tokens=5, computed=5)
    pre = types.SimpleNamespace(prompt_tokens=1000, computed=0)
    assert engine._step_seconds({1: (dec, 'decode', 1)}) == pytest.approx(0.01)  # pylint: disable=protected-access
    assert engine._step_seconds({1: (pre, 'prefill', 250)}) == pytest.approx(0.025)  # pylint: disable=protected-access
    assert engine._step_seconds({1: (dec, 'decode', 1), 2: (pre, 'prefill', 250)}) == pytest.approx(0.035)  # pylint: disable=protected-access
    many = dict((i, (dec, 'decode', 1)) for i in range(4))
    assert engine._step_seconds(many) == pytest.approx(0.02)  # pylint: disable=protected-access


def virtual_run(threshold, budget, prefill_tokens_per_s, long_tokens=250000, short_after_s=5.0):
    """Part 1b's scenario on the scheduler and its cost model in virtual time (no thread, no sleep): D (decoding) at
    t 0, L (long_tokens, 8 tokens out) at t 2 s, S (32 tokens) at t short_after_s. -> (L's TTFT, S's TTFT, the
    longest step D waited through while L prefilled)."""
    engine = make_engine(threshold=threshold, max_num_batched_tokens=budget, tokens_per_s=100.0,
                         prefill_tokens_per_s=prefill_tokens_per_s, kv_tokens=10 ** 7, log_steps=False)
    arrivals = [(0.0, 'D', 8, 100000), (2.0, 'L', long_tokens, 8), (short_after_s, 'S', 32, 8)]
    reqs = {}
    now = 0.0
    d_gap = 0.0
    while not ('S' in reqs and reqs['S'].t_first is not None and reqs['L'].t_first is not None):
        while arrivals and arrivals[0][0] <= now:
            at, name, tokens, n_out = arrivals.pop(0)
            reqs[name] = engine.submit(name, tokens, plan_of(n_out))
            reqs[name].ready_at = at
        batch = engine._schedule_locked(now)  # pylint: disable=protected-access
        step = engine._step_seconds(batch)  # pylint: disable=protected-access
        now += step
        engine._complete_locked(batch, now)  # pylint: disable=protected-access
        if 'L' in reqs and reqs['L'].t_first is None and reqs['L'].rid in batch:
            d_gap = max(d_gap, step)
    return reqs['L'].t_first - 2.0, reqs['S'].t_first - short_after_s, d_gap


def test_cost_model_calibration_against_part_1b():
    """With VLLM_SIM_TOKENS_PER_S=100 (a step's decode part: 10 ms) and VLLM_SIM_PREFILL_TOKENS_PER_S=91000 (256 prompt
    tokens: 2.8 ms), budget 256 as in Part 1b: L's prefill and the threshold's cost come out as real vLLM 0.26.0 measured
    them (L 13.46 s, x1.13 with threshold 224, x3.34 with 64; S waited 10.28 s, 0.044-0.051 s with 224). At budget
    8192, VLLM_SIM_PREFILL_TOKENS_PER_S=29700 (a long-context chunk costs more per token): L 8.86 s, S sent 1 s after
    L waited 7.66 s, 0.46 s with threshold 7168 at no measurable cost to L (8.76 s)."""
    l0, s0, gap0 = virtual_run(0, 256, 91000.0)
    l224, s224, _g = virtual_run(224, 256, 91000.0)
    l64, s64, _g = virtual_run(64, 256, 91000.0)
    print('\nbudget 256: L %.2f s, S %.2f s, D gap %.3f s; threshold 224: L x%.3f, S %.3f s; 64: L x%.2f, S %.3f s'
          % (l0, s0, gap0, l224 / l0, s224, l64 / l0, s64))
    assert 12.0 < l0 < 14.5                       # real 13.46 s
    assert abs(s0 - (l0 - 3.0)) < 0.1             # real 10.28 s: the rest of L's prefill
    assert 1.05 < l224 / l0 < 1.2 and s224 < 0.05   # real x1.13, 0.044-0.051 s
    assert 3.0 < l64 / l0 < 3.6 and s64 < 0.05      # real x3.34, 0.027-0.052 s
    assert gap0 < 0.02                            # D kept decoding, one step at a time
    b0, bs0, _g = virtual_run(0, 8192, 29700.0, short_after_s=3.0)
    b7168, bs7168, _g = virtual_run(7168, 8192, 29700.0, short_after_s=3.0)
    print('budget 8192: L %.2f s, S %.2f s; threshold 7168: L %.2f s, S %.2f s' % (b0, bs0, b7168, bs7168))
    assert 8.0 < b0 < 9.5 and abs(bs0 - (b0 - 1.0)) < 0.35    # real 8.86 s, 7.66 s
    assert abs(b7168 / b0 - 1.0) < 0.03 and bs7168 < 0.6      # real 8.76 s, 0.46 s


@pytest.mark.parametrize('version', ['0.26.0', '0.27.1', '0.21.0', '0.33.0'])
def test_long_prefill_token_threshold_is_parsed_as_vllm_does(version, capsys):
    """An int flag in every schema (vLLM's own parser); 0.26.0 has no schema here: the built-in list has it too."""
    _parser, args = cli.parse(['serve', '/m', '--long-prefill-token-threshold', '224', '--max-num-batched-tokens', '256'],
                              version)
    assert args.long_prefill_token_threshold == 224 and args.max_num_batched_tokens == 256
    with pytest.raises(SystemExit) as exc:
        cli.parse(['serve', '/m', '--long-prefill-token-threshold', 'some'], version)
    assert exc.value.code == 2
    assert "argument --long-prefill-token-threshold: invalid int value: 'some'" in capsys.readouterr().err


def _stream_first_token(sim, body, out, key):
    req = urllib.request.Request(sim.url('/v1/completions'), data=json.dumps(dict(body, stream=True)).encode(),
                                 headers={'Content-Type': 'application/json'})
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=60) as resp:
        for raw in resp:
            if raw.startswith(b'data: {') and b'"text": ""' not in raw and key + '_first' not in out:
                out[key + '_first'] = time.monotonic() - t0
                out[key + '_first_at'] = time.monotonic()
    out[key + '_done'] = time.monotonic()


def _gauges(sim):
    status, body, _h = sim.request('/metrics')
    assert status == 200
    out = {}
    for line in body.splitlines():
        if line.startswith('vllm:') and '{' in line:
            name, value = line.split('{', 1)[0], float(line.rsplit(' ', 1)[1])
            out[name] = value
    return out


@pytest.mark.parametrize('threshold', [0, 224])
def test_served_starvation_through_the_api_and_metrics(sim_factory, threshold):
    """The same through `vllm serve` (the flags as real vLLM takes them) and /metrics."""
    args = ['--max-num-batched-tokens', str(BUDGET), '--max-num-seqs', '8']
    if threshold:
        args += ['--long-prefill-token-threshold', str(threshold)]
    sim = sim_factory(args, env={'VLLM_SIM_TOKENS_PER_S': '200', 'VLLM_SIM_PREFILL_TOKENS_PER_S': '50000'}).wait_ready()
    out = {}
    threads = [threading.Thread(target=_stream_first_token, args=(sim, {'prompt': 'decode stream', 'max_tokens': 500}, out, 'D'),
                                daemon=True)]
    threads[0].start()
    assert _wait(lambda: 'D_first' in out)
    threads.append(threading.Thread(target=_stream_first_token, daemon=True, args=(
        sim, {'prompt': 'long [[vllm-sim:prompt_tokens=%d]]' % LONG, 'max_tokens': 4}, out, 'L')))
    threads[-1].start()
    time.sleep(0.3)
    before = _gauges(sim)
    threads.append(threading.Thread(target=_stream_first_token, daemon=True, args=(
        sim, {'prompt': 'short ' + ' '.join(['w'] * 20), 'max_tokens': 2}, out, 'S')))
    threads[-1].start()
    polls = []
    while 'S_first' not in out and len(polls) < 400:
        polls.append(_gauges(sim))
        time.sleep(0.02)
    for t in threads[1:]:
        t.join(30)
    assert 'S_first' in out and 'L_first' in out
    if threshold == 0:
        assert out['S_first_at'] >= out['L_first_at'] - 0.05, out
        # from S's arrival to its admission (L's last chunk): the polls that saw it waiting, and nothing else between
        marks = [i for i, p in enumerate(polls) if p['vllm:num_requests_waiting'] == 1.0]
        assert len(marks) >= 5, polls
        waiting = polls[marks[0]:marks[-1] + 1]
        assert all(p['vllm:num_requests_waiting'] == 1.0 and p['vllm:num_requests_running'] == 2.0 for p in waiting), waiting
        assert all(p['vllm:prompt_tokens_total'] == before['vllm:prompt_tokens_total'] for p in waiting)
        kv = [p['vllm:kv_cache_usage_perc'] for p in waiting]
        assert kv == sorted(kv) and kv[-1] > kv[0]
    else:
        assert out['S_first'] < 0.3 and out['S_first_at'] < out['L_first_at'] - 0.2, out


def _wait(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return False


def test_an_unknown_scheduler_is_refused(sim_factory):
    sim = sim_factory(env={'VLLM_SIM_SCHEDULER': 'fifo'})
    assert sim.wait_exit() == 2
    assert "unknown VLLM_SIM_SCHEDULER='fifo' (known: step, per_request)" in sim.output
