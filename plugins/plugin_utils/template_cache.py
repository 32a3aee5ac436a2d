# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One compile of each Jinja template, shared by the workers of a run and by the runs after it (controller only).

ansible-playbook forks a worker per task and host, and Jinja compiles every template string it renders from scratch
(``Environment.from_string``: parse, generate Python, ``compile``), in every worker, each time: a template of a role's
defaults read on four hosts is compiled four times, and again by the next task and the next run. On a no-op
``site.yml`` over two pairs that was about a fifth of the controller's CPU (docs/measurements.md). Installed by the
``dgxspark.ds4.preload`` callback, ``Environment.compile`` keeps the code object it compiles for a template string in
this process (a dict) and in a directory of the user's local temporary files (the parent of ``C.DEFAULT_LOCAL_TMP``,
``~/.ansible/tmp`` unless ``local_tmp`` says otherwise: ``ds4-jinja-compiled``), where other workers and later runs read
it (``marshal``, the format of Jinja's own bytecode cache) instead of compiling it again. The directory is used only when
it is this user's own and nobody else can write to it (else the run's own local temporary directory, which
ansible-playbook makes private and removes at the end); files older than ``MAX_AGE_DAYS`` are removed when a run starts.

The key is the template's text and everything the compile reads besides it: the environment's syntax and code
generation settings, its class, its extensions and finalize, and the versions of Python, Jinja and ansible-core. A
template with a backslash is compiled as before, not cached: ansible-core escapes the backslashes of its string
constants at compile time, or not, by a setting of the templating call the compile cannot see (its only compile-time
state besides the environment; the unit tests pin both: a template without a backslash compiles to the same code with
the escaping on or off, one with a backslash is not cached). So is a template given as a parsed tree
or compiled for Jinja's ``raw`` output. A cache file that cannot be read or written, or that holds anything but a code
object, is ignored (the template is compiled). ansible-core's template source debugging (a developer's switch) writes
its files for the templates a run compiles, not for those it reads.
"""


import hashlib
import json
import marshal
import os
import stat
import sys
import tempfile
import time
import types

import jinja2
from ansible import constants as C
from ansible.release import __version__ as ANSIBLE_VERSION

# What Environment.compile reads besides the source: jinja2.lexer.get_lexer's key and the code generator's settings.
SETTINGS = ('block_start_string', 'block_end_string', 'variable_start_string', 'variable_end_string',
            'comment_start_string', 'comment_end_string', 'line_statement_prefix', 'line_comment_prefix', 'trim_blocks',
            'lstrip_blocks', 'newline_sequence', 'keep_trailing_newline', 'optimized', 'is_async', 'autoescape')
SUBDIR = 'ds4-jinja-compiled'
MAX_AGE_DAYS = 14
_DIR: list = []
_MEMO: dict = {}
_ORIGINAL: list = []
STATS = {'compiled': 0, 'memo': 0, 'shared': 0}


def _name(value):
    return '%s.%s' % (getattr(value, '__module__', ''), getattr(value, '__qualname__', repr(value)))


def key(env, source, name, filename, defer_init):
    """The cache key of one compile: sha256 over the source and what else the compile reads."""
    parts = [sys.version, jinja2.__version__, ANSIBLE_VERSION, _name(type(env)), _name(env.code_generator_class),
             _name(env.finalize), repr(sorted(env.extensions)),
             repr(tuple(getattr(env, setting, None) for setting in SETTINGS)), repr((name, filename, bool(defer_init)))]
    digest = hashlib.sha256('\0'.join(parts).encode('utf-8'))
    digest.update(b'\0' + source.encode('utf-8', 'surrogatepass'))
    return digest.hexdigest()


def private_dir(path):
    """path as a directory of this user's that nobody else can write to (made 0700 if absent), or None."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        return None
    return path


def cache_dir():
    """The shared directory (see the module's doc), chosen once per process: under local_tmp's root where that is
    private, else the run's own local temporary directory."""
    if not _DIR:
        run_dir = C.DEFAULT_LOCAL_TMP
        _DIR.append(private_dir(os.path.join(os.path.dirname(run_dir), SUBDIR))
                    or os.path.join(run_dir, SUBDIR))
    return _DIR[0]


def prune(directory, max_age_days=MAX_AGE_DAYS, now=None):
    """Remove the cache files written more than max_age_days ago (once per run, at its start). Returns how many."""
    cutoff = (now or time.time()) - max_age_days * 86400
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                os.unlink(entry.path)
                removed += 1
        except OSError:
            pass
    return removed


def _read(path):
    """The code object in path, or None (no file yet, or anything else in it)."""
    try:
        with open(path, 'rb') as handle:
            code = marshal.loads(handle.read())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    return code if isinstance(code, types.CodeType) else None


def _write(path, code):
    try:
        _atomic(path, marshal.dumps(code))
    except ValueError:
        pass


def _atomic(path, data):
    """data (bytes) as path, atomically: another worker reads the whole file or none; nothing when it cannot be written."""
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix='.tmp-')
        with os.fdopen(fd, 'wb') as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError:
        pass


def keyed_name(prefix, key):
    """The name under which JSON data that depends on `key` (JSON data: what identifies it) is kept: prefix and the first
    16 hex digits of the SHA-256 of the key's JSON text."""
    return '%s-%s.json' % (prefix, hashlib.sha256(json.dumps(key).encode('utf-8')).hexdigest()[:16])


def kept_json(name, compute):
    """compute()'s result (JSON data), kept in the cache's directory as `name` and read back by the run's other workers
    and later runs instead of computing it again. The name is the key: it must hold everything the result depends on
    (a content hash of what compute reads). Computed again when the file is missing or unreadable."""
    value = recalled_json(name)
    if value is None:
        value = compute()
        keep_json(name, value)
    return value


def recalled_json(name):
    """The JSON data last kept as `name` in the cache's directory (kept_json, keep_json), or None."""
    try:
        with open(os.path.join(cache_dir(), name)) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def keep_json(name, value):
    """value (JSON data) kept as `name` in the cache's directory, replacing what was kept under that name (atomically)."""
    _atomic(os.path.join(cache_dir(), name), json.dumps(value, sort_keys=True).encode('utf-8'))


def compile_cached(self, source, name=None, filename=None, raw=False, defer_init=False):
    """Environment.compile, with the code object of a template string kept for the run (see the module's doc)."""
    original = _ORIGINAL[0]
    if raw or not isinstance(source, str) or '\\' in source:
        return original(self, source, name, filename, raw, defer_init)
    digest = key(self, source, name, filename, defer_init)
    code = _MEMO.get(digest)
    if code is not None:
        STATS['memo'] += 1
        return code
    path = os.path.join(cache_dir(), digest)
    code = _read(path)
    if code is not None:
        STATS['shared'] += 1
    else:
        code = original(self, source, name, filename, raw, defer_init)
        STATS['compiled'] += 1
        _write(path, code)
    _MEMO[digest] = code
    return code


def install():
    """Route Environment.compile through compile_cached in this process and the workers it forks later."""
    if not _ORIGINAL:
        _ORIGINAL.append(jinja2.Environment.compile)
        jinja2.Environment.compile = compile_cached
        prune(cache_dir())
    return True
