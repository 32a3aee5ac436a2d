# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark-ds4 router pool keeper, the entry point: `python3 routerpool.py CONFIG.json`, the ExecStart of
dgxspark-ds4-router-pool.service.

Installed by dgxspark.ds4.router as /usr/local/libexec/dgxspark-ds4/router/routerpool.py. The keeper is the
collection's node package (plugins/module_utils/_node/routerpool.py, told there; the router admin client
router_admin.py), installed by the role under ansible_collections/ in the same directory (this file's directory is on
sys.path). Python 3 standard library only.
"""


import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.routerpool import main  # noqa: E402  pylint: disable=wrong-import-position


if __name__ == '__main__':
    main(sys.argv)
