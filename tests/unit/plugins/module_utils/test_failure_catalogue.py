# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for failure_catalogue: one verbatim line per entry, ordering, negatives."""


import os
import re

import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import failure_catalogue as fc

# (entry id, verbatim line, role, source).  Lines are copied from the vllm-ops note (docs/vllm-ops-notes.md),
# the seeds (docs/sources.md), or the upstream issue named in the entry's 'source'.
VERBATIM = [
    ("unit-exec-missing", "vllm-ds4-head.service: Main process exited, code=exited, status=127/n/a", "head", "journal"),
    ("unit-exec-missing", "bash: /workspace/vllm-head-090.sh: No such file or directory", "head", "journal"),
    ("headless-missing", "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
                         "port: 29501, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use", "worker", "vllm"),
    ("master-port-in-use", "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
                           "port: 29501, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use", "head", "vllm"),
    ("master-port-in-use", "RuntimeError: The server socket has failed to listen on any local network address. useIpv6: 0, code: -98, "
                           "name: EADDRINUSE, message: address already in use", None, None),
    ("zmq-port-collision", "zmq.error.ZMQError: Address already in use (addr='tcp://10.0.0.58:40043')", None, None),
    ("gloo-loopback", "Warning: Unable to resolve hostname to a (local) address. Using the loopback address as fallback. Manually set "
                      "the network interface to bind to with GLOO_SOCKET_IFNAME. (function operator())", "worker", "vllm"),
    ("gloo-loopback", "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
     None, None),
    ("gloo-loopback", "Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:152] timed out "
                      "connecting: SO_ERROR: Connection refused, remote=[127.0.0.1]:45231 (rank=1, size=2, local=[127.0.0.1])",
     None, None),
    ("rdma-memlock", "spark2:212:389 [0] misc/ibvwrap.cc:196 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
     "worker", "vllm"),
    ("rdma-memlock", "Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory", None, None),
    ("rdma-memlock", "spark1:88:301 [0] NCCL WARN ibv_create_qp failed", None, None),
    ("nccl-system-error", "NCCL error: unhandled system error", None, None),
    ("nccl-system-error", "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)", None, None),
    ("nccl-socket-fallback", "spark1:88:88 [0] NCCL INFO NET/IB : No device found.", None, None),
    ("nccl-socket-fallback", "spark1:88:88 [0] NCCL INFO Using network Socket", None, None),
    ("nccl-socket-fallback", "spark1:88:301 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0", None, None),
    ("nnodes-missing", "ValueError: World size (2) is larger than the number of available GPUs (1) in this node. If this is "
                       "intentional and you are using:", None, None),
    ("cpu-only-torch", "AssertionError: Torch not compiled with CUDA enabled", None, None),
    ("cpu-only-torch", "ImportError: libtorch_cuda.so: cannot open shared object file: No such file or directory", None, None),
    ("cpu-only-torch", "    torch:     2.10.0+cpu", None, None),
    ("cpu-only-torch", "Successfully installed torch-2.10.0+cpu", None, None),
    ("cpu-only-torch", "ImportError: /opt/conda/lib/python3.10/site-packages/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
     None, None),
    ("vllm-c-extension-abi", "ImportError: /home/pc/data/vllm/vllm/vllm/_C.abi3.so: undefined symbol: "
                             "_ZN5torch3jit17parseSchemaOrNameERKSsb", None, None),
    ("cutlass-dsl-mismatch", "AttributeError: module 'cutlass.cute.nvgpu' has no attribute 'OperandMajorMode'", None, None),
    ("deepgemm-missing", "ModuleNotFoundError: No module named 'deep_gemm'", None, None),
    ("deepgemm-missing", "(Worker_TP1 pid=8761) ERROR 12-23 19:34:21 [multiproc_executor.py:824] RuntimeError: DeepGEMM backend is "
                         "not available or outdated. Please install or update the `deep_gemm` to a newer version to enable FP8 kernels.",
     None, None),
    ("deepgemm-missing", "RuntimeError: Sparse Attention Indexer CUDA op requires DeepGEMM to be installed.", None, None),
    ("deepgemm-unsupported-arch", "RuntimeError: Assertion error (deepgemm-src/csrc/apis/hyperconnection.hpp:56): Unsupported architecture",
     None, None),
    ("deepgemm-unsupported-arch", "Check failed: num_tokens > 64 (5 vs 64)", None, None),
    ("mxfp4-double-patched", "UnboundLocalError: local variable 'w13' referenced before assignment", None, None),
    ("mxfp4-double-patched", "UnboundLocalError: cannot access local variable 'w13' where it is not associated with a value", None, None),
    ("json-flag-rejected", "vllm serve: error: argument --compilation-config/-cc: Value {cudagraph_mode:FULL_AND_PIECEWISE} "
                           "cannot be converted to <class 'vllm.config.compilation.CompilationConfig'>.", None, None),
    ("dev-shm-too-small", "RuntimeError: Insufficient space in /dev/shm for <allocation>: 240 MiB required, 63 MiB free. "
                          "Increase /dev/shm (e.g. --shm-size or --ipc=host).", None, None),
    ("shm-ring-buffer", "AttributeError: 'ShmRingBuffer' object has no attribute 'shared_memory'", None, None),
    ("shm-ring-buffer", "FileNotFoundError: [Errno 2] No such file or directory: '/psm_dee74a05'", None, None),
    ("shm-ring-buffer", "RuntimeError: Rank 0 is a local reader but could not attach to shared memory ring buffer 'psm_dee74a05'. "
                        "The segment may have been unlinked, the handle may be stale, or the processes may not share a /dev/shm "
                        "namespace.", None, None),
    ("free-memory-below-utilization", "ValueError: Free memory on device cuda:0 (4.75/119.67 GiB) on startup is less than desired GPU "
                                      "memory utilization (0.9, 107.7 GiB). Decrease GPU memory utilization or reduce GPU memory "
                                      "used by other processes.", "head", "vllm"),
    ("free-memory-below-utilization", "Free memory on device cuda:0 (4.75/119.67 GiB) is less than desired GPU memory utilization (0.9).",
     None, None),
    ("free-memory-below-utilization", "ValueError: Free memory on device cuda:0 (60.1/119.67 GiB) on startup is less than the engine's "
                                      "budget after excluding external process's weights (0.85, 101.7 GiB).", None, None),
    ("nv-err-no-memory", "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from "
                         "_memdescAllocInternal", "worker", "kernel"),
    # kernel signatures of the boot forensics: public lines verbatim (tests/fixtures/kernel/*.sources cite them)
    ("gsp-timeout", "NVRM: GPU6 _kgspLogRpcTimeout: ********************************* GSP Timeout **********************************",
     "head", "kernel"),  # NVIDIA/open-gpu-kernel-modules#1230
    ("gsp-timeout", "NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 812751949 heartbeat 1899482 "
                    "heartbeatWithOffsetMs 812745879 diff 6070 timeout 5200", None, "kernel"),  # open-gpu-kernel-modules#1230
    ("gpu-reset-xid", "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.", None, "kernel"),  # open-gpu-kernel-modules#1151
    ("gpu-reset-xid", "NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.", None, "kernel"),  # open-gpu-kernel-modules#1151
    ("gpu-reset-xid", "NVRM: GPU at 0000:01:00.0 has fallen off the bus.", None, "kernel"),  # Bumblebee-Project/Bumblebee#554
    ("nvrm-xid", "NVRM: Xid (PCI:0000:43:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception: ESR 0x52e7b0=0x101000e "
                 "0x52e7b4=0x4 0x52e7a8=0xc81eb60 0x52e7ac=0x1174", None, "kernel"),  # vllm-project/vllm#5901
    ("nvrm-xid", "NVRM: Xid (PCI:0000:08:00): 31, Ch 0000003b, intr 10000000. MMU Fault: ENGINE GRAPHICS HUBCLIENT_SCC faulted "
                 "@ 0x0_04687000. Fault is of type FAULT_PDE ACCESS_TYPE_READ", None, "kernel"),  # pastebin.com/fTNHmgzB
    ("nvrm-xid", "NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149", None,
     "kernel"),  # NVIDIA/open-gpu-kernel-modules#1150
    ("oom-killer", "Out of memory: Killed process 25315 (python3) total-vm:53312244kB, anon-rss:31451456kB, file-rss:74816kB, "
                   "shmem-rss:12296kB, UID:0 pgtables:69068kB oom_score_adj:0", "worker", "kernel"),  # pcyin/tranX#41
    ("oom-killer", "VLLM::Worker invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, "
                   "oom_score_adj=0", None, "kernel"),
    ("kernel-hang", "INFO: task kworker/u40:2:1234 blocked for more than 122 seconds.", None, "kernel"),
    ("kernel-hang", "watchdog: BUG: soft lockup - CPU#3 stuck for 23s! [VLLM::Worker:2981]", None, "kernel"),
    ("kernel-hang", "Kernel panic - not syncing: Out of memory and no killable processes...", None, "kernel"),
    ("mlx5-error", "mlx5_core 0000:01:00.0: poll_health:800:(pid 0): device's health compromised - reached miss count", None,
     "kernel"),
    ("mlx5-error", "mlx5_core 0000:01:00.1: cmd_work_handler:1006:(pid 812): cmd[0]: CREATE_MKEY(0x200) No done completion "
                   "(timeout)", None, "kernel"),
    # AER as DGX OS kernels print it ("Uncorrectable"/"Correctable") and as older kernels do ("Uncorrected"/"Corrected")
    ("pcie-aer", "pcieport 0000:80:1b.4: AER: Uncorrectable (Non-Fatal) error message received from 0000:80:1b.4", None,
     "kernel"),  # minisforum-docs/MS-02-Ultra#10
    ("pcie-aer", "pcieport 0000:80:1b.4: PCIe Bus Error: severity=Uncorrectable (Non-Fatal), type=Transaction Layer, (Receiver ID)",
     None, "kernel"),  # minisforum-docs/MS-02-Ultra#10
    ("pcie-aer", "pcieport 0000:00:03.0: AER: Multiple Uncorrected (Fatal) error received: 0000:00:03.0", None,
     "kernel"),  # rwth-i6/returnn#1500
    ("pcie-aer", "pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)",
     None, "kernel"),  # rwth-i6/returnn#1500
    ("pcie-aer-correctable", "pcieport 0000:00:03.1: PCIe Bus Error: severity=Correctable, type=Data Link Layer, (Transmitter ID)",
     None, "kernel"),  # pop-os/pop#3363
    ("pcie-aer-correctable", "pcieport 0000:00:03.1: AER: Correctable error message received from 0000:00:00.0", None,
     "kernel"),  # pop-os/pop#3363
    ("pcie-aer-correctable", "pcieport 0000:00:1c.5: PCIe Bus Error: severity=Corrected, type=Physical Layer, id=00e5(Receiver ID)",
     None, "kernel"),  # endlessm/linux#625
    ("rendezvous-timeout", "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/4 clients joined.",
     None, None),
    ("head-died", "[W1122 07:01:02.123456 ProcessGroupNCCL.cpp:1771] [c10d] recvValue failed on SocketImpl(fd=42, "
                  "addr=[spark2]:51234, remote=[192.168.100.10]:29501): Failed to recv, got 0 bytes. Connection was likely closed. "
                  "Did the remote server shutdown or crash?", "worker", "vllm"),
    ("head-died", "[PG ID 0 PG GUID 0 Rank 1] Failed to check the \"should dump\" flag on TCPStore, (maybe TCPStore server has shut "
                  "down too early), with error: Failed to recv, got 0 bytes.", "worker", None),
    ("remote-rank-rpc-timeout", "TimeoutError: RPC call to execute_model timed out.", "head", None),
    # real vLLM 0.26.0 on the GPU (real-vllm-on-device notes, Part 1 §3)
    ("remote-rank-rpc-timeout", "(EngineCore_DP0 pid=1234) TimeoutError: RPC call to sample_tokens timed out.", "head", None),
    ("nccl-remote-exited", "(Worker_TP0 pid=1301) RuntimeError: NCCL error: remote process exited or there was a network error",
     "head", None),
    ("nccl-remote-exited", "RuntimeError: Worker failed with error 'NCCL error: remote process exited or there was a network "
                           "error', please check the stack trace above for the root cause", "head", None),
    ("engine-start-timeout", "TimeoutError: Timed out waiting for engine core processes to start. This is often caused by slow weight "
                             "loading for large models. Waited 600s (configured by VLLM_ENGINE_READY_TIMEOUT_S).", None, None),
    ("shm-broadcast-wait", "INFO 11-22 07:01:02 [shm_broadcast.py:466] No available shared memory broadcast block found in 60 seconds. "
                           "This typically happens when some processes are hanging or doing some time-consuming work (e.g. "
                           "compilation, weight/kv cache quantization).", None, None),
    ("worker-proc-died", "ERROR 11-22 07:01:02 [multiproc_executor.py:150] Worker proc VllmWorker-1 died unexpectedly (exit code: -9), "
                         "shutting down executor.", None, None),
    ("engine-dead", "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root "
                    "cause.", None, None),
    ("engine-core-init-failed", "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
     None, None),
]

