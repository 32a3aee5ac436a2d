# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""host_hardening's swapoff guard: swap in use against MemAvailable minus a margin, and no live vLLM/GPU process."""


from ansible_collections.dgxspark.ds4.plugins.filter.maintenance import FilterModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import swap_guard as sg

GIB_KB = 1024 * 1024


def meminfo(available_gib, swap_total_gib, swap_free_gib):
    return ('MemTotal:       %d kB\nMemFree:         1024 kB\nMemAvailable:   %d kB\nSwapCached:        0 kB\n'
            'SwapTotal:      %d kB\nSwapFree:       %d kB\n'
            % (128 * GIB_KB, available_gib * GIB_KB, swap_total_gib * GIB_KB, swap_free_gib * GIB_KB))


def test_parse_meminfo_in_bytes():
    info = node_probe.parse_meminfo(meminfo(15, 32, 12), in_bytes=True)
    assert info['MemAvailable'] == 15 * 1024 ** 3 and info['SwapTotal'] - info['SwapFree'] == 20 * 1024 ** 3


def test_swap_in_use_above_free_memory_minus_margin_is_refused_with_the_numbers():
    # the node: a vLLM holds ~110 GB, 20 GiB swapped, 15 GiB available
    problems = sg.swapoff_refusals(meminfo(15, 32, 12), 8192, host='spark1')
    assert len(problems) == 1
    text = problems[0]
    for needle in ('spark1', 'swap in use 20.0 GiB', 'SwapTotal 32.0 GiB', 'SwapFree 12.0 GiB', 'MemAvailable 15.0 GiB',
                   'host_hardening_swapoff_margin_mib = 8192 MiB (8.0 GiB)', 'leave -5.0 GiB free', 'playbooks/stop.yml',
                   'host_hardening_apply_kernel: false'):
        assert needle in text, needle


def test_the_margin_decides_at_the_boundary():
    # 20 GiB used, 28 GiB available: safe with an 8 GiB margin, refused with 8 GiB + 1 MiB
    assert sg.swapoff_refusals(meminfo(28, 32, 12), 8192) == []
    assert sg.swapoff_refusals(meminfo(28, 32, 12), 8193)


def test_a_live_vllm_or_gpu_process_refuses_while_swap_is_in_use():
    problems = sg.swapoff_refusals(meminfo(100, 32, 30), 8192, gpu_processes=['4242, python3', ''],
                                   vllm_units=['dgxspark-ds4-head.service'],
                                   vllm_processes=['4242 python3 -m vllm.entrypoints.openai.api_server'])
    assert len(problems) == 1
    assert 'GPU process 4242, python3; unit dgxspark-ds4-head.service; process 4242 python3 -m vllm' in problems[0]
    assert 'swap in use 2.0 GiB' in problems[0]


def test_no_swap_in_use_is_safe_whatever_runs():
    assert sg.swapoff_refusals(meminfo(2, 32, 32), 8192, vllm_units=['dgxspark-ds4-head.service']) == []
    assert sg.swapoff_refusals(meminfo(100, 0, 0), 8192) == []


def test_meminfo_without_the_numbers_is_refused():
    problems = sg.swapoff_refusals('MemTotal: 1 kB\n', 8192)
    assert problems and 'MemAvailable, SwapTotal, SwapFree' in problems[0]


def test_filter_is_the_same_logic():
    refusals = FilterModule().filters()['swapoff_refusals']
    assert refusals(meminfo(15, 32, 12), 8192, host='spark2') == sg.swapoff_refusals(meminfo(15, 32, 12), 8192, host='spark2')
