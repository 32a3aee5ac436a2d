# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the real router_pool main() with mocked exit_json/fail_json against the fake vllm-router of
tests/unit/plugins/module_utils/fake_router.py: changed told truthfully, check mode, diff, the refusals."""


import json

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import router_admin
from ansible_collections.dgxspark.ds4.plugins.modules import router_pool as mod
from module_utils.fake_router import FakeRouter  # pylint: disable=import-error
from .module_harness import ExitJson, FailJson, patch_exit, run_main


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    patch_exit(monkeypatch)
    monkeypatch.setattr(router_admin, 'POLL_S', 0.01)


@pytest.fixture
def fake():
    with FakeRouter(['a', 'b']) as router:
        yield router


def run(args):
    return run_main(mod.main, args)


def test_drain_then_drain_again(fake):
    a, b = fake.worker('a'), fake.worker('b')
    fake.running = {a: 0}
    args = {'router_url': fake.base, 'worker_url': a, 'state': 'drained', 'metrics_url': a,
            'router_metrics_url': fake.base, 'api_key': 'secret', 'drain_timeout': 5}
    kind, res = run(args)
    assert kind is ExitJson, res
    assert res['changed'] is True
    assert res['workers_before'] == [a, b] and res['workers_after'] == [b] == fake.workers
    assert res['in_flight_initial'] == 0 and res['in_flight_waited_s'] is not None and res['waited_s'] is None
    assert [r[2].get('Authorization') for r in fake.requests if r[1] == '/w/a/metrics'][0] == 'Bearer secret'
    kind, res = run(args)
    assert kind is ExitJson and res['changed'] is False
    assert 'was not in rotation' in res['msg']
    assert len(fake.admin_calls('/remove_worker')) == 1


def test_check_mode_and_diff_change_nothing(fake):
    a, b = fake.worker('a'), fake.worker('b')
    kind, res = run({'router_url': fake.base, 'worker_url': a, 'state': 'drained',
                     '_ansible_check_mode': True, '_ansible_diff': True})
    assert kind is ExitJson and res['changed'] is True
    assert fake.workers == [a, b] and not fake.admin_calls('/remove_worker')
    assert res['diff']['before'] == '%s\n%s\n' % (a, b) and res['diff']['after'] == '%s\n' % b
    assert res['diff']['before_header'] == 'vllm-router %s workers' % fake.base
    kind, res = run({'router_url': fake.base, 'worker_url': a, 'state': 'present',
                     '_ansible_check_mode': True, '_ansible_diff': True})
    assert kind is ExitJson and res['changed'] is False and res['diff']['before'] == res['diff']['after']


def test_present_puts_it_back_once(fake):
    a, b = fake.worker('a'), fake.worker('b')
    run({'router_url': fake.base, 'worker_url': a, 'state': 'drained'})
    kind, res = run({'router_url': fake.base, 'worker_url': a + '/', '_ansible_diff': True})
    assert kind is ExitJson and res['changed'] is True
    assert res['workers_after'] == [b, a] and res['in_flight_waited_s'] is None and res['waited_s'] >= 0
    assert res['diff']['after'] == '%s\n%s\n' % (b, a)
    kind, res = run({'router_url': fake.base, 'worker_url': a})
    assert kind is ExitJson and res['changed'] is False
    assert len(fake.admin_calls('/add_worker')) == 1


def test_failures_carry_the_reason(fake):
    a, b = fake.worker('a'), fake.worker('b')
    fake.healthy[b] = False
    kind, res = run({'router_url': fake.base, 'worker_url': a, 'state': 'drained'})
    assert kind is FailJson and res['changed'] is False and 'would leave no healthy worker' in res['msg']
    assert fake.workers == [a, b]
    fake.vllm['a'] = (0, 2)
    kind, res = run({'router_url': fake.base, 'worker_url': a, 'state': 'drained', 'allow_last': True,
                     'metrics_url': a, 'drain_timeout': 0})
    assert kind is FailJson and res['changed'] is True and res['in_flight_final'] == 2
    assert 'stays out of rotation' in res['msg'] and fake.workers == [b]
    fake.up['a'] = False
    kind, res = run({'router_url': fake.base, 'worker_url': a, 'restore_timeout': 0})
    assert kind is FailJson and res['changed'] is False and 'not put back in rotation' in res['msg']
    kind, res = run({'router_url': fake.base, 'worker_url': a, 'drain_timeout': -1})
    assert kind is FailJson and 'drain_timeout = -1' in res['msg']
    kind, res = run({'router_url': fake.base, 'worker_url': a, 'state': 'gone'})
    assert kind is FailJson and 'state' in res['msg']


def test_out_first_then_a_wait_that_ends_on_a_count_standing_still(fake):
    """tasks/drain.yml's steps 1 and 2: wait_in_flight false takes it out and reads nothing; the wait with
    stale_after returns stale (not failed) when the router's count stands above 0."""
    a, b = fake.worker('a'), fake.worker('b')
    fake.running = {a: 1}
    base = {'router_url': fake.base, 'worker_url': a, 'state': 'drained', 'router_metrics_url': fake.base}
    kind, res = run(dict(base, wait_in_flight=False))
    assert kind is ExitJson and res['changed'] is True and fake.workers == [b]
    assert res['msg'] == 'took %s out of rotation' % a and res['in_flight_waited_s'] is None
    assert res['stale'] is False and 'waited_msg' not in res
    kind, res = run(dict(base, drain_timeout=30, stale_after=0))
    assert kind is ExitJson and res['changed'] is False, res
    assert res['stale'] is True and res['stood_at'] == 1 and res['in_flight_initial'] == 1
    assert res['waited_msg'].startswith('waited up to 30 s for its in-flight requests: 1 in flight, the count stood at 1')
    fake.running = {a: 0}
    kind, res = run(dict(base, drain_timeout=30, stale_after=0))
    assert kind is ExitJson and res['stale'] is False
    assert res['waited_msg'].endswith('0 finished in %.1f s' % res['in_flight_waited_s'])
    kind, res = run(dict(base, stale_after=-2))
    assert kind is FailJson and res['msg'] == 'stale_after = -2: must be at least 0'


