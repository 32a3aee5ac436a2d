#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: unit_dropins
short_description: The systemd drop-ins and unit file that would replace what the collection renders for a unit (read-only)
version_added: 0.1.0
description:
  - Reads C(systemctl show -p DropInPaths,FragmentPath,ExecStart,NeedDaemonReload) of O(unit) and the C(*.conf) files of
    its C(.d) directories on disk (its own and its dash-prefix ones, such as C(dgxspark-ds4-.service.d); a drop-in not
    yet daemon-reloaded counts), and returns one problem, with its path and the fix, for each drop-in not listed in
    O(allowed), for an entry of O(allowed) that is not a drop-in of this unit, and for a unit loaded from another file
    than O(unit_file) (a copy earlier on the unit search path shadowing it). The ExecStart systemd has loaded is named.
  - The check of the node script C(verify_unit.py --dropins) (the node package's C(verify_unit.py), the same code), as
    the role C(dgxspark.ds4.vllm_service) runs it in its preflight, before anything is written or restarted and before
    the node package is on the host. The module never fails on a problem; the caller decides (the role refuses).
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Reads only.
  diff_mode:
    support: none
options:
  unit:
    description: The unit's name, e.g. V(dgxspark-ds4-head.service).
    type: str
    required: true
  unit_file:
    description: The unit file the collection writes for O(unit), e.g. C(/etc/systemd/system/dgxspark-ds4-head.service).
    type: path
    required: true
  allowed:
    description:
      - Drop-ins of O(unit) kept on purpose (the ones the collection writes itself and C(vllm_service_allowed_dropins)),
        as absolute paths of C(*.conf) files in one of the unit's C(.d) directories.
    type: list
    elements: str
    default: []
'''

EXAMPLES = r'''
- name: No drop-in the collection did not write
  dgxspark.ds4.unit_dropins:
    unit: dgxspark-ds4-head.service
    unit_file: /etc/systemd/system/dgxspark-ds4-head.service
    allowed: [/etc/systemd/system/dgxspark-ds4-head.service.d/override.conf]
  register: dropins

- name: Refuse a foreign drop-in
  ansible.builtin.assert:
    that: dropins.problems | length == 0
    fail_msg: "{{ dropins.msg }}"
'''

RETURN = r'''
problems:
  description: One sentence per problem (the path and the fix); empty when nothing would replace the rendered unit.
  returned: always
  type: list
  elements: str
  sample: ["drop-in /etc/systemd/system/dgxspark-ds4-head.service.d/override.conf was not written by dgxspark.ds4: ..."]
msg:
  description:
    - The report, as C(verify_unit.py --dropins) prints it - each problem a line of its own prefixed
      C(dgxspark-ds4 verify-unit <unit>:), else one line saying no foreign drop-in was found and which were allowed.
  returned: always
  type: str
  sample: 'dgxspark-ds4 verify-unit dgxspark-ds4-head.service: no foreign drop-in (none allowed)'
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.ds4.plugins.module_utils._node.verify_unit import check_unit_dropins


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type='str', required=True),
            unit_file=dict(type='path', required=True),
            allowed=dict(type='list', elements='str', default=[]),
        ),
        supports_check_mode=True,
    )
    problems, lines = check_unit_dropins(module.params['unit'], module.params['unit_file'], module.params['allowed'],
                                         runner=module.run_command)
    module.exit_json(changed=False, problems=problems, msg='\n'.join(lines))


if __name__ == '__main__':
    main()
