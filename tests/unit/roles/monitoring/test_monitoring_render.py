# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/monitoring templates rendered for a two-node pair by ansible-playbook (local connection, no host
changed): the Prometheus config passes `promtool check config`, scrapes vLLM over loopback and both node
exporters over the fabric, marks the fabric netdev and both RoCE twins fabric="true"; the unit drop-ins
pass only flags the installed binaries know; Prometheus listens on loopback unless networks are allowed."""


import hashlib
import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))
ROLE = os.path.join(REPO, 'roles', 'monitoring')
PLAYBOOK_BIN = os.path.join(REPO, '.venv', 'bin', 'ansible-playbook')

INVENTORY = """
all:
  children:
    spark:
      hosts:
        spark1:
          ansible_connection: local
          ds4_effective: {role: head, nnodes: 2, master_port: 29501, pair: {name: spark, hosts: [spark1, spark2]},
                          api: {port: %(port)d, public_port: 8000, exposure: %(exposure)s},
                          fabric: {ip: 10.77.0.11, ifname: enp1s0f1np1, rdma_hcas: [rocep1s0f1, roceP2p1s0f1]}}
        spark2:
          ansible_connection: local
          ds4_effective: {role: worker, nnodes: 2, master_port: 29501, pair: {name: spark, hosts: [spark1, spark2]},
                          api: {port: %(port)d, public_port: 8000, exposure: %(exposure)s},
                          fabric: {ip: 10.77.0.12, ifname: enP2p1s0f0np0, rdma_hcas: [roceP2p1s0f0]}}
"""

TEMPLATES = ['prometheus.yml', 'prometheus.override.conf', 'node-exporter.override.conf', 'grafana-datasource.yml',
             'grafana-dashboards.yml', 'prometheus-web.yml', 'prometheus-tls.cnf', 'grafana.override.conf']

# The templates through ansible-core's template lookup: the templar, search path and defaults (trim_blocks) the
# template action uses, without one copy module run per file and host (16 of them took ~30 s of a loaded CI machine per
# variant); one JSON file with every host's files, written once.
PLAYBOOK = """
- hosts: spark
  gather_facts: false
  vars_files:
    - %(role)s/defaults/main.yml
    - %(role)s/vars/main.yml
  vars:
    # what tasks/secret.yml leaves for the templates (the password kept or generated on the head)
    _monitoring_secret_value: ds4TestPrometheusPassword0123
    _monitoring_prometheus_password_value: ds4TestPrometheusPassword0123
    _names: %(names)s
  tasks:
    - name: Render
      ansible.builtin.set_fact:
        _rendered: >-
          {{ dict(_names | zip(query('ansible.builtin.template',
                                     *(_names | map('regex_replace', '^(.*)$', '%(role)s/templates/\\1.j2'))))) }}
    - name: Write
      ansible.builtin.copy:
        content: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, '_rendered'))) | to_json }}"
        dest: "%(out)s/rendered.json"
        mode: "0644"
      delegate_to: localhost
      run_once: true
