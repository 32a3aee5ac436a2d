# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The image's own vLLM decides the flag schema: the version container_image reads from the image (its read script,
run here by a local Python over a site directory), the comparison with the declared image.vllm_version
(ds4_config.check_image_vllm, filter dgxspark.ds4.vllm_image_check), and the simulator carrying its version the
way real vLLM images do (tests/vllm_sim/install_dist.py)."""

import copy
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.dgxspark.ds4.plugins.filter import container as flt
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config as c
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import vllm_schema as vs
from golden_regen import regen  # pylint: disable=import-error

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))
INSTALL_DIST = os.path.join(REPO, 'tests', 'vllm_sim', 'install_dist.py')
SIM_VLLM = os.path.join(REPO, 'tests', 'vllm_sim', 'bin', 'vllm')
with open(os.path.join(REPO, 'roles', 'container_image', 'vars', 'main.yml')) as _fh:
    READ_SCRIPT = yaml.safe_load(_fh)['container_image_vllm_version_read']


def effective(profile='balanced', site=None, profile_edit=None):
    inputs = copy.deepcopy(regen.inputs_for(profile))
    layer = copy.deepcopy(inputs['ds4_profile_config'])
    if profile_edit:
        profile_edit(layer)
    keys = {'ds4_profile_config': layer}
    if site is not None:
        keys['ds4_site_overrides'] = site
    for key, value in keys.items():
        inputs[key] = value
        for hv in inputs['hostvars'].values():
            hv[key] = copy.deepcopy(value)
    return c.compute_effective(inputs, 'spark1')


@pytest.mark.parametrize('version, minor', [
    ('0.27.1', '0.27'), ('0.33.0', '0.33'), ('0.22', '0.22'), ('0.11.1rc2.dev123+g48cebd4', '0.11'),
    ('0.22.0+venv.v1', '0.22'), ('latest', None), ('', None), (None, None), (0.33, None)])
def test_minor_of(version, minor):
    assert vs.minor_of(version) == minor


def test_sim_image_0_27_1_with_a_profile_declaring_0_33_0_is_said_not_refused():
    """Issue 45: a moving tag carries whatever vLLM it was built with; a version other than the recipe's measured one
    is said once, naming both, and the flags are checked against the image's own version."""
    eff = effective(site={'image': {'ref': 'ds4-vllm-sim:test', 'vllm_version': '0.33.0'}})
    errors, warnings = c.check_image_vllm(eff, '0.27.1')
    assert errors == [], errors
    said = [w for w in warnings if 'measured with' in w]
    assert len(said) == 1, warnings
    assert said[0].startswith('the recipe was measured with vLLM 0.33.0 (ds4_site_overrides.image.vllm_version); the image '
                              'ds4-vllm-sim:test carries vLLM 0.27.1 (read from the image)'), said
    assert 'set ds4_site_overrides.image.vllm_version: "0.27.1"' in said[0]


def test_a_flag_the_images_own_version_rejects_is_refused_naming_it():
    def edit(layer):
        layer['serve_args']['max-num-queued-reqs'] = 64    # vLLM 0.33.0 has it; 0.27.1's parser does not
    eff = effective(site={'image': {'ref': 'ds4-vllm-sim:test', 'vllm_version': '0.33.0'}}, profile_edit=edit)
    assert c.check_image_vllm(eff, '0.33.0')[0] == []
    errors, warnings = c.check_image_vllm(eff, '0.27.1')
    assert any(e.startswith('ds4_profile_config.serve_args[max-num-queued-reqs] = 64: vLLM 0.27.1 has no flag') for e in errors), errors
    assert any('measured with vLLM 0.33.0' in w for w in warnings)


def test_profile_declared_version_named_when_the_site_does_not_set_it():
    eff = effective()   # balanced declares 0.22.0 in its profile
    errors, warnings = c.check_image_vllm(eff, '0.33.0', image='ghcr.io/x/vllm@sha256:abc')
    assert errors == [] and any(w.startswith('the recipe was measured with vLLM 0.22.0 (ds4_profile_config.image.vllm_version); '
                                             'the image ghcr.io/x/vllm@sha256:abc carries vLLM 0.33.0') for w in warnings), warnings


@pytest.mark.parametrize('image_version', ['0.22.0', '0.22.3', '0.22.1rc1.dev5+gabc', '0.22.0+venv.v1'])
def test_same_minor_passes(image_version):
    errors, _w = c.check_image_vllm(effective(), image_version)
    assert errors == []


def test_undeclared_version_the_image_decides_and_its_schema_checks_the_flags():
    def edit(layer):
        del layer['image']['vllm_version']
        layer['serve_args']['dp-sync-interval'] = 2    # 0.33.0 has it; 0.27.1's parser does not
    eff = effective(profile_edit=edit)
    assert any('image.vllm_version is not set' in w for w in eff['warnings'])
    assert c.check_image_vllm(eff, '0.33.0')[0] == []
    errors, _w = c.check_image_vllm(eff, '0.27.1')
    assert any(e.startswith('ds4_profile_config.serve_args[dp-sync-interval] = 2: vLLM 0.27.1 has no flag') for e in errors), errors


