#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: router_pool
short_description: Take one pair out of vllm-router's rotation and wait for its in-flight requests, or put it back
version_added: 0.1.0
description:
  - For rolling restarts behind vllm-router (role C(dgxspark.ds4.router)), one pair at a time.
  - O(state=drained) removes O(worker_url) from the router (C(POST /remove_worker)); the router sends it no new
    request from then on and lets the requests it already sent finish. The module then waits until the in-flight
    requests read 0 (twice in a row, 0.5 s apart), up to O(drain_timeout).
  - O(state=present) waits until C(<worker_url>/health) answers 200, adds the worker (C(POST /add_worker)) and
    waits until the router's C(GET /workers) shows it healthy, up to O(restore_timeout).
  - Whether anything changes is read from the router's C(GET /list_workers) (a worker evicted by the health
    checker is still listed, so it counts as in rotation). The logic is in C(module_utils/_node/router_admin.py).
  - Run it where the router runs (O(router_url) is usually V(http://127.0.0.1:30000)), so that the pair's URL
    is reached the way the router reaches it.
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Reads the router's worker list and reports what would change; removes, adds and waits for nothing.
  diff_mode:
    support: full
    details: The router's worker list before and after (predicted in check mode).
options:
  router_url:
    description: Base URL of vllm-router's API (its C(--host) and C(--port)), for example V(http://127.0.0.1:30000).
    type: str
    required: true
  worker_url:
    description:
      - The pair head's API URL exactly as the router lists it (the role's C(--worker-urls) entry), for example
        V(http://192.0.2.10:8000). A trailing slash is ignored.
      - O(state=present) takes a list too (every pair behind this router, put back or checked one after the other, in
        one module run); O(state=drained) exactly one.
    type: list
    elements: str
    required: true
  state:
    description:
      - V(drained) takes the worker out of rotation and waits for its in-flight requests.
      - V(present) puts it back and waits until the router shows it healthy.
    type: str
    choices: [drained, present]
    default: present
  drain_timeout:
    description:
      - O(state=drained) - the longest wait in seconds for the in-flight requests to reach 0. On timeout the module
        fails and the worker stays out of rotation.
    type: int
    default: 600
  restore_timeout:
    description:
      - O(state=present) - the longest wait in seconds for the worker's health and the router's acceptance.
    type: int
    default: 600
  metrics_url:
    description:
      - Base URL of the pair head's vLLM server; the in-flight count is C(vllm:num_requests_running) plus
        C(vllm:num_requests_waiting) of its C(/metrics) (it also counts requests that did not come through the
        router). Connection refused reads 0 (a stopped server has nothing in flight).
      - The collection's API proxy answers 404 on C(/metrics); give the head's vLLM address (C(127.0.0.1) on the head)
        or use O(router_metrics_url).
    type: str
  router_metrics_url:
    description:
      - Base URL of the router's Prometheus endpoint (C(--prometheus-host), C(--prometheus-port); the role's default
        V(http://127.0.0.1:29000)); the in-flight count is C(vllm_router_running_requests{worker=<worker_url>}), the
        requests the router sent to the worker and that have not finished.
      - With both O(metrics_url) and O(router_metrics_url) the larger count is awaited. With neither the module
        does not wait (RV(in_flight_waited_s) null).
    type: str
  api_key:
    description: Bearer key for O(metrics_url) (a proxy in front of vLLM). The router's admin API takes no key.
    type: str
  allow_last:
    description:
      - Drain even when no other healthy worker would stay in rotation (clients then get 503
        C(No available workers) until a worker is back). Refused by default.
    type: bool
    default: false
  hold_dir:
    description:
      - Directory of the router host's pool keeper holds (role C(dgxspark.ds4.router), its C(router_hold_dir)).
        O(state=drained) holds the worker there before removing it, so the pool keeper, which adds every
        configured pair that answers, does not put it back; O(state=present) releases it once the router lists it
        healthy. Without it nothing is held.
    type: path
  replaces:
    description:
      - O(state=present) - the URL the pair was drained under, when it now serves on another (O(worker_url)); its
        hold in O(hold_dir) is released too.
    type: str
  verify_models:
    description:
      - O(state=present) - once every O(worker_url) is in rotation and healthy, C(GET /v1/models) through the router (a
        request it forwards to a pair) must answer 200, asked every 2 s for up to O(restore_timeout) s (RV(models)).
    type: bool
    default: false
  models_api_key:
    description: With O(verify_models), the clients' key the model list is asked with (the heads' proxies want one).
    type: str
  waits_for:
    description:
      - O(state=drained) - what O(drain_timeout) stands for, said in RV(msg) (for example the router's request
        timeout it was derived from).
    type: str
  wait_in_flight:
    description:
      - O(state=drained) - V(false) takes the worker out of rotation (and holds it) without waiting for its in-flight
        requests. A drain takes the pair out of every router first, then waits at each (C(tasks/drain.yml)).
    type: bool
    default: true
  stale_after:
    description:
      - O(state=drained) - when the in-flight count stays above 0 without moving for this many seconds, stop waiting
        and return RV(stale)=true (not a failure) with the count in RV(stood_at). vllm-router 0.1.17 can leave its
        C(vllm_router_running_requests) above the worker's real load (it sets the gauge after its load counter, not
        atomically), and a drained worker gets no request that would correct it; C(tasks/drain.yml) then asks the
        pair's own engine (module C(dgxspark.ds4.vllm_idle)) and reads the router again.
      - Not given, a count that stands still is waited for up to O(drain_timeout), then the module fails.
    type: int
  listen_timeout:
    description:
      - How long to wait, in seconds, while the router's port refuses connections (a router that is starting binds
        its port only after checking its workers) before that is an error. The wait is reported in RV(router_wait_s)
        and RV(msg).
    type: int
    default: 120
