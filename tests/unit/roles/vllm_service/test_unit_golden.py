# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The golden vLLM units (tests/golden/_units/, written by tests/golden/regen_units.py): roles/vllm_service's
vllm.service.j2 rendered by Ansible's template lookup for every shipped recipe, head and worker, and for the role
settings that change its docker run (regen_units.UNIT_VARIANTS), the image Id a fixed fake."""


import glob
import importlib.util
import os

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
_spec = importlib.util.spec_from_file_location('ds4_golden_regen_units', os.path.join(REPO, 'tests', 'golden', 'regen_units.py'))
regen_units = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regen_units)
CASES = regen_units.cases()
HINT = ('the rendered vLLM unit differs from tests/golden/_units/. If the change is intended, run '
        '`.venv/bin/python tests/golden/regen_units.py` and review `git diff tests/golden/_units/`.')


def test_the_golden_tree_is_exactly_the_cases():
    want = sorted(os.path.relpath(out, regen_units.UNITS_DIR) for out, _p, _h, _v in CASES)
    found = sorted(os.path.relpath(os.path.dirname(p), regen_units.UNITS_DIR)
                   for p in glob.glob(os.path.join(regen_units.UNITS_DIR, '**', '*.service'), recursive=True))
    assert found == want, HINT
    # every shipped recipe, both ranks
    assert len([c for c in CASES if not c[3]]) == 2 * len(regen_units.ds4_config.PROFILES) >= 18


@pytest.mark.parametrize('out, profile, host, values', CASES, ids=[os.path.relpath(c[0], regen_units.UNITS_DIR) for c in CASES])
def test_the_rendered_unit_is_the_golden(out, profile, host, values):
    name, text = regen_units.render(profile, host, values)
    assert name == ('dgxspark-ds4-head.service' if host == 'spark1' else 'dgxspark-ds4-worker.service')
    assert sorted(os.listdir(out)) == [name], HINT
    with open(os.path.join(out, name)) as handle:
        assert handle.read() == text, HINT
    # the image the unit runs is the node's image Id, the last word of docker run
    assert '    %s\nExecStop=' % regen_units.FAKE_IMAGE_ID in text
