# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: unpinned_inputs
short_description: The inputs of a deploy that are not pinned, each with what pins it
version_added: 0.2.0
description:
  - One line per unpinned input of C(ds4_effective) - the model revision (null) and a pulled image named by a tag, not
    a digest - each naming the variable and the command that pins it. site.yml prints them once per run.
  - The logic is in C(plugins/plugin_utils/unpinned.py).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: C(ds4_effective).
    type: dict
    required: true
  model_source:
    description: C(model_cache_source) (hub or local).
    type: str
    default: hub
  image_source:
    description: C(container_image_source) (pull, build or tarball; only a pulled image has a registry digest).
    type: str
    default: pull
'''

EXAMPLES = r'''
- name: Unpinned inputs
  ansible.builtin.debug:
    msg: "{{ ds4_effective | dgxspark.ds4.unpinned_inputs(model_source='hub', image_source='pull') }}"
'''

RETURN = r'''
_value:
  description: One sentence per unpinned input; empty when everything is pinned.
  type: list
  elements: str
'''

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.unpinned import unpinned


def unpinned_inputs(effective, model_source='hub', image_source='pull'):
    return unpinned(effective, model_source, image_source)


class FilterModule(object):
    def filters(self):
        return {'unpinned_inputs': unpinned_inputs}
