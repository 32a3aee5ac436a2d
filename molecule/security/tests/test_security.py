# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""API exposure on the converged pair, seen from a third container on ds4-fabric.

spark1 (head, 10.77.0.11) and spark2 (worker, 10.77.0.12) run site.yml with the API open to
10.77.0.1/32 (the controller) and 10.77.0.20/32 (`client`), two client keys, vLLM's own key and a
fake HF token (inventory/hosts.yml: model_cache_hf_token, which must never reach the serving
container). Every check can fail: each asserts an observed status, a
connection outcome, a file's mode or the absence of a test secret in real output.
"""


import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

KEY_A = 'ds4SecClientKeyA-7f3e9c1d2b4a6e8f'
KEY_B = 'ds4SecClientKeyB-0a9b8c7d6e5f4a3b'
UPSTREAM = 'ds4SecUpstreamKey-5c4b3a2918f7e6d5'
HF = 'hf_ds4SecFakeHubToken9d8c7b6a5f4e'
SECRETS = (KEY_A, KEY_B, UPSTREAM, HF)
HEAD = d.ip(11)

# One TCP connect from a container: "open", "refused" or "timeout".
PROBE = ('import socket, sys\n'
         's = socket.socket()\ns.settimeout(3)\n'
         'try:\n    s.connect((sys.argv[1], int(sys.argv[2])))\n    print("open")\n'
         'except ConnectionRefusedError:\n    print("refused")\n'
         'except OSError as e:\n    print("timeout" if "timed out" in str(e) else "error %s" % e)\n')


def tcp(frm, host, port):
    return d.node(frm, 'python3', '-c', PROBE, host, str(port))


# The fronts serve TLS (ds4_tls, inventory/hosts.yml): the client trusts the CA the collection made on the controller
# (ds4_tls_ca_dir), copied into it once - never what a server sends.
CA_DIR = os.path.join(os.environ.get('MOLECULE_EPHEMERAL_DIRECTORY') or '/tmp/ds4-security', 'tls-ca')
CLIENT_CA = '/tmp/ds4-tls-ca.crt'


_TRUSTING = set()


def client_trusts_the_ca(frm='client'):
    if frm not in _TRUSTING:
        source = os.path.join(CA_DIR, 'ca.crt')
        subprocess.run(['docker', 'cp', source, '%s:%s' % (d.node_container(frm), CLIENT_CA)], check=True)
        # the copy is what the controller holds, a certificate (one verify run saw curl 77, "error setting certificate
        # file", on every request with this file, not reproduced since: say what was there if it happens again)
        with open(source) as handle:
            expected = handle.read().strip()
        copied = d.node(frm, 'sh', '-c', 'ls -la %s; cat %s' % (CLIENT_CA, CLIENT_CA), check=False)
        assert expected.startswith('-----BEGIN CERTIFICATE-----') and copied.endswith(expected), (source, expected, copied)
        _TRUSTING.add(frm)


def curl(frm, path, key=None, method='GET', body=None, port=8000, host=HEAD, scheme='https', cacert=CLIENT_CA):
    """(status, body) of one request from a container (https, verified against cacert); status 0 = no HTTP answer
    (the body is then curl's error, e.g. "SSL certificate problem")."""
    if cacert == CLIENT_CA and scheme == 'https':
        client_trusts_the_ca(frm)
    argv = ['curl', '-sS', '-o', '/tmp/ds4-body', '-w', '%{http_code}', '--max-time', '20', '-X', method]
    if scheme == 'https' and cacert:
        argv += ['--cacert', cacert]
    if key:
        argv += ['-H', 'Authorization: Bearer ' + key]
    if body is not None:
        argv += ['-H', 'Content-Type: application/json', '-d', json.dumps(body)]
    out = d.node(frm, *(argv + ['%s://%s:%d%s' % (scheme, host, port, path)]), check=False)
    m = re.search(r'(\d{3})$', out)
    status = int(m.group(1)) if m else 0
    return status, d.node(frm, 'cat', '/tmp/ds4-body', check=False) if status else out


def chat_body():
    return {'model': 'deepseek-v4-flash', 'max_tokens': 16, 'temperature': 0,
            'messages': [{'role': 'user', 'content': 'What is 2+2? Answer with one word.'}]}


def test_vllm_binds_loopback_and_the_proxy_fronts_it():
    listening = d.node('spark1', 'ss', '-Hltn')
    assert re.search(r'127\.0\.0\.1:8001\s', listening), listening   # vLLM (simulator) behind the proxy
    assert re.search(r'0\.0\.0\.0:8000\s', listening), listening     # nginx
    args = json.loads(d.node('spark1', 'docker', 'inspect', '-f', '{{json .Args}}', 'dgxspark-ds4-head'))
    assert args == [] or '--api-key' not in args
    script = d.node('spark1', 'cat', '/etc/dgxspark-ds4/launch-head.sh')
    assert '--host 127.0.0.1' in script and '--port 8001' in script
    assert d.node('spark1', 'systemctl', 'is-active', 'dgxspark-ds4-proxy.service') == 'active'
    assert d.node('spark2', 'systemctl', 'is-active', 'dgxspark-ds4-proxy.service', check=False) != 'active'


# ---------------------------------------------------------------------------------------------
# Nothing listens beyond what the firewall allows. The allowed set is read from each node, not listed here:
# the TCP ports an `accept` rule of the collection's own nft table opens (API port from the allowed networks,
# master port and the ephemeral inter-node range from the fabric addresses, monitoring ports when on), any
# socket bound to a loopback address only (vLLM behind the proxy; the firewall's `iif "lo" accept`), and the
# ports sshd is configured for (`sshd -T`: the deployment's own management and peer-key access).
# UDP the same way (`ss -lunpH` against the table's `udp dport ... accept` rules, loopback exempt): the table
# has no UDP accept today, so any UDP socket bound beyond loopback is a stray (sshd is TCP only).
_ACCEPT_RE = re.compile(r'(?:\bip6? daddr (\S+) )?\b(tcp|udp) dport (\d+)(?:-(\d+))?\b.*\baccept\b')
_SS_FLAGS = {'tcp': '-ltnpH', 'udp': '-lunpH'}


def firewall_accepts(name, proto='tcp'):
    """[(low, high, daddr or None)] of the `<proto> dport` accept rules of table inet dgxspark_ds4 on a node."""
    table = d.node(name, 'nft', 'list', 'table', 'inet', 'dgxspark_ds4')
    out = []
    for line in table.splitlines():
        m = _ACCEPT_RE.search(line)
        if m and m.group(2) == proto:
            low = int(m.group(3))
            out.append((low, int(m.group(4) or low), m.group(1)))
    return out


def listeners(name, proto='tcp'):
    """[(address, port, ss line)] of the TCP (ss -ltnpH) or UDP (ss -lunpH) listeners on a node
    (%if and IPv6 brackets removed: 0.0.0.0%eth0 -> 0.0.0.0, [fe80::1]%eth0 -> fe80::1)."""
    out = []
    for line in d.node(name, 'ss', _SS_FLAGS[proto]).splitlines():
        cols = line.split()
        if len(cols) < 4:
            continue
        addr, _sep, port = cols[3].rpartition(':')
        out.append((addr.split('%')[0].strip('[]'), int(port), line))
    return out


def sshd_ports(name):
    return set(int(ln.split()[1]) for ln in d.node(name, 'sshd', '-T').splitlines() if ln.startswith('port '))


def _loopback(addr):
    return addr.startswith('127.') or addr == '::1'


def _strays(listening, accepts, exempt_ports=()):
    """The ss lines of `listening` that neither loopback, exempt_ports nor an accept rule covers."""
    stray = []
    for addr, port, line in listening:
        if _loopback(addr) or port in exempt_ports:
            continue
        # a rule bound to a destination address (the ephemeral range on the fabric address) covers a
        # socket on that address only: a wildcard one is reachable on the node's other addresses too
        if any(low <= port <= high and (daddr is None or addr == daddr) for low, high, daddr in accepts):
            continue
        stray.append(line)
    return stray


def test_nothing_listens_beyond_what_the_firewall_allows():
    for name in ('spark1', 'spark2'):
        accepts = firewall_accepts(name)
        ssh = sshd_ports(name)
        assert accepts and ssh, (name, accepts, ssh)
        stray = _strays(listeners(name), accepts, ssh)
        assert not stray, '%s: TCP listeners the firewall does not allow (accept rules %s, sshd %s):\n%s' % (
            name, accepts, sorted(ssh), '\n'.join(stray))
        udp_accepts = firewall_accepts(name, 'udp')
        stray = _strays(listeners(name, 'udp'), udp_accepts)
        assert not stray, '%s: UDP listeners the firewall does not allow (udp accept rules %s; loopback only otherwise):\n%s' % (
            name, udp_accepts, '\n'.join(stray))
    # Not vacuous: the head's API port is both allowed and listened on (the proxy), vLLM only on loopback.
    head = listeners('spark1')
    assert (8000, 8000, None) in firewall_accepts('spark1')
    assert any(p == 8000 and not _loopback(a) for a, p, _l in head), head
    assert [a for a, p, _l in head if p == 8001] and all(_loopback(a) for a, p, _l in head if p == 8001), head
    # ... and the UDP rule reads the same columns: a wildcard or %if-scoped UDP socket is a stray, a loopback one is not.
    assert _strays([('0.0.0.0', 68, 'a'), ('fe80::1', 546, 'b'), ('127.0.0.11', 53, 'c'), ('::1', 323, 'd')], []) == ['a', 'b']


def test_distribution_nginx_default_site_disabled_with_a_way_back():
    """Ubuntu's nginx package serves its default site on port 80; api_proxy removes only the sites-enabled link."""
    assert d.node('spark1', 'sh', '-c', 'test -L /etc/nginx/sites-enabled/default || test -e /etc/nginx/sites-enabled/default;'
                  ' echo $?') == '1'
    assert d.node('spark1', 'sh', '-c', 'test -f /etc/nginx/sites-available/default; echo $?') == '0'
    assert not [line for _a, port, line in listeners('spark1') if port == 80]


def test_allowed_client_gets_the_api_with_either_key():
    for key in (KEY_A, KEY_B):
        status, body = curl('client', '/v1/models', key)
        assert status == 200, body
        assert json.loads(body)['data'][0]['id'] == 'deepseek-v4-flash'
    status, body = curl('client', '/v1/chat/completions', KEY_B, 'POST', chat_body())
    assert status == 200, body
    assert json.loads(body)['choices'][0]['message']['content'].strip() == 'Four'
    assert curl('client', '/health')[0] == 200


def test_requests_without_a_valid_key_get_401():
    for key in (None, 'wrong-key-0000000000000000', KEY_A.upper(), KEY_A + 'x', UPSTREAM):
        status, body = curl('client', '/v1/models', key)
        assert status == 401, (key, status, body)
        status, _b = curl('client', '/v1/chat/completions', key, 'POST', chat_body())
        assert status == 401, key


def test_unguarded_paths_not_reachable_from_an_allowed_client():
    # vLLM does not guard these with --api-key (vllm-ops 1.5); the proxy must not forward them, key or not.
    for path, method in (('/metrics', 'GET'), ('/tokenize', 'POST'), ('/invocations', 'POST'), ('/pause', 'POST'),
                         ('/version', 'GET'), ('/v1/../metrics', 'GET'), ('/v1/models/../../tokenize', 'POST')):
        status, body = curl('client', path, KEY_A, method, {'prompt': 'hi', 'model': 'deepseek-v4-flash'})
        assert status == 404, (path, status, body)
    # ... and vLLM's own port is not reachable from the network (loopback bind + firewall reject).
    assert tcp('client', HEAD, 8001) == 'refused'
    # The simulator itself does serve /metrics unauthenticated: proof the proxy is what hides it.
    assert 'vllm:' in d.node('spark1', 'curl', '-sS', 'http://127.0.0.1:8001/metrics')


def test_api_refused_from_a_host_not_allowed():
    # spark2 (10.77.0.12) is not in ds4_api_allowed_networks: the firewall rejects it.
    assert tcp('spark2', HEAD, 8000) == 'refused'
    assert tcp('client', HEAD, 8000) == 'open'


def test_master_port_only_between_the_fabric_addresses():
    assert tcp('spark2', HEAD, 29501) == 'open'      # the TCPStore of the running pair
    assert tcp('client', HEAD, 29501) == 'refused'


def test_ephemeral_inter_node_ports_only_between_the_fabric_addresses():
    # A listener on the head's fabric address in the ephemeral range, as vLLM's ZMQ MessageQueue has.
    subprocess.run(['docker', 'exec', '-d', d.node_container('spark1'), 'python3', '-c',
                    'import socket, time\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n'
                    's.bind(("%s", 45123))\ns.listen(8)\ntime.sleep(120)\n' % HEAD], check=True)
    d.wait_until('test listener on %s:45123' % HEAD, lambda: '%s:45123 ' % HEAD in d.node('spark1', 'ss', '-Hltn'), 20)
    assert tcp('spark2', HEAD, 45123) == 'open'
    assert tcp('client', HEAD, 45123) == 'refused'
    # A port outside the guarded range and address stays the host's business (policy accept).
    assert tcp('client', HEAD, 22) == 'open'


def test_firewall_table_file_unit_and_user_table_kept():
    for name in ('spark1', 'spark2'):
        tables = d.node(name, 'nft', 'list', 'tables')
        assert 'table inet dgxspark_ds4' in tables and 'table inet ds4_user_table' in tables, tables
        user = d.node(name, 'nft', 'list', 'table', 'inet', 'ds4_user_table')
        assert 'tcp dport 4444' in user and 'user rule: keep me' in user
        assert d.node(name, 'stat', '-c', '%a %U', '/etc/dgxspark-ds4/nftables.conf') == '644 root'
        assert d.node(name, 'systemctl', 'is-enabled', 'dgxspark-ds4-firewall.service') == 'enabled'
    own = d.node('spark1', 'nft', 'list', 'table', 'inet', 'dgxspark_ds4')
    assert d.ip(20) in own and d.ip(1) in own and 'dgxspark.ds4 sha256:' in own


def test_boot_unit_reloads_the_same_table():
    # What a reboot does: the unit loads the file; the digest in the live table stays the one the role wrote.
    before = d.node('spark1', 'nft', 'list', 'table', 'inet', 'dgxspark_ds4')
    d.node('spark1', 'nft', 'delete', 'table', 'inet', 'dgxspark_ds4')
    d.node('spark1', 'systemctl', 'restart', 'dgxspark-ds4-firewall.service')
    after = d.node('spark1', 'nft', 'list', 'table', 'inet', 'dgxspark_ds4')
    digest = re.compile(r'sha256:[0-9a-f]{64}')
    assert digest.search(before).group(0) == digest.search(after).group(0)
    assert tcp('spark2', HEAD, 8000) == 'refused'
    assert 'table inet ds4_user_table' in d.node('spark1', 'nft', 'list', 'tables')


NFT_TABLE = ('nft', 'list', 'table', 'inet', 'dgxspark_ds4')
# What the converge record keeps of `nft list table` (plugins/module_utils/_converge/converge_state.py observe), computed on the node.
NFT_OBSERVED = ('import hashlib, subprocess\n'
                'p = subprocess.run(["/usr/sbin/nft", "list", "table", "inet", "dgxspark_ds4"], stdout=subprocess.PIPE,'
                ' stderr=subprocess.PIPE, universal_newlines=True)\n'
                'print("rc=%d:%s" % (p.returncode, hashlib.sha1((p.stdout + "\\0" + p.stderr).encode()).hexdigest()))\n')
DROPIN = '/etc/systemd/system/dgxspark-ds4-head.service.d/override.conf'


# ---------------------------------------------------------------------------------------------
# Monitoring reachable only by whom it should (issue 27 item 2): Prometheus on the head is open to the client only
# (monitoring_allowed_networks <net>.20/32; the controller is an API client but not a monitoring one), behind TLS
# (a self-signed certificate made on the head) and basic auth (a generated password, kept 0600).
PROM_DIR = '/etc/prometheus/dgxspark-ds4-web'
PROM_URL = 'https://%s:9090' % HEAD
PROM_CLIENT_CA = '/tmp/ds4-prometheus-ca.crt'  # not CLIENT_CA: that name is the fronts' CA (above)


def prom_password():
    return d.node('spark1', 'cat', PROM_DIR + '/password')


def prom_curl(frm, url, user=None, cacert=PROM_CLIENT_CA):
    """(curl exit code, HTTP status) of one GET from a container."""
    argv = ['curl', '-sS', '-o', '/dev/null', '-w', '%{http_code}', '--max-time', '10']
    argv += ['--cacert', cacert] if cacert else []
    argv += ['-u', user] if user else []
    proc = subprocess.run(['docker', 'exec', d.node_container(frm)] + argv + [url], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    m = re.search(r'(\d{3})$', proc.stdout.strip())
    return proc.returncode, int(m.group(1)) if m else 0


def test_prometheus_only_to_the_monitoring_network_with_tls_and_basic_auth():
    listening = d.node('spark1', 'ss', '-Hltn')
    assert re.search(r'(0\.0\.0\.0|\*):9090\s', listening), listening   # every address (Go prints a dual-stack one as *)
    assert '--web.config.file=%s/web.yml' % PROM_DIR in d.node(
        'spark1', 'cat', '/etc/systemd/system/prometheus.service.d/dgxspark-ds4.conf')
    password = prom_password()
    assert re.match(r'^[A-Za-z0-9]{32}$', password), 'generated password of unexpected form'
    assert d.node('spark1', 'stat', '-c', '%a %U', PROM_DIR + '/password') == '600 prometheus'
    assert d.node('spark1', 'stat', '-c', '%a %U', PROM_DIR + '/tls.key') == '600 prometheus'
    web = d.node('spark1', 'cat', PROM_DIR + '/web.yml')
    assert 'ds4: "$2b$' in web and password not in web, 'web.yml carries the bcrypt hash only'
    cert = d.node('spark1', 'cat', PROM_DIR + '/tls.crt')
    d.node('client', 'sh', '-c', 'printf "%s\\n" "$1" > ' + PROM_CLIENT_CA, 'sh', cert)
    # from the client (allowed): no credentials -> 401, a wrong password -> 401, the right ones -> 200
    assert prom_curl('client', PROM_URL + '/api/v1/status/buildinfo') == (0, 401)
    assert prom_curl('client', PROM_URL + '/api/v1/status/buildinfo', 'ds4:not-the-password') == (0, 401)
    assert prom_curl('client', PROM_URL + '/api/v1/status/buildinfo', 'ds4:' + password) == (0, 200)
    # TLS only: plain HTTP gets no answer from Prometheus; a client that does not know the CA refuses the certificate
    assert prom_curl('client', 'http://%s:9090/api/v1/status/buildinfo' % HEAD, 'ds4:' + password)[1] != 200
    assert prom_curl('client', PROM_URL + '/api/v1/status/buildinfo', 'ds4:' + password, cacert=None)[0] == 60
    # not the API's client networks: the controller (an API client) and spark2 are refused at the firewall
    assert tcp('spark2', HEAD, 9090) == 'refused'
    probe = subprocess.run([sys.executable, '-c', PROBE, HEAD, '9090'], stdout=subprocess.PIPE, universal_newlines=True,
                           check=False)
    assert probe.stdout.strip() == 'refused', probe.stdout

    # Prometheus still scrapes vLLM's owned loopback port (as its own user) and itself (through its TLS and auth)
    def targets_up():
        out = d.node('client', 'curl', '-sS', '--max-time', '10', '--cacert', PROM_CLIENT_CA, '-u', 'ds4:' + password,
                     PROM_URL + '/api/v1/targets')
        active = json.loads(out)['data']['activeTargets']
        health = dict((t['labels']['job'], t['health']) for t in active)
        return health if health.get('vllm') == 'up' and health.get('prometheus') == 'up' else None
    health = d.wait_until('Prometheus scrapes vLLM and itself', targets_up, 90, interval=2.0)
    assert health.get('node') == 'up', health


def test_grafana_port_rejected_beyond_loopback():
    # Grafana is not installed here: a stand-in listens on 0.0.0.0:3000 (where an unconfigured Grafana would)
    assert 'tcp dport 3000 reject with tcp reset' in d.node('spark1', *NFT_TABLE)
    pid = d.node('spark1', 'sh', '-c', 'cd /tmp && nohup python3 -m http.server 3000 >/dev/null 2>&1 & echo $!')
    try:
        d.wait_until('stand-in on :3000', lambda: re.search(r'0\.0\.0\.0:3000\s', d.node('spark1', 'ss', '-Hltn')), 20)
        assert tcp('client', HEAD, 3000) == 'refused'
        assert d.node('spark1', 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}', 'http://127.0.0.1:3000/') == '200'
    finally:
        d.node('spark1', 'kill', pid, check=False)


# Loopback ports owned (issue 27 item 3): vLLM's port behind the proxy (127.0.0.1:8001; the container runs with
# --network host, so its socket is in the node's own namespace) answers root, the proxy's user (www-data) and
# Prometheus' user only; any other local account is reset by the table's output rule (meta skuid).
VLLM_LOCAL = 'http://127.0.0.1:8001/health'


def local_get(user, url, *extra):
    """(curl exit code, HTTP status) of a GET on the head as a local user (runuser)."""
    proc = subprocess.run(['docker', 'exec', d.node_container('spark1'), 'runuser', '-u', user, '--', 'curl', '-sS',
                           '-o', '/dev/null', '-w', '%{http_code}', '--max-time', '5'] + list(extra) + [url],
                          stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    m = re.search(r'(\d{3})$', proc.stdout.strip())
    return proc.returncode, int(m.group(1)) if m else 0


def test_vllm_loopback_port_owned_by_root_the_proxy_and_prometheus():
    # the simulator's container shares the node's network namespace (as vLLM's does: docker run --network host)
    assert d.node('spark1', 'docker', 'inspect', '-f', '{{.HostConfig.NetworkMode}}', 'dgxspark-ds4-head') == 'host'
    uids = '0, 33, %s' % d.node('spark1', 'id', '-u', 'prometheus')
    assert 'oif "lo" tcp dport 8001 meta skuid != { %s } reject with tcp reset' % uids in d.node('spark1', *NFT_TABLE)
    assert local_get('nobody', VLLM_LOCAL) == (7, 0)          # refused (reset)
    assert local_get('nobody', 'http://127.0.0.1:8001/metrics') == (7, 0)
    assert local_get('root', VLLM_LOCAL) == (0, 200)
    assert local_get('www-data', VLLM_LOCAL) == (0, 200)
    assert local_get('prometheus', VLLM_LOCAL) == (0, 200)
    # only the owned ports: the same account reaches the proxy's public port (which checks keys itself; TLS here,
    # ds4_tls: reachability is the point, the certificate is checked by the client tests, so -k)
    assert local_get('nobody', 'https://127.0.0.1:8000/health', '-k') == (0, 200)
    # and the proxy still serves the client
    assert curl('client', '/v1/models', KEY_A)[0] == 200


# A local user's listener on vLLM's loopback port: it records every connection and what arrived on it.
SQUATTER = ('import socket, sys\n'
            'log = sys.argv[2]\n'
            's = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n'
            's.bind(("127.0.0.1", int(sys.argv[1])))\ns.listen(16)\n'
            'open(log, "w").write("listening\\n")\n'
            's.settimeout(90)\n'
            'while True:\n'
            '    try:\n        c, a = s.accept()\n    except OSError:\n        break\n'
            '    c.settimeout(5)\n'
            '    try:\n        data = c.recv(65536)\n    except OSError:\n        data = b""\n'
            '    open(log, "a").write("accepted %r %r\\n" % (a, data))\n')


def test_a_local_user_listening_on_vllms_port_while_vllm_is_down_receives_nothing():
    """Issue 46: with vLLM stopped (a restart, a crash), another local user can listen on its loopback port; nginx
    would then hand that user the clients' requests with vLLM's own `Authorization: Bearer` key. The firewall lets
    only the services' sockets answer on the ports they serve (a SYN-ACK from anyone else is dropped): the squatter,
    nobody here, completes no handshake and records nothing, while a client's request through the front, root's and
    Prometheus' own requests on the head go unanswered. Started again, vLLM holds the port and nobody cannot bind it."""
    head = d.unit('head')
    port = 8001
    assert 'tcp sport { 8000, 8001, 9090, 9100, 29501 } tcp flags syn drop' in d.node('spark1', *NFT_TABLE)
    log = '/tmp/ds4-squat-%d.log' % port
    d.node('spark1', 'systemctl', 'stop', head)
    try:
        d.wait_until('vLLM\'s port free', lambda: local_get('root', VLLM_LOCAL)[0] == 7, 30, interval=0.5)
        d.node('spark1', 'systemd-run', '--unit', 'ds4-test-squat-%d' % port, '--uid', 'nobody', '--property',
               'Type=simple', '/usr/bin/python3', '-c', SQUATTER, str(port), log)
        d.wait_until('nobody listens on %d' % port, lambda: 'listening' in d.node('spark1', 'cat', log, check=False), 20,
                     interval=0.3)
        status, body = curl('client', '/v1/chat/completions', KEY_A, 'POST', chat_body())
        assert status == 0 and 'timed out' in body, (status, body)    # nginx's connect to vLLM's port never completes
        assert local_get('root', VLLM_LOCAL, '-H', 'Authorization: Bearer ' + UPSTREAM) == (28, 0)
        assert local_get('prometheus', 'http://127.0.0.1:%d/metrics' % port) == (28, 0)
        seen = d.node('spark1', 'cat', log)
        assert seen.strip() == 'listening', seen
        for secret in SECRETS:
            assert secret not in seen
    finally:
        d.node('spark1', 'systemctl', 'stop', 'ds4-test-squat-%d' % port, check=False)
        d.node('spark1', 'systemctl', 'reset-failed', head, check=False)
        d.node('spark1', 'systemctl', 'start', head)
        d.wait_until('the pair serves through the front again',
                     lambda: curl('client', '/v1/chat/completions', KEY_A, 'POST', chat_body())[0] == 200, 180,
                     interval=2.0)
    bind = ('import socket, sys\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n'
            'try:\n    s.bind(("127.0.0.1", int(sys.argv[1])))\n    s.listen(1)\n    print("bound")\n'
            'except OSError as e:\n    print("refused %s" % e.errno)\n')
    assert d.node('spark1', 'runuser', '-u', 'nobody', '--', 'python3', '-c', bind, str(port)) == 'refused 98'


def _rules(listing):
    """The table's lines, indentation dropped and set elements sorted (nft may print a hash set in any order)."""
    out = []
    for line in listing.splitlines():
        line = ' '.join(line.split())
        if line.startswith('elements = {'):
            line = 'elements = { %s }' % ', '.join(sorted(e.strip() for e in line[12:].rstrip('}').split(',')))
        if line:
            out.append(line)
    return sorted(out)


def _firewall_record(name):
    record = json.loads(d.node(name, 'cat', '/var/lib/dgxspark-ds4/converge/firewall.json'))
    return record['state']['commands']['/usr/sbin/nft list table inet dgxspark_ds4']


def test_drift_repaired_never_recorded_and_a_foreign_dropin_named_before_any_restart():
    """One site.yml run: `nft flush chain` on spark1 and one rule deleted on spark2 keep the table's digest comment;
    the run reloads both tables and records the repaired state, not the drift. A drop-in the collection did not write
    under dgxspark-ds4-head.service.d/ stops the run in vllm_service's preflight, named, before any restart."""
    before = dict((name, d.node(name, *NFT_TABLE)) for name in ('spark1', 'spark2'))
    started = d.both_started()
    d.node('spark1', 'nft', 'flush', 'chain', 'inet', 'dgxspark_ds4', 'input')
    d.node('spark1', 'nft', 'flush', 'chain', 'inet', 'dgxspark_ds4', 'output')
    handle = re.search(r'tcp dport 29501 reject with tcp reset # handle (\d+)',
                       d.node('spark2', 'nft', '-a', 'list', 'chain', 'inet', 'dgxspark_ds4', 'input')).group(1)
    d.node('spark2', 'nft', 'delete', 'rule', 'inet', 'dgxspark_ds4', 'input', 'handle', handle)
    drifted = dict((name, d.node(name, 'python3', '-c', NFT_OBSERVED)) for name in ('spark1', 'spark2'))
    assert 'tcp dport' not in d.node('spark1', *NFT_TABLE) and 'sha256:' in d.node('spark1', *NFT_TABLE)
    assert tcp('client', HEAD, 29501) == 'open'  # the flushed chain lets the TCPStore through
    assert local_get('nobody', VLLM_LOCAL) == (0, 200)  # the flushed output chain lets any local user to vLLM
    d.node('spark1', 'mkdir', '-p', os.path.dirname(DROPIN))
    d.node('spark1', 'sh', '-c', 'printf "[Service]\\nExecStart=\\nExecStart=/bin/true\\n" > %s' % DROPIN)
    try:
        rc, out = d.run_playbook('site.yml')
    finally:
        d.node('spark1', 'rm', '-rf', os.path.dirname(DROPIN))
    flat = ' '.join(out.split())
    assert rc != 0, out[-3000:]
    # the firewall's line names the live table among its reasons (inputs or files may be named before it)
    assert re.search(r'firewall: runs \((?:(?!TASK \[).)*?command /usr/sbin/nft list table inet dgxspark_ds4: recorded '
                     r'rc=0:', flat), [flat[m.start():m.start() + 600] for m in re.finditer('firewall: runs', flat)]
    # the rules are back, and what is recorded is the repaired table, not the drift
    for name in ('spark1', 'spark2'):
        now = d.node(name, *NFT_TABLE)
        assert _rules(now) == _rules(before[name]), (name, now)
        recorded = _firewall_record(name)
        assert recorded == d.node(name, 'python3', '-c', NFT_OBSERVED) and recorded != drifted[name], name
    assert tcp('client', HEAD, 29501) == 'refused'
    assert local_get('nobody', VLLM_LOCAL) == (7, 0)
    # the drop-in, named with the fix, before any restart of the pair
    assert 'drop-in %s was not written by dgxspark.ds4' % DROPIN in flat, out[-3000:]
    assert 'vllm_service_allowed_dropins: [%s]' % DROPIN in flat and 'Nothing was written or restarted' in flat
    assert d.both_started() == started


def test_secrets_only_in_0600_root_files():
    # pairguard.json: the quality canary's client key (it asks the head's proxy as clients do)
    allowed = {'spark1': {'/etc/dgxspark-ds4/secrets-head.env', '/etc/dgxspark-ds4/proxy/keys.conf',
                          '/etc/dgxspark-ds4/pairguard.json'},
               'spark2': {'/etc/dgxspark-ds4/secrets-worker.env'}}
    for name in ('spark1', 'spark2'):
        for secret in SECRETS:
            hits = d.node(name, 'grep', '-rlF', secret, '/etc', '/var/lib/dgxspark-ds4', '/usr/local/libexec',
                          '/var/tmp', '/root', check=False)
            files = set(h for h in hits.splitlines() if h.startswith('/') and not h.startswith('/etc/ds4-test'))
            assert files <= allowed[name], (name, secret[:6], files)
            for f in files:
                assert d.node(name, 'stat', '-c', '%a %U %G', f) == '600 root root', f
    assert KEY_A in d.node('spark1', 'cat', '/etc/dgxspark-ds4/proxy/keys.conf')  # the check above is not vacuous


def test_no_secret_in_argv_or_logs():
    for name in ('spark1', 'spark2'):
        cmdlines = d.node(name, 'sh', '-c', 'cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" " "')
        journal = d.node(name, 'journalctl', '--no-pager', '-o', 'cat')
        role = 'head' if name == 'spark1' else 'worker'
        inspect_args = d.node(name, 'docker', 'inspect', '-f', '{{json .Args}} {{json .Config.Cmd}}',
                              'dgxspark-ds4-%s' % role)
        for secret in SECRETS + (prom_password(),):
            assert secret not in cmdlines, (name, 'argv')
            assert secret not in journal, (name, 'journal')
            assert secret not in inspect_args, (name, 'docker inspect args')
        # the unit's journal is the one copy of the container's log (--log-driver none): the check above is not vacuous
        assert 'Application startup complete' in journal or role == 'worker'
        # the HF token goes to the download task only, never into the serving container (it runs offline)
        container_env = d.node(name, 'docker', 'inspect', '-f', '{{json .Config.Env}}', 'dgxspark-ds4-%s' % role)
        assert HF not in container_env and 'HF_TOKEN=' not in container_env, (name, 'HF_TOKEN in the container env')


def test_containers_not_privileged():
    for name, role in (('spark1', 'head'), ('spark2', 'worker')):
        hc = json.loads(d.node(name, 'docker', 'inspect', '-f', '{{json .HostConfig}}', 'dgxspark-ds4-%s' % role))
        assert hc['Privileged'] is False
        assert {u['Name'] for u in hc['Ulimits'] or []} >= {'memlock', 'stack'}
        unit = d.node(name, 'cat', '/etc/systemd/system/dgxspark-ds4-%s.service' % role)
        assert '--privileged' not in unit


def test_verbose_run_leaks_no_secret_and_changes_nothing():
    rc, out = _run_v('site.yml')
    assert rc == 0, out[-3000:]
    for secret in SECRETS + (prom_password(),):
        assert secret not in out, 'a test secret (%s...) appears in the -v output' % secret[:6]
    assert re.search(r'spark1\s*:\s*ok=\d+\s+changed=0 ', out) and re.search(r'spark2\s*:\s*ok=\d+\s+changed=0 ', out), \
        out[-2500:]
    # not vacuous: the run went through the deploy's converge plans (which template every planned role's inputs, the
    # secret ones included, and show their result at -v): the roles in front, then the API proxy (its keys)
    flat = ' '.join(out.split())
    assert 'converge plan: as recorded on this node: host_hardening, firewall,' in flat, out[-3000:]
    assert flat.count('converge plan: as recorded on this node: api_proxy') == 2, out[-3000:]


def _run_v(name):
    cmd = ['ansible-playbook', '-v', '-i', os.path.dirname(d.INVENTORY), os.path.join(d.PROJECT, 'playbooks', name)]
    env = dict(os.environ)
    env.setdefault('ANSIBLE_COLLECTIONS_PATH', os.path.join(d.PROJECT, '.collections'))
    env['ANSIBLE_NOCOLOR'] = '1'
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          env=env, cwd=d.PROJECT, timeout=900, check=False)
    return proc.returncode, proc.stdout


def test_doctor_bundle_is_redacted():
    home = tempfile.mkdtemp(prefix='ds4-doctor-')
    cmd = ['ansible-playbook', '-i', os.path.dirname(d.INVENTORY), os.path.join(d.PROJECT, 'playbooks', 'doctor.yml')]
    env = dict(os.environ, HOME=home, ANSIBLE_NOCOLOR='1')
    env.setdefault('ANSIBLE_COLLECTIONS_PATH', os.path.join(d.PROJECT, '.collections'))
    env.setdefault('ANSIBLE_LOCAL_TEMP', os.path.join(home, '.ansible-tmp'))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env,
                          cwd=d.PROJECT, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    for secret in SECRETS + (prom_password(),):
        assert secret not in proc.stdout
    bundles = [os.path.join(dp, fn) for dp, _dn, fns in os.walk(home) for fn in fns if fn.endswith('.tar.gz')]
    assert len(bundles) == 1, bundles
    texts = []
    with tarfile.open(bundles[0]) as tar:
        for member in tar.getmembers():
            if member.isfile():
                texts.append((member.name, tar.extractfile(member).read().decode('utf-8', 'replace')))
    joined = '\n'.join(t for _n, t in texts)
    for secret in SECRETS + (prom_password(),):
        assert secret not in joined, 'secret %s... in the doctor bundle' % secret[:6]
    # not vacuous: the secrets env file was collected, with its values redacted
    assert re.search(r'VLLM_API_KEY=\S', joined), [n for n, _t in texts]


def test_zz_switch_to_loopback_only_and_back():
    """Networks -> loopback: the proxy gives port 8000 back, vLLM takes it on 127.0.0.1, the client is
    refused; then back to the scenario's configuration."""
    rc, out = d.run_playbook('site.yml', {'ds4_api_allowed_networks': []})
    assert rc == 0, out[-3000:]
    listening = d.node('spark1', 'ss', '-Hltn')
    assert re.search(r'127\.0\.0\.1:8000\s', listening) and not re.search(r'0\.0\.0\.0:8000\s', listening), listening
    assert not d.node('spark1', 'ls', '/etc/dgxspark-ds4/proxy', check=False).strip() or \
        'keys.conf' not in d.node('spark1', 'ls', '/etc/dgxspark-ds4/proxy', check=False)
    assert tcp('client', HEAD, 8000) == 'refused'
    assert d.node('spark1', 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}', 'http://127.0.0.1:8000/health') == '200'
    rc, out = d.run_playbook('site.yml')
    assert rc == 0, out[-3000:]
    d.wait_until('client served again', lambda: curl('client', '/v1/models', KEY_A)[0] == 200, 120, interval=2.0)
