# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vLLM unit's docker run argv, built once by the config play (service_layout.docker_run, published as
ds4_effective.service.docker_run) from the recipe and the vllm_service variables (role_inputs.argv_settings), its rules
checked there before any host changes; the unit only appends the node's image Id (tests/golden/_units/ hold the units)."""


import os

import pytest

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import role_inputs
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import service_layout as sl
from golden_regen import regen  # pylint: disable=import-error

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
OPTIONS = regen.role_options()


def _eff(host='spark1', **container):
    eff = ds4_config.compute_effective(regen.inventory_inputs('balanced'), host)
    eff['container'] = dict(eff['container'], **container)
    return eff


def _publish(eff, host='spark1', layout_values=None, **values):
    errors, warnings = sl.publish(eff, layout_values or {}, role_inputs.argv_settings(values, OPTIONS), host)
    return errors, warnings


def _pairs(words, flag):
    return [words[i + 1] for i, w in enumerate(words[:-1]) if w == flag]


def test_the_defaults_read_the_role_defaults_and_publish_every_word_up_to_the_image():
    eff = _eff()
    assert _publish(eff) == ([], [])
    words = eff['service']['docker_run']
    assert words[:6] == ['--rm', '--name', 'dgxspark-ds4-head', '--init', '--restart', 'no']
    assert words[-2:] == ['--entrypoint', '/etc/dgxspark-ds4/launch-head.sh']      # the unit appends the image's Id
    assert _pairs(words, '--cap-add') == ['IPC_LOCK'] and '--privileged' not in words
    assert _pairs(words, '--ulimit') == ['memlock=-1:-1', 'stack=67108864:67108864']
    assert _pairs(words, '--gpus') == ['all'] and _pairs(words, '--device') == ['/dev/infiniband:/dev/infiniband']
    assert _pairs(words, '--log-driver') == ['none'] and _pairs(words, '--log-opt') == []
    assert _pairs(words, '--env-file') == ['/etc/dgxspark-ds4/nccl.env', '/etc/dgxspark-ds4/secrets-head.env']
    mounts = _pairs(words, '-v')
    assert mounts[:3] == ['/etc/dgxspark-ds4/launch-head.sh:/etc/dgxspark-ds4/launch-head.sh:ro',
                          '/etc/dgxspark-ds4/nccl.env:/etc/dgxspark-ds4/nccl.env:ro',
                          '%s:%s:ro' % (eff['model']['host_dir'], eff['model']['container_dir'])]
    # the role's JIT caches, then the recipe's (the recipe wins for the same host directory)
    cache = eff['service']['cache_volumes']
    assert list(cache)[:3] == ['/var/cache/dgxspark-ds4/deepgemm', '/var/cache/dgxspark-ds4/tilelang', '/var/cache/dgxspark-ds4/triton']
    assert ['%s:%s' % kv for kv in cache.items()] == mounts[3:3 + len(cache)]
    assert eff['service']['devices'] == ['/dev/infiniband:/dev/infiniband']
    # the layout's names and paths: a worker's own, an overridden config directory and container name
    worker = _eff('spark2')
    assert _publish(worker, 'spark2', {'vllm_service_config_dir': '/srv/ds4/etc', 'vllm_service_container_name': 'v'}) == ([], [])
    words = worker['service']['docker_run']
    assert _pairs(words, '--name') == ['v'] and words[-1] == '/srv/ds4/etc/launch-worker.sh'
    assert 'org.dgxspark.ds4.role=worker' in words and 'org.dgxspark.ds4.unit=dgxspark-ds4-worker.service' in words


def test_the_switches_and_the_recipe_container():
    eff = _eff(devices=['/dev/infiniband/uverbs0', '/dev/fuse'], runtime='nvidia', gpus='device=0', shm_size='16g',
               memory='100g', ulimits={'nofile': '1024:2048'})
    assert _publish(eff, vllm_service_rdma_devices='no', vllm_service_gpu=False, vllm_service_capabilities=[]) == ([], [])
    words = eff['service']['docker_run']
    # RDMA off: no /dev/infiniband, not even the recipe's; GPU off: no --runtime / --gpus; no capability
    assert eff['service']['devices'] == ['/dev/fuse'] and _pairs(words, '--device') == ['/dev/fuse']
    assert '--gpus' not in words and '--runtime' not in words and '--cap-add' not in words
    assert _pairs(words, '--shm-size') == ['16g'] and _pairs(words, '--memory') == ['100g']
    assert _pairs(words, '--ulimit') == ['nofile=1024:2048']
    assert _publish(eff, vllm_service_ulimits={'memlock': -1}) == ([], [])
    words = eff['service']['docker_run']
    assert _pairs(words, '--ulimit') == ['memlock=-1:-1'] and _pairs(words, '--gpus') == ['device=0']
    assert _pairs(words, '--runtime') == ['nvidia']
    assert eff['service']['devices'] == ['/dev/infiniband/uverbs0', '/dev/fuse', '/dev/infiniband:/dev/infiniband']