NORMAL_STARTUP = """\
(APIServer pid=1) INFO 11-22 07:00:01 [api_utils.py:347] vLLM server version 0.27.1, serving model /models/DeepSeek-V4-Flash
(APIServer pid=1) INFO 11-22 07:00:01 [utils.py:233] non-default args: {'model_tag': '/models/DeepSeek-V4-Flash', 'port': 8000}
(EngineCore_DP0 pid=90) INFO 11-22 07:00:10 [multiproc_executor.py:120] DP group leader: node_rank=0, node_rank_within_dp=0, \
master_addr=192.168.100.10, mq_connect_ip=192.168.100.10 (local), world_size=2, local_world_size=1
(Worker pid=120) INFO 11-22 07:00:12 [parallel_state.py:1200] world_size=2 rank=0 local_rank=0 \
distributed_init_method=tcp://192.168.100.10:29501 backend=nccl
(Worker pid=120) INFO 11-22 07:00:13 [pynccl.py:111] vLLM is using nccl==2.27.7
spark1:120:120 [0] NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.10<0>
spark1:120:120 [0] NCCL INFO Using network IB
spark1:120:301 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0
(Worker pid=120) INFO 11-22 07:00:14 [gpu_model_runner.py:2932] Starting to load model /models/DeepSeek-V4-Flash...
Loading safetensors checkpoint shards:  50% Completed | 23/46 [01:20<01:20,  3.5s/it]
(Worker pid=120) INFO 11-22 07:02:58 [default_loader.py:314] Loading weights took 164.00 seconds
(Worker pid=120) INFO 11-22 07:03:30 [gpu_worker.py:300] Available KV cache memory: 20.51 GiB
(EngineCore_DP0 pid=90) INFO 11-22 07:03:31 [kv_cache_utils.py:1100] GPU KV cache size: 612,341 tokens
(EngineCore_DP0 pid=90) INFO 11-22 07:03:31 [kv_cache_utils.py:1104] Maximum concurrency for 200,000 tokens per request: 3.06x
(Worker pid=120) INFO 11-22 07:06:31 [gpu_model_runner.py:3400] Graph capturing finished in 180 secs, took 0.10 GiB
(EngineCore_DP0 pid=90) INFO 11-22 07:06:32 [core.py:210] init engine (profile, create kv cache, warmup model) took 200.12 s
(APIServer pid=1) INFO 11-22 07:06:40 [launcher.py:40] Starting vLLM server on http://0.0.0.0:8000
(APIServer pid=1) INFO:     Started server process [1]
(APIServer pid=1) INFO:     Waiting for application startup.
(APIServer pid=1) INFO:     Application startup complete.
(APIServer pid=1) INFO 11-22 07:07:40 [loggers.py:300] Avg prompt throughput: 12.0 tokens/s, Avg generation throughput: 44.5 \
tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.1%, Prefix cache hit rate: 50.0%
vllm-ds4-head.service: Main process exited, code=exited, status=0/SUCCESS
"""


