# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/monitoring/tasks/inputs.yml (run by role dgxspark.ds4.config before any host changes) through
ansible-playbook on the controller: every bad value of the monitoring access variables is refused naming the
variable, the value (never a password) and the fix; good values pass."""


import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
PLAYBOOK_BIN = os.path.join(REPO, '.venv', 'bin', 'ansible-playbook')
SHORT = 'sh0rtPw'


def _pem(tmp_path):
    """Two keys and a self-signed certificate of the first (openssl, as the role's own certificate is made)."""
    openssl = shutil.which('openssl')
    if not openssl:
        if os.environ.get('CI', '').strip().lower() in ('1', 'true', 'yes'):
            pytest.fail('openssl not found under CI=true (Debian: apt-get install -y openssl)')
        pytest.skip('openssl not installed')
    key1, key2, crt = (str(tmp_path / n) for n in ('k1.pem', 'k2.pem', 'c1.pem'))
    subprocess.run([openssl, 'req', '-x509', '-new', '-nodes', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
                    '-days', '2', '-subj', '/CN=test', '-keyout', key1, '-out', crt], check=True, stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT)
    subprocess.run([openssl, 'genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', key2],
                   check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return key1, key2, crt


def run_cases(tmp_path, cases):
    """{case name: failure message or None}, one ansible-playbook run for all cases."""
    if not os.path.exists(PLAYBOOK_BIN):
        pytest.skip('no .venv (make venv)')
    tasks = []
    for name, values in cases.items():
        tasks.append({'name': 'Case %s' % name, 'block': [
            {'name': 'Inputs', 'ansible.builtin.include_role': {'name': 'dgxspark.ds4.monitoring', 'tasks_from': 'inputs'},
             'vars': values},
            {'name': 'Passed', 'ansible.builtin.set_fact': {'results': '{{ results | combine({%r: none}) }}' % name}}],
            'rescue': [{'name': 'Refused', 'ansible.builtin.set_fact': {
                'results': '{{ results | combine({%r: ansible_failed_result.msg}) }}' % name}}]})
    write = {'dest': str(tmp_path / 'out.json'), 'mode': '0644', 'content': '{{ results | to_json }}'}
    tasks.append({'name': 'Write', 'ansible.builtin.copy': write})
    (tmp_path / 'play.yml').write_text(yaml.safe_dump([{'hosts': 'localhost', 'gather_facts': False,
                                                        'vars': {'results': {}}, 'tasks': tasks}]))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1')
    proc = subprocess.run([PLAYBOOK_BIN, '-i', 'localhost,', '-c', 'local', '-e',
                           'ansible_python_interpreter=%s' % sys.executable, str(tmp_path / 'play.yml')], cwd=REPO,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert SHORT not in proc.stdout
    return json.loads((tmp_path / 'out.json').read_text())


def test_bad_monitoring_inputs_refused_naming_the_variable_and_good_ones_pass(tmp_path):
    key1, key2, crt = _pem(tmp_path)
    out = run_cases(tmp_path, {
        'bad_cidr': {'monitoring_allowed_networks': ['10.77.0.300/32']},
        'string': {'monitoring_allowed_networks': '10.77.0.0/24'},
        'loopback': {'monitoring_allowed_networks': ['127.0.0.0/8']},
        'no_cert_file': {'monitoring_prometheus_tls_cert': '/nonexistent/cert.pem', 'monitoring_prometheus_tls_key': key1},
        'cert_only': {'monitoring_prometheus_tls_cert': crt},
        'wrong_key': {'monitoring_prometheus_tls_cert': crt, 'monitoring_prometheus_tls_key': key2},
        'short_password': {'monitoring_prometheus_password': SHORT},
        'bad_user': {'monitoring_prometheus_auth_user': 'ds4:admin'},
        'good_self_signed': {'monitoring_allowed_networks': ['10.77.0.20/32', 'fd00::/64']},
        'good_own_cert': {'monitoring_allowed_networks': ['10.77.0.0/24'], 'monitoring_prometheus_tls_cert': crt,
                          'monitoring_prometheus_tls_key': key1,
                          'monitoring_prometheus_password': 'a-long-enough-password-0123'},
    })
    assert "monitoring_allowed_networks entry '10.77.0.300/32': not an IPv4/IPv6 network. Fix:" in out['bad_cidr']
    assert "monitoring_allowed_networks = '10.77.0.0/24': must be a list of CIDRs" in out['string']
    assert "monitoring_allowed_networks entry '127.0.0.0/8': a loopback network" in out['loopback']
    assert 'monitoring_prometheus_tls_cert = "/nonexistent/cert.pem"' in out['no_cert_file'] and 'Fix:' in out['no_cert_file']
    assert 'monitoring_prometheus_tls_key = ""' in out['cert_only']
    assert 'monitoring_prometheus_tls_key = %s is not the key of monitoring_prometheus_tls_cert = %s' % (key2, crt) \
        in out['wrong_key']
    assert 'monitoring_prometheus_password' in out['short_password'] and SHORT not in out['short_password']
    assert 'monitoring_prometheus_auth_user = "ds4:admin"' in out['bad_user']
    assert out['good_self_signed'] is None and out['good_own_cert'] is None
