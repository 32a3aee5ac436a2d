# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of dgxspark.ds4.converge_state: the inputs digest, then the node-side module.

The digest covers the role's input values (given as ``inputs``, already templated by Ansible) and
the bytes of the role's own directory and of the collection's ``plugins/`` (a new collection
version or an edited template changes it). Only hashes leave the controller, but for the inputs whose name says
secret (KEY, TOKEN, SECRET, PASS): their values go to the module as a no_log argument and are hashed on the node
under its own salt (a plain hash would show in -v output). ``state=record`` reuses the digest of the probe at the
start of the role (``probe``), so facts the role sets on its way are never mistaken for inputs, and passes what that
probe observed (``found``): the module refuses to
record a drifted check the role left as it found it.

The task runs in the internal role ``dgxspark.ds4._converge``, included by the role it probes (``role``):
the digest covers that calling role's directory (found among the roles that include the task; a task
whose chain holds no role of that name is refused) and ``_converge``'s own.
"""


import json
import os
import re
import shlex
import sys

import yaml
from ansible import constants as C
from ansible.errors import AnsibleActionFail
from ansible.executor.interpreter_discovery import discover_interpreter
from ansible.plugins.action import ActionBase

from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import converge_state as cs
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import file_set
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import router_pool_spec
from ansible_collections.dgxspark.ds4.plugins.module_utils._readiness import ready_checks
from ansible_collections.dgxspark.ds4.plugins.module_utils._service import service_preflight
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import known_vars, template_cache

try:  # libyaml: the role's task files in ~5 ms instead of ~50
    from yaml import CSafeLoader as _YamlLoader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _YamlLoader

_ARG_SPEC = dict(
    role=dict(type='str', required=True),
    state=dict(type='str', default='probe', choices=['probe', 'begin', 'record']),
    inputs=dict(type='dict', default={}),
    checks=dict(type='dict', default={}),
    published=dict(type='dict', default={}),
    probe=dict(type='dict'),
    state_dir=dict(type='path', default='/var/lib/dgxspark-ds4/converge'),
)
# One code hash per role directory per controller process (files do not change during a run).
_CODE_HASHES = {}
_TREES = {}
# The node side of a direct run (_probe_directly): stdin holds {src, file, modules, args, check_mode, entry, name,
# environ}; environ is the task's environment (as a module run gets it: SSL_CERT_FILE for the router's verify); src is
# the text of the file whose function `entry` runs (file: its name in tracebacks): converge_state.py for probe, plan
# (several roles at once, plugins/action/converge_plan.py) and files (plugins/action/file_state.py), ready_checks.py for
# checks (plugins/action/vllm_ready.py), router_pool_spec.py for pool (plugins/action/router_pool.py),
# _service/service_preflight.py for preflight (plugins/action/service_preflight.py), _converge/file_set.py for write
# (plugins/action/file_set.py); name is what its
# errors start with (the module a user would read); modules are [name, source] of the collection files it imports, in
# import order, each run and registered under its name (with its parent packages, so that `from package import module`
# finds it) before the next. A program a check cannot start fails the run with its error, as a module's run_command
# fails the module.
_PROBE_BOOT = ("import json, os, sys, types\n"
               "d = json.loads(sys.stdin.read())\n"
               "os.environ.update(d.get('environ') or {})\n"
               "for name, src in d['modules']:\n"
               "    m = types.ModuleType(name)\n"
               "    exec(compile(src, name.rpartition('.')[2] + '.py', 'exec'), m.__dict__)\n"
               "    sys.modules[name] = m\n"
               "    parent, dot, child = name.rpartition('.')\n"
               "    while parent:\n"
               "        p = sys.modules.setdefault(parent, types.ModuleType(parent))\n"
               "        p.__path__ = getattr(p, '__path__', [])\n"
               "        setattr(p, child, m)\n"
               "        m, (parent, dot, child) = p, parent.rpartition('.')\n"
               "g = {'__name__': 'ds4_direct'}\n"
               "exec(compile(d['src'], d['file'], 'exec'), g)\n"
               "try:\n"
               "    r = g[d.get('entry') or 'probe'](d['args'], g.get('run_command'), d['check_mode'])\n"
               "except OSError as exc:\n"
               "    r = {'failed': True, 'msg': '%s: %s' % (d.get('name') or 'converge_state', exc)}\n"
               "print(json.dumps(r))\n")
# The node code of each entry: the file whose function runs; the collection files it imports go with it
# (_collection_imports, read from its source).
_TARGETS = {'probe': cs, 'plan': cs, 'files': cs, 'begin_state': cs, 'record_state': cs, 'checks': ready_checks,
            'pool': router_pool_spec, 'preflight': service_preflight, 'write': file_set}
_MODULE_UTILS = 'ansible_collections.dgxspark.ds4.plugins.module_utils'
# `from <module_utils...> import a, b` (parenthesised over lines too), or `import <module_utils...>`, at a line's start
_IMPORT_RE = re.compile(r'^[ \t]*(?:from[ \t]+(%s\.[\w.]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]+)|import[ \t]+(%s\.[\w.]+))' % (
    re.escape(_MODULE_UTILS), re.escape(_MODULE_UTILS)), re.M)
_IMPORTS = {}
# converge_state's state -> the function of module_utils/_converge/converge_state.py a direct run calls (the module
# calls the same).
_ENTRIES = {'probe': 'probe', 'begin': 'begin_state', 'record': 'record_state'}
_SOURCES = {}
# An interpreter as a shebang line names it (a path, optionally with arguments: /usr/bin/env python3), nothing a shell
# would read otherwise.
_INTERPRETER_RE = re.compile(r'^/[A-Za-z0-9_./+-]+( [A-Za-z0-9_./+-]+)*$')


def _source_of(module):
    """A module's text (read once per controller process)."""
    path = os.path.splitext(module.__file__)[0] + '.py'
    if path not in _SOURCES:
        with open(path) as handle:
            _SOURCES[path] = handle.read()
    return _SOURCES[path]


