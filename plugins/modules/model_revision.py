#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: model_revision
short_description: One directory per model revision, the stable model path switched to it atomically
version_added: 0.2.0
description:
  - Keeps each revision of a model in its own directory C(<path>.revs/<revision>/) beside O(path), and O(path)
    (the directory the serving unit mounts) a relative symlink to the revision being served.
  - O(state=prepare) adopts a flat directory found at O(path) (from before this layout, or the user's own copy);
    it is renamed into C(<path>.revs/<revision it holds>) (O(adopt_revision), else O(revision); no byte is copied,
    nothing is deleted) and O(path) is linked to it at once, so the same files stay served. Then it creates the
    directory of O(revision), returned as RV(rev_dir), where the files are fetched and verified.
  - A flat O(path) holding a symlink that leads outside it (a Hugging Face hub cache snapshot, whose files link into
    C(../../blobs/)) is refused before anything changes (also in check mode), naming the link and its target; the
    rename would break the links, and the container, which mounts only O(path), could not follow them. Copy such a
    snapshot into a separate O(path) instead (role model_cache, C(model_cache_local_dir)).
  - A flat O(path) that is a mount point (or on another file system than its parent) cannot be renamed; it is kept
    and served in place (RV(mode=flat), RV(rev_dir) is O(path), a warning says so).
  - O(state=switch) points O(path) at O(revision) by renaming a temporary symlink over it (atomic). Nothing changes
    when it already points there, so a second run reports C(changed=false).
  - O(state=prune) removes every revision directory except the one O(path) points to and O(keep). Run it only
    after the revision O(path) points to has served (after the readiness gate).
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Inspects and reports what would be adopted, created, switched or removed; changes nothing.
  diff_mode:
    support: full
    details: The diff shows the link target before and after (switch) or the revision directories (prepare, prune).
options:
  path:
    description:
      - The model's stable path (C(ds4_effective.model.host_dir)), mounted by the serving unit.
    type: path
    required: true
  revision:
    description:
      - The revision to prepare or switch to (a commit sha); empty uses the directory name C(unpinned).
    type: str
  state:
    description:
      - V(prepare), V(switch), V(prune), or V(inspect) (read-only).
    type: str
    choices: [prepare, switch, prune, inspect]
    default: inspect
  adopt_revision:
    description:
      - The revision a flat directory at O(path) holds (from the previous run's evidence); empty = O(revision).
    type: str
  keep:
    description:
      - Revisions O(state=prune) keeps besides the one O(path) points to.
    type: list
    elements: str
    default: []
'''

EXAMPLES = r'''
- name: Directory of the wanted revision (adopting a flat directory)
  dgxspark.ds4.model_revision:
    path: /srv/dgxspark-ds4/models/DeepSeek-V4-Flash
    revision: 0123456789abcdef0123456789abcdef01234567
    state: prepare
  register: rev

- name: Serve it (after the files are verified)
  dgxspark.ds4.model_revision:
    path: /srv/dgxspark-ds4/models/DeepSeek-V4-Flash
    revision: 0123456789abcdef0123456789abcdef01234567
    state: switch

- name: Remove the previous revisions (after readiness)
  dgxspark.ds4.model_revision:
    path: /srv/dgxspark-ds4/models/DeepSeek-V4-Flash
    state: prune
'''

RETURN = r'''
mode:
  description: V(revisions) (the layout is used) or V(flat) (a mount point served in place).
  returned: always
  type: str
  sample: revisions
key:
  description: Directory name of O(revision).
  returned: always
  type: str
  sample: 0123456789abcdef0123456789abcdef01234567
rev_dir:
  description: Where the files of O(revision) go (O(path) itself in flat mode).
  returned: always
  type: str
  sample: /srv/dgxspark-ds4/models/DeepSeek-V4-Flash.revs/0123456789abcdef0123456789abcdef01234567
revs_dir:
  description: The directory holding one directory per revision.
  returned: always
  type: str
  sample: /srv/dgxspark-ds4/models/DeepSeek-V4-Flash.revs
current:
  description: The revision O(path) points to (after the change).
  returned: always
  type: str
  sample: 0123456789abcdef0123456789abcdef01234567
previous:
  description: Other revision directories kept (prepare, switch).
  returned: when state is prepare or switch
  type: list
  elements: str
  sample: []
adopted:
  description: The flat directory moved into the layout (C(from), C(to), C(revision)), or null.
  returned: when state is prepare
  type: dict
  sample: null
switched_from:
  description: The revision O(path) pointed to before a switch (null when it was absent).
  returned: when state is switch
  type: str
  sample: null
removed:
  description: Revision directories removed (prune).
  returned: when state is prune
  type: list
  elements: str
  sample: []
bytes_freed:
  description: Bytes of the removed revision directories.
  returned: when state is prune
  type: int
  sample: 0
revisions:
  description: Revision directories present before the change.
  returned: always
  type: list
  elements: str
  sample: []
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.ds4.plugins.module_utils._model.model_revision import (
    RevisionError, inspect, layout, prepare, prune, switch)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            revision=dict(type='str'),
            state=dict(type='str', default='inspect', choices=['prepare', 'switch', 'prune', 'inspect']),
            adopt_revision=dict(type='str'),
            keep=dict(type='list', elements='str', default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        lay = layout(p['path'], p['revision'])
        before = inspect(lay)
        base = dict(key=lay['key'], revs_dir=lay['revs_dir'], revisions=before['revisions'], current=before['current'])
        if p['state'] == 'inspect':
            mode = 'flat' if before['kind'] == 'dir' and before['mount'] else 'revisions'
            module.exit_json(changed=False, mode=mode, rev_dir=lay['host_dir'] if mode == 'flat' else lay['rev_dir'],
                             kind=before['kind'], target=before['target'], **base)
        if p['state'] == 'prepare':
            res = prepare(lay, p['adopt_revision'], module.check_mode)
            for warning in res.pop('warnings'):
                module.warn(warning)
            if res['adopted']:
                res['adopted'] = {'from': res['adopted']['frm'], 'to': res['adopted']['to'],
                                  'revision': res['adopted']['revision']}
            base.update(res)
            diff = dict(before='revisions: %s\n' % ', '.join(before['revisions']),
                        after='revisions: %s\n' % ', '.join(sorted(set(before['revisions'] + res['previous'] + [lay['key']]))))
        elif p['state'] == 'switch':
            res = switch(lay, module.check_mode)
            base.update(mode=res['mode'], rev_dir=lay['rev_dir'] if res['mode'] == 'revisions' else lay['host_dir'],
                        changed=res['changed'], current=res['current'], previous=res['previous'],
                        switched_from=res['frm'])
            diff = dict(before='%s -> %s\n' % (lay['host_dir'], before['target']),
                        after='%s -> %s\n' % (lay['host_dir'], lay['link_target'] if res['changed'] else before['target']))
        else:
            res = prune(lay, p['keep'], module.check_mode)
            base.update(mode='revisions', rev_dir=lay['rev_dir'], changed=res['changed'], removed=res['removed'],
                        bytes_freed=res['bytes_freed'], current=res['current'])
            diff = dict(before='revisions: %s\n' % ', '.join(before['revisions']),
                        after='revisions: %s\n' % ', '.join(res['kept']))
    except RevisionError as exc:
        module.fail_json(msg=exc.msg, **exc.fields)
    except OSError as exc:
        module.fail_json(msg='%s: %s' % (p['path'], exc))
    if module._diff and base.get('changed'):
        base['diff'] = diff
    module.exit_json(**base)


if __name__ == '__main__':
    main()
