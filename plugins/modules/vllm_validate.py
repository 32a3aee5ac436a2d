#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: vllm_validate
short_description: Smoke-check the vLLM endpoint (deterministic answer, tool call, reasoning, garble under concurrency)
version_added: 0.1.0
description:
  - A deterministic prompt at temperature 0 must return the expected answer (C(What is 2+2? Answer with one word.) ->
    C(Four) or C(4)); when O(thinking=true) the reply must carry a C(reasoning) field.
  - A tool-call request must return a well-formed tool call (C(finish_reason) C(tool_calls), the named function,
    arguments that parse as a JSON object with the schema's required keys).
  - Then, for each of O(levels), that many English prompts at once (thinking off); every reply is checked with
    C(plugins/module_utils/_node/garble.py) (unexpected-script ratio and runs, long character runs, token and substring
    loops, leaked chat-template or tool tokens, empty replies).
  - Each failure names the request, the check and an excerpt of the reply.
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
  thinking:
    description: Thinking is on in the deployment (check the reasoning field of the deterministic reply).
    type: bool
    default: false
  tools:
    description: Run the tool-call check.
    type: bool
    default: true
  tool_choice:
    description: C(tool_choice) of the tool-call request. V(auto) needs C(--enable-auto-tool-choice) and
      C(--tool-call-parser); V(required) does not.
    type: str
    choices: [auto, required]
    default: auto
  levels:
    description: Concurrency levels of the garble gate.
    type: list
    elements: int
    default: [1, 2, 4, 6]
  max_tokens:
    description: Output tokens per garble-gate request.
    type: int
    default: 128
  timeout:
    description: Seconds a single request may take.
    type: float
    default: 300
  max_script_ratio:
    description: Largest share of CJK/other-script letters accepted in a reply to an English prompt.
    type: float
    default: 0.05
notes:
  - C(changed) is always false; the checks only read.
'''

EXAMPLES = r'''
- name: Smoke-check the endpoint from the head
  dgxspark.ds4.vllm_validate:
    url: http://127.0.0.1:8000
    model: deepseek-v4-flash
    thinking: true
    levels: [1, 2, 4, 6]
'''

RETURN = r'''
failures:
  description: One entry per failed check.
  returned: always
  type: list
  elements: dict
  sample: [{"request": "c4-r2", "check": "unexpected_script", "excerpt": "Paris 我们 的 模型", "detail": "12 of 20 letters"}]
requests:
  description: Every request with its HTTP status, seconds, an excerpt of the content and its failure count.
  returned: always
  type: list
  elements: dict
model_seconds:
  description: Seconds from the first request sent to the last answer read (the levels one after the other).
  returned: when the checks ran (not in check mode)
  type: float
  sample: 13.92
ok:
  description: True when every check passed.
  returned: always
  type: bool
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import smoke_checks


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str', required=True),
            model=dict(type='str', required=True),
            api_key=dict(type='str', no_log=True),
            thinking=dict(type='bool', default=False),
            tools=dict(type='bool', default=True),
            tool_choice=dict(type='str', default='auto', choices=['auto', 'required']),
            levels=dict(type='list', elements='int', default=[1, 2, 4, 6]),
            max_tokens=dict(type='int', default=128, no_log=False),
            timeout=dict(type='float', default=300.0),
            max_script_ratio=dict(type='float', default=0.05),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=False, ok=True, failures=[], requests=[],
                         msg='check mode: would send the deterministic prompt%s, then %s concurrent prompts to %s'
                         % (', the tool call' if p['tools'] else '', p['levels'], p['url']))
    res = smoke_checks.run_validate(p['url'], p['model'], api_key=p['api_key'], thinking=p['thinking'],
                                    levels=p['levels'], tool_choice=p['tool_choice'], max_tokens=p['max_tokens'],
                                    timeout=p['timeout'], tools_check=p['tools'],
                                    thresholds={'max_script_ratio': p['max_script_ratio']})
    lines = ['%s: %s: %s (%s)' % (f['request'], f['check'], f['excerpt'], f['detail']) for f in res['failures']]
    if not res['ok']:
        module.fail_json(msg='validate failed, %d check(s):\n%s' % (len(lines), '\n'.join(lines)), **res)
    module.exit_json(changed=False, msg=res['summary'], **res)


if __name__ == '__main__':
    main()
