# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark.ds4.converge_plan's argument spec, once: its action plugin validates the task's arguments with it and its
module file (which only documents the action) declares it."""

from __future__ import annotations

ARGUMENT_SPEC = dict(
    roles=dict(type='list', elements='str', required=True),
    full=dict(type='bool', default=False),
    only=dict(type='list', elements='str', default=[]),
    tags=dict(type='list', elements='str', default=['all']),
    skip_tags=dict(type='list', elements='str', default=[]),
    state_dir=dict(type='path', default='/var/lib/dgxspark-ds4/converge'),
    # the fact the plan is set as (the deploy plans twice: the roles in front, then the router and the API proxy)
    fact=dict(type='str', default='__converge_plan'),
    # One look at files on this node in the same node call (dgxspark.ds4.file_state's result, set as the fact `fact`):
    # the paths are the value of the variable `paths_var` as the role `role` sees it (its defaults and vars), so the
    # deploy needs no task of its own for it (the fronts' TLS material: roles/api_proxy/tasks/tls_look.yml)
    # Then, with that fact, `refuse` (a variable of the role: a non-empty value fails the task with it as the message)
    # and `decide` ({fact: variable of the role}: each set as a fact) as the role templates them: the deploy's one CA
    # per site and whether the fronts' material differs (roles/api_proxy/tasks/tls_decide.yml's assert and set_fact)
    look=dict(type='dict', options=dict(role=dict(type='str', required=True), paths_var=dict(type='str', required=True),
                                        fact=dict(type='str', required=True), refuse=dict(type='str'),
                                        decide=dict(type='dict', default={}))),
    # The roles the deploy plans again after readiness (the router's and the API proxy's plan), planned ahead in the
    # same node calls when every role of `roles` is as recorded on this node: what that plan would set, kept as the fact
    # `fact` (null when not planned ahead: always set, so that none outlives its deploy). tasks/deploy_roles.yml,
    # which runs when anything before them has to, voids it first.
    ahead=dict(type='dict', options=dict(roles=dict(type='list', elements='str', required=True),
                                         fact=dict(type='str', required=True))),
    # That later plan: takes what `ahead` kept (the fact `fact`) without a node call when every host of `hosts` (the
    # pair's, in the play) kept one for these roles: nothing ran on the pair's nodes in between
    planned=dict(type='dict', options=dict(fact=dict(type='str', required=True),
                                           hosts=dict(type='list', elements='str', required=True))),
)
