# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Log output in vLLM's shape (simulator: a stand-in for vLLM, test code only)."""


import os
import sys
import threading
import time

_LOCK = threading.Lock()
PROC = {'name': 'APIServer'}


def _write(stream, text):
    with _LOCK:
        stream.write(text + '\n')
        stream.flush()


def log(msg, level='INFO', src='api_server.py:1', proc=None):
    """One vLLM-style line: `(APIServer pid=N) INFO 11-22 07:30:01 [file.py:L] msg`."""
    stamp = time.strftime('%m-%d %H:%M:%S')
    _write(sys.stdout, '(%s pid=%d) %s %s [%s] %s' % (proc or PROC['name'], os.getpid(), level, stamp, src, msg))


def unlocked(msg, level='INFO', src='api_server.py:1', uvicorn_style=False):
    """Write one line straight to fd 1, bypassing the lock: for signal handlers, which run in the
    main thread and would deadlock if that thread was inside _write when the signal came."""
    if uvicorn_style:
        line = '(%s pid=%d) INFO:     %s' % (PROC['name'], os.getpid(), msg)
    else:
        line = '(%s pid=%d) %s %s [%s] %s' % (PROC['name'], os.getpid(), level, time.strftime('%m-%d %H:%M:%S'), src, msg)
    try:
        os.write(1, (line + '\n').encode())
    except OSError:
        pass


def uvicorn(msg):
    _write(sys.stdout, '(%s pid=%d) INFO:     %s' % (PROC['name'], os.getpid(), msg))


def raw(msg, stream=None):
    _write(stream or sys.stdout, msg)


def error(msg, src='core.py:1', proc=None):
    log(msg, level='ERROR', src=src, proc=proc)


def traceback_lines(lines, proc=None):
    """A Python-traceback-shaped block on stderr ending with the exception lines given."""
    prefix = '(%s pid=%d) ' % (proc or PROC['name'], os.getpid())
    block = [prefix + 'Traceback (most recent call last):',
             prefix + '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 1, in run_engine_core']
    block += [prefix + line for line in lines]
    _write(sys.stderr, '\n'.join(block))
