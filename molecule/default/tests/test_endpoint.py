# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deployed pair answers from the controller, and the idempotence run restarted nothing.

The endpoint is the vLLM simulator (tests/vllm_sim, a stand-in) launched by the real units
with the balanced profile's rendered launch scripts; vLLM listens on 127.0.0.1 and the api_proxy
role's nginx serves the head's fabric address to the controller (allowed network, API key).
"""


import json
import os
import time
import urllib.error
import urllib.request

import testinfra.utils.ansible_runner

INVENTORY = os.environ.get('MOLECULE_INVENTORY_FILE')
RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY) if INVENTORY else None
testinfra_hosts = RUNNER.get_hosts('spark') if RUNNER else []

HEAD_URL = 'http://%s.11:8000' % (os.environ.get('DS4_MOLECULE_NET') or '10.77.0')
# The test deployment opens the API to the controller (10.77.0.1/32) through the api_proxy role,
# which requires one of ds4_api_keys (molecule/resources/inventory/group_vars/spark/test.yml).
API_KEY = 'ds4-molecule-controller-key-0000'


def _request(path, body=None, timeout=10.0):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(HEAD_URL + path, data=data, headers={'Content-Type': 'application/json',
                                                                      'Authorization': 'Bearer ' + API_KEY})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, resp.read()


def _wait_ready(deadline_s=90.0):
    end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < end:
        try:
            status, _body = _request('/health', timeout=2.0)
            if status == 200:
                return
        except (urllib.error.URLError, ConnectionError, OSError) as exc:  # refused while loading
            last = exc
        time.sleep(0.5)
    raise AssertionError('head API not ready within %.0f s: %s' % (deadline_s, last))


def test_chat_completion_from_controller(host):
    if host.backend.get_hostname() != 'spark1':
        return
    _wait_ready()
    status, body = _request('/v1/models')
    models = json.loads(body)
    assert status == 200
    assert models['data'][0]['id'] == 'deepseek-v4-flash'
    assert models['data'][0]['max_model_len'] == 131072
    status, body = _request('/v1/chat/completions', {
        'model': 'deepseek-v4-flash',
        'messages': [{'role': 'user', 'content': 'What is 2+2? Answer with one word.'}],
        'temperature': 0,
        'max_tokens': 16,
    }, timeout=30.0)
    reply = json.loads(body)
    assert status == 200
    assert reply['choices'][0]['message']['content'].strip() == 'Four'
    # balanced has thinking on (default-chat-template-kwargs) and a reasoning parser.
    assert reply['choices'][0]['message'].get('reasoning')
    assert reply['usage']['completion_tokens'] > 0
