# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a variable was set, for the refusals that name it (unknown variables, placeholder addresses): the extra
vars, or the file and line of the inventory that sets it for the host.

ansible-core records a loaded value's origin only in a private data tag, so this reads the files Ansible's inventory
reads, in the order that decides a host's value (highest first): the extra vars; ``host_vars/<host>`` (a file, or a
directory of files); ``group_vars/<group>`` of the host's groups, the most specific first, ``all`` last; both next
to each inventory source and next to the playbook; then the inventory sources themselves (YAML: any key of that
name; INI: a ``name=`` word). The first place that sets the name is named, as ``path:line``. Controller-only; the
caller passes what Ansible already knows (the sources, the playbook directory, the host's groups, the extra vars'
names), so that this module imports nothing of ansible-core.
"""


import os
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import yaml

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.known_vars import describe_origin

try:  # libyaml: ~10x faster over a large inventory
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _Loader

EXTRA_VARS = 'extra vars (-e)'
_VARS_EXTENSIONS = ('', '.yml', '.yaml', '.json')


def _key_line(text: str, name: str) -> int | None:
    """1-based line of the top-level key `name` of a vars file (host_vars, group_vars)."""
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError:
        return None
    return _top_line(node, name) if isinstance(node, yaml.MappingNode) else None


def _inventory_yaml_line(text: str, host: str, groups: Sequence[str], name: str) -> int | None:
    """1-based line of `name` in a YAML inventory: in the host's own entry (under a group's `hosts:`), else in the
    `vars:` of one of its groups."""
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError:
        return None
    in_group_vars = None
    stack: list[tuple[Any, str | None]] = [(root, None)] if root is not None else []
    while stack:
        node, parent = stack.pop(0)
        if not isinstance(node, yaml.MappingNode):
            continue
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                continue
            if key.value == 'hosts' and isinstance(value, yaml.MappingNode):
                for host_key, host_value in value.value:
                    if getattr(host_key, 'value', None) == host and isinstance(host_value, yaml.MappingNode):
                        line = _top_line(host_value, name)
                        if line:
                            return line
            elif key.value == 'vars' and parent in groups and isinstance(value, yaml.MappingNode):
                in_group_vars = in_group_vars or _top_line(value, name)
            elif isinstance(value, yaml.MappingNode):
                stack.append((value, key.value))
    return in_group_vars


def _top_line(node: Any, name: str) -> int | None:
    for key, dummy in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value == name:
            return int(key.start_mark.line) + 1
    return None


def _ini_line(text: str, host: str, groups: Sequence[str], name: str) -> int | None:
    """1-based line of `name=` on the host's own line of an INI inventory, else in a `[group:vars]` of its groups."""
    setting = re.compile(r'(^|\s)%s\s*=' % re.escape(name))
    section, in_group_vars = None, None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith((';', '#')):
            continue
        if stripped.startswith('[') and stripped.endswith(']'):
            section = stripped[1:-1]
            continue
        if section and section.endswith(':vars'):
            if section[:-len(':vars')] in groups and in_group_vars is None and setting.match(stripped):
                in_group_vars = number
        elif stripped.split()[0] == host and setting.search(stripped):
            return number
    return in_group_vars


def _files(path: str) -> list[str]:
    """A vars path as Ansible reads it: the file (with or without a YAML/JSON extension) or every file of the
    directory, sorted."""
    out = []
    for ext in _VARS_EXTENSIONS:
        candidate = path + ext
        if os.path.isfile(candidate):
            out.append(candidate)
    if os.path.isdir(path):
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith('.'))
            out.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith('.'))
    return out


class Origins:
    """The places Ansible read the inventory from, searched per host and variable name (files read once)."""

    def __init__(self, sources: Sequence[str], playbook_dir: str | None, extra_names: Iterable[str],
                 groups_of: Callable[[str], Sequence[str]]) -> None:
        self.sources = [os.path.abspath(s) for s in sources if s and os.path.exists(s)]
        bases = [s if os.path.isdir(s) else os.path.dirname(s) for s in self.sources]
        if playbook_dir:
            bases.append(os.path.abspath(playbook_dir))
        self.bases = list(dict.fromkeys(bases))
        self.extra_names = frozenset(extra_names)
        self.groups_of = groups_of
        self._text: dict[str, str | None] = {}

    def _read(self, path: str) -> str | None:
        if path not in self._text:
            try:
                with open(path, encoding='utf-8', errors='replace') as handle:
                    self._text[path] = handle.read()
            except OSError:
                self._text[path] = None
        return self._text[path]

    def _inventory_files(self) -> list[str]:
        out = []
        for source in self.sources:
            if os.path.isfile(source):
                out.append(source)
            else:
                out.extend(os.path.join(source, f) for f in sorted(os.listdir(source))
                           if not f.startswith('.') and os.path.isfile(os.path.join(source, f)))
        return out

    def find(self, host: str, name: str) -> tuple[str, int | None] | None:
        """(path, line) of the place that sets `name` for `host`, ('-e', None) for the extra vars, or None."""
        if name in self.extra_names:
            return (EXTRA_VARS, None)
        groups = [g for g in reversed(list(self.groups_of(host))) if g != 'all'] + ['all']
        for base in self.bases:
            for path in _files(os.path.join(base, 'host_vars', host)):
                line = _key_line(self._read(path) or '', name)
                if line:
                    return (path, line)
        for group in groups:
            for base in self.bases:
                for path in _files(os.path.join(base, 'group_vars', group)):
                    line = _key_line(self._read(path) or '', name)
                    if line:
                        return (path, line)
        for path in self._inventory_files():
            text = self._read(path) or ''
            line = (_inventory_yaml_line(text, host, groups, name)
                    if path.endswith(('.yml', '.yaml', '.json')) else _ini_line(text, host, groups, name))
            if line:
                return (path, line)
        return None


def describe(found: tuple[str, int | None] | None, cwd: str | None = None, resolve: bool = False) -> str | None:
    """'inventories/x/group_vars/spark/site.yml:3' (relative to cwd when below it; resolve: the file a symlink
    points at, the one to edit), 'extra vars (-e)', or None."""
    if not found:
        return None
    path, line = found
    if path == EXTRA_VARS:
        return EXTRA_VARS
    return describe_origin(os.path.realpath(path) if resolve else path, line, cwd)


def extra_var_names(extra: Any) -> set[str]:
    """The names of the extra vars (ansible.utils.vars.load_extra_vars' result)."""
    return set(str(k) for k in extra) if isinstance(extra, dict) else set()
