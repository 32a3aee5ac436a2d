# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deploy's converge plan (playbooks/tasks/deploy.yml, dgxspark.ds4.converge_plan) names exactly the roles it may
skip whole: the deploy includes those, and only those, unless named in `ds4_converge_skip`, in the plan's order, and
each is a role whose tasks/main.yml ends when its own converge decision finds it as recorded (`meta: end_role`), so
that skipping it whole leaves out nothing the role does when found as recorded. The behaviour itself is shown on the
converged pair (molecule/default/tests/test_zz_converge.py: a no-op takes the plan, drift and a changed input do not)."""


import os

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))


def _load(name):
    with open(os.path.join(REPO, 'playbooks', 'tasks', name)) as handle:
        return yaml.safe_load(handle)


def _flat(tasks):
    """The tasks with each block's in its place (the block's own vars are read from the block itself)."""
    out = []
    for task in tasks:
        out.extend(_flat(task['block']) if 'block' in task else [task])
    return out


def _deploy():
    """deploy.yml's tasks with deploy_roles.yml's in place of its include (the roles that change the nodes)."""
    tasks = []
    for task in _flat(_load('deploy.yml')):
        if task.get('ansible.builtin.include_tasks') == 'deploy_roles.yml':
            tasks.extend(_load('deploy_roles.yml'))
        else:
            tasks.append(task)
    return tasks


def _plan_roles(tasks):
    """The roles in front's plan (the first; the second, after readiness, is the router's and the API proxy's)."""
    plans = [t for t in tasks if 'dgxspark.ds4.converge_plan' in t]
    assert len(plans) == 2 and plans[0]['dgxspark.ds4.converge_plan'].get('fact', '__converge_plan') == '__converge_plan'
    return plans[0]['dgxspark.ds4.converge_plan']['roles'], tasks.index(plans[0])


def test_the_plan_names_exactly_the_roles_the_deploy_skips_on_it_in_order():
    tasks = _deploy()
    roles, at = _plan_roles(tasks)
    guarded = []
    for index, task in enumerate(tasks):
        include = task.get('ansible.builtin.include_role') or {}
        when = task.get('when')
        whens = when if isinstance(when, list) else [when] if when else []
        skip = [w for w in whens if 'ds4_converge_skip' in w and 'ds4_converge_skip_fronts' not in w]
        if skip:
            role = include['name'].rsplit('.', 1)[-1]
            assert index > at and 'tasks_from' not in include, task['name']
            assert skip == ["'%s' not in ds4_converge_skip" % role], task
            guarded.append(role)
    assert guarded == roles, (guarded, roles)
    # every other include of these roles is another entry point (tasks_from), which the plan does not stand for
    for task in tasks:
        include = task.get('ansible.builtin.include_role') or {}
        if include.get('name', '').rsplit('.', 1)[-1] in roles and 'ds4_converge_skip' not in str(task.get('when')):
            assert 'tasks_from' in include, task['name']


def test_each_planned_role_ends_when_found_as_recorded_and_has_its_converge_vars():
    roles, dummy = _plan_roles(_deploy())
    for role in roles:
        with open(os.path.join(REPO, 'roles', role, 'tasks', 'main.yml')) as handle:
            main = yaml.safe_load(handle)
        names = [list(k for k in t if k.startswith('ansible.builtin.'))[0] for t in main]
        # the probe and decision, then the end of the role when it is not needed, then its change: nothing else
        assert names[:2] == ['ansible.builtin.import_role', 'ansible.builtin.meta'], (role, names)
        assert main[1]['ansible.builtin.meta'] == 'end_role' and main[1]['when'] == "not __converge_needed['%s']" % role
        with open(os.path.join(REPO, 'roles', role, 'vars', 'main.yml')) as handle:
            role_vars = yaml.safe_load(handle)
        assert '__%s_converge_inputs' % role in role_vars and '__%s_converge_checks' % role in role_vars, role


