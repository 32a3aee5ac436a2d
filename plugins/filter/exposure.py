# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of API exposure: the checks of allowed networks and of API keys (plugins/module_utils/_security/api_exposure.py).

Documentation: plugins/filter/<name>.yml (one per filter)."""

from ansible_collections.dgxspark.ds4.plugins.module_utils._security.api_exposure import check_api_key, check_api_keys, normalize_networks
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.filter_base import Ds4FilterError, ds4_filter, filter_map


def _var(filter_name, var):
    if not isinstance(var, str) or not var:
        raise Ds4FilterError('dgxspark.ds4.%s: var must be the variable\'s name (a string), got %r' % (filter_name, var))
    return var


@ds4_filter('network_errors')
def network_errors(value, var):
    errors = []
    normalize_networks(value, errors, var=_var('network_errors', var))
    return errors


@ds4_filter('api_key_errors')
def api_key_errors(value, var, single=False):
    var = _var('api_key_errors', var)
    return check_api_key(value, var) if single else check_api_keys(value, var)


class FilterModule(object):
    def filters(self):
        return filter_map(network_errors, api_key_errors)