def test_every_entry_has_a_verbatim_line_under_test():
    tested = set(v[0] for v in VERBATIM)
    with_patterns = set(e["id"] for e in fc.CATALOGUE if e["patterns"])
    assert with_patterns == tested


def test_entries_are_complete():
    ids = [e["id"] for e in fc.CATALOGUE]
    assert len(ids) == len(set(ids))
    for ent in fc.CATALOGUE:
        for key in ("cause", "fix", "source"):
            assert ent[key].strip(), (ent["id"], key)
        assert ent["severity"] in ("error", "warning", "info")
        assert set(ent["where"]) <= set(["vllm", "journal", "kernel", "forensics"])
        assert set(ent["roles"]) <= set(["head", "worker"])
        for pat in ent["patterns"]:
            re.compile(pat)


@pytest.mark.parametrize("entry_id,line,role,source", VERBATIM, ids=["%s-%d" % (v[0], i) for i, v in enumerate(VERBATIM)])
def test_verbatim_line_matches_its_entry_first(entry_id, line, role, source):
    findings = fc.match([line], node=role, source=source)
    assert findings, line
    assert findings[0]["id"] == entry_id
    assert findings[0]["lines"] == [{"lineno": 1, "text": line}]


NORMAL_WORKER = """\
INFO 11-22 07:00:00 [serve.py:120] Launching vLLM (v0.27.1) headless multiproc executor, with head node address \
192.168.100.10 for torch.distributed process group.
(Worker pid=77) INFO 11-22 07:00:12 [parallel_state.py:1200] world_size=2 rank=1 local_rank=0 \
distributed_init_method=tcp://192.168.100.10:29501 backend=nccl
spark2:77:77 [0] NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.11<0>
spark2:77:77 [0] NCCL INFO Using network IB
(Worker pid=77) INFO 11-22 07:02:58 [default_loader.py:314] Loading weights took 160.10 seconds
"""


