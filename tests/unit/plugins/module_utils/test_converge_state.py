# -*- coding: utf-8 -*-
"""The converge shortcut's logic: digests, observations, comparison, the record's life cycle."""


import os

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import converge_state as cs
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe


def _run_factory(outputs):
    calls = []

    def run(argv):
        calls.append(list(argv))
        return outputs.get(argv[0], (0, '', ''))
    return run, calls


def _probe(tmp_path, checks, inputs, run, role='r'):
    digest, per_input = cs.inputs_digest(inputs, 'code1')
    seen = cs.observe(checks, run)
    path = cs.record_path(str(tmp_path / 'state'), role)
    return cs.compare(cs.load_record(path), role, digest, per_input, seen), (digest, per_input, seen, path)


def _record(probe):
    digest, per_input, seen, path = probe
    cs.finish(path, cs.build_record('r', digest, per_input, seen, {'fact': 1}))


def test_digest_is_stable_and_names_the_changed_input():
    d1, h1 = cs.inputs_digest({'a': 1, 'b': {'x': [1, 2]}}, 'code')
    d2, dummy = cs.inputs_digest({'b': {'x': [1, 2]}, 'a': 1}, 'code')
    d3, h3 = cs.inputs_digest({'a': 2, 'b': {'x': [1, 2]}}, 'code')
    d4, dummy = cs.inputs_digest({'a': 1, 'b': {'x': [1, 2]}}, 'code2')
    assert d1 == d2
    assert len({d1, d3, d4}) == 3
    assert [k for k in h1 if h1[k] != h3[k]] == ['a']


def test_first_run_is_not_current_then_a_recorded_run_is(tmp_path):
    conf = tmp_path / 'a.conf'
    conf.write_text('x=1\n')
    checks = {'files': [str(conf)]}
    run, dummy = _run_factory({})
    reasons, probe = _probe(tmp_path, checks, {'v': 1}, run)
    assert reasons and 'no converge record' in reasons[0]
    _record(probe)
    reasons, dummy = _probe(tmp_path, checks, {'v': 1}, run)
    assert reasons == []


def test_file_edited_by_hand_mode_change_and_removal_are_drift(tmp_path):
    conf = tmp_path / 'a.conf'
    conf.write_text('x=1\n')
    checks = {'files': [str(conf)]}
    run, dummy = _run_factory({})
    dummy, probe = _probe(tmp_path, checks, {'v': 1}, run)
    _record(probe)
    conf.write_text('x=2\n')
    reasons, dummy = _probe(tmp_path, checks, {'v': 1}, run)
    assert len(reasons) == 1 and reasons[0].startswith('file %s: recorded sha1:' % conf)
    conf.write_text('x=1\n')
    os.chmod(str(conf), 0o600)
    reasons, dummy = _probe(tmp_path, checks, {'v': 1}, run)
    assert reasons and ':600:' in reasons[0]
    conf.unlink()
    reasons, dummy = _probe(tmp_path, checks, {'v': 1}, run)
    assert reasons and reasons[0].endswith('now absent')


def test_changed_input_is_named(tmp_path):
    run, dummy = _run_factory({})
    dummy, probe = _probe(tmp_path, {}, {'v': 1, 'w': 'a'}, run)
    _record(probe)
    reasons, dummy = _probe(tmp_path, {}, {'v': 1, 'w': 'b'}, run)
    assert reasons == ['inputs changed: w']


def test_unit_disabled_or_stopped_is_drift(tmp_path):
    show = 'Id=a.service\nUnitFileState=enabled\nActiveState=active\n\nId=b.service\nUnitFileState=enabled\nActiveState=active\n'
    run, calls = _run_factory({'systemctl': (0, show, '')})
    checks = {'units': ['a.service', 'b.service']}
    dummy, probe = _probe(tmp_path, checks, {}, run)
    assert probe[2]['units'] == {'a.service': 'enabled/active', 'b.service': 'enabled/active'}
    assert calls[0][:2] == ['systemctl', 'show']
    _record(probe)
    run2, dummy = _run_factory({'systemctl': (0, show.replace('enabled\nActiveState=active\n\nId=b', 'disabled\nActiveState=active\n\nId=b'), '')})
    reasons, dummy = _probe(tmp_path, checks, {}, run2)
    assert reasons == ['unit a.service: recorded enabled/active, now disabled/active']


