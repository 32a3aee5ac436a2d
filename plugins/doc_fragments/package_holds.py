# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


class ModuleDocFragment(object):
    """host_hardening's hold set, as the filters that plan with it take it (package_hold_plan, maintenance_plan)."""

    DOCUMENTATION = r'''
options:
  defaults:
    description: C(host_hardening_hold_default_packages).
    type: list
    elements: str
    default: []
  hold:
    description: C(host_hardening_hold_packages).
    type: list
    elements: str
    default: []
  unhold:
    description: C(host_hardening_unhold_packages).
    type: list
    elements: str
    default: []
'''
