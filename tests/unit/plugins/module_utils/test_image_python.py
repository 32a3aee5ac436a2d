"""image_python: the Python that runs vLLM in an image, found by the probe script (run here with /bin/sh on a
sandbox laid out like the images: real venvs made with `python -m venv`, a `vllm` package in their site-packages,
a `vllm` console script whose #! names the venv's python), and parse()'s result and error."""
import os
import subprocess
import sys
import venv

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._image import image_python


def _venv(path, with_vllm, dist_only=False):
    """A real venv (no pip); with_vllm puts a vllm package (or only its dist-info) into its site-packages."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(path)
    site = os.path.join(path, 'lib', 'python%d.%d' % sys.version_info[:2], 'site-packages')
    if with_vllm and not dist_only:
        os.makedirs(os.path.join(site, 'vllm'))
        with open(os.path.join(site, 'vllm', '__init__.py'), 'w') as handle:
            handle.write("__version__ = '0.33.0+test'\n")
    if with_vllm and dist_only:
        dist = os.path.join(site, 'vllm-0.22.0.dist-info')
        os.makedirs(dist)
        with open(os.path.join(dist, 'METADATA'), 'w') as handle:
            handle.write('Metadata-Version: 2.1\nName: vllm\nVersion: 0.22.0\n')
    return os.path.join(path, 'bin', 'python3'), site


def _venv_python(path, with_vllm, dist_only=False):
    """Only the venv's python3 (the tests that do not look at its site-packages)."""
    return _venv(path, with_vllm, dist_only)[0]


def _vllm_command(bindir, shebang):
    os.makedirs(bindir, exist_ok=True)
    path = os.path.join(bindir, 'vllm')
    with open(path, 'w') as handle:
        handle.write('%s\nimport sys\nsys.exit(0)\n' % shebang)
    os.chmod(path, 0o755)
    return path


def _run(path_dirs, known):
    """The probe as the image would run it: /bin/sh -c SCRIPT with only the image's PATH."""
    env = {'PATH': ':'.join(path_dirs + ['/bin'])}
    proc = subprocess.run(['/bin/sh', '-c', image_python.probe_script(known)], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    return image_python.parse(proc.returncode, proc.stdout, proc.stderr, 'test/image:tag')


def _plain_bin(tmp_path, name, target):
    """A bin directory holding only `python3` -> target (a system python3 first on PATH, no vllm there)."""
    bindir = tmp_path / name
    bindir.mkdir()
    os.symlink(target, str(bindir / 'python3'))
    return str(bindir)


def test_venv_image_found_through_the_vllm_command_not_python3_on_path(tmp_path):
    """The b12x layout: python3 first on PATH has no vLLM; the venv's vllm command names its own python."""
    system_py = _venv_python(str(tmp_path / 'system'), with_vllm=False)
    venv_py, site = _venv(str(tmp_path / 'opt-env'), with_vllm=True)
    cmd_dir = str(tmp_path / 'cmd')
    _vllm_command(cmd_dir, '#!%s' % venv_py)
    result = _run([os.path.dirname(system_py), cmd_dir], known=())
    assert result['error'] is None
    assert result['python'] == venv_py
    assert result['found'].startswith('interpreter of the vllm command')
    assert result['vllm'] == os.path.join(site, 'vllm')
    assert result['vllm_command'] == os.path.join(cmd_dir, 'vllm')


def test_venv_image_found_next_to_the_vllm_command_with_env_shebang(tmp_path):
    """#!/usr/bin/env python3 resolves to the system python3 (no vLLM); python3 next to vllm has it."""
    system_py = _venv_python(str(tmp_path / 'system'), with_vllm=False)
    venv_py = _venv_python(str(tmp_path / 'venv'), with_vllm=True)
    _vllm_command(os.path.dirname(venv_py), '#!/usr/bin/env python3')
    result = _run([os.path.dirname(system_py), os.path.dirname(venv_py)], known=())
    assert result['python'] == venv_py
    assert result['found'] == 'next to the vllm command %s' % os.path.join(os.path.dirname(venv_py), 'vllm')
    assert any(t.startswith('python3 (interpreter of the vllm command') and t.endswith('no vllm') for t in result['tried'])


def test_venv_image_without_vllm_on_path_found_at_a_known_location(tmp_path):
    """Neither vllm nor the venv on PATH (an entrypoint script calls the venv): the known locations decide."""
    system_py = _venv_python(str(tmp_path / 'system'), with_vllm=False)
    venv_py = _venv_python(str(tmp_path / 'opt-env'), with_vllm=True)
    result = _run([os.path.dirname(system_py)], known=(str(tmp_path / 'absent' / 'python3'), venv_py))
    assert result['python'] == venv_py
    assert result['found'] == 'known location'
    assert result['tried'][0].startswith('python3 (python3 on the image PATH') and result['tried'][0].endswith('no vllm')


def test_system_image_python3_on_path(tmp_path):
    """The eugr / upstream layout: vLLM in the system python3, no vllm console script with a Python #!."""
    system_py, site = _venv(str(tmp_path / 'usr'), with_vllm=True)
    result = _run([os.path.dirname(system_py)], known=())
    assert result['python'] == 'python3'
    assert result['found'].startswith('python3 on the image PATH')
    assert result['vllm'] == os.path.join(site, 'vllm')


def test_system_image_with_a_shell_vllm_launcher_and_dist_info_only(tmp_path):
    """The simulator / test images: vllm is a shell launcher; python3 has only vLLM's dist-info."""
    system_py = _venv_python(str(tmp_path / 'usr'), with_vllm=True, dist_only=True)
    launcher_dir = str(tmp_path / 'launcher')
    _vllm_command(launcher_dir, '#!/bin/sh')
    result = _run([launcher_dir, os.path.dirname(system_py)], known=())
    assert result['python'] == 'python3'
    assert 'vllm 0.22.0 dist-info' in result['vllm']
    assert any('is not a Python' in t for t in result['tried'])


def test_no_python_with_vllm_is_an_error_naming_the_image_and_the_fix(tmp_path):
    system_py = _venv_python(str(tmp_path / 'system'), with_vllm=False)
    result = _run([_plain_bin(tmp_path, 'bin', system_py)], known=(system_py,))
    assert result['python'] is None
    assert result['error'].startswith('test/image:tag: no Python in the image has vLLM. Tried: python3 (python3 on the image PATH')
    assert '%s (known location): no vllm' % system_py in result['error']
    assert 'Fix: set container_image_python' in result['error']


def test_a_failed_probe_is_an_error_with_its_output():
    result = image_python.parse(125, '', 'docker: Error response from daemon: No such image: x.', 'x')
    assert result['python'] is None
    assert 'the probe failed (rc 125: docker: Error response from daemon: No such image: x.)' in result['error']


def test_probe_argv_runs_sh_in_a_throwaway_container_without_network():
    argv = image_python.probe_argv('img:1', docker='/usr/bin/docker')
    assert argv[:8] == ['/usr/bin/docker', 'run', '--rm', '--network', 'none', '--entrypoint', '/bin/sh', 'img:1']
    assert argv[8] == '-c' and "KNOWN='/opt/env/bin/python3 /opt/venv/bin/python3" in argv[9]


@pytest.mark.parametrize('bad', ['python3', '/opt/my env/bin/python3', "/opt/x'/python3"])
def test_known_paths_must_be_absolute_without_spaces_or_quotes(bad):
    with pytest.raises(ValueError, match='must be absolute'):
        image_python.probe_script((bad,))
