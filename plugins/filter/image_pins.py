# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: image_pins
short_description: Decide which images and DeepGEMM commit dgxspark.ds4.container_image uses, and which it prunes
version_added: 0.2.0
description:
  - The decisions of the image role over its record on the head (C(container_image_pins_path)); the logic is
    in C(plugins/plugin_utils/image_pins.py).
  - V(plan) says what to obtain (V(obtain) first time, V(keep) the recorded image, V(pull-digest), V(reobtain),
    V(refresh) on C(container_image_update)).
  - V(settle) returns the pinned image ID after obtaining, the new record and the messages (moved, tag drift).
  - V(deepgemm) chooses the DeepGEMM commit (pinned, recorded, or resolve); V(deepgemm_settle) records a
    resolved commit.
  - V(prune) lists derived images of this collection (by its label) that are not kept.
  - V(cache_plan) and V(cache_record) are the derived-image cache (C(plugins/plugin_utils/image_cache.py)), to keep,
    tag again, restore (C(docker load)), build or refuse; then the cache index, the tarball to save and the ones to drop.
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description: >-
      The parsed record (V(plan), V(settle), V(deepgemm), V(deepgemm_settle)), the image infos (V(prune)) or the
      cache index (V(cache_plan), V(cache_record)).
    type: raw
    required: true
  step:
    description: Which decision.
    type: str
    choices: [plan, settle, deepgemm, deepgemm_settle, prune, cache_plan, cache_record]
    required: true
  ref:
    description: The image tag reference (V(plan), V(settle)).
    type: str
  update:
    description: C(container_image_update).
    type: bool
    default: false
  source:
    description: C(container_image_source).
    type: str
    default: pull
  recorded_present:
    description: V(plan) only, the recorded image is on the node.
    type: bool
    default: false
  tag_image:
    description: V(settle) only, image info of what the tag points to now.
    type: dict
  recorded_image:
    description: V(settle) only, image info of the recorded image ID.
    type: dict
  repo:
    description: DeepGEMM repository (V(deepgemm), V(deepgemm_settle)).
    type: str
  pinned:
    description: C(container_image_deepgemm_ref) (V(deepgemm)).
    type: str
    default: ''
  choice:
    description: The result of V(deepgemm) (V(deepgemm_settle)).
    type: dict
  resolved:
    description: Output of the resolve command, C(git ls-remote) format (V(deepgemm_settle)).
    type: str
  keep_ids:
    description: Image IDs to keep (V(prune)).
    type: list
    elements: str
  texts:
    description: Texts whose image IDs are kept too, e.g. the live and the kept unit files (V(prune)).
    type: list
    elements: str
  repository:
    description: C(container_image_derived_repository) (V(prune)); a candidate is tagged C(<repository>:<inputs hash[:16]>).
    type: str
  key:
    description: The build inputs' content hash (V(cache_plan), V(cache_record)).
    type: str
  images:
    description: Docker image infos of the derived ref and the recorded IDs (V(cache_plan)).
    type: list
    elements: dict
  tarball_present:
    description: C(<key>.tar) exists in the cache directory (V(cache_plan), V(cache_record)).
    type: bool
    default: false
  rebuild:
    description: C(container_image_rebuild) (V(cache_plan)).
    type: bool
    default: false
  cache_dir:
    description: C(container_image_cache_dir) (V(cache_plan)).
    type: str
  image_id:
    description: The derived image's ID after this run (V(cache_record)).
    type: str
  free_bytes:
    description: Free bytes where the cache is (V(cache_record)).
    type: int
  size_bytes:
    description: The derived image's size in bytes (V(cache_record)).
    type: int
'''

EXAMPLES = r'''
- name: Plan what to obtain
  ansible.builtin.set_fact:
    pin_plan: "{{ pins | dgxspark.ds4.image_pins('plan', ref='ghcr.io/x/y:latest', update=false, source='pull') }}"
'''

RETURN = r'''
_value:
  description: The decision (a dict; a list of C({id, tags}) for V(prune)).
  type: raw
'''

from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import image_cache
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import image_pins as logic


def image_pins(data, step, ref=None, update=False, source='pull', recorded_present=False, tag_image=None,
               recorded_image=None, repo=None, pinned='', choice=None, resolved=None, keep_ids=None, texts=None,
               repository=None, key=None, images=None, tarball_present=False, rebuild=False, cache_dir=None, image_id=None,
               free_bytes=None, size_bytes=None):
    if step == 'plan':
        return logic.plan(data, ref, bool(update), source, bool(recorded_present))
    if step == 'settle':
        return logic.settle(data, ref, bool(update), source, tag_image or None, recorded_image or None)
    if step == 'deepgemm':
        return logic.deepgemm_choice(data, repo, pinned or '', bool(update))
    if step == 'deepgemm_settle':
        return logic.deepgemm_settle(data, repo, choice or {}, resolved)
    if step == 'prune':
        keep = list(keep_ids or []) + sorted(logic.referenced_ids(texts))
        return logic.prune_plan(data, keep, repository)
    try:
        if step == 'cache_plan':
            return image_cache.plan(data, key, ref, images, bool(tarball_present), bool(rebuild), cache_dir)
        if step == 'cache_record':
            return image_cache.record(data, key, ref, image_id, bool(tarball_present), free_bytes, size_bytes)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))
    raise AnsibleFilterError('image_pins: unknown step %r' % (step,))


class FilterModule(object):
    def filters(self):
        return {'image_pins': image_pins}
