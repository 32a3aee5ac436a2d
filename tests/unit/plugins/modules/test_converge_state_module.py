# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""converge_state main(): a drifted check the role left as found is refused at record time, nothing is recorded
and the last good record stays aside, so the next run refuses again; a repaired one is recorded."""


import os

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.ds4.plugins.modules import converge_state as mod
from .module_harness import ExitJson, FailJson, patch_exit


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    patch_exit(monkeypatch)


def call(tmp_path, state, checks, found=None, expect=ExitJson, **extra):
    args = dict(role='firewall', state=state, digest='d1', inputs={'v': 'h1'}, checks=checks,
                state_dir=str(tmp_path / 'state'))
    args.update(extra)
    if found is not None:
        args['found'] = found
    with patch_module_args(args):
        with pytest.raises(expect) as exc:
            mod.main()
    return exc.value.args[0]


def direct(tmp_path, state, checks, found=None, expect=ExitJson, **extra):
    """The same through the action's direct run: its bootstrap in a fresh Python, fed what the action sends (the
    action's arguments: no defaults of the module filled), the entry the action picks for the state."""
    import json
    import subprocess
    import sys
    from ansible_collections.dgxspark.ds4.plugins.action import converge_state as action
    args = dict(role='firewall', state=state, digest='d1', inputs={'v': 'h1'}, checks=checks, published={},
                state_dir=str(tmp_path / 'state'))
    args.update(extra)
    if found is not None:
        args['found'] = found
    proc = subprocess.run([sys.executable, '-I', '-c', action._PROBE_BOOT], input=action.direct_payload(
        args, action._ENTRIES[state]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
        check=True, cwd=str(tmp_path))
    result = json.loads(proc.stdout)
    assert bool(result.get('failed')) == (expect is FailJson), result
    return result


@pytest.mark.parametrize('run', [call, direct], ids=['module', 'direct'])
def test_record_refuses_drift_left_as_found_until_repaired(tmp_path, run):
    """The module and the action's direct run (begin and record as the probe: module_utils' one function each)."""
    call = run
    conf = tmp_path / 'nftables.conf'
    conf.write_text(u'rules\n')
    checks = {'files': [str(conf)]}
    first = call(tmp_path, 'probe', checks)
    call(tmp_path, 'record', checks, found=first['seen'])
    conf.write_text(u'flushed\n')
    probe = call(tmp_path, 'probe', checks)
    assert not probe['current']
    call(tmp_path, 'begin', checks)
    # the role "ran and changed nothing"
    failed = call(tmp_path, 'record', checks, found=probe['seen'], expect=FailJson)
    assert 'firewall ran because what it manages differed' in failed['msg'] and str(conf) in failed['msg']
    assert failed['unrepaired'][0]['name'] == str(conf)
    record = failed['record']
    assert not os.path.exists(record) and os.path.exists(record + '.running')
    # the next run: no record, but the kept one still refuses the same drift
    again = call(tmp_path, 'probe', checks)
    assert 'no converge record' in again['reasons'][0]
    call(tmp_path, 'begin', checks)
    call(tmp_path, 'record', checks, found=again['seen'], expect=FailJson)
    # repaired: recorded, the kept record dropped, the next probe current
    conf.write_text(u'rules\n')
    call(tmp_path, 'record', checks, found=again['seen'])
    assert os.path.exists(record) and not os.path.exists(record + '.running')
    assert call(tmp_path, 'probe', checks)['current']


def _probe(tmp_path, secrets, check_mode=False):
    """A probe with secret inputs {name: value}, sent as the action sends them (converge_state.split_secrets)."""
    from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import converge_state as cs
    extra = dict(_ansible_check_mode=True) if check_mode else {}
    return call(tmp_path, 'probe', {}, role='router', inputs={'router_listen_port': 'h1'},
                secret_inputs=cs.split_secrets(secrets)[1], **extra)


def test_secret_inputs_are_hashed_on_the_node_under_its_own_salt_and_a_change_is_named(tmp_path):
    """The probe's result (shown with -v) carries no plain hash of a secret: a secret input is hashed with the node's
    random salt, so a short one (a VRRP password) cannot be guessed back from the output; stable across runs on the
    node, and a changed secret is still named among the inputs that differ."""
    from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import converge_state as cs
    secrets = {'router_vrrp_auth_pass': 'pa55'}
    first = _probe(tmp_path, secrets)
    salt_file = tmp_path / 'state' / '.salt'
    assert salt_file.stat().st_mode & 0o777 == 0o600 and len(salt_file.read_bytes()) == 32
    plain = cs.value_hash('pa55')
    shown = repr(first)
    assert 'pa55' not in shown and plain not in shown
    assert set(first['inputs']) == {'router_listen_port', 'router_vrrp_auth_pass'} and first['digest'] != 'd1'
    assert _probe(tmp_path, secrets)['digest'] == first['digest']       # the same salt: stable
    # another node (another salt): another hash of the same secret
    other = _probe(tmp_path / 'other', secrets)
    assert other['inputs']['router_vrrp_auth_pass'] != first['inputs']['router_vrrp_auth_pass']
    # recorded, then the secret changes: named as the input that differs
    with patch_module_args(dict(role='router', state='record', digest=first['digest'], inputs=first['inputs'], checks={},
                                state_dir=str(tmp_path / 'state'), found=first['seen'])):
        with pytest.raises(ExitJson):
            mod.main()
    assert _probe(tmp_path, secrets)['current']
    changed = _probe(tmp_path, {'router_vrrp_auth_pass': 'pa66'})
    assert not changed['current'] and changed['differs']['inputs'] == ['router_vrrp_auth_pass']


def test_check_mode_writes_no_salt(tmp_path):
    _probe(tmp_path, {'x_api_key': 'k'}, check_mode=True)
    assert not (tmp_path / 'state' / '.salt').exists()


def test_split_secrets_by_name():
    from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import converge_state as cs
    plain, secret = cs.split_secrets({'ds4_api_keys': ['a'], 'router_vrrp_auth_pass': 'p', 'ds4_effective': {'x': 1},
                                      'model_cache_hf_token': 't', 'vllm_service_api_key': 'k'})
    assert plain == {'ds4_effective': {'x': 1}}
    assert dict((name, cs.secret_text(wire)) for name, wire in secret.items()) == {
        'ds4_api_keys': '["a"]', 'router_vrrp_auth_pass': '"p"', 'model_cache_hf_token': '"t"', 'vllm_service_api_key': '"k"'}
    assert all(wire.startswith(cs.SECRET_WIRE_PREFIX) for wire in secret.values())


def test_a_name_that_only_holds_a_secret_word_is_no_secret():
    """A secret by the name's last word: counts and kinds that hold such a word inside are plain inputs (as secrets,
    their values - 64, 400, ed25519 - were masked by Ansible wherever they occurred in the module's results)."""
    from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import converge_state as cs
    plain, secret = cs.split_secrets({'vllm_service_canary_decode_tokens': 64, 'vllm_service_hang_prefill_tokens_per_s': 400,
                                      'peer_access_host_key_type': 'ed25519', 'peer_access_key_comment': 'c',
                                      'monitoring_grafana_admin_password_file': '/etc/p', 'ds4_tls_private_key': 'k',
                                      'monitoring_grafana_admin_password': 'p', 'router_verify_api_key': 'k'})
    assert sorted(plain) == ['monitoring_grafana_admin_password_file', 'peer_access_host_key_type',
                             'peer_access_key_comment', 'vllm_service_canary_decode_tokens',
                             'vllm_service_hang_prefill_tokens_per_s']
    assert sorted(secret) == ['ds4_tls_private_key', 'monitoring_grafana_admin_password', 'router_verify_api_key']


def test_a_secret_value_inside_a_hash_does_not_corrupt_the_record(tmp_path, monkeypatch):
    """The landing CI's flake (1b53b02): Ansible masks a no_log parameter's values wherever they occur in the
    module's results, and the probe's digest and per-input hashes come back through the controller into the record.
    A secret whose value occurs inside those hex hashes (here the digit 6: nearly every hash holds one) got masked
    there and recorded so; every later probe differed from that record and the role ran on every deploy. Exits
    here through Ansible's own masking (AnsibleModule._return_formatted's remove_values)."""
    from ansible.module_utils import basic
    from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import converge_state as cs

    def masked_exit(self, **kwargs):
        raise ExitJson(basic.remove_values(kwargs, self.no_log_values))
    monkeypatch.setattr(basic.AnsibleModule, 'exit_json', masked_exit)
    dummy, secrets = cs.split_secrets({'router_vrrp_auth_pass': 6, 'router_verify_api_key': 'a'})
    inputs = dict(('router_input_%d' % index, cs.value_hash(index)) for index in range(8))
    probe = call(tmp_path, 'probe', {}, role='router', inputs=inputs, secret_inputs=secrets)
    assert '********' not in repr(probe)
    assert any('6' in value for value in probe['inputs'].values())     # what a bare 6 would have masked
    call(tmp_path, 'record', {}, role='router', digest=probe['digest'], inputs=probe['inputs'], found=probe['seen'])
    again = call(tmp_path, 'probe', {}, role='router', inputs=inputs, secret_inputs=secrets)
    assert again['current'], again['reasons']


def test_the_action_runs_begin_and_record_directly_and_shows_the_records_diff_only_in_diff_mode(monkeypatch, tmp_path):
    """Where the probe runs directly (_direct_interpreter), begin and record do too (their module_utils functions);
    the record's diff (before, after) comes back only for a task in diff mode, as the module gives it."""
    from ansible.plugins.action import ActionBase
    from ansible_collections.dgxspark.ds4.plugins.action import converge_state as action
    from .module_harness import bare_action

    calls = []
    plugin = bare_action(action.ActionModule)
    monkeypatch.setattr(ActionBase, 'run', lambda self, tmp=None, task_vars=None: {})
    monkeypatch.setattr(action.ActionModule, '_direct_interpreter', lambda self, task_vars: '/usr/bin/python3')
    monkeypatch.setattr(action.ActionModule, '_probe_directly', lambda self, interp, args, entry='probe': calls.append(
        (entry, args['state'])) or {'changed': False, 'diff': {'before': {}, 'after': {'digest': 'd1'}}})
    monkeypatch.setattr(action.ActionModule, '_execute_module', lambda self, **kw: calls.append(('module',)) or {})
    role_path = str(tmp_path / 'firewall')

    class Task(object):
        diff = False
        check_mode = False
    plugin._task = Task()
    for state, diff in (('begin', False), ('record', False), ('record', True)):
        Task.diff = diff
        monkeypatch.setattr(action.ActionModule, 'validate_argument_spec', lambda self, argument_spec, state=state: (None, dict(
            role='firewall', state=state, inputs={}, checks={}, published={}, probe={'digest': 'd1', 'inputs': {}, 'seen': {}},
            state_dir='/var/lib/dgxspark-ds4/converge')))
        result = plugin.run(task_vars={'role_path': role_path})
        assert ('diff' in result) == diff, (state, diff, result)
    assert calls == [('begin_state', 'begin'), ('record_state', 'record'), ('record_state', 'record')]
