# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side action: validate inventory + profile, set the ds4_effective fact.

Never contacts a host: it only reads task_vars (groups, hostvars) on the controller.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.dgxspark.ds4.plugins.module_utils.ds4_config import (
    Ds4ConfigError,
    compute_effective,
)

HOST_KEYS = (
    'ds4_node_rank', 'ds4_fabric_ip', 'ds4_fabric_prefix', 'ds4_fabric_ifname', 'ds4_rdma_hcas',
    'ds4_nccl_ib_gid_index', 'ds4_node_memory_gib', 'ds4_ack_unsafe_gpu_memory_utilization',
    'ds4_profile', 'ds4_profile_config', 'ds4_site_overrides', 'ds4_api_allowed_networks', 'ds4_api_upstream_port',
)


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('base', 'group'))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        unknown = set(args) - self._VALID_ARGS
        if unknown:
            raise AnsibleActionFail('dgxspark.ds4.effective_config: unknown option(s) %s; valid: base, group' % ', '.join(sorted(unknown)))
        group = args.get('group', 'spark')
        base = args.get('base')
        if not isinstance(base, dict):
            raise AnsibleActionFail('dgxspark.ds4.effective_config: option base must be the ds4 base layer mapping '
                                    '(roles/config/vars/main.yml config_base), got %r' % (base,))
        groups = task_vars.get('groups') or {}
        spark = list(groups.get(group) or [])
        host = task_vars.get('inventory_hostname')
        all_hostvars = task_vars.get('hostvars') or {}
        hostvars = {}
        for h in spark:
            hv = all_hostvars[h]
            hostvars[h] = dict((k, hv[k]) for k in HOST_KEYS if k in hv)
        inputs = {
            'base': base,
            'spark_hosts': spark,
            'hostvars': hostvars,
            'ds4_profile': task_vars.get('ds4_profile'),
            'ds4_profile_config': task_vars.get('ds4_profile_config'),
            'ds4_site_overrides': task_vars.get('ds4_site_overrides'),
        }
        if not spark:
            result.update(failed=True, msg="dgxspark.ds4 inventory check failed: group '%s' is empty or missing. Fix: run with "
                                           "-i inventories/<profile> (hosts.yml defines group spark with spark1 and spark2)." % group)
            return result
        play_hosts = task_vars.get('ansible_play_hosts_all') or spark
        first = [h for h in spark if h in play_hosts]
        try:
            eff = compute_effective(inputs, host)
        except Ds4ConfigError as exc:
            result['failed'] = True
            result['errors'] = exc.errors
            result['msg'] = ('dgxspark.ds4 configuration refused (%d error(s)); nothing was changed on any host:\n- %s'
                             % (len(exc.errors), '\n- '.join(exc.errors)))
            return result
        if first and host == first[0]:
            for w in eff['warnings']:
                self._display.warning('dgxspark.ds4: %s' % w)
        result['changed'] = False
        result['ansible_facts'] = {'ds4_effective': eff}
        result['msg'] = '%s: profile %s, %s (rank %d), %s' % (host, eff['profile'], eff['role'], eff['node_rank'], eff['script_name'])
        return result
