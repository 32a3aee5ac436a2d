# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving container's secrets env file (templates/secrets.env.j2) never carries the HF token:
the container serves offline; the token goes to the download task only (model_cache_hf_token)."""


import os

import jinja2
import yaml

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import role_inputs as ri

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
ROLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..', 'roles', 'vllm_service')
HF = 'hf_ds4UnitFakeHubToken0123456789'


def _render(**values):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, 'templates')), undefined=jinja2.StrictUndefined)
    context = {'vllm_service_config_dir': '/etc/dgxspark-ds4', '_vllm_service_role': 'head',
               'vllm_service_api_key': '', 'vllm_service_hf_token': ''}
    context.update(values)
    return env.get_template('secrets.env.j2').render(**context)


def test_hf_token_never_reaches_the_serving_container():
    text = _render(vllm_service_api_key='sk-upstream', vllm_service_hf_token=HF)
    assert 'VLLM_API_KEY=sk-upstream' in text
    assert HF not in text and 'HF_TOKEN=' not in text


def test_a_set_vllm_service_hf_token_is_refused_before_any_host_changes_naming_the_fix():
    """The config play refuses it (plugins/plugin_utils/role_inputs.py setting_problems), the value never printed."""
    options = ri.options_by_name(ri.load_specs(REPO, yaml.safe_load))
    problems = ri.setting_problems({'role': 'worker'}, {'vllm_service_hf_token': HF}, options, ['balanced'])
    assert len(problems) == 1 and 'model_cache_hf_token' in problems[0] and 'vllm_service_hf_token' in problems[0]
    assert HF not in problems[0]
