#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: mxfp4_patch
short_description: Check or apply, exactly once, the vLLM mxfp4.py GPU-cache fix
version_added: 0.1.0
description:
  - Finds each C(self._setup_kernel(layer, w13, w2, ...)) call in vLLM's
    C(model_executor/layers/quantization/mxfp4.py) and counts the cleanup blocks after it
    (C(del w13, w2, ...) and C(torch.cuda.empty_cache())), the fix known as C(fix-ds4-gpu-cache).
  - A correct file has one block per call site (2 in total). Applying the fix twice duplicates the C(del)
    and the model load dies with C(UnboundLocalError) for C(w13).
  - O(state=check) fails unless the count equals O(expected), saying whether the file is unpatched,
    partially patched or double-patched.
  - O(state=present) inserts the block where it is missing and removes duplicates so the count is exactly
    O(expected), syntax-checks the result before writing, and byte-compiles it after writing.
  - A file whose layout is not recognised (no single-line C(_setup_kernel) call, C(empty_cache()) elsewhere,
    a different C(del)) is refused in both states; the module never guesses.
  - With O(image), the file is copied out of the image with C(docker create), C(docker cp) and C(docker rm)
    (the image is never run) and only O(state=check) is allowed; the image role builds a derived image from
    a patched host copy instead.
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: O(state=present) reports what it would change and does not write.
  diff_mode:
    support: full
    details: Shows the textual change to the file.
