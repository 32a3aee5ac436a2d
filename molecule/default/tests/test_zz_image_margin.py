# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Image work beside a serving pair (issue 45 item 5; roles/container_image/tasks/work_gate.yml,
plugin_utils/image_work_guard.py): on GB10 a pull, build, docker save or stream beside a serving rank can run the node
out of unified memory and freeze it (seed 002). The nodes' MemAvailable is this machine's, so the tests set
container_image_work_min_available_gib above it (every node short):

1. An image update (-e container_image_update=true: the base image is pulled again) with the pair serving, by
   site.yml (not rolling): refused before the pull, naming the live units, every node's MemAvailable, the setting and
   the ways on; nothing pulled (the pins record unchanged), no rank restarted, the pair still serves.
2. Real image work in a rolling operation: the worker lost the effective image's tag (an operator's `docker rmi`), so
   the deploy streams the head's image to it (docker save | ssh docker load); switch.yml to the recipe it serves
   stops the pair first, head before worker, then streams, then the restart contract starts it (worker first)
   through readiness; the worker has the head's image ID again.
"""


import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')

REF = d.BASE_OVERRIDES['image']['ref']
KEEP = 'ds4-vllm-sim:image-margin-test'
# above any test node's memory: every node is short of it
MARGIN = {'container_image_work_min_available_gib': 100000}


def image_id(host):
    return d.node(host, 'docker', 'image', 'inspect', '--format', '{{.Id}}', REF, check=False)


@pytest.fixture(scope='module')
def worker_without_the_tag():
    """The worker's tag removed as an operator would (the running container keeps the image: a second tag keeps it
    from being deleted); put back at the end whatever happened."""
    head_id = image_id('spark1')
    assert head_id.startswith('sha256:') and image_id('spark2') == head_id
    d.node('spark2', 'docker', 'tag', REF, KEEP)
    d.node('spark2', 'docker', 'rmi', REF)
    assert not image_id('spark2').startswith('sha256:')
    yield head_id
    if not image_id('spark2').startswith('sha256:'):
        d.node('spark2', 'docker', 'tag', KEEP, REF)
    d.node('spark2', 'docker', 'rmi', KEEP)


def test_an_image_update_beside_a_serving_pair_short_of_memory_is_refused_with_the_numbers():
    pins = '/var/lib/dgxspark-ds4/image-pins.json'
    pins0 = d.node('spark1', 'sha1sum', pins)
    started0 = d.both_started()
    rc, out = d.run_playbook('site.yml', MARGIN, {'container_image_update': True})
    flat = ' '.join(out.split())
    assert rc != 0, out[-3000:]
    assert 'container_image: the pull of %s refused beside live vLLM' % REF in flat, out[-3000:]
    for words in ('spark1:%s (active)' % d.unit('head'), 'spark2:%s (active)' % d.unit('worker'), 'MemAvailable spark1 ',
                  'below container_image_work_min_available_gib = 100000.0 GiB on spark1, spark2',
                  'Nothing was pulled, built or saved', 'playbooks/upgrade.yml or switch.yml'):
        assert words in flat, (words, out[-3000:])
    assert 'TASK [dgxspark.ds4.container_image : Pull the base image on the head' not in out
    assert d.node('spark1', 'sha1sum', pins) == pins0, 'the pins record moved: something was obtained'
    assert d.both_started() == started0, 'a rank was restarted by a refused run'
    assert d.request('/v1/models')[0] == 200


def test_a_rolling_switch_stops_the_drained_pair_before_the_image_work_and_starts_it_worker_first(worker_without_the_tag):
    head0, worker0 = d.both_started()
    rc, out = d.run_playbook('switch.yml', MARGIN, {'ds4_profile': 'balanced'})
    flat = ' '.join(out.split())
    assert rc == 0, out[-4000:]
    assert 'so both ranks stop now (head first), before the work, and start after it (worker first)' in flat, out[-4000:]
    stop = out.index('TASK [dgxspark.ds4.container_image : Image work | Stop the drained pair first')
    stream = out.index('TASK [dgxspark.ds4.container_image : Stream the image head -> worker')
    assert stop < stream
    # head first: the head's unit went inactive before the worker's (one kernel: monotonic times compare)
    head_down = int(d.unit_show('spark1', d.unit('head'), 'InactiveEnterTimestampMonotonic')['InactiveEnterTimestampMonotonic'])
    worker_down = int(d.unit_show('spark2', d.unit('worker'), 'InactiveEnterTimestampMonotonic')['InactiveEnterTimestampMonotonic'])
    assert 0 < head_down < worker_down
    assert image_id('spark2') == worker_without_the_tag
    head1, worker1 = d.both_started()
    assert head1 != head0 and worker1 != worker0 and worker1 < head1
    assert d.request('/v1/models')[0] == 200
