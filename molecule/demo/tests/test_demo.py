# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What `make demo` promises, as a user would check it (tests/harness/demo.py is the one source of the endpoint, the
key and the commands it prints): a chat completion through the endpoint with the printed key; then the printed
commands, run as printed from the repository root against molecule/demo/inventory (not Molecule's own inventory):
status shows both ranks running, switch moves the pair to the throughput recipe, rollback brings balanced back."""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys
import urllib.request

import pytest

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'tests', 'harness')
sys.path.insert(0, HARNESS)
import demo  # noqa: E402  pylint: disable=wrong-import-position,import-error

pytestmark = pytest.mark.skipif(not os.environ.get('MOLECULE_INVENTORY_FILE'), reason='runs inside molecule verify only')


def step(name):
    """argv of the printed step whose playbook is playbooks/<name>.yml."""
    return [argv for _what, argv in demo.next_steps() if 'playbooks/%s.yml' % name in argv][0]


def run(argv):
    env = dict(os.environ)
    env.pop('ANSIBLE_INVENTORY', None)  # the printed command's -i decides, as in a user's shell
    proc = subprocess.run(argv, cwd=demo.ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=900, check=False)
    assert proc.returncode == 0, '%s: rc %d\n%s' % (' '.join(argv), proc.returncode, proc.stdout[-4000:])
    return proc.stdout


def served_max_model_len():
    req = urllib.request.Request(demo.ENDPOINT + '/v1/models', headers={'Authorization': 'Bearer ' + demo.api_key()})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read().decode())['data'][0]['max_model_len']


def test_the_printed_endpoint_and_key_answer_a_chat_completion():
    took, answer = demo.chat()
    print('DEMO chat completion in %.2f s: %r' % (took, answer))
    assert answer.strip(), 'empty answer'
    assert 'SIMULATOR' in demo.BANNER


def test_the_printed_commands_use_the_demo_inventory():
    for _what, argv in demo.next_steps():
        assert argv[0] == '.venv/bin/ansible-playbook' and argv[argv.index('-i') + 1] == 'molecule/demo/inventory', argv
        assert os.path.exists(os.path.join(demo.ROOT, argv[1])), argv


def test_status_as_printed():
    out = run(step('status'))
    rows = [ln.split() for ln in out.splitlines() if ln.strip().startswith(('spark1 ', 'spark2 ')) and ' ok=' not in ln]
    assert [r[:3] for r in rows] == [['spark1', 'head', 'active/running'], ['spark2', 'worker', 'active/running']], rows


def test_switch_and_rollback_as_printed():
    assert served_max_model_len() == 131072
    run(step('switch'))
    assert served_max_model_len() == 65536
    run(step('rollback'))
    assert served_max_model_len() == 131072
    took, answer = demo.chat()
    assert answer.strip(), 'no answer after the rollback (%.2f s)' % took
