# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Role READMEs' input tables cannot drift from meta/argument_specs.yml: tools/role_inputs_doc.py generates them and
this test fails when a README's block differs from what the spec gives (edit the spec, then run the tool)."""

import copy
import importlib.util
import os

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
_SPEC = importlib.util.spec_from_file_location('role_inputs_doc', os.path.join(REPO, 'tools', 'role_inputs_doc.py'))
doc = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(doc)


def test_every_role_readme_lists_every_input_as_its_spec_says(capsys):
    assert doc.main(['--check']) == 0, capsys.readouterr().out


def test_every_role_with_a_spec_has_the_block_and_every_option_in_it():
    roles = list(doc.roles())
    assert len(roles) >= 11, roles
    for role, spec, readme_path in roles:
        with open(readme_path) as handle:
            text = handle.read()
        assert text.count(doc.BEGIN) == 1 and text.count(doc.END) == 1, readme_path
        block = text[text.index(doc.BEGIN):text.index(doc.END)]
        for entry in spec.values():
            for name in entry.get('options') or {}:
                assert '| `%s` |' % name in block, (role, name)


def test_a_changed_spec_is_a_stale_readme():
    """The check is not blind: a description, a default or a new option changes the block."""
    with open(os.path.join(REPO, 'roles', 'firewall', 'meta', 'argument_specs.yml')) as handle:
        spec = yaml.safe_load(handle)['argument_specs']
    base = doc.render(spec)
    for change in ('description', 'default', 'new'):
        other = copy.deepcopy(spec)
        options = other['main']['options']
        if change == 'new':
            options['firewall_something_new'] = {'type': 'str', 'description': 'x'}
        else:
            options['firewall_table'][change] = 'changed'
        assert doc.render(other) != base, change
    readme = 'intro\n\n## Variables\n' + base + '\nafter\n'
    assert doc.updated(readme, base) == readme
    assert doc.updated(readme, base.replace('nftables', 'iptables')) != readme


def test_markup_and_pipes_are_markdown():
    spec = {'main': {'short_description': 'S', 'options': {
        'x_a': {'type': 'str', 'default': "{{ a | default('b') }}", 'description': ['Use C(foo) or I(bar).', 'Two.']},
        'x_b': {'type': 'list', 'elements': 'str', 'required': True, 'choices': ['p', 'q'], 'description': 'V(p) | O(x_a)'}}}}
    block = doc.render(spec)
    assert "| `x_a` | str | `{{ a \\| default('b') }}` | Use `foo` or `bar`. Two. |" in block, block
    assert '| `x_b` | list of str (`p`, `q`) | required | `p` \\| `x_a` |' in block, block
