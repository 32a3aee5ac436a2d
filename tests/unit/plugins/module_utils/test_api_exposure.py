# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""API exposure plan, key checks and the proxy's nginx configuration."""

import os
import re
import shutil
import subprocess

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._security import api_exposure as x

KEY_A = 'k3y-A.value_with~all+chars/=0123'
KEY_B = 'second-client-key-000000000000'


def spec(**kw):
    s = dict(listen=['0.0.0.0'], public_port=8000, upstream_host='127.0.0.1', upstream_port=8001,
             endpoints=[dict(e) for e in x.DEFAULT_ENDPOINTS], keys_path='/etc/dgxspark-ds4/proxy/keys.conf')
    s.update(kw)
    return s


def test_plan_loopback_by_default():
    plan, errors, warnings = x.plan_exposure({'host': '127.0.0.1', 'port': 8000}, None, None, 29501)
    assert errors == [] and warnings == []
    assert plan == {'host': '127.0.0.1', 'port': 8000, 'public_port': 8000, 'exposure': 'loopback',
                    'allowed_networks': [], 'proxied': False, 'engine_url': 'http://127.0.0.1:8000'}


def test_plan_networks_normalized_and_upstream_port():
    plan, errors, _w = x.plan_exposure({'host': '127.0.0.1', 'port': 8000}, ['10.1.2.3/16', '10.1.0.0/16', '2001:db8::1/64'],
                                       None, 29501)
    assert errors == []
    assert plan['allowed_networks'] == ['10.1.0.0/16', '2001:db8::/64']
    assert plan['port'] == 8001 and plan['public_port'] == 8000 and plan['proxied']
    # vLLM itself, behind the proxy: its own (upstream) port, made once here
    assert plan['engine_url'] == 'http://127.0.0.1:8001'


@pytest.mark.parametrize('host', ['0.0.0.0', '192.168.1.10', '::'])
def test_plan_refuses_non_loopback_bind(host):
    _p, errors, _w = x.plan_exposure({'host': host, 'port': 8000}, [], None, 29501)
    assert len(errors) == 1 and 'ds4_api_allowed_networks' in errors[0] and '/invocations' in errors[0]


def test_plan_refusals():
    api = {'host': '127.0.0.1', 'port': 8000}
    assert 'not an IPv4/IPv6 network' in x.plan_exposure(api, ['lan'], None, 29501)[1][0]
    assert 'loopback network' in x.plan_exposure(api, ['127.0.0.0/8'], None, 29501)[1][0]
    assert 'must be a list' in x.plan_exposure(api, '10.0.0.0/8', None, 29501)[1][0]
    assert 'equals master_port' in x.plan_exposure(api, ['10.0.0.0/8'], 29501, 29501)[1][0]
    assert 'equals api.port' in x.plan_exposure(api, ['10.0.0.0/8'], 8000, 29501)[1][0]
    assert x.plan_exposure(api, ['0.0.0.0/0'], None, 29501)[2], 'a world-open proxy warns'


def test_key_checks_never_quote_a_key():
    bad = 'short'
    errors = x.check_api_keys([KEY_A, bad, KEY_A, 'has space in it 0123456'])
    assert len(errors) == 3
    text = '\n'.join(errors)
    assert KEY_A not in text and bad not in text and 'has space' not in text
    assert 'ds4_api_keys[1] (length 5)' in text and 'repeats' in text
    assert x.check_api_keys([]) and x.check_api_keys(None) and x.check_api_keys(KEY_A)
    assert x.check_api_keys([KEY_A, KEY_B]) == []


