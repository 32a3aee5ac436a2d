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


def call(tmp_path, state, checks, found=None, expect=ExitJson):
    args = dict(role='firewall', state=state, digest='d1', inputs={'v': 'h1'}, checks=checks,
                state_dir=str(tmp_path / 'state'))
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
