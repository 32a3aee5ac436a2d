# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The profile matrix: every shipped profile (roles/config/files/recipes/<profile>.yml, picked the one way a user
switches for a run: -e ds4_profile=<profile>) is deployed on the converged pair with switch.yml, served by the vLLM simulator (the test
inventory's ds4_site_overrides swap only the image ref, to the simulator image carrying the profile's vLLM minor,
and the model revision), passes readiness and
validate.yml (reasoning and tool checks as the profile implies), and serves with the profile's own
served name and context length. Each switch changes the launch, so each one also proves the restart contract: both
ranks restarted, the worker started before the head. Runs last; balanced and throughput are deployed by the scenario's converge
and by test_zz_ops.py."""


import json
import os
import re
import sys

import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

# The other two shipped profiles are deployed by this scenario already, the same way: balanced is the
# test inventory's profile (converge, idempotence, site.yml runs; validate.yml after the first deploy) and
# throughput is switched to, readied and validated by test_zz_ops.py (-e ds4_profile=throughput, like here).
# upstream-0731-dspark is switched to through an inventory layer naming it (ds4_profile) by test_zz_ops.py.
# latency is not deployed here: it is balanced with other numbers (the same image, vLLM minor, entrypoint, port, model
# and container settings; each recipe switch costs ~2 minutes of this scenario, the CI's longest lane). Its launch is
# rendered (tests/golden/latency) and parsed by the simulator's parser of its vLLM minor
# (tests/unit/vllm_sim/test_vllm_sim_cli.py), and each of its values checked against vLLM's flag schema, a wrong one
# refused (tests/unit/plugins/plugin_utils/test_vllm_schema.py): what its deploy proved beyond balanced's.
# dspark-c16 is not deployed for the same reason: it is dspark-nvfp4-1m with two other numbers (max-model-len 200000,
# max-num-seqs 16; the same image, vLLM minor, model, port, env and container settings), rendered
# (tests/golden/dspark-c16), parsed and schema-checked the same way. Seven of the nine recipes are deployed in CI:
# balanced, throughput and upstream-0731-dspark (above) and these four.
PROFILES = ['conservative', 'long-context-1m', 'dspark-nvfp4-1m', 'upstream-mtp']
# Deployed from the collection as a user installs it (ds4_drill.installed_collection: built, installed from its
# tarball, run as `ansible-playbook dgxspark.ds4.site -i <inventory> -e ds4_profile=<recipe>` from a directory outside
# the checkout): no recipe in the inventory, nothing from the repository. The others switch from the working tree.
FROM_TARBALL = 'upstream-mtp'
# the one recipe with a cache volume the others lack (/var/cache/dgxspark-ds4/huggingface)
NEW_CACHE_DIR = 'long-context-1m'


def recipe_file(name):
    """The recipe itself: collection data (roles/config/files/recipes/), chosen by the inventory's ds4_profile."""
    return os.path.join(d.PROJECT, 'roles', 'config', 'files', 'recipes', name + '.yml')


@pytest.mark.parametrize('profile', PROFILES)
def test_profile_deploys_serves_and_validates(profile):
    with open(recipe_file(profile)) as handle:
        layer = yaml.safe_load(handle)
    serve_args = layer['serve_args']
    # The simulator image carrying the vLLM minor the profile declares (tests/harness/build-sim-image.sh builds one
    # per flag schema): container_image reads the version from it, and the simulator parses argv with its schema.
    minor = '.'.join(layer['image']['vllm_version'].split('.')[:2])
    overrides = dict(d.BASE_OVERRIDES, image={'ref': 'ds4-vllm-sim:vllm-%s' % minor})
    extra = {'ds4_profile': profile, 'ds4_validate_levels': [1, 2], 'ds4_site_overrides': overrides}
    head0, worker0 = d.both_started()
    if profile == FROM_TARBALL:
        rc, out = d.run_installed_playbook('site', extra)
        assert rc == 0, out[-4000:]
        assert 'No config file found' in out, 'ran with a config file (the repository\'s?): ' + out[:1500]
        assert 'vllm_service: runs' in out, 'the installed site.yml did not deploy the recipe: ' + out[-3000:]
    else:
        rc, out = d.run_playbook('switch.yml', extra)
        assert rc == 0, out[-4000:]
        # a recipe switch changes the launch, not the node scripts (same collection code, each as recorded): their
        # ~20 module runs per node are not included, unless the recipe adds a cache directory (long-context-1m's
        # huggingface cache; the installed collection above is other code: included too)
        assert 'vllm_service: runs (' in ' '.join(out.split()), out[-3000:]
        assert ('node_files.yml' in out) == (profile == NEW_CACHE_DIR), (profile, out[-3000:])
    # The restart contract (a changed launch restarts both ranks, worker first).
    head1, worker1 = d.both_started()
    assert head1 != head0 and worker1 != worker0, 'both ranks must restart on a recipe switch'
    assert worker1 < head1, 'the worker must start before the head (%s vs %s)' % (worker1, head1)
    # rc 0: readiness passed inside the deploy (a failure there fails the run, no auto rollback here).
    assert re.search(r'msg: [1-9][0-9]* request\(s\), 0 failure\(s\)', out), 'validate.yml did not pass: ' + out[-2000:]
    # Through the API proxy on the profile's own public port (seed 003 serves on 8888).
    port = (layer.get('api') or {}).get('port', 8000)
    _status, body = d.request('/v1/models', url='http://%s:%d' % (d.ip(11), port))
    served = json.loads(body)['data'][0]
    assert served['id'] == serve_args['served-model-name']
    assert served['max_model_len'] == serve_args['max-model-len']
    script = d.node('spark1', 'cat', '/etc/dgxspark-ds4/launch-head.sh')
    assert re.search(r"'?--max-model-len'? '?%d'?" % serve_args['max-model-len'], script), script[-1500:]