def test_present_takes_every_pair_and_asks_the_model_list_through_the_router(fake):
    """The deploy's verify (roles/router/tasks/verify.yml): every pair in one module run, then a model list through the
    router with the clients' key; a list that does not answer 200 within restore_timeout fails naming the answer."""
    a, b = fake.worker('a'), fake.worker('b')
    run({'router_url': fake.base, 'worker_url': a, 'state': 'drained'})
    kind, res = run({'router_url': fake.base, 'worker_url': [a, b], 'verify_models': True, 'models_api_key': 'k-1'})
    assert kind is ExitJson and res['changed'] is True, res
    assert res['workers_before'] == [b] and res['workers_after'] == [b, a] == fake.workers
    assert res['models'] == ['deepseek-v4-flash'] and res['models_status'] == 200
    assert '%s is in rotation and healthy' % b in res['msg'] and 'GET /v1/models through the router: 200' in res['msg']
    assert [r[2].get('Authorization') for r in fake.requests if r[1] == '/v1/models'] == ['Bearer k-1']
    # both in rotation: nothing changes, the list is asked again
    kind, res = run({'router_url': fake.base, 'worker_url': [a, b], 'verify_models': True})
    assert kind is ExitJson and res['changed'] is False and len(fake.admin_calls('/add_worker')) == 1
    fake.models_status = 503
    kind, res = run({'router_url': fake.base, 'worker_url': [a, b], 'verify_models': True, 'restore_timeout': 0})
    assert kind is FailJson and res['changed'] is False and res['models_status'] == 503
    assert 'GET /v1/models through vllm-router at %s did not answer 200 within 0 s (last: HTTP 503:' % fake.base in res['msg']
    # a pair put back before a model list that fails is still reported as a change
    run({'router_url': fake.base, 'worker_url': a, 'state': 'drained'})
    kind, res = run({'router_url': fake.base, 'worker_url': [a, b], 'verify_models': True, 'restore_timeout': 0})
    assert kind is FailJson and res['changed'] is True and fake.workers == [b, a], res
    # check mode asks nothing through the router
    asked = len([r for r in fake.requests if r[1] == '/v1/models'])
    kind, res = run({'router_url': fake.base, 'worker_url': [a, b], 'verify_models': True, '_ansible_check_mode': True})
    assert kind is ExitJson and 'models' not in res and len([r for r in fake.requests if r[1] == '/v1/models']) == asked


def test_a_drain_takes_exactly_one_pair(fake):
    a, b = fake.worker('a'), fake.worker('b')
    kind, res = run({'router_url': fake.base, 'worker_url': [a, b], 'state': 'drained'})
    assert kind is FailJson and 'worker_url = [' in res['msg'] and 'state=drained takes exactly one URL' in res['msg']
    assert fake.workers == [a, b] and not fake.admin_calls('/remove_worker')