def test_the_image_schema_not_the_declared_one_checks_the_flags(monkeypatch):
    """Declared 0.27.1, image 0.27.9: the flags are checked against the schema the image's version selects."""
    eff = effective(site={'image': {'vllm_version': '0.27.1'}})
    asked = []
    real = vs.schema_for

    def spy(version, *args):
        asked.append(version)
        return real(version, *args)
    monkeypatch.setattr(c.vllm_schema, 'schema_for', spy)
    errors, warnings = c.check_image_vllm(eff, '0.27.9')
    assert errors == [] and asked == ['0.27.9']
    want = ('the vLLM version of image %s = "0.27.9": no flag schema for exactly this vLLM version; serve_args are '
            'checked against vllm-0.27.1.json' % eff['image']['ref'])
    assert any(want in w for w in warnings), warnings


def test_image_version_without_schema_warns():
    def edit(layer):
        del layer['image']['vllm_version']
    errors, warnings = c.check_image_vllm(effective(profile_edit=edit), '0.99.0')
    assert errors == [] and any('no flag schema for this vLLM version' in w and 'use an image whose vLLM version has one' in w
                                for w in warnings), warnings


@pytest.mark.parametrize('found', [None, '', 'not-a-version'])
def test_unreadable_image_version_refused_naming_the_python_variable(found):
    errors, _w = c.check_image_vllm(effective(), found, image='img:1')
    assert len(errors) == 1 and 'the vLLM version read from the image img:1' in errors[0]
    assert 'Fix: set container_image_python' in errors[0], errors


def test_filter_returns_errors_warnings_and_version():
    eff = effective(site={'image': {'ref': 'ds4-vllm-sim:test', 'vllm_version': '0.33.0'}})
    out = flt.FilterModule().filters()['vllm_image_check'](eff, '0.27.1')
    assert out['version'] == '0.27.1' and out['errors'] == [] and any('0.33.0' in w for w in out['warnings'])
    assert flt.vllm_image_check(eff, '0.33.1')['errors'] == []


# --------------------------------------------------------------------------- reading the version from an image


def _python(site_dir, argv, env_extra=None):
    env = dict((k, v) for k, v in os.environ.items() if k not in ('VLLM_SIM_VERSION', 'PYTHONPATH'))
    env['PYTHONPATH'] = site_dir
    env.update(env_extra or {})
    return subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          timeout=60, check=False)


def test_read_script_reads_the_dist_info_the_simulator_image_carries(tmp_path):
    site = str(tmp_path / 'site')
    assert subprocess.run([sys.executable, INSTALL_DIST, '0.27.1', site], check=False).returncode == 0
    res = _python(site, [sys.executable, '-c', READ_SCRIPT])
    assert res.returncode == 0 and res.stdout.strip().splitlines()[-1] == 'vllm-version=0.27.1', (res.stdout, res.stderr)
    # the package says the same, and the simulator's own `vllm --version` too (no VLLM_SIM_VERSION: read from the dist)
    res = _python(site, [sys.executable, '-c', 'import vllm; print(vllm.__version__)'])
    assert res.stdout.strip() == '0.27.1'
    res = _python(site, ['bash', SIM_VLLM, '--version'], {'VLLM_SIM_PYTHON': sys.executable})
    assert res.returncode == 0 and res.stdout.strip().splitlines()[-1] == '0.27.1', (res.stdout, res.stderr)
    # build time decides: installing another version replaces the dist-info
    assert subprocess.run([sys.executable, INSTALL_DIST, '0.33.0', site], check=False).returncode == 0
    assert sorted(os.listdir(site)) == ['vllm', 'vllm-0.33.0.dist-info']
    assert _python(site, [sys.executable, '-c', READ_SCRIPT]).stdout.strip() == 'vllm-version=0.33.0'


def test_read_script_falls_back_to_the_package_version_and_fails_without_vllm(tmp_path):
    site = tmp_path / 'src'
    (site / 'vllm').mkdir(parents=True)
    (site / 'vllm' / '__init__.py').write_text("__version__ = '0.22.0+venv.v1'\n")
    res = _python(str(site), [sys.executable, '-c', READ_SCRIPT])
    assert res.stdout.strip() == 'vllm-version=0.22.0+venv.v1', (res.stdout, res.stderr)
    res = _python(str(tmp_path / 'empty'), [sys.executable, '-c', READ_SCRIPT])
    assert res.returncode == 1 and 'vllm-version=' not in res.stdout and 'vllm' in res.stderr


def test_install_dist_refuses_a_non_version(tmp_path):
    res = subprocess.run([sys.executable, INSTALL_DIST, 'latest', str(tmp_path)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert res.returncode != 0 and 'not a vLLM version' in res.stderr and not os.listdir(str(tmp_path))
