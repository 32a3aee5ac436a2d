# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rooms by where code runs (docs/architecture.md "Where code runs").

- ``plugins/plugin_utils/``: controller-only code (action, filter and callback plugins import it). Ansible never
  ships it to a host, so no module, no ``module_utils`` file and no node-side file may import it: such an import
  works on the controller and fails on the node.
- ``plugins/module_utils/``: code that runs on the target: imported by a module (shipped in its AnsiballZ payload)
  or copied to the nodes by a role (the quality canary's package, the router's admin client, the failure
  catalogue and memory guard next to the pair guard, the converge probe's source). A file that nothing on the
  target needs belongs in plugin_utils.
- A set of files a role copies to the nodes carries every ``module_utils`` file they import (a missing one fails
  on the node at import time, after the deploy).

The import graph is read from the sources (ast), and the shipped sets from the roles' own tasks and vars, so the
test follows the code instead of a list kept beside it.
"""

from __future__ import annotations

import ast
import os
import re

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
PLUGINS = os.path.join(REPO, 'plugins')
MU_DIR = os.path.join(PLUGINS, 'module_utils')
PU_DIR = os.path.join(PLUGINS, 'plugin_utils')
PREFIX = 'ansible_collections.dgxspark.ds4.plugins.'
# The converge probe's source goes to the node's Python as text (plugins/action/converge_state.py _probe_source).
SENT_AS_SOURCE = {'converge_state'}
SHIP_SRC_RE = re.compile(r'plugins/module_utils/\{\{ *item *\}\}')


def _py_files(directory):
    return sorted(os.path.join(directory, name) for name in os.listdir(directory) if name.endswith('.py') and name != '__init__.py')


def _name(path):
    return os.path.splitext(os.path.basename(path))[0]


def imports_of(path):
    """{(room, name)} of the collection's plugin_utils / module_utils imports of a file; a relative import inside
    module_utils counts as module_utils."""
    tree = ast.parse(open(path).read(), path)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ''
            if node.level and os.path.dirname(path) == MU_DIR:
                out.update(('module_utils', n) for n in ([module.split('.')[0]] if module else [a.name for a in node.names]))
                continue
            for room in ('module_utils', 'plugin_utils'):
                base = PREFIX + room
                if module == base:
                    out.update((room, a.name) for a in node.names)
                elif module.startswith(base + '.'):
                    out.add((room, module[len(base) + 1:].split('.')[0]))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                for room in ('module_utils', 'plugin_utils'):
                    if alias.name.startswith(PREFIX + room + '.'):
                        out.add((room, alias.name[len(PREFIX + room) + 1:].split('.')[0]))
    return out


MODULE_UTILS = dict((_name(p), p) for p in _py_files(MU_DIR))
PLUGIN_UTILS = dict((_name(p), p) for p in _py_files(PU_DIR))


def _closure(roots):
    """The module_utils files the roots import, transitively (the roots included)."""
    seen, stack = set(), list(roots)
    while stack:
        name = stack.pop()
        if name in seen or name not in MODULE_UTILS:
            continue
        seen.add(name)
        stack.extend(n for room, n in imports_of(MODULE_UTILS[name]) if room == 'module_utils')
    return seen


def shipped_sets():
    """{'<role>/<tasks file>: <task name>': [module_utils names]} of every task that copies module_utils files to a
    host (src .../plugins/module_utils/{{ item }}), its loop resolved from the role's vars/main.yml."""
    out = {}
    roles = os.path.join(REPO, 'roles')
    for role in sorted(os.listdir(roles)):
        tasks_dir = os.path.join(roles, role, 'tasks')
        if not os.path.isdir(tasks_dir):
            continue
        vars_path = os.path.join(roles, role, 'vars', 'main.yml')
        role_vars = yaml.safe_load(open(vars_path)) if os.path.exists(vars_path) else {}
        for name in sorted(os.listdir(tasks_dir)):
            for task in yaml.safe_load(open(os.path.join(tasks_dir, name))) or []:
                copy = task.get('ansible.builtin.copy') or {}
                if not SHIP_SRC_RE.search(str(copy.get('src', ''))):
                    continue
                loop = task.get('loop')
                if isinstance(loop, str):
                    match = re.match(r'^\{\{ *(\w+) *\}\}$', loop.strip())
                    assert match, 'a shipped module_utils list must be a list or one role variable: %r' % loop
                    if role == '_node_package' and match.group(1) == '_node_package_files':
                        loop = NODE_PACKAGE  # what its callers derive from the source tree (every module_utils file)
                    else:
                        loop = role_vars[match.group(1)]
                out['%s/%s: %s' % (role, name, task['name'])] = [_name(item) for item in loop]
    return out


def _node_package():
    """The node package's files as the callers' vars derive them (roles/vllm_service/vars/main.yml
    _vllm_service_node_package, roles/router/vars/main.yml _router_node_package): every .py under module_utils,
    module_utils/node and module_utils/node/pairguard."""
    out = []
    for sub in ('', 'node', os.path.join('node', 'pairguard')):
        directory = os.path.join(MU_DIR, sub)
        if os.path.isdir(directory):
            out.extend(os.path.relpath(p, MU_DIR) for p in _py_files(directory))
    return out


NODE_PACKAGE = _node_package()
SHIPPED = shipped_sets()


def target_roots():
    """module_utils names a target needs directly: modules' imports, shipped files, the probe sent as source."""
    roots = set(SENT_AS_SOURCE)
    for path in _py_files(os.path.join(PLUGINS, 'modules')):
        roots.update(n for room, n in imports_of(path) if room == 'module_utils')
    for names in SHIPPED.values():
        roots.update(names)
    return roots


def test_the_shipped_sets_are_found():
    """The parser finds the roles' copies (the canary package, the router's client, the pair guard's helpers): an
    empty result would make the tests below pass on nothing."""
    assert 'quality_canary' in sum(SHIPPED.values(), []), SHIPPED
    assert 'router_admin' in sum(SHIPPED.values(), []), SHIPPED
    assert 'failure_catalogue' in sum(SHIPPED.values(), []), SHIPPED
    assert 'pair' in sum(SHIPPED.values(), []), SHIPPED


def test_the_callers_derive_the_node_package_as_the_test_does():
    """Each role that ships the node package derives its paths from the same globs (no hand list), and hands them to
    the one task file (roles/_node_package) that its converge checks probe."""
    for role, var in (('vllm_service', '_vllm_service_node_package'), ('router', '_router_node_package')):
        text = yaml.safe_load(open(os.path.join(REPO, 'roles', role, 'vars', 'main.yml')))[var]
        globs = re.findall(r"/plugins/module_utils/([\w/*]*\*\.py)'", text)
        assert globs == ['*.py', 'node/*.py', 'node/pairguard/*.py'], (role, globs)
    for path, var in (('roles/vllm_service/tasks/node_files.yml', '_vllm_service_node_package'),
                      ('roles/router/tasks/install.yml', '_router_node_package')):
        tasks = yaml.safe_load(open(os.path.join(REPO, path)))
        includes = [task for task in tasks if (task.get('ansible.builtin.include_role') or {}).get('name') == 'dgxspark.ds4._node_package']
        assert len(includes) == 1 and includes[0]['vars']['_node_package_files'] == '{{ %s }}' % var, path


STDLIB = set(getattr(__import__('sys'), 'stdlib_module_names', ()))
# Imported only inside the container's torch process (ds4_allreduce.py runs there, not on the node's python3).
CONTAINER_ONLY = {'torch'}


def _top_imports(path):
    """Imported module names, but the fallbacks of an `except ImportError` (python 2 names, never taken)."""
    tree = ast.parse(open(path).read(), path)
    fallback = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler):
            fallback.update(id(n) for h in node.body for n in ast.walk(h))
    out = set()
    for node in ast.walk(tree):
        if id(node) in fallback:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            out.add(node.module or '')
    return out


