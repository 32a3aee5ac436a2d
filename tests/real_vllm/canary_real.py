# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The quality canary's classification on real vLLM signals (TEST CODE ONLY): decay is a failure, load is not.

    python3 tests/real_vllm/canary_real.py --backend real --model /tmp/model --out OUT [--phases 1,2,3]
    python3 tests/real_vllm/canary_real.py --backend sim --out OUT            (dry run: the simulator, any machine)

One engine at a time, one rank (driver.py's single-rank mode: recipe.render_cluster -> driver.single_argv, the same
environment, CUDA_VISIBLE_DEVICES=0), engine flags `--max-model-len 262144 --enable-chunked-prefill
--max-num-batched-tokens 256 --max-num-seqs 8 --gpu-memory-utilization 0.85` (+ `--long-prefill-token-threshold 224`
for phase 3). The model is make_model.py's tiny RANDOM Llama: every answer it gives is gibberish, so every known-answer
check fails when an answer arrives (a real decayed output). The simulator stands in with VLLM_SIM_GARBLE=cjk.

Each phase runs ONE canary exactly as the pair guard does, in its own guard process (`canary_real.py guard CFG OUT`,
single-threaded like the guard): the pair guard's Watch (plugins/module_utils/_node/pairguard, what pairguard.py runs), polled with step(), a head unit that
reads active (a fake systemctl: no peers, no ssh), /metrics of the real engine. Watch.watch_canary checks the queue
(quality_canary.should_skip), starts a CanaryJob (a forked child running run_canary_child ->
quality_canary.run_canary with the /metrics probe), reads the gauges itself while it runs (canary_probe) and judges it
(canary_done). Nothing of the classification is copied here: pairguard.fetch_metrics is only wrapped to log every
/metrics reading (time, pid, the two queue gauges) and the text goes on unchanged.

  engine b256_t0   phase 1  idle engine; the answers arrive, gibberish           -> expected: failure
                   phase 2  L (--long-tokens prompt ids, /v1/completions, streamed, as driver.py's starvation
                            scenario sends it); the canary ~2 s later, request timeout 5 s (a short request waits
                            ~10 s behind L on this engine: the real-vllm-on-device notes, Part 1b)
                                                                               -> expected: inconclusive
  engine b256_t224 phase 3  the same L with --long-prefill-token-threshold 224: the canary's requests get their
                            answers during the prefill (gibberish)                -> expected: failure (judged on the
                                                                                   answers; the load hides no decay)

The canary's tool-call request is off (canary_tools false): the test tokenizer (WordLevel, words w7..w31999) cannot
spell JSON, so vLLM's guided decoding of a required tool call has no token to give. The request timeout (5 s) is below
the role's floor for vllm_service_canary_timeout_s (10 s; quality_canary.check_config says so, recorded in each
phase's `config_problems`): on this engine the whole wait is ~10 s, on a Spark a 980K prompt prefills for 16.6 min.

