# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nft_table against the real nft, in a network namespace of its own (`unshare -n`: the host's ruleset is never
touched): loaded once, then nothing; `nft flush chain` and `nft delete rule` (which keep the digest comment) are
found and reloaded; the run after is a no-op again. Skips where nft, unshare or the privilege are missing."""

from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
NFT = shutil.which('nft') or '/usr/sbin/nft'


def _netns_ok():
    if not (os.path.exists(NFT) and shutil.which('unshare') and os.path.exists(PLAYBOOK)):
        return False
    return subprocess.run(['unshare', '-n', NFT, 'list', 'ruleset'], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, check=False).returncode == 0


# Under CI=true (root, tests/harness/bootstrap.sh installs nftables) a missing nft fails instead of skipping.
pytestmark = pytest.mark.skipif(not os.environ.get('CI') and not _netns_ok(), reason='needs nft, unshare -n and the privilege to use them')


def _play(tmp_path, tasks):
    """Run the tasks with ansible-playbook in a private network namespace (unshare -n: the machine's own ruleset is
    never touched); the list the last task wrote to results.json."""
    (tmp_path / 'play.yml').write_text(yaml.safe_dump([{'hosts': 'localhost', 'gather_facts': False, 'tasks': tasks}]))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1')
    proc = subprocess.run(['unshare', '-n', PLAYBOOK, '-i', 'localhost,', '-c', 'local', '-e',
                           'ansible_python_interpreter=%s' % sys.executable, str(tmp_path / 'play.yml')],
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return json.loads((tmp_path / 'results.json').read_text())


def _results(tmp_path, names):
    return {'ansible.builtin.copy': {'dest': str(tmp_path / 'results.json'), 'mode': '0644',
                                     'content': '{{ [%s] | to_json }}' % ', '.join(names)}}


@pytest.mark.parametrize('peers', [['10.77.0.13'], ['10.77.0.13', '10.77.0.15']])
def test_real_nft_vrrp_peers_load_and_compare_equal(tmp_path, peers):
    """One VRRP peer (two router hosts) is listed by nft without braces: the rendered rule must say it the same way,
    or the live comparison refuses its own load (seen in Molecule replicas)."""
    table = {'path': str(tmp_path / 'nftables.conf'), 'api_port': 8000, 'upstream_port': 8001, 'master_port': 29501,
             'allowed_networks': ['10.77.0.1/32'], 'fabric_addresses': ['10.77.0.11', '10.77.0.12'],
             'self_address': '10.77.0.11', 'ephemeral_ports': '32768-60999', 'vrrp_peers': peers, 'nft_bin': NFT}
    load = {'dgxspark.ds4.nft_table': table}
    first, again = _play(tmp_path, [dict(load, register='first'), dict(load, register='again'),
                                    _results(tmp_path, ['first', 'again'])])
    assert first['changed'] and first['loaded']
    assert not again['changed'] and again['live_differences'] == [], again


def test_real_nft_flushed_chain_and_deleted_rule_are_reloaded(tmp_path):
    table = {'path': str(tmp_path / 'nftables.conf'), 'api_port': 8000, 'upstream_port': 8001, 'master_port': 29501,
             'allowed_networks': ['10.77.0.20/32', '10.77.0.1/32', '10.1.0.0/16'],
             'fabric_addresses': ['10.77.0.11', '10.77.0.12'], 'self_address': '10.77.0.11',
             'ephemeral_ports': '32768-60999', 'service_ports': [{'port': 9090, 'allow': 'monitoring', 'name': 'prometheus'}],
             # one owned port (nft lists a one-element set bare) and two owners (in braces): both forms as nft lists them
             'monitoring_networks': ['10.77.0.30/32'], 'owned_ports': [8001], 'owner_uids': [0, 33],
             'nft_bin': NFT}
    load = {'dgxspark.ds4.nft_table': table}
    delete = ('%s delete rule inet dgxspark_ds4 input handle $(%s -a list chain inet dgxspark_ds4 input | '
              "sed -n 's/.*dport 29501 reject with tcp reset # handle //p')" % (NFT, NFT))
    tasks = [dict(load, register='first'), dict(load, register='again'),
             {'ansible.builtin.command': {'argv': [NFT, 'flush', 'chain', 'inet', 'dgxspark_ds4', 'input']}},
             dict(load, register='flushed'),
             {'ansible.builtin.shell': delete},
             dict(load, register='deleted'),
             {'ansible.builtin.command': {'argv': [NFT, 'flush', 'chain', 'inet', 'dgxspark_ds4', 'output']}},
             dict(load, register='output_flushed'), dict(load, register='last'),
             _results(tmp_path, ['first', 'again', 'flushed', 'deleted', 'output_flushed', 'last'])]
    first, again, flushed, deleted, output_flushed, last = _play(tmp_path, tasks)
    assert first['changed'] and first['loaded']
    assert not again['changed'] and again['live_differences'] == []
    assert flushed['loaded'] and not flushed['file_changed'] and flushed['live_before'] == first['digest']
    assert '-tcp dport 29501 reject with tcp reset' in flushed['live_differences'] and len(flushed['live_differences']) == 11
    assert deleted['loaded'] and deleted['live_differences'] == ['-tcp dport 29501 reject with tcp reset']
    # the loopback ports' owner rule (issue 27 item 3) is compared like the input chain's rules
    assert output_flushed['loaded'] and output_flushed['live_differences'] == [
        '-oif "lo" tcp dport 8001 meta skuid != { 0, 33 } reject with tcp reset']
    assert not last['changed']


# Run inside `unshare -n` (a network namespace of its own): loopback up, the rendered table loaded, a listener on each
# owned port; one connect per (uid, port) from a child that dropped to that uid. Prints JSON {"uid:port": outcome}.
OWNER_PROBE = r'''
import json, os, socket, subprocess, sys
nft, ruleset, ports, uids = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
subprocess.run(['ip', 'link', 'set', 'lo', 'up'], check=True)
subprocess.run([nft, '-f', ruleset], check=True)
listeners = []
for port in ports:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('127.0.0.1', port))
    s.listen(16)
    listeners.append(s)
out = {}
for uid in uids:
    for port in ports:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            c = socket.socket()
            c.settimeout(3)
            try:
                c.connect(('127.0.0.1', port))
                res = 'open'
            except ConnectionRefusedError:
                res = 'refused'
            except OSError as exc:
                res = 'error %s' % exc
            os.write(w, res.encode())
            os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        out['%d:%d' % (uid, port)] = os.read(r, 100).decode()
        os.close(r)
print(json.dumps(out))
'''


def test_real_owner_rule_lets_only_the_listed_uids_reach_the_owned_ports(tmp_path):
    """The output rule by socket owner, on real sockets: root and uid 33 (www-data, the proxy) reach the owned ports
    (vLLM's, vllm-router's admin and metrics), uid 65534 (nobody) is reset; a port not owned stays open to it."""
    from ansible_collections.dgxspark.ds4.plugins.module_utils.nft_ruleset import render_ruleset
    ruleset = tmp_path / 'ruleset.nft'
    ruleset.write_text(render_ruleset({
        'table': 'dgxspark_ds4', 'api_port': 8000, 'upstream_port': 8001, 'master_port': 29501,
        'allowed_networks': [], 'fabric_addresses': ['10.77.0.11', '10.77.0.12'], 'self_address': '10.77.0.11',
        'ephemeral_ports': '32768-60999', 'owned_ports': [8001, 29000, 30000], 'owner_uids': [0, 33]}))
    ports, uids = [8001, 29000, 30000, 8000], [0, 33, 65534]
    proc = subprocess.run(['unshare', '-n', sys.executable, '-c', OWNER_PROBE, NFT, str(ruleset), json.dumps(ports),
                           json.dumps(uids)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = dict(('%d:%d' % (uid, port), 'refused' if (uid == 65534 and port != 8000) else 'open')
                    for uid in uids for port in ports)
    assert seen == expected
