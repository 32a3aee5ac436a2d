# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load a standalone script shipped in roles/vllm_service/files/ as a module (they are not importable
by package: the role installs them on the nodes as plain python3 scripts)."""


import importlib.machinery
import importlib.util
import os

FILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..', 'roles', 'vllm_service', 'files')


def load(name):
    path = os.path.abspath(os.path.join(FILES, name))
    loader = importlib.machinery.SourceFileLoader('ds4_' + name[:-3], path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod
