# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: vllm_router_plan
short_description: vllm-router's worker URLs and command line for several TP=2 pairs
version_added: 0.1.0
description:
  - Checks the pair list and the router settings and renders the vllm-router command line and the unit's
    C(ExecStart=) (logic in C(plugins/plugin_utils/router_config.py)).
  - Returns C(errors) (one sentence each, naming the role variable and the fix; empty when valid), C(worker_urls),
    C(argv), C(exec_start), C(eviction_bound_s) (worst case for a dead or frozen pair to leave rotation),
    C(drain_timeout_s) (how long a rolling operation waits for a drained pair's requests).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: The pairs (name, head, api_host, api_port, served_model, profile), as C(pairs.py) returns them.
    type: list
    elements: dict
    required: true
  settings:
    description: The router settings (the role's C(router_*) knobs without the prefix).
    type: dict
    default: {}
  binary:
    description: Path of the vllm-router executable.
    type: str
    default: vllm-router
  drain_timeout:
    description:
      - A longer drain wait in seconds (C(ds4_rolling_drain_timeout)); below the router's request timeout it is an
        error. Default (null) the request timeout plus a margin.
    type: int
'''

EXAMPLES = r'''
- name: Render the router's command line
  ansible.builtin.debug:
    msg: "{{ router_pairs | dgxspark.ds4.vllm_router_plan({'policy': 'consistent_hash'}, '/opt/r/bin/vllm-router') }}"
'''

RETURN = r'''
_value:
  description: errors, worker_urls, argv, exec_start, eviction_bound_s, drain_timeout_s.
  type: dict
'''

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.router_config import plan


def vllm_router_plan(pairs, settings=None, binary='vllm-router', drain_timeout=None):
    return plan(pairs, settings or {}, binary, drain_timeout)


class FilterModule(object):
    def filters(self):
        return {'vllm_router_plan': vllm_router_plan}
