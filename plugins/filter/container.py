# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the container image and the vLLM container: the image pins and cache, whether image work may run now,
the image's own vLLM version against the config, the unpinned inputs.

Documentation: plugins/filter/<name>.yml (one per filter)."""

import base64

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import image_cache
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import image_pins as pins
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.filter_base import Ds4FilterError, ds4_filter, filter_map
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.image_work_guard import GIB, plan as work_plan
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.unpinned import unpinned


@ds4_filter('image_pins')
def image_pins(data, step, ref=None, update=False, source='pull', recorded_present=False, tag_image=None,
               recorded_image=None, repo=None, pinned='', choice=None, resolved=None, keep_ids=None, texts=None,
               repository=None, key=None, images=None, tarball_present=False, rebuild=False, cache_dir=None, image_id=None,
               free_bytes=None, size_bytes=None):
    if step == 'plan':
        return pins.plan(data, ref, bool(update), source, bool(recorded_present))
    if step == 'settle':
        return pins.settle(data, ref, bool(update), source, tag_image or None, recorded_image or None)
    if step == 'deepgemm':
        return pins.deepgemm_choice(data, repo, pinned or '', bool(update))
    if step == 'deepgemm_settle':
        return pins.deepgemm_settle(data, repo, choice or {}, resolved)
    if step == 'prune':
        keep = list(keep_ids or []) + sorted(pins.referenced_ids(texts))
        return pins.prune_plan(data, keep, repository)
    if step == 'cache_plan':
        return image_cache.plan(data, key, ref, images, bool(tarball_present), bool(rebuild), cache_dir)
    if step == 'cache_record':
        return image_cache.record(data, key, ref, image_id, bool(tarball_present), free_bytes, size_bytes)
    raise Ds4FilterError('dgxspark.ds4.image_pins: unknown step %r (plan, settle, deepgemm, deepgemm_settle, prune, '
                         'cache_plan, cache_record)' % (step,))


@ds4_filter('image_work_plan', 'list')
def image_work_plan(units, meminfo, work, min_available_gib, rolling=False):
    nodes = []
    for unit, mem in zip(units, meminfo):
        if unit.get('item') != mem.get('item'):
            raise Ds4FilterError('dgxspark.ds4.image_work_plan: the unit and meminfo results are of other nodes (%s, %s)'
                                 % (unit.get('item'), mem.get('item')))
        nodes.append({'host': unit.get('item'), 'unit': unit.get('name'),
                      'active_state': (unit.get('status') or {}).get('ActiveState', ''),
                      'meminfo': base64.b64decode(mem['content']).decode('utf-8', 'replace') if mem.get('content') else ''})
    return work_plan(nodes, str(work), int(float(min_available_gib) * GIB), rolling=bool(rolling))


@ds4_filter('vllm_image_check', 'dict')
def vllm_image_check(effective, version, image=None):
    errors, warnings = ds4_config.check_image_vllm(dict(effective), None if version is None else str(version), image)
    return {'errors': errors, 'warnings': warnings, 'version': version}


@ds4_filter('unpinned_inputs', 'dict', none_ok=True)
def unpinned_inputs(effective, model_source='hub', image_source='pull'):
    return unpinned(effective, model_source, image_source)


class FilterModule(object):
    def filters(self):
        return filter_map(image_pins, image_work_plan, vllm_image_check, unpinned_inputs)
