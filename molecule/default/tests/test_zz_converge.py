# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The converge shortcut on the converged pair: a no-op run skips every role (on the deploy's one converge plan, no role
probing itself) and changes nothing,
and drift it cannot see through the record is impossible to hide: a file edited by hand, a unit
disabled and a limits file removed are each named and repaired by the next plain run, without
restarting the pair (a node script edited by hand too: its role writes its node files again on that node
only); check mode reports the repair (diff mode shows the file it would write back) and does not make it."""


import os
import re
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
from ds4_drill import API_KEY, CONFIG_DIR, INVENTORY, node, run_playbook, started_at  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not INVENTORY, reason='runs inside molecule verify only')

ROLES = ('host_hardening', 'firewall', 'peer_access', 'container_image', 'model_cache', 'nccl_fabric',
         'vllm_service', 'api_proxy')
# the deploy's converge plan (playbooks/tasks/deploy.yml): api_proxy decides itself after the router published its endpoint
PLANNED = ROLES[:-1]
SYSCTL = '/etc/sysctl.d/60-dgxspark-ds4.conf'
FIREWALL_UNIT = 'dgxspark-ds4-firewall.service'
LIMITS = '/etc/security/limits.d/60-dgxspark-ds4.conf'
# a node script vllm_service installs on both ranks (its node files, skipped by a launch change when as recorded)
GUARD = '/usr/local/libexec/dgxspark-ds4/pairguard.py'


def changed_counts(out):
    return dict((m.group(1), int(m.group(2))) for m in re.finditer(r'^(spark\d)\s+:\s+ok=\d+\s+changed=(\d+)', out, re.M))


def converge_lines(out):
    """The converge decisions of a run (one per role and node, each cut at 400 characters or at the end of its
    message; the yaml callback folds long messages): what a failed assertion shows."""
    flat = ' '.join(out.split())
    lines = (flat[m.start():m.start() + 400] for m in re.finditer(r'\b(?:%s): runs \(' % '|'.join(ROLES), flat))
    return '\n'.join(re.split(r"' runs: | TASK \[", line)[0] for line in lines)


def masked(text):
    """Whether Ansible masked a no_log value in text (exactly eight stars, not a task banner's row of them)."""
    return re.search(r'(?<!\*)\*{8}(?!\*)', text) is not None


def test_noop_run_skips_every_role_and_changes_nothing():
    """The scenario's idempotence check (Molecule's own step is left out: this asserts more): restarts nothing."""
    units = (('spark1', 'dgxspark-ds4-head.service'), ('spark2', 'dgxspark-ds4-worker.service'))

    def starts():
        return ([started_at('spark1', 'head'), started_at('spark2', 'worker')]
                + [node(host, 'systemctl', 'show', unit, '-p', 'NRestarts', '--value') for host, unit in units])

    starts0 = starts()
    rc, out = run_playbook('site.yml')
    assert rc == 0, out[-3000:]
    assert starts() == starts0, 'a rank was restarted by a no-op run'
    # one converge plan for every role (dgxspark.ds4.converge_plan): each node as recorded, the roles skipped whole,
    # none of them probing itself
    flat = ' '.join(out.split())
    assert flat.count('converge plan: as recorded on this node: %s' % ', '.join(PLANNED)) == 2, flat[-3000:]
    for role in PLANNED:
        assert '%s: runs (' % role not in flat and '%s: as recorded on every node' % role not in flat, converge_lines(out)
    # and the API proxy in the plan after readiness (no router in a one-pair site): skipped whole, not probing itself
    assert flat.count('converge plan: as recorded on this node: api_proxy') == 2, flat[-3000:]
    assert 'api_proxy: runs (' not in flat and 'api_proxy: as recorded on every node' not in flat, converge_lines(out)
    # no record holds a value Ansible masked (a no_log value found inside a hash was recorded as ********, and every
    # later probe differed from it: the landing CI of 1b53b02)
    for host in ('spark1', 'spark2'):
        records = node(host, 'sh', '-c', 'cat /var/lib/dgxspark-ds4/converge/*.json')
        assert '"version"' in records and not masked(records), host
    assert changed_counts(out) == {'spark1': 0, 'spark2': 0}, out[-1500:]
    # the unpinned inputs, once per run: the inventory pins the revision, the simulator image is a tag
    assert flat.count('image ds4-vllm-sim:test: a tag, not a digest') == 1, flat[-3000:]
    assert 'ds4_site_overrides.image.ref: ds4-vllm-sim:test@sha256:<digest>' in flat
    assert 'model revision of' not in flat


def test_drift_is_named_and_repaired_without_a_restart():
    head0, worker0 = started_at('spark1', 'head'), started_at('spark2', 'worker')
    sysctl0 = node('spark2', 'cat', SYSCTL)
    node('spark2', 'sh', '-c', 'echo "vm.swappiness = 60" >> %s' % SYSCTL)
    node('spark1', 'systemctl', 'disable', '--quiet', FIREWALL_UNIT)
    node('spark1', 'rm', '-f', LIMITS)
    guard0 = node('spark2', 'sha1sum', GUARD).split()[0]
    node('spark2', 'sh', '-c', 'echo "# edited by hand" >> %s' % GUARD)
    # the two files that hold the client key on the head (the pair guard's canary settings, the proxy's keys), each
    # one empty line longer: their roles render them again in the check run below, which must not show the key
    secret_files = ('%s/pairguard.json' % CONFIG_DIR, '/etc/dgxspark-ds4/proxy/keys.conf')
    secret0 = [node('spark1', 'sha1sum', f).split()[0] for f in secret_files]
    node('spark1', 'sh', '-c', ' && '.join('echo >> %s' % f for f in secret_files))

    # Check mode names the drift and repairs nothing; diff mode shows the repairs it would make; -vv as an operator
    # looking into drift would run it: no secret in the output (issue 46).
    rc, out = run_playbook('site.yml', args=['--check', '--diff', '-vv'])
    assert rc == 0, out[-3000:]
    assert API_KEY in node('spark1', 'cat', secret_files[0])
    assert API_KEY not in out, 'the client key is in the --check --diff -vv output'
    assert 'vllm_service: runs (file %s: recorded sha1:' % secret_files[0] in ' '.join(out.split()), out[-3000:]
    flat = ' '.join(out.split())  # the yaml callback folds long messages
    assert 'host_hardening: runs (file %s: recorded sha1:' % SYSCTL in flat
    # the plan saw the drift (spark2's sysctl file: the first planned role) and left every role to decide itself
    assert 'converge plan: host_hardening differs (file %s: recorded sha1:' % SYSCTL in flat, flat[-3000:]
    assert 'firewall: runs (' in flat and 'unit %s: recorded enabled/' % FIREWALL_UNIT in flat
    assert 'recorded sha1:' in flat and 'file %s: recorded sha1:' % LIMITS in flat and ', now absent' in flat
    assert changed_counts(out)['spark2'] > 0
    # the removed limits file (a template) comes back in the diff, line by line (ansible.posix.sysctl, which
    # repairs the sysctl file, has no diff mode: its repair is named by the converge line above)
    assert re.search(r'^\+\+\+ after: \S*limits\.conf\.j2$', out, re.M), out[-3000:]
    assert re.search(r'^\+root\s+hard\s+memlock\s+unlimited$', out, re.M), out[-3000:]
    assert 'vllm_service: runs (file %s: recorded sha1:' % GUARD in flat, converge_lines(out)
    assert not masked(converge_lines(out)), converge_lines(out)
    assert 'vm.swappiness = 60' in node('spark2', 'cat', SYSCTL)
    assert node('spark1', 'systemctl', 'is-enabled', FIREWALL_UNIT, check=False) == 'disabled'
    assert node('spark1', 'sh', '-c', 'test -e %s && echo present || echo absent' % LIMITS) == 'absent'

    # The next plain run repairs all three, restarts nothing, and the one after is a no-op again.
    rc, out = run_playbook('site.yml')
    assert rc == 0, out[-3000:]
    assert node('spark2', 'cat', SYSCTL) == sysctl0
    assert node('spark1', 'systemctl', 'is-enabled', FIREWALL_UNIT, check=False) == 'enabled'
    assert 'memlock' in node('spark1', 'cat', LIMITS)
    # the edited script: vllm_service runs for it, writes its node files again on spark2 only (spark1's are as
    # recorded), restarts no rank
    assert node('spark2', 'sha1sum', GUARD).split()[0] == guard0
    assert [node('spark1', 'sha1sum', f).split()[0] for f in secret_files] == secret0
    assert 'vllm_service: runs (file %s: recorded sha1:' % GUARD in ' '.join(out.split()), converge_lines(out)
    assert re.search(r'^included: \S*node_files\.yml for spark2$', out, re.M), out[-3000:]
    assert (started_at('spark1', 'head'), started_at('spark2', 'worker')) == (head0, worker0)
    rc, out = run_playbook('site.yml')
    assert rc == 0, out[-3000:]
    assert changed_counts(out) == {'spark1': 0, 'spark2': 0}, out[-1500:]
    # after the repair the plan finds every role as recorded again: the records the roles wrote hold the digests the
    # plan computes before them (a plan that computed another digest would never find one as recorded)
    assert ' '.join(out.split()).count('converge plan: as recorded on this node: %s' % ', '.join(PLANNED)) == 2, out[-3000:]
