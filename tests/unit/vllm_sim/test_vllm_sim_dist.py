# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two-node rendezvous of the vLLM simulator over real TCP on 127.0.0.1, and its failure modes."""


import json
import signal
import socket
import threading
import time
import urllib.request

from conftest import free_port  # pylint: disable=import-error

EADDRINUSE = ('torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. '
              'port: %d, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use')
RPC_TIMEOUT = 'TimeoutError: RPC call to sample_tokens timed out.'
ENGINE_DEAD = ('vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for '
               'the root cause.')
NCCL_ERROR = 'RuntimeError: NCCL error: remote process exited or there was a network error'
SHM_WAIT = 'No available shared memory broadcast block found in 60 seconds.'
DEAD_BODY = {'error': {'message': 'EngineCore encountered an issue. See stack trace (above) for the root cause.',
                       'type': 'InternalServerError', 'param': None, 'code': 500}}
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


def _in_order(output, lines):
    """Each line appears after the previous one in the output."""
    at = -1
    for line in lines:
        found = output.find(line, at + 1)
        assert found > at, 'line %r not found after position %d:\n%s' % (line, at, output[-3000:])
        at = found


def test_worker_death_while_idle_fails_the_next_request_at_once_and_the_head_exits_0(sim_factory):
    """Real vLLM 0.26.0 (real-vllm-on-device notes, Part 1 §3 A): idle, the head stays healthy and logs nothing;
    the next request fails at once with HTTP 500, the head logs the NCCL error and EngineDeadError and exits with
    status 0 half a second later."""
    _mport, head, worker = _pair(sim_factory, worker_env={'VLLM_SIM_FAIL': 'worker_die', 'VLLM_SIM_FAIL_AFTER_S': '0.3'})
    assert worker.wait_exit() == 1
    assert 'Worker proc VllmWorker-1 died unexpectedly' in worker.output
    time.sleep(0.3)
    assert head.request('/health')[0] == 200, 'idle head must stay healthy like vLLM'
    assert head.request('/v1/models')[0] == 200 and head.request('/metrics')[0] == 200
    assert head.proc.poll() is None and 'NCCL error' not in head.output
    t0 = time.monotonic()
    code, body, _hdrs = _complete(head)
    failed_in = time.monotonic() - t0
    assert code == 500 and json.loads(body) == DEAD_BODY
    assert failed_in < 0.4, failed_in
    assert head.request('/health')[0] == 200        # never 503: 200 until the process is gone (recorded)
    assert head.wait_exit() == 0
    assert time.monotonic() - t0 >= 0.45
    _in_order(head.output, ['WorkerProc hit an exception.', NCCL_ERROR, 'EngineCore encountered a fatal error.',
                            "RuntimeError: Worker failed with error 'NCCL error: remote process exited or there was a "
                            "network error', please check the stack trace above for the root cause",
                            'AsyncLLM output_handler failed.', ENGINE_DEAD, 'INFO:     Shutting down',
                            'Finished server process'])
    assert RPC_TIMEOUT not in head.output


