#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r'''
---
module: converge_decide
short_description: Decide whether a deploy role runs, from the converge probes of both nodes of its pair
version_added: 0.2.0
description:
  - Action plugin that runs on the controller only; it never contacts a host. The second of the two tasks of the
    internal role C(dgxspark.ds4._converge), after C(dgxspark.ds4.converge_state) O(role) probed every node.
  - The role runs when O(full) is true, when O(role) is in O(roles), or when any node of the pair is not as the
    record of the role's last run says (O(pair_current)).
  - Sets, as C(ansible.builtin.set_fact) does, C(__<role>_converge) (this node's probe), C(__converge_needed) (O(needed)
    with this role's entry) and, when the role is skipped, the facts it published in its record, for the roles that
    follow.
  - "Prints one line as C(ansible.builtin.debug) does, C(<role>: runs (<why>)) or C(<role>: as recorded on every node,
    skipped)."
  - Logic lives in C(plugins/module_utils/_converge/converge_state.py) (C(decide)).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  role:
    description: The calling role (its directory under roles/).
    type: str
    required: true
  probe:
    description: This node's registered result of C(dgxspark.ds4.converge_state) with C(state=probe) for O(role).
    type: dict
    required: true
  pair_current:
    description: The probes' C(current) of every node of this node's pair that is in the play.
    type: list
    elements: bool
    required: true
  full:
    description: C(ds4_converge_full), every role runs.
    type: bool
    default: false
  roles:
    description: C(ds4_converge_roles), these roles run.
    type: list
    elements: str
    default: []
  needed:
    description: C(__converge_needed) so far (role name to whether it runs in this deploy).
    type: dict
    default: {}
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Reads variables only; behaves the same in check mode.
  diff_mode:
    support: none
    details: Changes nothing, so there is no diff.
  platform:
    support: full
    platforms: all
    description: Runs on the controller.
notes:
  - The module file only documents the action plugin; executing it on a host fails.
  - With ansible-core 2.20 the facts are returned as C(ansible_facts) (host facts) instead of set_fact's
    non-persistent facts; the collection is tested with 2.21.
'''

EXAMPLES = r'''
- name: Whether the role runs
  dgxspark.ds4.converge_decide:
    role: firewall
    probe: "{{ _converge_probe }}"
    pair_current: "{{ ansible_play_hosts | map('extract', hostvars, '_converge_probe') | map(attribute='current') | list }}"
'''

RETURN = r'''
runs:
  description: Whether O(role) runs in this deploy.
  returned: success
  type: bool
msg:
  description: The line that says whether the role runs and why.
  returned: success
  type: str
  sample: "firewall: as recorded on every node, skipped"
'''

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(role=dict(type='str', required=True), probe=dict(type='dict', required=True),
                                              pair_current=dict(type='list', elements='bool', required=True),
                                              full=dict(type='bool', default=False),
                                              roles=dict(type='list', elements='str', default=[]),
                                              needed=dict(type='dict', default={})),
                           supports_check_mode=True)
    module.fail_json(msg='dgxspark.ds4.converge_decide is an action plugin that runs on the controller; '
                         'this module file must not execute on a host.')


if __name__ == '__main__':
    main()
