# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a node's vLLM rank lives: directories, file paths, unit and container names.

``roles/vllm_service`` takes these as inputs (``vllm_service_config_dir``,
``vllm_service_state_dir``, ``vllm_service_unit_dir``, ``vllm_service_libexec_dir``,
``vllm_service_docker_bin``, ``vllm_service_unit_name``, ``vllm_service_container_name``).
The config role computes them ONCE per host from the inventory (``service_layout``) and publishes
them as ``ds4_effective['service']``, with the rank's ``docker run`` argv (``docker_run``: every word up to
the image, which only the node knows; the devices and cache volumes it names); ``vllm_service`` checks that what it
deploys matches, renders the argv into its unit as it is (``vllm.service.j2``: quoting only) and
writes them into its deployed record (``<state_dir>/deployed-<role>.json``); the operations
playbooks (``playbooks/vars/ops.yml``: status, switch, rollback, restart) and the ``vllm_ready``
action read them from there instead of assuming the defaults.

``DEFAULTS`` must equal ``roles/vllm_service/defaults/main.yml`` (a unit test compares them).
Pure Python, no Ansible imports.
"""


import re
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.container_logs import docker_log_args

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


def _err(var: str, value: Any, why: str, fix: str, host: str | None = None) -> str:
    prefix = '[host %s] ' % host if host else ''
    return '%s%s = %r: %s. Fix: %s.' % (prefix, var, value, why, fix)


def _path_ok(value: Any) -> bool:
    return (isinstance(value, str) and value.startswith('/') and value.rstrip('/') != ''
            and '..' not in value.split('/') and not any(c in value for c in ' \t\n\'"$`\\'))


def service_layout(role: str, values: dict[str, Any], host: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """-> (layout, errors) for a rank.

    role: 'head' or 'worker'. values: {inventory variable: value} for the LAYOUT_VARS the
    inventory (or -e) sets for this host; a missing or None value takes the default."""
    errors: list[str] = []
    layout: dict[str, Any] = dict(DEFAULTS)
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


def paths(layout: dict[str, Any], role: str) -> dict[str, str]:
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


# The role variables the docker run argv reads besides the layout (the config play reads them from the inventory as it
# reads every role variable: plugins/plugin_utils/role_inputs.py argv_settings; unset = the role's default).
ARGV_VARS = ('vllm_service_privileged', 'vllm_service_capabilities', 'vllm_service_gpu', 'vllm_service_rdma_devices',
             'vllm_service_ulimits', 'vllm_service_extra_cache_volumes', 'vllm_service_container_log_driver',
             'vllm_service_container_log_max_size', 'vllm_service_container_log_max_file')
DEFAULT_ULIMITS = {'memlock': -1, 'stack': 67108864}
RDMA_DEVICE = '/dev/infiniband:/dev/infiniband'


def docker_run(effective: dict[str, Any], layout: dict[str, Any], settings: dict[str, Any],
               host: str | None = None) -> tuple[dict[str, Any], list[str], list[str]]:
    """-> ({'docker_run': [word, ...], 'devices': [...], 'cache_volumes': {host dir: container dir}}, errors, warnings)

    The rank's ``docker run`` argv, every word after ``run`` up to the image (the unit appends the image's Id, known on
    the node only), one word per item. effective: ds4_effective of the host (its recipe's container, model, role);
    layout: service_layout()'s; settings: the ARGV_VARS values as the role reads them (role_inputs.argv_settings: the
    inventory's or the role's default, switches as booleans). The argv's rules are checked here, once, before any
    host changes (argv_problems); a bad log setting is role_inputs.setting_problems' refusal (no argv then). The
    warnings: a privileged container, or a recipe asking for one that the role runs with named capabilities."""
    role = effective['role']
    c = effective.get('container') or {}
    warnings: list[str] = []
    try:
        log_args = docker_log_args(settings.get('vllm_service_container_log_driver'),
                                   settings.get('vllm_service_container_log_max_size'),
                                   settings.get('vllm_service_container_log_max_file'))
    except ValueError:
        return {}, [], []  # refused by role_inputs.setting_problems, naming the variable
    words = ['--rm', '--name', layout['container_name'], '--init', '--restart', 'no',
             '--network', str(c.get('network') or 'host'), '--ipc', str(c.get('ipc') or 'host')]
    if c.get('shm_size'):
        words += ['--shm-size', str(c['shm_size'])]
    ulimits = settings.get('vllm_service_ulimits')
    for name, value in (ulimits if ulimits is not None else (c.get('ulimits') or DEFAULT_ULIMITS)).items():
        value = str(value)
        words += ['--ulimit', '%s=%s' % (name, value if ':' in value else '%s:%s' % (value, value))]
    if settings.get('vllm_service_privileged'):
        words.append('--privileged')
        warnings.append('vllm_service_privileged is true: the vLLM container gets every device and capability of the node. '
                        'Prefer named capabilities (vllm_service_capabilities) and devices.')
    else:
        for cap in settings.get('vllm_service_capabilities') or []:
            words += ['--cap-add', cap]
        if c.get('privileged'):
            warnings.append('ds4_effective.container.privileged is true (the profile copies seed 000), but the container runs '
                            'with the named capabilities %s and devices instead. Set vllm_service_privileged: true only if a '
                            'named capability is proven insufficient.' % list(settings.get('vllm_service_capabilities') or []))
    if settings.get('vllm_service_gpu'):
        if c.get('runtime'):
            words += ['--runtime', str(c['runtime'])]
        words += ['--gpus', str(c.get('gpus') or 'all')]
    rdma = settings.get('vllm_service_rdma_devices')
    devices: list[str] = []
    for dev in list(c.get('devices') or []) + ([RDMA_DEVICE] if rdma else []):
        # without the RDMA devices no /dev/infiniband entry of the recipe either; never an empty word
        if dev and not (not rdma and dev.startswith('/dev/infiniband')) and dev not in devices:
            devices.append(dev)
    for dev in devices:
        words += ['--device', dev]
    if c.get('memory'):
        words += ['--memory', str(c['memory'])]
    # One logging driver, never journald (the attached output is already in the unit's journal): none, or a bounded
    # json-file (vllm_service_container_log_driver).
    words += log_args
    script, env_file = layout['script_path'], layout['env_file_path']
    model = effective['model']
    words += ['--label', 'org.dgxspark.ds4.role=' + role,
              '--label', 'org.dgxspark.ds4.unit=' + layout['unit_name'],
              '--env-file', env_file,
              '--env-file', layout['secrets_path'],
              '-v', '%s:%s:ro' % (script, script),
              '-v', '%s:%s:ro' % (env_file, env_file),
              '-v', '%s:%s:ro' % (model['host_dir'], model['container_dir'])]
    cache_volumes = dict(settings.get('vllm_service_extra_cache_volumes') or {})
    cache_volumes.update(c.get('cache_volumes') or {})
    for host_dir, cont_dir in cache_volumes.items():
        words += ['-v', '%s:%s' % (host_dir, cont_dir)]
    for vol in c.get('volumes') or []:
        words += ['-v', vol]
    words += ['--entrypoint', script]
    if host:
        warnings = ['[host %s] %s' % (host, w) for w in warnings]
    return {'docker_run': words, 'devices': devices, 'cache_volumes': cache_volumes}, argv_problems(words, host), warnings


def _mounts(words: list[str]) -> list[tuple[str, str, bool]]:
    """(container path, host path, read-only) of every -v of a docker run argv, in order."""
    out = []
    for i, word in enumerate(words[:-1]):
        if word == '-v':
            parts = words[i + 1].split(':')
            out.append((parts[1] if len(parts) > 1 else parts[0], parts[0], 'ro' in parts[2:]))
    return out


def argv_problems(words: list[str], host: str | None = None) -> list[str]:
    """The rules of the unit's docker run argv that its inputs decide, beyond how docker_run() builds it (one log
    driver from docker_log_args, the launch script as a read-only bind of the same host path, the entrypoint): no
    container path mounted twice (a recipe's volume or a cache volume over the launch script, nccl.env, the model or
    another volume: Docker refuses a duplicate mount point at every start, a restart storm, or shadows the launch
    script). The node checks only that the host paths exist (roles/vllm_service/files/verify_unit.py)."""
    targets: dict[str, list[str]] = {}
    for target, source, _ro in _mounts(words):
        targets.setdefault(target, []).append(source)
    return [_err('ds4_profile_config.container.volumes / container.cache_volumes / vllm_service_extra_cache_volumes', target,
                 'this container path is mounted %d times (from %s): Docker refuses a duplicate mount point at every start'
                 % (len(sources), ', '.join(sources)),
                 'mount each container path once (the collection mounts the launch script, nccl.env and the model directory)',
                 host)
            for target, sources in targets.items() if len(sources) > 1]


def publish(effective: dict[str, Any], layout_values: dict[str, Any], settings: dict[str, Any],
            host: str | None = None) -> tuple[list[str], list[str]]:
    """Set ds4_effective['service'] (and 'unit_name') of a host: its layout and its docker run argv (docker_run()).

    layout_values: the LAYOUT_VARS the inventory sets, untemplated (service_layout()); settings: as for docker_run().
    -> (errors, warnings), one line each."""
    layout, errors = service_layout(effective['role'], layout_values, host)
    run, run_errors, warnings = docker_run(effective, layout, settings, host) if not errors else ({}, [], [])
    layout.update(run)
    effective['service'] = layout
    effective['unit_name'] = layout['unit_name']
    return errors + run_errors, warnings
