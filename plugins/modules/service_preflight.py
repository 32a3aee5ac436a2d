#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: service_preflight
short_description: What the vllm_service role reads on a node before it changes anything, in one run (read-only)
version_added: 0.2.0
description:
  - One read of the node for the role C(dgxspark.ds4.vllm_service) (its preflight and its restart plan), where each
    used to be a module run of its own - the docker CLI, the image, the engine's runtimes, the devices, the unit's
    drop-ins, the unit file and the pending-restart marker, the units' state, the compile cache.
  - The docker CLI (O(docker_bin)) - whether it exists and is executable - and, through it, the Id of O(image)
    (C(docker image inspect)) and, when O(runtimes=true), the engine's runtimes (C(docker info)). Neither is looked up
    when the CLI is missing.
  - The drop-ins of O(unit) that the collection did not write (the node package's C(verify_unit) check, the same as
    C(verify-unit --dropins)), and whether systemd loads it from O(unit_file).
  - Whether each of O(devices) and O(paths) exists, and C(LoadState), C(ActiveState), C(UnitFileState) of each of
    O(units) (one C(systemctl show)).
  - With O(compile_cache), whether that compile cache is warm for the image found (C(dgxspark.ds4.compile_cache)'s
    verdict).
  - With O(verify), each installed unit file is checked as the node script C(verify-unit) (the unit template's
    validate command) checks it - every path it references exists, C(systemd-analyze verify) accepts it - and the run
    fails naming every problem (a file removed since the unit was written). Everything else it only reports; the
    role's asserts refuse, each with its own message and fix.
  - Its action plugin runs the same code directly through the connection (no module upload) where the connection
    pipelines and the node's Python is known; this module otherwise.
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Reads only.
  diff_mode:
    support: none
options:
  docker_bin:
    description: The docker CLI the unit and its prestart run. Without it the CLI, the image and the runtimes are not
      read.
    type: path
  image:
    description: The image the unit runs (a reference or an Id). Requires O(docker_bin).
    type: str
  runtimes:
    description: Also read the Docker engine's runtimes (the GPU check).
    type: bool
    default: false
  devices:
    description: Host paths of the devices passed to the container.
    type: list
    elements: path
    default: []
  unit:
    description: The unit whose drop-ins are checked. Without it no drop-in is checked.
    type: str
  unit_file:
    description: Where the collection writes O(unit) (systemd must load it from there). Required with O(unit).
    type: path
  allowed:
    description: Drop-ins of O(unit) adopted on purpose (vllm_service_allowed_dropins).
    type: list
    elements: str
    default: []
  paths:
    description: Paths whose existence is reported.
    type: list
    elements: path
    default: []
  units:
    description: Units whose C(LoadState), C(ActiveState) and C(UnitFileState) are reported.
    type: list
    elements: str
    default: []
  compile_cache:
    description: The compile cache to judge for the image found; omitted, none is.
    type: dict
    suboptions:
      path:
        description: The cache's host directory.
        type: path
        required: true
      launch_digest:
        description: The digest of the launch flags and env that the cache's marker must carry.
        type: str
      custom_ops_all:
        description: The recipe compiles custom_ops C(["all"]) (a cold cache is a warning on a small node).
        type: bool
        default: false
      node_memory_gib:
        description: The node's memory in GiB.
        type: int
  verify:
    description: Installed unit files to verify (the run fails naming every problem).
    type: list
    elements: dict
    default: []
    suboptions:
      unit_file:
        description: The unit file.
        type: path
        required: true
      unit:
        description: The name it is installed as.
        type: str
        required: true
      docker_cli:
        description: The docker CLI it runs, when it is not named C(docker).
        type: path
'''

EXAMPLES = r'''
- name: What the node has
  dgxspark.ds4.service_preflight:
    docker_bin: /usr/bin/docker
    image: vllm/vllm-openai:v0.27.1
    unit: dgxspark-ds4-head.service
    unit_file: /etc/systemd/system/dgxspark-ds4-head.service
    paths: [/etc/systemd/system/dgxspark-ds4-head.service, /var/lib/dgxspark-ds4/restart-pending-head]
    units: [dgxspark-ds4-head.service]
  register: node
'''

RETURN = r'''
docker_cli:
  description: The docker CLI (null without O(docker_bin)).
  returned: always
  type: dict
  sample: {"path": "/usr/bin/docker", "exists": true, "executable": true}
image:
  description: The image's Id, or null and the CLI's error (null without O(image)).
  returned: always
  type: dict
  sample: {"ref": "vllm/vllm-openai:v0.27.1", "id": "sha256:4f2a...", "error": null}
runtimes:
  description: The engine's runtime names (null unless O(runtimes=true)).
  returned: always
  type: dict
  sample: {"names": ["nvidia", "runc"], "error": null}
devices:
  description: Device path -> exists.
  returned: always
  type: dict
dropins:
  description: The drop-in check's problems and report (null without O(unit)).
  returned: always
  type: dict
  sample: {"problems": [], "msg": "dgxspark-ds4 verify-unit dgxspark-ds4-head.service: no foreign drop-in (none allowed)"}
paths:
  description: Path -> exists.
  returned: always
  type: dict
units:
  description: Unit -> its LoadState, ActiveState and UnitFileState (empty strings where systemctl said nothing).
  returned: always
  type: dict
  sample: {"dgxspark-ds4-head.service": {"LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled"}}
compile_cache:
  description: The compile cache's verdict (state, warm, msg, warning, artifacts, marker), or null.
  returned: always
  type: dict
verify:
  description: One line per problem of the units in O(verify) (empty when every one passed).
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._service import service_preflight


def main():
    module = AnsibleModule(argument_spec=service_preflight.ARGUMENT_SPEC, required_by=service_preflight.REQUIRED_BY,
                           supports_check_mode=True)
    result = service_preflight.preflight(module.params, module.run_command)
    if result.get('failed'):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