def _imported(module):
    """The collection's module_utils modules that module's source imports itself (`from package import module, ...`,
    `from package.module import name`, `import package.module`), in the order it names them. A regular expression, not
    an ast walk: this runs in each task's worker process, where parsing converge_state.py alone took 13 ms."""
    found = []
    for package, names, plain in _IMPORT_RE.findall(_source_of(module)):
        if plain:
            found.append(plain)
            continue
        listed = re.sub(r'#[^\n]*', '', names).strip('()').replace('\\', ' ').split(',')
        modules = ['%s.%s' % (package, name.split()[0]) for name in listed if name.strip()]
        found.extend([name for name in modules if name in sys.modules] or [package])
    return [sys.modules[name] for name in found if name in sys.modules]


def _collection_imports(module):
    """The collection files a direct run of module's function needs, each after the ones it imports itself (the order
    _PROBE_BOOT runs and registers them in): read from the sources, once per controller process."""
    if module not in _IMPORTS:
        order = []

        def visit(current):
            for dep in _imported(current):
                if dep is not module and dep not in order:
                    visit(dep)
                    if dep not in order:
                        order.append(dep)
        visit(module)
        _IMPORTS[module] = tuple(order)
    return _IMPORTS[module]


def direct_name(module_args, entry='probe'):
    """What a direct run's errors start with: the module the run stands in for, and the role a probe looks at."""
    if entry == 'files':
        return 'file_state'
    if entry == 'checks':
        return 'vllm_ready'
    if entry == 'pool':
        return 'router_pool'
    if entry == 'preflight':
        return 'service_preflight'
    if entry == 'write':
        return 'file_set'
    if entry in _ENTRIES.values():
        return 'converge_state %s' % module_args.get('role')
    return 'converge_state %s' % entry


def direct_payload(module_args, entry='probe', check_mode=False, environ=None):
    """The stdin of a direct run (_PROBE_BOOT): the source of the entry's file, the collection files it imports, the
    arguments, the function to run (probe, plan, files, checks, pool), the name its errors start with and the
    environment it runs in (environ: name -> value, set before anything runs)."""
    target = _TARGETS[entry]
    imports = _collection_imports(target)
    return json.dumps({'src': _source_of(target), 'file': os.path.splitext(os.path.basename(target.__file__))[0] + '.py',
                       'modules': [[module.__name__, _source_of(module)] for module in imports], 'args': module_args,
                       'check_mode': check_mode, 'entry': entry, 'name': direct_name(module_args, entry),
                       'environ': environ or {}})


def code_hash_for(role_path, task_role_path=None):
    """Hash of the role's directory, the directory of the role running the task (``_converge``) when it is another
    one, and the collection's plugins/ next to them."""
    role_path = os.path.realpath(role_path)
    paths = [role_path]
    if task_role_path and os.path.realpath(task_role_path) != role_path:
        paths.append(os.path.realpath(task_role_path))
    key = tuple(paths)
    if key not in _CODE_HASHES:
        collection_root = os.path.dirname(os.path.dirname(role_path))
        _CODE_HASHES[key] = cs.content_hash(paths + [os.path.join(collection_root, 'plugins')], _tree_chunks)
    return _CODE_HASHES[key]


def _tree_chunks(path):
    """cs.tree_chunks of path, once per process: a plan hashes the same plugins/ and _converge/ for each of its roles
    (the files do not change while a task runs; each task runs in a new worker process)."""
    if path not in _TREES:
        _TREES[path] = cs.tree_chunks(path)
    return _TREES[path]


