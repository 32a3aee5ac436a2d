# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark.ds4.converge_plan: every deploy role's converge probe on this node in one task, before the first role.

Each deploy role probes itself at its start (dgxspark.ds4._converge: a probe and a decision per role and node, four
task results each on a no-op). This task computes, for every role in ``roles``, the same inputs digest and checks the
role's own probe computes (its ``__<role>_converge_inputs`` and ``__<role>_converge_checks``, templated with the role's
defaults and vars as the role would see them), and probes them all on the node in one call. The roles as their records
say on every node of the play, in the deploy's order up to the first that is not on some node, are skipped whole by
playbooks/tasks/deploy.yml (the facts a skipped role publishes are set here from its record, as
dgxspark.ds4.converge_decide sets them); that role and the ones after it probe and decide themselves, as before (a
role after one that runs may read what that one publishes or changes: its verdict here says nothing).

It can only err towards running the roles: a digest computed here that differs from the role's own (a variable seen
otherwise than in the role) never equals the record the role wrote, so the plan is "not current" and the roles run.
Nothing here is planned (the roles probe themselves) under ds4_converge_full, ds4_converge_roles, --tags or
--skip-tags (a tag can select tasks inside a role, e.g. --tags vllm_service_force_restart), or when the connection
does not pipeline or the node's Python is neither known nor discoverable here (the plan's calls run converge_state's
own code directly, as the roles' direct probes do; the deploy's first node task discovers the Python itself,
converge_state's _discover_interpreter, instead of a module run).

