# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the operations playbooks (status, switch, upgrade, maintenance, the rolling operations): the status
table, the regression kit's verdict and input problems, the upgrade's order, the launch facts of a deployed record.

Documentation: plugins/filter/<name>.yml (one per filter)."""

from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import config_set, regression_kit
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.ops_status import format_table
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.filter_base import ds4_filter, filter_map


@ds4_filter('status_table', 'list', none_ok=True)
def status_table(rows):
    return format_table(list(rows or []))


@ds4_filter('regression_verdict', 'dict', none_ok=True)
def regression_verdict(new, reference, thresholds=None):
    result = regression_kit.verdict(dict(new or {}), dict(reference or {}), dict(thresholds or {}))
    result['summary'] = regression_kit.summary(result)
    return result


@ds4_filter('regression_kit_problems', 'dict', none_ok=True)
def regression_kit_problems(thresholds, kit, recipe):
    return regression_kit.check_upgrade(dict(thresholds or {}), kit, recipe)


@ds4_filter('upgrade_plan', 'list', none_ok=True)
def upgrade_plan(pairs):
    return regression_kit.upgrade_plan(list(pairs or []))


@ds4_filter('record_launch', 'dict', none_ok=True)
def record_launch(record):
    # the controller never reads a node's launch script: a record from before the launch slice gives its top-level
    # copies (api_port as public_port, engine_url) and None for the rest
    return config_set.launch_from_record(dict(record or {}), read_script=None)


class FilterModule(object):
    def filters(self):
        return filter_map(status_table, regression_verdict, regression_kit_problems, upgrade_plan, record_launch)
