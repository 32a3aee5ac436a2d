# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a node's vLLM rank lives: directories, file paths, unit and container names.

``roles/vllm_service`` takes these as inputs (``vllm_service_config_dir``,
``vllm_service_state_dir``, ``vllm_service_unit_dir``, ``vllm_service_libexec_dir``,
``vllm_service_docker_bin``, ``vllm_service_unit_name``, ``vllm_service_container_name``).
The config role computes them ONCE per host from the inventory (``service_layout``) and publishes
them as ``ds4_effective['service']``; ``vllm_service`` checks that what it deploys matches and
writes them into its deployed record (``<state_dir>/deployed-<role>.json``); the operations
playbooks (``playbooks/vars/ops.yml``: status, switch, rollback, restart) and the ``vllm_ready``
action read them from there instead of assuming the defaults.

``DEFAULTS`` must equal ``roles/vllm_service/defaults/main.yml`` (a unit test compares them).
Pure Python, no Ansible imports.
"""


import re

# The role's defaults; unit_name / container_name depend on the rank's role.
DEFAULTS = {
    'config_dir': '/etc/dgxspark-ds4',
    'state_dir': '/var/lib/dgxspark-ds4',
    'unit_dir': '/etc/systemd/system',
    'libexec_dir': '/usr/local/libexec/dgxspark-ds4',
    'docker_bin': '/usr/bin/docker',
}
UNIT_NAME = 'dgxspark-ds4-%s.service'
CONTAINER_NAME = 'dgxspark-ds4-%s'

# inventory variable -> key of ds4_effective['service']
LAYOUT_VARS = {
    'vllm_service_config_dir': 'config_dir',
    'vllm_service_state_dir': 'state_dir',
    'vllm_service_unit_dir': 'unit_dir',
    'vllm_service_libexec_dir': 'libexec_dir',
    'vllm_service_docker_bin': 'docker_bin',
    'vllm_service_unit_name': 'unit_name',
    'vllm_service_container_name': 'container_name',
}
_PATH_KEYS = ('config_dir', 'state_dir', 'unit_dir', 'libexec_dir', 'docker_bin')
UNIT_RE = re.compile(r'^[A-Za-z0-9:_.@-]+\.service$')
CONTAINER_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$')
_TEMPLATE_MARKS = ('{{', '{%')


def _err(var, value, why, fix, host=None):
    prefix = '[host %s] ' % host if host else ''
    return '%s%s = %r: %s. Fix: %s.' % (prefix, var, value, why, fix)


def _path_ok(value):
    return (isinstance(value, str) and value.startswith('/') and value.rstrip('/') != ''
            and '..' not in value.split('/') and not any(c in value for c in ' \t\n\'"$`\\'))


def service_layout(role, values, host=None):
    """-> (layout, errors) for a rank.

    role: 'head' or 'worker'. values: {inventory variable: value} for the LAYOUT_VARS the
    inventory (or -e) sets for this host; a missing or None value takes the default."""
    errors = []
    layout = dict(DEFAULTS)
    layout['unit_name'] = UNIT_NAME % role
    layout['container_name'] = CONTAINER_NAME % role
    for var, key in sorted(LAYOUT_VARS.items()):
        if var not in values or values[var] is None:
            continue
        value = values[var]
        if isinstance(value, str) and any(m in value for m in _TEMPLATE_MARKS):
            errors.append(_err(var, value, 'the config role publishes this name for every playbook before ds4_effective '
                                           'exists, so it cannot be a template', 'write the literal value', host))
            continue
        if key in _PATH_KEYS:
            if not _path_ok(value):
                errors.append(_err(var, value, 'must be an absolute path without spaces, quotes, $ or ..',
                                   'e.g. %s' % DEFAULTS[key], host))
                continue
        elif key == 'unit_name':
            if not isinstance(value, str) or not UNIT_RE.match(value):
                errors.append(_err(var, value, 'must be a systemd service name ending in .service',
                                   'e.g. %s' % (UNIT_NAME % role), host))
                continue
        elif key == 'container_name':
            if not isinstance(value, str) or not CONTAINER_RE.match(value):
                errors.append(_err(var, value, 'must be a Docker container name ([A-Za-z0-9][A-Za-z0-9_.-]*, at most 128)',
                                   'e.g. %s' % (CONTAINER_NAME % role), host))
                continue
        layout[key] = value
    layout.update(paths(layout, role))
    return layout, errors


def paths(layout, role):
    """The files of a rank's live config set, derived from the directories and names."""
    cdir, sdir = layout['config_dir'].rstrip('/'), layout['state_dir'].rstrip('/')
    return {
        'script_path': '%s/launch-%s.sh' % (cdir, role),
        'env_file_path': '%s/nccl.env' % cdir,
        'secrets_path': '%s/secrets-%s.env' % (cdir, role),
        'prestart_config_path': '%s/prestart-%s.json' % (cdir, role),
        'unit_path': '%s/%s' % (layout['unit_dir'].rstrip('/'), layout['unit_name']),
        'deployed_record': '%s/deployed-%s.json' % (sdir, role),
        # the restart request vllm_service reads (its handler, model_cache's revision switch and nccl_fabric's new
        # nccl.env write it): a change that reaches the running process only through a restart
        'restart_pending_path': '%s/restart-pending-%s' % (sdir, role),
        'rollback_store': '%s/previous' % cdir,
        # the pair guard's health gate (head): present while the pair must not take requests; the API proxy answers
        # /health 503 then (a router takes the pair out of rotation). /run: gone at reboot, readable by nginx.
        'health_gate_path': '/run/%s.unhealthy' % layout['container_name'],
    }