def test_normal_startup_matches_nothing():
    assert fc.match(NORMAL_STARTUP.splitlines(), node="head") == []
    assert fc.match(NORMAL_STARTUP) == []
    assert fc.match(NORMAL_WORKER, node="worker") == []
    assert fc.match(NORMAL_WORKER) == []


def test_unrelated_text_matches_nothing():
    lines = [
        "INFO: 192.168.1.19:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
        "The model discusses EADDRINUSE handling in Node.js",   # EADDRINUSE only counts on a worker
        "NCCL INFO Using network IB",
        "free memory 30 GiB",
    ]
    assert fc.match(lines, node="head") == []


def test_eaddrinuse_depends_on_node_role():
    line = VERBATIM[2][1]
    assert [f["id"] for f in fc.match([line], role="head")] == ["master-port-in-use"]
    assert [f["id"] for f in fc.match([line], role="worker")] == ["headless-missing"]
    assert [f["id"] for f in fc.match([line])] == ["master-port-in-use"]
    # node given as rank strings
    assert fc.match([line], node="1")[0]["id"] == "headless-missing"


def test_api_server_on_worker_means_headless_missing():
    line = "(APIServer pid=1) INFO 11-22 07:06:40 [launcher.py:40] Starting vLLM server on http://0.0.0.0:8000"
    assert fc.match([line], role="worker")[0]["id"] == "headless-missing"
    assert fc.match([line], role="head") == []