Output, OUT/: phase<N>.json (expected, verdict, the canary's result as its child wrote it, the result as the guard
judged it, the guard's state and gate, its lines, every /metrics reading with its time, L's timings), engine_<cfg>.json
(the engine trace: log lines, /metrics every 0.5 s, marks; driver.py's trace format), summary.json.
"""


import argparse
import io
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
REPO = os.path.dirname(TESTS)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

from real_vllm import driver, recipe  # noqa: E402  pylint: disable=wrong-import-position,import-error

HEAD_UNIT = 'dgxspark-ds4-head.service'
METRICS_DT = 0.5
ENGINES = (
    # name, budget, threshold, phases
    ('b256_t0', 256, 0, (1, 2)),
    ('b256_t224', 256, 224, (3,)),
)
EXPECTED = {1: 'failure', 2: 'inconclusive', 3: 'failure'}
WHAT = {1: 'idle engine: the canary\'s answers arrive (random model: gibberish)',
        2: 'canary ~2 s after a long prompt started prefilling (threshold 0: it waits behind the whole prefill)',
        3: 'canary ~2 s after a long prompt started prefilling (threshold 224: answered during the prefill)'}
LONG_TOKENS = {'real': 250000, 'sim': 72000}   # sim: ~12 s at VLLM_SIM_PREFILL_TOKENS_PER_S 6000, like real's 13.5 s
MIN_ENGINE_S = 150.0


def load_pairguard():
    """The guard's parts from the node package (plugins/module_utils/_node/pairguard, what pairguard.py runs), as one
    namespace; `modules`: those that call fetch_metrics by their own name (a wrapper is set in each)."""
    import types
    recipe._regen()  # pylint: disable=protected-access  # (puts ansible_collections on sys.path)
    from ansible_collections.dgxspark.ds4.plugins.module_utils._node import bench_stats, quality_canary
    from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import canary, hang, watch
    return types.SimpleNamespace(Watch=watch.Watch, CanaryJob=canary.CanaryJob, CANARY_GAUGES=canary.CANARY_GAUGES,
                                 parse_prometheus=bench_stats.parse_prometheus, metric_total=hang.metric_total,
                                 fetch_metrics=hang.fetch_metrics, quality_canary=quality_canary, modules=(hang, canary, watch))


# -- the guard process (one canary) --------------------------------------------------------------

class FakeHead(object):
    """systemctl as the guard sees it: the head unit active (one invocation), nothing else acted on for real."""

    def __init__(self, invocation):
        self.invocation = invocation
        self.calls = []

    def __call__(self, argv, timeout=30):
        self.calls.append(list(argv))
        if argv[:2] == ['systemctl', 'show']:
            return 0, 'ActiveState=active\nSubState=running\nInvocationID=%s\nNRestarts=0\n' % self.invocation, ''
        return 0, '', ''


class Lines(io.TextIOBase):
    """stdout of the guard process: every line the guard says, kept (and passed on)."""

    def __init__(self, out):
        io.TextIOBase.__init__(self)
        self.out, self.lines, self.buf = out, [], ''

    def write(self, s):
        self.out.write(s)
        self.buf += s
        while '\n' in self.buf:
            line, self.buf = self.buf.split('\n', 1)
            self.lines.append({'t': round(time.time(), 3), 'line': line})
        return len(s)

    def flush(self):
        self.out.flush()


def verdict_of(before, after):
    """What the guard made of the canary, from its counters."""
    delta = dict((k, after.get(k, 0) - before.get(k, 0)) for k in
                 ('canary_runs_total', 'canary_failures_total', 'canary_skips_total', 'canary_inconclusive_total'))
    if delta['canary_failures_total']:
        return 'failure'
    if delta['canary_inconclusive_total']:
        return 'inconclusive'
    if delta['canary_runs_total']:
        return 'pass'
    if delta['canary_skips_total']:
        return 'skipped'
    return 'none'


def guard_main(cfg_path, out_path, max_s):
    """One canary through pairguard.Watch: step() every interval_s until a canary was started and judged."""
    pairguard = load_pairguard()
    with open(cfg_path) as f:
        cfg = json.load(f)
    reads_path = out_path + '.reads'
    guard_pid = os.getpid()
    original = pairguard.fetch_metrics

    def logged(url, timeout):
        """pairguard.fetch_metrics, unchanged, plus one JSON line per reading (the guard's and the canary child's)."""
        t = time.time()
        entry = {'t': round(t, 3), 'pid': os.getpid(), 'who': 'guard' if os.getpid() == guard_pid else 'canary'}
        try:
            text = original(url, timeout)
        except Exception as exc:
            entry.update(error='%s: %s' % (type(exc).__name__, exc), ms=round((time.time() - t) * 1000, 1))
            _append(reads_path, entry)
            raise
        parsed = pairguard.parse_prometheus(text)
        entry.update(ms=round((time.time() - t) * 1000, 1),
                     gauges=dict((n, pairguard.metric_total(parsed, n)) for n in pairguard.CANARY_GAUGES))
        _append(reads_path, entry)
        return text
    for module in pairguard.modules:
        module.fetch_metrics = logged
    lines = Lines(sys.stdout)
    sys.stdout = lines
    runner = FakeHead(cfg.pop('_invocation', 'canary-real'))
    watch = pairguard.Watch(cfg, runner=runner)
    jobs, steps, skips = [], [], []

    def factory(c):
        job = pairguard.CanaryJob(c)
        jobs.append({'job': job, 't_start': round(time.time(), 3)})
        return job
    watch.canary_job_factory = factory
    before = dict(watch.state.data)
    t0 = time.time()
    interval = float(cfg.get('interval_s', 0.5))
    judged = False
    while time.time() - t0 < max_s:
        skipped = watch.state.data['canary_skips_total']
        action = watch.step()
        steps.append({'t': round(time.time(), 3), 'action': action, 'suspect': watch.suspect})
        if jobs and watch.canary_job is None:
            jobs[-1]['t_judged'] = round(time.time(), 3)
            judged = True
            break
        if not jobs and watch.state.data['canary_skips_total'] > skipped:
            # should_skip said the pair is saturated: the guard would retry after canary_retry_s; here at the next poll
            skips.append({'t': round(time.time(), 3), 'why': watch.state.data['last_canary_skip']})
            watch.canary_due = watch.clock() + interval
        time.sleep(interval)
    after = dict(watch.state.data)
    watch.step()   # one more poll: the gate as the guard keeps it after the verdict
    gate = None
    if os.path.exists(cfg['health_gate']):
        with open(cfg['health_gate']) as f:
            gate = f.read().strip()
    child = {}
    if os.path.exists(cfg['canary_result_file']):
        with open(cfg['canary_result_file']) as f:
            child = json.load(f)
    evidence = {}
    base = cfg['evidence_dir']
    for d in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        path = os.path.join(base, d, 'canary.json')
        if os.path.exists(path):
            with open(path) as f:
                evidence[d] = json.load(f)
    reads = []
    if os.path.exists(reads_path):
        with open(reads_path) as f:
            reads = [json.loads(ln) for ln in f if ln.strip()]
    sys.stdout = lines.out
    doc = {'judged': judged, 'verdict': verdict_of(before, after) if judged else 'none (no canary judged in %g s)' % max_s,
           'child_result': child, 'guard_result_file': cfg['canary_result_file'], 'evidence': evidence,
           'state': after, 'gate': gate, 'steps': steps, 'skips': skips, 'guard_lines': lines.lines,
           'metrics_reads': reads, 'fake_systemctl_calls': runner.calls,
           'canary_t_start': jobs[0]['t_start'] if jobs else None, 'canary_t_judged': jobs[-1].get('t_judged') if jobs else None,
           'canary_job_status': jobs[-1]['job'].status if jobs else None,
           'config_problems': pairguard.quality_canary.check_config(cfg), 't_guard_start': round(t0, 3)}
    with open(out_path, 'w') as f:
        json.dump(doc, f, indent=1, sort_keys=True, default=str)
    return 0


def _append(path, entry):
    with open(path, 'a') as f:
        f.write(json.dumps(entry, sort_keys=True) + '\n')


# -- the engine and the phases -------------------------------------------------------------------

def guard_cfg(work, port, timeout_s, invocation):
    """The guard's config as pairguard.json.j2 renders its canary part, pointed at this engine (no peers, no ssh)."""
    os.makedirs(work, exist_ok=True)
    return {
        '_invocation': invocation,
        'head_unit': HEAD_UNIT, 'head_name': 'device', 'peers': [], 'interval_s': 0.5,
        'pair_state_file': os.path.join(work, 'pair-head.json'), 'state_file': os.path.join(work, 'state.json'),
        'textfile': os.path.join(work, 'guard.prom'), 'health_gate': os.path.join(work, 'health-gate'),
        'evidence_dir': os.path.join(work, 'evidence'), 'metrics_url': 'http://127.0.0.1:%d/metrics' % port,
        'metrics_timeout_s': 10, 'hang_watchdog': False, 'hang_poll_s': 5, 'memory_guard': False,
        'canary': True, 'canary_url': 'http://127.0.0.1:%d' % port, 'canary_model': recipe.SERVED_NAME,
        'canary_api_key': recipe.API_KEY, 'canary_ca_file': '', 'canary_tools': False, 'canary_tool_choice': 'required',
        'canary_max_num_seqs': 8, 'canary_interval_s': 600, 'canary_retry_s': 60, 'canary_failures_to_restart': 3,
        'canary_timeout_s': timeout_s, 'canary_request_timeout_s': timeout_s, 'canary_deadline_s': 4 * timeout_s + 10,
        'canary_decode_tokens': 64, 'canary_max_ttft_ratio': 5.0, 'canary_ttft_slack_s': 2.0,
        'canary_min_decode_ratio': 0.3, 'canary_result_file': os.path.join(work, 'canary-result.json'),
    }


def run_guard(c, out, phase, port, timeout_s):
    """One canary in its own guard process; -> its document (guard_main's), with the engine-relative times."""
    work = os.path.join(out, '.work', 'guard-phase%d' % phase)
    cfg = guard_cfg(work, port, timeout_s, 'canary-real-phase%d' % phase)
    cfg_path = os.path.join(work, 'guard.json')
    with open(cfg_path, 'w') as f:
        json.dump(cfg, f, indent=1, sort_keys=True)
    doc_path = os.path.join(work, 'guard-result.json')
    max_s = cfg['canary_deadline_s'] + 15.0
    c.mark('canary_guard_start', phase=phase, wall=round(time.time(), 3))
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), 'guard', cfg_path, doc_path, str(max_s)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=max_s + 60, check=False)
    c.mark('canary_guard_done', phase=phase, rc=proc.returncode, wall=round(time.time(), 3))
    doc = {}
    if os.path.exists(doc_path):
        with open(doc_path) as f:
            doc = json.load(f)
    doc['guard_rc'] = proc.returncode
    doc['guard_output'] = proc.stdout[-8000:]
    doc['guard_cfg'] = dict((k, v) for k, v in cfg.items() if not k.startswith('_'))
    return doc


