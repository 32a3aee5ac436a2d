# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stand-in container filesystem for running the simulator outside a container (TEST CODE ONLY).

The simulator checks at start what vLLM checks (checks.py): the model directory holds config.json
and its weights, the cache directories are writable. Tests that run it as a plain process point
VLLM_SIM_ROOT at a directory made here, so `/models/ds4` and `~/.cache/vllm` resolve inside it and
nothing is written to the real / or $HOME.
"""


import atexit
import json
import os
import shutil
import tempfile


def make_model(path, shards=2, index=True, config=True):
    """A synthetic model directory: config.json, `shards` safetensors files and their index."""
    if not os.path.isdir(path):
        os.makedirs(path)
    if config:
        with open(os.path.join(path, 'config.json'), 'w') as handle:
            json.dump({'stand_in': True, 'architectures': ['DeepseekV4ForCausalLM']}, handle)
    names = ['model-%05d-of-%05d.safetensors' % (i, shards) for i in range(1, shards + 1)]
    for name in names:
        with open(os.path.join(path, name), 'wb') as handle:
            handle.write(b'\0' * 64)
    if index:
        weight_map = {'model.layers.%d.weight' % i: name for i, name in enumerate(names)}
        with open(os.path.join(path, 'model.safetensors.index.json'), 'w') as handle:
            json.dump({'metadata': {'total_size': 64 * shards}, 'weight_map': weight_map}, handle)
    return path


def make_root(root, models=('/models/ds4',), shards=2):
    """A container root (VLLM_SIM_ROOT) holding each model path of `models`; returns root."""
    for model in models:
        make_model(os.path.join(root, model.lstrip('/')), shards=shards)
    return root


def temp_root(models=('/models/ds4',), shards=2):
    """make_root in a new temporary directory, removed when the interpreter exits; returns its path."""
    root = tempfile.mkdtemp(prefix='ds4-vllm-sim-root-')
    atexit.register(shutil.rmtree, root, True)
    return make_root(root, models, shards)
