# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The recorder's test recipe, rendered into both ranks' argv by the collection's own renderer.

The structural part of the command line comes from a production profile's effective config
(ds4_config.compute_effective over inventories/sample-site with ds4_profile=<profile>, exactly what playbooks/render.yml writes into
launch-head.sh / launch-worker.sh): tensor parallelism, the mp executor, --nnodes/--node-rank,
--master-addr/--master-port, --headless on the worker. Only the model-specific engine flags are replaced
by the small test recipe (a tiny random Llama and a local WordLevel tokenizer: DeepSeek's flags do not
apply to it). launch_render.build_argv renders the result, so the flag order and spelling are the
collection's.
"""


import copy
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..', '..'))

PROFILE = 'balanced'
# serve_args taken over from the production profile unchanged (the layout; not model-specific).
STRUCTURAL_ARGS = ('tensor-parallel-size', 'pipeline-parallel-size', 'distributed-executor-backend',
                   'disable-custom-all-reduce', 'enable-chunked-prefill')
API_KEY = 'sk-test-key'
SERVED_NAME = 'tiny'


def _regen():
    """tests/golden/regen.py: the unit tests' inventory loader (also puts ansible_collections on sys.path)."""
    spec = importlib.util.spec_from_file_location('ds4_golden_regen_rv', os.path.join(REPO, 'tests', 'golden', 'regen.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def production_effective(profile=PROFILE):
    """{host: ds4_effective} of both spark hosts of the sample site inventory with -e ds4_profile=<profile>."""
    regen = _regen()
    from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config  # pylint: disable=import-error
    inputs = regen.inputs_for(profile)
    return dict((h, ds4_config.compute_effective(inputs, h)) for h in inputs['spark_hosts'])


def render_cluster(entrypoint, model, engine_args, port, master_port, profile=PROFILE):
    """-> {'head': argv, 'worker': argv} for one two-rank cluster on this host (127.0.0.1).

    entrypoint: argv words before the model (e.g. ['python3', '-m', 'vllm.entrypoints.cli.main', 'serve']).
    engine_args: the test recipe's own serve_args (flag -> value, launch_render conventions).
    """
    effs = production_effective(profile)
    from ansible_collections.dgxspark.ds4.plugins.plugin_utils import launch_render  # pylint: disable=import-error
    out = {}
    for eff in effs.values():
        eff = copy.deepcopy(eff)
        structural = [(k, v) for k, v in eff['serve_args'].items() if k in STRUCTURAL_ARGS]
        missing = [k for k in ('tensor-parallel-size', 'distributed-executor-backend') if k not in dict(structural)]
        if missing:
            raise ValueError('profile %s: serve_args lacks %s; the recorder needs the production layout' % (profile, missing))
        args = dict(structural)
        args['served-model-name'] = SERVED_NAME
        args.update(engine_args)
        eff['serve_args'] = args
        eff['entrypoint'] = list(entrypoint)
        eff['model'] = dict(eff['model'], serve_arg=model)
        eff['api'] = dict(eff['api'], host='127.0.0.1', port=port)
        eff['master_addr'] = '127.0.0.1'
        eff['master_port'] = master_port
        out[eff['role']] = launch_render.build_argv(eff)
    return out
