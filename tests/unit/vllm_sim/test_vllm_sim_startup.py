# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start-up checks of the vLLM simulator (tests/vllm_sim/checks.py): what vLLM and Docker refuse, in vLLM's words.

Each refusal: the model argument does not resolve inside the container, a directory vLLM writes at start
is on a read-only mount or not writable, an env name vLLM's envs.py does not know. And the acceptance
side: the Molecule test deployment (balanced argv and env, the stand-in model of prepare_model.yml, the
model volume read-only) starts.
"""


import os
import shlex
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import DEFAULT_MODEL, FAST_ENV, VLLM, Sim, free_port  # pylint: disable=import-error
from vllm_sim import standin  # pylint: disable=import-error
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config  # noqa: E402  pylint: disable=wrong-import-order

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), 'golden')
COMMIT = '0123456789abcdef0123456789abcdef01234567'
INVALID = "ValueError: Invalid repository ID or local directory specified: '%s'."


def start(root, model=DEFAULT_MODEL, args=(), env=None, timeout=20):
    """Run `vllm serve` to its exit (refusals) -> (rc, output)."""
    full = dict(os.environ)
    for name in ('VLLM_API_KEY', 'HF_HUB_OFFLINE', 'HF_HOME', 'HF_HUB_CACHE', 'XDG_CACHE_HOME', 'VLLM_CACHE_ROOT',
                 'TRITON_CACHE_DIR', 'TORCHINDUCTOR_CACHE_DIR', 'FLASHINFER_WORKSPACE_BASE'):
        full.pop(name, None)
    full.update(FAST_ENV)
    full.update({'VLLM_SIM_ROOT': root, 'HOME': '/root'})
    full.update(env or {})
    res = subprocess.run([VLLM, 'serve', model, '--host', '127.0.0.1', '--port', str(free_port())] + list(args),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full, timeout=timeout,
                         check=False)
    return res.returncode, res.stdout


def refused(root, needle, **kwargs):
    rc, out = start(root, **kwargs)
    assert rc == 1, out
    assert needle in out, out
    assert 'Application startup complete.' not in out
    return out


@pytest.fixture
def root(sim_root):
    return sim_root


# --------------------------------------------------------------------------- the model argument

def test_model_path_missing_refused(root):
    out = refused(root, INVALID % '/models/nowhere', model='/models/nowhere')
    assert "ensure the presence of a 'config.json'" in out
    assert 'model path /models/nowhere does not exist inside the container' in out
    assert 'Starting to load model' not in out


def test_model_dir_without_config_json_refused(root):
    standin.make_model(os.path.join(root, 'models', 'noconf'), config=False)
    out = refused(root, INVALID % '/models/noconf', model='/models/noconf')
    assert 'has no config.json' in out


def test_shard_named_by_the_index_missing_refused(root):
    model = os.path.join(root, 'models', 'partial')
    standin.make_model(model, shards=3)
    os.unlink(os.path.join(model, 'model-00002-of-00003.safetensors'))
    out = refused(root, "ValueError: Following weights were not initialized from checkpoint: {'model.layers.1.weight'}",
                  model='/models/partial')
    assert 'model.safetensors.index.json names 1 file(s) missing from /models/partial: model-00002-of-00003.safetensors' in out
    assert 'Starting to load model /models/partial...' in out
    assert 'Engine core initialization failed' in out       # a worker failure, reported by the head


def test_no_weights_refused(root):
    model = os.path.join(root, 'models', 'empty')
    standin.make_model(model, shards=0, index=False)
    refused(root, 'RuntimeError: Cannot find any model weights with `/models/empty`', model='/models/empty')
    # --load-format dummy reads no weights (vLLM's dummy loader)
    port = free_port()
    sim = Sim(['serve', '/models/empty', '--host', '127.0.0.1', '--port', str(port), '--load-format', 'dummy'], port=port,
              env={'VLLM_SIM_ROOT': root})
    try:
        sim.wait_ready(20)
    finally:
        sim.stop()


def test_repo_id_offline_without_cache_refused(root):
    out = refused(root, 'huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached snapshot folder '
                  'for the specified revision on the local disk and outgoing traffic has been disabled.',
                  model='deepseek-ai/DeepSeek-V4-Flash', env={'HF_HUB_OFFLINE': '1', 'HF_HOME': '/cache/huggingface'})
    assert 'no snapshot at /cache/huggingface/hub/models--deepseek-ai--DeepSeek-V4-Flash/refs/main' in out


def hf_cache(root, rev_file='main', commit=COMMIT, config=True):
    repo = os.path.join(root, 'cache', 'huggingface', 'hub', 'models--deepseek-ai--DeepSeek-V4-Flash')
    standin.make_model(os.path.join(repo, 'snapshots', commit), shards=2, config=config)
    os.makedirs(os.path.join(repo, 'refs'))
    with open(os.path.join(repo, 'refs', rev_file), 'w') as handle:
        handle.write(commit)
    return repo


def test_repo_id_offline_resolves_through_refs_main(root):
    hf_cache(root)
    env = {'HF_HUB_OFFLINE': '1', 'HF_HOME': '/cache/huggingface', 'VLLM_SIM_ROOT': root}
    port = free_port()
    sim = Sim(['serve', 'deepseek-ai/DeepSeek-V4-Flash', '--host', '127.0.0.1', '--port', str(port)], port=port, env=env)
    try:
        sim.wait_ready(20)
        assert 'Loading safetensors checkpoint shards: 100% Completed | 2/2' in sim.output
    finally:
        sim.stop()
    # a pinned revision that is not in the cache is refused even though refs/main resolves
    refused(root, 'Cannot find an appropriate cached snapshot folder', model='deepseek-ai/DeepSeek-V4-Flash',
            args=['--revision', 'f' * 40], env={'HF_HUB_OFFLINE': '1', 'HF_HOME': '/cache/huggingface'})


def test_repo_id_offline_snapshot_without_config_refused(root):
    hf_cache(root, config=False)
    out = refused(root, 'LocalEntryNotFoundError: Cannot find the requested files in the disk cache and outgoing traffic '
                  'has been disabled.', model='deepseek-ai/DeepSeek-V4-Flash',
                  env={'HF_HUB_OFFLINE': '1', 'HF_HOME': '/cache/huggingface'})
    assert INVALID % 'deepseek-ai/DeepSeek-V4-Flash' in out


def test_repo_id_under_a_plain_directory_refused(root):
    # the model files sit in $HF_HOME/deepseek-ai/DeepSeek-V4-Flash, not in the hub layout: vLLM does not find them
    standin.make_model(os.path.join(root, 'cache', 'huggingface', 'deepseek-ai', 'DeepSeek-V4-Flash'))
    refused(root, 'Cannot find an appropriate cached snapshot folder', model='deepseek-ai/DeepSeek-V4-Flash',
            env={'HF_HUB_OFFLINE': '1', 'HF_HOME': '/cache/huggingface'})


# --------------------------------------------------------------------------- writable directories

@pytest.mark.parametrize('env,args,path', [
    ({'VLLM_CACHE_ROOT': '/cache/huggingface/vllm-cache'}, [], '/cache/huggingface/vllm-cache'),
    ({}, ['--compilation-config', '{"cache_dir": "/cache/huggingface/compile"}'], '/cache/huggingface/compile'),
    ({'TRITON_CACHE_DIR': '/cache/huggingface/triton'}, [], '/cache/huggingface/triton'),
    ({'TORCHINDUCTOR_CACHE_DIR': '/cache/huggingface/inductor'}, [], '/cache/huggingface/inductor'),
    ({'FLASHINFER_WORKSPACE_BASE': '/cache/huggingface'}, [], '/cache/huggingface/.cache'),
    ({'XDG_CACHE_HOME': '/cache/huggingface'}, [], '/cache/huggingface/vllm'),
])
def test_cache_dir_on_a_read_only_mount_refused(root, env, args, path):
    os.makedirs(os.path.join(root, 'cache', 'huggingface'))
    out = refused(root, "OSError: [Errno 30] Read-only file system: '%s'" % path, args=args,
                  env=dict(env, VLLM_SIM_RO_MOUNTS='/cache/huggingface'))
    assert 'lies on the read-only mount /cache/huggingface' in out
    assert not os.path.exists(os.path.join(root, path.lstrip('/')))


def test_existing_cache_dir_on_a_read_only_mount_refused(root):
    os.makedirs(os.path.join(root, 'root', '.cache', 'vllm'))
    refused(root, "OSError: [Errno 30] Read-only file system: '/root/.cache/vllm'", env={'VLLM_SIM_RO_MOUNTS': '/root/.cache'})


def test_enforce_eager_writes_no_compile_cache(root):
    os.makedirs(os.path.join(root, 'ro'))
    args = ['--enforce-eager', '--compilation-config', '{"cache_dir": "/ro/compile"}']
    port = free_port()
    sim = Sim(['serve', DEFAULT_MODEL, '--host', '127.0.0.1', '--port', str(port)] + args, port=port,
              env={'VLLM_SIM_ROOT': root, 'HOME': '/root', 'VLLM_SIM_RO_MOUNTS': '/ro'})
    try:
        sim.wait_ready(20)
    finally:
        sim.stop()


def _nobody_python():
    """(python, preexec) to run the simulator as an unprivileged user, or None (root ignores mode bits)."""
    if os.geteuid() != 0:
        return sys.executable, None
    python = '/usr/bin/python3'
    if not os.access(python, os.X_OK) or sys.version_info[:2] < (3, 9):
        return None
    probe = subprocess.run([python, '-c', 'import os; os.setuid(65534); import argparse, json'], check=False,
                           capture_output=True)
    if probe.returncode != 0:
        return None

    def drop():
        os.setgid(65534)
        os.setuid(65534)
    return python, drop


def _skip_or_fail(why):
    if os.environ.get('CI', '').strip().lower() in ('1', 'true', 'yes'):
        pytest.fail('%s (CI=true makes this a failure: the check may not be skipped)' % why)
    pytest.skip(why)


def test_cache_dir_without_write_permission_refused():
    found = _nobody_python()
    if found is None:
        _skip_or_fail('cannot run the simulator as an unprivileged user here')
    python, preexec = found
    tests_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if preexec is not None and not all(os.stat(d).st_mode & 0o005 == 0o005 for d in (tests_dir, os.path.dirname(VLLM))):
        _skip_or_fail('the checkout is not readable by an unprivileged user')
    root = tempfile.mkdtemp(prefix='ds4-sim-perm-')
    try:
        os.chmod(root, 0o755)
        standin.make_root(root, models=(DEFAULT_MODEL,))
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames:
                os.chmod(os.path.join(dirpath, name), 0o755)
            for name in filenames:
                os.chmod(os.path.join(dirpath, name), 0o644)
        os.makedirs(os.path.join(root, 'home', 'app', '.cache'))   # owned by root, 0755: not writable for the user
        env = dict(os.environ, **FAST_ENV)
        env.update({'VLLM_SIM_ROOT': root, 'HOME': '/home/app', 'VLLM_SIM_PYTHON': python})
        for name in ('VLLM_CACHE_ROOT', 'XDG_CACHE_HOME', 'VLLM_API_KEY'):
            env.pop(name, None)
        res = subprocess.run([VLLM, 'serve', DEFAULT_MODEL, '--host', '127.0.0.1', '--port', str(free_port())],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=20,
                             check=False, preexec_fn=preexec)
        assert res.returncode == 1, res.stdout
        assert "PermissionError: [Errno 13] Permission denied: '/home/app/.cache/vllm'" in res.stdout, res.stdout
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------- env names

def test_unknown_and_removed_vllm_env_reported_like_envs_py(root):
    env = {'VLLM_USE_V1': '0', 'VLLM_ATTENTION_BACKEND': 'FLASHINFER_MLA', 'VLLM_HOST_IP': '127.0.0.1'}
    port = free_port()
    sim = Sim(['serve', DEFAULT_MODEL, '--host', '127.0.0.1', '--port', str(port)], port=port,
              env=dict(env, VLLM_SIM_ROOT=root))
    try:
        sim.wait_ready(20)
        out = sim.output
    finally:
        sim.stop()
    assert 'WARNING' in sim.wait_line('[envs.py:1744] Unknown vLLM environment variable detected: VLLM_USE_V1')
    assert 'Unknown vLLM environment variable detected: VLLM_ATTENTION_BACKEND' in out
    assert 'detected: VLLM_HOST_IP' not in out            # known to vLLM's envs.py
    assert 'detected: VLLM_SIM_' not in out               # the simulator's own knobs
    refused(root, 'ValueError: Unknown vLLM environment variable detected: VLLM_USE_V1',
            args=['--fail-on-environ-validation'], env={'VLLM_USE_V1': '1'})


# --------------------------------------------------------------------------- the Molecule test deployment starts

def launch_script(path):
    """-> (exported env, argv after the entrypoint) of a rendered launch script."""
    text = open(path).read()
    env = {}
    for line in text.splitlines():
        if line.startswith('export '):
            name, _eq, value = line[len('export '):].partition('=')
            env[name] = shlex.split(value)[0] if value else ''
    words = shlex.split(text.split('\nexec ', 1)[1].replace('\\\n', ' '))
    return env, words[words.index('serve') + 1:]


def _retarget(argv, **flags):
    out = list(argv)
    for flag, value in flags.items():
        out[out.index('--' + flag.replace('_', '-')) + 1] = value
    return out


def start_pair(root, profile, env_extra):
    """Worker then head of `profile` (its golden launch scripts) on loopback -> [worker Sim, head Sim]."""
    mport, port = str(free_port()), str(free_port())
    sims = []
    for host, script in (('spark2', 'launch-worker.sh'), ('spark1', 'launch-head.sh')):
        env, argv = launch_script(os.path.join(GOLDEN, profile, host, script))
        argv = _retarget(argv, master_addr='127.0.0.1', master_port=mport)
        if host == 'spark1':
            argv = _retarget(argv, host='127.0.0.1', port=port)
        env.update({'VLLM_SIM_ROOT': root, 'HOME': '/root', 'VLLM_SIM_GPUS_PER_NODE': '1'})
        env.update(env_extra)
        sims.append(Sim(['serve'] + argv, env=env, port=int(port)))
    return sims


def test_molecule_test_deployment_starts(tmp_path):
    """The balanced profile as Molecule deploys it (tests/golden/balanced; molecule/default/prepare_model.yml's
    model: config.json + 4 shards, no index; the model volume :ro; ~/.cache/vllm and ~/.cache/flashinfer volumes;
    the test image's vLLM 0.27.1)."""
    root = str(tmp_path / 'node')
    model = '/models/DeepSeek-V4-Flash'
    standin.make_model(os.path.join(root, model.lstrip('/')), shards=4, index=False)
    sims = start_pair(root, 'balanced', {'VLLM_SIM_RO_MOUNTS': model, 'VLLM_SIM_VERSION': '0.27.1'})
    try:
        sims[-1].wait_ready(30)
        out = sims[-1].output + '\n'.join(sims[0].lines)
        assert 'start-up check' not in out and 'Traceback' not in out, out
        assert 'Loading safetensors checkpoint shards: 100% Completed | 4/4' in out
        assert 'Unknown vLLM environment variable detected: VLLM_TRITON_MLA_SPARSE' in out   # a fork's knob: warned only
        assert os.path.isdir(os.path.join(root, 'root', '.cache', 'vllm', 'torch_compile_cache'))
        assert os.path.isdir(os.path.join(root, 'root', '.cache', 'flashinfer'))
    finally:
        for sim in sims:
            sim.stop()


def _profile_inputs(profile):
    from golden_regen import regen  # pylint: disable=import-error,import-outside-toplevel
    # the effective config of -i inventories/sample-site -e ds4_profile=<profile> (model paths from the catalogue where the recipe gives none)
    return ds4_config.compute_effective(regen.inventory_inputs(profile), 'spark1')


@pytest.mark.parametrize('profile', ds4_config.PROFILES)
def test_every_profile_starts_on_its_container_layout(tmp_path, profile):
    """Each profile's launch scripts on the container filesystem the roles give it: the model files where
    model_cache puts them (flat in model.host_dir, like molecule/default/prepare_model.yml's stand-in: config.json
    + 4 shards, no index), that volume :ro, the profile's other `:ro` volumes, cache volumes writable; the parser of
    the vLLM version its image declares."""
    layer = _profile_inputs(profile)
    model = layer['model']
    root = str(tmp_path / 'node')
    standin.make_model(os.path.join(root, model['container_dir'].lstrip('/')), shards=4, index=False)
    ro = [model['container_dir']] + [v.split(':')[1] for v in (layer.get('container') or {}).get('volumes') or []
                                     if v.endswith(':ro')]
    sims = start_pair(root, profile, {'VLLM_SIM_RO_MOUNTS': ':'.join(ro),
                                      'VLLM_SIM_VERSION': layer['image']['vllm_version']})
    try:
        for sim in sims:
            sim.wait_line('Loading safetensors checkpoint shards: 100% Completed | 4/4', 30)
        sims[-1].wait_ready(30)
    finally:
        for sim in sims:
            sim.stop()
