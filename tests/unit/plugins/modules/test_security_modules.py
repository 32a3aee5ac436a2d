# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nft_table and api_proxy_config main() with a fake nft / nginx: truthful changed, load only on drift,
check mode writes nothing, keys file 0600 and never in the result (API exposure)."""


import json
import os
import stat
import sys

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.ds4.plugins.modules import api_proxy_config as proxy_mod
from ansible_collections.dgxspark.ds4.plugins.modules import nft_table as nft_mod
from .module_harness import ExitJson, FailJson, patch_exit


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    patch_exit(monkeypatch)


# A fake nft that keeps each table's block as loaded and lists it back as nft does (tab-indented, comment
# lines dropped): what the module compares with the rendered table. FAKE_NFT_STICKY: a load changes nothing
# (something else rewrites the table).
FAKE_NFT = r'''
import json, os, re, sys
state = os.environ['FAKE_NFT_STATE']
log = state + '.log'
with open(log, 'a') as f:
    f.write(' '.join(sys.argv[1:]) + '\n')
tables = json.load(open(state)) if os.path.exists(state) else {}
a = sys.argv[1:]
if a[:2] == ['list', 'table']:
    key = ' '.join(a[2:4])
    if key not in tables:
        sys.stderr.write('Error: No such file or directory\n'); sys.exit(1)
    print(tables[key])
elif a[:2] == ['delete', 'table']:
    tables.pop(' '.join(a[2:4]), None)
elif a[:2] == ['-c', '-f']:
    pass
elif a[0] == '-f' and not os.environ.get('FAKE_NFT_STICKY'):
    text = open(a[1]).read()
    m = re.search(r'^table (\S+ \S+) \{\n.*?^\}\n', text, re.M | re.S)
    lines = [ln.replace('    ', '\t') for ln in m.group(0).splitlines() if not ln.strip().startswith('#')]
    tables[m.group(1)] = '\n'.join(lines)
json.dump(tables, open(state, 'w'))
'''


@pytest.fixture
def fake_nft(tmp_path, monkeypatch):
    script = tmp_path / 'nft'
    script.write_text(u'#!%s\n%s' % (sys.executable, FAKE_NFT))
    script.chmod(0o755)
    monkeypatch.setenv('FAKE_NFT_STATE', str(tmp_path / 'state.json'))
    return script


def run_nft(tmp_path, fake_nft, check=False, **kw):
    args = dict(path=str(tmp_path / 'nftables.conf'), api_port=8000, master_port=29501,
                allowed_networks=['10.77.0.20/32'], fabric_addresses=['10.77.0.11', '10.77.0.12'],
                self_address='10.77.0.11', ephemeral_ports='32768-60999', nft_bin=str(fake_nft), _ansible_check_mode=check)
    args.update(kw)
    with patch_module_args(args):
        with pytest.raises(ExitJson) as exc:
            nft_mod.main()
    return exc.value.args[0]


def nft_calls(tmp_path):
    return (tmp_path / 'state.json.log').read_text().splitlines()


def test_nft_loads_once_then_nothing(tmp_path, fake_nft):
    first = run_nft(tmp_path, fake_nft)
    assert first['changed'] and first['loaded'] and first['file_changed']
    assert (tmp_path / 'nftables.conf').read_text().startswith('#!/usr/sbin/nft -f')
    second = run_nft(tmp_path, fake_nft)
    assert not second['changed'] and not second['loaded'] and second['live_before'] == first['digest']
    assert sum(1 for c in nft_calls(tmp_path) if c.startswith('-f ')) == 1


def test_nft_reloads_a_table_removed_by_hand(tmp_path, fake_nft):
    run_nft(tmp_path, fake_nft)
    os.unlink(str(tmp_path / 'state.json'))
    again = run_nft(tmp_path, fake_nft)
    assert again['changed'] and again['loaded'] and not again['file_changed']


def edit_live_table(tmp_path, edit):
    state = tmp_path / 'state.json'
    tables = json.loads(state.read_text())
    tables['inet dgxspark_ds4'] = edit(tables['inet dgxspark_ds4'])
    state.write_text(json.dumps(tables))


def flush_input_chain(text):
    """`nft flush chain inet dgxspark_ds4 input`: the chain and the table's comment stay, its rules go."""
    out, inside = [], False
    for line in text.splitlines():
        if line.strip().startswith('chain input {'):
            inside = True
            out.append(line)
            continue
        if inside and line.strip() == '}':
            inside = False
        if inside and not line.strip().startswith('type filter hook'):
            continue
        out.append(line)
    return '\n'.join(out)


