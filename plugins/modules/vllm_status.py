#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: vllm_status
short_description: One status row for this rank (unit, container, image, profile, uptime; head - endpoint and /metrics)
version_added: 0.1.0
description:
  - Reads C(systemctl show) of the unit, C(docker inspect) of the container and the deployment evidence file
    (C(/var/lib/dgxspark-ds4/deployed-<role>.json), with the profile and the image).
  - On the head also C(GET /health), C(GET /v1/models), a short chat completion (the endpoint answer, thinking off)
    and C(/metrics) (KV cache usage, running and waiting requests).
  - The rows of both ranks become one table with the C(dgxspark.ds4.status_table) filter.
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
  - dgxspark.ds4.vllm_endpoint
attributes:
  check_mode:
    support: full
    details: Reads only; runs the same in check mode.
  diff_mode:
    support: none
options:
  node:
    description: Node name shown in the row (the inventory name).
    type: str
    default: ''
  role:
    description: V(head) or V(worker).
    type: str
    required: true
    choices: [head, worker]
  unit:
    description: systemd unit of this rank.
    type: str
    required: true
  container:
    description: Container name of this rank.
    type: str
    required: true
  evidence:
    description: Deployment evidence file written by the vllm_service role.
    type: path
  guard_state:
    description:
      - The pair guard's state file (head, C(/var/lib/dgxspark-ds4/pairguard-state.json)) - pair restarts by cause, hangs
        found by the watchdog, storm stops, the last cause and the last hang with its evidence directory.
      - Absent or unreadable = no guard line.
      - Also the quality canary's last run (pass or failure with its reason and evidence directory, timings against
        the pair's baseline, runs, failures, skips, and the inconclusive ones - no answer while the pair was busy).
    type: path
  guard_config:
    description:
      - The pair guard's config (head, C(/etc/dgxspark-ds4/pairguard.json)); only its C(canary) (on or off) and
        C(canary_interval_s) are read, for the quality canary line.
      - Absent or unreadable = the canary line comes from O(guard_state) alone.
    type: path
  crash_hold:
    description:
      - The boot forensics' record of a crash incident (head, C(/var/lib/dgxspark-ds4/crash-hold.json)) - the previous
        boot's crash signatures of both nodes, whether the pair is held, the fix, the evidence and how to release it.
      - Absent = no incident to report (none found, or acknowledged with playbooks/ack.yml).
    type: path
  url:
    description: Base URL of the endpoint (head only; the worker serves no HTTP), for example V(http://127.0.0.1:8000).
    type: str
    required: false
  chat:
    description: Send a short chat completion (head only).
    type: bool
    default: true
  timeout:
    description: Seconds per HTTP request.
    type: float
    default: 30
  docker_cli:
    description: Docker client.
    type: str
    default: docker
'''

EXAMPLES = r'''
- name: Status of this rank
  dgxspark.ds4.vllm_status:
    role: head
    unit: dgxspark-ds4-head.service
    container: dgxspark-ds4-head
    evidence: /var/lib/dgxspark-ds4/deployed-head.json
    url: http://127.0.0.1:8000
  register: ds4_status
'''

RETURN = r'''
row:
  description: Node, role, unit state, container state, image (short ID, full ID, ref), profile, uptime, endpoint answer,
    KV cache usage and running/waiting requests, healthy; with O(guard_state) also C(guard) (restarts, hangs, storm
    stops, last cause, last restart and last hang, evidence directory, the memory guard's gates and stops, a one-line
    text); with O(guard_state) or O(guard_config) also C(canary) (the quality canary - on or off, interval, runs,
    failures, skips, inconclusive runs, failures in a row, the last run's result, reason, evidence and timings, the baseline, a one-line
    text); with O(crash_hold) and an incident also C(crash) (held or not, incident, signatures, the lines that name
    the cause, the fix, the evidence and playbooks/ack.yml).
  returned: always
  type: dict
'''

import json
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe, ops_status, vllm_client

PROMPT = 'Reply with exactly: OK'


def _endpoint(url, api_key, chat, timeout):
    out = {}
    try:
        out['health'] = vllm_client.get(url, '/health', timeout=timeout)[0]
        st, text = vllm_client.get(url, '/v1/models', api_key=api_key, timeout=timeout)
        if st == 200:
            out['model'] = (json.loads(text).get('data') or [{}])[0].get('id')
        else:
            out['model'] = 'HTTP %s' % st
        if chat and out['health'] == 200 and st == 200:
            body = {'model': out['model'], 'messages': [{'role': 'user', 'content': PROMPT}], 'max_tokens': 16,
                    'temperature': 0, 'chat_template_kwargs': {'thinking': False, 'enable_thinking': False}}
            st, resp, secs = vllm_client.post_json(url, '/v1/chat/completions', body, api_key, timeout)
            if st == 200 and isinstance(resp, dict):
                out['answer'] = ((resp.get('choices') or [{}])[0].get('message') or {}).get('content') or ''
                out['seconds'] = secs
            else:
                out['error'] = 'chat %s: %s' % (st, str(resp)[:80])
        st, text = vllm_client.get(url, '/metrics', timeout=timeout)
        if st == 200:
            out['metrics'] = ops_status.metrics_summary(text)
    except Exception as exc:  # pylint: disable=broad-except
        out['error'] = '%s: %s' % (type(exc).__name__, getattr(exc, 'reason', exc))
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            node=dict(type='str', default=''),
            role=dict(type='str', required=True, choices=['head', 'worker']),
            unit=dict(type='str', required=True),
            container=dict(type='str', required=True),
            evidence=dict(type='path'),
            guard_state=dict(type='path'),
            guard_config=dict(type='path'),
            crash_hold=dict(type='path'),
            url=dict(type='str'),
            api_key=dict(type='str', no_log=True),
            chat=dict(type='bool', default=True),
            timeout=dict(type='float', default=30.0),
            docker_cli=dict(type='str', default='docker'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    unit = {'ActiveState': 'no-systemctl', 'SubState': '-'}
    systemctl = module.get_bin_path('systemctl')
    if systemctl:
        unit = node_probe.probe_unit(module.run_command, p['unit'], ops_status.UNIT_PROPS, systemctl=systemctl).value
    docker = module.get_bin_path(p['docker_cli'])
    container = None
    if docker:
        container = node_probe.probe_container(module.run_command, p['container'], docker, fmt=None,
                                               parse=node_probe.parse_container_inspect).value
    if container is None:
        container = node_probe.parse_container_inspect('[]')
    if not docker:
        container['status'] = 'no docker CLI'
    deployed = None
    if p['evidence']:
        try:
            with open(p['evidence']) as f:
                deployed = json.load(f)
        except (IOError, OSError, ValueError):
            deployed = None
    guard = ops_status.read_json(p['guard_state'])
    crash = ops_status.read_json(p['crash_hold'])
    guard_config = ops_status.read_json(p['guard_config'])
    endpoint = None
    if p['role'] == 'head' and p['url']:
        endpoint = _endpoint(p['url'], p['api_key'], p['chat'], p['timeout'])
    row = ops_status.build_row(p['node'], p['role'], unit, container, deployed, endpoint, time.time(), guard, crash,
                               guard_config)
    msg = '%s %s, container %s, endpoint %s' % (p['role'], row['unit'], row['container'], row['endpoint'])
    module.exit_json(changed=False, row=row, msg=msg)


if __name__ == '__main__':
    main()
