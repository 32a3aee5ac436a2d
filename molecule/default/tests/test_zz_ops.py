# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The operations playbooks (status, logs, stop, restart, validate, bench, switch, rollback) against the converged two-node pair, run last.

status, logs, stop (head first), restart (worker first, readiness), validate, bench (table, JSON,
plot), then a profile switch balanced -> throughput and a rollback, both through readiness. The
pair ends on the scenario's own (balanced) configuration.
"""


import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position
sys.path.insert(0, os.path.join(d.PROJECT, 'tests', 'harness'))
import demo  # noqa: E402  pylint: disable=wrong-import-position,import-error

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')


def ops(name, *extra, **kwargs):
    rc, out = d.run_playbook(name, *extra, **kwargs)
    if rc != 0:
        units = '\n'.join(d.node(n, 'journalctl', '--no-pager', '-o', 'cat', '-n', '25', '-u', u, check=False)
                          for n, u in (('spark1', 'dgxspark-ds4-head.service'), ('spark2', 'dgxspark-ds4-worker.service'),
                                       ('spark1', 'dgxspark-ds4-pairguard.service')))
        raise AssertionError('%s failed:\n%s\n--- journals:\n%s' % (name, out[-4000:], units))
    return out


def head_script():
    return d.node('spark1', 'cat', '/etc/dgxspark-ds4/launch-head.sh')


def served_max_model_len():
    _status, body = d.request('/v1/models')
    return json.loads(body)['data'][0]['max_model_len']


# Both readiness timeouts mean the same in every playbook that readies the pair (playbooks/tasks/ready.yml).
READY_LIMITS = {'ds4_ready_timeout': 1234, 'ds4_ready_chat_timeout': 45}


def assert_ready_limits(out):
    flat = ' '.join(out.split())
    assert 'chat_timeout: 45.0' in flat and ' timeout: 1234.0' in flat, 'readiness did not get both timeouts: ' + out[-2000:]


def test_the_operator_logs_in_unprivileged_and_reaches_the_loopback_api_another_user_is_refused():
    """The nodes are reached as `ops`, an unprivileged login in group sudo (molecule.yml, create.yml), as an operator
    reaches a Spark: the converge and every playbook of this file ran that way, each play that changes a host becoming
    root by itself. vLLM's own port on the head's loopback (8001 here: the test inventory puts the proxy in front) is
    owned by the firewall: ops, a member of firewall_loopback_groups' sudo, gets an answer from it, as the README's
    first request does on a loopback-only pair; nobody, another local account, gets a reset."""
    with open(d.INVENTORY) as handle:
        inventory = yaml.safe_load(handle)
    hosts = inventory['all']['hosts']
    assert hosts['spark1']['ansible_user'] == hosts['spark2']['ansible_user'] == 'ops', hosts
    assert d.node('spark1', 'id', '-u', 'ops') != '0' and 'sudo' in d.node('spark1', 'id', '-nG', 'ops').split()
    uid = d.node('spark1', 'id', '-u', 'ops')
    # the owner rule (who may connect to the owned loopback ports), not the served ports' or the control plane's
    rule = [ln.strip() for ln in d.node('spark1', 'nft', 'list', 'chain', 'inet', 'dgxspark_ds4', 'output').splitlines()
            if ln.strip().startswith('oif "lo" tcp dport ') and 'meta skuid != ' in ln]
    assert len(rule) == 1 and 'tcp dport 8001 ' in rule[0] and re.search(r'\b%s\b' % uid, rule[0]), rule
    # vLLM's own key where the deployment sets one (this scenario's proxy checks the clients' keys, vLLM has none)
    key = [ln.split('=', 1)[1] for ln in d.node('spark1', 'cat', '/etc/dgxspark-ds4/secrets-head.env').splitlines()
           if ln.startswith('VLLM_API_KEY=')]
    assert len(key) <= 1, 'VLLM_API_KEY twice in secrets-head.env'
    auth = ['-H', 'Authorization: Bearer ' + key[0]] if key else []
    body = json.dumps({'model': 'deepseek-v4-flash', 'max_tokens': 16, 'temperature': 0,
                       'messages': [{'role': 'user', 'content': 'What is 2+2? Answer with one word.'}]})

    def as_user(user):
        return subprocess.run(['docker', 'exec', d.node_container('spark1'), 'runuser', '-u', user, '--', 'curl', '-sS',
                               '--max-time', '20', 'http://127.0.0.1:8001/v1/chat/completions', '-H',
                               'Content-Type: application/json'] + auth + ['-d', body],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    ops_login = as_user('ops')
    assert ops_login.returncode == 0, ops_login.stdout
    assert json.loads(ops_login.stdout)['choices'][0]['message']['content'].strip() == 'Four', ops_login.stdout
    other = as_user('nobody')
    # curl 7: could not connect (the firewall's reset), the same port that answered ops just before
    assert other.returncode == 7 and 'port 8001' in other.stdout, (other.returncode, other.stdout)


def test_status_one_table_for_both_ranks():
    out = ops('status.yml')
    rows = [ln.split() for ln in out.splitlines() if ln.strip().startswith(('spark1 ', 'spark2 ')) and ' ok=' not in ln]
    assert [r[:5] for r in rows] == [['spark1', 'head', 'active/running', 'running', rows[0][4]],
                                     ['spark2', 'worker', 'active/running', 'running', rows[0][4]]], rows
    assert rows[0][5] == rows[1][5] == 'balanced', rows
    assert "ok deepseek-v4-flash 'OK'" in out


def test_logs_labelled_by_node():
    out = ops('logs.yml', {'ds4_logs_lines': 20})
    assert 'spark1 (head) |' in out and 'spark2 (worker) |' in out


def test_stop_head_first_then_restart_worker_first():
    ops('stop.yml')
    head = d.unit_show('spark1', 'dgxspark-ds4-head.service', 'ActiveState', 'InactiveEnterTimestampMonotonic')
    worker = d.unit_show('spark2', 'dgxspark-ds4-worker.service', 'ActiveState', 'InactiveEnterTimestampMonotonic')
    assert head['ActiveState'] == 'inactive' and worker['ActiveState'] == 'inactive'
    # Both containers share the CI machine's kernel: their monotonic clocks are the same clock.
    assert int(head['InactiveEnterTimestampMonotonic']) < int(worker['InactiveEnterTimestampMonotonic']), 'head must stop first'
    out = ops('restart.yml', READY_LIMITS, args=['-v'])
    assert_ready_limits(out)
    head1, worker1 = d.started_at('spark1', 'head'), d.started_at('spark2', 'worker')
    assert worker1 < head1, 'worker must start first'
    assert d.chat()


def test_validate_passes_on_a_clean_endpoint():
    out = ops('validate.yml', {'ds4_validate_levels': [1, 2]})
    assert re.search(r'msg: [1-9][0-9]* request\(s\), 0 failure\(s\)', out), out[-2000:]


def test_bench_writes_table_json_and_plot():
    outdir = tempfile.mkdtemp(prefix='ds4-bench-')
    ops('bench.yml', {'ds4_bench_levels': [1, 2], 'ds4_bench_max_tokens': 64, 'ds4_bench_dir': outdir})
    for ext in ('json', 'md', 'png'):
        assert glob.glob(os.path.join(outdir, 'bench-*.%s' % ext)), 'no .%s report in %s' % (ext, outdir)
    report = json.load(open(glob.glob(os.path.join(outdir, 'bench-*.json'))[0]))
    text = json.dumps(report)
    assert 'aggregate' in text and 'ttft' in text.lower()


def test_switch_to_throughput_then_rollback_both_pass_readiness():
    """The switch and rollback `make demo` prints (tests/harness/demo.py next_steps), run as printed against the demo
    inventory, plus the readiness limits (asserted to reach switch.yml's readiness) and -v."""
    assert served_max_model_len() == 131072
    out = d.run_printed(demo.step('switch') + ['-e', json.dumps(READY_LIMITS), '-v'])
    assert_ready_limits(out)
    assert '65536' in head_script()
    assert served_max_model_len() == 65536
    d.run_printed(demo.step('rollback'))
    assert '131072' in head_script()
    assert served_max_model_len() == 131072
    d.wait_serving(60)
    took, answer = demo.chat()
    assert answer.strip(), 'no answer through the printed endpoint after the rollback (%.2f s)' % took


# A per-recipe inventory layer (issue 25; the collection ships none since issue 48, a user may still keep such layers):
# the recipe is collection data chosen by name (ds4_profile); the site is written once. Here the site is this
# scenario's inventory (API keys, allowed networks, the simulator image) plus a site part written below (monitoring
# on, the 0731 revision pin); the per-recipe layer, written below too, names the recipe (ds4_profile, as the sample
# site's group_vars/spark/site.yml does) and adds what this site does differently for that recipe (the simulator image
# that carries vLLM 0.33). No -e: the recipe reaches switch.yml through the inventory alone. Runs last in this file:
# the pair is left on the upstream 0731 recipe (test_zz_profiles.py switches on from there).
UPSTREAM_0731 = 'upstream-0731-dspark'


def test_switch_through_a_per_recipe_inventory_keeps_every_site_setting(tmp_path):
    import urllib.error
    import yaml
    site = tmp_path / 'site' / 'group_vars' / 'spark'
    site.mkdir(parents=True)
    (site / 'site.yml').write_text(yaml.safe_dump({
        'monitoring_enabled': True,
        'ds4_model_revisions': {'deepseek-v4-flash-0731': d.BASE_OVERRIDES['model']['revision']}}))
    recipe = tmp_path / UPSTREAM_0731 / 'group_vars' / 'spark'
    recipe.mkdir(parents=True)
    (recipe / 'profile.yml').write_text(yaml.safe_dump({'ds4_profile': UPSTREAM_0731}))
    # the simulator image variant that carries the recipe's vLLM minor (0.33: the recipe declares 0.33.0)
    (recipe / 'sim.yml').write_text(yaml.safe_dump({'ds4_site_overrides': {'image': {'ref': 'ds4-vllm-sim:vllm-0.33'}}}))
    # three inventory sources, later ones win: this scenario's (the site), the site part, the per-recipe part; no -e
    out = ops('switch.yml', args=['-i', str(tmp_path / 'site'), '-i', str(tmp_path / UPSTREAM_0731)])
    assert '-> %s' % UPSTREAM_0731 in out, out[-3000:]
    # served: the new recipe through readiness (switch.yml gates on it), its own model and context length
    _status, body = d.request('/v1/models')
    served = json.loads(body)['data'][0]
    assert (served['id'], served['max_model_len']) == ('deepseek-v4-flash-0731', 1048576), served
    script = head_script()
    assert "'--load-format' 'instanttensor'" in script or '--load-format instanttensor' in script, script[-1500:]
    # API keys still required: no key -> 401 from the proxy on the public port
    try:
        d.request('/v1/models', key=None)
        raise AssertionError('the API answered without a key after the switch')
    except urllib.error.HTTPError as exc:
        assert exc.code == 401, exc.code
    # allowed networks unchanged: the collection's nft table admits the controller's address (and only it) on the API
    # port; Prometheus' port is not the API's: loopback only (monitoring_allowed_networks empty)
    table = d.node('spark1', 'nft', 'list', 'table', 'inet', 'dgxspark_ds4')
    clients = re.search(r'set api_clients_v4 \{.*?elements = \{ ([^}]*) \}', table, re.S)
    assert clients, table
    assert [e.strip() for e in clients.group(1).split(',')] in ([d.ip(1)], ['%s/32' % d.ip(1)]), table
    assert 'tcp dport 8000 ip saddr @api_clients_v4 accept' in table, table
    assert 'tcp dport 9090 reject with tcp reset' in table and 'tcp dport 9090 ip saddr' not in table, table
    # monitoring on: Prometheus on the head's loopback answers and scrapes vLLM
    assert d.node('spark1', 'curl', '-sS', '-o', '/dev/null', '-w', '%{http_code}', '-m', '10',
                  'http://127.0.0.1:9090/-/ready') == '200'
    targets = json.loads(d.node('spark1', 'curl', '-sS', '-m', '10', 'http://127.0.0.1:9090/api/v1/targets'))
    jobs = set(t['labels']['job'] for t in targets['data']['activeTargets'])
    assert 'vllm' in jobs, jobs