def test_command_output_change_is_drift(tmp_path):
    checks = {'commands': [['nft', 'list', 'table', 'inet', 't']]}
    run, dummy = _run_factory({'nft': (0, 'table inet t { chain input { } }', '')})
    dummy, probe = _probe(tmp_path, checks, {}, run)
    _record(probe)
    run2, dummy = _run_factory({'nft': (1, '', 'Error: No such file or directory')})
    reasons, dummy = _probe(tmp_path, checks, {}, run2)
    assert len(reasons) == 1 and reasons[0].startswith('command nft list table inet t: recorded rc=0')


def test_tree_sees_size_and_mtime_but_reads_nothing(tmp_path):
    model = tmp_path / 'model'
    model.mkdir()
    shard = model / 'a.safetensors'
    shard.write_bytes(b'0' * 100)
    checks = {'trees': [str(model)]}
    run, dummy = _run_factory({})
    dummy, probe = _probe(tmp_path, checks, {}, run)
    _record(probe)
    assert _probe(tmp_path, checks, {}, run)[0] == []
    shard.write_bytes(b'0' * 99)
    reasons, dummy = _probe(tmp_path, checks, {}, run)
    assert reasons and reasons[0].startswith('tree %s' % model)


def test_a_run_that_fails_half_way_leaves_no_record(tmp_path):
    run, dummy = _run_factory({})
    dummy, probe = _probe(tmp_path, {}, {'v': 1}, run)
    _record(probe)
    path = probe[3]
    assert cs.begin(path) is True
    # the role fails here: no finish()
    reasons, dummy = _probe(tmp_path, {}, {'v': 1}, run)
    assert reasons and 'no converge record' in reasons[0]
    # the next successful run writes it again and reports no change when it is the same
    dummy, probe = _probe(tmp_path, {}, {'v': 1}, run)
    digest, per_input, seen, path = probe
    assert cs.finish(path, cs.build_record('r', digest, per_input, seen, {'fact': 1})) is False
    assert not os.path.exists(cs.running_path(path))
    assert oct(os.stat(path).st_mode & 0o777) == '0o600'


def test_checks_are_validated():
    assert cs.normalise_checks({'file': ['/x']})[1].startswith('unknown check kind')
    assert 'argv lists' in cs.normalise_checks({'commands': ['nft list']})[1]
    assert cs.normalise_checks({'files': ['/b', '/a', '/a']})[0]['files'] == ['/a', '/b']


def test_code_hash_follows_file_bytes(tmp_path):
    (tmp_path / 'r').mkdir()
    (tmp_path / 'r' / 'main.yml').write_text('a')
    h1 = cs.content_hash([str(tmp_path / 'r')])
    (tmp_path / 'r' / 'x.pyc').write_text('ignored')
    assert cs.content_hash([str(tmp_path / 'r')]) == h1
    (tmp_path / 'r' / 'main.yml').write_text('b')
    assert cs.content_hash([str(tmp_path / 'r')]) != h1


def test_the_controllers_code_hash_reads_each_tree_once_per_process_with_the_same_value(tmp_path, monkeypatch):
    """code_hash_for (the plan hashes every role with _converge/ and plugins/): each directory is read once per process,
    and the hash is content_hash's of the three, so that records written before keep matching."""
    from ansible_collections.dgxspark.ds4.plugins.action import converge_state as action
    for name in ('roles/a', 'roles/b', 'roles/_converge', 'plugins'):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / 'main.yml').write_text(name)
    monkeypatch.setattr(action, '_CODE_HASHES', {})
    monkeypatch.setattr(action, '_TREES', {})
    read, real = [], cs.tree_chunks
    monkeypatch.setattr(action.cs, 'tree_chunks', lambda path: read.append(path) or real(path))
    roots = dict((n, str(tmp_path / n)) for n in ('roles/a', 'roles/b', 'roles/_converge', 'plugins'))
    h_a = action.code_hash_for(roots['roles/a'], roots['roles/_converge'])
    h_b = action.code_hash_for(roots['roles/b'], roots['roles/_converge'])
    assert h_a == cs.content_hash([roots['roles/a'], roots['roles/_converge'], roots['plugins']])
    assert h_b == cs.content_hash([roots['roles/b'], roots['roles/_converge'], roots['plugins']]) != h_a
    assert sorted(read) == sorted(roots.values())          # plugins/ and _converge/ once, not once per role


