# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TLS through the clients' one address, and the router host's loopback ports owned (scenario `replicas`, ds4_tls on
in vars/replicas.yml: the fleet as it runs by default). Seen from the controller, trusting the CA the collection made
(ds4_tls_ca_dir, the scenario's ephemeral directory): the OpenAI Python SDK streams a chat through the VIP's front and
curl --cacert gets the model list; plain HTTP on the front's port and a client trusting only the system's CAs are
refused; both routers reach the heads over https (their pool keepers added https URLs, so each one verified the head's
certificate). On spark1 (a router host and pair 1's head), an unprivileged local user is refused by vllm-router's admin
and metrics ports and by vLLM's loopback port; root and the proxy's user reach them. Runs before test_zz_vip.py."""


import os
import re
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position
import ds4_load as load  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

VIP = d.ip(100)
VIP_FRONT = 'https://%s:8080' % VIP
MESSAGES = [{'role': 'user', 'content': 'What is 2+2? Answer with one word.'}]


def test_the_scenario_runs_tls():
    assert d.TLS and os.path.isfile(d.TLS_CA_FILE), (d.TLS, d.TLS_CA_FILE)


def _sdk(cafile):
    import openai  # pylint: disable=import-outside-toplevel
    return openai.OpenAI(base_url=VIP_FRONT + '/v1', api_key=load.API_KEY, max_retries=0, timeout=60,
                         http_client=openai.DefaultHttpx2Client(verify=ssl.create_default_context(cafile=cafile)))


def test_the_openai_sdk_streams_a_chat_through_the_one_address_verifying_the_certificate():
    stream = _sdk(d.TLS_CA_FILE).chat.completions.create(model='deepseek-v4-flash', messages=MESSAGES, max_tokens=16,
                                                         temperature=0, stream=True)
    chunks = [c.choices[0].delta.content or '' for c in stream if c.choices]
    assert ''.join(chunks).strip() == 'Four' and len(chunks) >= 2, chunks


def test_curl_with_the_ca_gets_the_models_through_the_one_address():
    proc = subprocess.run(['curl', '-sS', '--max-time', '10', '--cacert', d.TLS_CA_FILE, '-H',
                           'Authorization: Bearer ' + load.API_KEY, VIP_FRONT + '/v1/models'],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert proc.returncode == 0 and '"deepseek-v4-flash"' in proc.stdout, proc.stdout


def test_plain_http_and_an_unknown_ca_are_refused_at_the_one_address():
    import openai  # pylint: disable=import-outside-toplevel
    with pytest.raises(urllib.error.HTTPError) as plain:
        urllib.request.urlopen(urllib.request.Request(
            'http://%s:8080/v1/models' % VIP, headers={'Authorization': 'Bearer ' + load.API_KEY}), timeout=10)
    body = plain.value.read().decode(errors='replace')
    assert plain.value.code == 400 and 'The plain HTTP request was sent to HTTPS port' in body, body
    with pytest.raises(openai.APIConnectionError) as refused:
        _sdk(None).chat.completions.create(model='deepseek-v4-flash', messages=MESSAGES, max_tokens=16, stream=True)
    assert 'CERTIFICATE_VERIFY_FAILED' in repr(refused.value.__cause__) + repr(refused.value.__context__), (
        refused.value, refused.value.__cause__)


def test_both_routers_reach_the_heads_over_verified_tls():
    for host in ('spark1', 'spark3'):
        workers = load.router_workers(host)
        assert workers == sorted([load.worker_url('spark_pair1'), load.worker_url('spark_pair2')]), (host, workers)
        assert all(u.startswith('https://') for u in workers), (host, workers)
        assert all(load.router_health(host).values()), (host, load.router_health(host))


def local_get(node, user, url, *extra):
    """(curl exit code, HTTP status) of a GET on `node` as a local user (runuser)."""
    proc = subprocess.run(['docker', 'exec', d.node_container(node), 'runuser', '-u', user, '--', 'curl', '-sS', '-o',
                           '/dev/null', '-w', '%{http_code}', '--max-time', '5'] + list(extra) + [url],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    m = re.search(r'(\d{3})$', proc.stdout.strip())
    return proc.returncode, int(m.group(1)) if m else 0


def test_router_admin_metrics_and_vllm_loopback_refused_to_an_unprivileged_user_on_a_router_host():
    admin, metrics, vllm = (load.ROUTER_ADMIN + '/list_workers', 'http://127.0.0.1:29000/metrics',
                            load.VLLM_UPSTREAM + '/health')
    for url in (admin, metrics, vllm):
        assert local_get('spark1', 'nobody', url) == (7, 0), url     # reset by the firewall's output rule
        assert local_get('spark1', 'root', url) == (0, 200), url
    # the proxy's user: the router front (nginx) reaches the admin port, the head proxy vLLM's
    for url in (admin, vllm):
        assert local_get('spark1', 'www-data', url) == (0, 200), url
    # only the owned ports: the same account reaches the head proxy's public port (TLS; it checks keys itself;
    # reachability is the point here, the certificate is checked by the client tests above, so -k)
    assert local_get('spark1', 'nobody', 'https://127.0.0.1:8000/health', '-k') == (0, 200)
