# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark-ds4 pair guard, the entry point: `python3 pairguard.py watch|reset-window CONFIG.json`
(dgxspark-ds4-pairguard.service; playbooks that restart the pair deliberately clear the storm window).

Installed by dgxspark.ds4.vllm_service as /usr/local/libexec/dgxspark-ds4/pairguard.py on the head. The guard and its
command line are the collection's node package (plugins/module_utils/_node/pairguard/, told in its watch.py; the
main in cli.py), installed by the role under <libexec>/ansible_collections/dgxspark/ds4/plugins/module_utils/ (this
file's directory is on sys.path); the unit tests import it from the working tree. Python 3 standard library only.
"""


import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.cli import main  # noqa: E402  pylint: disable=wrong-import-position


if __name__ == '__main__':
    sys.exit(main(sys.argv))
