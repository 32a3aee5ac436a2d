# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""System directories: never a directory the collection creates, chmods, adopts or empties.

One list for every check that needs it: the role variables (plugins/plugin_utils/role_inputs.py) and the profile's
model directory (ds4_config). Pure Python standard library.
"""


# System directories and directories other packages own: never a directory the collection creates, chmods or empties
# (nor one of their ancestors, nor anything under the kernel's pseudo filesystems).
SYSTEM_DIRS = frozenset((
    '/', '/bin', '/boot', '/dev', '/etc', '/home', '/lib', '/lib64', '/media', '/mnt', '/opt', '/proc', '/root', '/run',
    '/sbin', '/srv', '/sys', '/tmp', '/usr', '/var', '/var/tmp', '/var/lib', '/var/log', '/var/cache', '/var/run',
    '/usr/bin', '/usr/sbin', '/usr/lib', '/usr/local', '/usr/local/bin', '/usr/local/lib', '/usr/local/libexec',
    '/usr/local/sbin', '/usr/share', '/usr/libexec', '/etc/default', '/etc/systemd', '/etc/systemd/system', '/etc/nginx',
    '/etc/ssh', '/etc/ssl', '/etc/apt', '/etc/sudoers.d', '/etc/security', '/etc/sysctl.d', '/etc/modprobe.d',
    '/etc/docker', '/etc/prometheus', '/etc/grafana', '/etc/keepalived', '/etc/nftables.d', '/etc/cron.d',
    '/var/lib/docker', '/var/lib/containerd', '/var/lib/prometheus', '/var/lib/grafana', '/var/lib/apt',
    '/var/lib/dpkg', '/var/lib/systemd', '/run/systemd', '/run/user', '/dev/shm', '/snap', '/lost+found',
))
PSEUDO_FS = ('/proc', '/sys', '/dev')


def is_system(path: str) -> bool:
    """True for a system directory, an ancestor of one, or anything under /proc, /sys, /dev."""
    path = path.rstrip('/') or '/'
    return (path in SYSTEM_DIRS or any(d.startswith(path.rstrip('/') + '/') for d in SYSTEM_DIRS if path != '/')
            or any(path == p or path.startswith(p + '/') for p in PSEUDO_FS))