def metrics_now(c):
    status, text, _ms = c.http('GET', '/metrics', timeout=5.0)
    if status != 200:
        return {}
    series = driver.metric_series(text)
    return dict((n, sum(v for k, v in series.items() if k == n or k.startswith(n + '{')))
                for n in ('vllm:num_requests_running', 'vllm:num_requests_waiting'))


def wait_idle(c, timeout):
    """Until the engine has no request running or waiting (a canary's aborted request, L), at most timeout."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        g = metrics_now(c)
        if g and not any(g.values()):
            return g
        time.sleep(0.25)
    return metrics_now(c)


def long_prompt(c, long_tokens, long_timeout_s):
    body = c.completion(driver.token_ids(long_tokens, 8), driver.STARVATION['long_max_tokens'], ignore_eos=True)
    c.mark('long_start', prompt_tokens=long_tokens, wall=round(time.time(), 3))
    return driver.Stream(c, 'long', body, first_mark='long_first_token', timed=True, timeout=long_timeout_s + 60.0).start()


def long_doc(c, stream, t_long_wall):
    """L's timings (engine-relative t and wall clock) for the phase document."""
    wall0 = time.time() - c.now()
    d = {'status': stream.status, 't_sent': stream.t_sent, 't_first': stream.t_first, 'chunks': stream.count,
         'wall_sent': t_long_wall, 'wall_first': None if stream.t_first is None else round(wall0 + stream.t_first, 3)}
    if stream.t_first is not None and stream.t_sent is not None:
        d['ttft_s'] = round(stream.t_first - stream.t_sent, 3)
    return d