def test_endpoint_allowlist_rules():
    assert x.check_endpoints([dict(e) for e in x.DEFAULT_ENDPOINTS]) == []
    assert 'unguarded' in x.check_endpoints([{'path': '/invocations', 'auth': True}])[0]
    assert 'unguarded' in x.check_endpoints([{'path': '/metrics', 'auth': True}])[0]
    assert 'without auth' in x.check_endpoints([{'path': '/v1/completions', 'auth': False}])[0]
    assert 'absolute URL path' in x.check_endpoints([{'path': 'v1/models'}])[0]
    assert 'absolute URL path' in x.check_endpoints([{'path': '/v1/models;evil'}])[0]
    assert 'listed twice' in x.check_endpoints([{'path': '/health', 'auth': False}, {'path': '/health', 'auth': False}])[0]
    assert 'methods' in x.check_endpoints([{'path': '/health', 'auth': False, 'methods': ['DELETE']}])[0]


def test_proxy_conf_allowlists_and_guards():
    conf = x.render_proxy_conf(spec())
    locations = re.findall(r'location (= )?(\S+) \{', conf)
    assert [p for _eq, p in locations] == ['/v1/models', '/v1/chat/completions', '/v1/completions', '/health', '/']
    # exact matches only; the catch-all answers 404
    assert 'location = /v1/models {' in conf and "return 404" in conf.split('location / {')[1]
    # guarded paths check the key; /health does not
    blocks = dict((m.group(1), m.group(2)) for m in re.finditer(r'location = (\S+) \{(.*?)\n        \}', conf, re.S))
    assert '$ds4_key_ok = 0' in blocks['/v1/chat/completions'] and 'return 401' in blocks['/v1/chat/completions']
    assert '$ds4_key_ok' not in blocks['/health']
    assert 'listen 0.0.0.0:8000;' in conf and 'server 127.0.0.1:8001;' in conf
    assert 'include /etc/dgxspark-ds4/proxy/keys.conf;' in conf
    assert 'proxy_set_header Authorization $ds4_upstream_authorization;' in conf
    for path in ('/invocations', '/tokenize', '/metrics', '/pause'):
        assert 'location = %s ' % path not in conf


def test_proxy_conf_ipv6_listen_and_refusals():
    conf = x.render_proxy_conf(spec(listen=['0.0.0.0', '[::]', '::1']))
    assert 'listen [::]:8000;' in conf and 'listen [::1]:8000;' in conf
    with pytest.raises(x.ExposureError) as exc:
        x.render_proxy_conf(spec(upstream_host='10.0.0.1', endpoints=[{'path': '/tokenize', 'auth': True}]))
    assert len(exc.value.errors) == 2
    with pytest.raises(x.ExposureError):
        x.render_proxy_conf(spec(listen=['eth0']))


def test_proxy_keys_map_exact_and_upstream_key():
    text = x.render_proxy_keys([KEY_A, KEY_B], 'upstream-key-0123456789')
    assert '"~^Bearer k3y-A\\.value_with~all\\+chars/=0123$" 1;' in text
    assert '"~^Bearer %s$" 1;' % KEY_B in text
    assert 'default 0;' in text
    assert 'default "Bearer upstream-key-0123456789";' in text
    assert 'default "";' in x.render_proxy_keys([KEY_A])
    with pytest.raises(x.ExposureError) as exc:
        x.render_proxy_keys([KEY_A, 'x"; evil'])
    assert 'evil' not in str(exc.value)


def test_key_regex_matches_only_the_exact_header():
    """The map line's regex (as nginx's PCRE sees it) matches the exact header and nothing near it."""
    text = x.render_proxy_keys([KEY_A])
    rx = re.search(r'"~(.*)" 1;', text).group(1)
    assert re.match(rx, 'Bearer ' + KEY_A)
    for other in ('Bearer ' + KEY_A + 'x', 'Bearer x' + KEY_A, 'bearer ' + KEY_A, 'Bearer ' + KEY_A.upper(),
                  'Bearer ' + KEY_A.replace('.', 'X'), 'Basic ' + KEY_A):
        assert not re.match(rx, other), other


