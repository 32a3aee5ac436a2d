# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark-ds4 pair guard, the entry point: `python3 pairguard.py watch|reset-window CONFIG.json`
(dgxspark-ds4-pairguard.service; playbooks that restart the pair deliberately clear the storm window).

Installed by dgxspark.ds4.vllm_service as /usr/local/libexec/dgxspark-ds4/pairguard.py on the head. The guard itself
is the collection's node package (plugins/module_utils/_node/pairguard/, told in its watch.py), installed by the
role under <libexec>/ansible_collections/dgxspark/ds4/plugins/module_utils/ (this file's directory is on sys.path);
the unit tests import it from the working tree. Python 3 standard library only.
"""


import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import memory_guard  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import quality_canary  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.config import check_config  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.pair import TAG, read_config, say  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.state import reset_window  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.watch import watch_forever  # noqa: E402  pylint: disable=wrong-import-position


def main(argv):
    if len(argv) != 3 or argv[1] not in ('watch', 'reset-window'):
        print('usage: %s watch|reset-window CONFIG.json' % argv[0], file=sys.stderr)
        return 2
    cfg, error = read_config(argv[2])
    if error:
        print(error, file=sys.stderr)
        return 1
    problems = ((check_config(cfg) + memory_guard.check_config(cfg) + quality_canary.check_config(cfg))
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


if __name__ == '__main__':
    sys.exit(main(sys.argv))
