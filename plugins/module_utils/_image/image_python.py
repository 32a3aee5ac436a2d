# -*- coding: utf-8 -*-
# Copyright (c) dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which Python in a container image runs vLLM: read from the image, not assumed.

The eugr and upstream images install vLLM into the system ``python3``; the b12x image keeps it in a venv
(seed 001 points LD_PRELOAD into /opt/env/lib/python3.12) whose ``python3`` need not be the first on the
image's ``PATH``. Every probe and preflight that runs Python in the image (the vLLM version read, the mxfp4.py
lookup, the DeepGEMM probe, the NCCL all-reduce preflight) uses the Python found here.

:data:`PROBE` is a POSIX ``sh`` script run in a throw-away container of the image
(``docker run --rm --network none --entrypoint /bin/sh IMAGE -c PROBE``): the image's own ``ENV PATH`` applies.
It tries, in this order, and takes the first Python that has vLLM (the ``vllm`` package importable, or its
dist-info installed):

1. the interpreter of the ``vllm`` command on the image's PATH (its ``#!`` line: the Python that runs
   ``vllm serve``; ``#!/usr/bin/env python3`` resolved through PATH);
2. ``python3`` next to that ``vllm`` command (a venv's bin directory);
3. ``python3`` on the image's PATH;
4. the known venv and system paths (:data:`KNOWN_PYTHONS`, arguments of the script).

Each try is one ``tried <python> (<how found>): <result>`` line; the winner adds ``python=``, ``found=`` and
``vllm=`` lines. :func:`parse` turns that into a result with an error naming the image, what was tried and the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Known locations, tried after the vllm command's interpreter and PATH (b12x: /opt/env, the common venv /opt/venv).
KNOWN_PYTHONS = ('/opt/env/bin/python3', '/opt/venv/bin/python3', '/usr/local/bin/python3', '/usr/bin/python3')

# Run by each candidate Python (-c): prints where vllm is and exits 0, or exits 1. find_spec does not import vllm
# (no torch, no GPU); an image with only the dist-info (vLLM's metadata without the package on this path) counts.
# No single quote inside: the sh script below quotes it with single quotes.
PY_HAS_VLLM = (
    'import importlib.util, sys\n'
    's = importlib.util.find_spec("vllm")\n'
    'if s is not None and s.submodule_search_locations:\n'
    '    print(list(s.submodule_search_locations)[0])\n'
    '    sys.exit(0)\n'
    'try:\n'
    '    from importlib import metadata\n'
    '    d = metadata.distribution("vllm")\n'
    'except Exception:\n'
    '    sys.exit(1)\n'
    'print("vllm %s dist-info in %s (no vllm package on this path)" % (d.version, d.locate_file("")))\n'
)

PROBE = r'''
PY='@PY@'
check() {  # $1 python (path or name), $2 how it was found
  [ -n "$1" ] || return 1
  if out=$("$1" -c "$PY" 2>/dev/null); then
    echo "tried $1 ($2): vllm at $out"
    echo "python=$1"; echo "found=$2"; echo "vllm=$out"
    exit 0
  fi
  echo "tried $1 ($2): no vllm"
  return 1
}
v=$(command -v vllm 2>/dev/null) || v=
if [ -n "$v" ]; then
  echo "vllm-command=$v"
  line=
  [ -f "$v" ] && read -r line < "$v" 2>/dev/null
  case "$line" in
    '#!'*)
      set -- ${line#??}
      interp=$1
      if [ "${interp##*/}" = env ]; then interp=$2; fi
      case "${interp##*/}" in
        python*) check "$interp" "interpreter of the vllm command $v" ;;
        *) echo "tried $v: its interpreter $interp is not a Python" ;;
      esac
      ;;
  esac
  [ -x "${v%/*}/python3" ] && check "${v%/*}/python3" "next to the vllm command $v"
fi
p=$(command -v python3 2>/dev/null) && check python3 "python3 on the image PATH ($p)"
for k in $KNOWN; do
  [ -x "$k" ] && check "$k" "known location"
done
echo "python="
exit 3
'''.replace('@PY@', PY_HAS_VLLM)


def probe_script(known: Sequence[str] = KNOWN_PYTHONS) -> str:
    """The sh script with the known locations filled in (paths without spaces)."""
    for path in known:
        if not path.startswith('/') or any(c.isspace() or c in '\'"$`\\' for c in path):
            raise ValueError('known Python path %r must be absolute, without spaces or quotes' % (path,))
    return "KNOWN='%s'\n%s" % (' '.join(known), PROBE)


def probe_argv(image: str, known: Sequence[str] = KNOWN_PYTHONS, docker: str = 'docker') -> list[str]:
    """docker run argv of the probe (throw-away container, no network, the image's own PATH)."""
    return [docker, 'run', '--rm', '--network', 'none', '--entrypoint', '/bin/sh', image, '-c', probe_script(known)]


def parse(rc: int, stdout: str | None, stderr: str | None, image: str) -> dict[str, Any]:
    """Result of the probe: dict(python, found, vllm, vllm_command, tried, error)."""
    out: dict[str, Any] = {'python': None, 'found': None, 'vllm': None, 'vllm_command': None, 'tried': [], 'error': None}
    for line in (stdout or '').splitlines():
        if line.startswith('tried '):
            out['tried'].append(line[len('tried '):])
        for key in ('python', 'found', 'vllm', 'vllm_command'):
            prefix = key.replace('_', '-') + '='
            if line.startswith(prefix):
                out[key] = line[len(prefix):] or None
    if rc == 0 and out['python']:
        return out
    tried = '; '.join(out['tried']) or 'nothing (no vllm command, no python3 on PATH, none of %s)' % ', '.join(KNOWN_PYTHONS)
    if rc == 3:
        why = 'no Python in the image has vLLM. Tried: %s' % tried
    else:
        why = 'the probe failed (rc %s: %s)' % (rc, ((stderr or '') + (stdout or '')).strip()[-300:])
    out['error'] = ('%s: %s. Fix: set container_image_python to the Python that runs vLLM in the image '
                    '(e.g. /opt/env/bin/python3), or check that the image is a vLLM image with /bin/sh.' % (image, why))
    return out
