# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving container's secrets env file (templates/secrets.env.j2) never carries the HF token:
the container serves offline; the token goes to the download task only (model_cache_hf_token)."""

from __future__ import absolute_import, division, print_function

import os

import jinja2
import yaml

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


def test_preflight_refuses_vllm_service_hf_token_naming_the_fix():
    with open(os.path.join(ROLE, 'tasks', 'preflight.yml')) as fh:
        tasks = yaml.safe_load(fh)
    hits = [t for t in tasks if 'vllm_service_hf_token' in str(t.get('ansible.builtin.assert', {}).get('that', ''))]
    assert len(hits) == 1, 'preflight must assert vllm_service_hf_token is empty'
    msg = hits[0]['ansible.builtin.assert']['fail_msg']
    assert 'model_cache_hf_token' in msg and 'vllm_service_hf_token' in msg and '{{' not in msg  # value never printed
