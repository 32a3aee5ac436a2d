# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every path and name vllm_service exposes is overridden in the drills scenario (vars/drills.yml: config, state, unit
and libexec directories, the docker CLI, the unit and container names; formerly the `layout` scenario). On that layout,
after the drills (which also run a config that fails every start, the doctor and a reboot on it), in order: nothing of a
rank was written to the default places; status, restart, switch and rollback (each through readiness, both readiness
timeouts given) read the published layout. Runs in file order; the pair ends serving its own config."""


import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

LAYOUT_VARS = os.path.join(d.SCENARIO_DIR, 'vars', 'drills.yml')
READY_LIMITS = {'ds4_ready_timeout': 1234, 'ds4_ready_chat_timeout': 45}
DEFAULTS = {'config_dir': '/etc/dgxspark-ds4', 'state_dir': '/var/lib/dgxspark-ds4', 'unit_dir': '/etc/systemd/system',
            'libexec_dir': '/usr/local/libexec/dgxspark-ds4', 'docker_bin': '/usr/bin/docker'}
RANKS = (('spark1', 'head'), ('spark2', 'worker'))


def ops(name, *extra, **kwargs):
    """A playbook with the scenario's extra vars; (rc, output); asserts rc 0 unless expect_rc is given."""
    expect = kwargs.pop('expect_rc', 0)
    rc, out = d.run_playbook(name, *extra, var_files=[LAYOUT_VARS] + list(kwargs.pop('var_files', [])), **kwargs)
    if expect is not None:
        assert rc == expect, '%s: rc %s, expected %s:\n%s' % (name, rc, expect, out[-4000:])
    return rc, out


def assert_ready_limits(out):
    flat = ' '.join(out.split())
    assert 'chat_timeout: 45.0' in flat and ' timeout: 1234.0' in flat, 'readiness did not get both timeouts: ' + out[-2000:]


def served_max_model_len():
    _status, body = d.request('/v1/models')
    return json.loads(body)['data'][0]['max_model_len']


def test_the_scenario_overrides_every_exposed_path_and_name():
    overridden = {'config_dir': d.CONFIG_DIR, 'state_dir': d.STATE_DIR, 'unit_dir': d.UNIT_DIR,
                  'libexec_dir': d.LIBEXEC_DIR, 'docker_bin': d.DOCKER_BIN}
    assert all(overridden[k] != DEFAULTS[k] for k in DEFAULTS), overridden
    assert d.unit('head') == d.unit('worker') != 'dgxspark-ds4-head.service'
    assert d.container('head') == d.container('worker') != 'dgxspark-ds4-head'
    for name, role in RANKS:
        unit = d.unit_show(name, d.unit(role), 'FragmentPath', 'ActiveState', 'UnitFileState')
        assert unit == {'FragmentPath': '%s/%s' % (d.UNIT_DIR, d.unit(role)), 'ActiveState': 'active',
                        'UnitFileState': 'enabled'}, unit
        # the unit writes docker run one word per line ("word \\"): compare the words
        unit_text = ' '.join(d.node(name, 'cat', '%s/%s' % (d.UNIT_DIR, d.unit(role))).replace('\\\n', ' ').split())
        assert 'ExecStart=%s run' % d.DOCKER_BIN in unit_text and '--name %s' % d.container(role) in unit_text
        assert '%s/launch-%s.sh' % (d.CONFIG_DIR, role) in unit_text and d.LIBEXEC_DIR + '/' in unit_text
        assert d.node(name, 'docker', 'inspect', '-f', '{{.State.Running}}', d.container(role)) == 'true'
        record = json.loads(d.node(name, 'cat', '%s/deployed-%s.json' % (d.STATE_DIR, role)))
        assert (record['unit'], record['container'], record['config_dir'], record['state_dir'], record['docker_bin']) == \
            (d.unit(role), d.container(role), d.CONFIG_DIR, d.STATE_DIR, d.DOCKER_BIN), record
        # nothing of the rank was written to the default places
        leftovers = d.node(name, 'sh', '-c', 'ls -d %s/launch-*.sh %s/deployed-*.json %s/dgxspark-ds4-head.service '
                           '%s/dgxspark-ds4-worker.service %s 2>/dev/null || true'
                           % (DEFAULTS['config_dir'], DEFAULTS['state_dir'], DEFAULTS['unit_dir'], DEFAULTS['unit_dir'],
                              DEFAULTS['libexec_dir']))
        assert leftovers == '', leftovers
        assert d.node(name, 'readlink', '-f', d.DOCKER_BIN) == '/usr/bin/docker'


