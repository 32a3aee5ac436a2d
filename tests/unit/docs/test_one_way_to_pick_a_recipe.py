# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One way to pick a recipe (issue 48): `ds4_profile` in the site inventory, `-e ds4_profile=<name>` for a one-off
switch. The collection ships one inventory, the sample site (inventories/sample-site), which sets ds4_profile once to
a shipped recipe, lists every shipped recipe beside it, and passes the collection's own checks; no second way comes
back: no other shipped inventory (a per-recipe one such as the old inventories/<recipe>/), and no file that names one."""

import os
import re
import subprocess

import yaml

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import catalogue, ds4_config, known_vars as kv, role_inputs
from golden_regen import regen  # pylint: disable=import-error

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
SAMPLE_SITE = os.path.join(REPO, 'inventories', 'sample-site')
SITE_VARS = os.path.join(SAMPLE_SITE, 'group_vars', 'spark', 'site.yml')
# Records of the past, not instructions: release notes of earlier versions.
HISTORY = ('changelogs/',)
# Lines owned by another change (plugins/action/, not this one's to edit) that still name the old layout; each is an
# exact line, so a new mention anywhere (that file included) still fails.


def _yaml(path):
    with open(path) as handle:
        return yaml.safe_load(handle) or {}


def _tracked():
    out = subprocess.run(['git', 'ls-files', '-z'], cwd=REPO, stdout=subprocess.PIPE, check=True).stdout.decode()
    return [p for p in out.split('\0') if p and os.path.isfile(os.path.join(REPO, p)) and not os.path.islink(os.path.join(REPO, p))]


def test_the_sample_site_is_the_only_shipped_inventory():
    assert sorted(n for n in os.listdir(os.path.join(REPO, 'inventories')) if not n.startswith('.')) == ['sample-site']
    inventory_files = sorted(os.path.relpath(os.path.join(d, f), SAMPLE_SITE) for d, _s, files in os.walk(SAMPLE_SITE) for f in files)
    assert inventory_files == ['group_vars/spark/site.yml', 'host_vars/spark1.yml', 'host_vars/spark2.yml', 'hosts.yml']
    with open(os.path.join(REPO, 'ansible.cfg')) as handle:
        assert re.search(r'^inventory = inventories/sample-site$', handle.read(), re.M)


def test_the_sample_site_sets_ds4_profile_once_to_a_shipped_recipe():
    found = []
    for dirpath, _dirs, files in os.walk(SAMPLE_SITE):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path) as handle:
                found += [os.path.relpath(path, SAMPLE_SITE) for line in handle if re.match(r'^\s*ds4_profile\s*:', line)]
    assert found == ['group_vars/spark/site.yml'], found
    profile = _yaml(SITE_VARS)['ds4_profile']
    assert profile in catalogue.recipe_names() and profile == 'balanced', profile
    # the test site of the Molecule scenarios picks the same recipe the same way (its own group vars)
    molecule = os.path.join(REPO, 'molecule', 'resources', 'inventory', 'group_vars', 'spark', 'profile.yml')
    assert _yaml(molecule) == {'ds4_profile': profile}


def test_the_comment_beside_ds4_profile_lists_exactly_the_shipped_recipes():
    with open(SITE_VARS) as handle:
        lines = handle.read().splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith('ds4_profile:'))
    start = max(i for i in range(end) if not lines[i].startswith('#')) + 1
    block = lines[start:end]
    listed = re.findall(r'[a-z0-9][a-z0-9.-]*[a-z0-9]', ' '.join(re.sub(r'\([^)]*\)', '', ln[1:]) for ln in block if ln.startswith('#   ')))
    assert listed == catalogue.recipe_names(), listed
    assert any('roles/config/files/recipes/' in ln for ln in block) and any('-e ds4_profile=<name>' in ln for ln in block), block


def test_the_sample_site_passes_the_collections_own_checks():
    inputs = regen.inventory_inputs(None)  # the sample site as it ships, no -e
    assert inputs['ds4_profile'] == _yaml(SITE_VARS)['ds4_profile']
    errors, _warnings, _msgs, _overrides, _notes = ds4_config.validate_all(inputs)
    assert errors == []
    assert ds4_config.compute_effective(inputs, 'spark1')['recipe'] == inputs['ds4_profile']
    # the role inputs and the unknown-variable check the config action runs on every inventory value
    options = regen.role_options()
    known, roles = kv.scan_collection(REPO, yaml.safe_load)
    for path in (SITE_VARS, os.path.join(SAMPLE_SITE, 'host_vars', 'spark1.yml'), os.path.join(SAMPLE_SITE, 'host_vars', 'spark2.yml')):
        values = _yaml(path)
        assert role_inputs.problems(values, options) == [], path
        cands = dict((k, {'hosts': ['spark1'], 'value': v}) for k, v in values.items())
        assert kv.find_unknown(cands, known, kv.prefixes(roles)) == [], path


def test_no_file_names_a_per_recipe_inventory():
    """`inventories/<recipe>` (a placeholder, a recipe's name, the old _shared) in any shipped file, or a path joined to
    one in Python, is a second way to pick a recipe."""
    names = '|'.join(re.escape(n) for n in catalogue.recipe_names() + ['_shared'])
    slash = re.compile(r'inventories/(?:<[^>/]*>|(?:%s)\b)' % names)
    joined = re.compile(r'''inventories['"]\s*,\s*(?:['"](?:%s)['"]|(?!['"]sample-site['"])[A-Za-z_]+\b)''' % names)
    hits = []
    for path in _tracked():
        if path.startswith(HISTORY) or path == 'tests/unit/docs/test_one_way_to_pick_a_recipe.py':
            continue
        try:
            with open(os.path.join(REPO, path), encoding='utf-8') as handle:
                text = handle.read()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if slash.search(line) or (path.endswith('.py') and joined.search(line)):
                hits.append('%s:%d: %s' % (path, number, line.strip()))
    assert hits == [], 'a second way to pick a recipe (name ds4_profile in the site inventory instead):\n' + '\n'.join(hits)


def test_the_check_sees_each_old_form():
    """The patterns of the test above catch what they are meant to (so a pass there is not a blind one)."""
    names = '|'.join(re.escape(n) for n in catalogue.recipe_names() + ['_shared'])
    slash = re.compile(r'inventories/(?:<[^>/]*>|(?:%s)\b)' % names)
    joined = re.compile(r'''inventories['"]\s*,\s*(?:['"](?:%s)['"]|(?!['"]sample-site['"])[A-Za-z_]+\b)''' % names)
    for line in ('ansible-playbook site.yml -i inventories/throughput', '-i inventories/<profile>', 'inventories/_shared/hosts.yml',
                 '`inventories/<recipe>/group_vars/spark/profile.yml`'):
        assert slash.search(line), line
    for line in ("os.path.join(REPO, 'inventories', 'balanced')", "os.path.join(REPO, 'inventories', profile)",
                 'os.path.join(REPO, "inventories", "_shared", "hosts.yml")'):
        assert joined.search(line), line
    for line in ('-i inventories/sample-site', "os.path.join(REPO, 'inventories', 'sample-site')", 'inventories/sample-site/hosts.yml:15'):
        assert not slash.search(line) and not joined.search(line), line
