#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: vllm_idle
short_description: Wait until the pair head's own vLLM has had no request in flight for a while
version_added: 0.1.0
description:
  - Reads C(vllm:num_requests_running) plus C(vllm:num_requests_waiting) from the C(/metrics) of the vLLM server at
    O(url) every 0.5 s, and returns once every read for O(quiet_for) seconds in a row was 0. Connection refused reads
    0 (a stopped server has nothing in flight).
  - A drain (C(tasks/drain.yml)) runs it on the pair's head when a router's in-flight count for the pair stood still
    above 0 (module C(dgxspark.ds4.router_pool), O(dgxspark.ds4.router_pool#module:stale_after)). A long request keeps
    the engine busy and is waited for; a router count with nothing behind it is not.
  - Reads only; never changes anything. The logic is C(wait_engine_quiet) in C(module_utils/_node/router_admin.py).
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Reads and waits as in a normal run (it changes nothing either way).
  diff_mode:
    support: none
options:
  url:
    description:
      - Base URL of the head's vLLM server as the head reaches it (vLLM binds loopback behind the collection's API
        proxy, whose port does not serve C(/metrics)), for example V(http://127.0.0.1:8001).
    type: str
    required: true
  api_key:
    description: Bearer key sent with the C(/metrics) request.
    type: str
  quiet_for:
    description: Seconds in a row that every read must be 0.
    type: int
    default: 10
  timeout:
    description: The longest wait in seconds; a server still busy then fails the module.
    type: int
    default: 600
'''

EXAMPLES = r'''
- name: The pair's engine has nothing in flight for 10 s
  dgxspark.ds4.vllm_idle:
    url: http://127.0.0.1:8001
    quiet_for: 10
    timeout: 1810
'''

RETURN = r'''
changed:
  description: Always false.
  returned: always
  type: bool
  sample: false
waited_s:
  description: Seconds from the first read to the last.
  returned: always
  type: float
  sample: 10.02
in_flight_initial:
  description: Running plus waiting requests at the first read (null when it could not be read).
  returned: always
  type: int
  sample: 0
in_flight_max:
  description: The most running plus waiting requests read.
  returned: always
  type: int
  sample: 1
quiet_for_s:
  description: O(quiet_for).
  returned: always
  type: int
  sample: 10
reads:
  description: How many times C(/metrics) was read.
  returned: always
  type: int
  sample: 21
msg:
  description: One line saying what was read.
  returned: always
  type: str
  sample: "the vLLM server at http://127.0.0.1:8001 had nothing in flight for 10 s (read 21 times in 10.0 s; at most 0)"
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import router_admin


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str', required=True),
            api_key=dict(type='str', no_log=True),
            quiet_for=dict(type='int', default=router_admin.ENGINE_QUIET_S),
            timeout=dict(type='int', default=600),
        ),
        supports_check_mode=True,
    )
    p = module.params
    for key in ('quiet_for', 'timeout'):
        if p[key] < 0:
            module.fail_json(msg='%s = %d: must be at least 0' % (key, p[key]))
    try:
        result = router_admin.wait_engine_quiet(p['url'], api_key=p['api_key'], quiet_for=p['quiet_for'],
                                                timeout=p['timeout'])
    except router_admin.RouterAdminError as exc:
        module.fail_json(msg=exc.msg, changed=False, **exc.fields)
    result['msg'] = ('the vLLM server at %s had nothing in flight for %s s (read %d times in %.1f s; at most %d)'
                     % (router_admin.normalize_url(p['url']), p['quiet_for'], result['reads'], result['waited_s'],
                        result['in_flight_max']))
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
