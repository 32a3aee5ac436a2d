# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every profile's caches, as the simulator (and vLLM) find them at start, lie on writable cache volumes.

The simulator refuses a start whose cache directory is not writable (tests/vllm_sim/checks.py cache_dirs);
here the list it checks is computed from each profile's effective env (container user root, HOME=/root) and
every entry must sit on a ``container.cache_volumes`` mount from /var/cache/dgxspark-ds4/, never on the
read-only model mount.
"""


import pytest

from vllm_sim import checks  # pylint: disable=import-error

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config as c
from golden_regen import regen  # pylint: disable=import-error


ENV_NAMES = ('VLLM_CACHE_ROOT', 'XDG_CACHE_HOME', 'TRITON_CACHE_DIR', 'TORCHINDUCTOR_CACHE_DIR', 'FLASHINFER_WORKSPACE_BASE',
             'VLLM_DISABLE_COMPILE_CACHE')


def under(path, parent):
    return path == parent or path.startswith(parent.rstrip('/') + '/')


@pytest.mark.parametrize('name', c.PROFILES)
def test_every_cache_the_sim_checks_is_on_a_persistent_volume(name, monkeypatch):
    eff = c.compute_effective(regen.inputs_for(name), 'spark1')
    for var in ENV_NAMES:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv('HOME', '/root')
    for var, value in eff['env'].items():
        if var in ENV_NAMES:
            monkeypatch.setenv(var, value)
    dirs = checks.cache_dirs(eff['serve_args'].get('compilation-config'), bool(eff['serve_args'].get('enforce-eager')))
    whats = [w for w, _p in dirs]
    assert 'TORCHINDUCTOR_CACHE_DIR' in whats, (name, whats)  # named, so the sim checks it too
    vols = eff['container']['cache_volumes']
    for what, path in dirs:
        hosts = [h for h, cdir in vols.items() if under(path, cdir)]
        assert hosts and all(h.startswith('/var/cache/dgxspark-ds4/') for h in hosts), (name, what, path)
        assert not under(path, eff['model']['container_dir']), (name, what, path)
