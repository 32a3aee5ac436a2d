# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Opt-in package holds of host_hardening (dpkg selections), checked before anything changes.

Pure Python (no Ansible imports). An unattended upgrade of the GPU driver, Docker or the NVIDIA
container toolkit restarts dockerd (both ranks die) or needs a reboot; holding them is a choice
the inventory makes (``host_hardening_hold_packages``, default ``[]``: nothing held), reversed with
``host_hardening_unhold_packages``.

API:
  hold_errors(hold, unhold, installed=None) -> [str]   each names the variable, the value and the fix
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re

# Debian policy 5.6.7: lower case letters, digits, + - . ; at least two characters; starts alphanumeric.
_NAME = re.compile(r'^[a-z0-9][a-z0-9+.-]+$')
_VARS = ('host_hardening_hold_packages', 'host_hardening_unhold_packages')


def hold_errors(hold, unhold, installed=None):
    """Errors for the two lists; [] when they are valid.

    installed: names of the installed packages (ansible package_facts keys) or None to skip that
    check. A name to hold must be installed: dpkg cannot hold what it does not know, and the
    selection would never settle (changed on every run)."""
    errors = []
    lists = {}
    for var, value in zip(_VARS, (hold, unhold)):
        if value is None:
            value = []
        if isinstance(value, (str, bytes, dict)) or not isinstance(value, (list, tuple)):
            errors.append('%s=%r is not a list of package names. Fix: e.g. %s: [docker-ce, nvidia-container-toolkit] '
                          '(or [] for none)' % (var, value, var))
            lists[var] = []
            continue
        names = []
        for item in value:
            if not isinstance(item, str) or not _NAME.match(item):
                errors.append('%s: %r is not a Debian package name (lower case letters, digits, + - .; no patterns). '
                              'Fix: list exact names as dpkg -l shows them, e.g. nvidia-container-toolkit'
                              % (var, item))
            elif item in names:
                errors.append('%s lists %s twice. Fix: list it once' % (var, item))
            else:
                names.append(item)
        lists[var] = names
    both = sorted(set(lists[_VARS[0]]) & set(lists[_VARS[1]]))
    if both:
        errors.append('%s are in both host_hardening_hold_packages and host_hardening_unhold_packages. Fix: keep each '
                      'package in one list' % ', '.join(both))
    if installed is not None:
        known = set(installed)
        missing = [n for n in lists[_VARS[0]] if n not in known]
        if missing:
            errors.append('host_hardening_hold_packages: %s not installed on this node, so dpkg cannot hold it. Fix: '
                          'remove it from the list or use the installed name (dpkg -l | grep -e nvidia -e docker '
                          '-e containerd)' % ', '.join(missing))
    return errors