"""


def need(binary):
    path = shutil.which(binary)
    if path:
        return path
    if os.environ.get('CI', '').lower() in ('1', 'true', 'yes'):
        pytest.fail('%s not found under CI=true: apt-get install -y prometheus prometheus-node-exporter' % binary)
    pytest.skip('%s not installed' % binary)
    return None


_CACHE = {}


PASSWORD = 'ds4TestPrometheusPassword0123'
MONITORING = ('10.77.0.20/32',)


def render(tmp_path, exposure='loopback', port=8000, networks=()):
    """Rendered files by name; one ansible-playbook run per (exposure, port, networks) for the whole module (slow
    start-up)."""
    key = (exposure, port, tuple(networks))
    if key not in _CACHE:
        _CACHE[key] = _render(tmp_path, exposure, port, list(networks))
    return _CACHE[key]


def _render(tmp_path, exposure, port, networks):
    if not os.path.exists(PLAYBOOK_BIN):
        pytest.skip('no .venv (make venv)')
    out = tmp_path / 'out'
    out.mkdir()
    (tmp_path / 'hosts.yml').write_text(INVENTORY % {'port': port, 'exposure': exposure})
    (tmp_path / 'play.yml').write_text(PLAYBOOK % {'role': ROLE, 'out': out, 'names': json.dumps(TEMPLATES)})
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1')
    # extra vars: the role's defaults come in as vars_files, above inventory and play vars
    proc = subprocess.run([PLAYBOOK_BIN, '-i', str(tmp_path / 'hosts.yml'), '-e',
                           json.dumps({'monitoring_allowed_networks': networks}), str(tmp_path / 'play.yml')], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    with open(str(out / 'rendered.json')) as handle:
        rendered = json.load(handle)
    assert sorted(rendered) == ['spark1', 'spark2'] and all(sorted(v) == sorted(TEMPLATES) for v in rendered.values())
    return dict(('%s-%s' % (host, name), text) for host, files in rendered.items() for name, text in files.items())


def exec_start(dropin):
    lines = [ln for ln in dropin.splitlines() if ln.startswith('ExecStart=') and ln != 'ExecStart=']
    assert len(lines) == 1 and 'ExecStart=\n' in dropin + '\n'   # the package's ExecStart is reset first
    return lines[0][len('ExecStart='):].split()


def test_prometheus_config_scrapes_the_pair(tmp_path):
    files = render(tmp_path, port=8001)
    assert "regex: '10\\.77\\.0\\.11:9100;(enp1s0f1np1|rocep1s0f1|roceP2p1s0f1)'" in files['spark1-prometheus.yml']
    cfg = yaml.safe_load(files['spark1-prometheus.yml'])
    jobs = {j['job_name']: j for j in cfg['scrape_configs']}
    assert jobs['vllm']['static_configs'] == [{'targets': ['127.0.0.1:8001'], 'labels': {'ds4_node': 'spark1', 'ds4_role': 'head'}}]
    assert jobs['node']['static_configs'] == [
        {'targets': ['10.77.0.11:9100'], 'labels': {'ds4_node': 'spark1', 'ds4_role': 'head'}},
        {'targets': ['10.77.0.12:9100'], 'labels': {'ds4_node': 'spark2', 'ds4_role': 'worker'}}]
    assert cfg['rule_files'] == ['/etc/prometheus/rules/dgxspark-ds4.rules.yml']
    relabel = jobs['node']['metric_relabel_configs']
    assert [r['target_label'] for r in relabel] == ['fabric', 'fabric']
    # the relabel regexes (anchored by Prometheus) mark exactly the fabric netdev and RoCE HCAs of each node
    marks = [re.compile('^(?:%s)$' % r['regex']) for r in relabel]

    def marked(instance, device):
        return any(m.match('%s;%s' % (instance, device)) for m in marks)
    assert marked('10.77.0.11:9100', 'enp1s0f1np1') and marked('10.77.0.11:9100', 'roceP2p1s0f1')
    assert marked('10.77.0.12:9100', 'enP2p1s0f0np0') and marked('10.77.0.12:9100', 'roceP2p1s0f0')
    assert not marked('10.77.0.11:9100', 'enp1s0f0np0')          # the uncabled cage
    assert not marked('10.77.0.12:9100', 'enp1s0f1np1')          # another node's fabric netdev
    assert not marked('10.77.0x11:9100', 'enp1s0f1np1')          # dots are escaped


def test_prometheus_config_passes_promtool(tmp_path):
    promtool = need('promtool')
    files = render(tmp_path)
    rules_dir = tmp_path / 'etc' / 'rules'
    rules_dir.mkdir(parents=True)
    shutil.copy(os.path.join(ROLE, 'files', 'dgxspark-ds4.rules.yml'), str(rules_dir / 'dgxspark-ds4.rules.yml'))
    text = files['spark1-prometheus.yml'].replace('/etc/prometheus/rules', str(rules_dir))
    (tmp_path / 'prometheus.yml').write_text(text)
    proc = subprocess.run([promtool, 'check', 'config', str(tmp_path / 'prometheus.yml')], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout
    assert 'SUCCESS' in proc.stdout


@pytest.mark.parametrize('exposure,networks,listen', [('loopback', (), '127.0.0.1:9090'),
                                                      ('networks', (), '127.0.0.1:9090'),
                                                      ('loopback', MONITORING, '0.0.0.0:9090')])
def test_prometheus_listens_on_loopback_unless_monitoring_networks_are_allowed(tmp_path, exposure, networks, listen):
    files = render(tmp_path, exposure=exposure, networks=networks)
    argv = exec_start(files['spark1-prometheus.override.conf'])
    assert argv[0] == '/usr/bin/prometheus'
    assert '--web.listen-address=%s' % listen in argv
    # TLS and basic auth exactly when it listens beyond loopback
    assert ('--web.config.file=/etc/prometheus/dgxspark-ds4-web/web.yml' in argv) == bool(networks)
    assert '--config.file=/etc/prometheus/dgxspark-ds4.yml' in argv
    assert '--storage.tsdb.retention.time=30d' in argv
    assert not [a for a in argv if a.startswith('--storage.tsdb.retention.size')]


def test_node_exporter_listens_on_the_fabric_address_with_the_textfile_collector(tmp_path):
    files = render(tmp_path)
    assert exec_start(files['spark1-node-exporter.override.conf'])[1:] == [
        '--web.listen-address=10.77.0.11:9100', '--collector.textfile.directory=/var/lib/prometheus/node-exporter']
    assert '--web.listen-address=10.77.0.12:9100' in exec_start(files['spark2-node-exporter.override.conf'])


def test_dropin_flags_are_known_to_the_installed_binaries(tmp_path):
    files = render(tmp_path)
    for name, binary in (('spark1-prometheus.override.conf', 'prometheus'),
                         ('spark1-node-exporter.override.conf', 'prometheus-node-exporter')):
        path = need(binary)
        proc = subprocess.run([path, '--help'], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                              check=False)
        for arg in exec_start(files[name])[1:]:
            flag = arg.split('=', 1)[0]
            assert flag in proc.stdout, '%s does not know %s' % (binary, flag)


def test_grafana_provisioning_points_at_prometheus_and_the_dashboard_dir(tmp_path):
    files = render(tmp_path)
    ds = yaml.safe_load(files['spark1-grafana-datasource.yml'])['datasources'][0]
    assert ds['type'] == 'prometheus' and ds['url'] == 'http://127.0.0.1:9090'
    provider = yaml.safe_load(files['spark1-grafana-dashboards.yml'])['providers'][0]
    assert provider['type'] == 'file' and provider['options']['path'] == '/var/lib/grafana/dashboards/dgxspark-ds4'


def _self_signed(tmp_path, cnf_text):
    """Key and certificate made as tasks/prometheus_web.yml makes them, from the rendered request."""
    cnf = tmp_path / 'openssl.cnf'
    cnf.write_text(cnf_text)
    key, crt = tmp_path / 'tls.key', tmp_path / 'tls.crt'
    subprocess.run([need('openssl'), 'req', '-x509', '-new', '-nodes', '-newkey', 'ec', '-pkeyopt',
                    'ec_paramgen_curve:prime256v1', '-days', '825', '-config', str(cnf), '-keyout', str(key),
                    '-out', str(crt)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=True)
    return key, crt


def test_exposed_prometheus_web_config_tls_and_bcrypt_of_the_password(tmp_path):
    from ansible._internal._encryption._crypt import CryptFacade
    files = render(tmp_path, networks=MONITORING)
    key, crt = _self_signed(tmp_path, files['spark1-prometheus-tls.cnf'])
    text = subprocess.run([need('openssl'), 'x509', '-noout', '-text', '-in', str(crt)], stdout=subprocess.PIPE,
                          universal_newlines=True, check=True).stdout
    assert 'IP Address:127.0.0.1' in text and 'DNS:spark1' in text and 'IP Address:10.77.0.11' in text, text
    web = yaml.safe_load(files['spark1-prometheus-web.yml'])
    assert web['tls_server_config']['cert_file'] == '/etc/prometheus/dgxspark-ds4-web/tls.crt'
    hashed = web['basic_auth_users']['ds4']
    assert hashed.startswith('$2b$') and PASSWORD not in files['spark1-prometheus-web.yml']
    assert CryptFacade().crypt(PASSWORD.encode(), hashed.encode()).decode() == hashed
    assert CryptFacade().crypt(b'not-the-password', hashed.encode()).decode() != hashed
    # the same password renders the same hash on every run (the salt comes from the host's name, roles/monitoring/vars):
    # the role stays idempotent
    # (ansible-core's password_hash filter with that salt, computed here: no random part)
    from ansible.plugins.filter.core import get_encrypted_password
    salt = hashlib.sha256(b'dgxspark-ds4 prometheus spark1').hexdigest()[:22]
    assert get_encrypted_password(PASSWORD, 'bcrypt', salt=salt) == hashed
    assert get_encrypted_password(PASSWORD, 'bcrypt', salt=salt[::-1]) != hashed
    web['tls_server_config'].update(cert_file=str(crt), key_file=str(key))
    (tmp_path / 'web.yml').write_text(yaml.safe_dump(web))
    proc = subprocess.run([need('promtool'), 'check', 'web-config', str(tmp_path / 'web.yml')], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout


def test_exposed_prometheus_scrapes_itself_through_tls_and_basic_auth(tmp_path):
    files = render(tmp_path, networks=MONITORING)
    jobs = {j['job_name']: j for j in yaml.safe_load(files['spark1-prometheus.yml'])['scrape_configs']}
    own = jobs['prometheus']
    assert own['scheme'] == 'https'
    assert own['basic_auth'] == {'username': 'ds4', 'password_file': '/etc/prometheus/dgxspark-ds4-web/password'}
    assert own['tls_config'] == {'ca_file': '/etc/prometheus/dgxspark-ds4-web/tls.crt', 'server_name': '127.0.0.1'}
    assert PASSWORD not in files['spark1-prometheus.yml']
    # vLLM, the node exporters: unchanged (plain HTTP to their own listeners)
    assert 'scheme' not in jobs['vllm'] and 'scheme' not in jobs['node']
    assert 'scheme' not in yaml.safe_load(render(tmp_path)['spark1-prometheus.yml'])['scrape_configs'][-1]


def test_grafana_on_loopback_with_the_admin_password_from_a_file(tmp_path):
    files = render(tmp_path)
    env = [ln[len('Environment='):] for ln in files['spark1-grafana.override.conf'].splitlines()
           if ln.startswith('Environment=')]
    assert env == ['GF_SERVER_HTTP_ADDR=127.0.0.1', 'GF_SERVER_HTTP_PORT=3000',
                   'GF_SECURITY_ADMIN_PASSWORD__FILE=/etc/grafana/dgxspark-ds4-admin-password']
    ds = yaml.safe_load(render(tmp_path, networks=MONITORING)['spark1-grafana-datasource.yml'])['datasources'][0]
    assert ds['url'] == 'https://127.0.0.1:9090' and ds['basicAuth'] is True and ds['basicAuthUser'] == 'ds4'
    assert ds['secureJsonData'] == {'basicAuthPassword': PASSWORD}
