# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test nodes only: a bytecode cache for modules imported from zip files (Ansible's AnsiballZ payloads).

Python's zipimport compiles a module from source each time it is imported from a zip and never writes bytecode, so
every Ansible module run in a test node compiled ansible.module_utils again: about 60 of its 130 ms of CPU with
ansible-core 2.21 on the node image's Python 3.11 (measured; docs/measurements.md). This path hook is zipimport with
that one difference: the code object of a source is kept, marshalled, under CACHE, keyed by the interpreter, the module
name and the SHA-1 of the source, and reused when the same source is imported again; a changed source is a new key.
What runs is byte for byte what the payload carries. Installed in the Molecule node image by
tests/harness/build-node-image.sh (a .pth file next to it); never part of the collection or of a real Spark.
"""
import marshal
import os
import sys
import zipimport

CACHE = '/var/cache/ds4-zipcache'


class CachingZipImporter(zipimport.zipimporter):
    """zipimport, with the compiled code of each source cached on disk."""

    def get_filename(self, fullname):
        # zipimport's own compiles the module to answer, and importlib asks for every spec
        return '%s/%s%s' % (self.archive, zipimport._get_module_path(self, fullname),  # pylint: disable=protected-access
                            '/__init__.py' if self.is_package(fullname) else '.py')

    def get_code(self, fullname):
        source = self.get_source(fullname)
        if source is None:  # bytecode only in the zip: zipimport's own way
            return super().get_code(fullname)
        import hashlib  # pylint: disable=import-outside-toplevel
        key = hashlib.sha1(('%s\0%s\0%s\0' % (sys.implementation.cache_tag, sys.version, fullname)).encode()
                           + source.encode('utf-8', 'surrogateescape')).hexdigest()
        cached = os.path.join(CACHE, key)
        try:
            with open(cached, 'rb') as handle:
                return marshal.load(handle)
        except (OSError, EOFError, ValueError, TypeError):
            pass
        code = compile(source, self.get_filename(fullname), 'exec', dont_inherit=True)
        try:
            os.makedirs(CACHE, mode=0o700, exist_ok=True)
            tmp = '%s.%d' % (cached, os.getpid())
            with open(tmp, 'wb') as handle:
                marshal.dump(code, handle)
            os.replace(tmp, cached)
        except OSError:
            pass
        return code

    def create_module(self, spec):  # pylint: disable=unused-argument
        return None

    def exec_module(self, module):
        # Python 3.11's zipimporter has only load_module, which compiles the module once more
        exec(self.get_code(module.__name__), module.__dict__)  # pylint: disable=exec-used


def install():
    """Put the caching importer where zipimport's is in sys.path_hooks (nothing else changes)."""
    if not hasattr(zipimport, '_get_module_path'):
        return
    for index, hook in enumerate(sys.path_hooks):
        if hook is zipimport.zipimporter:
            sys.path_hooks[index] = CachingZipImporter
            sys.path_importer_cache.clear()
            return