`ahead`: the roles the deploy plans again after readiness (the router and the API proxy) are planned in the same node
call(s) (one where the kept hint still holds, else two) when every role of `roles` is as recorded here, kept as a fact
(null otherwise); the later task (`planned`) takes that without node calls when every host of the pair kept one, since
nothing ran on the pair in between
(tasks/deploy_roles.yml voids it before anything runs on a host).
"""


import os

from ansible.errors import AnsibleActionFail
from ansible.utils.vars import load_extra_vars

from ansible_collections.dgxspark.ds4.plugins.action import converge_state as probe_action
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import converge_state as cs
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge.plan_spec import ARGUMENT_SPEC as _ARG_SPEC
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import template_cache

try:  # ansible-core 2.21: set_fact's own mechanism (see converge_decide)
    from ansible.plugins.action import VariableLayer
except ImportError:  # pragma: no cover - ansible-core 2.20: the facts are returned as ansible_facts
    VariableLayer = None
# Each role's defaults and vars as parsed in this process (_role_file; a task runs in a worker process of its own)
_ROLE_FILES = {}
# The collection root: plugins/action/<this file> -> ../..
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ActionModule(probe_action.ActionModule):

    TRANSFERS_FILES = False

    def _set(self, result, facts, host_facts=None):
        # host_facts: the interpreter discovered here (_discover_interpreter), kept as a module's run keeps it
        if VariableLayer is not None:
            self.register_host_variables(host_facts or {}, VariableLayer.CACHEABLE_FACT)  # no other legacy ansible_facts
            self.register_host_variables(facts, VariableLayer.EPHEMERAL_FACT)
        else:  # pragma: no cover
            result['ansible_facts'] = dict(host_facts or {}, **facts)

    @staticmethod
    def _planned(args, task_vars):
        """The plan kept ahead for these roles (args['planned']), or None: it holds only when every host of the pair
        kept one (none of them ran tasks/deploy_roles.yml since, which voids it)."""
        planned = args['planned']
        if not planned:
            return None
        hostvars = task_vars.get('hostvars') or {}
        kept = [hostvars[h].get(planned['fact']) if h in hostvars else None for h in planned['hosts']]
        mine = kept[planned['hosts'].index(task_vars.get('inventory_hostname'))] \
            if task_vars.get('inventory_hostname') in planned['hosts'] else None
        if not mine or not all(kept) or list(mine['plan']['order']) != list(args['roles']):
            return None
        return mine

    @staticmethod
    def _decided(fact, plan, published, task_vars):
        """The facts of a plan: the plan itself as `fact`, the published facts of the roles it skips (their records)
        and their entries in __converge_needed, as converge_decide sets them for a skipped role."""
        needed = dict(task_vars.get('__converge_needed') or {})
        needed.update((role, False) for role in plan['skippable'])
        facts = {fact: plan}
        facts.update(published)
        facts.update(cs.needed_facts(needed))
        return facts

    @staticmethod
    def _found(roles, found, records):
        """(the plan of `roles` from the node's answer, the published facts of those it skips, what differs): the roles
        as recorded here up to the first that is not, those the deploy may skip (a role after one that runs may read what
        that one publishes or changes, so its verdict here says nothing)."""
        prefix = []
        for role in roles:
            if not found[role].get('current'):
                break
            prefix.append(role)
        differ = dict((role, found[role].get('reasons') or [found[role].get('msg') or 'failed'])
                      for role in roles if not found[role].get('current'))
        published = {}
        for role in prefix:
            published.update(records[role])
        plan = {'current': len(prefix) == len(roles), 'order': list(roles), 'prefix': len(prefix), 'skippable': prefix,
                'digests': dict((r, found[r].get('digest')) for r in roles)}
        return plan, published, differ

    @staticmethod
    def _not_planned(result, why, args):
        # order: the roles, none skipped (prefix 0): playbooks/tasks/deploy.yml includes them all, each probing itself
        result.update(changed=False, current=False, msg='converge plan: not planned (%s); each role probes itself' % why)
        return {args['fact']: {'current': False, 'order': args['roles'], 'prefix': 0, 'skippable': [], 'why': why}}

    def _role_file(self, role_path, sub):
        """A role's defaults or vars, parsed once per process (the look templates api_proxy's three times, then its view)
        and not deep-copied (unsafe): the templars built on them only read them."""
        path = os.path.join(role_path, sub, 'main.yml')
        if path not in _ROLE_FILES:
            _ROLE_FILES[path] = (self._loader.load_from_file(path, cache='none', unsafe=True, trusted_as_template=True) or {}
                                 if os.path.isfile(path) else {})
        return _ROLE_FILES[path]

    def _role_templar(self, role_path, task_vars, extra_vars, published):
        """(a templar, its variables) as the role sees them: the role's defaults under the play's variables, its vars
        above them, the facts earlier roles published (as set_fact sets them) and the extra vars on top."""
        variables = dict(self._role_file(role_path, 'defaults'))
        variables.update(task_vars)
        variables.update(self._role_file(role_path, 'vars'))
        variables.update(published)
        variables.update(extra_vars)
        return self._templar.copy_with_new_env(available_variables=variables), variables

    def _look_var(self, look, name, task_vars, extra_vars, facts):
        """The role variable `name` templated as look['role'] sees it, with `facts` set as set_fact sets them."""
        templar, variables = self._role_templar(os.path.join(_ROOT, 'roles', look['role']), task_vars, extra_vars, facts)
        if name not in variables:
            raise AnsibleActionFail('dgxspark.ds4.converge_plan look: %s is not a variable of the role %s' % (
                name, look['role']))
        return templar.template(variables[name])

    def _look_paths(self, look, task_vars, extra_vars):
        """The paths of the look: look['paths_var'] templated as look['role'] sees it."""
        paths = self._look_var(look, look['paths_var'], task_vars, extra_vars, {})
        if not isinstance(paths, list) or not all(isinstance(path, str) for path in paths):
            raise AnsibleActionFail('dgxspark.ds4.converge_plan look: %s must be a list of paths, got %r' % (
                look['paths_var'], paths))
        return paths

    def _role_view(self, role, task_vars, extra_vars, published):
        """(inputs, checks) of `role` as its own probe templates them (_role_templar)."""
        role_path = os.path.join(_ROOT, 'roles', role)
        templar, variables = self._role_templar(role_path, task_vars, extra_vars, published)
        inputs = templar.template(variables['__%s_converge_inputs' % role])
        checks = templar.template(variables['__%s_converge_checks' % role])
        code_hash = probe_action.code_hash_for(role_path, os.path.join(_ROOT, 'roles', '_converge'))
        plain, secrets = cs.split_secrets(self._without_own_results(inputs, role_path, code_hash))
        digest, per_input = cs.inputs_digest(plain, code_hash)
        return dict(role=role, digest=digest, inputs=per_input, checks=checks, secret_inputs=secrets)

    def _views(self, roles, ahead, records, task_vars, extra_vars):
        """(the probes of `roles` then of the roles planned `ahead`, those of `ahead` templated, why the plan cannot be
        made or None): each role templated after the roles before it published their records; the roles ahead only
        where each has a record (they are left out when one of them cannot be templated: the later plan does it)."""
        published, probes = {}, []
        for role in roles:
            try:
                probes.append(self._role_view(role, task_vars, extra_vars, published))
            except Exception as exc:  # pylint: disable=broad-except  # any failure to template: the role decides itself
                return probes, [], '%s: its inputs could not be computed before the role (%s)' % (
                    role, str(exc).splitlines()[0][:300])
            published.update(records[role])
        ahead = ahead if all(records.get(role) is not None for role in ahead) else []
        planned = []
        for role in ahead:
            try:
                planned.append(self._role_view(role, task_vars, extra_vars, published))
            except Exception:  # pylint: disable=broad-except  # not planned ahead: the later plan templates it itself
                return probes, [], None
            published.update(records[role])
        return probes + planned, ahead, None

    def _node(self, interpreter, args, task_vars):
        return self._probe_directly(interpreter, args, entry='plan')

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(probe_action.ActionModule, self).run(tmp, task_vars)  # ActionBase.run: the task's own setup
        dummy, args = self.validate_argument_spec(argument_spec=_ARG_SPEC)
        extra_vars = load_extra_vars(self._loader)
        look = args['look']
        paths = self._look_paths(look, task_vars, extra_vars) if look else None
        # the node's Python not known yet (the deploy's first node task): discovered here as a first module run would
        # (one shell command), so that the plan and the look run directly; kept as that run's result keeps it
        host_facts = self._discover_interpreter(task_vars)
        if host_facts:
            task_vars = dict(task_vars, ansible_facts=dict(task_vars.get('ansible_facts') or {}, **host_facts))
        # the look goes with the plan's first node call where the plan makes one (None: it did not)
        kept = self._planned(args, task_vars)
        if kept:
            facts, looked = self._decided(args['fact'], kept['plan'], kept['published'], task_vars), None
            result.update(changed=False, current=kept['plan']['current'], differ=kept['differ'], _ansible_verbose_always=True,
                          msg='%s (planned before readiness; nothing ran on the pair since)' % kept['msg'])
        else:
            facts, looked = self._plan(result, args, task_vars, extra_vars, paths)
        if args['ahead']:
            facts.setdefault(args['ahead']['fact'], None)
        if paths is not None:
            files = looked or self._look_files(paths, task_vars)
            if files.get('failed'):
                result.update(files)  # as file_state would fail: its message, the module's stdout and stderr
                return result
            facts[look['fact']] = {'changed': False, 'files': files['files']}
            seen = {look['fact']: facts[look['fact']]}
            if look['refuse']:
                problem = self._look_var(look, look['refuse'], task_vars, extra_vars, seen)
                if problem:
                    result.update(failed=True, msg=str(problem))
                    return result
            for fact, name in sorted(look['decide'].items()):
                facts[fact] = self._look_var(look, name, task_vars, extra_vars, seen)
        self._set(result, facts, host_facts)
        return result

    def _plan(self, result, args, task_vars, extra_vars, paths):
        """(the facts to set, the look's answer or None): the plan's node calls, the look sent with the first."""
        if args['full'] or args['only']:
            return self._not_planned(result, 'ds4_converge_full' if args['full'] else 'ds4_converge_roles', args), None
        if sorted(args['tags']) != ['all'] or args['skip_tags']:
            return self._not_planned(result, '--tags or --skip-tags given', args), None
        interpreter = self._direct_interpreter(task_vars)
        if not interpreter:
            return self._not_planned(result, 'the node\'s Python is not known yet, or the connection does not pipeline',
                                     args), None
        state_dir = args['state_dir']
        ahead = args['ahead']['roles'] if args['ahead'] else []
        first = dict(state_dir=state_dir, phase='published', roles=args['roles'] + ahead)
        if paths is not None and all(path.startswith('/') for path in paths):
            first['files'] = paths
        # the records' published facts as this controller last found them on this node (by its name and address): the
        # probes templated with them go with the first call, which runs them when the records still publish exactly
        # those (one node call where nothing changed); otherwise the node answers the records and the probes are
        # templated with them (a second call). Only a hint: the node compares, so a stale one costs the second call.
        memo = template_cache.keyed_name('converge-plan-published', [
            task_vars.get('inventory_hostname'), str(task_vars.get('ansible_host')), state_dir, first['roles']])
        expected = template_cache.recalled_json(memo)
        expected_ahead = []
        if isinstance(expected, dict) and all(isinstance(expected.get(role), dict) for role in first['roles']):
            probes, expected_ahead, error = self._views(args['roles'], ahead, expected, task_vars, extra_vars)
            if not error:
                first.update(expect=expected, probe=probes)
        answer = self._node(interpreter, first, task_vars)
        if answer.get('failed'):
            return self._not_planned(result, answer.get('msg'), args), None
        files = {'files': answer['files']} if 'files' in first else None
        records = answer['published']
        if records != expected:
            template_cache.keep_json(memo, records)
        missing = [role for role in args['roles'] if records.get(role) is None]
        if missing:
            return self._not_planned(result, 'no converge record of %s on this node' % ', '.join(missing), args), files
        if 'roles' not in answer:
            probes, ahead, error = self._views(args['roles'], ahead, records, task_vars, extra_vars)
            if error:
                return self._not_planned(result, error, args), files
            answer = self._node(interpreter, dict(state_dir=state_dir, phase='probe', roles=probes), task_vars)
            if answer.get('failed'):
                return self._not_planned(result, answer.get('msg'), args), files
        else:
            ahead = expected_ahead
        found = answer['roles']
        plan, published, differ = self._found(args['roles'], found, records)
        facts = self._decided(args['fact'], plan, published, task_vars)
        msg = self._message(args['roles'], plan, differ)
        if ahead and plan['current']:
            later, later_published, later_differ = self._found(ahead, found, records)
            facts[args['ahead']['fact']] = dict(plan=later, published=later_published, differ=later_differ,
                                                msg=self._message(ahead, later, later_differ))
        result.update(changed=False, current=plan['current'], differ=differ, msg=msg, _ansible_verbose_always=True)
        return facts, files

    @staticmethod
    def _message(roles, plan, differ):
        if plan['current']:
            return 'converge plan: as recorded on this node: %s' % ', '.join(plan['skippable'])
        first = roles[plan['prefix']]
        return 'converge plan: %s%s differs (%s); from %s on, each role probes itself' % (
            'as recorded on this node: %s; then ' % ', '.join(plan['skippable']) if plan['skippable'] else '', first,
            '; '.join(differ[first])[:400], first)
