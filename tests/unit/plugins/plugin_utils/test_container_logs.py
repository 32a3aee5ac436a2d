# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""container_logs: the serving container's docker run logging arguments (one driver, bounded)."""


import os
import re

import pytest

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import service_layout
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.container_logs import docker_log_args

ROOT = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..')


def test_none_keeps_no_second_copy():
    assert docker_log_args('none') == ['--log-driver', 'none']


def test_journald_is_refused_as_a_second_journal_copy():
    with pytest.raises(ValueError) as err:
        docker_log_args('journald')
    msg = str(err.value)
    assert "vllm_service_container_log_driver='journald' stores every vLLM line twice in the journal" in msg
    assert 'CONTAINER_NAME' in msg and 'Fix: vllm_service_container_log_driver: none' in msg


def test_json_file_is_bounded():
    expected = ['--log-driver', 'json-file', '--log-opt', 'max-size=200m', '--log-opt', 'max-file=2']
    assert docker_log_args('json-file', '200M', '2') == expected


@pytest.mark.parametrize('args, match', [
    (('syslog',), "vllm_service_container_log_driver='syslog' is not one of none, json-file"),
    (('json-file', '', 3), "vllm_service_container_log_max_size='': json-file logs need a bound"),
    (('json-file', 'lots', 3), "vllm_service_container_log_max_size='lots'"),
    (('json-file', '100m', 0), 'vllm_service_container_log_max_file=0'),
    (('json-file', '100m', True), 'vllm_service_container_log_max_file=True'),
])
def test_bad_values_name_the_variable_and_the_fix(args, match):
    with pytest.raises(ValueError, match=re.escape(match)) as err:
        docker_log_args(*args)
    assert 'Fix:' in str(err.value)


def test_the_unit_argv_carries_the_log_args_once_and_the_defaults_pick_none():
    """The serving unit's docker run argv (built by the config play, service_layout.docker_run) carries exactly the
    role's logging arguments; the template adds none of its own."""
    with open(os.path.join(ROOT, 'roles', 'vllm_service', 'templates', 'vllm.service.j2')) as fh:
        template = fh.read()
    assert '--log-driver' not in template and "ds4_effective['service']['docker_run']" in template
    with open(os.path.join(ROOT, 'roles', 'vllm_service', 'defaults', 'main.yml')) as fh:
        defaults = fh.read()
    assert re.search(r'^vllm_service_container_log_driver: none$', defaults, re.M)
    eff = {'role': 'head', 'container': {}, 'model': {'host_dir': '/srv/m', 'container_dir': '/models/m'}}
    layout, _errors = service_layout.service_layout('head', {})
    for settings, want in (({'vllm_service_container_log_driver': 'none'}, docker_log_args('none')),
                           ({'vllm_service_container_log_driver': 'json-file', 'vllm_service_container_log_max_size': '200m',
                             'vllm_service_container_log_max_file': 2}, docker_log_args('json-file', '200m', 2))):
        words = service_layout.docker_run(eff, layout, settings)[0]['docker_run']
        assert words.count('--log-driver') == 1
        i = words.index('--log-driver')
        assert words[i:i + len(want)] == want