def test_the_roles_file_is_skipped_only_when_the_plan_skips_every_role_and_the_fronts_have_nothing_to_do():
    """A no-op deploy skips deploy_roles.yml in one task: only when every planned role is skipped (a plan not made
    lists every role in its order with none skipped, so the file runs), the TLS look found nothing to write and the
    proxy has nothing to retire (the file's two includes that are not planned roles, and their conditions)."""
    include = [t for t in _load('deploy.yml') if t.get('ansible.builtin.include_tasks') == 'deploy_roles.yml']
    assert len(include) == 1
    when = ' '.join(include[0]['when'].split())
    assert when == ("ds4_converge_skip | length < __converge_plan['order'] | length"
                    " or not (__api_proxy_tls_current | bool)"
                    " or not (ds4_effective['api']['proxied'] | bool)"), when
    others = [t for t in _load('deploy_roles.yml')[1:] if 'ds4_converge_skip' not in str(t.get('when'))]
    assert [t['when'] for t in others] == ['not (__api_proxy_tls_current | bool)',
                                           "not (ds4_effective['api']['proxied'] | bool)"], others


def test_the_decision_is_the_pairs_and_never_run_once():
    """Per pair, as each role's own decision; never run_once: a rolling operation includes this file for one pair's
    hosts, and a run_once task whose first host is not among them is skipped for every host."""
    tasks = _load('deploy.yml')
    dummy, at = _plan_roles(tasks)
    decision = tasks[at + 1]                  # a variable of the roles' include, templated where it is read
    assert decision.get('ansible.builtin.include_tasks') == 'deploy_roles.yml' and 'run_once' not in decision
    expression = decision['vars']['ds4_converge_skip']
    assert "ds4_effective['pair']['hosts']" in expression and "map(attribute='prefix') | min" in expression, expression
    # defined there only: no set_fact of it anywhere in the deploy (a task round, a worker per host)
    assert not [t for t in _flat(tasks) + _load('deploy_roles.yml') if 'ds4_converge_skip' in (t.get('ansible.builtin.set_fact') or {})]


def test_the_plan_looks_at_the_fronts_material_and_decides_as_tls_look_does():
    """The deploy's look at the fronts' TLS material is the converge plan's (its first node call), and so are its one CA
    per site and its decision: the same role variables and the same facts as roles/api_proxy/tasks/tls_look.yml's
    file_state task and tls_decide.yml's assert and set_fact (switch.yml and maintenance.yml look and decide with those),
    before the roles that change the nodes."""
    tasks = _load('deploy.yml')
    dummy, at = _plan_roles(tasks)
    look = tasks[at]['dgxspark.ds4.converge_plan']['look']
    own = _role_tasks('api_proxy', 'tls_look.yml')
    assert own[0]['dgxspark.ds4.file_state'] == {'paths': '{{ %s }}' % look['paths_var']}
    assert (look['role'], own[0]['register']) == ('api_proxy', look['fact'])
    assert own[1]['ansible.builtin.import_tasks'] == 'tls_decide.yml'
    decide = _role_tasks('api_proxy', 'tls_decide.yml')
    assert decide[0]['ansible.builtin.assert'] == {'that': '%s | length == 0' % look['refuse'],
                                                   'fail_msg': '{{ %s }}' % look['refuse'], 'quiet': True}
    assert decide[1]['ansible.builtin.set_fact'] == dict((fact, '{{ %s }}' % var) for fact, var in look['decide'].items())
    assert len(decide) == 2
    roles = [i for i, t in enumerate(tasks) if t.get('ansible.builtin.include_tasks') == 'deploy_roles.yml']
    assert at < roles[0]
    assert not [t for t in tasks if (t.get('ansible.builtin.include_role') or {}).get('tasks_from', '').startswith('tls_')]


def _role_tasks(role, name):
    with open(os.path.join(REPO, 'roles', role, 'tasks', name)) as handle:
        return yaml.safe_load(handle)


