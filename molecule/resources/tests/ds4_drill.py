# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers shared by the Molecule verify tests that act on the converged pair (test code only).

They run from the controller (the CI machine): ansible-playbook against the Molecule inventory,
`docker exec` into the node containers, HTTP to the head's fabric address.
"""


import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import yaml

INVENTORY = os.environ.get('MOLECULE_INVENTORY_FILE', '')
PROJECT = os.environ.get('MOLECULE_PROJECT_DIRECTORY', os.getcwd())
SCENARIO_DIR = os.environ.get('MOLECULE_SCENARIO_DIRECTORY', '')
# The scenario's node-container prefix and fabric subnet: `make molecule` gives each scenario its own (so scenarios
# run at once on one Docker engine, molecule/resources/playbooks/create.yml); none and 10.77.0 when run by hand.
PREFIX = os.environ.get('DS4_MOLECULE_PREFIX', '')
NET = os.environ.get('DS4_MOLECULE_NET') or '10.77.0'


def ip(last):
    """The address ending in `last` on the scenario's fabric subnet (11 = spark1, 12 = spark2, 1 = the controller)."""
    return '%s.%d' % (NET, last)


def node_container(name):
    """The Docker container of inventory host `name` (spark1 -> <prefix>spark1)."""
    return PREFIX + name


# The test deployment opens the API to the controller (<net>.1/32) through the api_proxy role,
# which requires one of ds4_api_keys (molecule/resources/inventory/group_vars/spark/test.yml).
API_KEY = 'ds4-molecule-controller-key-0000'


def _scenario_vars_file():
    """The extra-vars file a scenario gives every playbook run (molecule/<scenario>/vars/<scenario>.yml), or None."""
    if not SCENARIO_DIR:
        return None
    path = os.path.join(SCENARIO_DIR, 'vars', os.path.basename(SCENARIO_DIR.rstrip('/')) + '.yml')
    return path if os.path.exists(path) else None


SCENARIO_VARS_FILE = _scenario_vars_file()


def _scenario_vars():
    if not SCENARIO_VARS_FILE:
        return {}
    with open(SCENARIO_VARS_FILE) as fh:
        return yaml.safe_load(fh) or {}


SCENARIO_VARS = _scenario_vars()
# The fronts' scheme: https where the scenario's extra-vars turn TLS on (ds4_tls: replicas; security reads its own
# inventory), with the CA the collection made in the scenario's ephemeral directory (its ds4_tls_ca_dir there) trusted
# by this process's HTTPS clients (urllib, http.client: the collection's vllm_client): never by the playbooks the tests
# run, which must trust it by themselves.
TLS = SCENARIO_VARS.get('ds4_tls') is True
SCHEME = 'https' if TLS else 'http'
TLS_CA_FILE = os.path.join(os.environ.get('MOLECULE_EPHEMERAL_DIRECTORY') or '/tmp/ds4-%s' % os.path.basename(
    SCENARIO_DIR.rstrip('/')), 'tls-ca', 'ca.crt')
if TLS:
    ssl._create_default_https_context = lambda: ssl.create_default_context(cafile=TLS_CA_FILE)  # pylint: disable=protected-access
HEAD_URL = '%s://%s:8000' % (SCHEME, ip(11))
# Where a rank lives (roles/vllm_service inputs, published as ds4_effective['service']): the role's defaults unless
# the scenario overrides them (the drills scenario overrides every one).
CONFIG_DIR = SCENARIO_VARS.get('vllm_service_config_dir', '/etc/dgxspark-ds4')
STATE_DIR = SCENARIO_VARS.get('vllm_service_state_dir', '/var/lib/dgxspark-ds4')
UNIT_DIR = SCENARIO_VARS.get('vllm_service_unit_dir', '/etc/systemd/system')
LIBEXEC_DIR = SCENARIO_VARS.get('vllm_service_libexec_dir', '/usr/local/libexec/dgxspark-ds4')
DOCKER_BIN = SCENARIO_VARS.get('vllm_service_docker_bin', '/usr/bin/docker')


def unit(role):
    return SCENARIO_VARS.get('vllm_service_unit_name') or 'dgxspark-ds4-%s.service' % role


def container(role):
    return SCENARIO_VARS.get('vllm_service_container_name') or 'dgxspark-ds4-%s' % role


BASE_OVERRIDES = {
    'image': {'ref': 'ds4-vllm-sim:test', 'vllm_version': '0.27.1'},
    'model': {'revision': '0123456789abcdef0123456789abcdef01234567'},
}


def run_playbook(name, *extra_vars, **kwargs):
    """ansible-playbook playbooks/<name> against the Molecule inventory; (rc, output). The scenario's own extra-vars
    file comes first (as in Molecule's converge: the drills' overridden layout must reach every playbook), then
    var_files, then extra_vars."""
    cmd = [shutil.which('ansible-playbook') or 'ansible-playbook', '-i', os.path.dirname(INVENTORY),
           os.path.join(PROJECT, 'playbooks', name)]
    for path in ([SCENARIO_VARS_FILE] if SCENARIO_VARS_FILE else []) + list(kwargs.get('var_files', ())):
        cmd += ['-e', '@' + path]
    for ev in extra_vars:
        cmd += ['-e', json.dumps(ev)]
    cmd += list(kwargs.get('args', ()))
    env = dict(os.environ)
    env.setdefault('ANSIBLE_COLLECTIONS_PATH', os.path.join(PROJECT, '.collections'))
    env['ANSIBLE_NOCOLOR'] = '1'
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          env=env, cwd=PROJECT, timeout=kwargs.get('timeout', 900), check=False)
    return proc.returncode, proc.stdout


_INSTALLED = {}


