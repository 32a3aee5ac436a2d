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
  - Returns which paths changed, so that a task's handlers and a role's restart plan can tell one file from another.
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
    description: The files, written in this order.
    type: list
    elements: dict
    required: true
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
  description: The paths written or whose mode or owner was set, in the order of O(files).
  returned: always
  type: list
  elements: str
  sample: [/etc/dgxspark-ds4/launch-head.sh]
'''

import grp
import os
import pwd
import shlex
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_native, to_text


def _id(value, table, kind):
    if value.isdigit():
        return int(value)
    try:
        return table(value)[2]
    except KeyError:
        raise ValueError('no %s named %s on this node' % (kind, value))


def _read(path):
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _problem(item):
    path = item['path']
    if not path.startswith('/'):
        return 'path must be absolute, got %s' % path
    try:
        mode = int(item['mode'], 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o7777:
        return '%s: mode must be octal (0644), got %s' % (path, item['mode'])
    if item['validate'] is not None and '%s' not in item['validate']:
        return '%s: validate must contain %%s (the new content\'s path), got %s' % (path, item['validate'])
    return None


def write_one(module, item):
    """Returns (changed, diff) for one file; writes unless in check mode."""
    path, data = item['path'], to_bytes(item['content'], errors='surrogate_or_strict')
    mode = int(item['mode'], 8)
    uid, gid = _id(item['owner'], pwd.getpwnam, 'user'), _id(item['group'], grp.getgrnam, 'group')
    before = _read(path)
    content_differs = before != data
    if before is not None:
        st = os.stat(path)
        meta_differs = (st.st_mode & 0o7777, st.st_uid, st.st_gid) != (mode, uid, gid)
    else:
        meta_differs = True
    if not content_differs and not meta_differs:
        return False, None
    diff = None
    if content_differs:
        shown = item['diff']
        diff = {'before_header': path if before is not None else '%s (absent)' % path, 'after_header': path,
                'before': (to_text(before, errors='surrogate_or_strict') if before is not None else '') if shown
                else ('(content hidden: %d bytes)\n' % len(before) if before is not None else ''),
                'after': item['content'] if shown else '(content hidden: %d bytes)\n' % len(data)}
    if module.check_mode:
        return True, diff
    if not content_differs:
        os.chmod(path, mode)
        os.chown(path, uid, gid)
        return True, diff
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix='.%s.' % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, 'wb') as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fchown(handle.fileno(), uid, gid)
            os.fsync(handle.fileno())
        if item['validate'] is not None:
            argv = [tmp if word == '%s' else word.replace('%s', tmp) for word in shlex.split(item['validate'])]
            rc, out, err = module.run_command(argv)
            if rc != 0:
                raise RuntimeError('%s: refused by its validate command (exit %d): %s'
                                   % (path, rc, (to_native(err).strip() or to_native(out).strip())[-2000:]))
        os.rename(tmp, path)
        tmp = None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return True, diff


def main():
    module = AnsibleModule(
        argument_spec=dict(files=dict(type='list', elements='dict', required=True, options=dict(
            path=dict(type='path', required=True), content=dict(type='str', required=True),
            mode=dict(type='str', required=True), owner=dict(type='str', default='root'),
            group=dict(type='str', default='root'), validate=dict(type='str'), diff=dict(type='bool', default=True))),
            seen=dict(type='dict')),
        supports_check_mode=True)
    problems = [p for p in (_problem(item) for item in module.params['files']) if p]
    if problems:
        module.fail_json(msg='file_set: %s. Nothing was written.' % '; '.join(problems))
    changed_paths, diffs = [], []
    for item in module.params['files']:
        try:
            changed, diff = write_one(module, item)
        except (OSError, ValueError, RuntimeError) as exc:
            module.fail_json(msg='file_set: %s. Written before it: %s.' % (to_native(exc), ', '.join(changed_paths) or 'none'),
                             changed=bool(changed_paths), changed_paths=changed_paths)
        if changed:
            changed_paths.append(item['path'])
            if diff:
                diffs.append(diff)
    result = dict(changed=bool(changed_paths), changed_paths=changed_paths)
    if module._diff:
        result['diff'] = diffs
    module.exit_json(**result)


if __name__ == '__main__':
    main()