def test_wrapper_ranks_below_specific_root_cause_above_it():
    lines = [
        "INFO loading",
        "ValueError: Free memory on device cuda:0 (30.1/119.67 GiB) on startup is less than desired GPU memory utilization "
        "(0.9, 107.7 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
        "ERROR Worker proc VllmWorker-0 died unexpectedly (exit code: 1), shutting down executor.",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ]
    ids = [f["id"] for f in fc.match(lines, node="spark1")]
    assert ids == ["free-memory-below-utilization", "worker-proc-died", "engine-core-init-failed"]


def test_specific_rank_wins_even_when_logged_after_wrapper():
    lines = [
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
        "TimeoutError: RPC call to execute_model timed out.",
    ]
    assert [f["id"] for f in fc.match(lines)] == ["remote-rank-rpc-timeout", "engine-dead"]


def test_real_engine_death_names_the_dead_rank_before_the_wrapper():
    """The head's log after its worker rank was killed (real vLLM 0.26.0, real-vllm-on-device notes Part 1 §3 A)."""
    lines = [
        "(Worker_TP0 pid=1301) ERROR 11-25 20:12:01 [multiproc_executor.py:862] WorkerProc hit an exception.",
        "(Worker_TP0 pid=1301) RuntimeError: NCCL error: remote process exited or there was a network error",
        "(EngineCore_DP0 pid=1234) ERROR 11-25 20:12:01 [core.py:1046] EngineCore encountered a fatal error.",
        "(EngineCore_DP0 pid=1234) RuntimeError: Worker failed with error 'NCCL error: remote process exited or there was a "
        "network error', please check the stack trace above for the root cause",
        "(APIServer pid=1100) ERROR 11-25 20:12:01 [async_llm.py:560] AsyncLLM output_handler failed.",
        "(APIServer pid=1100) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace "
        "(above) for the root cause.",
        "(APIServer pid=1100) INFO:     Shutting down",
    ]
    found = fc.match(lines, node="spark1", role="head")
    assert [f["id"] for f in found] == ["nccl-remote-exited", "engine-dead"]
    assert "exits with status 0" in found[0]["cause"] and "real-vllm-on-device notes" in found[0]["source"]