def test_node_code_imports_only_the_standard_library_and_the_package():
    """Every node script (roles/*/files/*.py) and what it imports from the package, transitively: the standard
    library or the collection's module_utils (the node package), nothing else (the nodes' python3 has no more)."""
    assert STDLIB, 'python >= 3.10 is needed for sys.stdlib_module_names'
    scripts = _node_scripts()
    names = set()
    for path in scripts:
        names.update(n for room, n in imports_of(path) if room == 'module_utils')
    pkg = [os.path.join(MU_DIR, p) for p in NODE_PACKAGE if p.startswith('node' + os.sep)]
    for path in pkg:
        names.update(n for room, n in imports_of(path) if room == 'module_utils')
    files = scripts + pkg + [MODULE_UTILS[n] for n in sorted(_closure(names))]
    bad = {}
    for path in files:
        for module in _top_imports(path):
            top = module.split('.')[0]
            sibling = os.path.exists(os.path.join(os.path.dirname(path), top + '.py')) and path in scripts
            if module.startswith(PREFIX + 'module_utils') or top in STDLIB or top in CONTAINER_ONLY or sibling:
                continue
            bad.setdefault(os.path.relpath(path, REPO), []).append(module)
    assert 'quality_canary' in names and 'router_admin' in names, names
    assert not bad, bad


