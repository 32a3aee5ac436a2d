# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side action: validate inventory + profile, set the ds4_effective fact.

Never contacts a host: it only reads task_vars (groups, hostvars) on the controller. Besides the
configuration itself it refuses unknown variables with the collection's prefixes (ds4_*,
<role>_*; plugins/plugin_utils/known_vars.py) and publishes the service layout of each node
(paths, unit and container names; plugins/plugin_utils/service_layout.py) in ds4_effective.
"""


import os

import yaml

from ansible.plugins.action import ActionBase
from ansible.utils.vars import load_extra_vars

try:  # ansible-core 2.21: set_fact's own mechanism (as converge_decide and converge_plan publish their facts)
    from ansible.plugins.action import VariableLayer
except ImportError:  # pragma: no cover - ansible-core 2.20: the fact is injected as a variable
    VariableLayer = None

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.ds4_config import (
    Ds4ConfigError,
    compute_effective,
)
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.known_vars import (
    find_unknown,
    format_unknown,
    prefixes,
    scan_collection,
)
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.placeholders import placeholder_errors
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import known_vars, template_cache
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import converge_state as cs
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import role_inputs, var_origin
from ansible_collections.dgxspark.ds4.plugins.module_utils._security import tls_plan
from ansible_collections.dgxspark.ds4.plugins.module_utils._security.api_exposure import check_api_keys
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import catalogue
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.pairs import (
    pair_groups,
    pair_of,
    router_plan,
    validate_pairs,
)
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.service_layout import (
    ARGV_VARS,
    LAYOUT_VARS,
    publish as publish_service,
)

try:  # libyaml: scanning the collection's YAML takes ~0.05 s instead of ~0.5 s
    from yaml import CSafeLoader as _YamlLoader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _YamlLoader

# The collection root: plugins/action/<this file> -> ../..
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_KNOWN_CACHE = {}

ARGUMENT_SPEC = dict(
    base=dict(type='dict', required=True),
    group=dict(type='str', default='spark'),
    # render.yml (a preview that contacts no host) renders the shipped inventories as they are
    allow_placeholders=dict(type='bool', default=False),
    # site.yml / switch.yml: the model revision must be pinned (model_cache downloads it), refused here before any host
    require_model_revision=dict(type='bool', default=False),
)

HOST_KEYS = (
    'ds4_node_rank', 'ds4_fabric_ip', 'ds4_fabric_prefix', 'ds4_fabric_ifname', 'ds4_rdma_hcas',
    'ds4_nccl_ib_gid_index', 'ds4_node_memory_gib', 'ds4_ack_unsafe_gpu_memory_utilization',
    'ds4_profile', 'ds4_profile_config', 'ds4_site_overrides', 'ds4_api_allowed_networks', 'ds4_api_upstream_port',
    'ds4_model', 'ds4_model_revisions', 'ds4_router_address', 'ds4_interactive_long_prompts',
)
# Read from the first host of group spark: one router set per inventory (group_vars/spark;
# roles/config/meta/argument_specs.yml). ds4_router_address is read per router host (HOST_KEYS).
ROUTER_KEYS = ('ds4_router_enabled', 'ds4_router_host', 'ds4_router_hosts', 'ds4_router_vip', 'ds4_router_port')


def known_names(root=COLLECTION_ROOT):
    """(known variable names, collection prefixes), scanned once per controller process and kept for later runs in the
    template cache's directory (template_cache.kept_json) under the content hash of what the scan reads
    (_scanned_dirs): the scan parsed every YAML file of the collection, ~0.15-0.3 CPU-s on the config play's first task
    of every run; the hash reads their bytes only."""
    if root not in _KNOWN_CACHE:
        def scan():
            known, roles = scan_collection(root, lambda text: yaml.load(text, Loader=_YamlLoader))  # nosec: a safe loader
            return {'known': sorted(known), 'prefixes': list(prefixes(roles))}
        kept = template_cache.kept_json('known-vars-%s.json' % cs.content_hash(_scanned_dirs(root)), scan)
        _KNOWN_CACHE[root] = (frozenset(kept['known']), tuple(kept['prefixes']))
    return _KNOWN_CACHE[root]


def _scanned_dirs(root):
    """The directories whose files scan_collection reads (each role's meta, defaults, vars, tasks and handlers, the
    playbooks) and the scanner's own: what the kept scan is keyed by."""
    roles_dir = os.path.join(root, 'roles')
    roles = sorted(os.listdir(roles_dir)) if os.path.isdir(roles_dir) else []
    return ([os.path.join(roles_dir, role, sub) for role in roles for sub in ('meta', 'defaults', 'vars', 'tasks', 'handlers')]
            + [os.path.join(root, 'playbooks'), os.path.dirname(os.path.abspath(known_vars.__file__))])


