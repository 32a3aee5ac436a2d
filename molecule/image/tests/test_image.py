# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scenario `image`: peer access, transfer, ID gate, derived images, mxfp4 count, evidence; digest pinning (record,
kept when the tag moves, update), DeepGEMM default branch resolved and recorded, mxfp4.py in a venv, pruning; the
vLLM version read from each image (dist-info, or the package's __version__ in the venv image), and the simulator image
(vLLM 0.27.1) refused for a site declaring 0.33.0."""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position

testinfra_hosts = ['spark1', 'spark2']

MXFP4 = '/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/quantization/mxfp4.py'
EVIDENCE = {'unpatched': '/var/lib/dgxspark-ds4/image.json', 'double': '/var/lib/dgxspark-ds4/image-double.json',
            'venv': '/var/lib/dgxspark-ds4/image-venv.json', 'kept': '/var/lib/dgxspark-ds4/image-venv-kept.json',
            'updated': '/var/lib/dgxspark-ds4/image-venv-updated.json'}
VENV_MXFP4 = '/opt/venv/lib/python3.11/site-packages/vllm/model_executor/layers/quantization/mxfp4.py'
RESOLVED = 'fedcba9876543210fedcba9876543210fedcba98'
PINNED = '0123456789abcdef0123456789abcdef01234567'
DEEPGEMM_REPO = 'https://github.com/deepseek-ai/DeepGEMM.git'
VENV_REF = 'ds4-test/vllm:venv'
# the scenario's fabric subnet (make molecule sets it per scenario; 10.77.0 by hand)
NET = os.environ.get('DS4_MOLECULE_NET') or '10.77.0'
HEAD_IP, WORKER_IP = NET + '.11', NET + '.12'


def _evidence(host, name):
    return json.loads(host.file(EVIDENCE[name]).content_string)


def _image_id(host, ref):
    return host.check_output("docker image inspect -f '{{.Id}}' %s" % ref)


def _read_in_image(host, image, path):
    return host.check_output(
        'cid=$(docker create --entrypoint /none %s) && docker cp "$cid:%s" - | tar -xOf -; docker rm -f "$cid" >/dev/null'
        % (image, path))


@pytest.mark.parametrize('name', ['unpatched', 'double'])
def test_same_derived_image_on_both_nodes(host, name):
    ev = _evidence(host, name)
    assert ev['derived'] is True
    assert ev['ref'].startswith('dgxspark-ds4/vllm:') and ev['ref'].endswith(ev['inputs_hash'][:16])
    assert ev['base_ref'] == 'ds4-test/vllm:%s' % name
    assert _image_id(host, ev['ref']) == ev['id']
    labels = json.loads(host.check_output("docker image inspect -f '{{json .Config.Labels}}' %s" % ev['ref']))
    assert labels['org.dgxspark.ds4.derived.inputs-hash'] == ev['inputs_hash']
    assert labels['org.dgxspark.ds4.derived.base-id'] == ev['base_id']


@pytest.mark.parametrize('name', ['unpatched', 'double'])
def test_mxfp4_exactly_two_blocks_in_derived_image(host, name):
    ev = _evidence(host, name)
    text = _read_in_image(host, ev['ref'], MXFP4)
    assert sum(1 for line in text.splitlines() if 'empty_cache()' in line and not line.strip().startswith('#')) == 2
    assert ev['mxfp4']['blocks'] == 2 and ev['mxfp4']['status'] == 'patched'
    assert ev['mxfp4']['status_in_base'] == {'unpatched': 'unpatched', 'double': 'double-patched'}[name]


def test_deepgemm_installed_only_where_missing(host):
    unp, dbl = _evidence(host, 'unpatched'), _evidence(host, 'double')
    assert unp['deepgemm']['in_base'] is False and unp['deepgemm']['installed_by_role'] is True
    assert dbl['deepgemm']['in_base'] is True and dbl['deepgemm']['installed_by_role'] is False
    out = host.check_output("docker run --rm --network none --entrypoint python3 %s -c "
                            "'import deep_gemm; print(deep_gemm.__version__)'" % unp['ref'])
    assert out == unp['deepgemm']['ref']


def test_build_metadata_and_labels_reported(host):
    ev = _evidence(host, 'unpatched')
    assert ev['build_metadata_path'] == '/workspace/build-metadata.yaml'
    assert ev['build_metadata']['vllm_commit'] == '48cebd4ad65d0b8263474dff1eb6ef83cb4fcc23'
    assert ev['build_metadata']['build_args']['vllm_prs'] == '41834'
    assert ev['base_labels']['org.dgxspark.ds4.test-variant'] == 'unpatched'


def test_planted_image_was_replaced_on_worker(host):
    if host.backend.get_hostname() != 'spark2':
        pytest.skip('worker only')
    planted = host.file('/var/lib/ds4-test/impostor-planted').content_string.strip()
    ev = _evidence(host, 'unpatched')
    assert planted != ev['id']
    assert _image_id(host, ev['ref']) == ev['id']


def test_peer_key_restricted_and_host_key_pinned(host):
    if host.backend.get_hostname() == 'spark1':
        key = host.file('/etc/dgxspark-ds4/peer/id_ed25519')
        assert key.mode == 0o600 and key.user == 'root'
        assert host.file('/etc/dgxspark-ds4/peer').mode == 0o700
        known = host.file('/etc/dgxspark-ds4/peer/known_hosts').content_string
        assert WORKER_IP + ' ssh-ed25519 ' in known
    else:
        auth = host.file('/root/.ssh/authorized_keys').content_string
        line = [x for x in auth.splitlines() if 'dgxspark-ds4-peer@spark1' in x]
        assert len(line) == 1
        assert line[0].startswith('from="%s",no-pty,no-agent-forwarding,no-X11-forwarding,no-port-forwarding,'
                                  'no-user-rc ' % HEAD_IP)
        assert host.service('ssh').is_running


def test_head_logs_in_with_pinned_key(host):
    if host.backend.get_hostname() != 'spark1':
        pytest.skip('head only')
    worker = host.get_host('ansible://spark2', ansible_inventory=host.backend.ansible_inventory)
    worker_key = worker.file('/etc/ssh/ssh_host_ed25519_key.pub').content_string.split()[:2]
    known = host.file('/etc/dgxspark-ds4/peer/known_hosts').content_string
    assert '%s %s %s' % ((WORKER_IP,) + tuple(worker_key)) in known
    out = host.check_output('ssh -i /etc/dgxspark-ds4/peer/id_ed25519 -o BatchMode=yes -o StrictHostKeyChecking=yes '
                            '-o UserKnownHostsFile=/etc/dgxspark-ds4/peer/known_hosts root@%s hostname' % WORKER_IP)
    assert out == 'spark2'


def _labels(host, ref):
    return json.loads(host.check_output("docker image inspect -f '{{json .Config.Labels}}' %s" % ref))


def _head_json(host, path):
    if host.backend.get_hostname() != 'spark1':
        pytest.skip('head only')
    return json.loads(host.file(path).content_string)


def test_mxfp4_found_by_the_image_python_in_a_venv(host):
    ev = _evidence(host, 'venv')
    assert ev['mxfp4']['path'] == VENV_MXFP4 and ev['mxfp4']['path_from'] == 'the image python'
    assert ev['mxfp4']['status_in_base'] == 'unpatched' and ev['mxfp4']['blocks'] == 2
    text = _read_in_image(host, ev['ref'], VENV_MXFP4)
    assert sum(1 for line in text.splitlines() if 'empty_cache()' in line and not line.strip().startswith('#')) == 2
    unp = _evidence(host, 'unpatched')
    assert unp['mxfp4']['path'] == MXFP4 and unp['mxfp4']['path_from'] == 'container_image_mxfp4_path'


def test_image_python_found_in_the_image_not_assumed(host):
    """The venv image (b12x layout): python3 on PATH has no vllm, the vllm command's #! names the venv's python3;
    the system images: python3 on PATH (only vLLM's dist-info there). Shared with the worker, in the evidence."""
    assert host.run("docker run --rm --network none --entrypoint python3 %s -c 'import vllm'" % VENV_REF).rc != 0
    for name in ('venv', 'kept', 'updated'):
        python = _evidence(host, name)['python']
        assert python['path'] == '/opt/venv/bin/python3'
        assert python['found'].startswith('interpreter of the vllm command /opt/venv/bin/vllm (vllm at '
                                          '/opt/venv/lib/python3.11/site-packages/vllm)')
    for name in ('unpatched', 'double'):
        python = _evidence(host, name)['python']
        assert python['path'] == 'python3' and python['found'].startswith('python3 on the image PATH')
        assert 'vllm 0.22.0 dist-info' in python['found']


def test_deepgemm_default_branch_resolved_recorded_and_labelled(host):
    ev = _evidence(host, 'venv')
    assert ev['deepgemm']['installed_by_role'] is True
    assert ev['deepgemm']['ref'] == RESOLVED and ev['deepgemm']['ref_source'] == 'resolved'
    labels = _labels(host, ev['ref'])
    assert labels['org.dgxspark.ds4.derived.deepgemm-ref'] == RESOLVED
    assert labels['org.dgxspark.ds4.derived.deepgemm-ref-source'] == 'resolved'
    out = host.check_output("docker run --rm --network none --entrypoint /opt/venv/bin/python3 %s -c "
                            "'import deep_gemm; print(deep_gemm.__version__)'" % ev['ref'])
    assert out == RESOLVED  # installed with {python} -m ... into the venv vLLM imports from, not the system python3
    unp = _evidence(host, 'unpatched')
    assert unp['deepgemm']['ref'] == PINNED and unp['deepgemm']['ref_source'] == 'pinned'
    assert _labels(host, unp['ref'])['org.dgxspark.ds4.derived.deepgemm-ref'] == PINNED
    pins = _head_json(host, '/var/lib/dgxspark-ds4/image-pins.json')
    assert pins['deepgemm'][DEEPGEMM_REPO] == {'commit': RESOLVED, 'history': []}


def test_tag_recorded_and_kept_when_it_moves(host):
    pins = _head_json(host, '/var/lib/dgxspark-ds4/image-pins.json')
    first, kept = _evidence(host, 'venv'), _evidence(host, 'kept')
    moved_to = host.file('/var/lib/ds4-test/venv-tag-moved').content_string.strip()
    assert _image_id(host, VENV_REF) == moved_to
    entry = pins['images'][VENV_REF]
    assert entry['id'] == first['base_id'] == kept['base_id'] != moved_to
    assert entry['source'] == 'load' and entry['digest'] is None and entry['history'] == []
    # the same derived image: the newer tag was not used and nothing was rebuilt
    assert kept['ref'] == first['ref'] and kept['id'] == first['id']
    assert kept['pin']['id'] == first['base_id']
    for ref in ('ds4-test/vllm:unpatched', 'ds4-test/vllm:double'):
        assert pins['images'][ref]['id'] == _image_id(host, ref)


def test_update_moves_the_record_and_keeps_old_and_new(host):
    pins = _head_json(host, '/var/lib/dgxspark-ds4/image-pins-update.json')
    first, updated = _evidence(host, 'venv'), _evidence(host, 'updated')
    moved_to = host.file('/var/lib/ds4-test/venv-tag-moved').content_string.strip()
    entry = pins['images'][VENV_REF]
    assert entry['id'] == updated['base_id'] == moved_to != first['base_id']
    assert entry['history'] == [{'from_id': first['base_id'], 'from_digest': None, 'to_id': moved_to, 'to_digest': None}]
    assert updated['pin']['history'] == entry['history']
    assert updated['ref'] != first['ref'] and updated['deepgemm']['ref'] == RESOLVED
    assert pins['deepgemm'][DEEPGEMM_REPO]['commit'] == RESOLVED


def test_older_derived_images_pruned_kept_and_user_images_untouched(host):
    old_id, user_id = host.file('/var/lib/ds4-test/prune-planted').content_string.split()
    present = host.run("docker image inspect %s" % old_id)
    assert present.rc != 0, 'the older derived image %s was not pruned' % old_id
    assert host.run('docker image inspect %s' % user_id).rc == 0
    assert _image_id(host, 'dgxspark-ds4/vllm:mine') == user_id
    for name in ('unpatched', 'double', 'venv', 'updated'):
        ev = _evidence(host, name)
        assert _image_id(host, ev['ref']) == ev['id']
    if host.backend.get_hostname() == 'spark2':
        planted = host.file('/var/lib/ds4-test/impostor-planted').content_string.strip()
        assert host.run('docker image inspect %s' % planted).rc == 0


@pytest.mark.parametrize('name, version', [('unpatched', '0.22.0'), ('double', '0.22.0'), ('venv', '0.22.0+venv.v1'),
                                           ('kept', '0.22.0+venv.v1'), ('updated', '0.22.0+venv.v2')])
def test_vllm_version_read_from_the_image_and_recorded(host, name, version):
    """dist-info in the unpatched/double images, the package's own __version__ in the venv ones (no dist-info)."""
    assert _evidence(host, name)['vllm_version'] == version


def test_sim_image_vllm_0_27_1_said_for_a_recipe_measured_on_0_33_0_and_a_flag_it_lacks_refused(host):
    """Issue 45: an image whose vLLM is not the one the recipe was measured with (a moving tag) is said once, naming
    both, not refused; a flag that the image's own vLLM parser lacks is refused, naming the flag, before anything is
    derived, transferred or recorded. (The first run is check mode: a real one would record the sim image as the
    scenario's container_image state.)"""
    if host.backend.get_hostname() != 'spark1':
        pytest.skip('one playbook run, from the controller')
    # the image really carries 0.27.1 where a real vLLM image has it
    out = host.check_output("docker run --rm --network none --entrypoint python3 ds4-vllm-sim:test -c "
                            "'from importlib import metadata; import vllm; print(metadata.version(\"vllm\"), vllm.__version__)'")
    assert out == '0.27.1 0.27.1'
    playbook = os.path.join(d.SCENARIO_DIR, 'refuse_vllm_version.yml')
    rc, out = d.run_playbook(playbook, args=['--check'], timeout=600)
    assert rc == 0, out[-3000:]
    flat = ' '.join(out.split())
    said = ('the recipe was measured with vLLM 0.33.0 (ds4_site_overrides.image.vllm_version); the image ds4-vllm-sim:test '
            'carries vLLM 0.27.1 (read from the image)')
    assert flat.count(said) == 1, out[-3000:]
    assert 'TASK [dgxspark.ds4.container_image : Share the effective image ref' in out
    # a flag vLLM 0.33.0 has and 0.27.1's parser lacks: refused naming it (check mode and a real run)
    for args in (['--check'], []):
        rc, out = d.run_playbook(playbook, {'ds4_site_overrides': {
            'image': {'ref': 'ds4-vllm-sim:test', 'vllm_version': '0.33.0'}, 'serve_args': {'max-num-queued-reqs': 64}}},
            args=args, timeout=600)
        assert rc != 0, out[-3000:]
        flat = ' '.join(out.split())
        assert 'serve_args[max-num-queued-reqs] = 64: vLLM 0.27.1 has no flag' in flat, (args, out[-3000:])
        assert 'TASK [dgxspark.ds4.container_image : Refuse an image whose vLLM differs from the declared version' in out
        for name in ('Share the effective image ref', 'Stream the image head -> worker', 'Write the image evidence on every node'):
            assert 'TASK [dgxspark.ds4.container_image : %s' % name not in out, name
    for node in ('spark1', 'spark2'):
        assert d.node(node, 'ls', '/var/lib/dgxspark-ds4/image-sim.json', check=False).endswith('No such file or directory')


def test_deleted_derived_image_restored_with_the_same_id(host):
    """docker rmi -f of the derived image, then the role again: restored from its tarball (docker load) with the same
    image ID, so the unit (which pins the image by ID) does not change and nothing restarts; nothing rebuilt, nothing
    streamed to the worker. With the tarball gone too, the role refuses (a rebuild changes the ID), naming
    container_image_rebuild."""
    if host.backend.get_hostname() != 'spark1':
        pytest.skip('playbook runs from the controller, once')
    ev = _evidence(host, 'double')
    cache = '/var/lib/dgxspark-ds4/image-cache-double'
    tarball = '%s/%s.tar' % (cache, ev['inputs_hash'])
    index = json.loads(host.file(cache + '/index.json').content_string)
    assert index['entries'] == [{'key': ev['inputs_hash'], 'id': ev['id'], 'ref': ev['ref'],
                                 'tarball': ev['inputs_hash'] + '.tar'}]
    assert host.file(tarball).is_file and host.file(cache).mode == 0o700
    worker_id = d.node('spark2', 'docker', 'image', 'inspect', '-f', '{{.Id}}', ev['ref'])
    assert worker_id == ev['id']
    playbook = os.path.join(d.SCENARIO_DIR, 'restore_derived.yml')

    # the tarball moved away and the image deleted: a rebuild would give a new ID -> refused (check mode: no change)
    host.check_output('mv %s %s.aside && docker rmi -f %s' % (tarball, tarball, ev['ref']))
    assert host.run('docker image inspect %s' % ev['id']).rc != 0  # gone, not only untagged
    rc, out = d.run_playbook(playbook, args=['--check'], timeout=600)
    flat = ' '.join(out.split())
    assert rc != 0, out[-3000:]
    assert 'Building it again gives a new image ID' in flat and ev['id'] in flat, out[-3000:]
    assert 'Fix: -e container_image_rebuild=true to rebuild it (once)' in flat

    # the tarball back: the next run restores the same image ID from it
    host.check_output('mv %s.aside %s' % (tarball, tarball))
    rc, out = d.run_playbook(playbook, timeout=600)
    flat = ' '.join(out.split())
    assert rc == 0, out[-3000:]
    assert 'derived image: load: %s gave nothing; restoring the recorded %s from %s' % (ev['ref'], ev['id'], tarball) in flat
    assert _image_id(host, ev['ref']) == ev['id']
    assert d.node('spark2', 'docker', 'image', 'inspect', '-f', '{{.Id}}', ev['ref']) == worker_id
    assert json.loads(host.file(cache + '/index.json').content_string) == index
