# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the NCCL fabric subsystem: the all-reduce preflight's plan.

Documentation: plugins/filter/<name>.yml (one per filter)."""

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.allreduce_guard import plan
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.filter_base import ds4_filter, filter_map


@ds4_filter('allreduce_plan', 'list')
def allreduce_plan(nodes, force=False, max_bytes=1 << 30, fraction=0.5, overhead_bytes=4 << 30, min_fit_bytes=256 << 20):
    return plan(nodes, force=bool(force), max_bytes=int(max_bytes), fraction=float(fraction),
                overhead_bytes=int(overhead_bytes), min_fit_bytes=int(min_fit_bytes))


class FilterModule(object):
    def filters(self):
        return filter_map(allreduce_plan)
