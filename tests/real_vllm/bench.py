# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's bench and llama-benchy against the recorder's server; replay of the recorded streams.

record_collection_bench runs bench_sweep.run_sweep (what playbooks/bench.yml runs through the vllm_bench
module) unchanged, with a tap on vllm_client.timed_lines that keeps every SSE line with the clock value
stream_chat used for it. replay_level folds those lines through the same vllm_client.fold_stream and
bench_stats.summarize_level, so a unit test can check that the recorded figures follow from the recorded
stream. run_llama_benchy runs the pinned llama-benchy (PyPI, carried to the GPU machine) against the same
server with a local corpus (the machine has no network).
"""


import hashlib
import json
import os
import subprocess
import sys
import threading
import time

LLAMA_BENCHY_VERSION = '0.4.0'
LLAMA_BENCHY_ARGS = ['--pp', '512', '--tg', '32', '--runs', '2', '--latency-mode', 'none', '--skip-coherence',
                     '--no-adapt-prompt', '--format', 'json']
LLAMA_BENCHY_BOOK_URL = 'https://www.gutenberg.org/files/1661/1661-0.txt'   # its default --book-url (cache key only)


def _mods():
    from ansible_collections.dgxspark.ds4.plugins.module_utils._node import bench_stats, vllm_client  # pylint: disable=import-error
    from ansible_collections.dgxspark.ds4.plugins.module_utils._bench import bench_sweep
    return bench_stats, bench_sweep, vllm_client


class StreamTap:
    """Wraps vllm_client.timed_lines and stream_chat: each stream's (t, line) pairs as stream_chat saw them,
    with its t_start, in request order."""

    def __init__(self, vllm_client):
        self.client = vllm_client
        self.orig_lines = vllm_client.timed_lines
        self.orig_chat = vllm_client.stream_chat
        self.streams = []
        self.local = threading.local()
        self.lock = threading.Lock()

    def timed_lines(self, resp, clock=time.monotonic):
        entry = {'t_start': None, 'lines': []}
        self.local.current = entry
        with self.lock:
            self.streams.append(entry)
        for t, line in self.orig_lines(resp, clock):
            entry['lines'].append([t, line])
            yield t, line

    def stream_chat(self, *args, **kwargs):
        self.local.current = None
        rec = self.orig_chat(*args, **kwargs)
        if self.local.current is not None:
            self.local.current['t_start'] = rec['t_start']
            self.local.current['record'] = dict((k, rec[k]) for k in ('t_first', 't_last', 'completion_tokens', 'error'))
        return rec

    def __enter__(self):
        self.client.timed_lines = self.timed_lines
        self.client.stream_chat = self.stream_chat
        return self

    def __exit__(self, *exc):
        self.client.timed_lines = self.orig_lines
        self.client.stream_chat = self.orig_chat


def record_collection_bench(base_url, model, api_key, levels, max_tokens):
    """run_sweep with every streamed line kept: {'collection': {'report', 'streams': [[streams of level i]...]}}."""
    _stats, sweep, client = _mods()
    per_level = []
    orig_run_level = sweep.run_level
    tap = StreamTap(client)

    def run_level(*args, **kwargs):
        start = len(tap.streams)
        summary = orig_run_level(*args, **kwargs)
        per_level.append(tap.streams[start:])
        return summary

    sweep.run_level = run_level
    try:
        with tap:
            report = sweep.run_sweep(base_url, model, levels=levels, max_tokens=max_tokens, api_key=api_key,
                                     warmup=True, pause_s=0.2)
    finally:
        sweep.run_level = orig_run_level
    return {'collection': {'report': report, 'streams': per_level,
                           'call': 'bench_sweep.run_sweep(base_url, %r, levels=%r, max_tokens=%r, api_key=KEY, warmup=True, '
                                   'pause_s=0.2)' % (model, list(levels), max_tokens)}}


def replay_record(stream):
    """A recorded stream -> the record stream_chat built from it (same fold, same finish)."""
    _stats, _sweep, client = _mods()
    rec = client.new_record()
    rec['t_start'] = stream['t_start']
    rec['status'] = 200
    tools = {}
    done = client.fold_stream(rec, [tuple(pair) for pair in stream['lines']], tools)
    rec['t_end'] = stream['lines'][-1][0] if stream['lines'] else stream['t_start']
    client.finish_record(rec, done, tools)
    return rec


def replay_level(streams, concurrency):
    """bench_stats.summarize_level over the replayed records of one level."""
    stats, _sweep, _client = _mods()
    return stats.summarize_level([replay_record(s) for s in streams], concurrency=concurrency)


def _corpus(path, n_words=60000):
    from real_vllm.driver import words  # pylint: disable=import-error
    with open(path, 'w') as f:
        f.write(words(n_words, 7))


def run_llama_benchy(cluster):
    """llama-benchy (pinned, --no-deps install on the GPU machine) against cluster's head; its JSON and stdout."""
    cache = os.path.join(os.path.expanduser('~'), '.cache', 'llama-benchy')
    os.makedirs(cache, exist_ok=True)
    _corpus(os.path.join(cache, hashlib.md5(LLAMA_BENCHY_BOOK_URL.encode()).hexdigest() + '.txt'))
    result = os.path.join('/tmp', 'llama-benchy-result.json')
    model = cluster.argv['head'][cluster.argv['head'].index('serve') + 1]
    argv = [sys.executable, '-m', 'llama_benchy', '--base-url', 'http://127.0.0.1:%d/v1' % cluster.port,
            '--api-key', cluster.env['VLLM_API_KEY'], '--model', 'tiny', '--served-model-name', 'tiny',
            '--tokenizer', model, '--save-result', result] + LLAMA_BENCHY_ARGS
    t0 = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    except subprocess.TimeoutExpired as exc:
        return {'argv': argv, 'error': 'timeout after 180 s', 'stdout': str(exc.stdout)[-4000:]}
    out = {'version': LLAMA_BENCHY_VERSION, 'argv': [a if a != cluster.env['VLLM_API_KEY'] else '***' for a in argv],
           'rc': proc.returncode, 'wall_s': round(time.monotonic() - t0, 2), 'stdout': proc.stdout[-6000:],
           'stderr': proc.stderr[-3000:]}
    try:
        with open(result) as f:
            out['result'] = json.load(f)
    except (OSError, ValueError) as exc:
        out['result'] = None
        out['result_error'] = str(exc)
    return out
