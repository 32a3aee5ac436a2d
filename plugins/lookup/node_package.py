# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r'''
---
name: node_package
short_description: The files of the collection's node package (plugins/module_utils/_node)
version_added: 0.1.0
description:
  - Lists every file of the collection's node package, C(plugins/module_utils/_node) (the standard-library-only code
    the node scripts import - the pair guard, the quality canary and its detectors, the HTTP client, the failure
    catalogue, the memory guard, the router admin client), as paths relative to C(plugins/module_utils), sorted.
  - The one definition of what a node gets; the roles that ship the package (through C(dgxspark.ds4._node_package))
    and their converge checks read it from here.
  - With O(root), each file as C(dgxspark.ds4.file_set) takes it (path under O(root), content, mode 0644), the whole
    package written in one module run.
options:
  root:
    description:
      - The node directory the package goes under (C(<root>/ansible_collections/dgxspark/ds4/plugins/module_utils/_node/...)).
        Empty (the default) lists the relative paths only.
    type: str
    default: ''
author:
  - dgxspark.ds4 contributors (@dgxspark)
'''

EXAMPLES = r'''
- name: The node package's files
  ansible.builtin.debug:
    msg: "{{ query('dgxspark.ds4.node_package') }}"

- name: The package under /usr/local/libexec/dgxspark-ds4, in one module run
  dgxspark.ds4.file_set:
    files: "{{ query('dgxspark.ds4.node_package', root='/usr/local/libexec/dgxspark-ds4') }}"
'''

RETURN = r'''
_raw:
  description:
    - Paths relative to plugins/module_utils, e.g. C(_node/vllm_client.py), C(_node/pairguard/watch.py).
    - With O(root), dicts C(path) (under O(root)), C(content), C(mode).
  type: list
  elements: raw
'''

import os

from ansible.plugins.lookup import LookupBase

PACKAGE = '_node'
NODE_PATH = 'ansible_collections/dgxspark/ds4/plugins/module_utils'
MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'module_utils')


def package_files(module_utils=MODULE_UTILS, package=PACKAGE):
    """Every .py file under module_utils/<package>, relative to module_utils, sorted."""
    out = []
    for top, dirs, files in os.walk(os.path.join(module_utils, package)):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__')
        out.extend(os.path.relpath(os.path.join(top, f), module_utils) for f in files if f.endswith('.py'))
    return sorted(out)


def package_file_set(root, module_utils=MODULE_UTILS, package=PACKAGE):
    """The package's files as dgxspark.ds4.file_set writes them under root (the collection path below it)."""
    out = []
    for rel in package_files(module_utils, package):
        with open(os.path.join(module_utils, rel), encoding='utf-8') as handle:
            content = handle.read()
        out.append({'path': '%s/%s/%s' % (root.rstrip('/'), NODE_PATH, rel), 'content': content, 'mode': '0644'})
    return out


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        root = self.get_option('root')
        return package_file_set(root) if root else package_files()
