# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nft_table against the real nft, in a network namespace of its own (`unshare -n`: the host's ruleset is never
touched): loaded once, then nothing; `nft flush chain` and `nft delete rule` (which keep the digest comment) are
found and reloaded; the run after is a no-op again. Skips where nft, unshare or the privilege are missing."""


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
    from ansible_collections.dgxspark.ds4.plugins.module_utils._security.nft_ruleset import render_ruleset
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


# Run inside `unshare -n`: loopback up with the node's fabric address on it, the rendered table loaded, SYN cookies as
# asked (net.ipv4.tcp_syncookies is the namespace's own). Each case: a listener that dropped to its uid binds a port and
# waits for one connection; a client that dropped to its uid connects and sends a request line with a key. Prints JSON
# {case: [client outcome, what the listener received]}.
SQUAT_PROBE = r'''
import json, os, socket, subprocess, sys
nft, ruleset, cases = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
subprocess.run(['ip', 'link', 'set', 'lo', 'up'], check=True)
subprocess.run(['ip', 'addr', 'add', '10.77.0.11/32', 'dev', 'lo'], check=True)
subprocess.run([nft, '-f', ruleset], check=True)
LINE = b'POST /v1/chat/completions HTTP/1.1\r\nAuthorization: Bearer sk-probe-key\r\n\r\n'

def drop(uid):
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)

out = {}
for name, (listen_uid, bind, port, backlog, client_uid, host, cookies) in sorted(cases.items()):
    with open('/proc/sys/net/ipv4/tcp_syncookies', 'w') as f:
        f.write(str(cookies))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        # [bind uid, accept uid]: nginx's way, the master (root) listens and a worker that dropped to its user accepts
        bind_uid, accept_uid = listen_uid if isinstance(listen_uid, list) else (listen_uid, listen_uid)
        drop(bind_uid)
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((bind, port))
        s.listen(backlog)
        if accept_uid != bind_uid:
            drop(accept_uid)
        os.write(w, b'L')
        s.settimeout(1.5)
        try:
            c, _a = s.accept()
            c.settimeout(2)
            got = c.recv(200).decode('latin-1')
        except OSError as exc:
            got = 'nothing (%s)' % type(exc).__name__
        os.write(w, got.encode('latin-1'))
        os._exit(0)
    os.close(w)
    assert os.read(r, 1) == b'L'
    cr, cw = os.pipe()
    cpid = os.fork()
    if cpid == 0:
        os.close(cr)
        drop(client_uid)
        c = socket.socket()
        c.settimeout(1)
        try:
            c.connect((host, port))
            c.sendall(LINE)
            res = 'connected'
        except ConnectionRefusedError:
            res = 'refused'
        except OSError as exc:
            res = 'no answer (%s)' % type(exc).__name__
        os.write(cw, res.encode())
        os._exit(0)
    os.close(cw)
    os.waitpid(cpid, 0)
    client = os.read(cr, 100).decode()
    os.waitpid(pid, 0)
    out[name] = [client, os.read(r, 400).decode('latin-1')]
print(json.dumps(out))
'''


def test_real_served_ports_answer_from_their_services_only_a_local_squatter_receives_nothing(tmp_path):
    """Issue 46: a local user listening on a port of the collection while its service is down (vLLM restarting, the
    router or the node exporter stopped) must receive nothing: not the proxy's request, not its Bearer key. On real
    sockets in a network namespace: nobody (65534) listening on vLLM's port, the router's admin port, the master port,
    the node exporter's and the API's gets no connection from root or the proxy's uid, also with SYN cookies forced
    (which a squatter can provoke with a short listen queue: a cookie leaves with no socket, so a rule on the socket's
    owner alone would let it through); root and a DynamicUser uid (vllm-router) serve as before; a port the collection
    does not serve stays a user's. The control plane: another user's connection to the master port or an inter-node
    port on the fabric address is reset, root's gets through."""
    from ansible_collections.dgxspark.ds4.plugins.module_utils._security.nft_ruleset import (
        expected_listing, normalise_listing, render_ruleset)
    spec = {'table': 'dgxspark_ds4', 'api_port': 8000, 'upstream_port': 8001, 'master_port': 29501,
            'allowed_networks': [], 'fabric_addresses': ['10.77.0.11', '10.77.0.12'], 'self_address': '10.77.0.11',
            'ephemeral_ports': '32768-60999', 'owned_ports': [8001, 29000, 30000], 'owner_uids': [0, 33],
            'served_ports': [9100], 'server_uids': ['0', '111', '61184-65519']}
    ruleset = tmp_path / 'ruleset.nft'
    ruleset.write_text(render_ruleset(spec))
    nobody, www, dyn, lo, fab = 65534, 33, 61300, '127.0.0.1', '10.77.0.11'
    cases = {
        # listener uid, bind address, port, listen backlog, client uid, client's address, net.ipv4.tcp_syncookies
        'squat vllm port': [nobody, lo, 8001, 16, www, lo, 1],
        'squat vllm port, cookies': [nobody, lo, 8001, 16, www, lo, 2],
        'squat vllm port, root client': [nobody, '0.0.0.0', 8001, 0, 0, lo, 1],
        'squat router admin': [nobody, lo, 30000, 16, 0, lo, 1],
        'squat master port': [nobody, '0.0.0.0', 29501, 16, 0, fab, 1],
        'squat node exporter, cookies': [nobody, fab, 9100, 16, 0, fab, 2],
        'squat api front': [nobody, '0.0.0.0', 8000, 16, 0, lo, 1],
        'vllm serves': [0, lo, 8001, 16, www, lo, 1],
        'vllm serves, cookies': [0, lo, 8001, 16, 0, lo, 2],
        'router (DynamicUser) serves': [dyn, lo, 30000, 16, 0, lo, 1],
        'a user port stays the user\'s': [nobody, lo, 8002, 16, nobody, lo, 1],
        'master port, another user': [0, fab, 29501, 16, nobody, fab, 1],
        'master port, root': [0, fab, 29501, 16, 0, fab, 1],
        'inter-node port, another user': [0, fab, 40001, 16, nobody, fab, 1],
        'inter-node port, root': [0, fab, 40001, 16, 0, fab, 1],
        # a server that is not root answering a local client on the fabric address: its replies go to the client's
        # own port, inside the inter-node range (the router host's own head behind nginx's worker, seen in replicas)
        'node exporter (its user) serves a local client': [111, fab, 9100, 16, 0, fab, 1],
        'a user\'s own server answers a local client': [nobody, fab, 8002, 16, 0, fab, 1],
        'nginx (root listens, worker accepts) serves a local client': [[0, www], fab, 8000, 16, 0, fab, 1],
    }
    proc = subprocess.run(['unshare', '-n', sys.executable, '-c', SQUAT_PROBE, NFT, str(ruleset), json.dumps(cases)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    request = 'POST /v1/chat/completions HTTP/1.1\r\nAuthorization: Bearer sk-probe-key\r\n\r\n'
    for name, (client, got) in sorted(seen.items()):
        if name.startswith('squat'):
            assert client.startswith('no answer') and got.startswith('nothing'), (name, client, got)
        elif name.endswith('another user'):
            assert client == 'refused' and got.startswith('nothing'), (name, client, got)
        elif name == 'vllm serves, cookies':
            # the price: under a SYN flood a served port answers from its listen queue only, cookies are dropped
            assert client.startswith('no answer'), (name, client, got)
        else:
            assert client == 'connected' and got == request, (name, client, got)
    assert len(seen) == len(cases)
    # nft lists the new rules as rendered (the module's live comparison would reload the table on every run otherwise)
    listed = subprocess.run(['unshare', '-n', 'sh', '-c', '%s -f %s && %s list table inet dgxspark_ds4' % (NFT, ruleset, NFT)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert listed.returncode == 0, listed.stdout
    assert 'tcp sport { 8000, 8001, 9100, 29000, 29501, 30000 } tcp flags syn drop' in listed.stdout, listed.stdout
    assert normalise_listing(listed.stdout) == expected_listing(spec)
