# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM's own `vllm serve` flag schema, as the simulator's parser (a STAND-IN for vLLM, test code only).

The schema files are the collection's (`plugins/plugin_utils/vllm_schemas/vllm-<version>.json`,
written by tools/vllm_flag_schema.py from the real vLLM wheel's argparse parser) and so is the
lookup logic (`plugins/plugin_utils/vllm_schema.py`: `schema_for`, `flag_index`). Neither imports
Ansible; the simulator loads that one file by path, never through the collection package.

Where they are found, first hit wins:
  1. $VLLM_SIM_SCHEMA_DIR (a directory holding vllm_schema.py and vllm_schemas/);
  2. <this package>/vllm_schema/ (the test image: tests/harness/build-sim-image.sh copies them there);
  3. <repo>/plugins/module_utils/ (a checkout: this package is <repo>/tests/vllm_sim).
"""


import importlib.util
import os

PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_MODULE = {}


def schema_home():
    """The directory holding vllm_schema.py and vllm_schemas/, or None."""
    candidates = [os.environ.get('VLLM_SIM_SCHEMA_DIR', ''),
                  os.path.join(PKG_DIR, 'vllm_schema'),
                  os.path.join(os.path.dirname(os.path.dirname(PKG_DIR)), 'plugins', 'plugin_utils')]
    for home in candidates:
        if home and os.path.isfile(os.path.join(home, 'vllm_schema.py')) and os.path.isdir(os.path.join(home, 'vllm_schemas')):
            return home
    return None


def module():
    """The collection's vllm_schema.py, loaded by file path (no Ansible, no collection package)."""
    home = schema_home()
    if home is None:
        return None
    if home not in _MODULE:
        spec = importlib.util.spec_from_file_location('vllm_sim_vllm_schema', os.path.join(home, 'vllm_schema.py'))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _MODULE[home] = mod
    return _MODULE[home]


def lookup(version):
    """-> (schema or None, schema version used or None, why not or None) for the image's vLLM version.

    The collection's rule (vllm_schema.schema_for): the exact version, else the highest patch
    release of the same major.minor (patch releases keep the CLI)."""
    mod = module()
    if mod is None:
        return None, None, 'no schema directory (set VLLM_SIM_SCHEMA_DIR)'
    schema, used, problem = mod.schema_for(version)
    if schema is None:
        why = 'no schema for vLLM %s' % version if problem == 'missing' else 'not a vLLM version: %r' % (version,)
        return None, None, '%s (have: %s)' % (why, ', '.join(mod.available_versions()) or 'none')
    return schema, used, None


def known_env(schema):
    """Env names vLLM's envs.py knows (the schema's `env` list)."""
    return set(schema.get('env') or [])