def _direct(args, check_mode=False):
    """The action's direct run (converge_state's boot, entry pool) in a fresh Python, as the node runs it."""
    import json
    import subprocess
    import sys
    from ansible_collections.dgxspark.ds4.plugins.action import converge_state as action
    from ansible_collections.dgxspark.ds4.plugins.module_utils._node import router_pool_spec
    params = dict((k, v.get('default')) for k, v in router_pool_spec.ARGUMENT_SPEC.items())
    params.update(args)
    proc = subprocess.run([sys.executable, '-I', '-c', action._PROBE_BOOT], input=action.direct_payload(params, 'pool', check_mode),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


TIMINGS = ('waited_s', 'router_wait_s', 'in_flight_waited_s', 'models_waited_s')


def _same(direct, module):
    a, b = (dict((k, v) for k, v in r.items() if k not in TIMINGS) for r in (direct, json.loads(json.dumps(module))))
    return a == b or sorted((k, a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k))


def test_the_direct_run_answers_as_the_module_does(fake):
    """plugins/action/router_pool.py's direct run (the node's Python, no module build): the module's own code
    (router_pool_spec.pool), so the same result for a verify, a drain, check mode and a refusal."""
    a, b = fake.worker('a'), fake.worker('b')
    verify = {'router_url': fake.base, 'worker_url': [a, b], 'verify_models': True, 'models_api_key': 'k-1'}
    kind, module = run(verify)
    direct = _direct(verify)
    assert kind is ExitJson and direct['changed'] is False and direct['models'] == ['deepseek-v4-flash']
    assert _same(direct, module) is True, _same(direct, module)
    assert [r[2].get('Authorization') for r in fake.requests if r[1] == '/v1/models'] == ['Bearer k-1'] * 2
    drain = {'router_url': fake.base, 'worker_url': [a], 'state': 'drained'}
    direct = _direct(drain, check_mode=True)
    assert direct['changed'] is True and fake.workers == [a, b] and not fake.admin_calls('/remove_worker')
    direct = _direct(drain)
    assert direct['changed'] is True and direct['workers_after'] == [b] == fake.workers
    kind, module = run(drain)
    assert kind is ExitJson and module['changed'] is False and _direct(drain)['changed'] is False
    direct = _direct(dict(verify, restore_timeout=-1))
    assert direct == {'failed': True, 'changed': False, 'msg': 'restore_timeout = -1: must be at least 0'}
    fake.models_status = 503
    direct = _direct(dict(verify, restore_timeout=0))
    kind, module = run(dict(verify, restore_timeout=0))
    # the direct run put the drained pair back before the model list failed (a change); the module's found it back
    assert kind is FailJson and direct['failed'] is True and direct.pop('msg') == module.pop('msg')
    assert direct['changed'] is True and module['changed'] is False and direct['models_status'] == 503


class _Task(object):
    action = 'dgxspark.ds4.router_pool'
    async_val = 0
    check_mode = False

    def __init__(self, args, delegate_to=None, diff=False, environment=None):
        self.args, self.delegate_to, self.diff, self.environment = args, delegate_to, diff, environment


class _Templar(object):
    @staticmethod
    def template(value):
        return value


def _action(tmp_path, args, pipelining=True, **task):
    """The action plugin with a connection that runs its commands here through /bin/sh (as a pipelined ssh connection
    runs them on the node), the module run faked (recorded)."""
    import subprocess
    from ansible.plugins.shell.sh import ShellModule
    from ansible_collections.dgxspark.ds4.plugins.action import router_pool as action_mod

    class Conn(object):
        _shell = ShellModule()

        def is_pipelining_enabled(self):
            return pipelining

    plugin = action_mod.ActionModule(_Task(args, **task), Conn(), None, None, _Templar())
    plugin.module_runs = []
    plugin.commands = []
    plugin.payloads = []

    def low_level(cmd, sudoable=True, in_data=None, **kwargs):
        plugin.commands.append(cmd)
        plugin.payloads.append(json.loads(in_data))
        proc = subprocess.run(['/bin/sh', '-c', cmd], input=in_data, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              check=False, cwd=str(tmp_path))
        return {'rc': proc.returncode, 'stdout': proc.stdout.decode(), 'stderr': proc.stderr.decode()}

    plugin._low_level_execute_command = low_level
    plugin._execute_module = lambda module_name, module_args, task_vars: plugin.module_runs.append(
        (module_name, module_args)) or {'changed': False, 'msg': 'module'}
    return plugin


def test_the_action_runs_it_directly_with_the_tasks_environment_and_hides_the_keys(fake, tmp_path):
    """Not delegated, pipelining, the node's Python known: one command to that Python with the task's environment
    (SSL_CERT_FILE: the router's CA for a pair's https /health), no module run; a no_log option's value never shows
    in the result (here the model list through the router holds it); diff mode gets the worker lists."""
    import sys
    a, b = fake.worker('a'), fake.worker('b')
    python = sys.executable
    plugin = _action(tmp_path, {'router_url': fake.base, 'worker_url': [a, b], 'verify_models': True,
                                'models_api_key': 'deepseek-v4-flash'}, diff=True,
                     environment=[{'SSL_CERT_FILE': '/etc/ds4/other.pem', 'LANG': 'C'}, {'SSL_CERT_FILE': '/etc/ds4/ca.pem'}])
    res = plugin.run(task_vars={'ansible_python_interpreter': str(python)})
    assert not plugin.module_runs and len(plugin.commands) == 1, plugin.module_runs
    # the play's, block's and task's environment merged in that order, as a module run gets it
    assert plugin.payloads[0]['environ'] == {'SSL_CERT_FILE': '/etc/ds4/ca.pem', 'LANG': 'C'}
    assert res['changed'] is False and res['models'] == ['VALUE_SPECIFIED_IN_NO_LOG_PARAMETER'], res  # as AnsibleModule
    assert 'deepseek-v4-flash' not in json.dumps(res) and res['models_status'] == 200
    assert res['diff']['before'] == res['diff']['after'] == '%s\n%s\n' % (a, b)
    # a failure's text goes through the same masking
    fake.models_status = 503
    res = _action(tmp_path, {'router_url': fake.base, 'worker_url': [a], 'verify_models': True, 'restore_timeout': 0,
                             'models_api_key': str(fake.server.server_address[1])}).run(
        task_vars={'ansible_python_interpreter': str(python)})
    assert res['failed'] is True and str(fake.server.server_address[1]) not in res['msg'] and '********' in res['msg']


@pytest.mark.parametrize('how', ['delegated', 'no pipelining', 'no python known'])
def test_the_action_runs_the_module_where_it_cannot_run_directly(fake, tmp_path, how):
    """Delegated (the drains, status.yml: task_vars are the inventory host's, not the delegate's), a connection that
    does not pipeline, or the node's Python not known yet: the module, with the task's arguments as given."""
    args = {'router_url': fake.base, 'worker_url': [fake.worker('a')], 'state': 'drained'}
    plugin = _action(tmp_path, args, pipelining=how != 'no pipelining',
                     delegate_to='router1' if how == 'delegated' else None)
    res = plugin.run(task_vars={} if how == 'no python known' else {'ansible_python_interpreter': '/usr/bin/python3'})
    assert plugin.module_runs == [('dgxspark.ds4.router_pool', args)] and not plugin.commands and res['msg'] == 'module'
    assert fake.workers == [fake.worker('a'), fake.worker('b')]


def test_the_direct_boot_sets_the_environment_before_the_code_runs(tmp_path):
    """What _PROBE_BOOT does with the payload's environ: set in its own process before the entry's file runs (an SSL
    context made there reads SSL_CERT_FILE then)."""
    import subprocess
    import sys
    from ansible_collections.dgxspark.ds4.plugins.action import converge_state as action
    payload = {'src': 'import os\nSEEN = os.environ.get("SSL_CERT_FILE")\n\ndef show(args, run, check_mode):\n'
                      '    return {"seen": SEEN, "now": os.environ.get("SSL_CERT_FILE"), "args": args}\n',
               'file': 'show.py', 'modules': [], 'args': {'a': 1}, 'check_mode': False, 'entry': 'show', 'name': 'show',
               'environ': {'SSL_CERT_FILE': '/etc/ds4/ca.pem'}}
    proc = subprocess.run([sys.executable, '-I', '-c', action._PROBE_BOOT], input=json.dumps(payload), check=False,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {'seen': '/etc/ds4/ca.pem', 'now': '/etc/ds4/ca.pem', 'args': {'a': 1}}
    assert json.loads(action.direct_payload({}, 'pool', environ={'X': 'y'}))['environ'] == {'X': 'y'}
