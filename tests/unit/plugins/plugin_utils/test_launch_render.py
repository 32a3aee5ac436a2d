# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render every profile for both nodes, run the script with real bash, compare argv/env."""

import copy
import json
import os
import stat
import subprocess

import pytest

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import catalogue, ds4_config, launch_render
from golden_regen import regen  # pylint: disable=import-error


CASES = [(p, h) for p in ds4_config.PROFILES for h in ('spark1', 'spark2')]

PRINTER = r'''#!/usr/bin/env python3
import json, os, sys
json.dump({"argv": sys.argv[1:], "env": dict(os.environ)}, sys.stdout)
'''


def _expected_argv(profile, host):
    """argv built straight from the YAML (base + profile + site + host_vars), not from ds4_effective."""
    group, hostvars = regen.load_inventory(profile)
    base = regen.load_base()
    layer = regen.recipe_layer(group['ds4_profile'])
    site = group.get('ds4_site_overrides') or {}
    model = catalogue.MODELS[layer['model']['name']]
    # the recipe's own path, else the catalogue's /models/<dir>; the recipe's port, else its image family's
    serve_arg = layer['model'].get('serve_arg') or '/models/' + model['dir_name']
    port = layer['api'].get('port') or catalogue.IMAGE_FAMILIES[layer['image']['family']]['api_port']
    hv = hostvars[host]
    head_ip = [v['ds4_fabric_ip'] for v in hostvars.values() if v['ds4_node_rank'] == 0][0]
    flags = {}
    for source in (base['serve_args'], layer['serve_args'], site.get('serve_args') or {}):
        for k, v in source.items():
            flags[k.lstrip('-').replace('_', '-')] = v
    argv = list(layer['entrypoint']) + [serve_arg, '--host', str(layer['api']['host']), '--port', str(port)]
    for k, v in flags.items():
        argv.append('--' + k)
        if v is True:
            continue
        argv.append(json.dumps(v, separators=(',', ':')) if isinstance(v, dict) else str(v))
    argv += ['--nnodes', str(len(hostvars)), '--node-rank', str(hv['ds4_node_rank']), '--master-addr', head_ip,
             '--master-port', str(layer['master_port'])]
    if hv['ds4_node_rank'] != 0:
        argv.append('--headless')
    return argv, flags


def _expected_env(profile, host):
    group, hostvars = regen.load_inventory(profile)
    hv = hostvars[host]
    env = dict(regen.load_base()['env'])
    env.update(regen.recipe_layer(group['ds4_profile']).get('env') or {})
    env.update({
        'VLLM_HOST_IP': hv['ds4_fabric_ip'],
        'NCCL_SOCKET_IFNAME': hv['ds4_fabric_ifname'],
        'GLOO_SOCKET_IFNAME': hv['ds4_fabric_ifname'],
        'TP_SOCKET_IFNAME': hv['ds4_fabric_ifname'],
        'NCCL_IB_HCA': ','.join(hv['ds4_rdma_hcas']),
    })
    return dict((k, str(v)) for k, v in env.items())