def test_info_never_outranks_error():
    lines = [
        "No available shared memory broadcast block found in 60 seconds. This typically happens ...",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ]
    assert [f["id"] for f in fc.match(lines)] == ["engine-core-init-failed", "shm-broadcast-wait"]
    assert fc.match(lines)[1]["severity"] == "info"


def test_memlock_ranks_above_generic_system_error():
    lines = [
        "NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
        "NCCL WARN ibv_create_qp failed",
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
    ]
    findings = fc.match(lines, node="spark2")
    assert [f["id"] for f in findings] == ["rdma-memlock", "nccl-system-error"]
    assert [h["lineno"] for h in findings[0]["lines"]] == [1, 2]


def test_source_filter():
    kernel_line = "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051)"
    assert fc.match([kernel_line], source="vllm") == []
    assert fc.match([kernel_line], source="kernel")[0]["id"] == "nv-err-no-memory"


def test_max_lines_caps_repeats_and_line_numbers_are_one_based():
    lines = ["ok"] + ["No available shared memory broadcast block found in 60 seconds."] * 9
    findings = fc.match(lines, max_lines=3)
    assert len(findings) == 1
    assert [h["lineno"] for h in findings[0]["lines"]] == [2, 3, 4]


def test_verdict_format():
    line = "ModuleNotFoundError: No module named 'deep_gemm'"
    finding = fc.match([line], node="spark2")[0]
    text = fc.verdict(finding)
    ent = fc.entry("deepgemm-missing")
    assert text == u"spark2: %s \u2014 fix: %s [%s]" % (ent["cause"], ent["fix"], line)
    assert "\n" not in text


def test_verdict_trims_long_lines():
    line = "AttributeError: 'ShmRingBuffer' object has no attribute 'shared_memory'" + " x" * 300
    text = fc.verdict(fc.match([line])[0], width=80)
    assert text.endswith("...]")
    assert text.startswith("node: ")


COMPILATION_OK = ("(APIServer pid=1) INFO 11-22 07:00:01 [utils.py:253] non-default args: {'model_tag': '/models/DeepSeek-V4-Flash', "
                  "'compilation_config': {'level': None, 'mode': None, 'custom_ops': ['all'], 'splitting_ops': None, "
                  "'inductor_compile_config': {'enable_auto_functionalized_v2': False}, 'cudagraph_mode': "
                  "<CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, 'use_cudagraph': True}, 'speculative_config': "
                  "{'method': 'deepseek_mtp', 'num_speculative_tokens': 2}, 'max_num_seqs': 4}")
