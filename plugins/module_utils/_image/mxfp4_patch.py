# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Count, check and normalise the mxfp4.py GPU-cache cleanup (the "fix-ds4-gpu-cache" mod).

The fix adds, right after each ``self._setup_kernel(layer, w13, w2, ...)`` call in
vLLM's ``model_executor/layers/quantization/mxfp4.py``::

    del w13, w2, w13_scale, w2_scale, w13_bias, w2_bias
    if torch.cuda.is_available():
        torch.cuda.empty_cache()

A correctly patched file has one such block per call site (two sites: ``grep -c
empty_cache`` gives 2).  Re-applying the mod duplicates the block; the second ``del``
then raises ``UnboundLocalError`` for ``w13`` at model load.  This module finds the
call sites, counts the blocks after each, and rewrites the file to exactly one block
per site.  Anything it does not recognise is refused, never guessed at.

Pure logic, no Ansible imports.
"""

from __future__ import annotations


import os
import re
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

# run(argv) -> (rc, stdout, stderr)
Runner = Callable[[list[str]], tuple[int, str, str]]

_IDENT = r'[A-Za-z_][A-Za-z0-9_]*'
_CALL_RE = re.compile(r'\b_setup_kernel\s*\(')
_DEF_RE = re.compile(r'^\s*def\s+_setup_kernel\s*\(')
_ANCHOR_RE = re.compile(r'^(?P<indent>[ \t]*)self\._setup_kernel\((?P<args>[^()]*)\)[ \t]*(?:#.*)?$')
_DEL_RE = re.compile(r'^(?P<indent>[ \t]*)del[ \t]+(?P<names>%s(?:[ \t]*,[ \t]*%s)*)[ \t]*,?[ \t]*(?:#.*)?$' % (_IDENT, _IDENT))
_GUARD_RE = re.compile(r'^(?P<indent>[ \t]*)if[ \t]+torch\.cuda\.is_available\(\)[ \t]*:[ \t]*(?:#.*)?$')
_EMPTY_RE = re.compile(r'^(?P<indent>[ \t]*)torch\.cuda\.empty_cache\(\)[ \t]*(?:#.*)?$')
_EMPTY_TOKEN = 'empty_cache('
_SCOPE_RE = re.compile(r'^(?P<indent>[ \t]*)(?:async[ \t]+)?(?P<kind>def|class)[ \t]+(?P<name>%s)' % _IDENT)


class Mxfp4PatchError(Exception):
    """Refusal or failure with a message for the user."""

    def __init__(self, msg: str, **fields: Any) -> None:
        super(Mxfp4PatchError, self).__init__(msg)
        self.msg = msg
        self.fields = fields


def _strip_eol(line: str) -> str:
    return line.rstrip('\r\n')


def _eol(line: str) -> str:
    if line.endswith('\r\n'):
        return '\r\n'
    return '\n' if line.endswith('\n') else ''


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith('#')


def _indent_width(indent: str) -> int:
    return len(indent.expandtabs(8))


def _scope(lines: list[str], index: int, indent: str) -> str:
    """'Class.method' enclosing line ``index`` (best effort, for reporting only)."""
    names: list[str] = []
    width = _indent_width(indent)
    for i in range(index - 1, -1, -1):
        match = _SCOPE_RE.match(lines[i])
        if match and _indent_width(match.group('indent')) < width:
            names.insert(0, match.group('name'))
            width = _indent_width(match.group('indent'))
            if width == 0:
                break
    return '.'.join(names)


def _parse_block(lines: list[str], start: int, indent: str, names: list[str]) -> tuple[int, dict[str, Any]] | None:
    """Parse one cleanup block at ``lines[start]``.

    Returns ``(end, block)`` (end exclusive) or ``None`` when the line starts no block.
    Raises Mxfp4PatchError for a ``del`` at the same indent that is not the fix's.
    """
    i = start
    block: dict[str, Any] = dict(start=start, has_del=False, has_empty_cache=False)
    if i < len(lines):
        match = _DEL_RE.match(_strip_eol(lines[i]))
        if match and match.group('indent') == indent:
            found = [n.strip() for n in match.group('names').split(',') if n.strip()]
            if found != names:
                raise Mxfp4PatchError(
                    'structure not recognised: line %d deletes %s right after _setup_kernel(...), expected exactly '
                    '"del %s"; refusing to guess' % (i + 1, ', '.join(found), ', '.join(names)))
            block['has_del'] = True
            i += 1
    if i < len(lines):
        guard = _GUARD_RE.match(_strip_eol(lines[i]))
        if guard and guard.group('indent') == indent and i + 1 < len(lines):
            inner = _EMPTY_RE.match(_strip_eol(lines[i + 1]))
            if inner and _indent_width(inner.group('indent')) > _indent_width(indent):
                block['has_empty_cache'] = True
                i += 2
        if not block['has_empty_cache']:
            bare = _EMPTY_RE.match(_strip_eol(lines[i]))
            if bare and bare.group('indent') == indent:
                block['has_empty_cache'] = True
                i += 1
    if i == start:
        return None
    block['end'] = i
    return i, block


def analyse(text: str) -> dict[str, Any]:
    """Find the ``_setup_kernel`` call sites and the cleanup blocks after each.

    Returns a dict with ``sites`` (line, scope, names, blocks), ``blocks`` (total),
    ``empty_cache_count`` (lines containing empty_cache(, like ``grep -c``) and
    ``del_count``.  Raises Mxfp4PatchError when the layout is not recognised.
    """
    lines = text.splitlines(True)
    sites: list[dict[str, Any]] = []
    consumed: set[int] = set()
    for index, line in enumerate(lines):
        if _is_comment(line) or not _CALL_RE.search(line) or _DEF_RE.match(line):
            continue
        match = _ANCHOR_RE.match(_strip_eol(line))
        if not match:
            raise Mxfp4PatchError(
                'structure not recognised: line %d calls _setup_kernel but not as the single line '
                '"self._setup_kernel(layer, w13, w2, ...)" the fix targets: %s; refusing to guess'
                % (index + 1, _strip_eol(line).strip()))
        args = [a.strip() for a in match.group('args').split(',') if a.strip()]
        if len(args) < 2 or args[0] != 'layer' or not all(re.match('^%s$' % _IDENT, a) for a in args):
            raise Mxfp4PatchError(
                'structure not recognised: line %d calls self._setup_kernel(%s); expected plain names starting with '
                '"layer" (layer, w13, w2, ...); refusing to guess' % (index + 1, match.group('args').strip()))
        indent = match.group('indent')
        names = args[1:]
        blocks: list[dict[str, Any]] = []
        pos = index + 1
        while True:
            parsed = _parse_block(lines, pos, indent, names)
            if parsed is None:
                break
            pos, block = parsed
            blocks.append(block)
            consumed.update(range(block['start'], block['end']))
        sites.append(dict(index=index, line=index + 1, indent=indent, names=names, scope=_scope(lines, index, indent),
                          blocks=blocks, end=pos, eol=_eol(line) or '\n'))

    if not sites:
        raise Mxfp4PatchError(
            'structure not recognised: no "self._setup_kernel(layer, w13, w2, ...)" call found, so there is no place the '
            'GPU-cache fix belongs (this mxfp4.py predates or postdates the layout the fix targets); refusing to guess')

    all_names = set(tuple(s['names']) for s in sites)
    empty_lines: list[int] = []
    del_lines: list[int] = []
    for index, line in enumerate(lines):
        if _is_comment(line):
            continue
        if _EMPTY_TOKEN in line:
            empty_lines.append(index)
            if index not in consumed:
                raise Mxfp4PatchError(
                    'structure not recognised: line %d calls empty_cache() outside a cleanup block directly after '
                    '_setup_kernel(...): %s; refusing to guess' % (index + 1, _strip_eol(line).strip()))
        match = _DEL_RE.match(_strip_eol(line))
        if match:
            found = tuple(n.strip() for n in match.group('names').split(',') if n.strip())
            if found in all_names:
                del_lines.append(index)
                if index not in consumed:
                    raise Mxfp4PatchError(
                        'structure not recognised: line %d repeats the fix\'s "del %s" away from a _setup_kernel(...) '
                        'call; refusing to guess' % (index + 1, ', '.join(found)))

    return dict(
        sites=sites,
        blocks=sum(len(s['blocks']) for s in sites),
        empty_cache_count=len(empty_lines),
        del_count=len(del_lines),
        lines=lines,
    )


def _plural(num: int, word: str) -> str:
    return '%d %s%s' % (num, word, '' if num == 1 else 's')


def status(analysis: dict[str, Any], expected: int) -> tuple[str, str]:
    """Return ``(state, message)``; state is patched, unpatched, double-patched, partially-patched or unexpected-layout."""
    sites = analysis['sites']
    total = analysis['blocks']
    per_site = [len(s['blocks']) for s in sites]
    complete = all(b['has_del'] and b['has_empty_cache'] for s in sites for b in s['blocks'])
    where = ', '.join('line %d (%s): %d' % (s['line'], s['scope'] or '?', len(s['blocks'])) for s in sites)
    if total == 0:
        return 'unpatched', 'unpatched (0 blocks, expected %d)' % expected
    if any(n > 1 for n in per_site) or total > expected:
        return 'double-patched', (
            'double-patched (%s, expected %d): the fix was applied more than once and the repeated "del %s" raises '
            'UnboundLocalError at load; blocks per _setup_kernel call: %s'
            % (_plural(total, 'block'), expected, ', '.join(sites[0]['names']), where))
    if len(sites) != expected:
        return 'unexpected-layout', (
            'unexpected layout (%s, expected %d): the file has %s (%s), so one block per call cannot give %d'
            % (_plural(total, 'block'), expected, _plural(len(sites), '_setup_kernel call'), where, expected))
    if total == expected and complete:
        return 'patched', 'patched (%s, expected %d)' % (_plural(total, 'block'), expected)
    if not complete:
        return 'partially-patched', (
            'partially-patched (%s, expected %d): a cleanup block lacks its del or its empty_cache(); blocks per '
            '_setup_kernel call: %s' % (_plural(total, 'block'), expected, where))
    return 'partially-patched', ('partially-patched (%s, expected %d): blocks per _setup_kernel call: %s'
                                 % (_plural(total, 'block'), expected, where))


def canonical_block(indent: str, names: list[str], eol: str) -> list[str]:
    inner = indent + ('\t' if indent.startswith('\t') else '    ')
    return [
        '%sdel %s%s' % (indent, ', '.join(names), eol),
        '%sif torch.cuda.is_available():%s' % (indent, eol),
        '%storch.cuda.empty_cache()%s' % (inner, eol),
    ]


def normalise(text: str, expected: int = 2) -> tuple[str, dict[str, Any]]:
    """Return ``(new_text, analysis_before)`` with exactly one complete block after each call site.

    Keeps the first complete block found at a site verbatim, drops the others, and
    inserts the canonical block where none is complete.  Refuses when the number of
    call sites differs from ``expected`` (one block per site is the only safe layout).
    """
    before = analyse(text)
    sites = before['sites']
    if len(sites) != expected:
        raise Mxfp4PatchError(
            'refusing to patch: the file has %s (%s) but expected=%d; exactly one cleanup block per call is the only '
            'safe layout, so %d blocks cannot be reached; check that expected matches this vLLM version'
            % (_plural(len(sites), '_setup_kernel call'), ', '.join('line %d' % s['line'] for s in sites),
               expected, expected))
    lines = list(before['lines'])
    for site in reversed(sites):
        keep = None
        for block in site['blocks']:
            if block['has_del'] and block['has_empty_cache']:
                keep = lines[block['start']:block['end']]
                break
        if keep is None:
            keep = canonical_block(site['indent'], site['names'], site['eol'])
        start = site['index'] + 1
        if not _eol(lines[site['index']]):
            lines[site['index']] += site['eol']
        lines[start:site['end']] = keep
    new_text = ''.join(lines)
    after = analyse(new_text)
    state, msg = status(after, expected)
    if state != 'patched':
        raise Mxfp4PatchError('internal check failed after rewriting: %s' % msg)
    return new_text, before


def compile_text(text: str, filename: str) -> None:
    """Syntax-check ``text`` with this interpreter (no file written)."""
    try:
        compile(text, filename, 'exec', dont_inherit=True)
    except SyntaxError as exc:
        raise Mxfp4PatchError('%s does not compile after patching (line %s: %s); nothing was written'
                              % (filename, exc.lineno, exc.msg))


def report(analysis: dict[str, Any], expected: int) -> dict[str, Any]:
    """Result fields for the module: counts and block locations (1-based line numbers)."""
    state, msg = status(analysis, expected)
    return dict(
        status=state,
        message=msg,
        blocks=analysis['blocks'],
        empty_cache_count=analysis['empty_cache_count'],
        del_count=analysis['del_count'],
        sites=[dict(line=s['line'], scope=s['scope'], names=s['names'],
                    blocks=[dict(start_line=b['start'] + 1, end_line=b['end'], has_del=b['has_del'],
                                 has_empty_cache=b['has_empty_cache']) for b in s['blocks']])
               for s in analysis['sites']],
    )


def read_from_image(run: Runner, image: str, path_in_image: str, docker: str = 'docker') -> tuple[str, str]:
    """Copy ``path_in_image`` out of ``image`` without starting it; return ``(text, tmpdir)``.

    ``run(argv)`` returns ``(rc, stdout, stderr)``.  The caller removes ``tmpdir``.
    """
    tmpdir = tempfile.mkdtemp(prefix='mxfp4_patch_')
    dest = os.path.join(tmpdir, 'mxfp4.py')
    # A command is given so images without CMD (docker import) can be created; it never runs.
    rc, out, err = run([docker, 'create', image, 'true'])
    if rc != 0:
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise Mxfp4PatchError('docker create %s failed (rc=%d): %s' % (image, rc, (err or out).strip()))
    container = out.strip().splitlines()[-1].strip() if out.strip() else ''
    if not container:
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise Mxfp4PatchError('docker create %s printed no container id' % image)
    try:
        rc, out, err = run([docker, 'cp', '-L', '%s:%s' % (container, path_in_image), dest])
        if rc != 0:
            raise Mxfp4PatchError('cannot copy %s out of image %s (rc=%d): %s; check path_in_image'
                                  % (path_in_image, image, rc, (err or out).strip()))
        if not os.path.isfile(dest):
            raise Mxfp4PatchError('%s in image %s is not a regular file' % (path_in_image, image))
        with open(dest, 'rb') as handle:
            text = handle.read().decode('utf-8')
    except Mxfp4PatchError:
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise
    finally:
        run([docker, 'rm', '-f', container])
    return text, tmpdir


# Run by the image's own Python (``-c``): where vllm's mxfp4.py is. find_spec does not import vllm (no torch, no
# GPU needed), so a venv image (vLLM under /opt/venv) is found through the Python first in the image's PATH.
# roles/container_image/vars/main.yml container_image_vllm_locate is the same text (a unit test keeps them equal).
LOCATE_SCRIPT = (
    "import importlib.util, os, sys; "
    "s = importlib.util.find_spec('vllm'); "
    "sys.exit('vllm is not importable by ' + sys.executable) if s is None or not s.origin else None; "
    "print(os.path.join(os.path.dirname(s.origin), 'model_executor', 'layers', 'quantization', 'mxfp4.py'))"
)


def locate_in_image(run: Runner, image: str, python: str = 'python3', docker: str = 'docker') -> str:
    """Ask ``python`` in ``image`` (throw-away container, no network) where vllm's mxfp4.py is.

    ``run(argv)`` returns ``(rc, stdout, stderr)``. Raises Mxfp4PatchError naming the fix when vllm is not found.
    """
    argv = [docker, 'run', '--rm', '--network', 'none', '--entrypoint', python, image, '-c', LOCATE_SCRIPT]
    rc, out, err = run(argv)
    lines = [line.strip() for line in (out or '').splitlines() if line.strip()]
    path = lines[-1] if lines else ''
    if rc != 0 or not path.startswith('/') or not path.endswith('/mxfp4.py'):
        raise Mxfp4PatchError('%s in image %s does not find vllm (rc=%d: %s); set python to the image\'s Python '
                              '(e.g. /opt/venv/bin/python3) or path_in_image to mxfp4.py in the image'
                              % (python, image, rc, ((err or '') + (out or '')).strip()[:300]))
    return path
