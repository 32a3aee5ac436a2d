# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""End to end through Ansible: playbooks/render.yml with the action plugin (controller only)."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
# the shipped inventory (its recipe: balanced); another recipe is -e ds4_profile=<name>
SAMPLE_SITE = os.path.join(REPO, 'inventories', 'sample-site')

pytestmark = pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason='ansible-playbook not next to the test interpreter')


def _run(inventory, *extra):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1', ANSIBLE_FORCE_COLOR='0')
    return subprocess.run([PLAYBOOK, os.path.join(REPO, 'playbooks', 'render.yml'), '-i', inventory] + list(extra),
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)


def _copy_inventory(dest):
    """A copy of the sample site (recipe balanced) the test may edit."""
    shutil.copytree(SAMPLE_SITE, str(dest), symlinks=False)
    return str(dest)


def test_render_writes_golden_scripts(tmp_path):
    out = tmp_path / 'out'
    res = _run(SAMPLE_SITE, '-e', 'ds4_profile=dspark-c16', '-e', 'ds4_render_dir=%s' % out)
    assert res.returncode == 0, res.stdout + res.stderr
    for host, script in (('spark1', 'launch-head.sh'), ('spark2', 'launch-worker.sh')):
        got = (out / 'dspark-c16' / host / script)
        with open(os.path.join(REPO, 'tests', 'golden', 'dspark-c16', host, script)) as f:
            assert got.read_text() == f.read()
        assert os.access(str(got), os.X_OK)
        assert (out / 'dspark-c16' / host / 'nccl.env').exists()
        assert (out / 'dspark-c16' / host / 'effective.json').exists()
    assert '%s/dspark-c16/spark1/' % out in res.stdout


def test_broken_inventory_fails_before_any_write(tmp_path):
    inv = _copy_inventory(tmp_path / 'inv')
    hv = os.path.join(inv, 'host_vars', 'spark2.yml')
    with open(hv) as f:
        data = yaml.safe_load(f)
    del data['ds4_fabric_ip']
    with open(hv, 'w') as f:
        yaml.safe_dump(data, f)
    with open(os.path.join(inv, 'hosts.yml')) as f:
        hosts = yaml.safe_load(f)
    hosts['spark']['hosts']['spark3'] = {'ansible_host': '192.0.2.12'}
    with open(os.path.join(inv, 'hosts.yml'), 'w') as f:
        yaml.safe_dump(hosts, f)
    out = tmp_path / 'out'
    res = _run(inv, '-e', 'ds4_render_dir=%s' % out)
    text = res.stdout + res.stderr
    assert res.returncode != 0
    assert '[host spark2] ds4_fabric_ip = null' in text
    assert "groups['spark'] = [\"spark1\", \"spark2\", \"spark3\"]" in text
    assert 'nothing was changed on any host' in text
    assert not out.exists()


def _four_sparks(tmp_path, **group_vars):
    """balanced with spark1..4 as two pairs (spark_pair1, spark_pair2), each pair on its own fabric link."""
    inv = _copy_inventory(tmp_path / 'inv')
    hosts = {'spark': {'children': {
        'spark_pair1': {'hosts': {'spark1': {'ansible_host': '192.0.2.10'}, 'spark2': {'ansible_host': '192.0.2.11'}}},
        'spark_pair2': {'hosts': {'spark3': {'ansible_host': '192.0.2.12'}, 'spark4': {'ansible_host': '192.0.2.13'}}}}}}
    with open(os.path.join(inv, 'hosts.yml'), 'w') as f:
        yaml.safe_dump(hosts, f)
    with open(os.path.join(inv, 'host_vars', 'spark2.yml')) as f:
        worker = yaml.safe_load(f)
    for name, rank, ip in (('spark3', 0, '192.168.101.10'), ('spark4', 1, '192.168.101.11')):
        with open(os.path.join(inv, 'host_vars', name + '.yml'), 'w') as f:
            yaml.safe_dump(dict(worker, ds4_node_rank=rank, ds4_fabric_ip=ip), f)
    if group_vars:
        with open(os.path.join(inv, 'group_vars', 'spark', 'test.yml'), 'w') as f:
            yaml.safe_dump(group_vars, f)
    return inv


def _effective(out, host):
    with open(os.path.join(str(out), 'balanced', host, 'effective.json')) as f:
        return json.load(f)


def test_four_sparks_are_two_pairs_each_with_its_own_rendezvous_and_a_router(tmp_path):
    inv = _four_sparks(tmp_path, ds4_api_keys=['k' * 32])
    out = tmp_path / 'out'
    res = _run(inv, '-e', 'ds4_render_dir=%s' % out)
    assert res.returncode == 0, res.stdout + res.stderr
    eff = dict((h, _effective(out, h)) for h in ('spark1', 'spark2', 'spark3', 'spark4'))
    # each pair rendezvous at its own head, two nodes each
    assert [eff[h]['master_addr'] for h in eff] == ['192.168.100.10', '192.168.100.10', '192.168.101.10', '192.168.101.10']
    assert set(e['nnodes'] for e in eff.values()) == {2}
    assert [eff[h]['pair']['name'] for h in eff] == ['spark_pair1', 'spark_pair1', 'spark_pair2', 'spark_pair2']
    argv = eff['spark4']['argv']
    assert argv[argv.index('--master-addr') + 1] == '192.168.101.10'
    # the router on the first pair's head, every head a worker; each head's API opened to the router alone
    router = eff['spark3']['router']
    assert router['enabled'] and router['host'] == 'spark1' and router['address'] == '192.0.2.10' and router['port'] == 8080
    assert router['workers'] == ['https://192.0.2.10:8000', 'https://192.0.2.12:8000']
    for h in ('spark1', 'spark3'):
        assert eff[h]['api']['allowed_networks'] == ['192.0.2.10/32'] and eff[h]['api']['proxied']