def installed_collection():
    """The collection as a user installs it: `ansible-galaxy collection build` of this checkout, then `install` of
    that tarball into a temporary collections path (once per test session) -> (collections path, work dir)."""
    if not _INSTALLED:
        top = tempfile.mkdtemp(prefix='ds4-installed-')
        sys.path.insert(0, os.path.join(PROJECT, 'tests', 'harness'))
        import installed_collection as harness  # pylint: disable=import-outside-toplevel,import-error
        harness.build_and_install(PROJECT, top, shutil.which('ansible-galaxy') or 'ansible-galaxy')
        assert os.path.isfile(top + '/collections/ansible_collections/dgxspark/ds4/roles/config/files/recipes/upstream-mtp.yml')
        os.mkdir(top + '/work')
        _INSTALLED.update(collections=top + '/collections', work=top + '/work')
    return _INSTALLED['collections'], _INSTALLED['work']


def run_installed_playbook(name, *extra_vars, **kwargs):
    """`ansible-playbook dgxspark.ds4.<name>` from the installed tarball (installed_collection()), run from a directory
    outside the checkout with no ansible.cfg (nothing can come from the repository; -v makes ansible-playbook say
    so), against this scenario's inventory -> (rc, output)."""
    collections, work = installed_collection()
    cmd = [shutil.which('ansible-playbook') or 'ansible-playbook', '-v', 'dgxspark.ds4.%s' % name, '-i', os.path.dirname(INVENTORY)]
    for ev in extra_vars:
        cmd += ['-e', json.dumps(ev)]
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_NOCOLOR='1', ANSIBLE_PIPELINING='true',
               ANSIBLE_CALLBACK_RESULT_FORMAT='yaml')
    for var in ('ANSIBLE_CONFIG', 'ANSIBLE_ROLES_PATH', 'ANSIBLE_LIBRARY', 'ANSIBLE_FILTER_PLUGINS', 'ANSIBLE_ACTION_PLUGINS',
                'ANSIBLE_MODULE_UTILS'):
        env.pop(var, None)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env, cwd=work,
                          timeout=kwargs.get('timeout', 900), check=False)
    return proc.returncode, proc.stdout


def run_printed(argv, timeout=900):
    """Run a command exactly as the collection prints it to users (make demo's next steps), from the repository root
    as a user's shell would: the printed -i decides the inventory (Molecule's ANSIBLE_INVENTORY is dropped). rc 0 is
    asserted; -> its output."""
    env = dict(os.environ)
    env.pop('ANSIBLE_INVENTORY', None)
    proc = subprocess.run(argv, cwd=PROJECT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=timeout, check=False)
    assert proc.returncode == 0, '%s: rc %d\n%s' % (' '.join(argv), proc.returncode, proc.stdout[-4000:])
    return proc.stdout


def node(name, *argv, **kwargs):
    proc = subprocess.run(['docker', 'exec', node_container(name)] + list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=kwargs.get('check', True))
    return proc.stdout.strip()


def started_at(name, role):
    """Container StartedAt as (seconds-part, nanoseconds) so Docker's trimmed fractions compare right."""
    raw = node(name, 'docker', 'inspect', '-f', '{{.State.StartedAt}}', container(role))
    stamp, _dot, frac = raw.rstrip('Z').partition('.')
    return stamp, int((frac + '000000000')[:9])


def both_started():
    """StartedAt of the pair's two containers: (spark1's head, spark2's worker), as started_at() gives them."""
    return started_at('spark1', 'head'), started_at('spark2', 'worker')


def reboot_both_nodes(timeout=300.0):
    """Both node containers stopped and started (a reboot: systemd boots again and starts what is enabled), then
    wait until the pair serves. -> (seconds from the stop to serving, both_started() before, both_started() after)."""
    before = both_started()
    t0 = time.monotonic()
    subprocess.run(['docker', 'stop', '-t', '5', node_container('spark1'), node_container('spark2')], check=True,
                   stdout=subprocess.PIPE)
    subprocess.run(['docker', 'start', node_container('spark2'), node_container('spark1')], check=True,
                   stdout=subprocess.PIPE)
    wait_serving(timeout)
    return time.monotonic() - t0, before, both_started()


def unit_show(name, unit, *props):
    out = node(name, 'systemctl', 'show', unit, *['-p%s' % p for p in props])
    return dict(line.split('=', 1) for line in out.splitlines() if '=' in line)


def request(path, body=None, timeout=10.0, url=HEAD_URL, key=API_KEY):
    data = None if body is None else json.dumps(body).encode()
    headers = {'Content-Type': 'application/json'}
    if key:
        headers['Authorization'] = 'Bearer ' + key
    req = urllib.request.Request(url + path, data=data, headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, resp.read()


def chat(prompt='What is 2+2? Answer with one word.', timeout=30.0):
    status, body = request('/v1/chat/completions', {
        'model': 'deepseek-v4-flash', 'max_tokens': 16, 'temperature': 0,
        'messages': [{'role': 'user', 'content': prompt}]}, timeout=timeout)
    assert status == 200
    return json.loads(body)['choices'][0]['message']['content']


def wait_until(what, predicate, timeout, interval=1.0):
    """Poll predicate() until truthy; returns its value or raises with the last exception/value."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            value = predicate()
            if value:
                return value
            last = value
        except (AssertionError, urllib.error.URLError, ConnectionError, OSError, ValueError, KeyError,
                subprocess.CalledProcessError) as exc:
            last = exc
        time.sleep(interval)
    raise AssertionError('%s: not within %.0f s (last: %r)' % (what, timeout, last))


def wait_serving(timeout=180.0):
    """Both ranks up and a real completion answered through the head."""
    return wait_until('the pair serves a chat completion', lambda: chat(timeout=10.0), timeout, interval=2.0)
