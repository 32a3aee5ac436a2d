# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm_sim: a STAND-IN for vLLM used only by the dgxspark.ds4 tests.

This is test code. It is not vLLM, it runs no model, and it is never shipped in the
collection nor deployed to real nodes. It mimics what the collection depends on:
the `vllm serve` command line, the startup log lines, the closed-then-open API port,
the OpenAI-compatible endpoints, Prometheus metrics, the two-node TCP rendezvous and
vLLM's failure messages. Pure Python 3.9+ standard library. See README.md.
"""


STAND_IN_NOTICE = ('vllm-sim: this is a STAND-IN for vLLM (dgxspark.ds4 tests/vllm_sim), test code only; '
                   'it runs no model and is never deployed to real nodes.')
