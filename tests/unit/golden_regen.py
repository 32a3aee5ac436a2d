# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one loader of tests/golden/regen.py (the goldens' writer, and the unit tests' inventory loader: the sample
site's inventory as Ansible layers it, a recipe switched with -e ds4_profile) for the unit tests:

    from golden_regen import regen  # pylint: disable=import-error

tests/unit is on sys.path (tests/unit/conftest.py). regen.py is loaded once, as the module ds4_golden_regen; it keeps
no state between calls (every call reads the inventory again), so the test files share it."""

import importlib.util
import os
import sys

NAME = 'ds4_golden_regen'
PATH = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'golden', 'regen.py'))


def _load():
    module = sys.modules.get(NAME)
    if module is None:
        spec = importlib.util.spec_from_file_location(NAME, PATH)
        module = importlib.util.module_from_spec(spec)
        sys.modules[NAME] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[NAME]
            raise
    return module


regen = _load()
