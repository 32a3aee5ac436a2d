# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`python3 -m vllm_sim ...` == `vllm ...` (simulator: a stand-in for vLLM, test code only)."""


import sys

from vllm_sim.cli import main

sys.exit(main())