@pytest.mark.parametrize('edit, gone', [
    (flush_input_chain, '-tcp dport 8000 reject with tcp reset'),
    (lambda text: text.replace('\t\ttcp dport 29501 reject with tcp reset\n', ''), '-tcp dport 29501 reject with tcp reset'),
    (lambda text: text.replace('\t\tiif "lo" accept\n', '\t\tiif "lo" accept\n\t\ttcp dport 22 accept\n'),
     '+tcp dport 22 accept'),
])
def test_nft_reloads_a_flushed_chain_or_a_rule_deleted_or_added_by_hand(tmp_path, fake_nft, edit, gone):
    """The digest comment survives `nft flush chain` and `nft delete rule`: the live rules are compared."""
    first = run_nft(tmp_path, fake_nft)
    edit_live_table(tmp_path, edit)
    again = run_nft(tmp_path, fake_nft)
    assert again['live_before'] == first['digest']
    assert again['changed'] and again['loaded'] and not again['file_changed']
    assert gone in again['live_differences']
    after = run_nft(tmp_path, fake_nft)
    assert not after['changed'] and after['live_differences'] == []


def test_nft_fails_when_the_live_table_still_differs_after_the_load(tmp_path, fake_nft, monkeypatch):
    run_nft(tmp_path, fake_nft)
    edit_live_table(tmp_path, flush_input_chain)
    monkeypatch.setenv('FAKE_NFT_STICKY', '1')
    args = dict(path=str(tmp_path / 'nftables.conf'), api_port=8000, master_port=29501,
                allowed_networks=['10.77.0.20/32'], fabric_addresses=['10.77.0.11', '10.77.0.12'],
                self_address='10.77.0.11', ephemeral_ports='32768-60999', nft_bin=str(fake_nft))
    with patch_module_args(args):
        with pytest.raises(FailJson) as exc:
            nft_mod.main()
    res = exc.value.args[0]
    assert 'still differs from the rendered one' in res['msg']
    assert '-tcp dport 29501 reject with tcp reset' in res['live_after']


def test_nft_check_mode_writes_and_loads_nothing(tmp_path, fake_nft):
    res = run_nft(tmp_path, fake_nft, check=True)
    assert res['changed'] and res['loaded']
    assert not (tmp_path / 'nftables.conf').exists()
    assert not [c for c in nft_calls(tmp_path) if c.startswith(('-f', '-c'))]


def test_nft_change_of_networks_reloads(tmp_path, fake_nft):
    run_nft(tmp_path, fake_nft)
    res = run_nft(tmp_path, fake_nft, allowed_networks=[])
    assert res['changed'] and res['file_changed'] and res['loaded']
    assert 'api_clients_v4' not in (tmp_path / 'nftables.conf').read_text()


def test_nft_absent_deletes_only_its_table(tmp_path, fake_nft):
    run_nft(tmp_path, fake_nft)
    state = tmp_path / 'state.json'
    tables = json.loads(state.read_text())
    tables['inet usertable'] = 'mine'
    state.write_text(json.dumps(tables))
    res = run_nft(tmp_path, fake_nft, state='absent')
    assert res['changed']
    assert json.loads(state.read_text()) == {'inet usertable': 'mine'}
    assert not (tmp_path / 'nftables.conf').exists()


