# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Golden launch scripts: tests/golden/<profile>/<host>/{launch-*.sh,nccl.env}, and for a collection setting that
changes the launch, tests/golden/_variants/<variant>/<host>/ (VARIANTS: a profile's inventory plus extra vars).

Regenerate after an intended change to a profile, the base layer or the renderer:
    .venv/bin/python tests/golden/regen.py
then review `git diff tests/golden/` (every flag change shows up there).
tests/integration/test_golden_render.py proves, for every profile, that `playbooks/render.yml` run through
ansible-playbook writes the same files.

Also the shared loader the unit tests use: it reads the sample site inventory's YAML (inventories/sample-site) with
PyYAML the way Ansible layers them (group_vars/spark/*.yml, then host_vars/<host>.yml), a recipe chosen as a user
switches for one run: `-e ds4_profile=<recipe>` (extra vars win over the inventory).
"""

import glob
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..', '..'))
COLL_ROOT = os.path.join(REPO, '.collections')
if COLL_ROOT not in sys.path:
    sys.path.insert(0, COLL_ROOT)
LINK = os.path.join(COLL_ROOT, 'ansible_collections', 'dgxspark', 'ds4')
if not os.path.exists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(REPO, LINK)

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config  # noqa: E402
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import catalogue
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import role_inputs  # noqa: E402

HOSTS = ('spark1', 'spark2')
VARIANTS_DIR = os.path.join(HERE, '_variants')
# variant -> (profile, extra vars as `-e` gives them: strings). tests/integration/test_golden_render.py renders each one
# with render.yml -i inventories/sample-site -e ds4_profile=<profile> -e NAME=VALUE.
VARIANTS = {
    'long-context-1m-interactive': ('long-context-1m', {'ds4_interactive_long_prompts': 'true'}),
}


def load_base():
    with open(os.path.join(REPO, 'roles', 'config', 'vars', 'main.yml')) as f:
        return yaml.safe_load(f)['config_base']


# The one shipped inventory: the sample site (hosts, host_vars, group_vars/spark/site.yml with ds4_profile).
SAMPLE_SITE = os.path.join(REPO, 'inventories', 'sample-site')


def load_inventory(profile=None, inv=SAMPLE_SITE):
    """-> (group_vars dict, {host: merged vars}) for the inventory `inv` (default: the sample site), with
    `-e ds4_profile=<profile>` when profile is given (extra vars: they win over every inventory layer)."""
    with open(os.path.join(inv, 'hosts.yml')) as f:
        spark = yaml.safe_load(f)['spark']
    hosts = list(spark['hosts'])
    # the site's group vars (hosts.yml spark.vars), then the inventory's group_vars/spark/ (they win)
    group = dict(spark.get('vars') or {})
    for path in sorted(glob.glob(os.path.join(inv, 'group_vars', 'spark', '*.yml'))):
        with open(path) as f:
            group.update(yaml.safe_load(f) or {})
    hostvars = {}
    for host in hosts:
        merged = dict(group, **(spark['hosts'][host] or {}))
        path = os.path.join(inv, 'host_vars', '%s.yml' % host)
        if os.path.exists(path):
            with open(path) as f:
                merged.update(yaml.safe_load(f) or {})
        hostvars[host] = merged
    if profile is not None:
        group['ds4_profile'] = profile
        for merged in hostvars.values():
            merged['ds4_profile'] = profile
    return group, hostvars


def role_options():
    """options_by_name() of every role's argument spec, as the config action reads them."""
    return role_inputs.options_by_name(role_inputs.load_specs(REPO, yaml.safe_load))


def inventory_inputs(profile):
    """What `-i inventories/sample-site -e ds4_profile=<profile>` gives the config action: the recipe by name, the site, the hosts, and the
    nccl_fabric values nccl.env is rendered with (the inventory's, else the role's defaults)."""
    group, hostvars = load_inventory(profile)
    return dict(role_inputs.nccl_fabric_inputs(group, role_options()), **{
        'base': load_base(),
        'spark_hosts': list(hostvars),
        'hostvars': hostvars,
        'ds4_profile': group.get('ds4_profile'),
        'ds4_profile_config': group.get('ds4_profile_config'),
        'ds4_site_overrides': group.get('ds4_site_overrides'),
        'ds4_model': group.get('ds4_model'),
        'ds4_model_revisions': group.get('ds4_model_revisions'),
        'ds4_interactive_long_prompts': group.get('ds4_interactive_long_prompts'),
    })


def recipe_layer(profile):
    """The shipped recipe as a dict (roles/config/files/recipes/<profile>.yml)."""
    return catalogue.load_recipe(profile)


def inputs_for(profile):
    """inventory_inputs with the recipe given in full as ds4_profile_config (a user's own recipe): the unit tests
    edit that layer; they and the goldens (written from inventory_inputs) prove both paths render the same."""
    inputs = inventory_inputs(profile)
    inputs['ds4_profile_config'] = recipe_layer(inputs['ds4_profile'])
    return inputs


def golden_dir(profile, host):
    return os.path.join(HERE, profile, host)


def variant_inputs(variant):
    profile, extra = VARIANTS[variant]
    inputs = inventory_inputs(profile)
    inputs.update(extra)
    return inputs


def main():
    jobs = [(golden_dir(profile, '%s'), inventory_inputs(profile)) for profile in ds4_config.PROFILES]
    jobs += [(os.path.join(VARIANTS_DIR, variant, '%s'), variant_inputs(variant)) for variant in sorted(VARIANTS)]
    for out_pattern, inputs in jobs:
        for host in inputs['spark_hosts']:
            eff = ds4_config.compute_effective(inputs, host)
            out = out_pattern % host
            if not os.path.isdir(out):
                os.makedirs(out)
            for stale in glob.glob(os.path.join(out, '*')):
                os.unlink(stale)
            with open(os.path.join(out, eff['script_name']), 'w') as f:
                f.write(eff['launch_script'])
            with open(os.path.join(out, eff['env_file_name']), 'w') as f:
                f.write(eff['env_file'])
            print('wrote %s/{%s,%s}' % (os.path.relpath(out, REPO), eff['script_name'], eff['env_file_name']))


if __name__ == '__main__':
    main()