def test_a_vip_gives_two_routers_and_opens_every_head_to_both(tmp_path):
    inv = _four_sparks(tmp_path, ds4_api_keys=['k' * 32], ds4_router_vip='192.0.2.100/24', router_vrrp_auth_pass='s3cret')
    out = tmp_path / 'out'
    res = _run(inv, '-e', 'ds4_render_dir=%s' % out)
    assert res.returncode == 0, res.stdout + res.stderr
    eff = dict((h, _effective(out, h)) for h in ('spark1', 'spark3'))
    router = eff['spark1']['router']
    assert router['hosts'] == ['spark1', 'spark3'] and router['addresses'] == ['192.0.2.10', '192.0.2.12']
    assert router['vip'] == '192.0.2.100/24' and router['endpoint'] == 'https://192.0.2.100:8080'
    assert router['vrrp_hosts'] == [{'host': 'spark1', 'address': '192.0.2.10'}, {'host': 'spark3', 'address': '192.0.2.12'}]
    for h in ('spark1', 'spark3'):
        assert eff[h]['api']['allowed_networks'] == ['192.0.2.10/32', '192.0.2.12/32']
    # TLS (on by default): each router host's certificate names its head API address, its router address and the VIP
    tls = eff['spark3']['tls']
    assert tls['enabled'] and tls['source'] == 'generated' and tls['fronts'] == ['proxy', 'router-front']
    assert tls['subject_alt_name'] == ['DNS:spark3', 'IP:192.0.2.12', 'IP:192.168.101.10', 'IP:127.0.0.1', 'DNS:localhost',
                                       'IP:192.0.2.100']


def test_tls_inputs_refused_before_any_write_naming_the_variable(tmp_path):
    inv = _four_sparks(tmp_path, ds4_api_keys=['k' * 32], ds4_tls_certificate=str(tmp_path / 'missing.crt'),
                       ds4_tls_private_key=str(tmp_path / 'missing.key'))
    with open(os.path.join(inv, 'host_vars', 'spark4.yml')) as f:
        data = yaml.safe_load(f)
    data['ds4_tls'] = False  # one host off: the router would talk to the heads in two schemes
    with open(os.path.join(inv, 'host_vars', 'spark4.yml'), 'w') as f:
        yaml.safe_dump(data, f)
    out = tmp_path / 'out'
    res = _run(inv, '-e', 'ds4_render_dir=%s' % out)
    text = res.stdout + res.stderr
    assert res.returncode != 0
    assert ("[host spark1] ds4_tls_certificate = '%s': no such file on the controller. Fix: give the path of the PEM file"
            % (tmp_path / 'missing.crt')) in text
    assert "ds4_tls differs between hosts (False: spark4; True: spark1, spark2, spark3)" in text
    assert 'nothing was changed on any host' in text
    assert not out.exists()


def test_a_vip_outside_the_router_hosts_network_is_refused_before_any_write(tmp_path):
    inv = _four_sparks(tmp_path, ds4_api_keys=['k' * 32], ds4_router_vip='10.9.9.100/24', router_vrrp_auth_pass='s3cret')
    out = tmp_path / 'out'
    res = _run(inv, '-e', 'ds4_render_dir=%s' % out)
    text = res.stdout + res.stderr
    assert res.returncode != 0
    assert "ds4_router_vip = '10.9.9.100/24': the router hosts spark1 (192.0.2.10), spark3 (192.0.2.12)" in text
    assert 'nothing was changed on any host' in text
    assert not out.exists()


def test_one_pair_has_no_router_and_no_new_exposure(tmp_path):
    out = tmp_path / 'out'
    res = _run(SAMPLE_SITE, '-e', 'ds4_render_dir=%s' % out)
    assert res.returncode == 0, res.stdout + res.stderr
    eff = _effective(out, 'spark1')
    assert eff['pair']['name'] == 'spark' and eff['pair']['hosts'] == ['spark1', 'spark2']
    assert eff['router']['enabled'] is False
    assert eff['api']['exposure'] == 'loopback' and not eff['api']['proxied']


def test_four_sparks_refused_before_any_write(tmp_path):
    inv = _four_sparks(tmp_path, ds4_router_host='spark9')
    with open(os.path.join(inv, 'host_vars', 'spark4.yml')) as f:
        data = yaml.safe_load(f)
    data['ds4_fabric_ip'] = '192.168.102.11'  # pair 2 across two subnets
    with open(os.path.join(inv, 'host_vars', 'spark4.yml'), 'w') as f:
        yaml.safe_dump(data, f)
    out = tmp_path / 'out'
    res = _run(inv, '-e', 'ds4_render_dir=%s' % out)
    text = res.stdout + res.stderr
    assert res.returncode != 0
    assert 'spark_pair2: fabric addresses in two subnets' in text
    assert 'nothing was changed on any host' in text
    assert not out.exists()
