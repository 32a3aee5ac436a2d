# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether image work (a pull, a load, a build, a docker save or the stream to the workers) may run beside the pair.

On GB10 the GPU's memory is the node's 128 GB of unified memory: a serving vLLM rank holds 0.80-0.90 of it, and a
process that runs the node out of memory freezes the whole machine (seed 002: a compiler beside a loaded model;
seed 000: ~3 GiB available during a load). Image work is such a process: the derived image's DeepGEMM C++/CUDA build,
docker's decompression of tens of GB of layers, a ``docker save`` of them. So, before each piece of image work, from
the node's ``MemAvailable`` (what the kernel can give without swapping: the page cache counts, it is reclaimed) and
the state of the vLLM unit on each node of the pair:

* no rank live (the pair is down): ``go``;
* a rank live and every node with at least ``min_available_bytes`` available: ``go``, the margin said;
* a rank live and a node short of it: in a rolling operation (``rolling``: the pair has left the routers' rotation
  and restarts on this change anyway) ``stop_pair`` (both ranks stopped, head first, before the work; the deploy's
  restart contract starts them, worker first); otherwise ``refuse``, naming the node, its MemAvailable, the setting
  and the ways on; nothing is pulled, built or saved.

``LIVE_STATES`` are the all-reduce guard's (``allreduce_guard``): one rule for "a rank holds its memory".

Pure Python (no Ansible imports).

API:
  plan(nodes, work, min_available_bytes, rolling=False) -> dict
"""


from collections.abc import Iterable
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.allreduce_guard import unit_live
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.node_probe import parse_meminfo

GIB = 1 << 30
SETTING = 'container_image_work_min_available_gib'


def _gib(nbytes: float) -> str:
    return '%.1f GiB' % (nbytes / float(GIB))


def plan(nodes: Iterable[dict[str, Any]] | None, work: str, min_available_bytes: int | str, rolling: bool = False) -> dict[str, Any]:
    """nodes: [{'host', 'unit', 'active_state', 'meminfo' (the text of /proc/meminfo)}], every node of the pair.
    work: what is about to run, in words ('the pull of <ref>'). Returns {'action': 'go'|'stop_pair'|'refuse',
    'live': ['host:unit (state)'], 'available': {host: bytes or None}, 'short': [hosts], 'msg': one line}."""
    nodes = list(nodes or [])
    need = int(min_available_bytes)
    live = ['%s:%s (%s)' % (n.get('host'), n.get('unit'), (n.get('active_state') or '').strip())
            for n in nodes if unit_live(n.get('active_state'))]
    available: dict[str, Any] = {}
    for n in nodes:
        available[str(n.get('host'))] = parse_meminfo(n.get('meminfo') or '', in_bytes=True).get('MemAvailable')
    # a node whose memory cannot be read counts as short: nothing is assumed about a node beside a live rank
    short = sorted(h for h, v in available.items() if v is None or v < need)
    figures = ', '.join('%s %s' % (h, _gib(available[h]) if available[h] is not None else 'unreadable')
                        for h in sorted(available))
    out = {'live': live, 'available': available, 'short': short}
    if not live:
        out.update(action='go', msg='container_image: %s: no vLLM rank of the pair is live; MemAvailable %s' % (work, figures))
    elif not short:
        out.update(action='go', msg=('container_image: %s beside live vLLM (%s): MemAvailable %s, at least %s on every node '
                                     '(%s)' % (work, ', '.join(live), figures, _gib(need), SETTING)))
    elif rolling:
        out.update(action='stop_pair', msg=(
            'container_image: %s needs %s available (%s) on every node of the pair; MemAvailable %s beside live vLLM (%s): '
            'the pair is out of rotation for this change and restarts with it, so both ranks stop now (head first), '
            'before the work, and start after it (worker first)' % (work, _gib(need), SETTING, figures, ', '.join(live))))
    else:
        out.update(action='refuse', msg=(
            'container_image: %s refused beside live vLLM (%s): MemAvailable %s, below %s = %s on %s (on GB10 image work '
            'beside a serving rank can run the node out of unified memory and freeze it, seed 002). Nothing was pulled, '
            'built or saved. Fix: run the change as a rolling operation (playbooks/upgrade.yml or switch.yml: each pair '
            'leaves the rotation and its ranks stop before the image work), stop the pair first, or set %s lower if '
            'the node has that memory to spare'
            % (work, ', '.join(live), figures, SETTING, _gib(need), ', '.join(short), SETTING)))
    return out
