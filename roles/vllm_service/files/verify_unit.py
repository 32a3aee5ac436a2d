# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark-ds4 verify-unit, the entry point: `python3 verify_unit.py UNIT_FILE UNIT_NAME [DOCKER_CLI]`, the `validate`
command of the unit templates (a unit that references a missing path is never installed), and
`python3 verify_unit.py --dropins UNIT_NAME UNIT_FILE [ALLOWED_DROPIN ...]` (the drop-ins that would replace it).

Installed by dgxspark.ds4.vllm_service as <libexec>/verify_unit.py. The checks are the collection's node package
(plugins/module_utils/_node/verify_unit.py, told there; the role's preflight runs the drop-in check, and after install
the installed unit's check, in the module dgxspark.ds4.service_preflight), installed by the role under
<libexec>/ansible_collections/ (this file's directory is on sys.path) before the units are validated; the unit tests
import it from the working tree. Python 3 standard library only.
"""


import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.verify_unit import main  # noqa: E402  pylint: disable=wrong-import-position


if __name__ == '__main__':
    sys.exit(main(sys.argv))