def test_the_second_plan_covers_the_router_and_the_api_proxy_after_readiness():
    """After readiness, one more plan for the router (on a router host, outside a rolling operation) and the API proxy:
    its own fact; the router's include and verify read where the router belongs from the plan's order (one definition
    of that condition); the router is skipped per host, the proxy per pair; a skipped router's endpoint comes from its
    record (its record publishes router_endpoint, computed before the record is written)."""
    tasks = _load('deploy.yml')
    plans = [i for i, t in enumerate(tasks) if 'dgxspark.ds4.converge_plan' in t]
    assert len(plans) == 2
    second = tasks[plans[1]]
    ready = [i for i, t in enumerate(tasks) if t.get('ansible.builtin.import_tasks') == 'ready.yml']
    assert ready[0] < plans[1]
    args = second['dgxspark.ds4.converge_plan']
    assert args['fact'] == '__converge_plan_fronts' and 'look' not in args
    roles = ' '.join(args['roles'].split())
    assert roles.startswith("{{ (['router'] if ds4_effective['router']['enabled'] | bool and inventory_hostname in "
                            "ds4_effective['router']['hosts'] and not (ds4_rolling | default(false) | bool) else [])"), roles
    assert roles.endswith("+ ['api_proxy'] }}"), roles
    first = tasks[plans[0]]['dgxspark.ds4.converge_plan']
    assert dict((k, v) for k, v in args.items() if k not in ('roles', 'fact', 'planned')) == dict(
        (k, v) for k, v in first.items() if k not in ('roles', 'look', 'ahead'))
    # the first plan plans the same roles ahead, templated with the same variables (the anchors), under the fact the
    # second takes them from for the pair's hosts in the play; the roles' file voids it on a host before its first role
    assert first['ahead'] == {'roles': args['roles'], 'fact': '__converge_plan_fronts_ahead'}
    assert tasks[plans[0]]['vars'] == second['vars']
    assert args['planned'] == {'fact': '__converge_plan_fronts_ahead',
                               'hosts': "{{ ds4_effective['pair']['hosts'] | select('in', ansible_play_hosts) | list }}"}
    void = _load('deploy_roles.yml')[0]
    assert void['ansible.builtin.set_fact'] == {'__converge_plan_fronts_ahead': None} and 'when' not in void, void
    # after it, one include (skipped whole when none of its tasks has anything to do on the host: one task round in a
    # no-op) with the fronts' skips as its variable (templated where its tasks read it, no set_fact) and the router's
    # inputs as the plan's, then the router's verify
    after = tasks[plans[1] + 1]
    assert after['ansible.builtin.include_tasks'] == 'deploy_after.yml'
    included = _load('deploy_after.yml')
    assert [t['name'] for t in included] == [
        'Deploy | Remove the model revisions not served (model_cache_prune_previous)',
        'Deploy | vllm-router in front of the pairs (several pairs; on each router host)',
        'Deploy | Expose the API to the allowed networks (reverse proxy on the head; allowlisted endpoints, API keys)',
        'Deploy | Metrics and alerts (monitoring_enabled)']
    assert dict((k, v) for k, v in after['vars'].items() if k != 'ds4_converge_skip_fronts') == second['vars']
    skip = ' '.join(after['vars']['ds4_converge_skip_fronts'].split())
    assert "__converge_plan_fronts['skippable'] | select('eq', 'router')" in skip, skip
    assert ("ds4_effective['pair']['hosts'] | select('in', ansible_play_hosts) | map('extract', hostvars, "
            "['__converge_plan_fronts', 'skippable']) | reject('contains', 'api_proxy')") in skip, skip
    by_name = dict((t['name'], t) for t in included)
    router = by_name['Deploy | vllm-router in front of the pairs (several pairs; on each router host)']
    assert router['when'] == ["'router' in __converge_plan_fronts['order']", "'router' not in ds4_converge_skip_fronts"]
    proxy = by_name['Deploy | Expose the API to the allowed networks (reverse proxy on the head; allowlisted endpoints, API keys)']
    assert proxy['when'] == "'api_proxy' not in ds4_converge_skip_fronts"
    # the include's own condition: any of its tasks' (each task's `when` is one of its parts)
    when = ' '.join(after['when'].split())
    for task in included:
        for part in (task['when'] if isinstance(task['when'], list) else [task['when']]):
            assert part in when, (part, when)
    verify = tasks[plans[1] + 2]
    assert verify['name'] == 'Deploy | The router serves with every pair in rotation'
    assert verify['when'] == "'router' in __converge_plan_fronts['order']" and verify['vars'] == second['vars']
    with open(os.path.join(REPO, 'roles', 'router', 'vars', 'main.yml')) as handle:
        assert yaml.safe_load(handle)['__router_converge_published'] == '^router_endpoint$'
    main = _role_tasks('router', 'main.yml')
    names = [t['name'] for t in main]
    assert names == ['Converge state | Probe and decide (dgxspark.ds4._converge)',
                     'Publish where the router listens (api_proxy, monitoring)', 'Preflight, install, units, VRRP, record']
    assert main[1]['ansible.builtin.import_tasks'] == 'endpoint.yml' and main[2]['when'] == "__converge_needed['router']"
    for role in ('router', 'api_proxy'):
        with open(os.path.join(REPO, 'roles', role, 'vars', 'main.yml')) as handle:
            role_vars = yaml.safe_load(handle)
        assert '__%s_converge_inputs' % role in role_vars and '__%s_converge_checks' % role in role_vars, role