COMPILATION_LOST = ("(APIServer pid=1) INFO 11-22 07:00:01 [utils.py:253] non-default args: {'model_tag': '/models/DeepSeek-V4-Flash', "
                    "'speculative_config': {'method': 'deepseek_mtp', 'num_speculative_tokens': 2}, 'max_num_seqs': 4}")
COMPILATION_DEFAULT_MODE = ("INFO non-default args: {'model_tag': 'm', 'compilation_config': {'level': None, 'cudagraph_mode': None, "
                            "'use_cudagraph': True}}")
EXPECTED = {"compilation_config": {"cudagraph_mode": "FULL_AND_PIECEWISE"},
            "speculative_config": {"method": "deepseek_mtp", "num_speculative_tokens": 2}}


def test_json_flags_intact():
    assert fc.check_json_flags([COMPILATION_OK], EXPECTED) == []


def test_json_flag_dropped_is_reported():
    findings = fc.check_json_flags(["x", COMPILATION_LOST], EXPECTED, node="spark1")
    assert len(findings) == 1
    assert findings[0]["id"] == "json-flag-ignored"
    assert findings[0]["detail"] == "compilation_config absent from non-default args"
    assert findings[0]["lines"][0]["lineno"] == 2
    assert fc.verdict(findings[0]).startswith("spark1: a JSON flag did not reach vLLM")


def test_json_flag_key_missing_or_wrong():
    findings = fc.check_json_flags([COMPILATION_DEFAULT_MODE], {"compilation_config": {"cudagraph_mode": "PIECEWISE"}})
    assert findings[0]["detail"] == "compilation_config.cudagraph_mode = None (want PIECEWISE)"
    findings = fc.check_json_flags([COMPILATION_OK], {"speculative_config": {"num_speculative_tokens": 3, "prompt_lookup_max": 2}})
    assert findings[0]["detail"] == ("speculative_config.num_speculative_tokens = 2 (want 3); "
                                     "speculative_config.prompt_lookup_max missing (want 2)")


def test_json_flags_without_args_line_is_not_judged():
    assert fc.check_json_flags(NORMAL_STARTUP.splitlines()[2:], EXPECTED) == []


def test_diagnose_across_nodes_and_sources():
    sources = [
        {"node": "spark1", "role": "head", "source": "vllm", "lines": [
            "TimeoutError: RPC call to execute_model timed out.",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."]},
        {"node": "spark2", "role": "worker", "source": "kernel", "lines": [
            "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051)"]},
        {"node": "spark2", "role": "worker", "source": "journal", "lines": ["all fine"]},
    ]
    findings = fc.diagnose(sources)
    assert [(f["node"], f["id"], f["log_source"]) for f in findings] == [
        ("spark2", "nv-err-no-memory", "kernel"),
        ("spark1", "remote-rank-rpc-timeout", "vllm"),
        ("spark1", "engine-dead", "vllm"),
    ]
    assert fc.verdict(findings[0]).startswith("spark2: the unified-memory pool is exhausted")
    assert fc.diagnose([]) == []


# ------------------------------------------------------------------ how a previous boot ended (boot_end)
FIXTURES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "kernel"))


