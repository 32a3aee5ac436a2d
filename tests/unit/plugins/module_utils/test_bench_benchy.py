# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench_benchy: seed 001's llama-benchy cells (verbatim in docs/sources.md), one llama-benchy run per depth, the
command line, the reading of llama-benchy 0.4.0's JSON, ratios per cell, the markdown and the plot series."""


import os

import yaml

from ansible_collections.dgxspark.ds4.plugins.module_utils._bench import bench_benchy as bb
from ansible_collections.dgxspark.ds4.plugins.module_utils._bench import bench_plot

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))


def test_seed_cells_are_rows_of_the_seed_excerpt():
    with open(os.path.join(REPO, 'docs', 'sources.md'), encoding='utf-8') as handle:
        text = handle.read()
    ref = bb.SEED_CELLS['long-context-1m']
    assert '001_9dfc0859543564c6.txt' in ref['source'] and ref['pp'] == 2048 and ref['tg'] == 128
    assert len(ref['cells']) == 5
    for c in ref['cells']:
        depth = '0' if c['depth'] == 0 else '%dK' % (c['depth'] // 1024)
        row = '| c%d | d%s | %s | %.1f | %.1fs |' % (c['concurrency'], depth, '{:,}'.format(int(c['pp_tps'])), c['tg_tps'], c['ttft_s'])
        assert row in text, row


def test_cells_for_profiles():
    ref, pp, tg, cells = bb.cells_for('long-context-1m')
    assert ref is bb.SEED_CELLS['long-context-1m'] and (pp, tg) == (2048, 128)
    assert cells == [(0, 1), (0, 2), (0, 4), (4096, 1), (4096, 2)]
    assert bb.invocations(cells) == [(0, [1, 2, 4]), (4096, [1, 2])]   # c4 d4096 is not run: the seed has no such cell
    assert bb.cells_for('balanced') == (None, 2048, 128, [(0, 1), (0, 2), (0, 4)])


def test_bench_yml_pins_the_module_default_version():
    with open(os.path.join(REPO, 'playbooks', 'bench.yml')) as handle:
        plays = yaml.safe_load(handle)
    assert [p for p in plays if 'vars' in p][0]['vars']['ds4_benchy_version'] == bb.BENCHY_VERSION


def test_argv():
    args = bb.argv('/v/bin/llama-benchy', 'http://h:8000/', 'm', '/tok', 'http://127.0.0.1:9/corpus.txt', 2048, 128, 4096,
                   [1, 2], 3, '/r.json', api_key='k' * 20)
    assert args[:3] == ['/v/bin/llama-benchy', '--base-url', 'http://h:8000/v1']
    s = ' '.join(args)
    for part in ('--model m --served-model-name m --tokenizer /tok', '--pp 2048 --tg 128 --depth 4096 --concurrency 1 2',
                 '--runs 3 --exact-tg --latency-mode api', '--format json --save-result /r.json', '--api-key ' + 'k' * 20):
        assert part in s, part
    assert '--api-key' not in bb.argv('b', 'http://h/v1', 'm', 't', 'u', 1, 2, 0, [1], 1, 'r')


def _metric(mean, std=0.0):
    return {'mean': mean, 'std': std, 'values': [mean]}


RESULT = {'version': '0.4.0', 'benchmarks': [
    {'concurrency': 1, 'context_size': 0, 'prompt_size': 2048, 'response_size': 128, 'is_context_prefill_phase': False,
     'pp_throughput': _metric(1900.0, 10.0), 'tg_throughput': _metric(40.15, 0.5), 'tg_req_throughput': _metric(40.15),
     'e2e_ttft': _metric(1100.0, 20.0)},
    {'concurrency': 2, 'context_size': 4096, 'prompt_size': 2048, 'response_size': 128, 'is_context_prefill_phase': True,
     'pp_throughput': _metric(5000.0)},
    {'concurrency': 2, 'context_size': 4096, 'prompt_size': 2048, 'response_size': 128, 'is_context_prefill_phase': False,
     'pp_throughput': _metric(2100.0), 'tg_throughput': _metric(70.0), 'tg_req_throughput': _metric(35.0),
     'e2e_ttft': None}]}


def test_parse_compare_and_markdown():
    cells = bb.parse_results(RESULT)
    assert [(c['depth'], c['concurrency']) for c in cells] == [(0, 1), (4096, 2)]    # context-load phase left out
    assert cells[0]['ttft_s'] == 1.1 and cells[1]['ttft_s'] is None and cells[1]['tg_req_tps'] == 35.0
    report = bb.build_report('http://h:8000', 'm', 'long-context-1m', 2048, 128, 3, cells, bb.SEED_CELLS['long-context-1m'],
                             '0.4.0', 'a', 'b', '/tok', 'x.txt')
    c1, c2 = report['cells']
    assert c1['seed_pp_tps'] == 1942.0 and c1['pp_ratio'] == round(1900.0 / 1942.0, 3) and c1['tg_ratio'] == 1.1
    assert c2['seed_tg_tps'] == 38.3 and c2['tg_ratio'] == round(70.0 / 38.3, 3)
    md = bb.markdown_report(report)
    assert '| c1 d0 | 1900.0 ± 10.0 | 40.1 ± 0.5 | 40.1 | 1.10 ± 0.02 | 1942.0 | 36.5 | 1.2 | 0.98x | 1.10x |' in md, md
    assert '| c2 d4096 | 2100.0 ± 0.0 | 70.0 ± 0.0 | 35.0 | - | 2028.0 | 38.3 | 5.0 | 1.04x | 1.83x |' in md, md
    assert "'Concurrency (pp2048, tg128)' table" in md
    series = bench_plot.benchy_series(report)
    assert series['labels'] == ['c1 d0', 'c2 d4096'] and series['seed_tg'] == [36.5, 38.3] and series['pp'] == [1900.0, 2100.0]


def test_markdown_without_seed():
    report = bb.build_report('u', 'm', 'balanced', 2048, 128, 3, bb.parse_results(RESULT)[:1], None, '0.4.0', 'a', 'b', 't', 'c',
                             errors=['depth 4096: llama-benchy exited 1: boom'])
    md = bb.markdown_report(report)
    assert '| - | - | - | - | - |' in md and 'No seed llama-benchy figures for this profile' in md
    assert '- depth 4096: llama-benchy exited 1: boom' in md