@pytest.mark.skipif(not shutil.which('nginx') and not shutil.which('/usr/sbin/nginx') and not os.environ.get('CI'),
                    reason='nginx not installed here (tests/harness/bootstrap.sh installs it; CI=true makes this a failure)')
def test_nginx_accepts_the_rendered_files(tmp_path):
    keys = tmp_path / 'keys.conf'
    keys.write_text(x.render_proxy_keys([KEY_A, KEY_B], 'upstream-key-0123456789'))
    conf = tmp_path / 'nginx.conf'
    conf.write_text(x.render_proxy_conf(spec(keys_path=str(keys), pid_path=str(tmp_path / 'pid'), user='root',
                                             health_gate='/run/dgxspark-ds4-head.unhealthy')))
    front = tmp_path / 'front.conf'
    front.write_text(x.render_proxy_conf(spec(keys_path=str(keys), pid_path=str(tmp_path / 'front.pid'), user='root',
                                              public_port=8080, upstream_port=30000, pass_client_key=True)))
    nginx = shutil.which('nginx') or '/usr/sbin/nginx'
    for path in (conf, front):
        proc = subprocess.run([nginx, '-t', '-c', str(path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, check=False)
        assert proc.returncode == 0, proc.stdout


def test_proxy_conf_health_gate_and_router_front():
    """Several pairs: /health answers 503 while the pair guard's gate file exists (the head's proxy), and the
    router's host gets the router's front as an nginx configuration of its own (own instance and unit: a fault in
    one cannot take the other down), same allowlist and keys in front of vllm-router, passing the client's key on
    (each head's proxy checks it again)."""
    conf = x.render_proxy_conf(spec(health_gate='/run/dgxspark-ds4-head.unhealthy'))
    health = conf.split('location = /health {')[1].split('\n        }')[0]
    assert 'if (-f /run/dgxspark-ds4-head.unhealthy) {' in health and 'return 503' in health
    assert health.index('return 503') < health.index('proxy_pass http://ds4_vllm;')
    assert 'ds4_router' not in conf and conf.count('server {') == 1
    front = x.render_proxy_conf(spec(public_port=8080, upstream_port=30000, pass_client_key=True))
    assert 'server 127.0.0.1:30000;' in front and 'listen 0.0.0.0:8080;' in front and front.count('server {') == 1
    assert 'proxy_set_header Authorization $http_authorization;' in front and 'ds4_upstream_authorization;' not in front
    assert 'unhealthy' not in front and 'ds4_vllm' not in front  # the router's own /health is the router's
    blocks = dict((m.group(1), m.group(2)) for m in re.finditer(r'location = (\S+) \{(.*?)\n        \}', front, re.S))
    assert '$ds4_key_ok = 0' in blocks['/v1/chat/completions'] and 'proxy_pass http://ds4_router;' in blocks['/v1/models']
    assert 'location = /metrics' not in front and "return 404" in front.split('location / {')[1]
    # keepalived's track script asks the front's /liveness (vllm-router's own, "OK" whatever its workers do); the head's
    # proxy has no such path, and the front's endpoint list cannot take it over
    assert 'limit_except GET { deny all; }' in blocks['/liveness'] and '$ds4_key_ok' not in blocks['/liveness']
    assert 'proxy_pass http://ds4_router;' in blocks['/liveness'] and 'location = /liveness' not in conf
    with pytest.raises(x.ExposureError) as exc:
        x.render_proxy_conf(spec(pass_client_key=True, endpoints=[{'path': '/liveness', 'auth': True, 'methods': ['GET']}]))
    assert exc.value.errors == ["endpoints: /liveness is the router front's own liveness path (keepalived's track "
                                "script); it cannot be listed"]
    assert 'health_gate' not in x.render_proxy_conf(spec())
    with pytest.raises(x.ExposureError) as exc:
        x.render_proxy_conf(spec(health_gate='/run/x y', pass_client_key=True))
    assert len(exc.value.errors) == 2
