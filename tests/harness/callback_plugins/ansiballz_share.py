# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test harness only (Molecule's ansible.cfg enables it; the collection never ships or needs it): one AnsiballZ
cache for every ansible-playbook run of a CI run instead of one per run.

ansible-core builds each module's payload (the module and every module_utils file it imports, found by parsing their
source) once per run, in a cache under the run's own temporary directory (C.DEFAULT_LOCAL_TMP/ansiballz_cache), which
it deletes at exit. The Molecule scenarios run ansible-playbook hundreds of times over the same code, and a profile of
a recipe switch (py-spy, docs/measurements.md) found the workers spending a quarter of their time in that build. Here
that directory is a link to .cache/ansiballz/<key>, where <key> hashes everything a payload is built from: the
collection's modules and module_utils (their paths and contents), ansible-core's version and module_utils (its
version covers them), the version of the `ansible` package that brings the other collections, and the controller's
Python. Any change to any of them is a new key, so no run ever uses a payload built from other code. ansible-core
itself keeps concurrent runs safe: it builds an entry under a file lock and publishes it by rename.

What runs on the nodes is byte for byte the payload the run would have built (the same files, zipped the same way);
only the controller's work to build it is saved.
"""

import hashlib
import os
import sys
from importlib.metadata import PackageNotFoundError, version

from ansible import constants as C
from ansible.plugins.callback import CallbackBase
from ansible.release import __version__ as ANSIBLE_CORE_VERSION

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..'))
SOURCES = ('plugins/modules', 'plugins/module_utils')


def _ansible_package_version():
    try:
        return version('ansible')
    except PackageNotFoundError:
        return 'none'


def cache_key(root=ROOT):
    """The hash of what a payload is built from (see the module's docstring)."""
    digest = hashlib.sha256()
    for part in (ANSIBLE_CORE_VERSION, _ansible_package_version(), sys.version):
        digest.update(part.encode() + b'\0')
    for source in SOURCES:
        top = os.path.join(root, source)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(('.pyc', '.pyo')):
                    continue
                path = os.path.join(dirpath, name)
                digest.update(os.path.relpath(path, root).encode() + b'\0')
                with open(path, 'rb') as handle:
                    digest.update(hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()[:24]


def share(run_tmp, cache_root, key):
    """Make run_tmp/ansiballz_cache a link to cache_root/key (created); returns the link's target. A run whose cache
    exists already (built before this callback ran) keeps its own."""
    target = os.path.join(cache_root, key)
    os.makedirs(target, exist_ok=True)
    link = os.path.join(run_tmp, 'ansiballz_cache')
    if not os.path.lexists(link):
        os.symlink(target, link)
    return os.path.realpath(link)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'ansiballz_share'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # in the main process, before any worker forks: every worker of the run sees the link
        cache_root = os.environ.get('ANSIBALLZ_SHARE_DIR') or os.path.join(ROOT, '.cache', 'ansiballz')
        share(C.DEFAULT_LOCAL_TMP, cache_root, cache_key())
