# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm_service's own settings (boot forensics, memory guard, quality canary, pair guard, hang watchdog, evidence pruning,
the log driver, the HF token) are refused on the controller, in the config play, before any host changes
(plugins/plugin_utils/role_inputs.py setting_problems, called by the config role's action for every host): each
refusal names the variable and the fix; the shipped defaults, the scenarios' values and a shipped fallback recipe pass.
The wiring through ansible-playbook (the config play refuses, nothing after it runs) is the last test here."""


import glob
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import catalogue
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import role_inputs as ri

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
OPTIONS = ri.options_by_name(ri.load_specs(REPO, yaml.safe_load))
RECIPES = catalogue.recipe_names(REPO)
HEAD = {'role': 'head', 'serve_args': {'gpu-memory-utilization': 0.9}}
WORKER = {'role': 'worker', 'serve_args': {'gpu-memory-utilization': 0.9}}
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')


def _problems(effective=None, **values):
    return ri.setting_problems(effective or HEAD, values, OPTIONS, RECIPES)


def test_the_defaults_and_a_shipped_fallback_recipe_pass():
    assert _problems() == [] and _problems(WORKER) == []
    assert _problems(vllm_service_after_crash='fallback:latency') == []


def test_every_scenario_value_passes():
    for path in glob.glob(os.path.join(REPO, 'molecule', '*', 'vars', '*.yml')):
        with open(path) as handle:
            values = dict((k, v) for k, v in (yaml.safe_load(handle) or {}).items()
                          if k.startswith('vllm_service_') and not (isinstance(v, str) and '{{' in v))
        assert _problems(**values) == [], path


@pytest.mark.parametrize('overrides,expected', [
    ({'vllm_service_after_crash': 'restart'}, 'vllm_service_after_crash = "restart": must be hold, start or fallback:<recipe>'),
    ({'vllm_service_after_crash': 'fallback:no-such-recipe'}, 'vllm_service_after_crash = "fallback:no-such-recipe"'),
    ({'vllm_service_forensics_source': 'file', 'vllm_service_forensics_file': 'relative.log'},
     'vllm_service_forensics_file = "relative.log"'),
    # the old per-node-size MemFree table (its gate sat inside the kernel's reclaim band): refused, naming the replacement
    ({'vllm_service_memory_guard_thresholds': [{'node_gb': 128, 'gate_free_gib': 2.0, 'stop_free_gib': 1.0,
                                                'gate_psi_some_avg10': 10, 'stop_psi_full_avg10': 25}]},
     'vllm_service_memory_guard_thresholds is no longer read'),
    ({'vllm_service_memory_guard_gate_psi_some_avg10': 150}, 'vllm_service_memory_guard_gate_psi_some_avg10 = 150'),
    ({'vllm_service_memory_guard_stop_polls': 0}, 'Fix: set vllm_service_memory_guard_stop_polls'),
    ({'vllm_service_evidence_keep': 0}, 'vllm_service_evidence_keep=0 (directories kept per kind)'),
    ({'vllm_service_evidence_keep': '5 dirs'}, 'vllm_service_evidence_keep="5 dirs"'),
    ({'vllm_service_evidence_max_age_days': 2.5}, 'vllm_service_evidence_max_age_days=2.5 (days)'),
    ({'vllm_service_canary_retry_s': 900}, 'vllm_service_canary_retry_s = 900 is longer than vllm_service_canary_interval_s'),
    ({'vllm_service_canary_timeout_s': 5}, 'vllm_service_canary_timeout_s = 5: must be a number from 10 to 1800'),
    ({'vllm_service_hang_after_s': 8}, 'vllm_service_hang_after_s=8 must be at least twice vllm_service_hang_poll_s=5'),
    ({'vllm_service_hang_metrics_timeout_s': 200}, 'longer than vllm_service_hang_metrics_timeout_s=200'),
    ({'vllm_service_guard_textfile': '/var/lib/node-exporter/guard.txt'}, 'an absolute path ending in .prom'),
    ({'vllm_service_pair_guard_ssh_control_dir': '/run/' + 'x' * 60}, 'an absolute path of at most 60 characters'),
    ({'vllm_service_pair_guard_down_polls': 0}, 'vllm_service_pair_guard_down_polls=0'),
    ({'vllm_service_container_log_driver': 'journald'}, "vllm_service_container_log_driver='journald' stores every vLLM line"),
    ({'vllm_service_container_log_driver': 'json-file', 'vllm_service_container_log_max_size': 'lots'},
     "vllm_service_container_log_max_size='lots'"),
    ({'vllm_service_memory_fraction': 1.5}, 'vllm_service_memory_fraction (or serve_args gpu-memory-utilization) = 1.5'),
    # the unit's docker run gets `--ulimit name=value` from these: a word that is no number, or a name that is not
    # letters (here with a newline, which the control-character rule of problems() refuses too), is refused, escaped
    ({'vllm_service_ulimits': {'memlock': 'unlimited'}}, 'vllm_service_ulimits = {"memlock": "unlimited"}: must map'),
    ({'vllm_service_ulimits': {'nofile\nExecStartPre=/bin/sh': 1}}, 'vllm_service_ulimits = {"nofile\\nExecStartPre'),
    ({'vllm_service_ulimits': {'stack': True}}, 'vllm_service_ulimits = {"stack": true}'),
    ({'vllm_service_ulimits': ['memlock=-1']}, 'vllm_service_ulimits = ["memlock=-1"]'),
])
def test_bad_input_is_refused_naming_the_variable_and_the_fix(overrides, expected):
    problems = _problems(**overrides)
    assert len(problems) == 1 and expected in problems[0] and 'Fix' in problems[0], problems
    assert '\n' not in problems[0]


def test_the_head_only_settings_are_the_heads():
    """The canary, the pair guard and its hang watchdog run on the head: a worker's values for them are not read."""
    bad = {'vllm_service_canary_timeout_s': 5, 'vllm_service_hang_after_s': 8, 'vllm_service_pair_guard_down_polls': 0}
    assert len(_problems(**bad)) == 3
    assert _problems(WORKER, **bad) == []
    assert _problems(vllm_service_pair_guard=False, vllm_service_hang_after_s=8) == []
    assert _problems(vllm_service_hang_watchdog=False, vllm_service_hang_after_s=8) == []


def test_the_hf_token_is_refused_without_showing_it():
    problems = _problems(vllm_service_hf_token='hf_ds4UnitFakeHubToken0123456789')
    assert len(problems) == 1 and 'model_cache_hf_token' in problems[0] and 'vllm_service_hf_token' in problems[0]
    assert 'hf_ds4UnitFakeHubToken' not in problems[0]


def test_ulimits_from_the_variable_else_the_recipe_else_the_default():
    assert _problems(vllm_service_ulimits={'memlock': -1, 'stack': '67108864:67108864', 'nofile': '1024:-1'}) == []
    assert _problems(dict(HEAD, container={'ulimits': {'memlock': -1}})) == []
    # the recipe's container.ulimits (site overrides included) when the variable is unset, named as such
    problems = _problems(dict(HEAD, container={'ulimits': {'stack': '1:2:3'}}))
    assert len(problems) == 1 and problems[0].startswith('ds4_effective.container.ulimits (the recipe'), problems
    # the variable wins over the recipe: a bad recipe value is not what the unit gets
    assert _problems(dict(HEAD, container={'ulimits': {'stack': '1:2:3'}}), vllm_service_ulimits={'stack': 8}) == []


def test_a_recipe_gpu_memory_utilization_outside_0_1_is_refused_when_no_fraction_is_set():
    problems = _problems(dict(HEAD, serve_args={'gpu-memory-utilization': 90}))
    assert problems and 'gpu-memory-utilization) = 90' in problems[0]


@pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason='ansible-playbook not next to the test interpreter')
def test_the_config_play_refuses_before_any_host_is_contacted(tmp_path):
    """render.yml on the shipped sample site inventory (recipe balanced) with a bad hang window: refused by the config play, naming the
    variable; the play after it (the renders) never runs."""
    out_dir = tmp_path / 'out'
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1')
    argv = [PLAYBOOK, '-i', os.path.join(REPO, 'inventories', 'sample-site'), os.path.join(REPO, 'playbooks', 'render.yml'),
            '-e', 'ds4_render_dir=%s' % out_dir, '-e', '{"vllm_service_hang_after_s": 8}']
    proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=300, check=False)
    flat = ' '.join(proc.stdout.split())
    assert proc.returncode != 0, flat[-2000:]
    assert 'configuration refused' in flat and 'vllm_service_hang_after_s=8 must be at least twice' in flat, flat[-2000:]
    assert not out_dir.exists() or not any(out_dir.iterdir())
