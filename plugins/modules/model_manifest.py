#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: model_manifest
short_description: Build or check a manifest (path, size, sha256) of a model directory
version_added: 0.1.0
description:
  - O(mode=build) hashes the model directory and returns (and optionally writes to O(manifest)) a manifest of
    every file's relative path, size and sha256. With O(hub_metadata), names, sizes and LFS sha256 come from the
    hub and only the other (small) files are hashed on this host.
  - O(mode=quick) compares names and sizes with the reference (seconds for 150 GB).
  - O(mode=full) also hashes every file, in parallel over O(workers) threads with large reads, so the check runs
    at disk speed rather than one core's hashing speed.
  - The reference is O(manifest) (a file on the managed host), O(manifest_content) (inline), or O(hub_metadata);
    with O(hub_metadata) and a head manifest together, the head manifest supplies the sha256 of non-LFS files.
    Files with no sha256 anywhere are checked by size only and listed in RV(size_only).
  - Reports missing, extra, truncated, larger and sha256-mismatching files by name and fails listing them unless
    O(fail_on_mismatch=false).
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Checks read only; O(mode=build) computes the manifest but does not write O(manifest).
  diff_mode:
    support: full
    details: O(mode=build) with O(manifest) shows the change to the manifest file.
options:
  path:
    description:
      - The model directory.
    type: path
    required: true
  mode:
    description:
      - V(build) makes a manifest; V(quick) checks names and sizes; V(full) checks names, sizes and sha256.
    type: str
    choices: [build, quick, full]
    default: quick
  manifest:
    description:
      - Manifest file on the managed host. Written by O(mode=build) (changed only when its content differs),
        read by O(mode=quick) and O(mode=full).
      - When it lies inside O(path) it is left out of the scan.
    type: path
  manifest_content:
    description:
      - The reference manifest inline (a mapping as returned in RV(manifest), or its JSON text), for example the
        head's manifest checked on the worker. Not used with O(mode=build).
    type: raw
  hub_metadata:
    description:
      - The hub's file list, as C(huggingface_hub.model_info(repo_id, revision=..., files_metadata=True).siblings)
        serialised to a list of mappings with C(rfilename), C(size) and C(lfs.sha256) (or the hub API JSON with a
        C(siblings) key).
    type: raw
  changed_since:
    description:
      - With O(mode=full), hash only the files new or changed (size or modification time) since this listing, the
        RV(listing) of an earlier check that passed (its last verified state); the others are compared by size.
        A file rewritten under the same identity (same size, new mtime) is hashed, in seconds.
    type: dict
  workers:
    description:
      - Threads hashing files in parallel. Defaults to the number of CPUs of the managed host.
    type: int
  exclude:
    description:
      - Shell patterns matched against the relative path (C(*) also matches C(/)); matching files are neither
        hashed nor reported as extra. A pattern ending in C(/**) prunes that directory.
    type: list
    elements: str
    default: ['.cache/**', '*.lock', '*.incomplete']
  fail_on_mismatch:
    description:
      - Fail when anything differs. With V(false), report the differences and return ok.
    type: bool
    default: true
  evict_after_read:
    description:
      - After hashing a file, tell the kernel its pages are not needed (C(posix_fadvise DONTNEED)) so a full check
        does not fill the page cache that vLLM's start-up memory check counts against it on GB10.
    type: bool
    default: true
notes:
  - C(changed) is false for O(mode=quick) and O(mode=full), which only read.
  - Manifests are written without timestamps so rebuilding an unchanged directory changes nothing.
'''

EXAMPLES = r'''
- name: Build the reference on the head from the hub metadata and the downloaded files
  dgxspark.ds4.model_manifest:
    path: /models/DeepSeek-V4-Flash
    mode: build
    hub_metadata: "{{ ds4_model_siblings }}"
    manifest: /var/lib/dgxspark-ds4/model-manifest.json
  register: ds4_manifest

- name: Quick check on every deployment
  dgxspark.ds4.model_manifest:
    path: /models/DeepSeek-V4-Flash
    manifest: /var/lib/dgxspark-ds4/model-manifest.json

- name: Full check on the worker after the copy, against the head's manifest
  dgxspark.ds4.model_manifest:
    path: /models/DeepSeek-V4-Flash
    mode: full
    manifest_content: "{{ hostvars['spark1'].ds4_manifest.manifest }}"
'''

RETURN = r'''
listing:
  description: (O(mode=quick) and O(mode=full)) Each file checked, relative path -> [size, mtime in ns].
  returned: when mode is quick or full
  type: dict
  sample: {model-00001-of-00046.safetensors: [3221225472, 1732600000123456789]}
hashed_files:
  description: (O(mode=full)) The files hashed (with O(changed_since), those new or changed since it).
  returned: when mode is full
  type: list
  elements: str
ok:
  description: True when nothing differs.
  returned: always
  type: bool
  sample: false
mode:
  description: The mode run.
  returned: always
  type: str
  sample: full
mismatches:
  description: Number of problems (missing + extra + truncated + size_mismatch + sha256_mismatch + unreadable).
  returned: always
  type: int
  sample: 2
problems:
  description: One line naming every problem by file (first 10 of each kind); empty when RV(ok).
  returned: always
  type: str
  sample: '1 truncated: model-00003-of-00046.safetensors (3221225471 of 3221225472 bytes)'
missing:
  description: Files in the reference but not on disk.
  returned: always
  type: list
  elements: str
  sample: [model-00007-of-00046.safetensors]
extra:
  description: Files on disk (not excluded) that are not in the reference.
  returned: always
  type: list
  elements: str
  sample: [model-00007-of-00046.safetensors.bak]
truncated:
  description: Files smaller than the reference, with C(name), C(expected_size), C(actual_size).
  returned: always
  type: list
  elements: dict
  sample: [{name: model-00003-of-00046.safetensors, expected_size: 3221225472, actual_size: 3221225471}]
size_mismatch:
  description: Files larger than the reference, with C(name), C(expected_size), C(actual_size).
  returned: always
  type: list
  elements: dict
  sample: []
sha256_mismatch:
  description: Files of the right size whose sha256 differs (O(mode=full)), with C(name), C(expected_sha256),
    C(actual_sha256).
  returned: always
  type: list
  elements: dict
  sample: []
size_only:
  description: Files checked by size only because the reference has no sha256 for them (O(mode=full)).
  returned: always
  type: list
  elements: str
  sample: [README.md]
unreadable:
  description: Files that could not be read, with C(name) and C(error).
  returned: always
  type: list
  elements: dict
  sample: []
manifest:
  description: The manifest built (O(mode=build)); pass it as O(manifest_content) to check another node.
  returned: when O(mode=build)
  type: dict
  sample: {format: dgxspark.ds4/model-manifest, version: 1, source: hub+head,
           files: {config.json: {size: 1234, sha256: 3f1c...}}}
manifest_path:
  description: The manifest file written or read, if any.
  returned: always
  type: str
  sample: /var/lib/dgxspark-ds4/model-manifest.json
files_expected:
  description: Files in the reference.
  returned: always
  type: int
  sample: 50
files_found:
  description: Files found on disk (after exclusions).
  returned: always
  type: int
  sample: 50
bytes_expected:
  description: Total size of the reference.
  returned: always
  type: int
  sample: 149000000000
bytes_found:
  description: Total size found on disk.
  returned: always
  type: int
  sample: 149000000000
files_hashed:
  description: Files hashed in this run.
  returned: always
  type: int
  sample: 50
bytes_hashed:
  description: Bytes read for hashing.
  returned: always
  type: int
  sample: 149000000000
hash_throughput_mib_s:
  description: Bytes hashed per second of the whole run, in MiB/s; null when nothing was hashed.
  returned: always
  type: float
  sample: 3120.5
duration_s:
  description: Wall time of the scan and hashing.
  returned: always
  type: float
  sample: 48.2
workers:
  description: Hashing threads used.
  returned: always
  type: int
  sample: 20
reference_source:
  description: Where the reference came from (V(hub), V(manifest), V(local), V(hub+head)).
  returned: always
  type: str
  sample: hub+head
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_native

from ansible_collections.dgxspark.ds4.plugins.module_utils._model.model_manifest import (
    ManifestError,
    build,
    check,
    dumps,
    load_manifest,
    manifest_from_hub,
    merge_head,
)


def read_manifest_file(path):
    if not os.path.isfile(path):
        raise ManifestError('manifest=%s does not exist; build it on the head with mode=build first' % path)
    with open(to_bytes(path), 'rb') as handle:
        return load_manifest(handle.read(), option='manifest=%s' % path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            mode=dict(type='str', default='quick', choices=['build', 'quick', 'full']),
            manifest=dict(type='path'),
            manifest_content=dict(type='raw'),
            hub_metadata=dict(type='raw'),
            changed_since=dict(type='dict'),
            workers=dict(type='int'),
            exclude=dict(type='list', elements='str', default=['.cache/**', '*.lock', '*.incomplete']),
            fail_on_mismatch=dict(type='bool', default=True),
            evict_after_read=dict(type='bool', default=True),
        ),
        mutually_exclusive=[('manifest', 'manifest_content')],
        supports_check_mode=True,
    )
    p = module.params
    if p['workers'] is not None and p['workers'] < 1:
        module.fail_json(msg='workers=%d must be at least 1' % p['workers'])
    skip = [p['manifest']] if p['manifest'] else []
    common = dict(workers=p['workers'], excludes=p['exclude'], skip=skip, evict=p['evict_after_read'])
    changed = False
    diff = None
    try:
        if p['mode'] == 'build':
            if p['manifest_content'] is not None:
                module.fail_json(msg='manifest_content is the reference for quick/full checks; with mode=build give '
                                     'manifest (a path to write) or nothing (the manifest is returned)')
            hub = manifest_from_hub(p['hub_metadata']) if p['hub_metadata'] is not None else None
            result = build(p['path'], hub=hub, **common)
            if p['manifest']:
                changed, diff = write_manifest(module, p['manifest'], result['manifest'])
        else:
            refs = []
            if p['manifest']:
                refs.append(read_manifest_file(p['manifest']))
            elif p['manifest_content'] is not None:
                refs.append(load_manifest(p['manifest_content']))
            if p['hub_metadata'] is not None:
                hub = manifest_from_hub(p['hub_metadata'])
                reference = merge_head(hub, refs[0]) if refs else hub
            elif refs:
                reference = refs[0]
            else:
                module.fail_json(msg='mode=%s needs a reference: give manifest, manifest_content or hub_metadata'
                                     % p['mode'])
            result = check(p['path'], reference, mode=p['mode'], changed_since=p['changed_since'], **common)
    except ManifestError as exc:
        module.fail_json(msg=exc.msg, **exc.fields)
    except (IOError, OSError) as exc:
        module.fail_json(msg='model_manifest on %s failed: %s' % (p['path'], to_native(exc)))

    result['changed'] = changed
    result['manifest_path'] = p['manifest']
    if diff is not None and module._diff:
        result['diff'] = diff
    if not result['ok'] and p['fail_on_mismatch']:
        module.fail_json(msg='%s does not match the %s reference (%s): %s' % (
            p['path'], result['reference_source'], p['mode'], result['problems']), **result)
    if result['ok']:
        result['msg'] = '%s: %d files, %d bytes match (%s, %s)' % (
            p['path'], result['files_expected'], result['bytes_expected'], p['mode'], result['reference_source'])
    else:
        result['msg'] = '%s differs (%s): %s' % (p['path'], p['mode'], result['problems'])
    module.exit_json(**result)


def write_manifest(module, path, manifest):
    """Write ``manifest`` to ``path`` when its text differs; return (changed, diff)."""
    new_text = dumps(manifest)
    old_text = ''
    if os.path.exists(path):
        with open(to_bytes(path), 'rb') as handle:
            old_text = handle.read().decode('utf-8', 'replace')
    if old_text == new_text:
        return False, None
    diff = dict(before=old_text, after=new_text, before_header=path, after_header=path)
    if module.check_mode:
        return True, diff
    parent = os.path.dirname(path) or '.'
    if not os.path.isdir(parent):
        module.fail_json(msg='manifest=%s: directory %s does not exist; create it first' % (path, parent))
    tmp = '%s.tmp.%d' % (path, os.getpid())
    with open(to_bytes(tmp), 'wb') as handle:
        handle.write(to_bytes(new_text))
    os.chmod(tmp, 0o644)
    module.atomic_move(tmp, path)
    return True, diff


if __name__ == '__main__':
    main()