@pytest.fixture(scope='module')
def printer(tmp_path_factory):
    path = tmp_path_factory.mktemp('printer') / 'argv-env-printer'
    path.write_text(PRINTER)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _run_bash(script_text, tmp_path):
    script = tmp_path / 'launch.sh'
    script.write_text(script_text)
    # PYTHONCOERCECLOCALE=0: the printer must not add LC_CTYPE itself (PEP 538).
    base_env = {'PATH': '/usr/local/bin:/usr/bin:/bin', 'PYTHONCOERCECLOCALE': '0'}
    out = subprocess.run(['bash', str(script)], env=base_env, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize('profile,host', CASES)
def test_script_roundtrips_argv_and_env(profile, host, printer, tmp_path):
    inputs = regen.inputs_for(profile)
    eff = ds4_config.compute_effective(inputs, host)
    expected_argv, flags = _expected_argv(profile, host)
    assert eff['argv'] == expected_argv

    # Same script, only the program replaced by the printer.
    eff2 = copy.deepcopy(eff)
    eff2['entrypoint'] = [printer] + eff['entrypoint'][1:]
    script2 = launch_render.render_launch_script(eff2)
    first = 'exec ' + eff['entrypoint'][0]
    assert script2.replace('exec ' + printer, first, 1) == eff['launch_script']

    got = _run_bash(script2, tmp_path)
    assert got['argv'] == expected_argv[1:]
    # JSON-valued flags arrive as JSON equal to the YAML mappings.
    for flag, value in flags.items():
        if isinstance(value, dict):
            i = got['argv'].index('--' + flag)
            assert json.loads(got['argv'][i + 1]) == value
    expected_env = _expected_env(profile, host)
    shell_env = set(['PATH', 'PYTHONCOERCECLOCALE', 'PWD', 'SHLVL', '_'])
    rendered = dict((k, v) for k, v in got['env'].items() if k not in shell_env)
    assert rendered == expected_env
    assert list(eff['env']) == list(expected_env)


@pytest.mark.parametrize('profile,host', CASES)
def test_script_passes_bash_n(profile, host, tmp_path):
    eff = ds4_config.compute_effective(regen.inputs_for(profile), host)
    script = tmp_path / eff['script_name']
    script.write_text(eff['launch_script'])
    res = subprocess.run(['bash', '-n', str(script)], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    lines = eff['launch_script'].splitlines()
    assert lines[0] == '#!/usr/bin/env bash'
    assert 'set -euo pipefail' in lines
    assert sum(1 for line in lines if line.startswith('exec ')) == 1


@pytest.mark.parametrize('profile,host', CASES)
def test_headless_only_on_worker(profile, host):
    eff = ds4_config.compute_effective(regen.inputs_for(profile), host)
    if host == 'spark1':
        assert eff['role'] == 'head' and eff['script_name'] == 'launch-head.sh'
        assert eff['unit_name'] == 'dgxspark-ds4-head.service'
        assert '--headless' not in eff['argv']
    else:
        assert eff['role'] == 'worker' and eff['script_name'] == 'launch-worker.sh'
        assert eff['unit_name'] == 'dgxspark-ds4-worker.service'
        assert eff['argv'][-1] == '--headless'
    assert eff['argv'][eff['argv'].index('--master-addr') + 1] == '192.168.100.10'


@pytest.mark.parametrize('profile,host', CASES)
def test_golden_files(profile, host):
    eff = ds4_config.compute_effective(regen.inputs_for(profile), host)
    gdir = regen.golden_dir(profile, host)
    hint = ('rendered output for %s/%s differs from tests/golden/%s/%s/. If the change is intended, run '
            '`.venv/bin/python tests/golden/regen.py` and review `git diff tests/golden/`.' % (profile, host, profile, host))
    for name, text in ((eff['script_name'], eff['launch_script']), (eff['env_file_name'], eff['env_file'])):
        path = os.path.join(gdir, name)
        assert os.path.exists(path), hint
        with open(path) as f:
            assert f.read() == text, hint
    assert sorted(os.listdir(gdir)) == sorted([eff['script_name'], eff['env_file_name']]), hint


def test_quoting_survives_hostile_values(printer, tmp_path):
    """Quotes, spaces, $ and backticks reach the program unchanged."""
    inputs = regen.inputs_for('balanced')
    inputs['ds4_site_overrides'] = {
        'serve_args': {'served-model-name': "it's a $HOME `x` \"name\"",
                       # cache_dir: a string key vLLM's CompilationConfig knows (the flag-schema check refuses unknown keys)
                       'compilation-config': {'cudagraph_mode': 'PIECEWISE', 'cache_dir': "a'b \"c\" $d"}},
        'env': {'OMP_NUM_THREADS': "8; rm -rf / #"},
    }
    eff = ds4_config.compute_effective(inputs, 'spark1')
    eff['entrypoint'] = [printer] + eff['entrypoint'][1:]
    got = _run_bash(launch_render.render_launch_script(eff), tmp_path)
    i = got['argv'].index('--served-model-name')
    assert got['argv'][i + 1] == "it's a $HOME `x` \"name\""
    i = got['argv'].index('--compilation-config')
    assert json.loads(got['argv'][i + 1]) == {'cudagraph_mode': 'PIECEWISE', 'cache_dir': "a'b \"c\" $d"}
    assert got['env']['OMP_NUM_THREADS'] == "8; rm -rf / #"


def test_render_value_forms():
    assert launch_render.render_value(True) == []
    assert launch_render.render_value(0.9) == ['0.9']
    assert launch_render.render_value(256) == ['256']
    assert launch_render.render_value({'a': [1, 'all']}) == ['{"a":[1,"all"]}']
    assert launch_render.render_value(['a', 'b']) == ['a', 'b']
