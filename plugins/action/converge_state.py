# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of dgxspark.ds4.converge_state: the inputs digest, then the node-side module.

The digest covers the role's input values (given as ``inputs``, already templated by Ansible) and
the bytes of the role's own directory and of the collection's ``plugins/`` (a new collection
version or an edited template changes it). Only hashes leave the controller, but for the inputs whose name says
secret (KEY, TOKEN, SECRET, PASS): their values go to the module as a no_log argument and are hashed on the node
under its own salt (a plain hash would show in -v output). ``state=record`` reuses the digest of the probe at the
start of the role (``probe``), so facts the role sets on its way are never mistaken for inputs, and passes what that
probe observed (``found``): the module refuses to
record a drifted check the role left as it found it.

The task runs in the internal role ``dgxspark.ds4._converge``, included by the role it probes (``role``):
the digest covers that calling role's directory (found among the roles that include the task; a task
whose chain holds no role of that name is refused) and ``_converge``'s own.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.dgxspark.ds4.plugins.module_utils import converge_state as cs

_ARG_SPEC = dict(
    role=dict(type='str', required=True),
    state=dict(type='str', default='probe', choices=['probe', 'begin', 'record']),
    inputs=dict(type='dict', default={}),
    checks=dict(type='dict', default={}),
    published=dict(type='dict', default={}),
    probe=dict(type='dict'),
    state_dir=dict(type='path', default='/var/lib/dgxspark-ds4/converge'),
)
# One code hash per role directory per controller process (files do not change during a run).
_CODE_HASHES = {}


def code_hash_for(role_path, task_role_path=None):
    """Hash of the role's directory, the directory of the role running the task (``_converge``) when it is another
    one, and the collection's plugins/ next to them."""
    role_path = os.path.realpath(role_path)
    paths = [role_path]
    if task_role_path and os.path.realpath(task_role_path) != role_path:
        paths.append(os.path.realpath(task_role_path))
    key = tuple(paths)
    if key not in _CODE_HASHES:
        collection_root = os.path.dirname(os.path.dirname(role_path))
        _CODE_HASHES[key] = cs.content_hash(paths + [os.path.join(collection_root, 'plugins')])
    return _CODE_HASHES[key]


def calling_role_path(task_role, name):
    """The directory of the role called `name`: the task's own role or one that includes it (its parents, nearest
    first), or None."""
    chain = [task_role] + list(reversed(task_role.get_dep_chain())) if task_role is not None else []
    for role in chain:
        path = getattr(role, '_role_path', None)
        if path and os.path.basename(os.path.normpath(path)) == name:
            return path
    return None


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        dummy, args = self.validate_argument_spec(argument_spec=_ARG_SPEC)
        role = getattr(self._task, '_role', None)
        role_path = calling_role_path(role, args['role'])
        if not role_path:
            raise AnsibleActionFail('dgxspark.ds4.converge_state role=%s runs inside that role or in dgxspark.ds4._converge '
                                    'included by it (it hashes the role\'s own files); task %r is in %s' % (
                                        args['role'], self._task.get_name(),
                                        getattr(role, '_role_name', None) or 'no role'))
        secrets = {}
        if args['state'] in ('begin', 'record'):
            # The record keeps the digest of the inputs as the probe at the start of the role saw them:
            # facts the role sets on its way (some under its own prefix) are not inputs.
            probe = args['probe'] or {}
            if not probe.get('digest') or args['inputs']:
                raise AnsibleActionFail('dgxspark.ds4.converge_state state=begin/record takes probe (the registered result of '
                                        'the state=probe task at the start of the role), not inputs')
            digest, per_input = probe['digest'], probe.get('inputs') or {}
            found = probe.get('seen') or {}
        else:
            found = {}
            # secret inputs leave the controller as values (no_log) and are hashed on the node under its own salt
            plain, secrets = cs.split_secrets(self._without_own_results(args['role'], args['inputs'], task_vars))
            digest, per_input = cs.inputs_digest(plain, code_hash_for(role_path, getattr(role, '_role_path', None)))
        module_args = dict(role=args['role'], state=args['state'], digest=digest, inputs=per_input,
                           checks=args['checks'], published=args['published'], state_dir=args['state_dir'])
        if args['state'] == 'probe' and secrets:
            module_args['secret_inputs'] = secrets
        if args['state'] == 'record':
            # What the probe found before the role ran: a drifted check still exactly so was not repaired.
            module_args['found'] = found
        result.update(self._execute_module(module_name='dgxspark.ds4.converge_state', module_args=module_args,
                                           task_vars=task_vars))
        return result

    def _without_own_results(self, role, inputs, task_vars):
        """Inputs minus the role's own results of this run (its registered values and set_fact facts share its
        prefix): a role included twice in one playbook must not take what its first run set for a new input."""
        manager = self._task.get_variable_manager()
        cache = getattr(manager, '_nonpersistent_fact_cache', None) or {}
        set_this_run = cache.get(task_vars.get('inventory_hostname'), {})
        prefix = role + '_'
        return dict((name, value) for name, value in inputs.items()
                    if not (name.startswith(prefix) and name in set_this_run))