def test_privileged_is_warned_for_the_host_and_a_recipe_asking_for_it_is_told_the_named_capabilities():
    eff = _eff(privileged=True)
    errors, warnings = _publish(eff, 'spark1', None, vllm_service_privileged=True)
    assert errors == [] and '--privileged' in eff['service']['docker_run'] and '--cap-add' not in eff['service']['docker_run']
    assert len(warnings) == 1 and warnings[0].startswith('[host spark1] vllm_service_privileged is true: the vLLM container gets')
    errors, warnings = _publish(eff)
    assert errors == [] and '--privileged' not in eff['service']['docker_run']
    assert len(warnings) == 1 and "ds4_effective.container.privileged is true" in warnings[0] and "['IPC_LOCK']" in warnings[0]


def test_a_bad_log_setting_is_the_settings_check_refusal_and_builds_no_argv():
    eff = _eff()
    values = {'vllm_service_container_log_driver': 'journald'}
    assert _publish(eff, **values) == ([], []) and 'docker_run' not in eff['service']
    lines = role_inputs.setting_problems(eff, values, OPTIONS, [])
    assert any(line.startswith("vllm_service_container_log_driver='journald' stores every vLLM line twice") for line in lines)


@pytest.mark.parametrize('container, values, target', [
    # a recipe volume over the launch script: it would replace (or shadow, read-write) what the unit starts
    ({'volumes': ['/srv/mine.sh:/etc/dgxspark-ds4/launch-head.sh']}, {}, '/etc/dgxspark-ds4/launch-head.sh'),
    ({'volumes': ['/srv/env:/etc/dgxspark-ds4/nccl.env:ro']}, {}, '/etc/dgxspark-ds4/nccl.env'),
    # the role's cache volume and the recipe's volume at one container path
    ({'volumes': ['/srv/dg:/root/.deep_gemm']}, {}, '/root/.deep_gemm'),
    ({}, {'vllm_service_extra_cache_volumes': {'/srv/a': '/root/.triton'}}, '/root/.triton'),
])
def test_a_container_path_mounted_twice_is_refused_before_any_host_changes(container, values, target):
    eff = _eff(**container)
    errors, _warnings = _publish(eff, **values)
    assert len(errors) == 1, errors
    assert errors[0].startswith('[host spark1] ds4_profile_config.container.volumes / container.cache_volumes / '
                                'vllm_service_extra_cache_volumes = %r: this container path is mounted 2 times' % target)
    assert 'Docker refuses a duplicate mount point' in errors[0] and 'Fix: mount each container path once' in errors[0]


def test_every_shipped_recipe_builds_a_clean_argv_for_both_ranks():
    for profile in ds4_config.PROFILES:
        for host in regen.HOSTS:
            eff = ds4_config.compute_effective(regen.inventory_inputs(profile), host)
            assert _publish(eff, host) == ([], []), (profile, host)
            assert sl.argv_problems(eff['service']['docker_run']) == []


def test_argv_settings_read_the_inventory_else_the_role_default():
    got = role_inputs.argv_settings({'vllm_service_gpu': 'false', 'vllm_service_capabilities': []}, OPTIONS)
    assert sorted(got) == sorted(sl.ARGV_VARS)
    assert got['vllm_service_gpu'] is False and got['vllm_service_rdma_devices'] is True and got['vllm_service_privileged'] is False
    assert got['vllm_service_capabilities'] == [] and got['vllm_service_ulimits'] is None
    assert got['vllm_service_container_log_driver'] == 'none' and got['vllm_service_container_log_max_file'] == 3


def test_no_second_builder_of_the_argv():
    """The template renders the published words and the image's Id; no role file assembles docker run words."""
    with open(os.path.join(REPO, 'roles', 'vllm_service', 'templates', 'vllm.service.j2')) as handle:
        template = handle.read()
    assert "{%- set a = ds4_effective['service']['docker_run'] + [_vllm_service_image_id] -%}" in template
    for word in ('--cap-add', '--ulimit', '--device', '--entrypoint', '--env-file', "'-v'", '--log-driver', '--gpus'):
        assert word not in template, word
    with open(os.path.join(REPO, 'roles', 'vllm_service', 'vars', 'main.yml')) as handle:
        role_vars = handle.read()
    for name in ('_vllm_service_log_args', '_vllm_service_ulimit_map', 'container_log_args'):
        assert name not in role_vars, name
