# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every path and name vllm_service exposes is overridden in this scenario (vars/drills.yml: config, state, unit and
libexec directories, the docker CLI, the unit and container names). The drills before this file ran on them (the
storm drill ends with restart.yml through readiness with both readiness timeouts given); here status, switch and
rollback (each through readiness, both timeouts given) prove the operations playbooks read the published layout, not
the defaults. Runs last: the pair ends on its own config."""

from __future__ import absolute_import, division, print_function

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

DRILL_VARS = os.path.join(d.SCENARIO_DIR, 'vars', 'drills.yml')
THROUGHPUT_PROFILE = os.path.join(d.PROJECT, 'inventories', 'throughput', 'group_vars', 'spark', 'profile.yml')
READY_LIMITS = {'ds4_ready_timeout': 1234, 'ds4_ready_chat_timeout': 45}
DEFAULT_CONFIG_DIR = '/etc/dgxspark-ds4'


def ops(name, *extra, **kwargs):
    rc, out = d.run_playbook(name, *extra, var_files=[DRILL_VARS] + list(kwargs.pop('var_files', [])), **kwargs)
    assert rc == 0, '%s failed:\n%s' % (name, out[-4000:])
    return out


def assert_ready_limits(out):
    flat = ' '.join(out.split())
    assert 'chat_timeout: 45.0' in flat and ' timeout: 1234.0' in flat, 'readiness did not get both timeouts: ' + out[-2000:]


def served_max_model_len():
    _status, body = d.request('/v1/models')
    return json.loads(body)['data'][0]['max_model_len']


def test_the_scenario_overrides_every_exposed_path_and_name():
    assert d.CONFIG_DIR != DEFAULT_CONFIG_DIR and d.STATE_DIR != '/var/lib/dgxspark-ds4'
    assert d.UNIT_DIR != '/etc/systemd/system' and d.LIBEXEC_DIR != '/usr/local/libexec/dgxspark-ds4'
    assert d.DOCKER_BIN != '/usr/bin/docker' and d.unit('head') != 'dgxspark-ds4-head.service'
    assert d.container('head') != 'dgxspark-ds4-head'
    for name, role in (('spark1', 'head'), ('spark2', 'worker')):
        unit = d.unit_show(name, d.unit(role), 'FragmentPath', 'ActiveState')
        assert unit == {'FragmentPath': '%s/%s' % (d.UNIT_DIR, d.unit(role)), 'ActiveState': 'active'}, unit
        script = d.node(name, 'cat', '%s/launch-%s.sh' % (d.CONFIG_DIR, role))
        assert d.container(role) in script or d.container(role) in d.node(name, 'cat', '%s/%s' % (d.UNIT_DIR, d.unit(role)))
        record = json.loads(d.node(name, 'cat', '%s/deployed-%s.json' % (d.STATE_DIR, role)))
        assert record['service']['unit_name'] == d.unit(role) and record['service']['config_dir'] == d.CONFIG_DIR, record
        # nothing of the rank was written to the default places
        assert d.node(name, 'sh', '-c', 'ls %s/launch-*.sh %s/deployed-*.json 2>/dev/null || true'
                      % (DEFAULT_CONFIG_DIR, '/var/lib/dgxspark-ds4')) == ''
        assert d.node(name, 'readlink', '-f', d.DOCKER_BIN) == '/usr/bin/docker'


def test_status_reads_the_overridden_units_and_containers():
    out = ops('status.yml')
    rows = [ln.split() for ln in out.splitlines() if ln.strip().startswith(('spark1 ', 'spark2 ')) and ' ok=' not in ln]
    assert [r[:4] for r in rows] == [['spark1', 'head', 'active/running', 'running'],
                                     ['spark2', 'worker', 'active/running', 'running']], rows
    assert "ok deepseek-v4-flash 'OK'" in out


def test_switch_and_rollback_keep_and_restore_the_set_in_the_overridden_config_dir():
    assert served_max_model_len() == 131072
    out = ops('switch.yml', dict(READY_LIMITS, ds4_profile='throughput'), var_files=[THROUGHPUT_PROFILE], args=['-v'])
    assert_ready_limits(out)
    assert '65536' in d.node('spark1', 'cat', '%s/launch-head.sh' % d.CONFIG_DIR)
    assert served_max_model_len() == 65536
    kept = d.node('spark1', 'ls', '-1', '%s/previous' % d.CONFIG_DIR).split()
    assert 'launch-head.sh' in kept and d.unit('head') in kept, kept
    out = ops('rollback.yml', READY_LIMITS, args=['-v'])
    assert_ready_limits(out)
    assert '131072' in d.node('spark1', 'cat', '%s/launch-head.sh' % d.CONFIG_DIR)
    assert served_max_model_len() == 131072
    d.wait_serving(60)
