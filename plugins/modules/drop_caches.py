#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: drop_caches
short_description: Sync and drop the kernel page cache, reporting MemAvailable before and after
version_added: 0.1.0
description:
  - Runs C(sync), then writes O(level) to C(<proc_root>/sys/vm/drop_caches).
  - Reports C(MemAvailable) from C(<proc_root>/meminfo) before and after, and the bytes freed.
  - On DGX Spark (GB10 unified memory) stale page cache from a model copy or load counts against the memory vLLM
    can claim at start, so the collection drops caches after a model copy and before each vLLM start.
  - When the file is not writable (for example a container that shares the host kernel mounts C(/proc/sys)
    read-only) the module fails with that reason, unless O(skip_if_readonly=true).
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Reads MemAvailable and whether the file is writable; does not sync or write.
  diff_mode:
    support: none
options:
  level:
    description:
      - Value written to C(drop_caches). V(1) page cache, V(2) reclaimable slab (dentries, inodes), V(3) both.
    type: int
    choices: [1, 2, 3]
    default: 3
  proc_root:
    description:
      - Root of the proc file system. Tests point this at a fake tree.
    type: path
    default: /proc
  sync:
    description:
      - Flush dirty pages with C(sync) before dropping; dirty pages cannot be dropped.
    type: bool
    default: true
  min_available:
    description:
      - Fail if MemAvailable is still below this after dropping. Bytes as an integer, or a number with a unit
        V(B), V(KiB), V(MiB), V(GiB), V(TiB) (powers of 1024) or V(kB), V(MB), V(GB), V(TB) (powers of 1000),
        for example V(100GiB).
      - Not evaluated in check mode (nothing was dropped).
    type: str
  skip_if_readonly:
    description:
      - When the drop_caches file cannot be written, return ok (not changed) with the reason instead of failing.
    type: bool
    default: false
notes:
  - Needs root (O(ignore:become=true)) on a real host. Never point it at the host's C(/proc) from a test container.
  - C(changed) is true whenever the module wrote the file; dropping caches is an action, not a state.
'''

EXAMPLES = r'''
- name: Drop the page cache after the model copy
  dgxspark.ds4.drop_caches:
  become: true

- name: Drop caches and require 100 GiB available for vLLM
  dgxspark.ds4.drop_caches:
    level: 3
    min_available: 100GiB
  become: true

- name: In a test container sharing the kernel, report instead of failing
  dgxspark.ds4.drop_caches:
    skip_if_readonly: true
'''

RETURN = r'''
mem_available_before:
  description: MemAvailable in bytes before dropping.
  returned: always
  type: int
  sample: 11811160064
mem_available_after:
  description: MemAvailable in bytes after dropping; null in check mode or when skipped.
  returned: always
  type: int
  sample: 124554051584
freed_bytes:
  description: RV(mem_available_after) minus RV(mem_available_before); null when nothing was written.
  returned: always
  type: int
  sample: 112742891520
min_available_bytes:
  description: O(min_available) in bytes, or null.
  returned: always
  type: int
  sample: 107374182400
min_available_met:
  description: Whether MemAvailable after dropping reached O(min_available); null if not evaluated.
  returned: always
  type: bool
  sample: true
level:
  description: The value written (or that would be written).
  returned: always
  type: int
  sample: 3
path:
  description: The drop_caches file.
  returned: always
  type: str
  sample: /proc/sys/vm/drop_caches
synced:
  description: Whether C(sync) ran.
  returned: always
  type: bool
  sample: true
skipped:
  description: True when the file was not writable and O(skip_if_readonly=true).
  returned: always
  type: bool
  sample: false
msg:
  description: One line summary with the numbers.
  returned: always
  type: str
  sample: 'dropped caches (level 3): MemAvailable 11.00 GiB -> 116.00 GiB (105.00 GiB freed)'
reason:
  description: Why nothing was written (read-only, permission) or what check mode would do; null otherwise.
  returned: always
  type: str
  sample: /proc/sys/vm/drop_caches is on a read-only file system
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.ds4.plugins.module_utils._model.drop_caches import (
    DropCachesError,
    drop_caches,
    human_bytes,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            level=dict(type='int', default=3, choices=[1, 2, 3]),
            proc_root=dict(type='path', default='/proc'),
            sync=dict(type='bool', default=True),
            min_available=dict(type='str'),
            skip_if_readonly=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = drop_caches(
            proc_root=params['proc_root'],
            level=params['level'],
            do_sync=params['sync'],
            min_available=params['min_available'],
            skip_if_readonly=params['skip_if_readonly'],
            check_mode=module.check_mode,
        )
    except DropCachesError as exc:
        module.fail_json(msg=exc.msg, changed=exc.fields.get('changed', False),
                         **dict((k, v) for k, v in exc.fields.items() if k != 'changed'))

    if result['freed_bytes'] is not None:
        result['msg'] = 'dropped caches (level %d): MemAvailable %s -> %s (%s freed)' % (
            result['level'], human_bytes(result['mem_available_before']), human_bytes(result['mem_available_after']),
            human_bytes(result['freed_bytes']))
    else:
        result['msg'] = result['reason']
    module.exit_json(**result)


if __name__ == '__main__':
    main()
