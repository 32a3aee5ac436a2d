# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A derived image deleted under a serving pair costs no restart.

This scenario's pair serves a derived image of the simulator (inventory/hosts.yml: container_image_derive on; no
mxfp4 fix or DeepGEMM to bake in, so the derived image is the simulator's with the collection's labels). A user's
`docker rmi -f` (or `docker system prune -a`) of that image on both nodes while both ranks run it, then `site.yml`:
the image is back under its name with the same ID on both nodes, nothing rebuilt, and both ranks keep running
(StartedAt equal). The image scenario proves the other path, an image really gone and restored from its tarball
(molecule/image/tests/test_image.py::test_deleted_derived_image_restored_with_the_same_id).

Runs before test_security.py (file order): its `-v` run of site.yml then asserts changed=0 on both nodes, i.e. the
state this test leaves behind is converged.
"""


import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

DERIVED_REPOSITORY = 'dgxspark-ds4/vllm:'
EVIDENCE = '/var/lib/dgxspark-ds4/image.json'  # container_image_evidence_path (default)
NODES = (('spark1', 'head'), ('spark2', 'worker'))


def _running_id(name, role):
    """The image ID a rank's container runs (the unit starts it by ID, not by name)."""
    return d.node(name, 'docker', 'inspect', '-f', '{{.Image}}', d.container(role))


def _tagged_id(name, ref):
    """The image ID `ref` names on a node, or '' when the name is gone."""
    return d.node(name, 'sh', '-c', "docker image inspect -f '{{.Id}}' %s 2>/dev/null || true" % ref)


def test_deleted_derived_image_back_with_the_same_id_and_no_restart():
    evidence = json.loads(d.node('spark1', 'cat', EVIDENCE))
    ref, image_id = evidence['ref'], evidence['id']
    # not vacuous: the pair runs the derived image, the same one on both nodes, under its name
    assert evidence['derived'] is True and ref.startswith(DERIVED_REPOSITORY), evidence
    running = {name: _running_id(name, role) for name, role in NODES}
    assert running == {'spark1': image_id, 'spark2': image_id}, (running, evidence)
    for name, _role in NODES:
        assert _tagged_id(name, ref) == image_id, (name, ref)
    before = d.both_started()

    for name, _role in NODES:
        out = d.node(name, 'docker', 'rmi', '-f', ref)
        assert 'Untagged: %s' % ref in out, (name, out)
        assert _tagged_id(name, ref) == '', '%s: %s still names an image after docker rmi -f' % (name, ref)

    rc, out = d.run_playbook('site.yml', timeout=900)
    flat = ' '.join(out.split())
    assert rc == 0, out[-4000:]
    # the head tags the recorded image again (nothing rebuilt); the worker gets it back from the head (same ID)
    assert 'derived image: tag: %s gave nothing; the recorded %s is still in Docker: tagged again, nothing rebuilt, ' \
        'no restart' % (ref, image_id) in flat, out[-4000:]
    for name, _role in NODES:
        assert _tagged_id(name, ref) == image_id, '%s: %s is not back as %s' % (name, ref, image_id)
    assert d.both_started() == before, 'a rank restarted after the derived image was deleted and restored'
    assert {name: _running_id(name, role) for name, role in NODES} == running
