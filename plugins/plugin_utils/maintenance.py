# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""maintenance.yml: its inputs, the package plan of each node, the reboot command, what changed.

Pure Python (no Ansible imports). One pair at a time (playbooks/tasks/rolling.yml, action maintain): drained,
stopped, the collection's package holds released for this run only, the packages upgraded, held again, both nodes
rebooted, the deploy sequence with the fabric re-qualified, readiness, the regression kit against the pair's own
numbers from before, back into rotation.

API:
  input_errors(settings) -> [str]     each names the variable, the value and the fix (settings: the ds4_maintenance_* values)
  dpkg_state(text) -> {name: {'version', 'want', 'installed'}}   (``dpkg-query -W -f '${Package} ${Version} ${Status}\\n'``)
  node_plan(text, defaults, hold, unhold, packages, host) -> {'release', 'held_elsewhere', 'errors', 'versions'}
  changed_packages(before, after) -> [{'name', 'from', 'to'}]   (two {name: version} maps)
  front_outages(pairs, router_hosts, vip) -> [pair name]   (pairs whose reboot takes the only router down)
"""


from typing import Any
import re

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.package_holds import hold_plan

UPGRADE_MODES = ('full', 'safe')
# Debian policy 5.6.7 (the same rule as package_holds: exact names only)
_NAME = re.compile(r'^[a-z0-9][a-z0-9+.-]+$')
_PLACEHOLDER = re.compile(r'\{([^{}]*)\}')
PLACEHOLDERS = ('host', 'name')


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or str(value).strip().lower() in ('true', 'false', 'yes', 'no')


def input_errors(settings: dict[str, Any], pairs: list[dict[str, Any]] | None = None,
                 router: dict[str, Any] | None = None) -> list[str]:
    """Errors for the ds4_maintenance_* settings (a dict without the prefix: packages, upgrade, reboot,
    reboot_command, reboot_timeout, kit, allow_front_outage); [] when they are valid. pairs (ds4_effective.pairs) and
    router (ds4_effective.router: enabled, hosts, vip): a run that would reboot the only router is refused unless
    allow_front_outage."""
    errors = []
    packages = settings.get('packages')
    if packages is None:
        packages = []
    if isinstance(packages, (str, bytes, dict)) or not isinstance(packages, (list, tuple)):
        errors.append('ds4_maintenance_packages=%r is not a list of package names. Fix: e.g. [docker-ce, '
                      'nvidia-container-toolkit], or [] to upgrade every package apt would upgrade' % (packages,))
    else:
        seen = []
        for item in packages:
            if not isinstance(item, str) or not _NAME.match(item):
                errors.append('ds4_maintenance_packages: %r is not a Debian package name (lower case letters, digits, '
                              '+ - .; exact names as dpkg -l shows them, no patterns). Fix: e.g. nvidia-container-toolkit'
                              % (item,))
            elif item in seen:
                errors.append('ds4_maintenance_packages lists %s twice. Fix: list it once' % item)
            else:
                seen.append(item)
    upgrade = settings.get('upgrade')
    if upgrade not in UPGRADE_MODES:
        errors.append('ds4_maintenance_upgrade=%r is not one of %s. Fix: full (apt full-upgrade: may install or '
                      'remove packages, what DGX OS updates need) or safe (apt upgrade: never removes one)'
                      % (upgrade, ', '.join(UPGRADE_MODES)))
    for key in ('reboot', 'kit', 'allow_front_outage'):
        if not _is_bool(settings.get(key)):
            errors.append('ds4_maintenance_%s=%r is not a boolean. Fix: true or false' % (key, settings.get(key)))
    command = settings.get('reboot_command')
    if command is None:
        command = []
    if isinstance(command, (str, bytes, dict)) or not isinstance(command, (list, tuple)):
        errors.append('ds4_maintenance_reboot_command=%r is not a list of words. Fix: [] (reboot the node itself: '
                      'ansible.builtin.reboot) or the argv of a command run on the controller that power-cycles a '
                      'node, e.g. [ipmitool, -H, "{host}-bmc", -U, admin, -E, chassis, power, cycle]' % (command,))
    else:
        for word in command:
            if not isinstance(word, str) or not word:
                errors.append('ds4_maintenance_reboot_command: %r is not a non-empty string. Fix: every word of the '
                              'argv a string' % (word,))
                continue
            bad = [p for p in _PLACEHOLDER.findall(word) if p not in PLACEHOLDERS]
            if bad:
                errors.append('ds4_maintenance_reboot_command: %r names {%s}, which is not one of {host} (the node\'s '
                              'address) and {name} (its inventory name). Fix: use those two' % (word, '}, {'.join(bad)))
    timeout = settings.get('reboot_timeout')
    try:
        ok = timeout is not None and not isinstance(timeout, bool) and 60 <= float(timeout) <= 7200
    except (TypeError, ValueError):
        ok = False
    if not ok:
        errors.append('ds4_maintenance_reboot_timeout=%r is not a number of seconds between 60 and 7200. Fix: e.g. 900 '
                      '(a Spark boots in 2-4 minutes; firmware updates take longer)' % (timeout,))
    router = router or {}
    outages = front_outages(pairs, router.get('hosts'), router.get('vip')) if router.get('enabled') else []
    if outages and settings.get('reboot') is not False and str(settings.get('reboot')).lower() not in ('false', 'no') \
            and str(settings.get('allow_front_outage')).lower() not in ('true', 'yes'):
        errors.append('ds4_maintenance_allow_front_outage=%r: the only router (%s) runs on a node of %s and there is no '
                      'VIP, so every request through the router fails while that node reboots. Fix: ds4_router_vip with '
                      'two router hosts (the address moves to the other one first), or '
                      'ds4_maintenance_allow_front_outage=true to accept the outage'
                      % (settings.get('allow_front_outage'), ', '.join(router.get('hosts') or []), ', '.join(outages)))
    return errors


def dpkg_state(text: str | None) -> dict[str, dict[str, Any]]:
    """{name: {'version', 'want', 'installed'}} from ``dpkg-query -W -f '${Package} ${Version} ${Status}\\n'``
    (Status is '<want> <flag> <state>': 'hold ok installed' is a held installed package)."""
    out = {}
    for line in (text or '').splitlines():
        words = line.split()
        if len(words) < 5:
            continue
        name, version, want, state = words[0], words[1], words[2], words[-1]
        out[name] = {'version': version, 'want': want, 'installed': state == 'installed'}
    return out


def node_plan(text: str | None, defaults: list[str], hold: list[str], unhold: list[str], packages: list[str], host: str,
              before: dict[str, str] | None = None) -> dict[str, Any]:
    """The package plan of one node for this run.

    release         the collection's holds (host_hardening's set) dpkg has now: released for the upgrade only,
                    held again right after it (whatever happens in between)
    held_elsewhere  packages held by something else (a hold the collection did not place): never touched; apt
                    leaves them as they are
    errors          a package of ds4_maintenance_packages that is not installed, or held elsewhere (this run
                    would not release it, so apt would not upgrade it): refused before anything changes
    versions        {name: version} of the installed packages
    changed         with before (the versions of an earlier plan): what changed since ([] without it)
    """
    state = dpkg_state(text)
    installed = sorted(n for n, s in state.items() if s['installed'])
    held_now = set(n for n, s in state.items() if s['installed'] and s['want'] == 'hold')
    ours = set(hold_plan(defaults, hold, unhold, installed)['hold'])
    release = sorted(ours & held_now)
    elsewhere = sorted(held_now - ours)
    errors = []
    for name in packages or []:
        if name not in installed:
            errors.append('ds4_maintenance_packages: %s is not installed on %s, so there is nothing to upgrade. Fix: '
                          'list installed packages only (dpkg -l | grep -e nvidia -e docker -e mlnx)' % (name, host))
        elif name in elsewhere:
            errors.append('ds4_maintenance_packages: %s is held on %s by a hold the collection did not place (it is not '
                          'in host_hardening_hold_default_packages or host_hardening_hold_packages), so this run would '
                          'not release it and apt would not upgrade it. Fix: add it to host_hardening_hold_packages '
                          '(the collection then holds it and releases it for maintenance only), or release it yourself: '
                          'apt-mark unhold %s' % (name, host, name))
    versions = dict((n, state[n]['version']) for n in installed)
    return {'release': release, 'held_elsewhere': elsewhere, 'errors': errors, 'versions': versions,
            'changed': changed_packages(before, versions) if before is not None else []}


def changed_packages(before: dict[str, str], after: dict[str, str]) -> list[dict[str, str]]:
    """What the upgrade changed on a node: [{'name', 'from', 'to'}] ('' for a package added or removed)."""
    out = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name, ''), after.get(name, '')
        if old != new:
            out.append({'name': name, 'from': old, 'to': new})
    return out


def front_outages(pairs: list[dict[str, Any]] | None, router_hosts: list[str] | None, vip: str | None) -> list[str]:
    """The pairs whose maintenance reboots the only router (a router host among the pair's hosts and no VIP): the
    endpoint through the router is down while that node reboots. [] with a VIP (the address moves to the other
    router host first) or when no router runs on a pair's node."""
    if vip:
        return []
    hosts = set(router_hosts or [])
    return [p['name'] for p in pairs or [] if hosts & set(p.get('hosts') or [])]
