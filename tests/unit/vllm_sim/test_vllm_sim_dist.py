# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two-node rendezvous of the vLLM simulator over real TCP on 127.0.0.1, and its failure modes."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import signal
import socket
import time

from conftest import free_port  # pylint: disable=import-error

EADDRINUSE = ('torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. '
              'port: %d, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use')
RPC_TIMEOUT = 'TimeoutError: RPC call to execute_model timed out.'
ENGINE_DEAD = 'EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.'
RECV_FAILED = 'Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?'


def _dist(master_port, rank, headless):
    args = ['--tensor-parallel-size', '2', '--distributed-executor-backend', 'mp', '--nnodes', '2',
            '--node-rank', str(rank), '--master-addr', '127.0.0.1', '--master-port', str(master_port)]
    return args + (['--headless'] if headless else [])


def _pair(sim_factory, worker_env=None, head_env=None):
    mport = free_port()
    worker = sim_factory(_dist(mport, 1, True), env=worker_env, api=False)
    worker.wait_line('Launching vLLM (v0.27.1) headless multiproc executor, with head node address 127.0.0.1 for '
                     'torch.distributed process group.')
    head = sim_factory(_dist(mport, 0, False), env=head_env).wait_ready()
    return mport, head, worker


def _complete(head, timeout=10.0):
    return head.request('/v1/completions', {'prompt': 'What is 2+2? Answer with one word.', 'max_tokens': 4},
                        timeout=timeout)


def test_rendezvous_head_and_worker(sim_factory):
    mport, head, worker = _pair(sim_factory)
    assert 'DP group leader: node_rank=0, node_rank_within_dp=0, master_addr=127.0.0.1' in head.output
    assert ('world_size=2 rank=0 local_rank=0 distributed_init_method=tcp://127.0.0.1:%d backend=nccl' % mport) in head.output
    worker.wait_line('world_size=2 rank=1 local_rank=0 distributed_init_method=tcp://127.0.0.1:%d backend=nccl' % mport)
    worker.wait_line('Loading weights took')
    assert 'vLLM server version' not in worker.output and 'Application startup complete.' not in worker.output
    code, body, _hdrs = _complete(head)
    assert code == 200 and json.loads(body)['choices'][0]['text'] == 'Four'


def test_master_port_in_use(sim_factory):
    blocker = socket.socket()
    blocker.bind(('127.0.0.1', 0))
    blocker.listen(1)
    port = blocker.getsockname()[1]
    try:
        head = sim_factory(_dist(port, 0, False))
        assert head.wait_exit() == 1
        assert EADDRINUSE % port in head.output
        assert 'Application startup complete.' not in head.output
    finally:
        blocker.close()


def test_head_times_out_without_worker(sim_factory):
    head = sim_factory(_dist(free_port(), 0, False), env={'VLLM_SIM_RENDEZVOUS_TIMEOUT_S': '1'})
    assert head.wait_exit() == 1
    assert 'torch.distributed.DistStoreError: Timed out after 1 seconds waiting for clients. 1/2 clients joined.' in head.output


def test_worker_times_out_without_head(sim_factory):
    port = free_port()
    worker = sim_factory(_dist(port, 1, True), env={'VLLM_SIM_RENDEZVOUS_TIMEOUT_S': '0.5'}, api=False)
    assert worker.wait_exit() == 1
    assert ('torch.distributed.DistNetworkError: The client socket has timed out after 500ms while trying to connect '
            'to (127.0.0.1, %d).' % port) in worker.output


def test_rank1_without_headless_collides_with_head(sim_factory):
    mport, head, _worker = _pair(sim_factory)
    # Same host, same API port as the head: the TCPStore bind on the master port fails first (seed 000 failure #5).
    second = sim_factory(_dist(mport, 1, False), port=head.port)
    assert second.wait_exit() == 1
    assert EADDRINUSE % mport in second.output and 'Address already in use' not in second.output.replace(EADDRINUSE % mport, '')


def test_rank1_without_headless_alone_is_an_error(sim_factory):
    second = sim_factory(_dist(free_port(), 1, False), env={'VLLM_SIM_RENDEZVOUS_TIMEOUT_S': '0.5'})
    assert second.wait_exit() == 1
    assert 'torch.distributed.DistStoreError: Timed out after 1 seconds waiting for clients. 1/2 clients joined.' in second.output


def test_worker_death_fails_next_request_and_head_exits(sim_factory):
    _mport, head, worker = _pair(sim_factory, worker_env={'VLLM_SIM_FAIL': 'worker_die', 'VLLM_SIM_FAIL_AFTER_S': '0.3'},
                                 head_env={'VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS': '0.5', 'VLLM_SIM_WATCHDOG_S': '0.3'})
    assert worker.wait_exit() == 1
    assert 'Worker proc VllmWorker-1 died unexpectedly' in worker.output
    assert head.request('/health')[0] == 200, 'idle head must stay healthy like vLLM'
    assert head.proc.poll() is None
    t0 = time.monotonic()
    code, body, _hdrs = _complete(head)
    assert code == 500 and 'EngineDeadError' in body
    assert time.monotonic() - t0 >= 0.45
    assert head.wait_exit() == 1
    out = head.output
    assert out.index(RPC_TIMEOUT) < out.index(ENGINE_DEAD)


def test_head_death_orphans_worker(sim_factory):
    _mport, head, worker = _pair(sim_factory, worker_env={'VLLM_SIM_ORPHAN_EXIT_S': '0.3'})
    head.proc.send_signal(signal.SIGKILL)
    head.wait_exit()
    assert worker.wait_exit() == 1
    line = worker.wait_line('[c10d] recvValue failed on SocketImpl(')
    assert line.endswith(RECV_FAILED) and 'remote=[127.0.0.1]:' in line


def test_worker_crash_during_load_fails_head_startup(sim_factory):
    mport = free_port()
    worker = sim_factory(_dist(mport, 1, True), env={'VLLM_SIM_FAIL': 'load_crash'}, api=False)
    head = sim_factory(_dist(mport, 0, False))
    assert worker.wait_exit() == 1
    assert head.wait_exit() == 1
    assert 'RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}' in head.output
