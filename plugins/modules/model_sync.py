#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: model_sync
short_description: Copy a model directory from the head to the worker in parallel rsync streams over ssh
version_added: 0.1.0
description:
  - Runs on the head. Lists O(src) here and O(dest) on the worker (one ssh call through O(ssh)), then copies what
    differs directly head to worker, never through the controller.
  - Files missing on the worker, of another size or modification time, or named in O(force) are copied whole;
    files shorter than the head's (an interrupted copy) are resumed with C(rsync --append-verify), which checks the
    whole file afterwards and resends it if the kept part differs. Files identical by size and mtime are skipped.
  - A file the worker already holds in full (RV(files_replaced)) is never rewritten in place. Rsync writes the new
    copy under C(.cache/dgxspark-ds4-sync) of O(dest) and renames it over the old one when complete, so a copy that
    fails half-way leaves the worker's file as it was. Missing files are written in place (resumable).
  - Once copied, the files leave the page cache on both hosts (C(sync -d) then C(dd iflag=nocache count=0), only
    those files); a copy beside a live pair does not fill the page cache a running vLLM competes with on GB10.
    A failure there is a warning (RV(drop_behind_warnings)).
  - The files are split across O(streams) rsync processes of about equal bytes, largest first.
  - Before copying, the bytes still to write (per file, head size minus worker size) are compared with the free
    space of the worker's file system; the module fails with both numbers when it is short.
  - Files only on the worker are reported in RV(extra) and never deleted.
  - Symlinks in O(src) are followed (a Hugging Face hub cache snapshot, C(snapshots/<rev>/) whose files link to
    C(../../blobs/)); the worker gets regular files with the bytes (C(rsync --copy-links)), never the links. A
    symlink on the worker is not taken for a copy and is replaced by the file.
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Lists both sides, checks space and reports what would be copied.
  diff_mode:
    support: full
    details: The diff lists the files copied or resumed.
options:
  src:
    description:
      - The model directory on the head.
    type: path
    required: true
  dest:
    description:
      - The model directory on the worker (created if missing).
    type: path
    required: true
  ssh:
    description:
      - The ssh command prefix reaching the worker over the fabric, last element C([user@]host), for example the
        C(peer_access_ssh) fact of the dgxspark.ds4.peer_access role. Empty copies to a local O(dest).
    type: list
    elements: str
    default: []
  streams:
    description:
      - Parallel rsync streams.
    type: int
    default: 4
  force:
    description:
      - Relative paths to copy whole even if size and mtime match (files a full verify found corrupt).
    type: list
    elements: str
    default: []
  exclude:
    description:
      - Shell patterns of relative paths neither copied nor compared; C(dir/**) prunes a directory.
    type: list
    elements: str
    default: ['.cache/**', '*.lock', '*.incomplete']
  reserve:
    description:
      - Bytes that must stay free on the worker on top of the model.
    type: int
    default: 0
  rsync:
    description:
      - rsync binary on the head (the worker needs C(rsync) on its PATH too).
    type: str
    default: rsync
notes:
  - Needs C(rsync) on both nodes and C(stat), C(find) (GNU) on the worker.
'''

EXAMPLES = r'''
- name: Copy the model to the worker over the fabric
  dgxspark.ds4.model_sync:
    src: /srv/dgxspark-ds4/models/DeepSeek-V4-Flash
    dest: /srv/dgxspark-ds4/models/DeepSeek-V4-Flash
    ssh: "{{ peer_access_ssh }}"
    streams: 4
  register: ds4_sync
'''

RETURN = r'''
bytes_copied:
  description: Bytes written to the worker (whole files plus resumed tails); 0 when nothing was copied.
  returned: always
  type: int
  sample: 160000000000
bytes_sent:
  description: Bytes rsync reports as sent (protocol included).
  returned: always
  type: int
  sample: 160012345678
bytes_needed:
  description: Bytes still to write before the copy (used for the space check).
  returned: always
  type: int
  sample: 160000000000
bytes_total:
  description: Size of the model on the head.
  returned: always
  type: int
  sample: 160000000000
dest_free_bytes:
  description: Free bytes on the worker's file system before the copy.
  returned: always
  type: int
  sample: 3500000000000
files_replaced:
  description: Those of RV(files_copied) the worker held in full (written aside, renamed over the old copy).
  returned: always
  type: list
  elements: str
  sample: [model-00002-of-00046.safetensors]
drop_behind_warnings:
  description: Hosts where dropping the page cache behind the copied files failed (the copy itself succeeded).
  returned: when something was copied
  type: list
  elements: str
  sample: []
files_copied:
  description: Files copied whole.
  returned: always
  type: list
  elements: str
  sample: [model-00001-of-00046.safetensors]
files_resumed:
  description: Files resumed from a partial copy (C(--append-verify)).
  returned: always
  type: list
  elements: str
  sample: []
files_skipped:
  description: Files already identical by size and mtime.
  returned: always
  type: int
  sample: 48
extra:
  description: Files only on the worker (not deleted).
  returned: always
  type: list
  elements: str
  sample: []
streams_used:
  description: rsync streams run.
  returned: always
  type: int
  sample: 4
copy_s:
  description: Seconds the copy took.
  returned: when something was copied
  type: float
  sample: 95.2
throughput_mib_s:
  description: RV(bytes_copied) over RV(copy_s) in MiB/s.
  returned: when something was copied
  type: float
  sample: 1602.3
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.ds4.plugins.module_utils._model.model_sync import SyncError, sync


def main():
    module = AnsibleModule(
        argument_spec=dict(
            src=dict(type='path', required=True),
            dest=dict(type='path', required=True),
            ssh=dict(type='list', elements='str', default=[]),
            streams=dict(type='int', default=4),
            force=dict(type='list', elements='str', default=[]),
            exclude=dict(type='list', elements='str', default=['.cache/**', '*.lock', '*.incomplete']),
            reserve=dict(type='int', default=0),
            rsync=dict(type='str', default='rsync'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p['streams'] < 1 or p['streams'] > 64:
        module.fail_json(msg='streams=%d: use 1 to 64 parallel rsync streams' % p['streams'])
    rsync = module.get_bin_path(p['rsync'], required=True)
    try:
        result = sync(p['src'], p['dest'], ssh=p['ssh'], streams=p['streams'], force=p['force'], excludes=p['exclude'],
                      check_mode=module.check_mode, reserve=p['reserve'], rsync=rsync)
    except SyncError as e:
        module.fail_json(msg=e.msg, **e.fields)
    for warning in result.get('drop_behind_warnings', []):
        module.warn(warning)
    if module._diff and result['changed']:
        lines = ['%s %s\n' % ('resume' if n in result['files_resumed'] else 'copy', n)
                 for n in sorted(result['files_copied'] + result['files_resumed'])]
        result['diff'] = dict(before='', after=''.join(lines), after_header='%s:%s' % (result['dest_host'], result['dest']))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
