#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: compile_cache
short_description: Look into vLLM's torch.compile cache on a node, or mark it as written by the serving image
version_added: 0.1.0
description:
  - O(state=check) reads the torch.compile cache directory O(path) (host side of the cache volume) - vLLM's layout
    C(<hash>/rank_<r>_<dp>/...) - and the marker C(.dgxspark-ds4-compiled-by.json) the collection writes there, and
    says whether it is warm for O(image_id) (non-empty and marked by that image). With O(custom_ops_all) on a node of at
    most 96 GiB and a cold cache, RV(warning) carries seed 002's words (the freeze of the first compile).
  - O(state=present) writes the marker with the image ID of the running O(container) (after the pair passed readiness).
  - See plugins/module_utils/_image/compile_cache.py.
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: O(state=check) only reads; O(state=present) reports what it would write.
  diff_mode:
    support: none
options:
  path:
    description: Host path of the torch.compile cache directory (C($VLLM_CACHE_ROOT/torch_compile_cache) through the cache volume).
    type: path
    required: true
  state:
    description: V(check) reads, V(present) writes the marker.
    type: str
    choices: [check, present]
    default: check
  image_id:
    description: With O(state=check), the ID of the image about to start.
    type: str
  custom_ops_all:
    description: With O(state=check), whether C(--compilation-config) has C(custom_ops) V(all).
    type: bool
    default: false
  node_memory_gib:
    description: With O(state=check), the node's memory in GiB (C(ds4_node_memory_gib)).
    type: int
  launch_digest:
    description:
      - Digest of the flags and env of the launch (C(ds4_effective.compile_cache.launch_digest)); O(state=check) compares
        it with the marker's, O(state=present) records it.
    type: str
  container:
    description: With O(state=present), the running vLLM container whose image is recorded.
    type: str
  docker:
    description: The docker CLI.
    type: str
    default: docker
'''

EXAMPLES = r'''
- name: Is the compile cache warm for the image about to start
  dgxspark.ds4.compile_cache:
    path: /var/cache/dgxspark-ds4/vllm/torch_compile_cache
    image_id: "{{ image_id }}"
    custom_ops_all: true
    node_memory_gib: 96
  register: cache

- name: Mark it after readiness
  dgxspark.ds4.compile_cache:
    path: /var/cache/dgxspark-ds4/vllm/torch_compile_cache
    state: present
    container: dgxspark-ds4-head
'''

RETURN = r'''
state:
  description: V(warm), V(missing), V(empty), V(other-image), V(other-config) or V(unmarked) (check); V(marked) or V(not-compiled) (present).
  returned: always
  type: str
  sample: warm
warm:
  description: Non-empty and marked by O(image_id) (check).
  returned: when state=check
  type: bool
  sample: true
artifacts:
  description: Files under C(<hash>/rank_*/) (counted up to 1000).
  returned: always
  type: int
  sample: 212
marker:
  description: The marker found (check) or written (present).
  returned: always
  type: dict
  sample: {"image_id": "sha256:0123...", "image_ref": "dgxspark-ds4/vllm:0123456789abcdef"}
warning:
  description: Seed 002's warning for custom_ops all on a cold cache of a node of at most 96 GiB, or null.
  returned: when state=check
  type: str
msg:
  description: One line.
  returned: always
  type: str
'''

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._image import compile_cache


def _present(module, p, info):
    if not p['container']:
        module.fail_json(msg='compile_cache state=present needs container (the running vLLM container). Fix: set container.')
    if not info['exists']:
        module.exit_json(changed=False, state='not-compiled', artifacts=0, marker=None,
                         msg='%s does not exist: this start compiled nothing there; no marker written' % p['path'])
    rc, out, err = module.run_command([p['docker'], 'inspect', '--format', '{{.Image}} {{.Config.Image}}', p['container']])
    if rc != 0 or not out.strip():
        module.fail_json(msg='cannot read the image of container %s (rc %s: %s). Fix: run this after the pair started.'
                         % (p['container'], rc, (err or out).strip()[-300:]))
    image_id, _sep, image_ref = out.strip().partition(' ')
    content = compile_cache.marker_content(image_id, image_ref or None, p['launch_digest'])
    marker_path = os.path.join(p['path'], compile_cache.MARKER)
    current = None
    if os.path.isfile(marker_path):
        with open(marker_path) as handle:
            current = handle.read()
    changed = not compile_cache.marker_matches(current, image_id, image_ref or None, p['launch_digest'])
    if changed and not module.check_mode:
        tmp = marker_path + '.tmp'
        with open(tmp, 'w') as handle:
            handle.write(content)
        os.chmod(tmp, 0o644)
        os.rename(tmp, marker_path)
    module.exit_json(changed=changed, state='marked', artifacts=info['artifacts'], marker=json.loads(content),
                     msg='%s marked as written by %s (%s)' % (p['path'], image_id, image_ref))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            state=dict(type='str', choices=['check', 'present'], default='check'),
            image_id=dict(type='str'),
            custom_ops_all=dict(type='bool', default=False),
            node_memory_gib=dict(type='int'),
            launch_digest=dict(type='str'),
            container=dict(type='str'),
            docker=dict(type='str', default='docker'),
        ),
        required_if=[('state', 'check', ['image_id'])],
        supports_check_mode=True,
    )
    p = module.params
    info = compile_cache.inspect(p['path'])
    if p['state'] == 'present':
        _present(module, p, info)
    result = compile_cache.verdict(info, p['path'], p['image_id'], p['custom_ops_all'], p['node_memory_gib'],
                                   p['launch_digest'])
    module.exit_json(changed=False, artifacts=info['artifacts'], marker=info['marker'], **result)


if __name__ == '__main__':
    main()
