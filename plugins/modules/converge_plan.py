#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r'''
---
module: converge_plan
short_description: Probe every deploy role's converge state on a node in one task, before the first role
version_added: 0.2.0
description:
  - Action plugin. For each role in O(roles), computes on the controller the inputs digest and the checks the role's own
    converge probe (C(dgxspark.ds4.converge_state), in the internal role C(dgxspark.ds4._converge)) computes at the
    role's start, from the role's C(__<role>_converge_inputs) and C(__<role>_converge_checks) templated with its defaults
    and vars as the role sees them; then probes all of them on the node in one call (read-only), after reading the facts
    each role's record published (the later roles' inputs).
  - Sets, as C(ansible.builtin.set_fact) does, the fact O(fact) (C(current) true when every role is as its record
    says on this node) and, when current, every role's published facts and C(__converge_needed) with each role false,
    as C(dgxspark.ds4.converge_decide) sets them for a skipped role. The deploy sequence skips the roles whole only when
    every node of the play is current; otherwise each role probes and decides itself.
  - It can only err towards running the roles. A digest computed here that differs from the role's own never equals
    the record the role wrote, so the plan is not current and the roles run.
  - Nothing is planned (the result says why, and each role probes itself) with O(full), O(only), O(tags) other than
    V(all) or any O(skip_tags), without a converge record of every role on the node, when a role's inputs cannot be
    computed before the role, or when the connection does not pipeline or the node's Python is neither named nor
    discoverable here (where it is not known yet and C(interpreter_python) is C(auto) or C(auto_silent), the task
    discovers it with ansible-core's own discovery, one shell command, as a first module run would, and keeps it as a
    fact as that run does).
  - Logic on the node is C(plugins/module_utils/_converge/converge_state.py) (C(plan), C(probe)).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  roles:
    description: The deploy roles, in the order the deploy runs them (a role's published facts are inputs of those after it).
    type: list
    elements: str
    required: true
  full:
    description: C(ds4_converge_full); nothing is planned.
    type: bool
    default: false
  only:
    description: C(ds4_converge_roles); nothing is planned when it names any role.
    type: list
    elements: str
    default: []
  tags:
    description: The run's C(ansible_run_tags); nothing is planned unless it is V([all]).
    type: list
    elements: str
    default: [all]
  skip_tags:
    description: The run's C(ansible_skip_tags); nothing is planned when it is not empty.
    type: list
    elements: str
    default: []
  state_dir:
    description: Where the roles' converge records are on the node.
    type: path
    default: /var/lib/dgxspark-ds4/converge
  fact:
    description: The name of the fact the plan is set as (the deploy plans twice, each under its own name).
    type: str
    default: __converge_plan
  look:
    description:
      - One look at files on the node, taken whether the plan is made or not, in the plan's first node call where it
        makes one (a deploy needs no task of its own for it).
      - Sets the fact named O(look.fact) to what C(dgxspark.ds4.file_state) returns for those paths.
    type: dict
    suboptions:
      role:
        description: The role whose defaults and vars O(look.paths_var) is templated with.
        type: str
        required: true
      paths_var:
        description: The variable holding the list of paths (absolute; a path with C(~) goes through the module).
        type: str
        required: true
      fact:
        description: The name of the fact that receives the result.
        type: str
        required: true
      refuse:
        description:
          - A variable of O(look.role), templated with the look's fact set; a non-empty value fails the task with it as
            the message (before any host changes).
        type: str
      decide:
        description: Facts to set, each the value of a variable of O(look.role) templated with the look's fact set.
        type: dict
        default: {}
  ahead:
    description:
      - The roles the deploy plans again later (after readiness), planned ahead in the same node calls when every role
        of O(roles) is as recorded on this node.
      - Sets the fact O(ahead.fact) to what that later plan would set (its plan, the published facts of the roles it
        skips, what differs), or to null when not planned ahead (always set, so that none outlives its deploy).
    type: dict
    suboptions:
      roles:
        description: Those roles, in order.
        type: list
        elements: str
        required: true
      fact:
        description: The name of the fact that keeps the plan made ahead.
        type: str
        required: true
  planned:
    description:
      - Takes the plan an earlier task made ahead (O(ahead)) without a node call, when every host of O(planned.hosts)
        kept one for the same O(roles) (nothing ran on their nodes in between; the deploy voids it on a host before
        anything runs there); otherwise plans as usual.
    type: dict
    suboptions:
      fact:
        description: The fact the earlier task set (its O(ahead.fact)).
        type: str
        required: true
      hosts:
        description: The hosts whose plans made ahead must all be there (the pair's, in the play).
        type: list
        elements: str
        required: true
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Reads only; behaves the same in check mode.
  diff_mode:
    support: none
    details: Changes nothing, so there is no diff.
  platform:
    support: full
    platforms: posix
    description: Probes the node through its connection (the roles' converge records live there).
notes:
  - The module file only documents the action plugin; executing it on a host fails.
'''

EXAMPLES = r'''
- name: Every deploy role as recorded on this node?
  dgxspark.ds4.converge_plan:
    roles: [host_hardening, firewall, vllm_service]
    tags: "{{ ansible_run_tags }}"
    skip_tags: "{{ ansible_skip_tags }}"
    look:
      role: api_proxy
      paths_var: _api_proxy_tls_paths
      fact: _api_proxy_tls_found
      refuse: _api_proxy_tls_site_ca_problem
      decide: {__api_proxy_tls_current: _api_proxy_tls_current}
'''

RETURN = r'''
current:
  description: Whether every role in O(roles) is as its record says on this node.
  returned: success
  type: bool
differ:
  description: The roles that are not, each with the differences its probe named.
  returned: success
  type: dict
  sample: {"vllm_service": ["inputs changed: vllm_service_extra_args"]}
msg:
  description: The line that says which roles are as recorded, or which differ and why, or why nothing was planned.
  returned: success
  type: str
  sample: "converge plan: as recorded on this node: host_hardening, firewall, vllm_service"
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge.plan_spec import ARGUMENT_SPEC


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(msg='dgxspark.ds4.converge_plan is an action plugin; this module file must not execute on a host.')


if __name__ == '__main__':
    main()