notes:
  - vllm-router 0.1.17 answers 200 to C(POST /remove_worker) whether or not the worker was there, and refuses
    C(POST /add_worker) (400) for a worker that does not pass its health check within its
    C(--worker-startup-timeout-secs); the module reads the worker list before and after instead of trusting answers.
  - The router's admin endpoints take no key (its C(--api-key) is not asked of clients); keep its port on loopback.
'''

EXAMPLES = r'''
- name: Drain pair 1 at the router before restarting it
  dgxspark.ds4.router_pool:
    router_url: http://127.0.0.1:30000
    worker_url: http://192.0.2.10:8000
    router_metrics_url: http://127.0.0.1:29000
    state: drained
    drain_timeout: 600
  delegate_to: "{{ groups['router'][0] }}"

- name: Put pair 1 back once it is ready
  dgxspark.ds4.router_pool:
    router_url: http://127.0.0.1:30000
    worker_url: http://192.0.2.10:8000
    state: present
  delegate_to: "{{ groups['router'][0] }}"
'''

RETURN = r'''
models:
  description: O(verify_models) - the model IDs the router's C(GET /v1/models) listed.
  returned: when O(verify_models) and not in check mode
  type: list
  elements: str
  sample: [deepseek-v4-flash]
models_waited_s:
  description: O(verify_models) - seconds until the model list answered 200.
  returned: when O(verify_models) and not in check mode
  type: float
  sample: 0.02
changed:
  description: Whether the worker was removed (V(drained)) or added (V(present)), or would be in check mode.
  returned: always
  type: bool
  sample: true
workers_before:
  description: The router's worker list (C(GET /list_workers)) before.
  returned: always
  type: list
  elements: str
  sample: [http://192.0.2.10:8000, http://192.0.2.12:8000]
workers_after:
  description: The router's worker list after (predicted in check mode).
  returned: always
  type: list
  elements: str
  sample: [http://192.0.2.12:8000]
in_flight_waited_s:
  description:
    - Seconds waited for the in-flight requests to reach 0; null when not waited (V(present), check mode, no
      in-flight source).
  returned: always
  type: float
  sample: 3.52
drain_timeout_s:
  description: O(state=drained) - the longest wait for the in-flight requests (O(drain_timeout)); absent otherwise.
  returned: when in-flight requests were awaited
  type: int
  sample: 1810
in_flight_initial:
  description: The in-flight count read right after the removal; null when not read.
  returned: always
  type: int
  sample: 2
waited_s:
  description: O(state=present) - seconds until the router showed the worker healthy; null otherwise.
  returned: always
  type: float
  sample: 0.61
router_wait_s:
  description: Seconds spent waiting for the router to listen (0 when it answered at once).
  returned: always
  type: float
  sample: 0.0
stale:
  description: O(state=drained) with O(stale_after) - the count stood still above 0 and the wait ended there.
  returned: when in-flight requests were awaited, or not (O(wait_in_flight=false))
  type: bool
  sample: false
stood_at:
  description: The count that stood still (RV(stale)=true).
  returned: when RV(stale) is true
  type: int
  sample: 1
stood_from_s:
  description: Second of the wait from which the count stood still (RV(stale)=true).
  returned: when RV(stale) is true
  type: float
  sample: 0.5
wait_bound:
  description: O(state=drained) - how long the wait may last, in words (O(drain_timeout) and O(waits_for)).
  returned: when O(state=drained) waited (not in check mode, not with O(wait_in_flight=false))
  type: str
  sample: "up to 1810 s (the router's request timeout 1800 s + 10 s)"
waited_msg:
  description: O(state=drained) - the wait in words, without the removal (RV(msg) has both).
  returned: when O(state=drained) waited (not in check mode, not with O(wait_in_flight=false))
  type: str
  sample: "waited up to 1810 s (the router's request timeout 1800 s + 10 s) for its in-flight requests: 2 finished in 3.5 s"
msg:
  description: One line saying what was done.
  returned: always
  type: str
  sample: "took http://192.0.2.10:8000 out of rotation; waited up to 1810 s (the router's request timeout 1800 s + 10 s)
    for its in-flight requests: 2 finished in 3.5 s"
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import router_pool_spec


def main():
    module = AnsibleModule(argument_spec=router_pool_spec.ARGUMENT_SPEC, supports_check_mode=True)
    result = router_pool_spec.pool(module.params, check_mode=module.check_mode)
    if result.pop('failed', False):
        module.fail_json(**result)
    if module._diff:
        result['diff'] = router_pool_spec.diff(module.params['router_url'], result['workers_before'],
                                               result['workers_after'])
    module.exit_json(**result)


if __name__ == '__main__':
    main()