def phase(c, args, cfg, n, port):
    """Phase n on the running engine -> the phase document."""
    c.mark('phase%d_start' % n, wall=round(time.time(), 3))
    doc = {'phase': n, 'what': WHAT[n], 'expected': EXPECTED[n], 'engine': c.recorded['engine'],
           'request_timeout_s': args.request_timeout_s, 'backend': c.backend,
           'recorded': dict((k, c.recorded.get(k)) for k in ('vllm_version', 'gpu', 'driver', 'date', 'recorder', 'budget',
                                                             'threshold', 'commands'))}
    doc['gauges_before'] = wait_idle(c, 30.0)
    stream = None
    if n in (2, 3):
        stream = long_prompt(c, args.long_tokens, cfg['starv']['long_timeout_s'])
        t_long = round(time.time(), 3)
        driver.sleep_checked(c, args.canary_after_s)
        doc['long_tokens'] = args.long_tokens
        doc['canary_after_s'] = args.canary_after_s
    doc.update(run_guard(c, args.out, n, port, args.request_timeout_s))
    if stream is not None:
        doc['long_running_when_judged'] = not stream.first.is_set()
        driver.wait_for(stream.done.is_set, cfg['starv']['long_timeout_s'], c)
        doc['long'] = long_doc(c, stream, t_long)
        ts, tj, lf = doc.get('canary_t_start'), doc.get('canary_t_judged'), doc['long'].get('wall_first')
        doc['canary_inside_prefill'] = bool(ts and tj and lf and t_long < ts and tj < lf)
    doc['gauges_after'] = wait_idle(c, 30.0)
    c.mark('phase%d_done' % n, verdict=doc.get('verdict'), wall=round(time.time(), 3))
    doc['ok'] = doc.get('verdict') == EXPECTED[n]
    return doc