def test_site_yml_includes_the_deploy_sequence_so_that_its_tags_stay_off_the_roles_tasks():
    """site.yml includes tasks/deploy.yml (dynamic): an import would hand its `always` tag down to the roles' tasks (a
    task tagged `never` then ran on every deploy: vllm_service's forced restart once did, seen on `replicas`: "forced
    on spark1; forced on spark2")."""
    with open(os.path.join(REPO, 'playbooks', 'site.yml')) as handle:
        plays = yaml.safe_load(handle)
    deploy = [t for play in plays for t in play.get('tasks', []) if 'tasks/deploy.yml' in (
        t.get('ansible.builtin.include_tasks'), t.get('ansible.builtin.import_tasks'))]
    assert [t.get('ansible.builtin.include_tasks') for t in deploy] == ['tasks/deploy.yml'], deploy
    # deploy.yml imports ready.yml (the gate's tasks take `always`): none of them may carry `never`
    with open(os.path.join(REPO, 'playbooks', 'tasks', 'ready.yml')) as handle:
        assert not [t for t in yaml.safe_load(handle) if 'never' in (t.get('tags') or [])]


def test_the_forced_restart_is_derived_in_one_place():
    """vllm_service's forced restart (the variable, or --tags vllm_service_force_restart) is one derived value of the
    role's vars, _vllm_service_force_restart: the converge input and the restart contract's plan both read it, and no
    task sets the variable (a tagged set_fact once said it a second time, and the converge shortcut ended the role
    before it ran)."""
    with open(os.path.join(REPO, 'roles', 'vllm_service', 'vars', 'main.yml')) as handle:
        role_vars = yaml.safe_load(handle)
    derived = role_vars['_vllm_service_force_restart']
    assert 'vllm_service_force_restart | bool' in derived and "'vllm_service_force_restart' in ansible_run_tags" in derived
    assert "'vllm_service_force_restart': _vllm_service_force_restart" in role_vars['__vllm_service_converge_inputs']
    tags_read = [name for name, value in role_vars.items()
                 if name != '_vllm_service_force_restart' and 'ansible_run_tags' in str(value)]
    assert tags_read == [], tags_read
    plan = [t for t in _role_tasks('vllm_service', 'restart.yml') if t.get('name') == "Restart | This rank's part of the plan"]
    assert plan[0]['ansible.builtin.set_fact']['_vllm_service_self']['force'] == '{{ _vllm_service_force_restart | bool }}'
    tasks_dir = os.path.join(REPO, 'roles', 'vllm_service', 'tasks')
    for name in sorted(os.listdir(tasks_dir)):
        for task in _role_tasks('vllm_service', name) or []:
            assert 'vllm_service_force_restart' not in (task.get('ansible.builtin.set_fact') or {}), (name, task)
            assert 'never' not in (task.get('tags') or []), (name, task)
