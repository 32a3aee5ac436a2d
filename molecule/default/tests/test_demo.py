# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What `make demo` promises, as a user would check it (tests/harness/demo.py is the one source of the endpoint, the
key and the commands it prints; this scenario is what `make demo` brings up, on the demo's inventory): a chat
completion through the endpoint with the printed key; the printed commands name the demo inventory; status, run as
printed from the repository root against molecule/demo/inventory (not Molecule's own inventory), shows both ranks
running. The printed switch and rollback are run as printed by test_zz_ops.py (the scenario's switch test)."""


import os
import sys

import pytest

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'tests', 'harness')
sys.path.insert(0, HARNESS)
import demo  # noqa: E402  pylint: disable=wrong-import-position,import-error
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not os.environ.get('MOLECULE_INVENTORY_FILE'), reason='runs inside molecule verify only')


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
    out = d.run_printed(demo.step('status'))
    rows = [ln.split() for ln in out.splitlines() if ln.strip().startswith(('spark1 ', 'spark2 ')) and ' ok=' not in ln]
    assert [r[:3] for r in rows] == [['spark1', 'head', 'active/running'], ['spark2', 'worker', 'active/running']], rows