def warm_up(c):
    """One short chat request before the phases (its time in the trace): the engine's first request is not a canary's."""
    body = {'model': recipe.SERVED_NAME, 'messages': [{'role': 'user', 'content': 'w10 w11 w12'}], 'max_tokens': 4,
            'temperature': 0.0}
    c.mark('warm_up')
    c.respond('warm_up_chat', 'POST', '/v1/chat/completions', body, timeout=60.0)
    c.mark('warm_up_done')


def start_engine(args, backend, model, env, per_cluster, name, budget, threshold, port, deadline):
    cfg = driver.BACKENDS[backend]
    engine = dict(cfg['starv']['engine'], **{'max-num-batched-tokens': budget})
    if threshold > 0:
        engine['long-prefill-token-threshold'] = threshold
    argv = {'head': driver.single_argv(recipe.render_cluster(cfg['entrypoint'], model, engine, port, port + 1)['head'])}
    cenv = dict(env)
    cenv.update(per_cluster['B'])
    if backend == 'sim':
        cenv['VLLM_SIM_GARBLE'] = 'cjk'   # the random model's answers are gibberish: the simulator's garbled mode
    facts = driver.device_facts(backend)
    facts['date'] = driver.utcnow()
    facts['recorder'] = 'python3 tests/real_vllm/canary_real.py ' + ' '.join(shlex.quote(a) for a in sys.argv[1:])
    recorded = dict(facts, commands=argv, env=dict((k, v) for k, v in sorted(cenv.items()) if k != 'VLLM_SIM_PYTHON'),
                    cluster='single', ranks=1, gpus='CUDA_VISIBLE_DEVICES=0', budget=budget, threshold=threshold,
                    engine=name, long_tokens=args.long_tokens)
    c = driver.Cluster('S', backend, cfg, argv, cenv, port, deadline)
    c.recorded = recorded
    trace = c.begin('engine_%s' % name, recorded)
    return c, trace


def stop_engine(c, cfg):
    """SIGTERM to the engine's group, SIGKILL after stop_s; until its whole group is gone (the GPU free)."""
    head = c.ranks.get('head')
    if head is not None and not head.exited.is_set():
        try:
            os.killpg(head.proc.pid, signal.SIGTERM)
        except OSError:
            pass
        head.exited.wait(cfg['starv']['stop_s'])
    c.kill_all()
    if head is not None:
        end = time.monotonic() + 20.0
        while c.group_left('head') and time.monotonic() < end:
            time.sleep(0.2)
    time.sleep(0.3)


