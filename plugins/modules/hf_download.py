#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: hf_download
short_description: Download a pinned Hugging Face model snapshot into a directory (resumable)
version_added: 0.1.0
description:
  - Reads the file list of O(repo_id) at O(revision) from the hub (names, sizes, LFS sha256), checks the free space
    of O(local_dir)'s file system against the bytes still missing, then runs C(huggingface_hub.snapshot_download)
    into O(local_dir). Interrupted downloads resume; files already present are not fetched again.
  - Refuses a revision that is not a 40-hex commit unless O(allow_unpinned=true)
    (a branch such as C(main) silently re-resolves and downloads again when upstream moves).
  - The token (O(token), a C(no_log) option; or C(HF_TOKEN) already in the module's environment) is put into the
    module process's C(HF_TOKEN) for huggingface_hub; it is never returned. An option is used rather than the task's
    C(environment), which Ansible prints on the remote command line at C(-vvv) and shows in C(ps).
  - Once downloaded, the files written leave the page cache (C(sync -d) then C(dd iflag=nocache count=0), only those
    files); a 149 GB download beside a live pair does not fill the page cache a running vLLM competes with on GB10.
  - Uses C(hf_xet) when installed, else C(hf_transfer) when installed (sets C(HF_HUB_ENABLE_HF_TRANSFER=1)).
author:
  - dgxspark.ds4 contributors (@dgxspark)
requirements:
  - huggingface_hub on the managed host
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Reads the hub metadata and checks space; downloads nothing.
  diff_mode:
    support: none
options:
  repo_id:
    description: Hub repository, C(org/name).
    type: str
    required: true
  revision:
    description: Commit sha (40 hex) to download.
    type: str
  local_dir:
    description: Directory the files are written to (plain files, not the hub cache layout).
    type: path
    required: true
  allow_unpinned:
    description: Accept a branch, tag or no revision (warns).
    type: bool
    default: false
  max_workers:
    description: Parallel file downloads.
    type: int
    default: 8
  reserve:
    description: Bytes that must stay free on top of the model.
    type: int
    default: 0
  token:
    description: Hugging Face token (keep it in a vault). Never logged or returned.
    type: str
'''

EXAMPLES = r'''
- name: Download the pinned snapshot on the head
  dgxspark.ds4.hf_download:
    repo_id: deepseek-ai/DeepSeek-V4-Flash
    revision: 0123456789abcdef0123456789abcdef01234567
    local_dir: /srv/dgxspark-ds4/models/DeepSeek-V4-Flash
    token: "{{ vault_hf_token }}"
  no_log: true
'''

RETURN = r'''
hub_metadata:
  description: The hub's file list (C(rfilename), C(size), C(lfs.sha256)), for dgxspark.ds4.model_manifest.
  returned: always
  type: list
  elements: dict
  sample: [{rfilename: model-00001-of-00046.safetensors, size: 3221225472, lfs: {sha256: 3f1c...}}]
resolved_revision:
  description: The commit the hub resolved.
  returned: always
  type: str
  sample: 0123456789abcdef0123456789abcdef01234567
backend:
  description: Transfer backend, C(hf_xet), C(hf_transfer) or C(http).
  returned: always
  type: str
  sample: hf_xet
bytes_needed:
  description: Bytes missing before the download.
  returned: always
  type: int
  sample: 0
bytes_downloaded:
  description: Bytes added to O(local_dir).
  returned: always
  type: int
  sample: 0
drop_behind_warnings:
  description: A failure to drop the page cache behind the downloaded files (the download itself succeeded).
  returned: when something was downloaded
  type: list
  elements: str
  sample: []
files_downloaded:
  description: Files added or changed.
  returned: always
  type: list
  elements: str
  sample: []
free_bytes:
  description: Free bytes on the file system of O(local_dir) before the download.
  returned: always
  type: int
  sample: 3500000000000
'''

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.ds4.plugins.module_utils._model.model_sync import SyncError
from ansible_collections.dgxspark.ds4.plugins.module_utils._model.hf_hub import download


def main():
    module = AnsibleModule(
        argument_spec=dict(
            repo_id=dict(type='str', required=True),
            revision=dict(type='str'),
            local_dir=dict(type='path', required=True),
            allow_unpinned=dict(type='bool', default=False),
            max_workers=dict(type='int', default=8),
            reserve=dict(type='int', default=0),
            token=dict(type='str', no_log=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p['token']:
        os.environ['HF_TOKEN'] = p['token']
    try:
        result = download(p['repo_id'], p['revision'], p['local_dir'], allow_unpinned=p['allow_unpinned'],
                          max_workers=p['max_workers'], reserve=p['reserve'], check_mode=module.check_mode)
    except SyncError as e:
        module.fail_json(msg=e.msg, **e.fields)
    for warning in [result.pop('warning', None)] + result.get('drop_behind_warnings', []):
        if warning:
            module.warn(warning)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
