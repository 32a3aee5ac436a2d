# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""README.md's first screen says what has been run on GB10 hardware (nothing yet) and what is proven
here: the simulator, two-node systemd/Docker, the real vLLM CLI parser, the NCCL program on two GPUs."""


import os

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..')
FIRST_SCREEN_LINES = 40


def _first_screen():
    with open(os.path.join(REPO, 'README.md')) as fh:
        return ''.join(fh.readlines()[:FIRST_SCREEN_LINES])


def test_first_screen_says_nothing_has_run_on_gb10_yet():
    text = _first_screen()
    assert 'On GB10 / DGX Spark hardware: nothing yet.' in text
    assert "seeds' own measurements, not ours" in text


def test_first_screen_names_what_is_proven_here_and_the_evidence_exists():
    text = _first_screen()
    for claim in ('vLLM simulator', 'tests/vllm_sim', 'two-node systemd/Docker', 'real vLLM CLI parser',
                  'tools/vllm_flag_schema.py', 'NCCL all-reduce program on two GPUs',
                  'tests/fabric/device-run-2026-11-22.log', 'not the Spark fabric'):
        assert claim in text, claim
    for path in ('tests/vllm_sim', 'tools/vllm_flag_schema.py', 'tests/fabric/device-run-2026-11-22.log',
                 'roles/nccl_fabric/files/ds4_allreduce.py'):
        assert os.path.exists(os.path.join(REPO, path)), path
    with open(os.path.join(REPO, 'tests', 'fabric', 'device-run-2026-11-22.log')) as fh:
        log = fh.read()
    assert log.count('NVIDIA H200') >= 2  # two GPUs, as the README says
    for version in ('0.21.0', '0.22.0', '0.27.1', '0.33.0'):
        assert version in text
        assert os.path.exists(os.path.join(REPO, 'plugins', 'plugin_utils', 'vllm_schemas', 'vllm-%s.json' % version)), version
