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
options: {}
author:
  - dgxspark.ds4 contributors (@dgxspark)
'''

EXAMPLES = r'''
- name: The node package's files
  ansible.builtin.debug:
    msg: "{{ query('dgxspark.ds4.node_package') }}"
'''

RETURN = r'''
_raw:
  description: Paths relative to plugins/module_utils, e.g. C(_node/vllm_client.py), C(_node/pairguard/watch.py).
  type: list
  elements: str
'''

import os

from ansible.plugins.lookup import LookupBase

PACKAGE = '_node'
MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'module_utils')


def package_files(module_utils=MODULE_UTILS, package=PACKAGE):
    """Every .py file under module_utils/<package>, relative to module_utils, sorted."""
    out = []
    for top, dirs, files in os.walk(os.path.join(module_utils, package)):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__')
        out.extend(os.path.relpath(os.path.join(top, f), module_utils) for f in files if f.endswith('.py'))
    return sorted(out)


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        return package_files()
