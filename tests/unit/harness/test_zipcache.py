# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node image's bytecode cache for zip imports (tests/harness/node-python/ds4_zipcache.py): the same source runs
from the cache, a changed source is compiled anew (never a stale module), packages and __file__ are what zipimport
gives, and a cache that cannot be written changes nothing but speed."""


import os
import subprocess
import sys
import zipfile

HOOK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'harness', 'node-python')

PROBE = r'''
import sys, json
sys.path.insert(0, %(hook)r)
import ds4_zipcache
ds4_zipcache.CACHE = %(cache)r
ds4_zipcache.install()
sys.path.insert(0, %(zip)r)
import pkg.mod
print(json.dumps({'value': pkg.mod.VALUE, 'file': pkg.mod.__file__, 'path': list(pkg.__path__),
                  'importer': type(sys.path_importer_cache[%(zip)r]).__name__}))
'''


def _zip(path, value):
    with zipfile.ZipFile(path, 'w') as handle:
        handle.writestr('pkg/__init__.py', '')
        handle.writestr('pkg/mod.py', 'VALUE = %r\n' % value)


def _run(tmp_path, zip_path, cache):
    out = subprocess.check_output([sys.executable, '-c', PROBE % dict(hook=HOOK_DIR, cache=cache, zip=str(zip_path))],
                                  universal_newlines=True)
    import json  # pylint: disable=import-outside-toplevel
    return json.loads(out)


def test_same_source_comes_from_the_cache_and_a_changed_source_is_compiled_anew(tmp_path):
    cache = str(tmp_path / 'cache')
    zip_path = tmp_path / 'payload.zip'
    _zip(zip_path, 'one')
    first = _run(tmp_path, zip_path, cache)
    assert first['value'] == 'one' and first['importer'] == 'CachingZipImporter'
    assert first['file'] == str(zip_path) + '/pkg/mod.py'
    assert first['path'] == [str(zip_path) + '/pkg']
    entries = sorted(os.listdir(cache))
    assert len(entries) == 2, entries  # pkg/__init__.py and pkg/mod.py
    stamps = dict((name, os.stat(os.path.join(cache, name)).st_mtime_ns) for name in entries)
    # the same payload again: served from the cache, nothing rewritten
    assert _run(tmp_path, zip_path, cache)['value'] == 'one'
    assert dict((name, os.stat(os.path.join(cache, name)).st_mtime_ns) for name in os.listdir(cache)) == stamps
    # a new payload with a changed module under the same name and path: the new code runs
    _zip(zip_path, 'two')
    assert _run(tmp_path, zip_path, cache)['value'] == 'two'
    assert len(os.listdir(cache)) == 3


def test_a_cache_that_cannot_be_written_still_imports(tmp_path):
    blocker = tmp_path / 'not-a-dir'
    blocker.write_text('x')
    zip_path = tmp_path / 'payload.zip'
    _zip(zip_path, 'three')
    assert _run(tmp_path, zip_path, str(blocker / 'cache'))['value'] == 'three'
