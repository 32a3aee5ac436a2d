#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: vllm_bench_mixed
short_description: A short request's time to first token while a long prompt prefills, beside the long prompt's own time
version_added: 0.1.0
description:
  - Runs C(plugins/module_utils/_bench/bench_mixed.py) C(run_mixed) against the endpoint. First O(short_requests) short streamed
    requests one after the other (short alone), then one long prompt of about O(long_tokens) tokens, and, O(during_delay)
    seconds later while it prefills, the short requests again one after the other until the long prompt's first token.
  - Returns both figures - the short requests' TTFT during the long prefill over their TTFT alone (median / median), and
    the long prompt's own time to first token - which C(--long-prefill-token-threshold) trades against each other
    (C(ds4_interactive_long_prompts), docs/profiles.md "Interactive during long prompts").
  - Prompts are random words C(w<number>) (one token each on the recorder's test tokenizer; on a real tokenizer a word
    is one token or a few, so O(long_tokens) is approximate; the report holds the API's own C(usage.prompt_tokens)).
    Each run draws new words, so no request hits the prefix cache of another.
  - Standard library only (the collection's C(vllm_client)); runs on the head (against C(127.0.0.1)) or on the controller.
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
  long_tokens:
    description: Size of the long prompt in words (about that many tokens). Must stay below O(max_model_len) when given.
    type: int
    default: 250000
  short_requests:
    description: Short requests alone, and at most as many during the long prefill.
    type: int
    default: 5
  short_tokens:
    description: Size of each short prompt in words.
    type: int
    default: 30
  short_max_tokens:
    description: Output tokens of each short request.
    type: int
    default: 8
  long_max_tokens:
    description: Output tokens of the long request.
    type: int
    default: 8
  during_delay:
    description:
      - Seconds between the long prompt's admission and the first short one during its prefill.
      - The admission is seen on O(metrics_url) when given; without it the seconds count from sending the long prompt.
    type: float
    default: 1.0
  metrics_url:
    description:
      - The vLLM server's own base URL (C(http://127.0.0.1:8000) on the head), whose C(/metrics) the API front does not
        pass on. The short requests wait until C(vllm:num_requests_running) rises above its value before the long prompt
        was sent, then O(during_delay) seconds. A long prompt is tokenized before it is scheduled; on a busy host that can
        take longer than O(during_delay), and a short request sent before the prefill began is not starved by it.
      - When C(/metrics) cannot be read the report's C(admission_note) says why and O(during_delay) counts from sending.
    type: str
  short_gap:
    description: Seconds between two short requests.
    type: float
    default: 0.2
  timeout:
    description: Seconds one request may take, the long prompt's whole prefill included.
    type: float
    default: 1800
  endpoint:
    description: C(completions) (the prompt is exactly the words) or C(chat) (one user message).
    type: str
    choices: [completions, chat]
    default: completions
  ca_file:
    description: PEM CA bundle that signs the endpoint's certificate (https URL); empty uses the system's trust store.
    type: path
  max_model_len:
    description: The server's C(--max-model-len); a O(long_tokens) that does not fit is refused before any request.
    type: int
  profile:
    description: Profile name, for the report.
    type: str
  threshold:
    description: The C(--long-prefill-token-threshold) the inventory configures (0 or unset = vLLM's default), for the report.
    type: int
  fail_on_errors:
    description: Fail the task when any request failed.
    type: bool
    default: true
notes:
  - C(changed) is always false; the bench reads.
'''

EXAMPLES = r'''
- name: Short requests during a 100K-token prefill
  dgxspark.ds4.vllm_bench_mixed:
    url: http://127.0.0.1:8000
    metrics_url: http://127.0.0.1:8000
    model: deepseek-v4-flash
    long_tokens: 100000
    profile: long-context-1m
    threshold: 7168
  register: ds4_bench_mixed
'''

RETURN = r'''
report:
  description: bench_mixed.run_mixed's result (long, short_alone, short_during, medians, ratios, settings, admission_note, errors) plus
    tool C(mixed), profile and threshold.
  returned: success
  type: dict
markdown:
  description: The report as a markdown document.
  returned: success
  type: str
errors:
  description: Failed requests.
  returned: success
  type: int
  sample: 0
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._bench import bench_mixed


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str', required=True),
            model=dict(type='str', required=True),
            api_key=dict(type='str', no_log=True),
            long_tokens=dict(type='int', default=250000, no_log=False),
            short_requests=dict(type='int', default=5),
            short_tokens=dict(type='int', default=30, no_log=False),
            short_max_tokens=dict(type='int', default=8, no_log=False),
            long_max_tokens=dict(type='int', default=8, no_log=False),
            during_delay=dict(type='float', default=1.0),
            metrics_url=dict(type='str'),
            short_gap=dict(type='float', default=0.2),
            timeout=dict(type='float', default=1800.0),
            endpoint=dict(type='str', choices=['completions', 'chat'], default='completions'),
            ca_file=dict(type='path'),
            max_model_len=dict(type='int'),
            profile=dict(type='str'),
            threshold=dict(type='int'),
            fail_on_errors=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    for name in ('long_tokens', 'short_requests', 'short_tokens', 'short_max_tokens', 'long_max_tokens'):
        if p[name] < 1:
            module.fail_json(msg='%s = %r: must be >= 1' % (name, p[name]))
    if p['max_model_len'] and p['long_tokens'] + p['long_max_tokens'] + 64 > p['max_model_len']:
        module.fail_json(msg='long_tokens = %d does not fit --max-model-len %d (with %d output tokens and room for the template). '
                             'Fix: a smaller long_tokens (ds4_bench_mixed_long_tokens), e.g. %d'
                             % (p['long_tokens'], p['max_model_len'], p['long_max_tokens'],
                                max(1, int(p['max_model_len'] * 0.9))))
    if p['ca_file'] and not os.path.isfile(p['ca_file']):
        module.fail_json(msg='ca_file = %r does not exist on this host. Fix: give the CA bundle that signs %s' % (p['ca_file'], p['url']))
    if module.check_mode:
        module.exit_json(changed=False, errors=0,
                         msg='check mode: would send %d short requests alone, then a %d-token prompt with short requests '
                             'during its prefill, against %s' % (p['short_requests'], p['long_tokens'], p['url']))
    report = bench_mixed.run_mixed(p['url'], p['model'], api_key=p['api_key'], long_tokens=p['long_tokens'],
                                   short_requests=p['short_requests'], short_max_tokens=p['short_max_tokens'],
                                   long_max_tokens=p['long_max_tokens'], timeout_s=p['timeout'], ca_file=p['ca_file'],
                                   short_tokens=p['short_tokens'], during_delay_s=p['during_delay'], short_gap_s=p['short_gap'],
                                   path=bench_mixed.CHAT if p['endpoint'] == 'chat' else bench_mixed.COMPLETIONS,
                                   metrics_url=p['metrics_url'])
    report.update(tool='mixed', profile=p['profile'], threshold=p['threshold'] or 0)
    md = bench_mixed.markdown_report(report)
    msg = bench_mixed.summary_line(report)
    errors = len(report['errors'])
    if errors and p['fail_on_errors']:
        module.fail_json(msg=msg, report=report, markdown=md, errors=errors)
    module.exit_json(changed=False, msg=msg, report=report, markdown=md, errors=errors)


if __name__ == '__main__':
    main()
