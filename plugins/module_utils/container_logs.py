# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the vLLM container's logs go: the ``docker run`` logging arguments of the serving unit.

Pure Python (no Ansible imports). One logging driver, never two places without a bound:
  journald   ``--log-driver journald --log-opt tag=<container>``: the systemd journal, which
             journald rotates (SystemMaxUse); ``journalctl -u <unit>`` and
             ``journalctl CONTAINER_NAME=<container>`` both read it. No json-file under
             /var/lib/docker that grows with every request for the life of the container.
  json-file  ``--log-driver json-file --log-opt max-size=<size> --log-opt max-file=<n>``: bounded
             (size x n per container) for ``docker logs``.

API:
  docker_log_args(driver, max_size, max_file, tag) -> [str]   (ValueError naming the variable)
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re

DRIVERS = ('journald', 'json-file')
_SIZE = re.compile(r'^[1-9][0-9]*[kmg]$')


def docker_log_args(driver, max_size='100m', max_file=3, tag=None):
    """The logging part of the serving ``docker run`` argv (exactly one --log-driver)."""
    if driver not in DRIVERS:
        raise ValueError('vllm_service_container_log_driver=%r is not one of %s. Fix: journald (the default: the systemd '
                         'journal, rotated by journald) or json-file (bounded by vllm_service_container_log_max_size '
                         'and _max_file)' % (driver, ', '.join(DRIVERS)))
    if driver == 'journald':
        return ['--log-driver', 'journald'] + (['--log-opt', 'tag=%s' % tag] if tag else [])
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