def role_options(root=COLLECTION_ROOT):
    """{name: option} of every role's argument spec (plugins/plugin_utils/role_inputs.py), read once per controller process."""
    key = ('options', root)
    if key not in _KNOWN_CACHE:
        _KNOWN_CACHE[key] = role_inputs.options_by_name(role_inputs.load_specs(root, lambda text: yaml.load(text, Loader=_YamlLoader)))  # nosec
    return _KNOWN_CACHE[key]


def role_values(all_hostvars, host, options):
    """The role variables the inventory or the extra vars set for host, templated as the roles would read them (one
    whose template needs ds4_effective, which does not exist yet, is left to the role)."""
    raw = all_hostvars.raw_get(host) if hasattr(all_hostvars, 'raw_get') else all_hostvars[host]
    values = {}
    for name in list(raw.keys()):
        name_s = str(name)
        if name_s not in options or name_s.startswith('_'):
            continue
        try:
            values[name_s] = all_hostvars[host][name_s]
        except Exception:  # pylint: disable=broad-except  # a template that needs ds4_effective: the role checks it
            continue
    return values


def role_input_errors(values_by_host, spark, options):
    """role_inputs.problems() of every host's role_values(); one line per distinct problem, the hosts named when not
    all of them have it."""
    seen = {}
    for h in spark:
        for line in role_inputs.problems(values_by_host[h], options):
            seen.setdefault(line, []).append(h)
    return [line if sorted(hosts) == sorted(spark) else '[host %s] %s' % (', '.join(hosts), line) for line, hosts in seen.items()]


