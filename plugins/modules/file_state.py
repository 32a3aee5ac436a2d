#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: file_state
short_description: What a set of paths on the node is now, in one module run (read-only)
version_added: 0.2.0
description:
  - Observes each of O(paths) as the converge shortcut does (C(plugins/module_utils/_converge/converge_state.py)) - a file by
    its SHA-1, mode and owner, a directory by its mode and owner, a symlink by its target - and returns them in one
    mapping. A role compares it with what its tasks would write and skips them when nothing differs (the TLS
    material of the fronts on every deploy, C(roles/api_proxy/tasks/tls.yml)), in one module run where a
    C(ansible.builtin.stat) per path, or the writing modules themselves, cost one each.
  - A missing path, or a missing directory above it, is C(absent) (no warning, unlike C(ansible.builtin.find)).
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Reads only.
  diff_mode:
    support: none
options:
  paths:
    description: Absolute paths to observe.
    type: list
    elements: path
    required: true
'''

EXAMPLES = r'''
- name: The front material on this host, in one look
  dgxspark.ds4.file_state:
    paths: [/etc/dgxspark-ds4/tls, /etc/dgxspark-ds4/tls/front.crt]
  register: found
'''

RETURN = r'''
files:
  description:
    - Path -> observation. C(sha1:<hex>:<mode>:<uid>:<gid>) for a regular file (mode in octal without a leading
      zero), C(dir:<mode>:<uid>:<gid>), C(link:<target>:<mode>:<uid>:<gid>), C(absent), or C(unreadable:<reason>).
  returned: always
  type: dict
  sample: {"/etc/dgxspark-ds4/tls": "dir:755:0:0", "/etc/dgxspark-ds4/tls/front.crt": "sha1:3f786850e387550fdab836ed7e6dc881de23001b:644:0:0"}
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import converge_state as cs


def main():
    module = AnsibleModule(argument_spec=dict(paths=dict(type='list', elements='path', required=True)), supports_check_mode=True)
    result = cs.files(module.params, None, module.check_mode)
    if result.get('failed'):
        module.fail_json(msg=result['msg'])
    module.exit_json(**result)


if __name__ == '__main__':
    main()
