# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""maintenance.yml refuses before any host changes, naming the variable: bad settings (all of them in one message), a
named package this run could not upgrade (here: not installed, read from this machine's real dpkg), a pair that
serves nothing yet (the local two-node inventory of local_pair: nothing is deployed on this machine). The held-elsewhere
refusal and the hold plan are unit-tested on recorded dpkg-query output (test_maintenance.py): this machine's holds are
not the test's to change."""


import local_pair  # pylint: disable=import-error

NOTHING_CHANGED = 'Nothing was changed.'


def _run(tmp_path, extra):
    rc, out = local_pair.run_playbook(tmp_path, 'maintenance.yml', extra)
    return rc, ' '.join(out.split())


def test_bad_settings_are_all_named_before_anything_runs(tmp_path):
    rc, flat = _run(tmp_path, {'ds4_maintenance_packages': 'docker-ce', 'ds4_maintenance_upgrade': 'everything',
                               'ds4_maintenance_reboot_command': ['ipmitool', '-H', '{bmc}', 'power', 'cycle'],
                               'ds4_maintenance_reboot_timeout': 10})
    assert rc != 0, flat[-3000:]
    for words in ("ds4_maintenance_packages='docker-ce' is not a list of package names",
                  "ds4_maintenance_upgrade='everything' is not one of full, safe",
                  "ds4_maintenance_reboot_command: '{bmc}' names {bmc}, which is not one of {host}",
                  'ds4_maintenance_reboot_timeout=10 is not a number of seconds between 60 and 7200', NOTHING_CHANGED):
        assert words in flat, (words, flat[-3000:])
    assert 'TASK [The packages and their holds' not in flat


def test_a_named_package_that_is_not_installed_is_refused(tmp_path):
    rc, flat = _run(tmp_path, {'ds4_maintenance_packages': ['ds4-no-such-package']})
    assert rc != 0 and 'ds4_maintenance_packages: ds4-no-such-package is not installed on' in flat, flat[-3000:]
    assert NOTHING_CHANGED in flat and 'TASK [One pair at a time' not in flat


def test_a_pair_that_serves_nothing_is_refused(tmp_path):
    rc, flat = _run(tmp_path, {})
    assert rc != 0 and 'has no launch script at /etc/dgxspark-ds4/launch-head.sh: nothing is deployed' in flat, flat[-3000:]
    assert 'Fix: deploy with playbooks/site.yml first' in flat and NOTHING_CHANGED in flat
    assert 'TASK [One pair at a time' not in flat
