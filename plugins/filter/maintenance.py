# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of host maintenance (playbooks/maintenance.yml, role host_hardening): the maintenance plan and its input
problems, the package holds, the swap-off refusals.

Documentation: plugins/filter/<name>.yml (one per filter)."""

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.filter_base import ds4_filter, filter_map
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.maintenance import input_errors, node_plan
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.package_holds import hold_errors, hold_plan, installed_packages
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.swap_guard import swapoff_refusals as _refusals


@ds4_filter('maintenance_plan', 'str', none_ok=True)
def maintenance_plan(dpkg_query, defaults=None, hold=None, unhold=None, packages=None, host='this node', before=None):
    return node_plan(dpkg_query, defaults, hold, unhold, packages, host, before)


@ds4_filter('maintenance_problems', 'dict', none_ok=True)
def maintenance_problems(settings, pairs=None, router=None):
    return input_errors(dict(settings or {}), pairs, router)


@ds4_filter('package_hold_errors')
def package_hold_errors(hold, unhold=None, installed=None, defaults=None):
    return hold_errors(hold, unhold, installed, defaults)


@ds4_filter('package_hold_plan', 'str', none_ok=True)
def package_hold_plan(dpkg_query, defaults=None, hold=None, unhold=None, release=False):
    installed = installed_packages(dpkg_query)
    plan = hold_plan(defaults, hold, unhold, installed, bool(release))
    plan['installed'] = installed
    return plan


@ds4_filter('swapoff_refusals', 'str', none_ok=True)
def swapoff_refusals(meminfo, margin_mib, gpu_processes=None, vllm_units=None, vllm_processes=None, host='this node'):
    return _refusals(meminfo, margin_mib, gpu_processes, vllm_units, vllm_processes, host)


class FilterModule(object):
    def filters(self):
        return filter_map(maintenance_plan, maintenance_problems, package_hold_errors, package_hold_plan, swapoff_refusals)