def test_drift_left_as_found_is_refused_repaired_drift_is_recorded(tmp_path):
    """The firewall case: `nft flush chain` changes the listing; a role that ran and loaded nothing must not
    record the flushed table as the baseline; one that reloaded it may."""
    checks = {'commands': [['nft', 'list', 'table', 'inet', 't']]}
    full = (0, 'table inet t { chain input { tcp dport 8000 reject } }', '')
    flushed = (0, 'table inet t { chain input { } }', '')
    run, dummy = _run_factory({'nft': full})
    dummy, probe = _probe(tmp_path, checks, {'v': 1}, run)
    _record(probe)
    path = probe[3]
    run_flushed, dummy = _run_factory({'nft': flushed})
    reasons, (digest, dummy, found, dummy) = _probe(tmp_path, checks, {'v': 1}, run_flushed)
    assert reasons and reasons[0].startswith('command nft list table inet t')
    cs.begin(path)
    reference = cs.load_record(cs.running_path(path))
    left = cs.unrepaired(reference, digest, found, cs.observe(checks, run_flushed))
    assert left == [('commands', 'nft list table inet t', reference['state']['commands']['nft list table inet t'],
                     found['commands']['nft list table inet t'])]
    message = cs.describe_unrepaired('firewall', left, path)
    assert 'command nft list table inet t: recorded rc=0:' in message and cs.running_path(path) in message
    assert cs.unrepaired(reference, digest, found, cs.observe(checks, run)) == []


def test_unrepaired_only_with_the_same_inputs_and_not_for_observed_checks(tmp_path):
    conf = tmp_path / 'a.conf'
    conf.write_text('x=1\n')
    sysfs = tmp_path / 'mtu'
    sysfs.write_text('9000\n')
    checks, error = cs.normalise_checks({'files': [str(conf), str(sysfs)], 'observed': [str(sysfs)]})
    assert error is None and checks['observed'] == [str(sysfs)]
    run, dummy = _run_factory({})
    dummy, probe = _probe(tmp_path, checks, {'v': 1}, run)
    _record(probe)
    reference = cs.load_record(probe[3])
    conf.write_text('x=2\n')
    sysfs.write_text('1500\n')
    dummy, (digest, dummy, found, dummy) = _probe(tmp_path, checks, {'v': 1}, run)
    after = cs.observe(checks, run)
    assert [p[1] for p in cs.unrepaired(reference, digest, found, after, checks['observed'])] == [str(conf)]
    # other inputs: what the role renders now may be what it found (it ran for the inputs, not to repair)
    other_digest = cs.inputs_digest({'v': 2}, 'code1')[0]
    assert cs.unrepaired(reference, other_digest, found, after, checks['observed']) == []
    # no record to compare with (first run), or no probe observation: nothing to refuse
    assert cs.unrepaired(None, digest, found, after) == []
    assert cs.unrepaired(reference, digest, {}, after) == []
    # a check first probed in this run (not in the record) is new, not drift
    conf.write_text('x=1\n')
    assert cs.unrepaired(reference, digest, found, cs.observe(checks, run), checks['observed']) == []


def test_observed_is_validated():
    assert 'checks.observed' in cs.normalise_checks({'observed': 'x'})[1]
    assert 'checks.observed' in cs.normalise_checks({'observed': ['']})[1]
    checks, error = cs.normalise_checks({'commands': [['a', 'b']], 'observed': [['a', 'b']]})
    assert error is None and checks['observed'] == ['a b']


# decide(): whether a deploy role runs (dgxspark.ds4.converge_decide), its facts and its line.
PROBE_CURRENT = {'current': True, 'reasons': [], 'published': {'container_image_ref': 'img:1', 'container_image_id': 'sha256:a'}}
PROBE_DRIFT = {'current': False, 'reasons': ['input container_image_source changed'], 'published': {}}


def test_decide_skips_when_every_node_of_the_pair_is_current_and_publishes_the_record():
    needed, facts, line = cs.decide('container_image', PROBE_CURRENT, [True, True], needed={'firewall': True})
    assert needed == {'firewall': True, 'container_image': False}
    assert facts['__converge_needed'] == needed
    assert facts['__container_image_converge'] is PROBE_CURRENT
    assert facts['container_image_ref'] == 'img:1' and facts['container_image_id'] == 'sha256:a'
    assert line == 'container_image: as recorded on every node, skipped'


