#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: config_set
short_description: Keep this rank's rendered config set as a rollback target, or swap back to it
version_added: 0.1.0
description:
  - O(state=saved) copies the live files (launch script, env files, prestart settings, the unit file, the deployment
    evidence) into O(store) with a manifest (paths, sha256, modes, a label such as the profile). switch.yml runs it
    before it deploys another profile.
  - O(state=swapped) exchanges the live files with the stored ones (rollback.yml); the replaced live set becomes the
    stored set, so a second rollback returns to it. Stored files are verified against the manifest first.
  - Restarting the ranks (worker first) and readiness are the playbooks' job, not this module's.
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details: One line per file whose content would change.
options:
  state:
    description: V(saved) (live -> store) or V(swapped) (live <-> store).
    type: str
    choices: [saved, swapped]
    default: saved
  store:
    description: Directory of the stored set (0700).
    type: path
    default: /etc/dgxspark-ds4/previous
  files:
    description: The set, for O(state=saved). Each item has C(name) (a plain key) and C(path) (absolute live path).
    type: list
    elements: dict
  label:
    description: Free text kept in the manifest (the profile the set belongs to).
    type: str
  record:
    description:
      - This rank's live deployment record (C(deployed-<role>.json), part of the set); its launch facts are returned
        as RV(launch) after the run (after a swap, the restored set's).
      - A record written before the record carried them gives its clients' port, served name and engine URL, and the
        rest is read from the launch script it names.
    type: path
'''

EXAMPLES = r'''
- name: Keep the running set before switching profile
  dgxspark.ds4.config_set:
    state: saved
    label: balanced
    files:
      - {name: launch-head.sh, path: /etc/dgxspark-ds4/launch-head.sh}
      - {name: unit, path: /etc/systemd/system/dgxspark-ds4-head.service}

- name: Roll back to it
  dgxspark.ds4.config_set:
    state: swapped
'''

RETURN = r'''
manifest:
  description: The stored set's manifest after the run (saved_utc, label, files).
  returned: success
  type: dict
restored:
  description: For O(state=swapped), the manifest of the set put back in place (its label and files).
  returned: when state is swapped
  type: dict
launch:
  description: The live set's launch facts after the run, from its deployment record (served_model_name, max_model_len,
    max_num_seqs, thinking, vllm_port, vllm_host, public_port, engine_url, headless; the config compile's
    C(ds4_effective.launch) when that set was deployed); rollback.yml passes them to M(dgxspark.ds4.vllm_ready). Empty
    without O(record).
  returned: always
  type: dict
  sample: {"served_model_name": "deepseek-v4-flash", "max_model_len": 131072, "thinking": true, "vllm_port": 8000,
           "public_port": 8000, "engine_url": "http://127.0.0.1:8000"}
written:
  description: For O(state=swapped), the names of the files the swap writes into place (the kept set has them and the
    live ones differ); rollback.yml restarts the pair guard when its settings are among them.
  returned: when state is swapped
  type: list
  elements: str
  sample: ["launch-head.sh", "unit", "deployed-head.json", "pairguard.json"]
diff_lines:
  description: One line per file that changed (or would change).
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import config_set as cs


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', default='saved', choices=['saved', 'swapped']),
            store=dict(type='path', default='/etc/dgxspark-ds4/previous'),
            files=dict(type='list', elements='dict'),
            label=dict(type='str'),
            record=dict(type='path'),
        ),
        required_if=[('state', 'saved', ('files',))],
        supports_check_mode=True,
    )
    p = module.params
    try:
        if p['state'] == 'saved':
            files = [{'name': f.get('name'), 'path': f.get('path')} for f in p['files']]
            changed, diff = cs.plan_save(files, p['store'])
            old = cs.read_manifest(p['store'])
            if changed and (old or {}).get('label') != p['label']:
                diff.append('label: %s -> %s' % ((old or {}).get('label'), p['label']))
            result = dict(changed=changed, diff_lines=diff, manifest=old)
            if changed and not module.check_mode:
                result['manifest'] = cs.save(files, p['store'], p['label'])
        else:
            changed, diff, written = cs.plan_swap(p['store'])
            result = dict(changed=changed, diff_lines=diff, written=written, manifest=cs.read_manifest(p['store']))
            if changed and not module.check_mode:
                out = cs.swap(p['store'], p['label'])
                result['manifest'] = out['stored']
                result['restored'] = out['restored']
    except (cs.ConfigSetError, IOError, OSError, ValueError) as exc:
        module.fail_json(msg='config_set %s: %s' % (p['state'], exc))
    result['launch'] = cs.launch_from_record(cs.read_record(p['record'])) if p['record'] else {}
    if module._diff:
        result['diff'] = {'before': '', 'after': '\n'.join(result['diff_lines']) + ('\n' if result['diff_lines'] else '')}
    result['msg'] = '%s: %s' % (p['state'], '; '.join(result['diff_lines']) if result['diff_lines'] else 'nothing to change')
    module.exit_json(**result)


if __name__ == '__main__':
    main()
