# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""converge_state main(): a drifted check the role left as found is refused at record time, nothing is recorded
and the last good record stays aside, so the next run refuses again; a repaired one is recorded."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

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


def test_record_refuses_drift_left_as_found_until_repaired(tmp_path):
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
    extra = dict(_ansible_check_mode=True) if check_mode else {}
    return call(tmp_path, 'probe', {}, role='router', inputs={'router_listen_port': 'h1'}, secret_inputs=secrets, **extra)


def test_secret_inputs_are_hashed_on_the_node_under_its_own_salt_and_a_change_is_named(tmp_path):
    """The probe's result (shown with -v) carries no plain hash of a secret: a secret input is hashed with the node's
    random salt, so a short one (a VRRP password) cannot be guessed back from the output; stable across runs on the
    node, and a changed secret is still named among the inputs that differ."""
    from ansible_collections.dgxspark.ds4.plugins.module_utils import converge_state as cs
    secrets = {'router_vrrp_auth_pass': '"pa55"'}
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
    changed = _probe(tmp_path, {'router_vrrp_auth_pass': '"pa66"'})
    assert not changed['current'] and changed['differs']['inputs'] == ['router_vrrp_auth_pass']


def test_check_mode_writes_no_salt(tmp_path):
    _probe(tmp_path, {'x_api_key': '"k"'}, check_mode=True)
    assert not (tmp_path / 'state' / '.salt').exists()


def test_split_secrets_by_name():
    from ansible_collections.dgxspark.ds4.plugins.module_utils import converge_state as cs
    plain, secret = cs.split_secrets({'ds4_api_keys': ['a'], 'router_vrrp_auth_pass': 'p', 'ds4_effective': {'x': 1},
                                      'model_cache_hf_token': 't', 'vllm_service_api_key': 'k'})
    assert plain == {'ds4_effective': {'x': 1}}
    assert secret == {'ds4_api_keys': '["a"]', 'router_vrrp_auth_pass': '"p"', 'model_cache_hf_token': '"t"',
                      'vllm_service_api_key': '"k"'}