def test_nft_bad_input_fails_with_every_error(tmp_path, fake_nft):
    with patch_module_args(dict(path=str(tmp_path / 'x.conf'), api_port=8000, master_port=29501, fabric_addresses=[],
                                allowed_networks=['lan'], nft_bin=str(fake_nft))):
        with pytest.raises(FailJson) as exc:
            nft_mod.main()
    assert len(exc.value.args[0]['errors']) == 2


KEYS = ['ds4UnitClientKeyA-000000000000', 'ds4UnitClientKeyB-111111111111']
UPSTREAM = 'ds4UnitUpstreamKey-22222222222'


def run_proxy(tmp_path, check=False, **kw):
    args = dict(path=str(tmp_path / 'nginx.conf'), keys_path=str(tmp_path / 'keys.conf'), public_port=8000,
                upstream_port=8001, api_keys=KEYS, upstream_api_key=UPSTREAM, validate=False,
                _ansible_check_mode=check)
    args.update(kw)
    with patch_module_args(args):
        with pytest.raises(ExitJson) as exc:
            proxy_mod.main()
    return exc.value.args[0]


def test_proxy_files_modes_and_no_key_in_result(tmp_path):
    res = run_proxy(tmp_path)
    assert res['changed'] and res['conf_changed'] and res['keys_changed']
    keys = tmp_path / 'keys.conf'
    assert stat.S_IMODE(os.stat(str(keys)).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(str(tmp_path / 'nginx.conf')).st_mode) == 0o644
    assert KEYS[0] in keys.read_text() and UPSTREAM in keys.read_text()
    dumped = json.dumps(res)
    for secret in KEYS + [UPSTREAM]:
        assert secret not in dumped
        assert secret not in (tmp_path / 'nginx.conf').read_text()
    again = run_proxy(tmp_path)
    assert not again['changed']
    rotated = run_proxy(tmp_path, api_keys=KEYS[:1])
    assert rotated['changed'] and rotated['keys_changed'] and not rotated['conf_changed']
    assert KEYS[1] not in keys.read_text()


def test_proxy_mode_drift_is_fixed(tmp_path):
    run_proxy(tmp_path)
    os.chmod(str(tmp_path / 'keys.conf'), 0o644)
    res = run_proxy(tmp_path)
    assert res['keys_changed'] and stat.S_IMODE(os.stat(str(tmp_path / 'keys.conf')).st_mode) == 0o600


def test_proxy_check_mode_and_absent(tmp_path):
    assert run_proxy(tmp_path, check=True)['changed']
    assert not (tmp_path / 'keys.conf').exists()
    run_proxy(tmp_path)
    res = run_proxy(tmp_path, state='absent')
    assert res['changed'] and not (tmp_path / 'keys.conf').exists() and not (tmp_path / 'nginx.conf').exists()


def test_proxy_nginx_refusal_is_redacted(tmp_path):
    fake = tmp_path / 'nginx'
    fake.write_text(u'#!/bin/sh\necho "nginx: [emerg] bad line near %s" >&2\nexit 1\n' % KEYS[0])
    fake.chmod(0o755)
    with patch_module_args(dict(path=str(tmp_path / 'nginx.conf'), keys_path=str(tmp_path / 'keys.conf'), public_port=8000,
                                upstream_port=8001, api_keys=KEYS, nginx_bin=str(fake))):
        with pytest.raises(FailJson) as exc:
            proxy_mod.main()
    assert KEYS[0] not in exc.value.args[0]['msg'] and '********' in exc.value.args[0]['msg']
    assert not (tmp_path / 'keys.conf').exists()


def test_proxy_bad_key_fails_without_showing_it(tmp_path):
    with patch_module_args(dict(path=str(tmp_path / 'nginx.conf'), keys_path=str(tmp_path / 'keys.conf'), public_port=8000,
                                upstream_port=8001, api_keys=['short-secret'], validate=False)):
        with pytest.raises(FailJson) as exc:
            proxy_mod.main()
    assert 'short-secret' not in json.dumps(exc.value.args[0])