options:
  path:
    description:
      - Path of C(mxfp4.py) on the managed host.
      - Exactly one of O(path) and O(image) is required.
    type: path
  image:
    description:
      - Docker image (name, tag or ID) holding the file at O(path_in_image). Requires O(state=check).
    type: str
  path_in_image:
    description:
      - Path of C(mxfp4.py) inside O(image).
      - Omitted, O(python) in the image (a throw-away container without network) says where vllm is
        (C(importlib.util.find_spec), vllm is not imported), so vLLM in a venv is found too.
    type: str
  python:
    description:
      - Python inside O(image) that finds vllm when O(path_in_image) is omitted (looked up in the image's C(PATH)).
    type: str
    default: python3
  docker_cli:
    description:
      - Docker CLI to run for O(image). Looked up in C(PATH) when not absolute.
    type: str
    default: docker
  expected:
    description:
      - Number of cleanup blocks a correct file has (one per C(_setup_kernel) call).
    type: int
    default: 2
  state:
    description:
      - V(check) only reads and fails unless the count equals O(expected).
      - V(present) rewrites O(path) to exactly O(expected) blocks.
    type: str
    choices: [check, present]
    default: check
  backup:
    description:
      - With O(state=present), keep a timestamped copy of the original before writing.
    type: bool
    default: false
  byte_compile:
    description:
      - With O(state=present), run C(py_compile) on the written file (with this host's Python) so a broken
        file fails here, not at model load.
    type: bool
    default: true
notes:
  - Line numbers in RV(sites) are 1-based and refer to the file before the change.
'''

EXAMPLES = r'''
- name: Refuse an image whose mxfp4.py is not patched exactly once
  dgxspark.ds4.mxfp4_patch:
    image: vllm-ds4:derived
    state: check

- name: The same for an image with vLLM in a venv, the file found by its own Python
  dgxspark.ds4.mxfp4_patch:
    image: vllm-ds4:derived
    python: /opt/venv/bin/python3
    state: check

- name: Patch a host copy before baking it into the derived image
  dgxspark.ds4.mxfp4_patch:
    path: /var/lib/dgxspark-ds4/build/mxfp4.py
    state: present
    backup: true
  register: ds4_mxfp4

- name: Show what was found
  ansible.builtin.debug:
    msg: "{{ ds4_mxfp4.message }} (before: {{ ds4_mxfp4.blocks_before }}, after: {{ ds4_mxfp4.blocks_after }})"
'''

RETURN = r'''
status:
  description: Result of the check on the file as it is now (after the change for O(state=present) outside check mode).
  returned: success
  type: str
  sample: patched
status_before:
  description: Status of the file as found.
  returned: always
  type: str
  sample: double-patched
message:
  description: Human readable status with the counts.
  returned: success
  type: str
  sample: 'double-patched (4 blocks, expected 2): ...'
blocks_before:
  description: Cleanup blocks found.
  returned: always
  type: int
  sample: 4
blocks_after:
  description: Cleanup blocks after the change (equal to RV(blocks_before) for O(state=check)).
  returned: success
  type: int
  sample: 2
empty_cache_before:
  description: Lines calling C(empty_cache()) before (what C(grep -c empty_cache) counts, comments excluded).
  returned: always
  type: int
  sample: 4
empty_cache_after:
  description: The same count after the change.
  returned: success
  type: int
  sample: 2
expected:
  description: The expected block count.
  returned: always
  type: int
  sample: 2
sites:
  description: Each C(_setup_kernel) call site in the file as found, with the cleanup blocks after it.
  returned: always
  type: list
  elements: dict
  contains:
    line:
      description: Line of the C(self._setup_kernel(...)) call.
      type: int
    scope:
      description: Enclosing C(Class.method).
      type: str
    names:
      description: Names the fix deletes at this site.
      type: list
      elements: str
    blocks:
      description: Cleanup blocks after the call with C(start_line), C(end_line), C(has_del), C(has_empty_cache).
      type: list
      elements: dict
  sample:
    - line: 49
      scope: Mxfp4MoEMethod.process_weights_after_loading
      names: [w13, w2, w13_scale, w2_scale, w13_bias, w2_bias]
      blocks: [{start_line: 50, end_line: 52, has_del: true, has_empty_cache: true}]
source:
  description: The file read (host path, or C(image:path_in_image)).
  returned: always
  type: str
  sample: vllm-ds4:derived:/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/quantization/mxfp4.py
backup_file:
  description: Backup written by O(backup=true).
  returned: changed and O(backup=true)
  type: str
  sample: /var/lib/dgxspark-ds4/build/mxfp4.py.12345.2026-11-22@07:30:00~
'''

import os
import py_compile
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_native

from ansible_collections.dgxspark.ds4.plugins.module_utils._image.mxfp4_patch import (
    Mxfp4PatchError,
    analyse,
    compile_text,
    normalise,
    locate_in_image,
    read_from_image,
    report,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path'),
            image=dict(type='str'),
            path_in_image=dict(type='str'),
            python=dict(type='str', default='python3'),
            docker_cli=dict(type='str', default='docker'),
            expected=dict(type='int', default=2),
            state=dict(type='str', default='check', choices=['check', 'present']),
            backup=dict(type='bool', default=False),
            byte_compile=dict(type='bool', default=True),
        ),
        required_one_of=[('path', 'image')],
        mutually_exclusive=[('path', 'image')],
        supports_check_mode=True,
    )
    p = module.params
    if p['expected'] < 1:
        module.fail_json(msg='expected=%d is not valid: a patched mxfp4.py has at least one cleanup block '
                             '(2 for current vLLM)' % p['expected'])
    if p['image'] and p['state'] != 'check':
        module.fail_json(msg='state=%s is not allowed with image=%s: images are never patched in place; patch a host '
                             'copy with path= and let dgxspark.ds4.container_image bake it into a derived image'
                             % (p['state'], p['image']))

    tmpdir = None
    source = p['path'] or '%s:%s' % (p['image'], p['path_in_image'] or '(vllm of %s)' % p['python'])
    try:
        if p['image']:
            docker = p['docker_cli']
            if not os.path.isabs(docker):
                docker = module.get_bin_path(docker, required=True)
            if not p['path_in_image']:
                p['path_in_image'] = locate_in_image(module.run_command, p['image'], p['python'], docker=docker)
                source = '%s:%s' % (p['image'], p['path_in_image'])
            text, tmpdir = read_from_image(module.run_command, p['image'], p['path_in_image'],
                                           docker=docker)
        else:
            if not os.path.isfile(p['path']):
                module.fail_json(msg='path=%s does not exist or is not a file' % p['path'])
            with open(to_bytes(p['path']), 'rb') as handle:
                text = handle.read().decode('utf-8')
        run(module, p, source, text)
    except Mxfp4PatchError as exc:
        module.fail_json(msg='%s: %s' % (source, exc.msg), source=source, **exc.fields)
    except (IOError, OSError, UnicodeDecodeError) as exc:
        module.fail_json(msg='cannot read or write %s: %s' % (source, to_native(exc)), source=source)
    finally:
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)


def run(module, p, source, text):
    expected = p['expected']
    before = analyse(text)
    rep_before = report(before, expected)
    result = dict(
        changed=False, source=source, expected=expected, sites=rep_before['sites'],
        status_before=rep_before['status'], blocks_before=rep_before['blocks'],
        empty_cache_before=rep_before['empty_cache_count'],
    )

    if p['state'] == 'check':
        result.update(status=rep_before['status'], message=rep_before['message'], blocks_after=rep_before['blocks'],
                      empty_cache_after=rep_before['empty_cache_count'])
        if rep_before['status'] != 'patched':
            module.fail_json(msg='%s is %s' % (source, rep_before['message']), **result)
        module.exit_json(**result)

    new_text, dummy = normalise(text, expected)
    rep_after = report(analyse(new_text), expected)
    result.update(status=rep_after['status'], message=rep_after['message'], blocks_after=rep_after['blocks'],
                  empty_cache_after=rep_after['empty_cache_count'])
    if new_text == text:
        module.exit_json(**result)

    compile_text(new_text, p['path'])
    result['changed'] = True
    if module._diff:
        result['diff'] = dict(before=text, after=new_text, before_header=p['path'], after_header=p['path'])
    if module.check_mode:
        result['message'] = 'would rewrite: %s -> %s' % (rep_before['message'], rep_after['message'])
        module.exit_json(**result)

    if p['backup']:
        result['backup_file'] = module.backup_local(p['path'])
    tmp_path = '%s.mxfp4_patch.tmp' % p['path']
    with open(to_bytes(tmp_path), 'wb') as handle:
        handle.write(to_bytes(new_text))
    module.atomic_move(tmp_path, p['path'])
    if p['byte_compile']:
        try:
            py_compile.compile(p['path'], doraise=True)
        except py_compile.PyCompileError as exc:
            module.fail_json(msg='%s was written but does not byte-compile: %s' % (p['path'], to_native(exc)), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
