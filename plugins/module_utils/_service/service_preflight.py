# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What dgxspark.ds4.vllm_service's preflight and restart plan read on a node, in one run: the module
dgxspark.ds4.service_preflight and its action's direct run (plugins/action/service_preflight.py: this file's source
and the collection files it imports, sent through the connection to the node's Python, no module upload) both call
``preflight``.

Read only. One run answers what were six module runs of the role (the image, the compile cache, the docker CLI, the
drop-ins, the unit file and restart marker, the unit's state): each cost a round trip to every node of the pair, on the
critical path of every deploy that changes a launch flag (issue 47, docs/measurements.md). The role's asserts read the
result and refuse with their own messages; nothing here decides.

  docker_cli   the CLI the unit and prestart run (vllm_service_docker_bin): exists, executable
  image        ``<docker_cli> image inspect --format {{.Id}} <image>``: its Id, or None and the CLI's error (not run
               when the CLI is missing: the role names that first)
  runtimes     ``<docker_cli> info --format {{json .Runtimes}}``: the engine's runtime names (only when asked: the GPU
               check)
  devices      each device path passed to the container: whether it exists
  dropins      verify_unit.check_unit_dropins (the node package's check, shared with ``verify-unit --dropins``)
  paths        each path: whether it exists (the unit file, the pending-restart marker)
  units        ``systemctl show -p LoadState,ActiveState,UnitFileState`` of each unit (one call for all)
  compile_cache  compile_cache.verdict for the image found (custom_ops ["all"] only; None otherwise)
  verify       verify_unit.unit_problems of each installed unit (every path it references exists, systemd-analyze
               verify accepts it): the one part that refuses - the run fails naming every problem, as the node script
               `verify-unit` (the unit file's validate command) exits 1 with them

Python standard library only.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Mapping, Tuple

from ansible_collections.dgxspark.ds4.plugins.module_utils._image import compile_cache
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe, verify_unit
# the direct run's runner (node_probe's: LC_ALL=C, no pager, as a module runs a command); the module passes its own
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.node_probe import run_command

Runner = Callable[[List[str]], Tuple[int, str, str]]
# The module's options (plugins/modules/service_preflight.py documents them), validated the same way by its action's
# direct run (plugins/action/service_preflight.py).
ARGUMENT_SPEC: Dict[str, Any] = dict(
    docker_bin=dict(type='path'),
    image=dict(type='str'),
    runtimes=dict(type='bool', default=False),
    devices=dict(type='list', elements='path', default=[]),
    unit=dict(type='str'),
    unit_file=dict(type='path'),
    allowed=dict(type='list', elements='str', default=[]),
    paths=dict(type='list', elements='path', default=[]),
    units=dict(type='list', elements='str', default=[]),
    compile_cache=dict(type='dict', options=dict(
        path=dict(type='path', required=True),
        launch_digest=dict(type='str'),
        custom_ops_all=dict(type='bool', default=False),
        node_memory_gib=dict(type='int'),
    )),
    verify=dict(type='list', elements='dict', default=[], options=dict(
        unit_file=dict(type='path', required=True),
        unit=dict(type='str', required=True),
        docker_cli=dict(type='path'),
    )),
)
REQUIRED_BY = dict(unit=['unit_file'], image=['docker_bin'])
UNIT_PROPS = ('LoadState', 'ActiveState', 'UnitFileState')


def _docker_cli(path: str | None) -> Dict[str, Any] | None:
    if not path:
        return None
    return {'path': path, 'exists': os.path.exists(path),
            'executable': os.path.isfile(path) and os.access(path, os.X_OK)}


def _image(run: Runner, cli: Mapping[str, Any] | None, image: str | None) -> Dict[str, Any] | None:
    if not image or not cli:
        return None
    if not cli['executable']:
        return {'ref': image, 'id': None, 'error': 'not looked up: the docker CLI %s is missing' % cli['path']}
    rc, out, err = run([cli['path'], 'image', 'inspect', '--format', '{{.Id}}', image])
    found = out.strip().splitlines()
    if rc == 0 and len(found) == 1 and found[0]:
        return {'ref': image, 'id': found[0], 'error': None}
    return {'ref': image, 'id': None, 'error': (err or out).strip()[-500:] or 'rc %s' % rc}


def _runtimes(run: Runner, cli: Mapping[str, Any] | None) -> Dict[str, Any]:
    if not cli or not cli['executable']:
        return {'names': [], 'error': 'not looked up: the docker CLI %s is missing' % (cli or {}).get('path')}
    rc, out, err = run([cli['path'], 'info', '--format', '{{json .Runtimes}}'])
    try:
        names = sorted(json.loads(out)) if rc == 0 else None
    except ValueError:
        names = None
    if names is None:
        return {'names': [], 'error': (err or out).strip()[-500:] or 'rc %s' % rc}
    return {'names': names, 'error': None}


def _units(run: Runner, units: List[str]) -> Dict[str, Dict[str, str]]:
    if not units:
        return {}
    argv = ['systemctl', 'show'] + list(units) + ['-p', ','.join(UNIT_PROPS)]
    rc, out, dummy = run(argv)
    blocks = node_probe.parse_units_show(out) if rc == 0 else []
    if len(blocks) != len(units):
        blocks = [{} for dummy_unit in units]
    return dict((unit, dict((prop, block.get(prop, '')) for prop in UNIT_PROPS)) for unit, block in zip(units, blocks))


def preflight(params: Mapping[str, Any], run: Runner = run_command, check_mode: bool = False) -> Dict[str, Any]:
    """The module's result (params: its options). `check_mode` is unused: it only reads."""
    del check_mode
    cli = _docker_cli(params['docker_bin'])
    image = _image(run, cli, params['image'])
    result: Dict[str, Any] = {'changed': False, 'docker_cli': cli, 'image': image}
    result['runtimes'] = _runtimes(run, cli) if params.get('runtimes') else None
    result['devices'] = dict((path, os.path.exists(path)) for path in params.get('devices') or [])
    if params.get('unit'):
        problems, lines = verify_unit.check_unit_dropins(params['unit'], params['unit_file'], params.get('allowed') or [],
                                                         runner=run)
        result['dropins'] = {'problems': problems, 'msg': '\n'.join(lines)}
    else:
        result['dropins'] = None
    result['paths'] = dict((path, os.path.lexists(path)) for path in params.get('paths') or [])
    result['units'] = _units(run, list(params.get('units') or []))
    cache = params.get('compile_cache')
    if cache and image and image['id']:
        info = compile_cache.inspect(cache['path'])
        verdict = compile_cache.verdict(info, cache['path'], image['id'], bool(cache.get('custom_ops_all')),
                                        cache.get('node_memory_gib'), cache.get('launch_digest'))
        verdict.update(artifacts=info['artifacts'], marker=info['marker'])
        result['compile_cache'] = verdict
    else:
        result['compile_cache'] = None
    lines = []
    for unit in params.get('verify') or []:
        try:
            problems = verify_unit.unit_problems(unit['unit_file'], unit['unit'], unit.get('docker_cli'))
        except OSError as exc:
            problems = ['cannot read %s: %s' % (unit['unit_file'], exc)]
        lines.extend('%s %s: %s' % (verify_unit.TAG, unit['unit'], problem) for problem in problems)
    result['verify'] = lines
    if lines:
        result.update(failed=True, msg='\n'.join(lines))
    return result
