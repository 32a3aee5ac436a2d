# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: vllm_image_check
short_description: Check the effective config against the vLLM version the image itself carries
version_added: 0.2.0
description:
  - The version dgxspark.ds4.container_image read from the image decides the flag schema. A declared
    C(image.vllm_version) of another major.minor is refused naming both versions, the variable and the fix;
    otherwise serve_args and env are checked against the flag schema of the image's own version (the nearest
    published schema of the same minor, as the config role does for the declared version).
  - The logic is C(check_image_vllm) in C(plugins/plugin_utils/ds4_config.py); the schemas are
    C(plugins/plugin_utils/vllm_schemas/).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: C(ds4_effective) of the node (role dgxspark.ds4.config).
    type: dict
    required: true
  version:
    description: The vLLM version read from the image (C(container_image_vllm_version)).
    type: str
    required: true
  image:
    description: The image named in the messages (default C(ds4_effective.image.ref)).
    type: str
'''

EXAMPLES = r'''
- name: Check the flags against the image's own vLLM
  ansible.builtin.set_fact:
    image_check: "{{ ds4_effective | dgxspark.ds4.vllm_image_check(container_image_vllm_version) }}"
'''

RETURN = r'''
_value:
  description: C(errors) (refusals, each naming the variable, the value and the fix), C(warnings), C(version).
  type: dict
'''

from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config


def vllm_image_check(effective, version, image=None):
    if not isinstance(effective, dict) and not hasattr(effective, 'items'):
        raise AnsibleFilterError('vllm_image_check: the input must be ds4_effective (a mapping), got %r' % (type(effective),))
    errors, warnings = ds4_config.check_image_vllm(dict(effective), None if version is None else str(version), image)
    return {'errors': errors, 'warnings': warnings, 'version': version}


class FilterModule(object):
    def filters(self):
        return {'vllm_image_check': vllm_image_check}