def fixture_lines(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read().splitlines()


CLEAN_BOOT = "\n".join(fixture_lines("prev-boot-clean-oom-survived.log")) + "\n"


@pytest.mark.parametrize("name,end", [
    ("prev-boot-clean-benign.log", "clean"),        # a journald restart inside the boot, then a shutdown
    ("prev-boot-clean-oom-survived.log", "clean"),
    ("prev-boot-power-cut.log", "unclean"),         # the restart's "Journal stopped" is not the end
    ("prev-boot-gsp-timeout.log", "unclean"),
    ("prev-boot-memory-freeze.log", "unclean"),
])
def test_boot_end_of_each_fixture(name, end):
    assert fc.boot_end(fixture_lines(name))["end"] == end


def test_a_journald_restart_is_no_end_and_its_stop_alone_is_no_shutdown():
    lines = fixture_lines("prev-boot-clean-benign.log")
    restart = [i for i, ln in enumerate(lines) if "Received SIGTERM from PID 1 (systemd)." in ln][0]
    # cut right after the restart's "Journal stopped": journald never came back, no shutdown followed
    cut = fc.boot_end(lines[:restart + 2])
    assert cut["end"] == "unclean" and cut["text"].endswith("Journal stopped")
    # cut after the new journald started: the log just stops there
    assert fc.boot_end(lines[:restart + 3]) == {"end": "unclean", "lineno": restart + 3, "text": lines[restart + 2],
                                                "why": "the log stops with no shutdown sequence"}
    # the whole boot: the shutdown sequence after the LAST "Journal started"
    whole = fc.boot_end(lines)
    assert whole["end"] == "clean" and "systemd-shutdown[1]: Syncing filesystems" in whole["text"]


def test_each_shutdown_line_alone_tells_a_clean_end():
    lines = fixture_lines("prev-boot-clean-oom-survived.log")
    head = [ln for ln in lines if "systemd-shutdown" not in ln and "SIGTERM" not in ln and "Journal stopped" not in ln]
    assert fc.boot_end(head)["end"] == "unclean"
    for tail in [ln for ln in lines if ln not in head and "Journal stopped" not in ln]:
        assert fc.boot_end(head + [tail])["end"] == "clean", tail


def test_unclean_shutdown_is_a_log_that_just_stops():
    lines = fixture_lines("prev-boot-power-cut.log")
    findings = fc.match(lines, node="spark1", source="kernel")
    # the catalogue matches the engine start's NV_ERR_NO_MEMORY too; the boot forensics drop it (hours before the end)
    assert [f["id"] for f in findings] == ["nv-err-no-memory", "unclean-shutdown", "pcie-aer-correctable"]
    assert findings[1]["lines"] == [{"lineno": len(lines), "text": lines[-1]}]
    assert findings[1]["severity"] == "warning"


def test_clean_shutdown_and_a_log_that_cannot_tell_match_no_end():
    assert "unclean-shutdown" not in [f["id"] for f in fc.match(CLEAN_BOOT, node="spark1", source="kernel")]
    # journalctl -k alone has no journald line: the end cannot be judged
    kernel_only = [ln for ln in CLEAN_BOOT.splitlines() if "journald" not in ln and "systemd-shutdown" not in ln]
    assert fc.boot_end(kernel_only)["end"] == "unknown"
    assert "unclean-shutdown" not in [f["id"] for f in fc.match(kernel_only, node="spark1", source="kernel")]
    assert fc.boot_end([])["end"] == "unknown" and fc.match([], node="spark1", source="kernel") == []


def test_xid_classes_follow_the_catalogue():
    def ids(line):
        return [f["id"] for f in fc.match([line], source="kernel")]
    for num in (13, 31, 43, 45, 69, 109):
        assert ids("NVRM: Xid (PCI:0000:43:00): %d, pid=1, name=python3, x" % num) == ["nvrm-xid"], num
    for num in (48, 62, 79, 95, 140, 154):
        assert ids("NVRM: Xid (PCI:0000:43:00): %d, pid=1, name=python3, x" % num) == ["gpu-reset-xid"], num
    for num in (119, 120):
        assert ids("NVRM: Xid (PCI:0000:43:00): %d, pid=1, name=python3, x" % num) == ["gsp-timeout"], num
    assert fc.entry("gsp-timeout")["gpu_fault"] and fc.entry("gpu-reset-xid")["gpu_fault"]
    assert not fc.entry("nvrm-xid").get("gpu_fault") and fc.entry("nv-err-no-memory")["only_if_unclean"]


def test_correctable_aer_is_info_in_both_spellings_and_never_the_fatal_entry():
    for line in ("PCIe Bus Error: severity=Correctable, type=Physical Layer, (Receiver ID)",
                 "PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"):
        assert [(f["id"], f["severity"]) for f in fc.match([line], source="kernel")] == [("pcie-aer-correctable", "info")]


def test_absence_rule_is_kernel_only():
    assert fc.match(fixture_lines("prev-boot-power-cut.log"), node="spark1", source="vllm") == []
