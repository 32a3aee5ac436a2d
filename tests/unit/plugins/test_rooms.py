# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rooms by where code runs (docs/architecture.md "Where code runs").

- ``plugins/plugin_utils/``: controller-only code (action, filter, lookup and callback plugins import it). Ansible
  never ships it to a host, so no module, no ``module_utils`` file and no node-side file may import it: such an
  import works on the controller and fails on the node.
- ``plugins/module_utils/<subsystem>/``: code that runs on the target, in private sub-packages by subsystem: imported
  by a module (shipped in its AnsiballZ payload), sent to the node as source (the converge probe), or part of the node
  package. A file that nothing on the target needs belongs in plugin_utils.
- ``plugins/module_utils/_node/``: the node package, standard library only, that every node script
  (``roles/*/files/*.py``) imports; shipped whole by one task file (``roles/_node_package``), its file list from one
  place (the lookup ``dgxspark.ds4.node_package``). It imports nothing outside itself.

The import graph is read from the sources (ast), and the shipped set from the roles' own tasks and vars, so the test
follows the code instead of a list kept beside it.
"""

import ast
import importlib.util
import os
import re
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
PLUGINS = os.path.join(REPO, 'plugins')
MU_DIR = os.path.join(PLUGINS, 'module_utils')
PU_DIR = os.path.join(PLUGINS, 'plugin_utils')
PREFIX = 'ansible_collections.dgxspark.ds4.plugins.'
NODE = '_node'
# The converge probe's source goes to the node's Python as text, with node_probe's (plugins/action/converge_state.py
# _probe_source, _probe_modules).
SENT_AS_SOURCE = {'_converge.converge_state', '_node.node_probe'}
SHIP_SRC_RE = re.compile(r'plugins/module_utils/\{\{ *item *\}\}')
STDLIB = set(getattr(sys, 'stdlib_module_names', ()))
# Imported only inside the container's torch process (ds4_allreduce.py runs there, not on the node's python3).
CONTAINER_ONLY = {'torch'}


def _tree(directory):
    """{dotted name relative to directory: path} of every .py below it but the (empty) package __init__ files."""
    out = {}
    for top, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if d != '__pycache__']
        for f in files:
            if f.endswith('.py') and f != '__init__.py':
                rel = os.path.relpath(os.path.join(top, f), directory)[:-3]
                out[rel.replace(os.sep, '.')] = os.path.join(top, f)
    return out


MODULE_UTILS = _tree(MU_DIR)
PLUGIN_UTILS = _tree(PU_DIR)


def _resolve(room, dotted, names=()):
    """The collection names one import reaches: `from <room>.<dotted> import names` or `import <room>.<dotted>`."""
    files = MODULE_UTILS if room == 'module_utils' else PLUGIN_UTILS
    out = set()
    for name in names:
        full = '%s.%s' % (dotted, name) if dotted else name
        if full in files:
            out.add((room, full))
    if not out:
        out.add((room, dotted))
    return out


def imports_of(path, package_dir=None):
    """{(room, dotted name)} of the collection's plugin_utils / module_utils imports of a file, relative imports inside
    module_utils resolved against the file's package (package_dir: the directory it is read as being in)."""
    tree = ast.parse(open(path).read(), path)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ''
            names = [a.name for a in node.names]
            if node.level:
                package = os.path.relpath(package_dir or os.path.dirname(path), MU_DIR).split(os.sep)
                package = [p for p in package if p != '.'][:len(package) - (node.level - 1) or None]
                dotted = '.'.join([p for p in package if p] + ([module] if module else []))
                out.update(_resolve('module_utils', dotted, names))
                continue
            for room in ('module_utils', 'plugin_utils'):
                base = PREFIX + room
                if module == base:
                    out.update(_resolve(room, '', names))
                elif module.startswith(base + '.'):
                    out.update(_resolve(room, module[len(base) + 1:], names))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                for room in ('module_utils', 'plugin_utils'):
                    if alias.name.startswith(PREFIX + room + '.'):
                        out.update(_resolve(room, alias.name[len(PREFIX + room) + 1:]))
    return out


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


def _lookup():
    spec = importlib.util.spec_from_file_location('node_package_lookup', os.path.join(PLUGINS, 'lookup', 'node_package.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NODE_PACKAGE = _lookup().package_files(MU_DIR)
NODE_NAMES = sorted(p[:-3].replace(os.sep, '.') for p in NODE_PACKAGE if not p.endswith('__init__.py'))


def shipped_sets():
    """{'<role>/<tasks file>: <task name>': [module_utils names]} of every task that writes module_utils files to a
    host: a copy of src .../plugins/module_utils/{{ item }} (its loop resolved from the role's vars), or a
    dgxspark.ds4.file_set of the lookup dgxspark.ds4.node_package's files (the node package)."""
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
                files = str((task.get('dgxspark.ds4.file_set') or {}).get('files', ''))
                if 'dgxspark.ds4.node_package' in files:
                    out['%s/%s: %s' % (role, name, task['name'])] = NODE_NAMES
                    continue
                copy = task.get('ansible.builtin.copy') or {}
                if not SHIP_SRC_RE.search(str(copy.get('src', ''))):
                    continue
                loop = task.get('loop')
                if isinstance(loop, str):
                    match = re.match(r'^\{\{ *(\w+) *\}\}$', loop.strip())
                    assert match, 'a shipped module_utils list must be a list or one role variable: %r' % loop
                    loop = role_vars[match.group(1)]
                out['%s/%s: %s' % (role, name, task['name'])] = sorted(
                    item[:-3].replace('/', '.') for item in loop if not item.endswith('__init__.py'))
    return out


SHIPPED = shipped_sets()


def _node_scripts():
    out = []
    for dirpath, _dirs, files in os.walk(os.path.join(REPO, 'roles')):
        if os.path.basename(dirpath) == 'files' or '/files/' in dirpath:
            out.extend(os.path.join(dirpath, f) for f in files if f.endswith('.py'))
    return sorted(out)


def target_roots():
    """module_utils names a target needs directly: modules' imports, shipped files, the probe sent as source."""
    roots = set(SENT_AS_SOURCE)
    for path in _tree(os.path.join(PLUGINS, 'modules')).values():
        roots.update(n for room, n in imports_of(path) if room == 'module_utils')
    for names in SHIPPED.values():
        roots.update(names)
    return roots


def test_the_shipped_set_is_found_and_is_the_node_package():
    """The parser finds the one copy task and it ships the node package (the canary, the router's client, the
    failure catalogue, the pair guard): an empty result would make the tests below pass on nothing."""
    assert list(SHIPPED) == ['_node_package/main.yml: Node package | The files of the package'], SHIPPED
    task = yaml.safe_load(open(os.path.join(REPO, 'roles', '_node_package', 'tasks', 'main.yml')))[1]
    assert task['dgxspark.ds4.file_set']['files'].replace(' ', '') == "{{query('dgxspark.ds4.node_package',root=_node_package_root)}}"
    names = SHIPPED[list(SHIPPED)[0]]
    assert names == NODE_NAMES
    for name in ('_node.quality_canary', '_node.router_admin', '_node.failure_catalogue', '_node.pairguard.watch'):
        assert name in names, names


def test_the_lookup_lists_every_file_of_the_node_package():
    found = sorted(os.path.relpath(p, MU_DIR) for p in _tree(os.path.join(MU_DIR, NODE)).values())
    assert [p for p in NODE_PACKAGE if not p.endswith('__init__.py')] == found
    assert '_node/__init__.py' in NODE_PACKAGE and '_node/pairguard/__init__.py' in NODE_PACKAGE


def test_the_callers_probe_the_lookups_list_and_ship_it_through_the_one_task_file():
    for role, var in (('vllm_service', '_vllm_service_node_package'), ('router', '_router_node_package')):
        text = yaml.safe_load(open(os.path.join(REPO, 'roles', role, 'vars', 'main.yml')))[var]
        assert text.replace(' ', '') == "{{query('dgxspark.ds4.node_package')}}", (role, text)
    for path in ('roles/vllm_service/tasks/node_files.yml', 'roles/router/tasks/install.yml'):
        tasks = yaml.safe_load(open(os.path.join(REPO, path)))
        includes = [task for task in tasks if (task.get('ansible.builtin.include_role') or {}).get('name') == 'dgxspark.ds4._node_package']
        assert len(includes) == 1 and sorted(includes[0]['vars']) == ['_node_package_notify', '_node_package_root'], path


def _top_imports(path):
    """Imported module names, but the fallbacks of an `except ImportError`."""
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


def test_node_code_imports_only_the_standard_library_and_the_node_package():
    """Every node script (roles/*/files/*.py) and every file of the node package: the standard library or the node
    package, nothing else (the nodes' python3 has no more, and only the package is shipped)."""
    assert STDLIB, 'python >= 3.10 is needed for sys.stdlib_module_names'
    scripts = _node_scripts()
    files = scripts + [MODULE_UTILS[n] for n in NODE_NAMES]
    bad = {}
    for path in files:
        for module in _top_imports(path):
            top = module.split('.')[0]
            sibling = path in scripts and os.path.exists(os.path.join(os.path.dirname(path), top + '.py'))
            if (module == PREFIX + 'module_utils.' + NODE or module.startswith(PREFIX + 'module_utils.' + NODE + '.')
                    or top in STDLIB or top in CONTAINER_ONLY or sibling):
                continue
            bad.setdefault(os.path.relpath(path, REPO), []).append(module)
        outside = sorted(n for room, n in imports_of(path) if room != 'module_utils' or not n.startswith(NODE + '.'))
        if outside:
            bad.setdefault(os.path.relpath(path, REPO), []).extend(outside)
    assert not bad, bad


@pytest.mark.parametrize('path', sorted(_tree(os.path.join(PLUGINS, 'modules')).values()) + sorted(MODULE_UTILS.values()),
                         ids=lambda p: os.path.relpath(p, REPO))
def test_target_code_imports_no_controller_code(path):
    bad = sorted(n for room, n in imports_of(path) if room == 'plugin_utils')
    assert not bad, '%s runs on the target and imports controller-only plugin_utils: %s (move what it needs to ' \
                    'module_utils, or the code that needs it to the controller)' % (os.path.relpath(path, REPO), bad)


@pytest.mark.parametrize('path', _node_scripts(), ids=lambda p: os.path.relpath(p, REPO))
def test_node_scripts_import_no_controller_code(path):
    bad = sorted(n for room, n in imports_of(path) if room == 'plugin_utils')
    assert not bad, '%s runs on a node: plugin_utils never reaches it (%s)' % (os.path.relpath(path, REPO), bad)


def test_module_utils_is_sub_packages_by_subsystem():
    """No flat module_utils file; every sub-package private (a leading underscore) with an empty __init__.py."""
    flat = sorted(n for n in os.listdir(MU_DIR) if n.endswith('.py') and n != '__init__.py')
    assert not flat, flat
    packages = sorted(n for n in os.listdir(MU_DIR) if os.path.isdir(os.path.join(MU_DIR, n)) and n != '__pycache__')
    assert len(packages) >= 5 and all(p.startswith('_') for p in packages), packages
    for top, dirs, _files in os.walk(MU_DIR):
        dirs[:] = [d for d in dirs if d != '__pycache__']
        if top != MU_DIR:
            init = os.path.join(top, '__init__.py')
            assert os.path.isfile(init) and os.path.getsize(init) == 0, init


def test_module_utils_holds_only_what_a_target_runs():
    reached = _closure(target_roots())
    idle = sorted(set(MODULE_UTILS) - reached)
    assert not idle, ('plugins/module_utils: %s: no module imports it, it is not in the node package and not sent as '
                      'source; controller-only code lives in plugins/plugin_utils' % ', '.join(idle))


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
    assert not missing, '%s copies %s to the host, which import %s from module_utils too' % (task, names, missing)


def test_the_graph_sees_a_violation(tmp_path):
    """The parser is not blind: imports of plugin_utils and module_utils, absolute and relative, are seen."""
    probe = str(tmp_path / '_rooms_probe.py')
    with open(probe, 'w') as handle:
        handle.write('from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config\n'
                     'from ansible_collections.dgxspark.ds4.plugins.plugin_utils.pairs import x\n'
                     'import ansible_collections.dgxspark.ds4.plugins.module_utils._node.garble\n'
                     'from ansible_collections.dgxspark.ds4.plugins.module_utils._security import tls_plan\n'
                     'from . import hang\n'
                     'from .. import vllm_client\n')
    assert imports_of(probe, os.path.join(MU_DIR, NODE, 'pairguard')) == {
        ('plugin_utils', 'ds4_config'), ('plugin_utils', 'pairs'), ('module_utils', '_node.garble'),
        ('module_utils', '_security.tls_plan'), ('module_utils', '_node.pairguard.hang'), ('module_utils', '_node.vllm_client')}