@pytest.mark.parametrize('probe, pair, full, roles, why', [
    (PROBE_DRIFT, [False, True], False, [], 'input container_image_source changed'),
    (PROBE_CURRENT, [True, False], False, [], 'the other node of the pair differs'),
    (PROBE_CURRENT, [True, True], True, [], 'ds4_converge_full'),
    (PROBE_CURRENT, [True, True], False, ['nccl_fabric', 'container_image'], 'ds4_converge_roles'),
])
def test_decide_runs_when_a_node_differs_or_asked_and_publishes_nothing_from_the_record(probe, pair, full, roles, why):
    needed, facts, line = cs.decide('container_image', probe, pair, full=full, roles=roles)
    assert needed == {'container_image': True}
    assert 'container_image_ref' not in facts, 'a role that runs sets its facts itself, never from the old record'
    assert line.startswith('container_image: runs (') and why in line, line


def test_decide_does_not_change_the_callers_needed():
    before = {'firewall': False}
    cs.decide('container_image', PROBE_DRIFT, [False], needed=before)
    assert before == {'firewall': False}


def test_differences_name_the_changed_inputs_and_checks_and_nothing_else(tmp_path):
    """What vllm_service reads to skip re-copying its node scripts: only the input names and check names that
    changed, the collection code among the inputs, a path the record lacks among the checks; no record: recorded
    False."""
    (tmp_path / 'script.py').write_text('v1')
    (tmp_path / 'unit').write_text('u1')
    checks = {'files': [str(tmp_path / 'script.py'), str(tmp_path / 'unit')]}
    run, dummy = _run_factory({})
    seen = cs.observe(checks, run)
    digest, per_input = cs.inputs_digest({'flags': {'max-num-seqs': 8}, 'dir': '/x'}, 'code1')
    assert cs.differences(None, digest, per_input, seen) == {'recorded': False, 'inputs': [], 'checks': []}
    record = cs.build_record('r', digest, per_input, seen, {})
    assert cs.differences(record, digest, per_input, seen) == {'recorded': True, 'inputs': [], 'checks': []}
    # a launch flag changed: the input by name, no check
    digest2, per_input2 = cs.inputs_digest({'flags': {'max-num-seqs': 4}, 'dir': '/x'}, 'code1')
    assert cs.differences(record, digest2, per_input2, seen) == {'recorded': True, 'inputs': ['flags'], 'checks': []}
    # the collection's code changed
    digest3, per_input3 = cs.inputs_digest({'flags': {'max-num-seqs': 8}, 'dir': '/x'}, 'code2')
    assert cs.differences(record, digest3, per_input3, seen)['inputs'] == ['(collection code)']
    # a script edited on the node, and a path the record never checked
    (tmp_path / 'script.py').write_text('edited')
    (tmp_path / 'new.py').write_text('n')
    seen2 = cs.observe({'files': checks['files'] + [str(tmp_path / 'new.py')]}, run)
    assert cs.differences(record, digest, per_input, seen2)['checks'] == sorted([str(tmp_path / 'new.py'), str(tmp_path / 'script.py')])
    # another record version is no record
    assert not cs.differences(dict(record, version=cs.RECORD_VERSION + 1), digest, per_input, seen)['recorded']


def test_run_command_is_the_modules_run_for_a_probe_without_a_module():
    rc, out, err = cs.run_command(['sh', '-c', 'echo "$LC_ALL"; echo oops >&2; exit 3'])
    assert (rc, out, err) == (3, 'C\n', 'oops\n')
    with pytest.raises(OSError):
        cs.run_command(['/nonexistent/ds4-no-such-program'])


def test_probe_returns_the_modules_result_and_refuses_bad_checks(tmp_path):
    params = {'role': 'r', 'digest': 'd0', 'inputs': {'a': 'h'}, 'state_dir': str(tmp_path / 'state'),
              'checks': {'files': [str(tmp_path / 'f')]}, 'secret_inputs': {}}
    first = cs.probe(params, cs.run_command)
    assert first['current'] is False and first['differs'] == {'recorded': False, 'inputs': [], 'checks': []}
    assert first['seen']['files'] == {str(tmp_path / 'f'): 'absent'} and first['published'] == {}
    cs.finish(first['record'], cs.build_record('r', 'd0', {'a': 'h'}, first['seen'], {'fact': 1}))
    again = cs.probe(params, cs.run_command)
    assert again['current'] is True and again['reasons'] == [] and again['published'] == {'fact': 1}
    bad = cs.probe(dict(params, checks={'files': 'not a list'}), cs.run_command)
    assert bad == {'failed': True, 'msg': "converge_state r: checks.files must be a list, got 'not a list'"}
    # a secret input is folded under the node's salt; in check mode a missing salt is not written
    secret = dict(params, state_dir=str(tmp_path / 'other'), secret_inputs=dict([cs.split_secrets({'api_key': 'k'})[1].popitem()]))
    checked = cs.probe(secret, cs.run_command, check_mode=True)
    assert 'api_key' in checked['inputs'] and not os.path.exists(str(tmp_path / 'other'))
    cs.probe(secret, cs.run_command)
    assert os.listdir(str(tmp_path / 'other')) == ['.salt']


