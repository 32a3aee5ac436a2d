# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""image_work_guard.plan: image work beside a live pair only with the memory margin; short of it, refused naming the
numbers, or in a rolling operation the drained pair stopped first; a pair that is down always goes. The meminfo
text is a real kernel's format (Documentation/filesystems/proc.rst: "MemAvailable: %8lu kB")."""


from ansible_collections.dgxspark.ds4.plugins.plugin_utils import image_work_guard as g

GIB_KB = 1024 * 1024


def meminfo(available_gib, free_gib=1.8):
    return ('MemTotal:       %8d kB\nMemFree:        %8d kB\nMemAvailable:   %8d kB\nBuffers:            2048 kB\n'
            % (121 * GIB_KB, int(free_gib * GIB_KB), int(available_gib * GIB_KB)))


def pair(head_state, worker_state, head_gib, worker_gib):
    return [dict(host='spark1', unit='dgxspark-ds4-head.service', active_state=head_state, meminfo=meminfo(head_gib)),
            dict(host='spark2', unit='dgxspark-ds4-worker.service', active_state=worker_state, meminfo=meminfo(worker_gib))]


def test_a_pair_that_is_down_always_goes():
    out = g.plan(pair('inactive', 'failed', 3.0, 2.0), 'the pull of img:1', 16 * g.GIB)
    assert out['action'] == 'go' and out['live'] == [] and 'no vLLM rank of the pair is live' in out['msg']


def test_beside_a_live_pair_with_the_margin_it_goes_and_says_the_numbers():
    out = g.plan(pair('active', 'active', 40.0, 38.5), 'the pull of img:1', 16 * g.GIB)
    assert out['action'] == 'go' and out['short'] == []
    assert 'spark1 40.0 GiB, spark2 38.5 GiB' in out['msg'] and '16.0 GiB' in out['msg']


def test_short_beside_a_live_rank_is_refused_with_the_numbers_and_the_ways_on():
    # a serving GB10: the page cache full, MemFree inside the watermarks, 11.2 GiB available on the head
    out = g.plan(pair('active', 'activating', 11.2, 30.0), 'the pull of img:1', 16 * g.GIB)
    assert out['action'] == 'refuse' and out['short'] == ['spark1']
    for words in ('the pull of img:1', 'spark1:dgxspark-ds4-head.service (active)', 'spark1 11.2 GiB', '16.0 GiB on spark1',
                  'container_image_work_min_available_gib', 'Nothing was pulled, built or saved', 'upgrade.yml'):
        assert words in out['msg'], (words, out['msg'])


def test_short_in_a_rolling_operation_stops_the_pair_first():
    out = g.plan(pair('active', 'active', 11.2, 12.0), 'the stream of img:1 to the workers', 16 * g.GIB, rolling=True)
    assert out['action'] == 'stop_pair' and out['short'] == ['spark1', 'spark2']
    assert 'both ranks stop now (head first)' in out['msg'] and 'MemAvailable spark1 11.2 GiB, spark2 12.0 GiB' in out['msg']


def test_one_live_rank_is_enough_and_an_unreadable_node_counts_as_short():
    nodes = pair('inactive', 'deactivating', 40.0, 40.0)
    nodes[0]['meminfo'] = 'MemTotal: 1 kB\n'
    out = g.plan(nodes, 'the build', 16 * g.GIB)
    assert out['action'] == 'refuse' and out['short'] == ['spark1'] and 'spark1 unreadable' in out['msg']
    assert out['live'] == ['spark2:dgxspark-ds4-worker.service (deactivating)']


def test_the_filter_reads_the_registered_results_of_the_gate_and_refuses_mixed_up_nodes():
    import base64  # pylint: disable=import-outside-toplevel
    import pytest  # pylint: disable=import-outside-toplevel
    from ansible.errors import AnsibleFilterError  # pylint: disable=import-outside-toplevel
    from ansible_collections.dgxspark.ds4.plugins.filter.container import image_work_plan
    # what systemd_service (status only) and slurp register, looped over the pair with delegate_to
    units = [{'item': 'spark1', 'name': 'dgxspark-ds4-head.service', 'status': {'ActiveState': 'active'}},
             {'item': 'spark2', 'name': 'dgxspark-ds4-worker.service', 'status': {'ActiveState': 'active'}}]
    mems = [{'item': h, 'content': base64.b64encode(meminfo(gib).encode()).decode(), 'encoding': 'base64'}
            for h, gib in (('spark1', 11.2), ('spark2', 40.0))]
    out = image_work_plan(units, mems, work='the pull of img:1', min_available_gib=16)
    assert out['action'] == 'refuse' and out['short'] == ['spark1']
    assert image_work_plan(units, mems, work='w', min_available_gib='8.5', rolling=True)['action'] == 'go'
    with pytest.raises(AnsibleFilterError, match='other nodes'):
        image_work_plan(units, list(reversed(mems)), work='w', min_available_gib=16)
