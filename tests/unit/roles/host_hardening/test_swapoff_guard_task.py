# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""host_hardening's swapoff guard as the role runs it: the preflight's refusal task, taken from
roles/host_hardening/tasks/preflight.yml as it is, run by ansible-playbook on the controller with the facts the
preflight gathers (a /proc/meminfo, /proc/swaps' active areas, GPU and vLLM processes). The Molecule nodes share
the CI machine's kernel, so swapoff never runs there: this is where the wiring is proved."""


import base64
import os
import subprocess
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
TASKS = os.path.join(REPO, 'roles', 'host_hardening', 'tasks', 'preflight.yml')
SWAP_TASKS = os.path.join(REPO, 'roles', 'host_hardening', 'tasks', 'swap.yml')
GIB_KB = 1024 * 1024

pytestmark = pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason='ansible-playbook not next to the test interpreter')


def _task(path, name):
    with open(path) as handle:
        tasks = yaml.safe_load(handle)
    return [t for t in tasks if t['name'] == name][0]


def _run(tmp_path, available_gib, swap_total_gib, swap_free_gib, gpu=(), units=(), margin=8192):
    meminfo = 'MemTotal: %d kB\nMemAvailable: %d kB\nSwapTotal: %d kB\nSwapFree: %d kB\n' % (
        128 * GIB_KB, available_gib * GIB_KB, swap_total_gib * GIB_KB, swap_free_gib * GIB_KB)
    refusal = _task(TASKS, 'Refuse swapoff when the swap in use does not fit in free memory, or under a live vLLM/GPU process')
    # swapoff itself, replaced by a marker file: it must never be reached when the guard refuses
    swapoff = dict(_task(SWAP_TASKS, 'Turn swap off now'))
    swapoff.pop('ansible.builtin.command')
    swapoff['ansible.builtin.copy'] = {'dest': str(tmp_path / 'swapoff-ran'), 'content': 'ran\n', 'mode': '0644'}
    swapoff.pop('changed_when', None)
    play = [{'hosts': 'localhost', 'gather_facts': False, 'vars': {
        '__host_hardening_meminfo': {'content': base64.b64encode(meminfo.encode()).decode()},
        'host_hardening_swapoff_margin_mib': margin, 'host_hardening_apply_kernel': True,
        '__host_hardening_host': {'swaps_active': ['/swapfile'], 'ds4_units_active': list(units)},
        '__host_hardening_gpu_apps': {'rc': 0, 'stdout_lines': list(gpu)},
        '__host_hardening_vllm_procs': {'rc': 1, 'stdout_lines': []}}, 'tasks': [refusal, swapoff]}]
    path = tmp_path / 'play.yml'
    path.write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1')
    argv = [PLAYBOOK, '-i', 'localhost,', '-c', 'local', '-e', 'ansible_python_interpreter=%s' % sys.executable, str(path)]
    proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=300, check=False)
    return proc.returncode, ' '.join(proc.stdout.split()), (tmp_path / 'swapoff-ran').exists()


def test_swap_in_use_above_free_memory_is_refused_with_the_numbers_before_swapoff(tmp_path):
    rc, out, ran = _run(tmp_path, available_gib=15, swap_total_gib=32, swap_free_gib=12,
                        units=['dgxspark-ds4-api-proxy.service'])
    assert rc != 0 and not ran, out[-2000:]
    for needle in ('swapoff refused on localhost: swap in use 20.0 GiB', 'MemAvailable 15.0 GiB',
                   'host_hardening_swapoff_margin_mib = 8192 MiB'):
        assert needle in out, needle
    assert 'while a vLLM/GPU process runs' not in out  # the proxy's unit is no vLLM rank


def test_a_live_vllm_unit_refuses_even_with_room(tmp_path):
    rc, out, ran = _run(tmp_path, available_gib=100, swap_total_gib=32, swap_free_gib=30,
                        units=['dgxspark-ds4-head.service'], gpu=['4242, python3'])
    assert rc != 0 and not ran
    assert 'while a vLLM/GPU process runs (GPU process 4242, python3; unit dgxspark-ds4-head.service)' in out


def test_room_and_nothing_running_lets_swapoff_run(tmp_path):
    rc, out, ran = _run(tmp_path, available_gib=100, swap_total_gib=32, swap_free_gib=12)
    assert rc == 0 and ran, out[-2000:]
