# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A trace (tests/real_vllm/README.md, 'Trace format') -> comparable observations; two observations -> differences.

Pure Python, no I/O besides load(). Real vLLM and the simulator run at different speeds, so only shapes
are compared, never seconds:

* phases: the marks in order (a mark starts a phase that lasts until the next mark; a repeated name gets
  '#2', '#3'); the part before the first mark is 'begin'.
* metrics, per phase: for each `vllm:` metric (every label set of one name, summed; histogram buckets and
  `_created` are never in a trace) how many times it changed between consecutive polls inside the phase.
  compare() merges phases the real trace polled fewer than MIN_SAMPLES times into the next one and classes
  each metric per window: 'still' (no change), 'step' (one), 'moving' (two or more); class_differs() says
  which mismatches are differences (still <-> moving always; step <-> moving in long windows only).
* progressed: which progress counters changed between the trace's first and last poll.
* probes, per phase and path: the HTTP statuses in order, repeats collapsed (None = connection refused); refusals
  that end a phase ending at a rank's exit count in the phase after it (_refusals_to_the_exit), answers
  sent before the exit and recorded after it in the phase before (_answered_before_the_exit); a
  phase the real trace probed fewer than MIN_SAMPLES times is compared only where the simulator probed it.
* logs, per rank: the LOG_PATTERNS names in the order of their first occurrence.
* exits: each rank's exit status; whether the head exited after an engine death; whether processes of the
  head's process group outlived it (the `head_group_left` mark; observed, not compared: see COMPARED_FACTS).
* responses, by name: status, error type (JSON body or in-band stream error), whether a stream ended with
  [DONE].
