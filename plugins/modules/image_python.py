#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: image_python
short_description: Find the Python that runs vLLM inside a container image
version_added: 0.1.0
description:
  - Runs a POSIX C(sh) probe in a throw-away container of O(image) (C(docker run --rm --network none
    --entrypoint /bin/sh)), so the image's own C(ENV PATH) applies, and returns the first Python that has vLLM
    (the C(vllm) package importable, or its dist-info installed).
  - "Order: the interpreter of the C(vllm) command on the image's PATH (its C(#!) line), C(python3) next to that
    command, C(python3) on the image's PATH, then O(known) (the b12x image keeps vLLM in the venv C(/opt/env))."
  - Read-only; the image is never changed.
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: The probe only reads; it runs in check mode too.
  diff_mode:
    support: none
options:
  image:
    description: Image reference or ID (present on the host).
    type: str
    required: true
  known:
    description: Absolute Python paths tried after the C(vllm) command and PATH (no spaces or quotes).
    type: list
    elements: str
    default: [/opt/env/bin/python3, /opt/venv/bin/python3, /usr/local/bin/python3, /usr/bin/python3]
  docker:
    description: The docker CLI.
    type: str
    default: docker
'''

EXAMPLES = r'''
- name: Which Python runs vLLM in the base image
  dgxspark.ds4.image_python:
    image: "{{ container_image_base_id }}"
  register: found
'''

RETURN = r'''
python:
  description: The Python that has vLLM (a path, or C(python3) when found on the image's PATH).
  returned: success
  type: str
  sample: /opt/env/bin/python3
found:
  description: How it was found.
  returned: success
  type: str
  sample: interpreter of the vllm command /opt/env/bin/vllm
vllm:
  description: Where that Python finds vLLM (package directory, or the dist-info when only that is installed).
  returned: success
  type: str
  sample: /opt/env/lib/python3.12/site-packages/vllm
vllm_command:
  description: The C(vllm) command on the image's PATH, or null.
  returned: always
  type: str
  sample: /opt/env/bin/vllm
tried:
  description: One line per Python tried, with how it was found and the result.
  returned: always
  type: list
  elements: str
  sample: ["python3 (python3 on the image PATH (/usr/bin/python3)): no vllm"]
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._image.image_python import KNOWN_PYTHONS, parse, probe_argv


def main():
    module = AnsibleModule(
        argument_spec=dict(
            image=dict(type='str', required=True),
            known=dict(type='list', elements='str', default=list(KNOWN_PYTHONS)),
            docker=dict(type='str', default='docker'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        argv = probe_argv(p['image'], known=p['known'], docker=p['docker'])
    except ValueError as exc:
        module.fail_json(msg='known: %s. Fix: list absolute paths without spaces or quotes.' % exc)
    rc, out, err = module.run_command(argv)
    result = parse(rc, out, err, p['image'])
    error = result.pop('error')
    if error:
        module.fail_json(msg=error, **result)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
