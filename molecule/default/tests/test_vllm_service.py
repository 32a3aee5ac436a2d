# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""testinfra checks for dgxspark.ds4.vllm_service on the Molecule pair (spark1 head, spark2 worker).

Enabled once the default scenario runs the role. Reads what the role deployed from
/var/lib/dgxspark-ds4/deployed-<role>.json, then checks the unit, its properties, every file
it references, the running container's options, and that the worker started before the head.
"""


import json
import os

import pytest
import testinfra
import testinfra.utils.ansible_runner

INVENTORY = os.environ.get('MOLECULE_INVENTORY_FILE')
testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts('spark') if INVENTORY else []

STATE_DIR = '/var/lib/dgxspark-ds4'
CONFIG_DIR = '/etc/dgxspark-ds4'
LIBEXEC = '/usr/local/libexec/dgxspark-ds4'


def deployed(host):
    files = host.check_output('ls %s/deployed-*.json' % STATE_DIR).split()
    assert len(files) == 1, 'exactly one rank per node, found %s' % files
    return json.loads(host.file(files[0]).content_string)


def inspect(host, name):
    return json.loads(host.check_output('docker inspect %s' % name))[0]


def show(host, unit, *props):
    out = host.check_output('systemctl show %s -p %s' % (unit, ','.join(props)))
    return dict(line.split('=', 1) for line in out.splitlines() if '=' in line)


def test_unit_enabled_and_running(host):
    dep = deployed(host)
    assert dep['unit'] == 'dgxspark-ds4-%s.service' % dep['role']
    svc = host.service(dep['unit'])
    assert svc.is_enabled
    assert svc.is_running


def test_unit_properties(host):
    dep = deployed(host)
    p = show(host, dep['unit'], 'Type', 'Restart', 'StartLimitBurst', 'StartLimitIntervalUSec', 'KillMode',
             'TimeoutStopUSec', 'TimeoutStartUSec', 'Requires', 'After', 'Wants', 'FragmentPath')
    assert p['Type'] == 'simple'
    assert p['Restart'] == 'always'   # vLLM exits 0 after an engine death (README, The unit)
    assert 1 <= int(p['StartLimitBurst']) <= 5
    assert p['StartLimitIntervalUSec'] not in ('0', 'infinity')
    assert p['KillMode'] == 'mixed'
    assert p['TimeoutStartUSec'] not in ('0', 'infinity')
    assert 'docker.service' in p['Requires']
    # No cross-node dependency: the ranks are ordered by the role and the pair guard, not by systemd.
    # (Same-node ordering is fine: the firewall unit loads its table before the rank starts.)
    deps = (p['After'] + ' ' + p['Wants'] + ' ' + p['Requires']).split()
    assert not [u for u in deps if u in ('dgxspark-ds4-head.service', 'dgxspark-ds4-worker.service')], deps
    assert 'dgxspark-ds4-firewall.service' in p['After']
    assert p['FragmentPath'] == '/etc/systemd/system/%s' % dep['unit']


def test_referenced_files(host):
    dep = deployed(host)
    script = host.file(dep['launch_script'])
    assert script.exists and script.user == 'root' and script.mode == 0o755
    assert host.file(CONFIG_DIR).mode == 0o755
    assert host.file('%s/nccl.env' % CONFIG_DIR).exists
    secrets = host.file('%s/secrets-%s.env' % (CONFIG_DIR, dep['role']))
    assert secrets.user == 'root' and secrets.mode == 0o600
    assert 'VLLM_API_KEY' not in script.content_string
    for helper in ('prestart.py', 'verify_unit.py'):
        assert host.file('%s/%s' % (LIBEXEC, helper)).mode == 0o644
    assert host.file('%s/prestart-%s.json' % (CONFIG_DIR, dep['role'])).exists
    # The role's own check: every Exec* target, volume source, env file and the entrypoint exist.
    host.run_expect([0], '/usr/bin/python3 %s/verify_unit.py /etc/systemd/system/%s %s' % (LIBEXEC, dep['unit'], dep['unit']))


def test_container_options(host):
    dep = deployed(host)
    c = inspect(host, dep['container'])
    hc = c['HostConfig']
    assert c['State']['Running']
    assert c['Image'] == dep['image_id']
    assert hc['NetworkMode'] == 'host'
    assert hc['IpcMode'] == 'host'
    assert hc['Privileged'] is False
    assert hc['RestartPolicy']['Name'] in ('no', '')
    assert hc['AutoRemove'] is True
    assert hc['Init'] is True
    ulimits = dict((u['Name'], u) for u in hc['Ulimits'] or [])
    assert 'memlock' in ulimits and 'stack' in ulimits
    assert ulimits['stack']['Soft'] == 67108864
    mounts = dict((m['Destination'], m) for m in c['Mounts'])
    assert mounts[dep['launch_script']]['Source'] == dep['launch_script']
    assert mounts[dep['launch_script']]['RW'] is False
    assert c['Config']['Entrypoint'] == [dep['launch_script']]
    ro_model = [m for m in c['Mounts'] if m['Destination'].startswith('/models') or 'model' in m['Source']]
    assert ro_model and all(m['RW'] is False for m in ro_model)


def _ns(stamp):
    """Docker's RFC 3339 UTC stamp (Go trims trailing zeros of the fraction) -> sortable tuple."""
    import datetime
    base, _dot, frac = stamp.rstrip('Z').partition('.')
    secs = datetime.datetime.strptime(base, '%Y-%m-%dT%H:%M:%S')
    return (secs, int((frac or '0').ljust(9, '0')[:9]))


def _pair():
    runner = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY)
    # through sudo, as the verifier's own hosts (molecule.yml: the login is the unprivileged `ops`)
    hosts = [testinfra.get_host('ansible://%s?ansible_inventory=%s' % (h, INVENTORY), sudo=True)
             for h in runner.get_hosts('spark')]
    by_role = {}
    for h in hosts:
        by_role[deployed(h)['role']] = h
    return by_role


@pytest.mark.skipif(not INVENTORY, reason='needs the Molecule inventory')
def test_worker_started_before_head():
    pair = _pair()
    head, worker = pair['head'], pair['worker']
    head_started = inspect(head, deployed(head)['container'])['State']['StartedAt']
    worker_started = inspect(worker, deployed(worker)['container'])['State']['StartedAt']
    assert _ns(worker_started) < _ns(head_started), 'worker %s must start before head %s' % (worker_started, head_started)
