#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: file_set
short_description: Write a set of files on the node in one module run, each only where it differs
version_added: 0.2.0
description:
  - Writes each of O(files) in order, as C(ansible.builtin.copy) with O(files[].content) would, in one module run
    where a C(copy) or C(template) task costs one or two each (a C(stat), then the copy when it differs). A file is
    written only when its content, mode, owner or group differs from what is on the node; a file whose content is
    the same but whose mode or owner differs gets only those fixed.
  - A new content goes to a temporary file in the destination's directory, is checked with O(files[].validate)
    when given (the command's C(%s) is the temporary file; a non-zero exit refuses that file and every file after
    it, and the files before it stay written, as separate tasks would), gets its mode and owner, and replaces the
    file by a rename (a reader sees the old or the new file, never a part).
  - The destination's directory must exist (the role creates it); nothing is written outside O(files[].path).
  - Then removes each of O(remove) where it exists (a file or a link; a directory is refused).
  - Returns which paths changed, so that a task's handlers and a role's restart plan can tell one file from another.
  - Its action plugin runs the same code directly through the connection (no module upload) where the connection
    pipelines, the node's Python is known, the task is not delegated and every path is absolute as written; this
    module otherwise.
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Reports what would change; writes nothing and runs no O(files[].validate) command.
  diff_mode:
    support: full
    details: One diff per changed file; a file with O(files[].diff=false) shows that it changed, not its content.
options:
  files:
    description: The files, written in this order. O(files) or O(remove) must name something.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path of the file.
        type: path
        required: true
      content:
        description: The whole content of the file.
        type: str
        required: true
      mode:
        description: Octal mode, as a string (V(0644)).
        type: str
        required: true
      owner:
        description: Owner (name or uid).
        type: str
        default: root
      group:
        description: Group (name or gid).
        type: str
        default: root
      validate:
        description:
          - A command run on the new content before it replaces the file, C(%s) standing for the temporary file's
            path (as O(ansible.builtin.template#module:validate)); split as a shell would split it, run without one.
        type: str
      diff:
        description: Whether the diff shows the content (V(false) for a file that holds a secret).
        type: bool
        default: true
  remove:
    description: Absolute paths of files removed where they exist, after every file of O(files) is written.
    type: list
    elements: path
    default: []
  seen:
    description:
      - What a read-only look earlier in this run found at these paths, path to observation (the C(files) of
        M(dgxspark.ds4.converge_state)'s RV(dgxspark.ds4.converge_state#module:seen), each
        V(sha1:<hex>:<mode>:<uid>:<gid>) or V(absent)). Where every file's content, mode, owner and group equal it,
        the action plugin ends the task unchanged without running the module on the node; otherwise the module runs
        and reads the files itself. The module does not read this option.
    type: dict
'''

EXAMPLES = r'''
- name: Launch script and unit in one module run
  dgxspark.ds4.file_set:
    files:
      - {path: /etc/dgxspark-ds4/launch-head.sh, content: "{{ script }}", mode: "0755"}
      - path: /etc/systemd/system/dgxspark-vllm.service
        content: "{{ lookup('ansible.builtin.template', 'vllm.service.j2') }}"
        mode: "0644"
        validate: /usr/bin/python3 /usr/local/libexec/dgxspark-ds4/verify_unit.py %s dgxspark-vllm.service
  register: written
'''

RETURN = r'''
changed_paths:
  description: The paths written or whose mode or owner was set, in the order of O(files), then those removed.
  returned: always
  type: list
  elements: str
  sample: [/etc/dgxspark-ds4/launch-head.sh]
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import file_set


def main():
    module = AnsibleModule(argument_spec=file_set.ARGUMENT_SPEC, supports_check_mode=True)
    result = file_set.write(module.params, module.run_command, module.check_mode)
    if not module._diff:
        result.pop('diff', None)
    if result.get('failed'):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
