"""Make `ansible_collections.dgxspark.ds4` importable from the working tree, and the unit tests' own helpers in
tests/unit (golden_regen: the one loader of tests/golden/regen.py)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
LINK_ROOT = os.path.join(REPO, ".collections")
LINK = os.path.join(LINK_ROOT, "ansible_collections", "dgxspark", "ds4")

if not os.path.islink(LINK) and not os.path.isdir(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(REPO, LINK)
if LINK_ROOT not in sys.path:
    sys.path.insert(0, LINK_ROOT)
# pytest's default import mode puts this directory on sys.path already (this conftest's); said here for any mode
if HERE not in sys.path:
    sys.path.append(HERE)
