# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark-ds4 boot forensics, the entry point: `python3 forensics.py ack CONFIG.json` (playbooks/ack.yml acknowledges
the crash incident that holds the pair).

Installed by dgxspark.ds4.vllm_service as <libexec>/forensics.py. The forensics are the collection's node package
(plugins/module_utils/_node/forensics.py, told there; the head's prestart calls them), installed by the role under
<libexec>/ansible_collections/ (this file's directory is on sys.path); the unit tests import it from the working tree.
Python 3 standard library only.
"""


import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.forensics import main  # noqa: E402  pylint: disable=wrong-import-position


if __name__ == '__main__':
    sys.exit(main(sys.argv))
