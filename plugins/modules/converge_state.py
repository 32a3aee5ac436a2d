#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: converge_state
short_description: Probe or record what a role manages on a node, for the converge shortcut
version_added: 0.2.0
description:
  - With O(state=probe) (read-only) observes the O(checks) on the node and compares them, and the inputs O(digest),
    with the record the role wrote after its last successful run. RV(current) is true only when all of it is equal;
    otherwise RV(reasons) names every difference (an input by name, a file with its recorded and current checksum
    and mode, a unit with its recorded and current enablement and activity, a command whose output differs).
  - With O(state=record) observes the same checks and writes the record (atomically, mode 0600), together with
    the facts the role publishes for later roles (O(published)), which a later probe returns when current.
  - Drift is repaired, never recorded. With O(state=record), when the inputs digest equals the one of the last
    record and a check the probe found different from that record (O(found)) is still exactly as found, the role ran
    and did not repair it. The module then fails naming the check, writes no record and keeps the last one aside, so every
    later run refuses again until the state is repaired (or the kept record is removed to accept it). Checks the
    role only observes (C(observed) in O(checks)) are exempt.
  - The action plugin of the same name computes O(digest) and O(inputs) on the controller from the role's input
    variables and the collection's code; call the module through it. With O(state=record) the action plugin takes
    the registered probe result (option C(probe)) and records its digest, so that facts the role set on its way
    are never taken for inputs.
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: O(state=probe) only reads. O(state=begin) and O(state=record) write nothing in check mode.
  diff_mode:
    support: full
    details: O(state=record) returns the record before and after.
options:
  role:
    description: Name of the role (the record is O(state_dir)/<role>.json).
    type: str
    required: true
  state:
    description:
      - V(probe) compares. V(begin) (first task of the role's run) moves the record aside, so that a run that fails
        half-way leaves no record and the next run runs the role again. V(record) (last task) writes the record.
      - The record is the collection's memory of the role's last run, not something the role manages, so neither
        V(begin) nor V(record) is reported as a change (a playbook that applies two configurations in turn would
        otherwise never be idempotent). In diff mode V(record) shows the record before and after.
    type: str
    choices: [probe, begin, record]
    default: probe
  digest:
    description: Digest of the role's inputs and the collection's code (computed by the action plugin).
    type: str
    required: true
  inputs:
    description: Per-input hashes (name -> hash) behind O(digest), so that a difference is named.
    type: dict
    default: {}
  checks:
    description:
      - What the role manages on this node. C(files) (paths; checksum, mode, owner, link target), C(units) (systemd
        unit names; UnitFileState and ActiveState), C(commands) (argv lists of read-only commands; exit code and
        output hash), C(trees) (directories; names, sizes and mtimes, no file is read).
      - C(observed) (optional) repeats the checks of the other kinds the role observes but does not render (sysfs
        files, a file shared with the user, a request marker another role writes); their drift is recorded, not
        refused.
    type: dict
    default: {}
  found:
    description:
      - (O(state=record)) What the probe at the start of the role observed (its RV(seen)); the action plugin passes it
        from the option C(probe).
    type: dict
    default: {}
  secret_inputs:
    description:
      - (O(state=probe)) The role's secret inputs (name -> canonical JSON text), given by the action plugin instead of
        their hashes; hashed here with HMAC-SHA256 under this node's random salt (O(state_dir)/.salt, 0600) and folded
        into O(digest) and O(inputs), so that no plain hash of a secret reaches any output.
    type: dict
    default: {}
  published:
    description: Facts the role sets for later roles; stored with O(state=record), returned by a current probe.
    type: dict
    default: {}
  state_dir:
    description: Directory of the records.
    type: path
    default: /var/lib/dgxspark-ds4/converge
'''

EXAMPLES = r'''
- name: Is this node already as the inputs say
  dgxspark.ds4.converge_state:
    role: firewall
    inputs:
      firewall_enabled: "{{ firewall_enabled }}"
    checks:
      files: [/etc/dgxspark-ds4/firewall.nft]
      units: [dgxspark-ds4-firewall.service]
      commands: [[nft, list, table, inet, dgxspark_ds4]]
  register: firewall_converge
'''

RETURN = r'''
current:
  description: True when the record exists and the digest and every check equal it.
  returned: always
  type: bool
reasons:
  description: Every difference between the record and now (empty when current).
  returned: always
  type: list
  elements: str
  sample: ["file /etc/sysctl.d/60-dgxspark-ds4.conf: recorded sha1:ab..:644:0:0, now sha1:cd..:644:0:0"]
differs:
  description:
    - (O(state=probe)) The differences by name, for a role that skips part of its work when that part's own inputs
      are as recorded.
    - C(recorded) whether a usable record exists, C(inputs) the input names whose hash changed (C((collection code))
      when the collection's code did), C(checks) the check names whose observation changed or that the record lacks.
  returned: when state is probe
  type: dict
  sample: {"recorded": true, "inputs": ["ds4_effective"], "checks": []}
published:
  description: The published facts of the record (empty unless current).
  returned: always
  type: dict
updated:
  description: (O(state=record)) The record differs from the one before this run of the role.
  returned: when state is record
  type: bool
digest:
  description: The inputs digest compared or recorded.
  returned: always
  type: str
inputs:
  description: The per-input hashes behind RV(digest).
  returned: always
  type: dict
record:
  description: Path of the record.
  returned: always
  type: str
seen:
  description: What was observed of each check (kind -> name -> observation).
  returned: always
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import converge_state as cs


def main():
    module = AnsibleModule(
        argument_spec=dict(
            role=dict(type='str', required=True),
            state=dict(type='str', default='probe', choices=['probe', 'begin', 'record']),
            digest=dict(type='str', required=True),
            inputs=dict(type='dict', default={}),
            checks=dict(type='dict', default={}),
            published=dict(type='dict', default={}),
            found=dict(type='dict', default={}),
            secret_inputs=dict(type='dict', default={}, no_log=True),
            state_dir=dict(type='path', default='/var/lib/dgxspark-ds4/converge'),
        ),
        supports_check_mode=True,
    )
    p = module.params

    def run(argv):
        return module.run_command(argv, environ_update={'LC_ALL': 'C', 'SYSTEMD_PAGER': ''})

    if p['state'] == 'probe':
        # cs.probe checks the checks itself (the action plugin's direct probe runs it without this module)
        result = cs.probe(p, run, module.check_mode)
    elif p['state'] == 'begin':
        result = cs.begin_state(p, run, module.check_mode)
    else:
        result = cs.record_state(p, run, module.check_mode)
        diff = result.pop('diff', None)
        if module._diff and diff:
            result['diff'] = diff
    if result.pop('failed', False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