def test_worker_killed_during_a_stream_leaves_the_head_green_until_the_rpc_timeout(sim_factory):
    """Part 1 §3 B: /health, /v1/models, /metrics 200 with every counter frozen, the no-shared-memory line every
    60 s (time-scaled here), then after VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS the RPC times out, the open stream gets
    an in-band error event (HTTP 200 already sent), a queued request a 500, and the head exits 0, leaving its rank-0
    worker process behind for a while."""
    _mport, head, worker = _pair(sim_factory, head_env={'VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS': '3',
                                                        'VLLM_SIM_SHM_WAIT_LOG_S': '40', 'VLLM_SIM_TOKENS_PER_S': '50',
                                                        'VLLM_SIM_ORPHAN_WORKER_S': '1'})
    events = []
    thread = threading.Thread(target=lambda: events.extend(_stream(head, 1000)), daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while _gen(head) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    worker.proc.send_signal(signal.SIGKILL)
    t_kill = time.monotonic()
    time.sleep(0.3)
    frozen = _gen(head)
    queued = {}
    other = threading.Thread(target=lambda: queued.update(zip(('code', 'body'), _complete(head, 10)[:2])), daemon=True)
    other.start()
    samples = []
    while time.monotonic() - t_kill < 2.5:
        samples.append((head.request('/health')[0], head.request('/v1/models')[0], head.request('/metrics')[0],
                        _gen(head), _metric(head, 'vllm:num_requests_running'), _metric(head, 'vllm:num_requests_waiting')))
        time.sleep(0.25)
    assert all(s[:3] == (200, 200, 200) for s in samples), samples
    assert all(s[3] == frozen and s[4] == 1.0 and s[5] == 0.0 for s in samples), samples
    assert head.output.count(SHM_WAIT) >= 2          # every 0.8 s (40 s x time scale 0.02)
    thread.join(5)
    other.join(5)
    assert head.wait_exit(5) == 0
    assert 2.8 <= time.monotonic() - t_kill
    assert events[-2:] == [DEAD_BODY, '[DONE]'], events[-3:]
    assert queued == {'code': 500, 'body': json.dumps(DEAD_BODY)}
    _in_order(head.output, [SHM_WAIT, 'EngineCore encountered a fatal error.', RPC_TIMEOUT, ENGINE_DEAD,
                            'INFO:     Shutting down', 'Finished server process',
                            'Parent process exited, terminating worker queues'])
    assert NCCL_ERROR not in head.output


def test_frozen_worker_freezes_everything_and_resumes_on_sigcont(sim_factory):
    """Part 1 §4: SIGSTOP of the worker during a decode: the endpoints stay 200, every counter and kv usage stand
    still, the client gets no token, the no-shared-memory line is logged; after SIGCONT the request simply goes on."""
    _mport, head, worker = _pair(sim_factory, head_env={'VLLM_SIM_SHM_WAIT_LOG_S': '50', 'VLLM_SIM_TOKENS_PER_S': '50'})
    events = []
    thread = threading.Thread(target=lambda: events.extend(_stream(head, 150)), daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while _gen(head) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    worker.proc.send_signal(signal.SIGSTOP)
    try:
        time.sleep(0.1)
        at_stop = _gen(head)
        time.sleep(1.4)
        first = (_gen(head), _metric(head, 'vllm:kv_cache_usage_perc'), _metric(head, 'vllm:num_requests_running'))
        time.sleep(1.2)
        second = (_gen(head), _metric(head, 'vllm:kv_cache_usage_perc'), _metric(head, 'vllm:num_requests_running'))
        assert first == second and first[2] == 1.0, (first, second)
        assert at_stop == first[0]                   # not one token after the stop
        assert head.request('/health')[0] == 200 and head.request('/v1/models')[0] == 200
        head.wait_line(SHM_WAIT, timeout=2)
    finally:
        worker.proc.send_signal(signal.SIGCONT)
    thread.join(10)
    assert events[-1] == '[DONE]' and events[-2]['choices'][0]['finish_reason'] == 'length'
    assert _gen(head) == 150.0 and head.proc.poll() is None
    assert 'EngineDeadError' not in head.output


def _stream(head, max_tokens):
    body = json.dumps({'prompt': 'keep going', 'max_tokens': max_tokens, 'stream': True}).encode()
    req = urllib.request.Request(head.url('/v1/completions'), data=body, headers={'Content-Type': 'application/json'})
    out = []
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 200
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith('data: '):
                payload = line[len('data: '):]
                out.append(payload if payload == '[DONE]' else json.loads(payload))
    return out


def _metric(head, name):
    status, body, _h = head.request('/metrics')
    assert status == 200
    return sum(float(line.rsplit(' ', 1)[1]) for line in body.splitlines() if line.startswith(name + '{'))


def _gen(head):
    return _metric(head, 'vllm:generation_tokens_total')


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