* stream progress, between marks that carry `chunks`: whether the open stream received chunks.
"""


import gzip
import json
import re

# Key log lines (name, regex), matched per line; data, so a new signature is one more row.
LOG_PATTERNS = (
    ('headless_executor', r'Launching vLLM \(v[^)]*\) headless multiproc executor'),
    ('dp_group_leader', r'DP group leader: node_rank=0'),
    ('dist_init', r'world_size=2 rank=\d local_rank=0 distributed_init_method=tcp://'),
    ('nccl_version', r'vLLM is using nccl=='),
    ('weights_loaded', r'Loading weights took'),
    ('model_loaded', r'Model loading took'),
    ('kv_cache_memory', r'Available KV cache memory:'),
    ('kv_cache_reserved', r'reserved [\d.]+ GiB memory for KV Cache as specified by kv_cache_memory_bytes'),
    ('kv_cache_size', r'GPU KV cache size: [\d,]+ tokens'),
    ('max_concurrency', r'Maximum concurrency for [\d,]+ tokens per request'),
    ('graphs_captured', r'Graph capturing finished in'),
    ('engine_init', r'init engine \(profile, create kv cache, warmup model\) took'),
    ('server_starting', r'Starting vLLM server on http'),
    ('startup_complete', r'Application startup complete\.'),
    ('nccl_peer_error', r'NCCL error: remote process exited or there was a network error'),
    ('shm_broadcast_wait', r'No available shared memory broadcast block found in 60 seconds'),
    ('rpc_timeout', r'TimeoutError: RPC call to \w+ timed out\.'),
    ('engine_fatal', r'EngineCore encountered a fatal error\.'),
    ('engine_dead', r'EngineDeadError: EngineCore encountered an issue\.'),
    ('shutting_down', r'INFO:\s+Shutting down'),
    ('server_finished', r'Finished server process'),
)
_COMPILED = tuple((name, re.compile(rx)) for name, rx in LOG_PATTERNS)

# The series the collection reads (readiness, pair guard, health gate, alerts, bench): the simulator must serve
# every one of them that real vLLM served. Other real series are compared where the simulator serves them too.
COLLECTION_SERIES = ('vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc',
                     'vllm:prompt_tokens_total', 'vllm:generation_tokens_total', 'vllm:iteration_tokens_total_count',
                     'vllm:iteration_tokens_total_sum')
# Progress counters: whether each changed between the first and the last poll of the whole trace (with a
# window where it stood still, this says it was held and then released, e.g. credited at the first token).
PROGRESS_SERIES = ('vllm:prompt_tokens_total', 'vllm:generation_tokens_total', 'vllm:iteration_tokens_total_count')
# A phase with fewer /metrics samples than this in the real trace is merged into the next one for the
# moved / still comparison (a phase of a few tens of ms says nothing about what moves).
MIN_SAMPLES = 3


def load(path):
    """A trace from <scenario>.json, or <scenario>.json.gz."""
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rt') as f:
        return json.load(f)


def metric_name(key):
    return key.split('{', 1)[0]


def _phases(events):
    """[(phase name, mark event or None, t_start)] in order."""
    out = [('begin', None, float('-inf'))]
    seen = {}
    for e in events:
        if e['kind'] != 'mark':
            continue
        n = seen[e['name']] = seen.get(e['name'], 0) + 1
        out.append((e['name'] if n == 1 else '%s#%d' % (e['name'], n), e, e['t']))
    return out


def _refusals_to_the_exit(per, phases, names):
    """A phase that ends at a rank's exit (the driver's exit mark, which carries the exit status) may end with
    probes refused by the exit itself: the mark is recorded when the driver's waiter thread sees the process gone,
    which on a loaded machine can be after a probe already found the port closed. Such trailing refusals (None,
    with no answer after them in the phase) move to the phase the exit starts, in both traces alike."""
    for i in range(len(phases) - 1):
        mark = phases[i + 1][1]
        if not mark or 'status' not in mark or names[i] not in per:
            continue
        for path, statuses in per[names[i]].items():
            moved = []
            while len(statuses) > 1 and statuses[-1] is None:
                moved.insert(0, statuses.pop())
            if moved:
                after = per.setdefault(names[i + 1], {}).setdefault(path, [])
                after[:0] = moved


def _answered_before_the_exit(event, i, phases):
    """The phase a probe counts in: phase i (the one it was recorded in), or the one before when phase i starts at
    a rank's exit and the probe was sent before that exit and answered. A probe is recorded when its answer is
    read; on a loaded machine the waiter thread can record the exit mark while an answer the rank gave just before
    it exited is still on its way (a /health 200 recorded after `head_exited`, seen once in a CI run). An
    exited rank answers nothing, so such an answer belongs before the exit. A probe sent after the mark stays
    where it is: an answer then is a difference. The driver sets exit marks only for the rank the probes ask."""
    mark = phases[i][1]
    if i and mark and 'status' in mark and event['status'] is not None and event['t'] <= mark['t']:
        return i - 1
    return i


def _phase_index(events):
    """For each event, the index of its phase in _phases(): the last mark recorded before it (recording order,
    so an event stamped in the same millisecond as a mark but recorded before it stays in the earlier phase)."""
    out = []
    current = 0
    for e in events:
        if e['kind'] == 'mark':
            current += 1
        out.append(current)
    return out


def _sums(series):
    out = {}
    for key, value in series.items():
        name = metric_name(key)
        out[name] = out.get(name, 0.0) + float(value)
    return out


def _collapse(values):
    out = []
    for v in values:
        if not out or out[-1] != v:
            out.append(v)
    return out


def _error_type(text):
    try:
        obj = json.loads(text)
    except (TypeError, ValueError):
        return None
    err = obj.get('error') if isinstance(obj, dict) else None
    if isinstance(err, dict):
        return err.get('type')
    return err if isinstance(err, str) else None


def _response(e):
    stream = e.get('stream') or []
    stream_error = None
    for line in stream:
        if line.startswith('data:') and '"error"' in line:
            stream_error = _error_type(line[5:].strip())
    return {'status': e.get('status'), 'error_type': _error_type(e.get('body') or ''),
            'stream_done': (stream[-1].strip() == 'data: [DONE]') if stream else None,
            'stream_error_type': stream_error}


def observe(trace):
    events = trace['events']
    phases = _phases(events)
    index = _phase_index(events)
    names = [p[0] for p in phases]
    obs = {'scenario': trace['scenario'], 'backend': trace['backend'], 'phases': names, 'metrics': {}, 'probes': {},
           'logs': {}, 'exits': {}, 'head_exit_after_engine_death': None, 'orphans_after_head_exit': None,
           'responses': {}, 'stream_progress': {}, 'progressed': None}
    # metrics per phase: first / last sample and the metrics that changed between samples inside it
    samples = [(index[i], _sums(e['series'])) for i, e in enumerate(events) if e['kind'] == 'metrics']
    for i, (pname, _mark, _start) in enumerate(phases):
        inside = [s for k, s in samples if k == i]
        if inside:
            changes = dict((n, sum(1 for a, b in zip(inside, inside[1:]) if a.get(n) != b.get(n))) for n in inside[0])
            obs['metrics'][pname] = {'samples': len(inside), 'first': inside[0], 'last': inside[-1],
                                     'changes': dict((n, c) for n, c in changes.items() if c)}
    if samples:
        first, last = samples[0][1], samples[-1][1]
        obs['progressed'] = sorted(n for n in PROGRESS_SERIES if n in first and n in last and first[n] != last[n])
    # probes
    per = {}
    for i, e in enumerate(events):
        if e['kind'] == 'probe':
            per.setdefault(names[_answered_before_the_exit(e, index[i], phases)], {}).setdefault(
                e['path'], []).append(e['status'])
    _refusals_to_the_exit(per, phases, names)
    obs['probes'] = dict((p, dict((path, _collapse(v)) for path, v in paths.items())) for p, paths in per.items())
    obs['probe_counts'] = dict((p, dict((path, len(v)) for path, v in paths.items())) for p, paths in per.items())
    # logs
    engine_dead_t = None
    for e in events:
        if e['kind'] != 'log':
            continue
        for name, rx in _COMPILED:
            if rx.search(e['line']):
                seen = obs['logs'].setdefault(e['rank'], [])
                if name not in seen:
                    seen.append(name)
                if name == 'engine_dead' and e['rank'] == 'head' and engine_dead_t is None:
                    engine_dead_t = e['t']
    # exits
    for e in events:
        if e['kind'] == 'exit' and e['rank'] not in obs['exits']:
            obs['exits'][e['rank']] = e['status']
    if engine_dead_t is not None:
        obs['head_exit_after_engine_death'] = any(e['kind'] == 'exit' and e['rank'] == 'head' and e['t'] >= engine_dead_t
                                                  for e in events)
    for e in events:
        if e['kind'] == 'mark' and e['name'] == 'head_group_left' and 'head' in obs['exits']:
            obs['orphans_after_head_exit'] = bool(e.get('processes'))
    # responses
    for e in events:
        if e['kind'] == 'response':
            obs['responses'][e['name']] = _response(e)
    # stream progress between marks carrying 'chunks'
    counted = [(p[0], p[1]['chunks']) for p in phases if p[1] is not None and isinstance(p[1].get('chunks'), int)]
    for (pname, c0), (_next, c1) in zip(counted, counted[1:]):
        obs['stream_progress'][pname] = c1 > c0
    return obs


# Observed but not compared: orphans_after_head_exit. Real vLLM left VLLM::Worker_TP0 and its resource tracker
# alive 3 s after the head's exit in one of two recordings of each worker-death scenario, the other time not
# (tests/fixtures/real_vllm/ and run2/): a race in vLLM, not a behaviour the simulator can be held to.
COMPARED_FACTS = ('exits', 'head_exit_after_engine_death', 'stream_progress', 'progressed')


def metric_windows(real, obs):
    """obs's phases merged into the windows the real trace supports: a phase with < MIN_SAMPLES real samples
    joins the next one. -> {window name: {'samples', 'moved', 'still'}} for windows where obs has samples."""
    windows = []
    pending = []
    for phase in real['phases']:
        pending.append(phase)
        if real['metrics'].get(phase, {}).get('samples', 0) >= MIN_SAMPLES or sum(
                real['metrics'].get(p, {}).get('samples', 0) for p in pending) >= MIN_SAMPLES:
            windows.append(pending)
            pending = []
    out = {}
    for group in windows:
        parts = [obs['metrics'][p] for p in group if p in obs['metrics']]
        if not parts:
            continue
        names = set(parts[0]['first'])
        for part in parts:
            names &= set(part['first'])
        changes = dict((n, 0) for n in names)
        for a, b in zip(parts, parts[1:]):
            for n in names:
                changes[n] += int(a['last'][n] != b['first'][n])
        for part in parts:
            for n in names:
                changes[n] += part['changes'].get(n, 0)
        out[group[0]] = {'samples': sum(p['samples'] for p in parts),
                         'class': dict((n, movement(c)) for n, c in changes.items())}
    return out


def movement(changes):
    """'still' (no change between samples), 'step' (one change), 'moving' (two or more)."""
    return 'still' if changes == 0 else ('step' if changes == 1 else 'moving')


# still <-> step is never a difference: one change at a window's edge depends on where the polls fell.
# step <-> moving is one only in a window the real trace polled at least LONG_WINDOW times: in a short burst
# (four 64-token requests done within two polls) how many polls saw a change is timing, not behaviour.
LONG_WINDOW = 10


def class_differs(real_cls, sim_cls, real_polls):
    pair = frozenset((real_cls, sim_cls))
    if len(pair) == 1 or pair == frozenset(('still', 'step')):
        return False
    if pair == frozenset(('step', 'moving')):
        return real_polls >= LONG_WINDOW
    return True


def compare(real, sim):
    """Readable differences (empty when the simulator shows what real vLLM showed)."""
    diffs = []
    scen = real['scenario']

    def diff(what, r, s):
        diffs.append('%s: %s: real vLLM %s, simulator %s' % (scen, what, json.dumps(r), json.dumps(s)))
    if real['phases'] != sim['phases']:
        diff('phases (marks)', real['phases'], sim['phases'])
    for window, rm in metric_windows(real, real).items():
        sm = metric_windows(real, sim).get(window)
        if sm is None or sm['samples'] < 2:
            diff('window from %s: /metrics samples' % window, rm['samples'], sm['samples'] if sm else 0)
            continue
        missing = sorted(n for n in set(rm['class']) - set(sm['class']) if n in COLLECTION_SERIES)
        if missing:
            diff('window from %s: series the collection reads, not served by the simulator' % window, missing, [])
        for name in sorted(set(rm['class']) & set(sm['class'])):
            r_cls, s_cls = rm['class'][name], sm['class'][name]
            if class_differs(r_cls, s_cls, rm['samples']):
                diff('window from %s (%d real / %d sim polls): %s' % (window, rm['samples'], sm['samples'], name), r_cls, s_cls)
    for phase, paths in real['probes'].items():
        for path, statuses in paths.items():
            got = sim['probes'].get(phase, {}).get(path)
            if got is None and real['probe_counts'][phase][path] < MIN_SAMPLES:
                continue   # a phase the real trace probed once or twice may fall between the simulator's probes
            if got != statuses:
                diff('phase %s: %s statuses' % (phase, path), statuses, got)
    for rank, order in real['logs'].items():
        got = sim['logs'].get(rank, [])
        if got != order:
            diff('%s log: key lines in order' % rank, order, got)
    for key in COMPARED_FACTS:
        if real[key] != sim[key]:
            diff(key.replace('_', ' '), real[key], sim[key])
    for name, r in real['responses'].items():
        s = sim['responses'].get(name)
        if s != r:
            diff('response %s' % name, r, s)
    return diffs


# -- the starvation scenario (starvation_b<budget>_t<threshold>.json; README "The starvation scenario") ----------
# Shapes only: the short request S's wait as a fraction of the rest of the long prompt L's prefill (threshold 0:
# the whole rest; a threshold below the budget: about one engine step), what /metrics showed meanwhile, whether the
# stream D, already decoding when L arrived, kept getting tokens. Pure functions of the trace.

# An S sent during L is judged only when at least this much of L's prefill was left (seconds) and at least this many
# engine steps: one sent just before L's first token says nothing about who waits for whom.
MIN_REST_S = 0.5
MIN_REST_STEPS = 5
# Engine steps are measured, not averaged: D, decoding while L prefills, gets one token per engine step (it is ahead
# of L in vLLM's running list), so D's gap between two tokens is one step. Real steps grow with L's context (attention
# over it): in starvation_b8192_t7168.json from 0.03 s at L's start to 0.44 s at 250K tokens, where the average
# (L's time to first token / its chunks) is 0.23 s; an S waits up to ~3 of the steps around it, late ones twice that.
# 'waits_rest_of_long': S's first token came after at least this fraction of the rest of L's prefill.
WAIT_REST_FRACTION = 0.8
# 'within_step': S's first token came within the slowest S alone plus this many engine steps.
WITHIN_STEPS = 3
# /metrics polls this close to S's send or first token are not read as "while S waits" (the gauges are the last
# step's, and a poll's t is when it was sent).
EDGE_S = 0.5


def _responses(trace):
    return dict((e['name'], e) for e in trace['events'] if e['kind'] == 'response')


def starvation_requests(trace):
    """-> {'long': {t_sent, t_first}, 'decode': {t_sent, t_first, chunk_t}, 'shorts': [{name, group, t_sent, t_first,
    ttft}]} from the timed response events (None where a request is missing)."""
    resp = _responses(trace)

    def timed(name):
        e = resp.get(name)
        if e is None or 't_sent' not in e:
            return None
        return {'t_sent': e['t_sent'], 't_first': e.get('t_first'), 'chunk_t': list(e.get('chunk_t') or []),
                'status': e.get('status')}
    shorts = []
    for e in trace['events']:
        if e['kind'] == 'response' and e['name'].startswith('short_') and 't_sent' in e:
            t_first = e.get('t_first')
            shorts.append({'name': e['name'], 'group': e.get('group'), 't_sent': e['t_sent'], 't_first': t_first,
                           'ttft': None if t_first is None else round(t_first - e['t_sent'], 4)})
    shorts.sort(key=lambda s: s['t_sent'])
    return {'long': timed('long'), 'decode': timed('decode'), 'shorts': shorts}


def engine_step_s(trace, long_req):
    """One engine step during L's prefill, estimated: L's time to first token / the number of chunks its prompt took
    (chunk = the threshold when set, else the budget; recorded budget, threshold, long_tokens)."""
    rec = trace.get('recorded') or {}
    tokens, budget, threshold = rec.get('long_tokens'), rec.get('budget'), rec.get('threshold') or 0
    if not (tokens and budget and long_req and long_req['t_first'] is not None):
        return None
    per_step = threshold if 0 < threshold < budget else budget
    steps = -(-int(tokens) // int(per_step))
    return (long_req['t_first'] - long_req['t_sent']) / max(1, steps)


def longest_step_s(trace, req, lo, hi):
    """The longest engine step that overlapped [lo, hi]: D's largest gap between two consecutive tokens where the gap
    overlaps the window (D decodes one token per step); engine_step_s (L's average step) when D had no two tokens
    around the window."""
    dec = req['decode']
    times = sorted(dec['chunk_t']) if dec else []
    gaps = [b - a for a, b in zip(times, times[1:]) if b > lo and a < hi]
    if gaps:
        return max(gaps)
    return engine_step_s(trace, req['long'])


def short_waits(trace):
    """The S sent while L prefilled (after L was sent, before its first token) with enough of L's prefill left (at
    least MIN_REST_S and MIN_REST_STEPS of its longest steps): [{name, wait_s, rest_of_long_s, fraction, step_s}]
    (fraction = S's wait / the rest of L's prefill when S was sent; step_s = the longest step during S's wait)."""
    req = starvation_requests(trace)
    long_req = req['long']
    if not long_req or long_req['t_first'] is None:
        return []
    out = []
    for s in req['shorts']:
        if s['t_first'] is None or not long_req['t_sent'] <= s['t_sent'] < long_req['t_first']:
            continue
        rest = long_req['t_first'] - s['t_sent']
        if rest < MIN_REST_S or rest < MIN_REST_STEPS * (longest_step_s(trace, req, s['t_sent'], long_req['t_first']) or 0.0):
            continue
        out.append({'name': s['name'], 'wait_s': s['ttft'], 'rest_of_long_s': round(rest, 4),
                    'fraction': round(s['ttft'] / rest, 4),
                    'step_s': round(longest_step_s(trace, req, s['t_sent'], s['t_first']) or 0.0, 4)})
    return out


def short_during_long_class(trace):
    """'waits_rest_of_long' (every judged S waited >= WAIT_REST_FRACTION of the rest of L's prefill: threshold 0),
    'within_step' (every judged S got its first token within the slowest S alone + WITHIN_STEPS of the engine steps
    during its wait: a threshold below the budget), 'mixed' (some of each, or neither), None (no S was judged)."""
    waits = short_waits(trace)
    if not waits:
        return None
    req = starvation_requests(trace)
    alone = [s['ttft'] for s in req['shorts'] if s['group'] == 'alone' and s['ttft'] is not None]
    slowest_alone = max(alone) if alone else 0.0
    if all(w['fraction'] >= WAIT_REST_FRACTION for w in waits):
        return 'waits_rest_of_long'
    if all(w['wait_s'] <= slowest_alone + WITHIN_STEPS * w['step_s'] for w in waits):
        return 'within_step'
    return 'mixed'


def _metric_samples(trace):
    return [(e['t'], _sums(e['series'])) for e in trace['events'] if e['kind'] == 'metrics']


def waiting_while_short_waits(trace, name='vllm:num_requests_waiting'):
    """`name` (summed over labels) in the polls taken while a judged S waited (EDGE_S off both ends):
    {'samples', 'min', 'max'}, or None when no poll fell inside (e.g. S served at once)."""
    resp = _responses(trace)
    values = []
    for w in short_waits(trace):
        s = resp[w['name']]
        lo, hi = s['t_sent'] + EDGE_S, s['t_first'] - EDGE_S
        values.extend(v[name] for t, v in _metric_samples(trace) if lo <= t <= hi and name in v)
    if not values:
        return None
    return {'samples': len(values), 'min': min(values), 'max': max(values)}


def decode_during_long(trace):
    """D's tokens while L prefilled (L sent .. L's first token): {'tokens', 'largest_gap_s', 'prefill_s',
    'keeps_decoding'}; keeps_decoding: at least 2 tokens and no gap over a quarter of the prefill (gaps measured
    from L's send and to L's first token too). None without D or L."""
    req = starvation_requests(trace)
    long_req, dec = req['long'], req['decode']
    if not long_req or not dec or long_req['t_first'] is None:
        return None
    lo, hi = long_req['t_sent'], long_req['t_first']
    inside = [t for t in dec['chunk_t'] if lo <= t <= hi]
    edges = [lo] + inside + [hi]
    gap = max(b - a for a, b in zip(edges, edges[1:]))
    prefill = hi - lo
    return {'tokens': len(inside), 'largest_gap_s': round(gap, 4), 'prefill_s': round(prefill, 4),
            'keeps_decoding': len(inside) >= 2 and gap <= prefill / 4.0}


def prefill_counters(trace):
    """/metrics polls while L prefilled (EDGE_S off both ends): vllm:prompt_tokens_total's change (L's prompt is
    credited only at its first token: 'long_prompt_credited' False) and whether vllm:kv_cache_usage_perc rose
    (last > first, rising at least twice). None when fewer than 3 polls fell inside."""
    req = starvation_requests(trace)
    long_req = req['long']
    if not long_req or long_req['t_first'] is None:
        return None
    lo, hi = long_req['t_sent'] + EDGE_S, long_req['t_first'] - EDGE_S
    samples = [v for t, v in _metric_samples(trace) if lo <= t <= hi]
    if len(samples) < 3:
        return None
    prompt = [v.get('vllm:prompt_tokens_total', 0.0) for v in samples]
    kv = [v.get('vllm:kv_cache_usage_perc', 0.0) for v in samples]
    tokens = (trace.get('recorded') or {}).get('long_tokens') or 0
    delta = prompt[-1] - prompt[0]
    rises = sum(1 for a, b in zip(kv, kv[1:]) if b > a)
    return {'samples': len(samples), 'prompt_tokens_delta': delta,
            'long_prompt_credited': bool(tokens) and delta >= tokens / 2.0,
            'kv_first': kv[0], 'kv_last': kv[-1], 'kv_cache_rises': kv[-1] > kv[0] and rises >= 2}


def starvation_shapes(trace):
    """What the conformance comparison of a starvation trace compares (shapes, not seconds)."""
    waiting = waiting_while_short_waits(trace)
    decode = decode_during_long(trace)
    counters = prefill_counters(trace)
    return {'short_during_long': short_during_long_class(trace),
            'waiting_while_short_waits': None if waiting is None else waiting['min'] >= 1,
            'decode_keeps_decoding': None if decode is None else decode['keeps_decoding'],
            'long_prompt_credited_during_prefill': None if counters is None else counters['long_prompt_credited'],
            'kv_cache_rises_during_prefill': None if counters is None else counters['kv_cache_rises']}