@pytest.mark.parametrize('path', _py_files(os.path.join(PLUGINS, 'modules')) + sorted(MODULE_UTILS.values()),
                         ids=lambda p: os.path.relpath(p, REPO))
def test_target_code_imports_no_controller_code(path):
    bad = sorted(n for room, n in imports_of(path) if room == 'plugin_utils')
    assert not bad, '%s runs on the target and imports controller-only plugin_utils: %s (move what it needs to ' \
                    'module_utils, or the code that needs it to the controller)' % (os.path.relpath(path, REPO), bad)


def _node_scripts():
    out = []
    for dirpath, _dirs, files in os.walk(os.path.join(REPO, 'roles')):
        if os.path.basename(dirpath) == 'files' or '/files/' in dirpath:
            out.extend(os.path.join(dirpath, f) for f in files if f.endswith('.py'))
    return sorted(out)


@pytest.mark.parametrize('path', _node_scripts(), ids=lambda p: os.path.relpath(p, REPO))
def test_node_scripts_import_no_controller_code(path):
    text = open(path).read()
    assert 'plugin_utils' not in text, '%s runs on a node: plugin_utils never reaches it' % os.path.relpath(path, REPO)


def test_module_utils_holds_only_what_a_target_runs():
    reached = _closure(target_roots())
    idle = sorted(set(MODULE_UTILS) - reached)
    assert not idle, ('plugins/module_utils/%s: no module imports it and no role ships it to a host; controller-only '
                      'code lives in plugins/plugin_utils' % ', '.join(idle))


def test_plugin_utils_holds_no_target_code():
    """A plugin_utils file is imported by none of what the target runs (it would not be there): the converse."""
    needed = set()
    for name in _closure(target_roots()):
        needed.update(n for room, n in imports_of(MODULE_UTILS[name]) if room == 'plugin_utils')
    assert not needed, needed


@pytest.mark.parametrize('task', sorted(SHIPPED), ids=str)
def test_a_shipped_set_carries_what_it_imports(task):
    names = SHIPPED[task]
    missing = sorted(_closure(names) - set(names))
    assert not missing, '%s copies %s to the host, which import %s from module_utils too (add them to the list)' % (
        task, names, missing)


def test_the_graph_sees_a_violation():
    """The parser is not blind: a module_utils file that imports plugin_utils, absolute or relative, is seen."""
    tmp = os.path.join(os.path.dirname(__file__), '_rooms_probe.py')
    try:
        with open(tmp, 'w') as handle:
            handle.write('from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config\n'
                         'from ansible_collections.dgxspark.ds4.plugins.plugin_utils.pairs import x\n'
                         'import ansible_collections.dgxspark.ds4.plugins.module_utils.garble\n')
        assert imports_of(tmp) == {('plugin_utils', 'ds4_config'), ('plugin_utils', 'pairs'), ('module_utils', 'garble')}
    finally:
        os.unlink(tmp)