def test_the_direct_probes_bootstrap_reports_a_check_that_cannot_start(tmp_path, monkeypatch):
    import json
    import subprocess
    import sys
    from ansible_collections.dgxspark.ds4.plugins.action import converge_state as action
    params = {'role': 'r', 'digest': 'd0', 'inputs': {}, 'state_dir': str(tmp_path / 'state'),
              'checks': {'commands': [['/nonexistent/ds4-no-such-program', 'x']]}}
    payload = action.direct_payload(params)
    # the name errors start with: the module the direct run stands in for (and a probe's role)
    assert [json.loads(action.direct_payload(params, entry))['name'] for entry in ('probe', 'plan', 'files', 'checks')] == [
        'converge_state r', 'converge_state plan', 'file_state', 'vllm_ready']
    proc = subprocess.run([sys.executable, '-I', '-c', action._PROBE_BOOT], input=payload, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, check=False, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result['failed'] is True and result['msg'].startswith('converge_state r: [Errno 2] No such file or directory'), result
    # the units through node_probe's parser, sent with the probe (python3 -I: the collection is not importable there)
    fake = tmp_path / 'bin'
    fake.mkdir()
    (fake / 'systemctl').write_text(u'#!/bin/sh\nprintf "Id=a.service\\nUnitFileState=enabled\\nActiveState=active\\n\\n'
                                    u'Id=b.service\\nUnitFileState=\\nActiveState=inactive\\n"\n')
    os.chmod(str(fake / 'systemctl'), 0o755)
    units = dict(params, checks={'units': ['a.service', 'b.service']})
    env = dict(os.environ, PATH='%s:%s' % (fake, os.environ['PATH']))
    ok = json.loads(subprocess.run([sys.executable, '-I', '-c', action._PROBE_BOOT], stdout=subprocess.PIPE, universal_newlines=True,
                                   input=action.direct_payload(units),
                                   check=True, cwd=str(tmp_path), env=env).stdout)
    assert ok['seen']['units'] == {'a.service': 'enabled/active', 'b.service': 'none/inactive'}, ok
    monkeypatch.setenv('PATH', env['PATH'])
    assert ok == cs.probe(units, cs.run_command)
    assert [name for name, _src in json.loads(action.direct_payload(units))['modules']] == [node_probe.__name__]


def test_a_direct_run_carries_the_collection_files_its_entry_imports_each_after_its_own(tmp_path):
    """The files that go with a direct run are read from the entry's source (no list by hand to keep in step): every
    collection module the entry's file imports, directly or through another, each after the ones it imports; a
    module's new import is carried without a change here (a module written for the test)."""
    import importlib.util
    import json
    from ansible_collections.dgxspark.ds4.plugins.action import converge_state as action

    def names(entry):
        return [name.rsplit('.', 1)[1] for name, _src in json.loads(action.direct_payload({}, entry))['modules']]
    assert names('probe') == names('plan') == names('files') == ['node_probe']
    assert names('checks') == ['node_probe', 'vllm_client', 'readiness_http']
    pool = names('pool')
    assert sorted(pool) == ['bench_stats', 'node_probe', 'ops_status', 'router_admin', 'vllm_client']
    # ops_status imports bench_stats and node_probe; router_admin ops_status and vllm_client
    assert max(pool.index('bench_stats'), pool.index('node_probe')) < pool.index('ops_status')
    assert max(pool.index('ops_status'), pool.index('vllm_client')) < pool.index('router_admin')
    # a module that imports two of the collection's, one of them through a third (written here, not in the tree)
    path = tmp_path / 'ds4_test_direct_imports.py'
    path.write_text(u'from %s._readiness import (  # the HTTP checks\n    readiness_http)\n'
                    u'from %s._node.node_probe import run_command\n' % (action._MODULE_UTILS, action._MODULE_UTILS))
    spec = importlib.util.spec_from_file_location('ds4_test_direct_imports', str(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert [m.__name__.rsplit('.', 1)[1] for m in action._collection_imports(module)] == [
        'vllm_client', 'readiness_http', 'node_probe']


def test_plan_reads_the_published_facts_then_probes_every_role_in_one_call(tmp_path):
    """converge_state.plan, the node side of dgxspark.ds4.converge_plan: the published facts of each role's record
    (None without a usable one), then every role's probe as probe gives it; through the direct boot as the plan runs
    it (python3 -I, entry plan)."""
    import json
    import subprocess
    import sys
    from ansible_collections.dgxspark.ds4.plugins.action import converge_state as action
    state = str(tmp_path / 'state')
    conf = tmp_path / 'a.conf'
    conf.write_text(u'x=1\n')
    checks = {'files': [str(conf)]}
    digest, per_input = cs.inputs_digest({'v': 1}, 'code1')
    run, dummy = _run_factory({})
    record = cs.build_record('first', digest, per_input, cs.observe(checks, run), {'first_ref': 'img:1'})
    cs.finish(cs.record_path(state, 'first'), record)
    os.makedirs(state, exist_ok=True)
    with open(cs.record_path(state, 'old'), 'w') as handle:
        json.dump({'version': cs.RECORD_VERSION + 1, 'published': {'x': 1}}, handle)

    def boot(args):
        proc = subprocess.run([sys.executable, '-I', '-c', action._PROBE_BOOT], input=action.direct_payload(args, 'plan'),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=True, cwd=str(tmp_path))
        return json.loads(proc.stdout)

    published = boot({'state_dir': state, 'phase': 'published', 'roles': ['first', 'old', 'none']})
    assert published == {'changed': False, 'published': {'first': {'first_ref': 'img:1'}, 'old': None, 'none': None}}
    # the deploy's look at files (converge_plan look) in the same call: what file_state returns for them
    paths = [str(conf), str(tmp_path / 'nowhere')]
    looked = boot({'state_dir': state, 'phase': 'published', 'roles': ['first'], 'files': paths})
    assert looked['files'] == cs.files({'paths': paths}, None)['files'] and looked['files'][paths[1]] == 'absent'
    assert looked['files'][paths[0]].startswith('sha1:') and looked['published'] == {'first': {'first_ref': 'img:1'}}
    refused = boot({'state_dir': state, 'phase': 'published', 'roles': ['first'], 'files': ['etc/x']})
    assert refused['failed'] is True and 'etc/x' in refused['msg'], refused
    one = {'role': 'first', 'digest': digest, 'inputs': per_input, 'checks': checks}
    changed = {'role': 'first', 'digest': cs.inputs_digest({'v': 2}, 'code1')[0], 'inputs': {'v': 'other'}, 'checks': checks}
    probed = boot({'state_dir': state, 'phase': 'probe', 'roles': [one, dict(changed, role='none')]})
    assert probed['roles']['first'] == cs.probe(dict(one, state_dir=state), cs.run_command)
    assert probed['roles']['first']['current'] is True and probed['roles']['first']['published'] == {'first_ref': 'img:1'}
    assert probed['roles']['none']['current'] is False
    # the published facts the caller expects (its last look at this node's records) with the probes templated with
    # them: run in the same call when the records publish exactly those, else only the published facts come back
    expect = {'first': {'first_ref': 'img:1'}}
    same = boot({'state_dir': state, 'phase': 'published', 'roles': ['first'], 'expect': expect, 'probe': [one]})
    assert same['published'] == expect and same['roles'] == {'first': probed['roles']['first']}, same
    for other in ({'first': {'first_ref': 'img:2'}}, {'first': {}}):
        moved = boot({'state_dir': state, 'phase': 'published', 'roles': ['first'], 'expect': other, 'probe': [one]})
        assert moved == {'changed': False, 'published': expect}, moved
    conf.write_text(u'x=2\n')
    drifted = cs.plan({'state_dir': state, 'phase': 'probe', 'roles': [one]}, run)
    assert drifted['roles']['first']['current'] is False and 'file %s' % conf in drifted['roles']['first']['reasons'][0]