def run(args):
    backend = args.backend
    cfg = driver.BACKENDS[backend]
    out = args.out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    workdir = os.path.join(out, '.work') if backend == 'sim' else '/tmp/real-vllm-work'
    os.makedirs(workdir, exist_ok=True)
    model, env, per_cluster = driver.backend_setup(backend, args.model, workdir)
    wanted = set(int(p) for p in args.phases.split(',') if p.strip())
    start = time.monotonic()
    deadline = start + args.deadline_s
    summary = {'backend': backend, 'phases': {}, 'skipped': [], 'errors': [],
               'command': 'python3 tests/real_vllm/canary_real.py ' + ' '.join(shlex.quote(a) for a in sys.argv[1:])}
    for i, (name, budget, threshold, phases) in enumerate(ENGINES):
        todo = [p for p in phases if p in wanted]
        if not todo:
            continue
        left = deadline - time.monotonic()
        if left < MIN_ENGINE_S:
            summary['skipped'].append('engine %s (phases %s): %.0f s left, needs %.0f s' % (name, todo, left, MIN_ENGINE_S))
            print('SKIPPED engine %s (phases %s): %.0f s left' % (name, todo, left), flush=True)
            continue
        port = (8000 + 10 * i) if backend == 'real' else driver.free_port_base(2)
        c, trace = start_engine(args, backend, model, env, per_cluster, name, budget, threshold, port, deadline)
        stop = threading.Event()
        try:
            print('engine %s: starting at %.0f s' % (name, time.monotonic() - start), flush=True)
            driver.sc_start_single(c, cfg)
            print('engine %s: ready at t=%.1f (%.0f s)' % (name, c.now(), time.monotonic() - start), flush=True)
            c.sampler(stop, metrics_dt=METRICS_DT)
            warm_up(c)
            for n in todo:
                try:
                    doc = phase(c, args, cfg, n, port)
                except (Exception, KeyboardInterrupt) as exc:  # pylint: disable=broad-except  # (Deadline, timeout -s INT)
                    c.mark('error', error='%s: %s' % (type(exc).__name__, exc))
                    summary['errors'].append('phase %d: %s: %s' % (n, type(exc).__name__, exc))
                    print('phase %d: %s: %s' % (n, type(exc).__name__, exc), flush=True)
                    if isinstance(exc, KeyboardInterrupt):
                        raise
                    continue
                with open(os.path.join(out, 'phase%d.json' % n), 'w') as f:
                    json.dump(doc, f, indent=1, sort_keys=True, default=str)
                child = doc.get('child_result') or {}
                summary['phases'][n] = {
                    'expected': doc['expected'], 'verdict': doc.get('verdict'), 'ok': doc['ok'], 'engine': name,
                    'failures': ['%s %s' % (f.get('request'), f.get('check')) for f in child.get('failures') or []],
                    'inconclusive': child.get('inconclusive'), 'busy': child.get('busy'),
                    'contents': [(r.get('request'), r.get('content'), r.get('error')) for r in child.get('requests') or []],
                    'long_ttft_s': (doc.get('long') or {}).get('ttft_s'), 'canary_inside_prefill': doc.get('canary_inside_prefill'),
                    'gate': doc.get('gate')}
                print('PHASE %d (%s): expected %s, got %s -> %s'
                      % (n, name, doc['expected'], doc.get('verdict'), 'OK' if doc['ok'] else 'UNEXPECTED'), flush=True)
                print('  %s' % json.dumps(summary['phases'][n], default=str)[:1500], flush=True)
        except (Exception, KeyboardInterrupt) as exc:  # pylint: disable=broad-except
            c.mark('error', error='%s: %s' % (type(exc).__name__, exc))
            summary['errors'].append('engine %s: %s: %s' % (name, type(exc).__name__, exc))
            print('engine %s: %s: %s' % (name, type(exc).__name__, exc), flush=True)
        finally:
            stop.set()
            stop_engine(c, cfg)
            with c.lock:
                c.trace = None
            trace.write(out)
            print('engine %s: stopped at %.0f s' % (name, time.monotonic() - start), flush=True)
    summary['all_ok'] = bool(summary['phases']) and all(p['ok'] for p in summary['phases'].values()) and not summary['errors']
    summary['seconds'] = round(time.monotonic() - start, 1)
    with open(os.path.join(out, 'summary.json'), 'w') as f:
        json.dump(summary, f, indent=1, sort_keys=True, default=str)
    print('SUMMARY all_ok=%s after %.0f s (%s)' % (summary['all_ok'], summary['seconds'],
                                                   ', '.join('%s: %s' % (k, v['verdict']) for k, v in sorted(summary['phases'].items()))),
          flush=True)
    return 0


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ['guard']:
        if len(argv) != 4:
            raise SystemExit('usage: canary_real.py guard CFG.json OUT.json MAX_S')
        return guard_main(argv[1], argv[2], float(argv[3]))
    p = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    p.add_argument('--backend', choices=sorted(driver.BACKENDS), required=True)
    p.add_argument('--out', required=True, help='directory for phase<N>.json, engine_<cfg>.json, summary.json')
    p.add_argument('--model', default='/tmp/model', help='real: the model directory (make_model.py)')
    p.add_argument('--phases', default='1,2,3', help='comma-separated subset of 1,2,3')
    p.add_argument('--deadline-s', type=float, default=520.0, help='no engine is started with less than %d s left' % MIN_ENGINE_S)
    p.add_argument('--long-tokens', type=int, default=0, help='L in prompt token ids (0: real 250000, sim 72000)')
    p.add_argument('--request-timeout-s', type=float, default=5.0, help='the canary\'s per-request timeout')
    p.add_argument('--canary-after-s', type=float, default=2.0, help='the canary starts this long after L is sent')
    args = p.parse_args(argv)
    args.long_tokens = args.long_tokens or LONG_TOKENS[args.backend]
    return run(args)


if __name__ == '__main__':
    sys.exit(main())
