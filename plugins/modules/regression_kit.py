#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: regression_kit
short_description: Run a recipe's regression kit against one pair and return its numbers
version_added: 0.2.0
description:
  - Runs the regression kit of O(recipe) (C(roles/config/files/regression_kit.yml), passed as O(kit)) against the
    endpoint; C(upgrade.yml) runs it on a changed pair and, at the same time, on a pair still on the old version, then
    compares the two with the C(dgxspark.ds4.regression_verdict) filter.
  - Known answers at temperature 0, tool calls with the recipe's parsers, the garble sweep (that many English prompts
    at once per level, every reply clean), then C(bench.runs) times one decode stream and one long prompt (decode and
    prefill tok/s, the medians), with spec-decode acceptance from C(/metrics) read before and after.
  - A check that fails is returned in C(failures), not raised; the verdict decides. The module fails only when the kit
    itself is unusable.
  - Standard library only; runs on the head (against C(127.0.0.1)) or on the controller.
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: In check mode no request is sent; the kit is resolved and its plan returned.
  diff_mode:
    support: none
options:
  url:
    description:
      - Base URL of the endpoint, for example V(http://127.0.0.1:8000).
      - Default, with O(record), vLLM's own address as that record gives it (its C(engine_url)), so the kit reaches
        what the pair really serves, whatever the inventory says now (a pair still on the old version may serve on
        another port).
    type: str
  record:
    description: The head's live deployment record (C(deployed-head.json)); O(url) and O(model) default to what it
      serves (the launch facts the config compile published when that set was deployed).
    type: path
  model:
    description: Served model name; default, with O(record), the record's.
    type: str
  api_key:
    description: Bearer key for C(/v1) requests (C(Authorization) header). Never logged.
    type: str
  kit:
    description: The kit data (the content of C(roles/config/files/regression_kit.yml)); keys C(default) and C(recipes).
    type: dict
    required: true
  recipe:
    description: The recipe whose kit runs (its entry under C(recipes) over C(default)).
    type: str
    required: true
  tools:
    description: Run the tool calls (false when the recipe has no tool-call parser).
    type: bool
    default: true
  tool_choice:
    description: C(tool_choice) of the tool-call requests, as C(validate.yml) uses it.
    type: str
    choices: [auto, required]
    default: auto
  timeout:
    description: Seconds a single request may take.
    type: float
    default: 300
notes:
  - C(changed) is always false; the kit only reads.
'''

EXAMPLES = r'''
- name: The balanced recipe's kit against the head's API
  dgxspark.ds4.regression_kit:
    url: http://127.0.0.1:8000
    model: deepseek-v4-flash
    kit: "{{ lookup('ansible.builtin.file', 'regression_kit.yml') | from_yaml }}"
    recipe: balanced
  register: kit
'''

RETURN = r'''
url:
  description: The endpoint the kit ran against.
  returned: always
  type: str
model:
  description: The served model name the requests named.
  returned: always
  type: str
ok:
  description: True when every check of the kit passed (the numbers are judged by the verdict).
  returned: always
  type: bool
failures:
  description: One entry per failed check (request, check, excerpt, detail).
  returned: always
  type: list
  elements: dict
decode_tps:
  description: Median decode rate of the bench runs (tokens after the first over the time after the first).
  returned: success
  type: float
prefill_tps:
  description: Median prefill rate of the bench runs (prompt tokens as the server counted them over the time to the first token).
  returned: success
  type: float
acceptance_rate:
  description: Spec-decode acceptance over the kit's window (null without speculative decoding or /metrics).
  returned: success
  type: float
checks:
  description: How many known answers, tool calls and garble requests ran, and what was skipped.
  returned: success
  type: dict
runs:
  description: Each bench run's decode and prefill figures.
  returned: success
  type: list
  elements: dict
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import config_set
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import regression_kit


def endpoint(params):
    """(url, model, problem): the given ones, else what the deployment record says the pair serves."""
    url, model = params['url'], params['model']
    if params['record'] and (not url or not model):
        record = config_set.read_record(params['record'])
        if record is None:
            return None, None, 'cannot read the deployment record %s (absent or not JSON)' % params['record']
        facts = config_set.launch_from_record(record)
        url = url or facts['engine_url']
        model = model or facts['served_model_name']
    if not url or not model:
        return None, None, 'give url and model, or the record of a deployed head (its engine_url and served model)'
    return url, model, None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str'),
            record=dict(type='path'),
            model=dict(type='str'),
            api_key=dict(type='str', no_log=True),
            kit=dict(type='dict', required=True),
            recipe=dict(type='str', required=True),
            tools=dict(type='bool', default=True),
            tool_choice=dict(type='str', default='auto', choices=['auto', 'required']),
            timeout=dict(type='float', default=300.0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    url, model, problem = endpoint(p)
    if problem:
        module.fail_json(msg='regression_kit: %s' % problem)
    kit, problems = regression_kit.resolve_kit(p['kit'], p['recipe'])
    if problems:
        module.fail_json(msg='the regression kit cannot run: %s. Fix roles/config/files/regression_kit.yml.'
                         % '; '.join(problems))
    if module.check_mode:
        module.exit_json(changed=False, ok=True, failures=[], kit=kit, url=url, model=model,
                         msg='check mode: would run the %s kit against %s' % (p['recipe'], url))
    res = regression_kit.run_kit(url, model, kit, api_key=p['api_key'], tools=p['tools'],
                                 tool_choice=p['tool_choice'], timeout=p['timeout'])
    module.exit_json(changed=False, kit=kit, url=url, model=model,
                     msg='%s kit on %s (%s): %s check failure(s), decode %s tok/s, prefill %s tok/s, acceptance %s'
                     % (p['recipe'], url, model, len(res['failures']), res['decode_tps'], res['prefill_tps'],
                        res['acceptance_rate']), **res)


if __name__ == '__main__':
    main()
