# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the vLLM container's logs go: the ``docker run`` logging arguments of the serving unit.

Pure Python (no Ansible imports). The unit runs ``docker run`` attached (no ``-d``): the container's stdout and
stderr reach the unit through the attach stream, whatever the log driver, so systemd already stores every line
in the unit's journal (``journalctl -u <unit>``) -- the single source that readiness, the doctor, the pair guard,
logs.yml and the hang watchdog read. The container's own log driver therefore adds nothing to the journal:
  none       ``--log-driver none`` (the default): no second copy anywhere; ``docker logs`` answers
             "configured logging driver does not support reading" (read ``journalctl -u <unit>``).
  json-file  ``--log-driver json-file --log-opt max-size=<size> --log-opt max-file=<n>``: a bounded ring
             (size x n per container) under /var/lib/docker for ``docker logs``; not in the journal.
  journald   refused: each line would be stored twice (under the unit and under dockerd's CONTAINER_NAME),
             twice the journal volume and twice the per-unit rate-limit budget.

API:
  docker_log_args(driver, max_size, max_file) -> [str]   (ValueError naming the variable)
"""


import re
from typing import Any

DRIVERS = ('none', 'json-file')
_SIZE = re.compile(r'^[1-9][0-9]*[kmg]$')


def docker_log_args(driver: str | None, max_size: Any = '100m', max_file: Any = 3) -> list[str]:
    """The logging part of the serving ``docker run`` argv (exactly one --log-driver)."""
    if driver == 'journald':
        raise ValueError("vllm_service_container_log_driver='journald' stores every vLLM line twice in the journal: the "
                         "unit runs docker run attached, so systemd already keeps the container's output under the unit, "
                         "and journald would add a copy under dockerd's CONTAINER_NAME (twice the volume and the unit's "
                         "rate-limit budget). Fix: vllm_service_container_log_driver: none (the default; read journalctl "
                         "-u <unit>) or json-file (a bounded copy for docker logs)")
    if driver not in DRIVERS:
        raise ValueError('vllm_service_container_log_driver=%r is not one of %s. Fix: none (the default: the unit\'s '
                         'journal is the only copy) or json-file (a bounded copy for docker logs, '
                         'vllm_service_container_log_max_size x _max_file)' % (driver, ', '.join(DRIVERS)))
    if driver == 'none':
        return ['--log-driver', 'none']
    size = str(max_size if max_size is not None else '').strip().lower()
    if not _SIZE.match(size):
        raise ValueError('vllm_service_container_log_max_size=%r: json-file logs need a bound such as 100m (a number '
                         'with k, m or g). Fix: set vllm_service_container_log_max_size: 100m' % (max_size,))
    try:
        count = int(max_file)
    except (TypeError, ValueError):
        count = 0
    if isinstance(max_file, bool) or count < 1:
        raise ValueError('vllm_service_container_log_max_file=%r: json-file logs keep this many files of max_size; '
                         'it must be an integer >= 1. Fix: set vllm_service_container_log_max_file: 3' % (max_file,))
    return ['--log-driver', 'json-file', '--log-opt', 'max-size=%s' % size, '--log-opt', 'max-file=%d' % count]
