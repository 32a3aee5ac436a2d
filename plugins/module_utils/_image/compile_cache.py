# -*- coding: utf-8 -*-
# Copyright (c) dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is vLLM's torch.compile cache on a node warm for the image about to start?

``custom_ops: ["all"]`` compiles fusion kernels at start. Seed 002 froze both nodes with it on 96 GB GB10s and says
the path "remains usable only if compiled kernels are cached (persistent volume mount)". The config role refuses
it without a cache volume (ds4_config.check_merged); this module looks into that volume on the node:

* **vLLM's own layout** (vllm/compilation/backends.py; vLLM's torch_compile design doc): the cache directory is
  ``$VLLM_CACHE_ROOT/torch_compile_cache`` (or ``--compilation-config`` ``cache_dir``), one ``<hash>/`` per
  configuration (the hash covers vLLM's configs, torch's and the model's forward code), ``rank_<r>_<dp>/`` per rank,
  the compiled artifacts below. Non-empty means at least one file under a ``<hash>/rank_*/`` directory.
* **Which image wrote it**: the hash does not name the image, so the collection writes :data:`MARKER` into the
  cache directory after the pair passed readiness (``state=present``: the image ID of the running container and
  the digest of the flags and env it was launched with, ds4_config.compile_cache_plan ``launch_digest``).
  Warm = non-empty, marked by the image about to start, with the same flags and env (conservative: any change of
  flags or env counts as cold, as vLLM's own hash covers most of them).

:func:`verdict` turns that into a state and, for ``custom_ops ["all"]`` on a cold cache of a node of at most
:data:`SMALL_NODE_GIB` GiB, the warning in seed 002's words.
"""

from __future__ import annotations


import json
import os
from typing import Any

MARKER = '.dgxspark-ds4-compiled-by.json'
SMALL_NODE_GIB = 96
# Enough to tell non-empty from empty without walking a large cache.
COUNT_LIMIT = 1000

# Seed 002 ("The CUDA Graph Crash"), quoted.
SEED_002_CRASH = ('The crash was caused by custom_ops: ["all"] in the --compilation-config, which triggers nvcc/cicc '
                  'compilation of fusion kernels. On GB10 with only ~3 GiB RAM available during model load (CUDA allocates '
                  '~95 GiB), the TileLang JIT compilation exhausts system memory and causes a full system freeze.')
SEED_002_CACHE = ('The custom_ops: ["all"] path remains usable only if compiled kernels are cached (persistent volume '
                  'mount). First-run compilation needs system RAM headroom.')


def host_path(container_path: str, cache_volumes: dict[str, Any] | None) -> str | None:
    """The host path of ``container_path`` through ``cache_volumes`` ({host dir: container dir}), or None."""
    best: tuple[str, str] | None = None
    for host_dir, cont_dir in (cache_volumes or {}).items():
        if not isinstance(host_dir, str) or not isinstance(cont_dir, str) or not cont_dir.startswith('/'):
            continue  # ds4_config._cache_volumes reports it
        cont = cont_dir.rstrip('/') or '/'
        if container_path == cont or container_path.startswith(cont + '/'):
            if best is None or len(cont) > len(best[1]):
                best = (host_dir, cont)
    if best is None:
        return None
    rest = container_path[len(best[1]):].lstrip('/')
    return os.path.join(best[0], rest) if rest else best[0]


def inspect(path: str, limit: int = COUNT_LIMIT) -> dict[str, Any]:
    """What the torch.compile cache directory ``path`` (host side) holds.

    Returns ``{'exists', 'hash_dirs', 'artifacts', 'marker', 'marker_error'}``: ``artifacts`` counts files under
    ``<hash>/rank_*/`` (up to ``limit``), ``marker`` the parsed :data:`MARKER` (None when absent or unreadable).
    """
    out: dict[str, Any] = {'exists': os.path.isdir(path), 'hash_dirs': [], 'artifacts': 0, 'marker': None, 'marker_error': None}
    if not out['exists']:
        return out
    for name in sorted(os.listdir(path)):
        hash_dir = os.path.join(path, name)
        if name.startswith('.') or not os.path.isdir(hash_dir):
            continue
        out['hash_dirs'].append(name)
        for rank in sorted(os.listdir(hash_dir)):
            rank_dir = os.path.join(hash_dir, rank)
            if not rank.startswith('rank_') or not os.path.isdir(rank_dir):
                continue
            for _root, _dirs, files in os.walk(rank_dir):
                out['artifacts'] = min(limit, out['artifacts'] + len(files))
                if out['artifacts'] >= limit:
                    break
            if out['artifacts'] >= limit:
                break
    marker = os.path.join(path, MARKER)
    if os.path.isfile(marker):
        try:
            with open(marker) as handle:
                data = json.load(handle)
            if not isinstance(data, dict):
                raise ValueError('not a JSON object')
            out['marker'] = data
        except (OSError, ValueError) as exc:
            out['marker_error'] = '%s: %s' % (marker, exc)
    return out


def verdict(info: dict[str, Any], path: str, image_id: str, custom_ops_all: bool, node_memory_gib: Any,
            launch_digest: str | None = None) -> dict[str, Any]:
    """State of the cache for ``image_id``: ``{'state', 'warm', 'msg', 'warning'}``.

    state: ``warm`` (non-empty, marked by this image and flags), ``missing`` (no directory), ``empty`` (no compiled
    artifact), ``other-image`` (marked by another image), ``other-config`` (this image, other flags or env),
    ``unmarked`` (artifacts, but no start of this collection marked them: which image wrote them is unknown).
    ``warning`` is set for custom_ops ["all"] on a cold cache of a node of at most :data:`SMALL_NODE_GIB` GiB
    (seed 002's freeze).
    """
    marker = info.get('marker') or {}
    marked_by = marker.get('image_id')
    n = info.get('artifacts', 0)
    count = ('%d+' % n) if n >= COUNT_LIMIT else str(n)
    if not info.get('exists'):
        state, why = 'missing', '%s does not exist (nothing compiled yet)' % path
    elif n == 0:
        state, why = 'empty', '%s holds no compiled artifact (no <hash>/rank_*/ files)' % path
    elif not marked_by:
        state = 'unmarked'
        why = ('%s holds %s compiled file(s) but no %s (%s): which image wrote them is unknown'
               % (path, count, MARKER, info.get('marker_error') or 'no start of this collection passed readiness with it'))
    elif marked_by != image_id:
        state = 'other-image'
        why = ('%s holds %s compiled file(s) written by image %s, not %s (the image about to start): vLLM compiles '
               'its own again' % (path, count, marked_by, image_id))
    elif launch_digest and marker.get('launch_digest') != launch_digest:
        state = 'other-config'
        why = ('%s holds %s compiled file(s) written by this image with other flags or env (launch digest %s, now %s): '
               'vLLM compiles again for a changed configuration' % (path, count, marker.get('launch_digest'), launch_digest))
    else:
        state, why = 'warm', '%s holds %s compiled file(s) written by this image (%s)' % (path, count, image_id)
    out: dict[str, Any] = {'state': state, 'warm': state == 'warm', 'msg': 'compile cache %s: %s' % (state, why), 'warning': None}
    small = isinstance(node_memory_gib, int) and not isinstance(node_memory_gib, bool) and node_memory_gib <= SMALL_NODE_GIB
    if custom_ops_all and not out['warm'] and small:
        out['warning'] = (
            'custom_ops ["all"] starts with a cold compile cache on a %d GiB node: %s. Seed 002: "%s" and "%s" '
            'Fix: drop custom_ops from compilation-config for now (seed 002 settled on PIECEWISE without it), or copy a '
            'torch_compile_cache written by this image into %s (vLLM supports copying it), or accept the risk on the '
            'first start; once a start passes readiness the collection marks the cache and this warning stops.'
            % (node_memory_gib, why, SEED_002_CRASH, SEED_002_CACHE, path))
    return out


def marker_content(image_id: str, image_ref: str | None = None, launch_digest: str | None = None) -> str:
    """The marker's JSON text (stable: a second write with the same image and flags is no change)."""
    return json.dumps({'image_id': image_id, 'image_ref': image_ref, 'launch_digest': launch_digest,
                       'written_by': 'dgxspark.ds4 after the pair passed readiness'}, sort_keys=True, indent=2) + '\n'


def marker_matches(text: str | None, image_id: str | None, image_ref: str | None = None,
                   launch_digest: str | None = None) -> bool:
    """Whether the marker's text (None: no marker) records this image and launch as :func:`marker_content` writes it
    (compared parsed: the same record in other whitespace needs no write). The compile_cache module's state=present
    writes only when not; vllm_ready's polls read the marker, so a deploy that restarted nothing skips that run."""
    if not text or not image_id:
        return False
    try:
        return json.loads(text) == json.loads(marker_content(image_id, image_ref or None, launch_digest))
    except ValueError:
        return False
