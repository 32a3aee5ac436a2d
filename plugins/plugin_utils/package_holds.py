# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Package holds of host_hardening (dpkg selections), planned and checked before anything changes.

Pure Python (no Ansible imports). An unattended upgrade of the GPU driver, Docker or the NVIDIA
container toolkit restarts dockerd (both ranks die) or needs a reboot. The first-week set
(``host_hardening_hold_default_packages``, exact names or patterns such as ``nvidia-driver-*``) is
held by default, as far as it is installed; ``host_hardening_hold_packages`` adds exact names that
must be installed; ``host_hardening_unhold_packages`` releases names; ``host_hardening_release_holds``
releases the whole set (the maintenance path: upgrade, then run again without it).

API:
  hold_errors(hold, unhold, installed=None, defaults=None) -> [str]   each names the variable, the value and the fix
  installed_packages(dpkg_query_text) -> [name]   (``dpkg-query -W -f '${Package} ${Status}\\n'``)
  hold_plan(defaults, hold, unhold, installed, release=False) -> {'hold', 'release', 'defaults_absent'}
"""


from typing import Any
import fnmatch
import re

# Debian policy 5.6.7: lower case letters, digits, + - . ; at least two characters; starts alphanumeric.
_NAME = re.compile(r'^[a-z0-9][a-z0-9+.-]+$')
_VARS = ('host_hardening_hold_packages', 'host_hardening_unhold_packages')
# The same, with the shell-style wildcards * ? [ ] (host_hardening_hold_default_packages).
_PATTERN = re.compile(r'^[a-z0-9*?\[][a-z0-9+.*?\[\]-]+$')
DEFAULTS_VAR = 'host_hardening_hold_default_packages'


def hold_errors(hold: list[str] | None, unhold: list[str] | None, installed: list[str] | None = None,
                defaults: list[str] | None = None) -> list[str]:
    """Errors for the lists; [] when they are valid.

    installed: names of the installed packages or None to skip that check. A name to hold must be
    installed: dpkg cannot hold what it does not know, and the selection would never settle (changed
    on every run). defaults: host_hardening_hold_default_packages (names or patterns; what is not
    installed is skipped by hold_plan, not an error)."""
    errors = []
    if defaults is not None:
        if isinstance(defaults, (str, bytes, dict)) or not isinstance(defaults, (list, tuple)):
            errors.append('%s=%r is not a list of package names or patterns. Fix: e.g. %s: [docker-ce, '
                          '\'nvidia-driver-*\'] (or [] to hold nothing by default)' % (DEFAULTS_VAR, defaults, DEFAULTS_VAR))
        else:
            for item in defaults:
                if not isinstance(item, str) or not _PATTERN.match(item):
                    errors.append('%s: %r is not a Debian package name or a pattern of one (lower case letters, digits, '
                                  '+ - . and the wildcards * ? [ ]). Fix: e.g. nvidia-driver-*' % (DEFAULTS_VAR, item))
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


def installed_packages(text: str | None) -> list[str]:
    """Names dpkg reports installed, from ``dpkg-query -W -f '${Package} ${Status}\\n'`` (status
    ``<want> ok installed``; a held package reads ``hold ok installed``; removed ones ``... config-files``)."""
    out = []
    for line in (text or '').splitlines():
        name, _sep, status = line.strip().partition(' ')
        if name and status.split()[-1:] == ['installed'] and name not in out:
            out.append(name)
    return sorted(out)


def hold_plan(defaults: list[str], hold: list[str], unhold: list[str], installed: list[str], release: bool = False) -> dict[str, Any]:
    """Which installed packages to hold and which to release (dpkg selections), valid lists assumed.

    The hold set = the installed names matching host_hardening_hold_default_packages + host_hardening_hold_packages,
    less host_hardening_unhold_packages. release=True (host_hardening_release_holds) releases the whole set instead
    of holding it. Names that are not installed are never given to dpkg (it cannot hold them and the selection would
    never settle); defaults_absent lists the default patterns that match nothing here."""
    known = set(installed or [])
    defaults = list(defaults or [])
    matched = set()
    absent = []
    for pattern in defaults:
        names = [n for n in known if fnmatch.fnmatchcase(n, pattern)]
        matched.update(names)
        if not names:
            absent.append(pattern)
    unheld = set(unhold or [])
    held = (matched | (set(hold or []) & known)) - unheld
    if release:
        return {'hold': [], 'release': sorted((held | unheld) & known), 'defaults_absent': absent}
    return {'hold': sorted(held), 'release': sorted(unheld & known), 'defaults_absent': absent}
