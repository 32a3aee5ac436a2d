# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The golden nccl.env of every shipped recipe (tests/golden/<recipe>/<host>/nccl.env, ds4_effective.env_file, what
render.yml writes) is what the nccl_fabric role deploys on a node with that inventory: the same render
(nccl_preflight.build_env with the role's nccl_fabric_env, the '=' exact-match prefixes, the per-node sources), the
node's file only adding its one "Discovered:" comment line. The nodes are the sysfs fixtures whose fabric the
shipped inventories name (tests/fixtures/sysfs/make_fixtures.py: node_a 192.168.100.10, node_b 192.168.100.11)."""


import glob
import importlib.util
import os

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._fabric import nccl_preflight
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config
from golden_regen import regen  # pylint: disable=import-error

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


fixtures = _load('ds4_sysfs_fixtures_nccl', os.path.join(REPO, 'tests', 'fixtures', 'sysfs', 'make_fixtures.py'))
GOLDENS = sorted((os.path.basename(os.path.dirname(os.path.dirname(p))), os.path.basename(os.path.dirname(p)))
                 for p in glob.glob(os.path.join(REPO, 'tests', 'golden', '*', 'spark*', 'nccl.env'))
                 if '_variants' not in p)


@pytest.fixture(scope='module')
def nodes(tmp_path_factory):
    node_a, node_b = fixtures.build(str(tmp_path_factory.mktemp('sysfs')))
    return {'spark1': node_a, 'spark2': node_b}


def test_every_recipe_has_goldens_for_both_hosts():
    assert sorted(set(r for r, _h in GOLDENS)) == sorted(ds4_config.PROFILES)
    assert all(len([h for r2, h in GOLDENS if r2 == r]) == 2 for r, _h in GOLDENS)


@pytest.mark.parametrize('recipe, host', GOLDENS)
def test_the_golden_is_what_nccl_fabric_deploys(nodes, recipe, host):
    inputs = regen.inventory_inputs(recipe)
    eff = ds4_config.compute_effective(inputs, host)
    with open(os.path.join(REPO, 'tests', 'golden', recipe, host, 'nccl.env')) as handle:
        golden = handle.read()
    assert golden == eff['env_file']
    # the role's module on a node of that inventory (roles/nccl_fabric/tasks/discover.yml passes these)
    params = {'effective': eff, 'sysfs_root': nodes[host], 'ipv4_by_ifname': {eff['fabric']['ifname']: [eff['fabric']['ip']]},
              'fabric_ip': eff['fabric']['ip'], 'fabric_env': inputs['nccl_fabric_env'],
              'gid_index': inputs['nccl_fabric_gid_index'], 'exact_match': inputs['nccl_fabric_exact_match']}
    result, _warnings = nccl_preflight.fabric_facts(params, True)
    assert result['errors'] == []
    deployed = result['env_file'].splitlines()
    discovered = [line for line in deployed if line.startswith('# Discovered: ')]
    assert len(discovered) == 1 and '192.168.100.1' in discovered[0]
    assert [line for line in deployed if line not in discovered] == golden.splitlines()
    # the role's own values are in it, with NCCL's exact-match prefix (what the goldens lacked before)
    assert 'NCCL_NET=IB' in deployed and 'NCCL_SOCKET_IFNAME==%s' % eff['fabric']['ifname'] in deployed
