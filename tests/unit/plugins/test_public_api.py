# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's Python reaches ansible-core through its public API only, but for the private names listed in
KEPT (each with why no public way gives the same): an ast scan of every file under plugins/ for an import of
``ansible._internal`` (or any private module or name of ansible-core) and for a leading-underscore attribute that
neither the collection defines nor ansible-core's plugin base classes give their subclasses (INTERFACE). While KEPT is
not empty, meta/runtime.yml keeps an upper bound on requires_ansible (a private name can go in any ansible-core
release); once it is empty, the bound goes."""


import ast
import os
import re

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..'))
PLUGINS = os.path.join(REPO, 'plugins')

# What ansible-core's plugin base classes give the plugins that subclass them (the documented way to write an action
# plugin is self._task, self._execute_module, ...; there is no other spelling of these):
INTERFACE = frozenset((
    # ansible.plugins.action.ActionBase: the task, its connection, play context and templar, the display, running a
    # module or a command on the node, and the class settings its subclasses override
    '_task', '_connection', '_play_context', '_templar', '_loader', '_shared_loader_obj', '_display',
    '_execute_module', '_low_level_execute_command', '_requires_connection', '_supports_check_mode', '_supports_async',
    # ... and the task's environment merged as a module run gets it (ansible-core's own script action calls it with
    # raw_environment_out for the dict, as converge_state's direct runs do)
    '_compute_environment_string',
    # ansible.module_utils.basic.AnsibleModule: whether the task runs with --diff (its only spelling)
    '_diff',
))

# The private names still used, (file, name) -> why ansible-core has no public way to the same effect.
KEPT: dict = {}

_BASES = ('ActionBase', 'CallbackBase', 'AnsibleModule')


def _private(part):
    return part.startswith('_') and not part.startswith('__')


def defined_names(sources):
    """Leading-underscore names the collection's own code defines: functions, classes, module-level names and
    attributes it assigns (self._x = ...)."""
    names = set()
    for text in sources:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                            names.add(sub.id)
                        elif isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store):
                            names.add(sub.attr)
    return set(n for n in names if _private(n))


def private_uses(text, own=frozenset()):
    """[(line, name)]: imports of a private ansible-core module or name, and leading-underscore attributes (read,
    through getattr/hasattr/setattr/delattr too, or set in the body of a class that subclasses an ansible-core base)
    that are neither the collection's own (`own`) nor INTERFACE."""
    found = []
    tree = ast.parse(text)
    # names bound to a module that is not ansible-core's (os._exit is Python's, smoke_checks._body the collection's)
    other = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            other.update((a.asname or a.name).split('.')[0] for a in node.names if a.name.split('.')[0] != 'ansible')
        elif isinstance(node, ast.ImportFrom) and (node.level or (node.module or '').split('.')[0] != 'ansible'):
            other.update(a.asname or a.name for a in node.names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split('.')
                if parts[0] == 'ansible' and any(_private(p) for p in parts[1:]):
                    found.append((node.lineno, alias.name))
        elif isinstance(node, ast.ImportFrom) and (node.module or '').split('.')[0] == 'ansible' and not node.level:
            parts = node.module.split('.')
            if any(_private(p) for p in parts[1:]):
                found.append((node.lineno, node.module))
            found.extend((node.lineno, '%s.%s' % (node.module, a.name)) for a in node.names if _private(a.name))
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            if node.attr not in own and node.attr not in INTERFACE and getattr(node.value, 'id', None) not in other:
                found.append((node.lineno, node.attr))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ('getattr', 'hasattr', 'setattr', 'delattr') and len(node.args) > 1
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            name = node.args[1].value
            if _private(name) and name not in own and name not in INTERFACE:
                found.append((node.lineno, name))
        elif isinstance(node, ast.ClassDef) and any(getattr(b, 'id', getattr(b, 'attr', None)) in _BASES for b in node.bases):
            for item in node.body:
                targets = item.targets if isinstance(item, ast.Assign) else [getattr(item, 'target', None)]
                for target in targets:
                    if isinstance(target, ast.Name) and _private(target.id) and target.id not in INTERFACE:
                        found.append((item.lineno, target.id))
    return sorted(found)


def _plugin_files():
    out = {}
    for root, dirs, files in os.walk(PLUGINS):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__')
        for name in sorted(files):
            if name.endswith('.py'):
                path = os.path.join(root, name)
                with open(path) as handle:
                    out[os.path.relpath(path, REPO)] = handle.read()
    return out


def _scan():
    files = _plugin_files()
    own = defined_names(files.values())
    return dict((path, private_uses(text, own)) for path, text in files.items())


def test_the_scan_finds_a_private_use_in_a_snippet():
    snippet = '''
import os

import ansible._internal
from ansible._internal._task import VariableLayer
from ansible.plugins.action import ActionBase, _private_helper
from ansible.plugins.action import VariableLayer as Public


class ActionModule(ActionBase):
    _requires_connection = False
    _secret_knob = True

    def _mine(self):
        return self._task.args

    def run(self, tmp=None, task_vars=None):
        role = self._task._role
        path = getattr(role, '_role_path', None)
        cache = self._task.get_variable_manager()._nonpersistent_fact_cache
        os._exit(0) if cache is None else self._mine()
        return self._execute_module(module_name='x', task_vars=task_vars)
'''
    found = private_uses(snippet, defined_names([snippet]))
    assert [name for dummy, name in found] == [
        'ansible._internal', 'ansible._internal._task', 'ansible.plugins.action._private_helper', '_secret_knob',
        '_role', '_role_path', '_nonpersistent_fact_cache'], found
    # the public spelling of each: nothing to report
    clean = '''
from ansible.plugins.action import ActionBase, VariableLayer


class ActionModule(ActionBase):
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        path = task_vars.get('role_path')
        self.register_host_variables({'x': path}, VariableLayer.EPHEMERAL_FACT)
        return self._execute_module(module_name='x', task_vars=task_vars)
'''
    assert private_uses(clean, defined_names([clean])) == []


def test_no_plugin_uses_a_private_ansible_core_name_but_the_kept_ones():
    found = set()
    for path, uses in _scan().items():
        found.update((path, name) for dummy, name in uses)
    assert found - set(KEPT) == set(), 'private ansible-core API (use the public one, or list it in KEPT with why): %s' % (
        sorted(found - set(KEPT)))
    assert set(KEPT) - found == set(), 'no longer used, take it off KEPT: %s' % sorted(set(KEPT) - found)


def test_the_requires_ansible_upper_bound_stays_exactly_while_a_private_name_is_kept():
    with open(os.path.join(REPO, 'meta', 'runtime.yml')) as handle:
        spec = yaml.safe_load(handle)['requires_ansible']
    assert re.search(r'>=\s*2\.20\.0', spec), spec
    assert bool(re.search(r'<', spec)) == bool(KEPT), (spec, sorted(KEPT))