def unknown_variable_errors(all_hostvars, spark, prefix_list, known, origins=None):
    """Error lines for unknown prefixed variables of the spark hosts (inventory + extra vars); origins
    (var_origin.Origins): where each was set, looked up for the unknown ones only."""
    candidates = {}
    allowed = set()
    for h in spark:
        raw = all_hostvars.raw_get(h) if hasattr(all_hostvars, 'raw_get') else all_hostvars[h]
        extra = raw.get('ds4_extra_known_vars') if hasattr(raw, 'get') else None
        if isinstance(extra, (list, tuple)):
            allowed.update(str(x) for x in extra)
        for name in list(raw.keys()):
            name_s = str(name)
            if name_s.startswith('_') or not any(name_s.startswith(p) for p in prefix_list):
                continue
            entry = candidates.setdefault(name_s, {'hosts': [], 'value': raw[name]})
            entry['hosts'].append(h)
    unknown = find_unknown(candidates, known, prefix_list, allowed)
    for item in unknown:
        wheres = [var_origin.describe(origins.find(h, item['name']), os.getcwd()) for h in item['hosts']] if origins else []
        item['where'] = ', '.join(w for w in dict.fromkeys(wheres) if w) or None
    return [format_unknown(item, spark) for item in unknown]


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False

    @staticmethod
    def _placeholder_errors(all_hostvars, spark, origins):
        """plugins/plugin_utils/placeholders.py over the raw values (with the file each was read from)."""
        raws = dict((h, all_hostvars.raw_get(h) if hasattr(all_hostvars, 'raw_get') else all_hostvars[h]) for h in spark)
        values = {}
        first_router_address = raws[spark[0]].get('ds4_router_address')
        for h in spark:
            # the router address: once for the group value, and on each host that sets its own (router hosts)
            own = h == spark[0] or raws[h].get('ds4_router_address') != first_router_address
            names = ('ansible_host', 'ds4_fabric_ip') + (('ds4_router_address',) if own else ())
            values[h] = dict((k, raws[h][k]) for k in names if k in raws[h] and isinstance(raws[h][k], str))

        def where(h, var):
            return var_origin.describe(origins.find(h, var), os.getcwd(), resolve=True)
        return placeholder_errors(values, spark, where)

    @staticmethod
    def _scheme(all_hostvars, spark, errors):
        """http or https for every front and router -> head: ds4_tls, one value for the whole inventory."""
        seen = {}
        for h in spark:
            hv = all_hostvars[h]
            seen.setdefault(tls_plan.tls_enabled(hv['ds4_tls'] if 'ds4_tls' in hv else True), []).append(h)
        if len(seen) > 1:
            errors.append('ds4_tls differs between hosts (%s): the router talks to every head, and clients to every front, '
                          'in one scheme. Fix: set ds4_tls once, in group_vars'
                          % '; '.join('%s: %s' % (k, ', '.join(v)) for k, v in sorted(seen.items(), key=str)))
        return 'http' if seen and not any(seen) else 'https'

    @staticmethod
    def _tls(hv, host, host_inputs, eff, pair, router, errors):
        """ds4_effective['tls'] of this host (tls_plan.plan_tls; no secret), its errors added to errors."""
        fronts = ((['proxy'] if eff['role'] == 'head' and eff['api']['proxied'] else [])
                  + (['router-front'] if router['enabled'] and host in router['hosts'] else []))
        inputs = dict((k, hv[k]) for k in tls_plan.DEFAULTS if k in hv)
        plan, tls_errors, warnings = tls_plan.plan_tls(inputs, tls_plan.front_names(host, host_inputs, pair, router))
        plan['fronts'] = fronts
        errors.extend('[host %s] %s' % (host, e) for e in tls_errors)
        eff['warnings'].extend('[host %s] %s' % (host, w) for w in warnings if fronts)
        return plan

    @staticmethod
    def _api_key_errors(hv, eff):
        """An exposed API (ds4_api_allowed_networks) needs valid client keys: the problems of ds4_api_keys, counted and
        placed, never quoted (api_exposure.check_api_keys)."""
        if eff['api']['exposure'] != 'networks':
            return []
        problems = check_api_keys(hv['ds4_api_keys'] if 'ds4_api_keys' in hv else None, 'ds4_api_keys')
        if not problems:
            return []
        return ['ds4_api_allowed_networks opens the API to %s, so ds4_api_keys must be a list of distinct valid keys: %s '
                '(the values are not shown; keys go in a vaulted group_vars file, ansible-vault encrypt_string), or empty '
                'ds4_api_allowed_networks for loopback only.' % (', '.join(eff['api']['allowed_networks']), ' '.join(problems))]

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        group = args['group']
        base = args['base']
        groups = task_vars.get('groups') or {}
        spark = list(groups.get(group) or [])
        host = task_vars.get('inventory_hostname')
        all_hostvars = task_vars.get('hostvars') or {}
        hostvars = {}
        layout_inputs = {}
        for h in spark:
            hv = all_hostvars[h]
            hostvars[h] = dict((k, hv[k]) for k in HOST_KEYS + ('ansible_host',) if k in hv)
            # raw (untemplated): a template here would need ds4_effective, which does not exist yet
            raw = all_hostvars.raw_get(h) if hasattr(all_hostvars, 'raw_get') else hv
            layout_inputs[h] = dict((k, raw[k]) for k in LAYOUT_VARS if k in raw)
        if not spark:
            result.update(failed=True, msg="dgxspark.ds4 inventory check failed: group '%s' is empty or missing. Fix: run with "
                                           "-i inventories/sample-site (its hosts.yml defines group spark with spark1 and spark2) or your own "
                                           "site inventory with that group." % group)
            return result
        play_hosts = task_vars.get('ansible_play_hosts_all') or spark
        first = [h for h in spark if h in play_hosts]
        # where a refused variable was set (read from the inventory's files only when one is refused)
        origins = var_origin.Origins(task_vars.get('ansible_inventory_sources') or [], task_vars.get('playbook_dir'),
                                     var_origin.extra_var_names(load_extra_vars(self._loader)),
                                     lambda h: [g for g, members in groups.items() if h in (members or [])])
        if not args['allow_placeholders']:
            # checked first and alone: with placeholder addresses nothing else of the inventory is worth reporting
            errors = self._placeholder_errors(all_hostvars, spark, origins)
            if errors:
                result.update(failed=True, errors=errors, placeholder_addresses=True,
                              msg='dgxspark.ds4 configuration refused: the inventory still holds the shipped placeholder addresses; '
                                  'nothing was contacted and nothing was changed on any host:\n- %s' % '\n- '.join(errors))
                return result
        # Every spark host's role variables are checked in the first play host's task, whose refusal stops the run for
        # all of them (any_errors_fatal); each other host's task templates and checks its own only (every host's in each
        # host's task: the config play took 2.2 controller CPU-seconds on two pairs, 1.9 so; docs/measurements.md).
        # Unknown variables (any spark host's) only there: scanning the collection's YAML for the names it knows cost
        # each host's task ~0.14 CPU-s (a worker forked per host: the scan is not shared).
        leader = not first or host == first[0]
        errors = []
        if leader:
            known, prefix_list = known_names()
            errors = unknown_variable_errors(all_hostvars, spark, prefix_list, known, origins)
        options = role_options()
        checked = spark if leader else [host]
        values_by_host = dict((h, role_values(all_hostvars, h, options)) for h in checked)
        errors.extend(role_input_errors(values_by_host, checked, options))
        inputs_base = {
            'base': base,
            'ds4_profile': task_vars.get('ds4_profile'),
            'ds4_profile_config': task_vars.get('ds4_profile_config'),
            'ds4_site_overrides': task_vars.get('ds4_site_overrides'),
            'ds4_model': task_vars.get('ds4_model'),
            'ds4_model_revisions': task_vars.get('ds4_model_revisions'),
            'ds4_interactive_long_prompts': task_vars.get('ds4_interactive_long_prompts'),
            'require_model_revision': args['require_model_revision'],
        }
        # One or more TP=2 pairs (plugins/plugin_utils/pairs.py): each host is configured within its own pair.
        pairs, pair_errors = validate_pairs(dict(groups, spark=spark), hostvars)
        single = not pair_groups(groups)
        if not single or len(spark) > 2:
            errors.extend(pair_errors)
        eff = None
        argv_warnings = []
        raw_argv = all_hostvars.raw_get(host) if hasattr(all_hostvars, 'raw_get') else all_hostvars[host]
        if single and pair_errors:
            # no pair groups: the per-variable checks of compute_effective name each problem of the hosts
            try:
                compute_effective(dict(inputs_base, spark_hosts=spark, hostvars=hostvars,
                                       **role_inputs.nccl_fabric_inputs(values_by_host[host], options)), host)
            except Ds4ConfigError as exc:
                errors.extend(exc.errors)
            if not errors:  # pragma: no cover - pairs.py and compute_effective check the same inventory
                errors.extend(pair_errors)
        elif not pair_errors:
            rhv = all_hostvars[spark[0]]
            router, router_errors = router_plan(pairs, hostvars, vrrp_auth_pass=rhv.get('router_vrrp_auth_pass'),
                                                scheme=self._scheme(all_hostvars, spark, errors),
                                                **dict((k[len('ds4_router_'):], rhv.get(k)) for k in ROUTER_KEYS))
            errors.extend(router_errors)
            pair = pair_of(pairs, host)
            members = [h for h in spark if h in pair['hosts']] if pair else spark
            pair_hostvars = dict((h, dict(hostvars[h])) for h in members)
            if router['enabled']:
                # every router reaches every head's API through that head's proxy: each router host's address joins
                # the allowed networks
                for h in members:
                    nets = pair_hostvars[h].get('ds4_api_allowed_networks') or []
                    nets = [nets] if isinstance(nets, str) else list(nets)
                    cidrs = ['%s/32' % a for a in router['addresses'] if a]
                    pair_hostvars[h]['ds4_api_allowed_networks'] = nets + [c for c in cidrs if c not in nets]
            try:
                eff = compute_effective(dict(inputs_base, spark_hosts=members, hostvars=pair_hostvars,
                                             **role_inputs.nccl_fabric_inputs(values_by_host[host], options)), host)
            except Ds4ConfigError as exc:
                errors.extend(exc.errors)
        if eff is not None:
            # the rank's paths, names and docker run argv (ds4_effective.service), from the inventory's role variables
            service_errors, argv_warnings = publish_service(eff, layout_inputs.get(host) or {},
                                                            role_inputs.argv_settings(values_by_host[host], options), host)
            errors.extend(service_errors)
            errors.extend('[host %s] %s = %s: a template that needs ds4_effective; the config play builds the docker run '
                          'argv from it before ds4_effective exists. Fix: write the literal value.' % (host, name, raw_argv[name])
                          for name in ARGV_VARS if name in raw_argv and name not in values_by_host[host])
            eff['pair'] = dict(pair, group=pair['name'], count=len(pairs))
            eff['pairs'] = pairs
            eff['router'] = router
            if router['enabled'] and host in router['hosts'] and router['port'] == eff['api']['port']:
                errors.append('ds4_router_port = %r is the port vLLM binds on %s (api port / ds4_api_upstream_port). Fix: pick '
                              'another port' % (router['port'], host))
            eff['tls'] = self._tls(all_hostvars[host], host, hostvars[host], eff, pair, router, errors)
            errors.extend('[host %s] %s' % (host, e) for e in role_inputs.cross_problems(eff, values_by_host[host], options))
            settings = role_inputs.setting_problems(eff, values_by_host[host], options, catalogue.recipe_names())
            errors.extend('[host %s] %s' % (host, e) for e in settings)
            errors.extend(self._api_key_errors(all_hostvars[host], eff))
        if errors:
            result['failed'] = True
            result['errors'] = errors
            result['msg'] = ('dgxspark.ds4 configuration refused (%d error(s)); nothing was changed on any host:\n- %s'
                             % (len(errors), '\n- '.join(errors)))
            return result
        if first and host == first[0]:
            for w in eff['warnings']:
                self._display.warning('dgxspark.ds4: %s' % w)
        # this host's own (its container's settings): shown for every host
        for w in argv_warnings:
            self._display.warning('dgxspark.ds4: %s' % w)
        eff['warnings'].extend(argv_warnings)
        result['changed'] = False
        # ds4_effective both as the fact (ansible_facts['ds4_effective']: what an earlier play of the run computed, for
        # config_play.yml's first task) and as a plain host variable, as set_fact sets one, for every later role (no
        # set_fact task of its own: a worker per host and run)
        if VariableLayer is not None:
            self.register_host_variables({'ds4_effective': eff}, VariableLayer.CACHEABLE_FACT)
            self.register_host_variables({'ds4_effective': eff}, VariableLayer.EPHEMERAL_FACT)
        else:  # pragma: no cover - ansible-core 2.20: the fact, injected as a variable (INJECT_FACTS_AS_VARS)
            result['ansible_facts'] = {'ds4_effective': eff}
        # shown with -v: the node's effective launch command with it
        result['msg'] = '%s: profile %s, %s (rank %d), %s: %s' % (
            host, eff['profile'], eff['role'], eff['node_rank'], eff['script_name'], ' '.join(eff['argv']))
        return result