def _role_results(role_path, code_hash):
    """known_vars.role_results of the role at role_path, kept by its code hash (the role's files among what it covers) in
    the template cache's directory (template_cache.kept_json): each task runs in a new worker process, where a
    module-level cache would not outlive it."""
    return frozenset(template_cache.kept_json(
        'role-results-%s-%s.json' % (os.path.basename(role_path), code_hash[:16]),
        lambda: sorted(known_vars.role_results(role_path, lambda text: yaml.load(text, Loader=_YamlLoader)))))  # nosec


def calling_role_path(task_vars, name):
    """The directory of the role called `name`: the task's own role (the magic variable role_path) or one that includes
    it (ansible_parent_role_paths, nearest first: import_role and include_role both set it), or None."""
    own = task_vars.get('role_path')
    chain = ([own] + list(task_vars.get('ansible_parent_role_paths') or [])) if own else []
    for path in chain:
        if path and os.path.basename(os.path.normpath(path)) == name:
            return path
    return None


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        dummy, args = self.validate_argument_spec(argument_spec=_ARG_SPEC)
        role_path = calling_role_path(task_vars, args['role'])
        if not role_path:
            raise AnsibleActionFail('dgxspark.ds4.converge_state role=%s runs inside that role or in dgxspark.ds4._converge '
                                    'included by it (it hashes the role\'s own files); task %r is in %s' % (
                                        args['role'], self._task.get_name(),
                                        task_vars.get('role_name') or 'no role'))
        secrets = {}
        if args['state'] in ('begin', 'record'):
            # The record keeps the digest of the inputs as the probe at the start of the role saw them:
            # facts the role sets on its way (some under its own prefix) are not inputs.
            probe = args['probe'] or {}
            if not probe.get('digest') or args['inputs']:
                raise AnsibleActionFail('dgxspark.ds4.converge_state state=begin/record takes probe (the registered result of '
                                        'the state=probe task at the start of the role), not inputs')
            digest, per_input = probe['digest'], probe.get('inputs') or {}
            found = probe.get('seen') or {}
        else:
            found = {}
            # secret inputs leave the controller as values (no_log) and are hashed on the node under its own salt
            code_hash = code_hash_for(role_path, task_vars.get('role_path'))
            plain, secrets = cs.split_secrets(self._without_own_results(args['inputs'], role_path, code_hash))
            digest, per_input = cs.inputs_digest(plain, code_hash)
        module_args = dict(role=args['role'], state=args['state'], digest=digest, inputs=per_input,
                           checks=args['checks'], published=args['published'], state_dir=args['state_dir'])
        if args['state'] == 'probe' and secrets:
            module_args['secret_inputs'] = secrets
        if args['state'] == 'record':
            # What the probe found before the role ran: a drifted check still exactly so was not repaired.
            module_args['found'] = found
        # straight to the node's Python where it can (_direct_interpreter), else through the module: the probe, and the
        # begin and record of a role that runs (a module run each cost the node ~0.17 CPU-s, a direct run ~0.05)
        interpreter = self._direct_interpreter(task_vars)
        if interpreter:
            res = self._probe_directly(interpreter, module_args, entry=_ENTRIES[args['state']])
            diff = res.pop('diff', None)
            if diff and self._task.diff:
                res['diff'] = diff
            result.update(res)
        else:
            result.update(self._execute_module(module_name='dgxspark.ds4.converge_state', module_args=module_args,
                                               task_vars=task_vars))
        return result

    def _direct_interpreter(self, task_vars):
        """The node's Python for a direct run (_probe_directly), or None (the caller runs its module then): the one place
        that decides. Direct only when the connection pipelines (ansible.cfg pipelining, the become method allowing
        it) and the node's Python is known already: ansible_python_interpreter, else the interpreter Ansible discovered
        on this host for an earlier module (a deploy's first tasks run modules on every node); the module discovers it
        otherwise."""
        if not self._connection.is_pipelining_enabled():
            return None
        value = task_vars.get('ansible_python_interpreter')
        if value:
            value = self._templar.template(value)
        else:
            value = (task_vars.get('ansible_facts') or {}).get('discovered_interpreter_python')
        return value if isinstance(value, str) and _INTERPRETER_RE.match(value) else None

    def _discover_interpreter(self, task_vars):
        """{'discovered_interpreter_python': path} where a direct run waits only for the node's Python: the connection
        pipelines, no ansible_python_interpreter, nothing discovered on this host yet and interpreter_python says to
        discover it (auto, auto_silent). ansible-core's own discovery (one shell command through the connection), as a
        module's first run on the host does before it runs: the caller keeps it as that run's result keeps it (a
        cacheable fact, so later modules on the host do not discover again). {} otherwise, and the caller's module
        run discovers it as before."""
        if (not self._connection.is_pipelining_enabled() or task_vars.get('ansible_python_interpreter')
                or (task_vars.get('ansible_facts') or {}).get('discovered_interpreter_python')):
            return {}
        mode = C.config.get_config_value('INTERPRETER_PYTHON', variables=task_vars)
        if not isinstance(mode, str) or not mode.startswith('auto'):
            return {}
        return {'discovered_interpreter_python': discover_interpreter(action=self, interpreter_name='python',
                                                                      discovery_mode=mode, task_vars=task_vars)}

    def _direct_or_module(self, task_vars, module_name, argument_spec, entry, module_args=None, direct_ok=True,
                          drop=(), **rules):
        """A module's run where the action can run its code directly (module_utils' function `entry` through
        _probe_directly): direct where _direct_interpreter allows it, the task is not delegated (task_vars hold the
        inventory host's, not the delegate's: the module finds the delegate's Python itself) and the caller's own
        condition holds (direct_ok); the arguments validated here against the module's argument_spec (and `rules`:
        required_by and the like) as the module would, less the options in `drop` (the action's own). Else the module,
        with module_args (default: the task's). -> (result, the validated arguments, or None where the module ran)."""
        interpreter = None if self._task.delegate_to or not direct_ok else self._direct_interpreter(task_vars)
        if not interpreter:
            args = self._task.args if module_args is None else module_args
            return self._execute_module(module_name=module_name, module_args=args, task_vars=task_vars), None
        dummy, valid = self.validate_argument_spec(argument_spec=argument_spec, **rules)
        valid = dict((name, value) for name, value in valid.items() if name not in drop)
        return self._probe_directly(interpreter, valid, entry=entry), valid

    def _look_files(self, paths, task_vars):
        """dgxspark.ds4.file_state's result for paths on this node: a direct run where one can be (_direct_interpreter),
        else the module; a path not absolute as written goes to the module too, whose argument handling expands ~."""
        interpreter = self._direct_interpreter(task_vars) if all(path.startswith('/') for path in paths) else None
        if interpreter:
            return self._probe_directly(interpreter, {'paths': list(paths)}, entry='files')
        return self._execute_module(module_name='dgxspark.ds4.file_state', module_args={'paths': list(paths)},
                                    task_vars=task_vars)

    def _task_environment(self):
        """The task's environment as a module run gets it (its play's, block's and own `environment`, merged in that order,
        each templated: ansible-core's own merge, ActionBase._compute_environment_string, hands the dict it builds to
        raw_environment_out): name -> value, for the direct run to set in its own process."""
        merged = {}
        self._compute_environment_string(raw_environment_out=merged)
        return dict((str(name), str(value)) for name, value in merged.items())

    def _probe_directly(self, interpreter, module_args, entry='probe'):
        """A state without a module upload: module_utils/_converge/converge_state.py's own source (with node_probe's,
        which it imports) and the arguments, through the connection (pipelined, become as the task has it) to the node's
        Python, which runs the function the module runs for it (probe, begin_state, record_state; `entry`; other
        actions' entries likewise). A no-op site.yml probes every role on
        every node: on its nodes a module run took a median 0.17 CPU-s (most of it importing ansible.module_utils.basic
        from the module's zip), a direct probe about 0.05 (node_probe's source with it adds about 5 ms); the nodes' CPU of
        a no-op fell 21 %, the controller's rose 8 % (docs/measurements.md)."""
        payload = direct_payload(module_args, entry, bool(self._task.check_mode), self._task_environment())
        res = self._low_level_execute_command('%s -c %s' % (interpreter, shlex.quote(_PROBE_BOOT)), sudoable=True,
                                              in_data=payload.encode('utf-8'))
        out = res.get('stdout') or ''
        try:
            parsed = json.loads(out)
        except ValueError:
            parsed = None
        if res.get('rc') != 0 or not isinstance(parsed, dict):
            return {'failed': True, 'msg': '%s: the run on the node failed (rc %s): %s' % (
                direct_name(module_args, entry), res.get('rc'), ((res.get('stderr') or '') + out).strip()[-2000:])}
        return parsed

    @staticmethod
    def _without_own_results(inputs, role_path, code_hash):
        """Inputs minus what the role itself sets as it runs (its registered values and set_fact facts share its
        prefix, known_vars.role_results): a role included twice in one playbook must not take what its first run set
        for a new input. Read from the role's own task files, once per role and code hash per playbook run (a file in
        the run's local temporary directory, shared by its workers)."""
        own = _role_results(role_path, code_hash)
        return dict((name, value) for name, value in inputs.items() if name not in own)
