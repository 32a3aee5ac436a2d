#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: vllm_bench
short_description: Concurrency sweep against the vLLM endpoint (decode tok/s, TTFT, errors, spec-decode acceptance)
version_added: 0.1.0
description:
  - For each concurrency level sends that many streamed C(/v1/chat/completions) requests at once (temperature 0,
    C(ignore_eos), O(max_tokens) output tokens, thinking as O(thinking)) and computes, with
    C(plugins/module_utils/_node/bench_stats.py), the aggregate decode tok/s over the steady-state window (every stream
    past its first token, none finished), per-stream decode tok/s (C((completion_tokens - 1) / (t_last - t_first))),
    TTFT p50/p95 and errors. Token counts come from the final streamed C(usage) chunk.
  - Scrapes C(/metrics) before and after each level; speculative-decoding acceptance per draft position is the ratio
    of the counter deltas (C(vllm:spec_decode_num_accepted_tokens_per_pos_total) / C(vllm:spec_decode_num_drafts_total)).
  - Levels above O(max_num_seqs) are skipped (the requests would queue, so no steady state exists).
  - Returns the report (and its markdown); bench.yml writes the JSON, the markdown and the plot on the controller.
  - Standard library only; runs on the head (against C(127.0.0.1)) or on the controller.
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
  - dgxspark.ds4.vllm_endpoint
  - dgxspark.ds4.vllm_endpoint.model
attributes:
  check_mode:
    support: full
    details: In check mode no request is sent; the plan is returned.
  diff_mode:
    support: none
options:
  levels:
    description: Concurrency levels, in order.
    type: list
    elements: int
    default: [1, 2, 4, 8, 16]
  max_tokens:
    description: Output tokens per request (C(ignore_eos) makes every stream produce all of them).
    type: int
    default: 256
  thinking:
    description: Thinking on or off (C(chat_template_kwargs)); seed 000 measured with thinking off.
    type: bool
    default: false
  prompt:
    description: The prompt of every request; default a long-essay request.
    type: str
  max_num_seqs:
    description: The server's C(--max-num-seqs); levels above it are skipped. Unset = run every level.
    type: int
  profile:
    description: Profile name, selects the seed reference figures reported beside the measurement.
    type: str
  warmup:
    description: Send one short request first (prefix cache warm, as in seed 000).
    type: bool
    default: true
  timeout:
    description: Seconds a single request may take.
    type: float
    default: 600
  fail_on_errors:
    description: Fail the task when any request failed.
    type: bool
    default: true
notes:
  - C(changed) is always false; the sweep reads.
'''

EXAMPLES = r'''
- name: Sweep 1..16 streams on the head
  dgxspark.ds4.vllm_bench:
    url: http://127.0.0.1:8000
    model: deepseek-v4-flash
    profile: throughput
    levels: [1, 2, 4, 8, 16]
  register: ds4_bench
'''

RETURN = r'''
report:
  description: Settings, method, per-level statistics (bench_stats.summarize_level plus spec_decode, server generation
    tokens, wall time), skipped levels, the seed reference and the comparison with it.
  returned: success
  type: dict
markdown:
  description: The report as a markdown document (method header, one table row per level).
  returned: success
  type: str
errors:
  description: Failed requests over all levels.
  returned: success
  type: int
  sample: 0
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._bench import bench_sweep


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str', required=True),
            model=dict(type='str', required=True),
            api_key=dict(type='str', no_log=True),
            levels=dict(type='list', elements='int', default=[1, 2, 4, 8, 16]),
            max_tokens=dict(type='int', default=256, no_log=False),
            thinking=dict(type='bool', default=False),
            prompt=dict(type='str'),
            max_num_seqs=dict(type='int'),
            profile=dict(type='str'),
            warmup=dict(type='bool', default=True),
            timeout=dict(type='float', default=600.0),
            fail_on_errors=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if any(n < 1 for n in p['levels']) or p['max_tokens'] < 2:
        module.fail_json(msg='levels must be >= 1 and max_tokens >= 2 (decode rate needs two tokens)')
    if module.check_mode:
        module.exit_json(changed=False, msg='check mode: would run levels %s with %d output tokens against %s'
                         % (p['levels'], p['max_tokens'], p['url']), errors=0)
    report = bench_sweep.run_sweep(p['url'], p['model'], levels=p['levels'], max_tokens=p['max_tokens'],
                                   thinking=p['thinking'], prompt=p['prompt'] or bench_sweep.DEFAULT_PROMPT,
                                   api_key=p['api_key'], profile=p['profile'], max_num_seqs=p['max_num_seqs'],
                                   warmup=p['warmup'], timeout=p['timeout'])
    md = bench_sweep.markdown_report(report)
    parts = []
    for lv in report['levels']:
        agg = lv.get('aggregate_tps')
        parts.append('c%d %s tok/s' % (lv['concurrency'], '%.1f' % agg if agg is not None else '-'))
    msg = 'aggregate decode: %s; %d error(s)' % (', '.join(parts), report['errors'])
    if report['errors'] and p['fail_on_errors']:
        module.fail_json(msg=msg, report=report, markdown=md, errors=report['errors'])
    module.exit_json(changed=False, msg=msg, report=report, markdown=md, errors=report['errors'])


if __name__ == '__main__':
    main()
