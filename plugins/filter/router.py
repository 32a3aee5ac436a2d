# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the router subsystem: vllm-router's plan, keepalived's VRRP configuration, the drain report.

Documentation: plugins/filter/<name>.yml (one per filter)."""

from ansible_collections.dgxspark.ds4.plugins.module_utils._node.router_admin import drain_report as _drain_report
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.filter_base import ds4_filter, filter_map
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.keepalived_render import host_config
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.router_config import plan as _router_plan


@ds4_filter('vllm_router_plan', 'list')
def vllm_router_plan(pairs, settings=None, binary='vllm-router', drain_timeout=None):
    return _router_plan(pairs, settings or {}, binary, drain_timeout)


@ds4_filter('keepalived_conf', 'dict', none_ok=True)
def keepalived_conf(spec, addr_json=None):
    return host_config(spec or {}, addr_json or [])


@ds4_filter('drain_report', 'dict', none_ok=True)
def drain_report(wait, removal, engine=None, again=None):
    return _drain_report(removal or {}, wait or {}, engine or {}, again or {})


class FilterModule(object):
    def filters(self):
        return filter_map(vllm_router_plan, keepalived_conf, drain_report)
