# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Typo-proof inputs: refuse unknown variables that carry the collection's prefixes.

A misspelt ``ds4_node_memory_gb`` (for ``ds4_node_memory_gib``) used to be ignored without a
word: the node silently got the 128 GiB cap. The config role (action plugin
``dgxspark.ds4.effective_config``) now refuses every variable in a ``spark`` host's inventory
vars or in the extra vars whose name starts with ``ds4_`` or with a role's prefix
(``<role name>_``, e.g. ``vllm_service_``) and that the collection does not know, naming the
variable, where it was set and the closest known name.

The known names are generated from the collection's own files (``scan_collection``), not kept
by hand:

- every option of every entry point in ``roles/*/meta/argument_specs.yml`` (the inputs);
- the keys of ``roles/*/defaults/main.yml`` and ``roles/*/vars/main.yml``;
- every name the roles and playbooks assign: play/task ``vars:`` keys, ``vars_files``
  (``playbooks/vars/*.yml``), ``register:``, ``set_fact`` keys, ``loop_var`` (internal
  registered / set_fact names such as ``ds4_ready``, ``ds4_switch_*``, ``ds4_effective``);
- ``COLLECTION_VARS`` below: the few collection-wide ``ds4_*`` names that playbooks read with
  ``| default(...)`` and that no file declares.

The unit tests fail when a prefixed name used anywhere
in the repository is not known, so the list cannot drift. Names starting with ``_`` never carry
a prefix and are never checked. Pure Python (no Ansible, no YAML import: the caller passes the
YAML loader).
"""


import difflib
import os
import re
from collections.abc import Callable, Iterable
from typing import Any

# Collection-wide variables read somewhere with `| default(...)` and declared nowhere else
# (no argument spec, no defaults, no play vars). name -> where it is read.
COLLECTION_VARS = {
    'ds4_ready_timeout': 'playbooks (vllm_ready timeout, seconds)',
    'ds4_ready_chat_timeout': 'playbooks (vllm_ready chat_timeout, seconds)',
    'ds4_validate_after_deploy': 'playbooks/site.yml (true: after a deploy that ran a role; always; false)',
    'ds4_converge_full': 'roles (true: every role runs whole, the converge shortcut is off for this run)',
    'ds4_converge_roles': 'roles (a list of role names: those run whole this run; maintenance.yml sets [nccl_fabric])',
    'ds4_endpoint_url': 'playbooks/vars/ops.yml (URL the validate/bench/status client uses)',
    'ds4_switch_auto_rollback': 'playbooks/switch.yml (true: roll back on a failed switch)',
    'ds4_switch_allow_name_change': 'playbooks/switch.yml (true: switch behind the router to another served name anyway)',
    'ds4_validate_thinking': 'playbooks/validate.yml (require a reasoning field; default from the profile)',
    'ds4_rolling_drain_timeout': 'playbooks/tasks/rolling.yml (a longer drain wait than router_request_timeout_s + 10 s)',
    'ds4_rolling_restore_timeout': 'playbooks/tasks/rolling.yml (seconds the router may take to take a pair back, 120)',
}

# Set at run time by the collection itself; never user input, never refused.
INTERNAL_NAMES = frozenset(('ds4_effective',))

NAME_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
SECRET_RE = re.compile(r'(KEY|TOKEN|SECRET|PASS|CREDENTIAL|AUTH)', re.I)

_SET_FACT = ('set_fact', 'ansible.builtin.set_fact', 'ansible.legacy.set_fact')
_SET_FACT_OPTIONS = ('cacheable',)


def prefixes(role_names: Iterable[str]) -> tuple[str, ...]:
    """The collection's variable prefixes: ds4_ and <role>_ for each role, longest first."""
    out = set(['ds4_'])
    for name in role_names:
        if name and NAME_RE.match(name):
            out.add('%s_' % name)
    return tuple(sorted(out, key=lambda p: (-len(p), p)))


def has_prefix(name: str, prefix_list: Iterable[str]) -> bool:
    return any(name.startswith(p) for p in prefix_list)


def argument_spec_names(doc: Any) -> set[str]:
    """Option names of every entry point of a parsed meta/argument_specs.yml."""
    names: set[str] = set()
    specs = (doc or {}).get('argument_specs') if isinstance(doc, dict) else None
    for entry in (specs or {}).values():
        if isinstance(entry, dict) and isinstance(entry.get('options'), dict):
            names.update(str(k) for k in entry['options'])
    return names


def mapping_names(doc: Any) -> set[str]:
    """Top-level keys of a vars-style file (defaults/main.yml, vars/main.yml, playbooks/vars/*.yml)."""
    return set(str(k) for k in doc) if isinstance(doc, dict) else set()


def assigned_names(doc: Any) -> set[str]:
    """Every variable name a task/play/playbook document assigns: `vars:` keys, `register:`,
    `set_fact` keys, `loop_control.loop_var` and `index_var`. Walks the whole document (blocks, rescue, roles)."""
    return _names(doc, scoped=True)


def result_names(doc: Any) -> set[str]:
    """The names a task document sets for the rest of the run: `register:` and `set_fact` keys (not `vars:`,
    `loop_var` or `index_var`, which are scoped to their task or block). Walks the whole document."""
    return _names(doc, scoped=False)


def _names(doc: Any, scoped: bool) -> set[str]:
    names: set[str] = set()
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if key == 'register' and isinstance(value, str) and NAME_RE.match(value):
                names.add(value)
            elif key in _SET_FACT and isinstance(value, dict):
                names.update(str(k) for k in value if k not in _SET_FACT_OPTIONS)
            elif scoped and key == 'vars' and isinstance(value, dict):
                names.update(str(k) for k in value)
            elif scoped and key in ('loop_var', 'index_var') and isinstance(value, str):
                names.add(value)
            if isinstance(value, (dict, list)):
                stack.append(value)
    return names


def role_results(role_dir: str, load_yaml: Callable[[str], Any]) -> set[str]:
    """What a role sets on a host as it runs, under its own prefix, that is not one of its options: the names its
    tasks and handlers register or set_fact (`<role>_*`), less its argument_specs options. A role's converge inputs
    leave these out, so that a role included twice in one run does not take its first run's results for inputs;
    an option the role also sets stays an input (a user's value is compared, at worst the role runs again)."""
    def load(path: str) -> Any:
        with open(path) as handle:
            return load_yaml(handle.read())

    prefix = os.path.basename(os.path.normpath(role_dir)) + '_'
    names: set[str] = set()
    for sub in ('tasks', 'handlers'):
        for path in _yaml_files(os.path.join(role_dir, sub)):
            names |= result_names(load(path))
    spec = os.path.join(role_dir, 'meta', 'argument_specs.yml')
    options = argument_spec_names(load(spec)) if os.path.isfile(spec) else set()
    return set(n for n in names if n.startswith(prefix)) - options


def _yaml_files(top: str) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith('.'))
        for fn in sorted(filenames):
            if fn.endswith(('.yml', '.yaml')):
                out.append(os.path.join(dirpath, fn))
    return out


def scan_collection(root: str, load_yaml: Callable[[str], Any]) -> tuple[set[str], list[str]]:
    """-> (known names, role names) from the collection at `root` (see the module docstring).

    `load_yaml(text)` parses one YAML document (yaml.safe_load). Unreadable files are skipped:
    their names are then unknown, which errs on the side of refusing, never of ignoring."""
    known = set(COLLECTION_VARS) | set(INTERNAL_NAMES)
    roles_dir = os.path.join(root, 'roles')
    role_names = sorted(d for d in (os.listdir(roles_dir) if os.path.isdir(roles_dir) else [])
                        if os.path.isdir(os.path.join(roles_dir, d)) and not d.startswith('.'))

    def load(path: str) -> Any:
        if not os.path.isfile(path):
            return None
        try:
            with open(path) as f:
                return load_yaml(f.read())
        except Exception:  # pylint: disable=broad-except  # unreadable file or the loader's own YAML error class
            return None

    for role in role_names:
        base = os.path.join(roles_dir, role)
        known |= argument_spec_names(load(os.path.join(base, 'meta', 'argument_specs.yml')))
        for sub in ('defaults', 'vars'):
            for path in _yaml_files(os.path.join(base, sub)):
                known |= mapping_names(load(path))
        for sub in ('tasks', 'handlers'):
            for path in _yaml_files(os.path.join(base, sub)):
                known |= assigned_names(load(path))
    playbooks = os.path.join(root, 'playbooks')
    for path in _yaml_files(playbooks):
        doc = load(path)
        if os.path.basename(os.path.dirname(path)) == 'vars':
            known |= mapping_names(doc)
        else:
            known |= assigned_names(doc)
    return known, role_names


def closest(name: str, known: Iterable[str]) -> str | None:
    """The closest known name (difflib ratio >= 0.75); None if nothing is close."""
    if not known:
        return None
    candidates = sorted(known)
    match = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
    return match[0] if match else None


def _show_value(name: str, value: Any, suggestion: str | None = None) -> str:
    if SECRET_RE.search(name) or SECRET_RE.search(suggestion or '') or 'Encrypted' in type(value).__name__ or 'Vault' in type(value).__name__:
        return '(value not shown)'
    try:
        text = '"%s"' % value if isinstance(value, str) else repr(value)
    except Exception:  # pylint: disable=broad-except  # an undecryptable or lazy value
        return '(value not shown)'
    return text if len(text) <= 60 else text[:57] + '...'


def find_unknown(candidates: dict[str, Any], known: Iterable[str], prefix_list: Iterable[str],
                 allowed: Iterable[str] | None = ()) -> list[dict[str, Any]]:
    """Unknown prefixed names.

    candidates: {name: {'hosts': [host, ...], 'where': 'group_vars/spark/site.yml:3' or None,
                        'value': value}} (one entry per name: the variable as the spark hosts see it).
    -> sorted list of {'name', 'hosts', 'where', 'value', 'suggestion'}."""
    known = set(known) | set(allowed or ())
    out = []
    for name in sorted(candidates):
        if not isinstance(name, str) or name.startswith('_') or not has_prefix(name, prefix_list):
            continue
        if name in known:
            continue
        info = candidates[name] or {}
        out.append({'name': name, 'hosts': sorted(info.get('hosts') or []), 'where': info.get('where'),
                    'value': info.get('value'), 'suggestion': closest(name, known)})
    return out


def format_unknown(item: dict[str, Any], spark_hosts: Iterable[str] = ()) -> str:
    """One error line for an unknown variable: the variable, its value, where it was set, why, the fix."""
    name = item['name']
    hosts = item.get('hosts') or []
    if not hosts or sorted(hosts) == sorted(spark_hosts):
        scope = ''
    else:
        scope = '[host %s] ' % ', '.join(hosts)
    where = item.get('where') or 'the inventory or an earlier play (Ansible does not say which file)'
    why = ("unknown variable: no role argument spec, role default or playbook of dgxspark.ds4 reads it, "
           "so it would be ignored without a word")
    if item.get('suggestion'):
        fix = 'rename it to %s (the closest known name), or remove it' % item['suggestion']
    else:
        fix = 'remove it, or rename it to a documented input (roles/*/meta/argument_specs.yml, README)'
    fix += ('; a name that belongs to something else than this collection goes into ds4_extra_known_vars '
            '(a list, group_vars/spark)')
    return '%s%s = %s (set in %s): %s. Fix: %s.' % (scope, name, _show_value(name, item.get('value'), item.get('suggestion')), where, why, fix)


def describe_origin(path: str | None, line: Any = None, cwd: str | None = None) -> str | None:
    """'inventories/x/group_vars/spark/site.yml:3' (relative to cwd when below it)."""
    if not path:
        return None
    if cwd and os.path.isabs(path):
        rel = os.path.relpath(path, cwd)
        if not rel.startswith('..'):
            path = rel
    return '%s:%s' % (path, line) if line else path
