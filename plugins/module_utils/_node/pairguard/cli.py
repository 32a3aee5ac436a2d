# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pair guard's command line: `python3 pairguard.py watch|reset-window CONFIG.json` (its argument and config
checks, then the watch loop or the storm window cleared).

The entry point roles/vllm_service/files/pairguard.py is this main and nothing else (dgxspark-ds4-pairguard.service
runs `watch`; playbooks that restart the pair deliberately run `reset-window`). Python 3 standard library only.
"""

# A node script's code, run by the node's own python3 (not an Ansible module): print is its I/O.
# pylint: disable=ansible-bad-function
from __future__ import annotations

import sys
from typing import List, Sequence

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import memory_guard
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import quality_canary
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.config import check_config
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.pair import TAG, read_config, say
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.state import reset_window
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.watch import watch_forever


def main(argv: Sequence[str]) -> int:
    """Exit status: 2 for a wrong command line or config, 1 for a config that cannot be read, 0 otherwise (watch
    returns only if its loop ends)."""
    if len(argv) != 3 or argv[1] not in ('watch', 'reset-window'):
        print('usage: %s watch|reset-window CONFIG.json' % argv[0], file=sys.stderr)
        return 2
    cfg, error = read_config(argv[2])
    if error:
        print(error, file=sys.stderr)
        return 1
    problems: List[str] = ((check_config(cfg) + memory_guard.check_config(cfg) + quality_canary.check_config(cfg))
                           if isinstance(cfg, dict) else ['the config is not a JSON object'])
    if problems:
        for problem in problems:
            print('%s: config %s: %s' % (TAG, argv[2], problem), file=sys.stderr)
        return 2
    if argv[1] == 'reset-window':
        say('storm window cleared (%d pair restarts forgotten): the pair was restarted deliberately' % reset_window(cfg))
        return 0
    watch_forever(cfg, argv[2])
    return 0