def test_status_reads_the_overridden_units_and_containers():
    _rc, out = ops('status.yml')
    rows = [ln.split() for ln in out.splitlines() if ln.strip().startswith(('spark1 ', 'spark2 ')) and ' ok=' not in ln]
    assert [r[:4] for r in rows] == [['spark1', 'head', 'active/running', 'running'],
                                     ['spark2', 'worker', 'active/running', 'running']], rows
    assert "ok deepseek-v4-flash 'OK'" in out


def test_restart_both_ranks_worker_first_through_readiness():
    head0, worker0 = d.both_started()
    _rc, out = ops('restart.yml', READY_LIMITS, args=['-v'])
    assert_ready_limits(out)
    head1, worker1 = d.both_started()
    assert head1 > head0 and worker1 > worker0 and worker1 < head1, (head0, worker0, head1, worker1)
    d.wait_serving(60)


GUARD_SETTINGS = d.CONFIG_DIR + '/pairguard.json'
GUARD_UNIT = 'dgxspark-ds4-pairguard.service'


def guard_settings():
    """The head's pair guard settings as the file holds them, and the guard's main PID."""
    return (json.loads(d.node('spark1', 'cat', GUARD_SETTINGS)),
            d.unit_show('spark1', GUARD_UNIT, 'MainPID')['MainPID'])


def test_switch_and_rollback_keep_and_restore_the_set_in_the_overridden_config_dir():
    assert served_max_model_len() == 131072
    guard0, _pid0 = guard_settings()
    assert guard0['hang_window']['max_model_len'] == 131072, guard0['hang_window']
    _rc, out = ops('switch.yml', dict(READY_LIMITS, ds4_profile='throughput'), args=['-v'])
    assert_ready_limits(out)
    assert '65536' in d.node('spark1', 'cat', '%s/launch-head.sh' % d.CONFIG_DIR)
    assert served_max_model_len() == 65536
    # the guard's hang window and canary follow the recipe: its settings are part of the kept set
    guard1, pid1 = guard_settings()
    assert guard1['hang_window']['max_model_len'] == 65536 and guard1 != guard0
    manifest = json.loads(d.node('spark1', 'cat', '%s/previous/manifest.json' % d.CONFIG_DIR))
    assert manifest['files']['pairguard.json']['path'] == GUARD_SETTINGS and manifest['files']['pairguard.json']['present']
    # the rollback set lives in the overridden config dir; its unit is the overridden unit file
    kept = d.node('spark1', 'ls', '-1', '%s/previous' % d.CONFIG_DIR).split()
    assert {'launch-head.sh', 'unit', 'deployed-head.json', 'manifest.json'} <= set(kept), kept
    manifest = json.loads(d.node('spark1', 'cat', '%s/previous/manifest.json' % d.CONFIG_DIR))
    assert manifest['files']['unit']['path'] == '%s/%s' % (d.UNIT_DIR, d.unit('head')), manifest['files']['unit']
    kept_unit = ' '.join(d.node('spark1', 'cat', '%s/previous/unit' % d.CONFIG_DIR).replace('\\\n', ' ').split())
    assert '--name %s' % d.container('head') in kept_unit, kept_unit
    _rc, out = ops('rollback.yml', READY_LIMITS, args=['-v'])
    assert_ready_limits(out)
    assert '131072' in d.node('spark1', 'cat', '%s/launch-head.sh' % d.CONFIG_DIR)
    assert served_max_model_len() == 131072
    d.wait_serving(60)
    # the restored recipe's guard settings, read by a guard started after the rollback (not the switched recipe's
    # hang window over a pair that serves 131072 tokens again); the worker keeps none
    guard2, pid2 = guard_settings()
    assert guard2 == guard0 and pid2 not in ('', '0', pid1), (pid1, pid2)
    assert d.node('spark2', 'sh', '-c', 'test -e %s && echo present || echo absent' % GUARD_SETTINGS) == 'absent'
