# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a deploy takes as it finds it today: inputs that are not pinned, each with what pins it.

Pure Python (no Ansible imports). site.yml prints the list once per run (filter dgxspark.ds4.unpinned_inputs).

API:
  unpinned(effective, model_source='hub', image_source='pull') -> [str]   one line per unpinned input
"""


from typing import Any

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import catalogue, image_pins


def unpinned(effective: dict[str, Any] | None, model_source: str = 'hub', image_source: str = 'pull') -> list[str]:
    """One line per unpinned input of ds4_effective: the model revision (null) and a pulled image named by a tag
    (no @sha256 digest). A built or loaded image (image_source build/tarball) has no registry digest to pin."""
    out = []
    eff = effective or {}
    model = eff.get('model') or {}
    if model.get('repo_id') and model.get('revision') in (None, ''):
        var, how = catalogue.revision_fix({'model': eff.get('model_name')}, model.get('repo_id'))
        served = ('the copy in model_cache_local_dir is served as it is' if model_source == 'local' else
                  'whatever main points to on the Hub when a node downloads it')
        out.append('model revision of %s: null (%s). Pin it: %s' % (model['repo_id'], served, how))
    ref = (eff.get('image') or {}).get('ref')
    if ref and image_source == 'pull':
        repo, tag, digest = image_pins.split_ref(ref)
        if not digest:
            out.append('image %s: a tag, not a digest (the first run records the image the tag names then in '
                       '/var/lib/dgxspark-ds4/image-pins.json and keeps it; a new node or container_image_update=true '
                       'takes what it names that day). Pin it: ds4_site_overrides.image.ref: %s@sha256:<digest>, the '
                       'digest from `docker images --digests %s` on the head (or `docker buildx imagetools inspect %s`)'
                       % (ref, repo if tag is None else '%s:%s' % (repo, tag), repo, ref))
    return out
