# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ds4_effective.launch: the launch facts the readiness gate, a rollback, the drains and the regression kit read,
computed once by the config compile (ds4_config.launch_facts) and copied into the deployed record, never parsed back
from the rendered script. For every shipped recipe, every variant and both ranks they equal what the rendered
script itself says (config_set.launch_facts, kept only to read a record written before the slice existed)."""


import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import config_set
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config
from golden_regen import regen  # pylint: disable=import-error


CASES = [('profile', p) for p in ds4_config.PROFILES] + [('variant', v) for v in sorted(regen.VARIANTS)]
# the script's word for each published key
SCRIPT_KEY = {'vllm_port': 'api_port', 'vllm_host': 'api_host'}


@pytest.mark.parametrize('kind,name', CASES, ids=lambda x: x)
def test_the_published_launch_facts_are_what_the_script_runs(kind, name):
    inputs = regen.inventory_inputs(name) if kind == 'profile' else regen.variant_inputs(name)
    for host in inputs['spark_hosts']:
        eff = ds4_config.compute_effective(inputs, host)
        parsed = config_set.launch_facts(eff['launch_script'])
        launch = eff['launch']
        for key in ('served_model_name', 'max_model_len', 'max_num_seqs', 'thinking', 'vllm_port', 'vllm_host', 'headless'):
            assert launch[key] == parsed[SCRIPT_KEY.get(key, key)], (name, host, key, launch, parsed)
        assert launch['engine_url'] == 'http://%s:%s' % (launch['vllm_host'], launch['vllm_port']) == eff['api']['engine_url']
        assert launch['public_port'] == eff['api']['public_port']
        assert launch['served_model_name'] and launch['max_model_len'], launch


def test_an_exposed_api_has_two_ports_and_the_names_say_which():
    """Behind the proxy, clients use api.port and vLLM the upstream port: public_port and vllm_port, never one
    ambiguous api_port."""
    inputs = regen.inventory_inputs('balanced')
    for hv in inputs['hostvars'].values():
        hv['ds4_api_allowed_networks'] = ['10.0.0.0/24']
    inputs['ds4_api_allowed_networks'] = ['10.0.0.0/24']
    eff = ds4_config.compute_effective(inputs, 'spark1')
    assert eff['api']['proxied'], eff['api']
    assert eff['launch']['public_port'] == 8000 and eff['launch']['vllm_port'] == 8001, eff['launch']
    assert eff['launch']['engine_url'] == 'http://127.0.0.1:8001'
