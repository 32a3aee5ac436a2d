# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Catalogue of known failures of the two-node DeepSeek-V4-Flash vLLM pair, and a matcher.

Pure Python (no Ansible imports).  Used by the readiness action (``vllm_ready``) and by
``playbooks/doctor.yml`` to turn log lines into a one-line cause and fix.

Entry fields:
  id        stable identifier (kebab-case)
  patterns  regexes (``re.search``, case-sensitive) matched against single log lines
  cause     one-line cause
  fix       one-line fix
  source    where the string and the diagnosis come from (seed / vllm-ops.md section / upstream)
  severity  'error' | 'warning' | 'info'
  where     log sources the line appears in: 'vllm' (container / vLLM log), 'journal'
            (systemd journal of the unit), 'kernel' (dmesg / journalctl -k); 'forensics': no log line, a
            finding the boot forensics make themselves (pair-load-crash, from the pair's phase marker)
  roles     node roles the entry applies to: 'head', 'worker'; an entry also matches when the
            role is unknown unless 'needs_role' is True
  rank      root-cause priority: lower sorts first.  Generic wrappers (engine core init failed,
            EngineDeadError, worker proc died) rank last so a specific cause above them wins.
  absent    (optional, with empty patterns) an absence rule: the entry matches a log that has a line
            matching one of ``requires`` (so the log can tell) and no line matching any of ``absent``;
            its evidence is the log's last line (where it stopped).
  boot_end  (optional, with empty patterns, 'kernel' entries) matches a previous boot's log that ended
            uncleanly by boot_end() (below); its evidence is the log's last line (where it stopped).
  gpu_fault (optional, 'kernel') a host-killing GPU fault (reset-class Xid, GSP timeout): the boot
            forensics hold the pair when the boot ended uncleanly soon after it.
  only_if_unclean (optional, 'kernel') the boot forensics count the line only as part of an unclean end
            (NV_ERR_NO_MEMORY: one appears on every successful engine start on GB10).
  fault_window_s (optional, with gpu_fault) the entry's own bound on the time between its last line and the
            unclean end (NV_ERR_NO_MEMORY: 600 s, the freeze ends the log within minutes); the forensics'
            window when it is shorter.

The 'kernel' entries are also the signatures the boot forensics (roles/vllm_service/files/forensics.py,
which imports this file on the node) look for in the previous boot's kernel log of both nodes.

API:
  match(lines, node=None, source=None, role=None, max_lines=5) -> list of findings
  boot_end(lines) -> {'end': 'clean'|'unclean'|'unknown', 'lineno', 'text', 'why'}: how a previous boot's log
            (journalctl -b -1 _TRANSPORT=kernel _TRANSPORT=driver) ended
  verdict(finding) -> str   "<node>: <cause> — fix: <fix> [<line>]"
  diagnose(sources, max_lines=5) -> list of findings over several nodes/sources
  check_json_flags(lines, expected, node=None) -> list of findings (id 'json-flag-ignored')
  entry(entry_id) -> dict;  CATALOGUE: tuple of entries
"""

from __future__ import annotations


import re
from collections.abc import Iterable, Mapping
from typing import Any

ROLES_BOTH = ("head", "worker")

# rank bands: 10 environment/host, 20 network/fabric, 30 image/software, 40 memory,
# 60 peer failure symptoms, 80 benign/info, 90 generic wrappers.
CATALOGUE: tuple[dict[str, Any], ...] = (
    {
        "id": "unit-exec-missing",
        "patterns": (
            r"code=exited, status=127",
            r"status=127/n/a",
            r"Main process exited, code=exited, status=127",
            r"bash: \S+: No such file or directory",
        ),
        "cause": "the unit's ExecStart runs a path that does not exist (exit 127 = file not found); vLLM never started",
        "fix": "systemctl cat the unit and point ExecStart at the rendered /etc/dgxspark-ds4/launch-*.sh; re-run the play",
        "source": "seed 000 (reboot addendum: ExecStart at a ghost -090.sh, status=127 loop)",
        "severity": "error",
        "where": ("journal", "vllm"),
        "roles": ROLES_BOTH,
        "rank": 5,
    },
    {
        "id": "headless-missing",
        "patterns": (
            r"EADDRINUSE",
            r"The server socket has failed to listen on any local network address",
            r"Starting vLLM server on http",
        ),
        "needs_role": "worker",
        "cause": "the worker (rank 1) runs without --headless: it tries to host the TCPStore / API server itself",
        "fix": "add --headless to the worker's vllm serve (the launch renderer does this for ds4_node_rank 1)",
        "source": "seed 000 failure #5 (both nodes bind 29501); vllm-ops.md §2.1 (run_headless), §1.1 (no HTTP on rank 1)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ("worker",),
        "rank": 10,
    },
    {
        "id": "mlx5-error",
        "patterns": (r"mlx5_core \S+: .*(?:health compromised|[Ff]atal|internal error|cmd_work_handler.*timeout)",),
        "cause": "the ConnectX-7 (mlx5) reported a fatal or health error: the fabric between the two nodes failed",
        "fix": "check the cable and both ports (dgxspark.ds4 fabric checks), the NIC firmware and the AER lines around it; "
               "re-run playbooks/site.yml --tags nccl_fabric",
        "source": "field notes 2026-11 (what users report, item 3: mlx5/AER in the previous boot's kernel log; item 6: GID "
                  "moving after a port flap or firmware update)",
        "severity": "error",
        "where": ("kernel",),
        "roles": ROLES_BOTH,
        "rank": 25,
    },
    {
        "id": "pcie-aer",
        "patterns": (r"AER: (?:Multiple )?Uncorrect(?:ed|able) \((?:Fatal|Non-Fatal)\) error",
                     r"PCIe Bus Error: severity=Uncorrect(?:ed|able) \((?:Fatal|Non-Fatal)\)"),
        "cause": "PCIe Advanced Error Reporting logged an uncorrectable bus error (NIC or GPU link): on a DGX Spark the "
                 "ConnectX-7 whose recovery can soft-lock the host",
        "fix": "read the device named on the line (lspci -s); reseat/replace the cable or update the NIC firmware; keep the "
               "evidence record",
        "source": "Linux drivers/pci/pcie/aer.c (severity strings 'Uncorrectable (Fatal)' / 'Uncorrectable (Non-Fatal)' on "
                  "the kernels DGX OS ships, 'Uncorrected (...)' on older ones); MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark "
                  "#146 (ConnectX-7 fatal AER soft-locks a DGX Spark head); field notes 2026-11 (item 3)",
        "severity": "error",
        "where": ("kernel",),
        "roles": ROLES_BOTH,
        "rank": 26,
    },
    {
        "id": "pcie-aer-correctable",
        "patterns": (r"PCIe Bus Error: severity=Correct(?:ed|able)",
                     r"AER: (?:Multiple )?Correct(?:ed|able) error (?:message )?received"),
        "cause": "PCIe Advanced Error Reporting logged a correctable bus error: the link retried and carried on",
        "fix": "nothing to do for a few; a steady stream means a marginal cable or slot (read the device named on the line)",
        "source": "Linux drivers/pci/pcie/aer.c ('Correctable' on the kernels DGX OS ships, 'Corrected' on older ones); "
                  "pop-os/pop #3363, MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark #146 (correctable lines on hosts that "
                  "kept running)",
        "severity": "info",
        "where": ("kernel",),
        "roles": ROLES_BOTH,
        "rank": 86,
    },
    {
        "id": "master-port-in-use",
        "patterns": (
            r"The server socket has failed to listen on any local network address.*EADDRINUSE",
            r"DistNetworkError.*EADDRINUSE",
            r"code: -98, name: EADDRINUSE",
        ),
        "cause": "something already listens on the master port on the head (old vLLM container/worker still alive, or another job)",
        "fix": "stop the old container (docker rm -f) and stray VLLM::Worker processes; check ss -ltnp 'sport = :<master_port>'; "
               "use a unique --master-port",
        "source": "vllm-ops.md §2.3A (vllm#39015, vllm#11617); seed 000 (pkill left host-bound workers on 29501)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ("head",),
        "rank": 11,
    },
    {
        "id": "zmq-port-collision",
        "patterns": (r"ZMQError: Address already in use",),
        "cause": "ZMQ ephemeral port collision during multi-node mp startup",
        "fix": "restart the pair (worker first); keep the first failure's logs; upgrade vLLM if it recurs",
        "source": "vllm-ops.md §2.3A (gpustack#6019)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 12,
    },
    {
        "id": "gloo-loopback",
        "patterns": (
            r"Unable to resolve hostname to a \(local\) address\. Using the loopback address as fallback",
            r"Gloo connectFullMesh failed",
            r"remote=\[127\.0\.0\.1\]",
        ),
        "cause": "Gloo bound to 127.0.0.1 (hostname resolves to loopback), so the peer cannot connect",
        "fix": "set GLOO_SOCKET_IFNAME, TP_SOCKET_IFNAME, NCCL_SOCKET_IFNAME and VLLM_HOST_IP per node to its CX-7 netdev/IP (nccl.env)",
        "source": "vllm-ops.md §2.3B (vllm#7074, aws-do-eks PR #50/#69, gpustack#2125); seed 002 (V1 Gloo 127.0.0.1)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 20,
    },
    {
        "id": "rdma-memlock",
        "patterns": (
            r"Call to ibv_reg_mr(?:_iova2)? failed with error Cannot allocate memory",
            r"ibv_create_qp failed",
        ),
        "cause": "RDMA memory registration failed: the container's locked-memory limit is too small",
        "fix": "run the container with --ulimit memlock=-1:-1 (and a large /dev/shm or --ipc=host)",
        "source": "vllm-ops.md §2.3C (NVIDIA/nccl-tests#206); seed 001 'NCCL Fix'",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 21,
    },
    {
        "id": "nccl-socket-fallback",
        "patterns": (
            r"NET/IB : No device found",
            r"Using network Socket",
            r"via NET/Socket",
            r"NET/Socket : Using",
        ),
        "cause": "NCCL found no RDMA device and fell back to TCP sockets (fraction of the bandwidth)",
        "fix": "pass --device /dev/infiniband to the container, set NCCL_IB_HCA to both RoCE twins and NCCL_NET=IB",
        "source": "vllm-ops.md §2.3C item 2, §3.3 (vllm docs parallelism_scaling.md)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 22,
    },
    {
        "id": "nccl-system-error",
        "patterns": (r"NCCL error: unhandled system error", r"unhandled system error \(run with NCCL_DEBUG=INFO"),
        "cause": "NCCL 'unhandled system error': memlock limit, a wrong NCCL_IB_GID_INDEX literal, or RDMA devices missing",
        "fix": "check memlock (--ulimit memlock=-1), leave NCCL_IB_GID_INDEX unset or resolve it per node, pass /dev/infiniband; "
               "rerun with NCCL_DEBUG=INFO",
        "source": "vllm-ops.md §2.3C; seed 001 'NCCL Fix'; MiaAI start script (GID index per node)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 25,
    },
    {
        "id": "nnodes-missing",
        "patterns": (r"World size \(\d+\) is larger than the number of available GPUs \(\d+\) in this node",),
        "cause": "--nnodes is missing: vLLM looks for all TP ranks on one node",
        "fix": "pass --nnodes 2 --node-rank <rank> --master-addr <head CX-7 IP> (the launch renderer does this)",
        "source": "vllm-ops.md §2.1 (config/parallel.py)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 26,
    },
    {
        "id": "cpu-only-torch",
        "patterns": (
            r"Torch not compiled with CUDA enabled",
            r"libtorch_cuda\.so: cannot open shared object file",
            r"_C\.abi3\.so: undefined symbol: _ZN3c104cuda",
            r"\btorch[:=\s-]+\d+\.\d+(?:\.\d+)?\+cpu\b",
        ),
        "cause": "the image has a CPU-only torch wheel (a rebuild re-resolved torch from PyPI), so vLLM's CUDA extension cannot load",
        "fix": "use the prebuilt CUDA image, or rebuild with the cu130 index (--extra-index-url https://download.pytorch.org/whl/cu130, "
               "pin torch with --override)",
        "source": "seed 000 failure #1 (--rebuild-vllm pulled the CPU wheel); eugr/spark-vllm-docker PR #263 "
                  "(ImportError: libtorch_cuda.so, torch 2.10.0+cpu)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 30,
    },
    {
        "id": "vllm-c-extension-abi",
        "patterns": (r"vllm/_C\.(?:abi3|cpython-[\w-]+)\.so: undefined symbol", r"Failed to import from vllm\._C with ImportError"),
        "cause": "vLLM's C extension was built against a different torch than the one installed in the image",
        "fix": "rebuild the image so vLLM and torch come from one build (do not pip-install torch over it)",
        "source": "vllm#13608, vllm#20361, vllm#5501 (undefined symbol in _C.abi3.so)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 31,
    },
    {
        "id": "cutlass-dsl-mismatch",
        "patterns": (r"module 'cutlass\.cute\.nvgpu' has no attribute 'OperandMajorMode'",),
        "cause": "FlashInfer and the CUTLASS DSL (nvidia-cutlass-dsl) in the image are mismatched versions",
        "fix": "use an image whose FlashInfer and cutlass-dsl were built together (the profile's pinned image); do not mix PR builds",
        "source": "seed 001 'Dead Ends Avoided' (PR 40082 build)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 32,
    },
    {
        "id": "deepgemm-missing",
        "patterns": (
            r"No module named 'deep_gemm'",
            r"DeepGEMM backend is not available or outdated",
            r"requires DeepGEMM to be installed",
        ),
        "cause": "DeepGEMM is not installed in the image; DeepSeek-V4's sparse attention indexer needs it",
        "fix": "use an image with DeepGEMM, or install it: git clone --recursive https://github.com/deepseek-ai/DeepGEMM && "
               "pip install --no-deps --no-build-isolation .",
        "source": "seed 000 failure #2; vllm-project/recipes PR #183; eugr/spark-vllm-docker#209",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 33,
    },
    {
        "id": "deepgemm-unsupported-arch",
        "patterns": (
            r"Assertion error \(deepgemm-src/[^)]*\): Unsupported architecture",
            r"Check failed: num_tokens > 64",
        ),
        "cause": "DeepGEMM / FlashInfer kernels in this image do not support sm_121 (GB10) for DeepSeek-V4",
        "fix": "use an SM12x-enabled image (vLLM PR #41834 lineage / the profile's pinned image); not an ops problem",
        "source": "vllm-ops.md §2.3G (ecohash-co README); vllm PR #48514",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 34,
    },
    {
        "id": "mxfp4-double-patched",
        "patterns": (r"UnboundLocalError: (?:local variable 'w13' referenced before assignment|cannot access local variable 'w13')",),
        "cause": "the mxfp4.py GPU-cache patch was applied twice (duplicate del w13 ... block)",
        "fix": "recreate the container from the image (the patch is baked in); grep -c empty_cache mxfp4.py must be 2; never re-apply mods",
        "source": "seed 000 reboot addendum (fix-ds4-gpu-cache re-applied)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 35,
    },
    {
        "id": "json-flag-rejected",
        "patterns": (
            r"error: argument --(?:compilation-config|speculative-config|default-chat-template-kwargs|override-generation-config|"
            r"reasoning-config|hf-overrides|kv-transfer-config|additional-config)\b",
        ),
        "cause": "a JSON-valued flag reached vLLM mangled (quotes stripped by nested shells) and argparse rejected it",
        "fix": "pass JSON flags only through the rendered launch script (no ssh/docker exec bash -c nesting)",
        "source": "seed 000 failure #6 (quotes stripped); argparse error format",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 36,
    },
    {
        "id": "dev-shm-too-small",
        "patterns": (r"Insufficient space in /dev/shm",),
        "cause": "/dev/shm is too small for vLLM's message-queue ring buffer (Docker default 64 MB)",
        "fix": "run the container with --ipc=host or a large --shm-size",
        "source": "vllm-ops.md §2.3E item 3 (vllm PR #48879)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 40,
    },
    {
        "id": "shm-ring-buffer",
        "patterns": (
            r"'ShmRingBuffer' object has no attribute 'shared_memory'",
            r"is a local reader but could not attach to shared memory ring buffer",
            r"FileNotFoundError: \[Errno 2\] No such file or directory: '/psm_",
        ),
        "cause": "a local reader could not attach to the shared-memory ring buffer (segment unlinked: logind RemoveIPC, stale "
                 "psm_*, or a self-set VLLM_WORKER_MULTIPROC_METHOD=fork)",
        "fix": "set RemoveIPC=no in logind.conf, clean /dev/shm/psm_* before start, do not set VLLM_WORKER_MULTIPROC_METHOD, use --ipc=host",
        "source": "vllm-ops.md §2.3E (vllm#54259, PR #54274); seed 000 reboot addendum (fork flag)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 41,
    },
    {
        "id": "free-memory-below-utilization",
        "patterns": (
            r"Free memory on device \S+ \(.*\) (?:on startup )?is less than desired GPU memory utilization",
            r"Free memory on device \S+ \(.*\) (?:on startup )?is less than the engine's budget",
        ),
        "cause": "free unified memory is below --gpu-memory-utilization (page cache from earlier loads, another GPU process, "
                 "or an old container still tearing down)",
        "fix": "drop caches before start (sync; echo 3 > /proc/sys/vm/drop_caches), make sure no other vLLM runs, "
               "or lower --gpu-memory-utilization",
        "source": "vllm-ops.md §2.3D (v1/worker/utils.py::request_memory); seed 000 (4.75/119.67 GiB; ~30/119.67 GiB)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 42,
    },
    {
        "id": "nv-err-no-memory",
        "patterns": (r"NV_ERR_NO_MEMORY", r"NVRM: .*Out of memory"),
        "cause": "the unified-memory pool is exhausted (kernel NVRM out of memory); the host may hang instead of OOM-killing "
                 "(GB10: a silent wedge, no OOM kill, no panic, power cycle)",
        "fix": "lower --gpu-memory-utilization / --max-num-seqs, drop caches before start, avoid cold JIT (custom_ops all) "
               "under memory pressure; power-cycle if hung",
        "source": "vllm-ops.md §2.3G, §5 (NVIDIA/open-gpu-kernel-modules#1358, dgx-spark-playbooks#97); seed 002 (system "
                  "freeze). One appears on every successful engine start on GB10 (vllm#56824): the boot forensics count it "
                  "only as part of an unclean end",
        "severity": "error",
        "where": ("kernel",),
        "roles": ROLES_BOTH,
        "rank": 43,
        "only_if_unclean": True,
        # The unified-memory freeze (seed 002): the pool's allocations fail, then the node stops answering and the log
        # ends within minutes (journald syncs an error line within SyncIntervalSec, 5 min). The engine start's single
        # NV_ERR_NO_MEMORY (vllm#56824) is hours before an unrelated power cut: outside this window, not a fault.
        "gpu_fault": True,
        "fault_window_s": 600,
    },
    {
        "id": "gsp-timeout",
        "patterns": (
            r"NVRM: Xid \(PCI:[0-9a-fA-F:.]+\): 1(?:19|20)\b",
            r"Timeout after \d+s of waiting for RPC response from GPU\d+ GSP",
            r"Timeout waiting for RPC from GPU\d+ GSP",
            r"_kgspRpcRecvPoll|_kgspLogXid119|_kgspLogRpcTimeout",
            r"_kgspIsHeartbeatTimedOut: Heartbeat timed out",
        ),
        "cause": "the GPU's GSP firmware stopped answering (Xid 119 RPC timeout / Xid 120 GSP error, a reset-class fault in "
                 "NVIDIA's Xid catalogue): the GB10 hang that stops NCCL and ssh on both nodes until a power cycle",
        "fix": "apply the mxfp4 per-layer tensor release (dgxspark.ds4 mxfp4_patch) or an image that has it; keep "
               "--gpu-memory-utilization at the recipe's value; power-cycle both nodes if they hang",
        "source": "NVIDIA Xid catalogue (docs.nvidia.com/deploy/xid-errors: 119 GSP RPC timeout, 120 GSP error, "
                  "resolution: reset the GPU); seed 000 (mxfp4 cleanup: 'MoE kernel initialization triggers a GSP firmware "
                  "hang ... physically power-cycling both Sparks'); NVIDIA/open-gpu-kernel-modules #446, #1230 (the NVRM lines)",
        "severity": "error",
        "where": ("kernel",),
        "roles": ROLES_BOTH,
        "rank": 42,  # before nv-err-no-memory (43): a GSP/reset fault is the cause the memory lines around it follow
        "gpu_fault": True,
    },
    {
        "id": "gpu-reset-xid",
        "patterns": (r"NVRM: Xid \(PCI:[0-9a-fA-F:.]+\): (?:48|62|79|95|140|154)\b",
                     r"NVRM: GPU [0-9a-fA-F:.]+: GPU has fallen off the bus",
                     r"NVRM: GPU at (?:PCI:)?[0-9a-fA-F:.]+ has fallen off the bus"),
        "cause": "the GPU reported a reset-class fault (NVIDIA's Xid catalogue: 79 fallen off the bus, 62 internal "
                 "micro-controller halt, 48/95/140 uncorrectable ECC, 154 GPU reset or reboot required): it is unusable "
                 "until reset, on GB10 until the host is power-cycled",
        "fix": "power-cycle the node; if it repeats on the same load, keep the evidence record and open a case with NVIDIA "
               "(nvidia-bug-report.sh); read the lines before it in the record (memory, GSP)",
        "source": "NVIDIA Xid catalogue (docs.nvidia.com/deploy/xid-errors, resolution buckets RESET_GPU / RESTART_BM); "
                  "NVIDIA/open-gpu-kernel-modules #1151 (Xid 79 lines)",
        "severity": "error",
        "where": ("kernel",),
        "roles": ROLES_BOTH,
        "rank": 42,  # before nv-err-no-memory (43): a GSP/reset fault is the cause the memory lines around it follow
        "gpu_fault": True,
    },
    {
        "id": "nvrm-xid",
        "patterns": (r"NVRM: Xid \(PCI:[0-9a-fA-F:.]+\): (?!(?:48|62|79|95|119|120|140|154)\b)\d+",),
        "cause": "the NVIDIA driver reported an application-class GPU error (Xid 13, 31, 43, 45 ...: NVIDIA's catalogue "
                 "says restart the application; the GPU stays usable)",
        "fix": "nothing at boot; if it comes with a crash of vLLM, read the vLLM log of the same minute (a kernel fault, an "
               "illegal address); keep the evidence record",
        "source": "NVIDIA Xid catalogue (docs.nvidia.com/deploy/xid-errors: 13 graphics engine exception, 31 MMU fault, "
                  "43 'GPU stopped processing' with the GPU healthy, 45 preemptive cleanup: RESTART_APP); vllm#5901, "
                  "leptonai/gpud #46 (Xid 13 bursts on hosts that kept running)",
        "severity": "warning",
        "where": ("kernel",),
        "roles": ROLES_BOTH,
        "rank": 48,
    },
    {
        "id": "oom-killer",
        "patterns": (r"invoked oom-killer: gfp_mask=", r"Out of memory: Killed process \d+"),
        "cause": "the kernel OOM killer ran: unified memory (GPU + CPU, one pool on GB10) was exhausted",
        "fix": "lower --gpu-memory-utilization (seed 002: 0.78, 0.82 went OOM) or --max-num-seqs; keep the memory guard on; "
               "cap the container (docker --memory) and keep swap off",
        "source": "seed 002 ('OOM Safety on GB10 Unified Memory': 'OOM does not produce a graceful CUDA error ... the entire "
                  "machine freezes'; gpu_mem 0.82 OOM); field notes 2026-11 (item 3); docker/for-linux #1001 (the lines)",
        "severity": "warning",
        "where": ("kernel",),
        "roles": ROLES_BOTH,
        "rank": 46,
    },
    {
        "id": "kernel-hang",
        "patterns": (r"INFO: task \S+ blocked for more than \d+ seconds", r"Kernel panic - not syncing",
                     r"watchdog: BUG: soft lockup - CPU#\d+ stuck"),
        "cause": "the kernel saw tasks stuck, a soft lockup or a panic",
        "fix": "read the lines before it in the evidence record (memory, GPU, NIC); keep the memory guard on; power-cycle if "
               "the node froze",
        "source": "seed 002 ('the entire machine freezes, SSH hangs, and a hard power cycle is required'); seed 000 (GSP hang, "
                  "'SSH dies on both nodes'). Real GB10 wedges leave none (NVIDIA/open-gpu-kernel-modules#1358: no panic, "
                  "empty pstore): never a reason to hold by itself",
        "severity": "warning",
        "where": ("kernel",),
        "roles": ROLES_BOTH,
        "rank": 47,
    },
    {
        "id": "unclean-shutdown",
        "patterns": (),
        "boot_end": True,
        "cause": "the previous boot ended without a shutdown (its log stops: no systemd-shutdown, journald not stopped by it): "
                 "a freeze, a hard reset or power loss",
        "fix": "read the evidence record for the cause above this line; if there is none, check power and the BMC event log",
        "source": "systemd-shutdown(8) and journald: a clean shutdown ends with 'systemd-shutdown[1]: Syncing filesystems and "
                  "block devices', 'systemd-journald[N]: Received SIGTERM from PID 1 (systemd-shutdow).', 'Journal stopped'; "
                  "field notes 2026-11 (item 3: 'unified-memory exhaustion freezing or hard-resetting the host')",
        "severity": "warning",
        "where": ("kernel",),
        "roles": ROLES_BOTH,
        "rank": 85,
    },
    {
        "id": "pair-load-crash",
        "patterns": (),
        "cause": "the host ended uncleanly while the pair was loading (the collection's own record: prestart started it, it "
                 "never reached readiness): the seed-000 GSP hang during MoE kernel initialization, or the seed-002 "
                 "unified-memory freeze during compilation; the same start would do it again",
        "fix": "before releasing: apply the mxfp4 per-layer tensor release (dgxspark.ds4 mxfp4_patch), drop custom_ops all "
               "(or warm the compile cache), keep --gpu-memory-utilization at the recipe's value (or pick a safer recipe: "
               "vllm_service_after_crash fallback:<recipe>); then playbooks/ack.yml",
        "source": "seed 000 (mxfp4 cleanup: GSP firmware hang at MoE kernel initialization, power-cycling both Sparks); seed "
                  "002 (custom_ops all: TileLang JIT exhausts memory during model load, full system freeze)",
        "severity": "error",
        "where": ("forensics",),
        "roles": ROLES_BOTH,
        "rank": 40,
    },
    {
        "id": "rendezvous-timeout",
        "patterns": (
            r"Timed out after \d+ seconds waiting for clients\. \d+/\d+ clients joined",
            r"DistStoreError.*[Tt]imed out",
        ),
        "cause": "the TCPStore on the head timed out waiting for the other rank (worker not started, wrong --master-addr, "
                 "firewall, or a very slow cold JIT)",
        "fix": "start the worker first, check --master-addr is the head's CX-7 IP and that TCP between the nodes is open",
        "source": "vllm-ops.md §2.2 (peer log: 901 seconds, 1/4 clients joined)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 50,
    },
    {
        "id": "head-died",
        "patterns": (
            r"recvValue failed on SocketImpl.*Connection was likely closed",
            r"Failed to check the \"should dump\" flag on TCPStore",
        ),
        "cause": "the head (TCPStore host) died or restarted; the headless worker does not exit by itself",
        "fix": "restart the pair worker first, then head (systemd units are coupled); read the head's log for the root cause",
        "source": "vllm-ops.md §2.3F (MiaAI DeepSeek-v4-Flash-DSpark#38, vllm#32136)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 60,
    },
    {
        "id": "nccl-remote-exited",
        "patterns": (r"NCCL error: remote process exited or there was a network error",),
        "cause": "the other rank's process died (killed, OOM, crash) or the link dropped: the next collective failed at once; "
                 "the engine core dies and vLLM then exits with status 0 (idle: at the next request, which gets HTTP 500)",
        "fix": "find why the worker died (journalctl -u dgxspark-ds4-worker, journalctl -k for OOM/NVRM/Xid); the pair restarts "
               "worker first (units Restart=always, pair guard); a unit still on Restart=on-failure stays down: re-run the "
               "vllm_service role",
        "source": "real-vllm-on-device notes Part 1 §3 (vLLM 0.26.0, worker rank killed: pynccl all_reduce, head exit 0)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 59,
    },
    {
        "id": "remote-rank-rpc-timeout",
        "patterns": (r"TimeoutError: RPC call to \w+ timed out",),
        "cause": "the engine core waited VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS (300 s) for a step a rank never finished: a rank "
                 "died or froze with a request in flight (/health, /v1/models, /metrics stayed 200 and every counter frozen "
                 "meanwhile); vLLM then exits with status 0",
        "fix": "read the worker's log/journal for its root cause; the hang watchdog restarts the pair (worker first) before "
               "the 300 s; raise VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS only if mid-serve JIT exceeds 300 s",
        "source": "real-vllm-on-device notes Part 1 §3 B (vLLM 0.26.0: 'RPC call to sample_tokens timed out' 300 s after "
                  "the worker was killed mid-stream); vllm-ops.md §2.3F (multiproc_executor.py::collective_rpc, vllm#11996)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 61,
    },
    {
        "id": "engine-start-timeout",
        "patterns": (r"Timed out waiting for engine core processes to start",),
        "cause": "engine core processes did not report ready within VLLM_ENGINE_READY_TIMEOUT_S",
        "fix": "raise VLLM_ENGINE_READY_TIMEOUT_S (harmless) and look above for the real stall",
        "source": "vllm-ops.md §2.3G (core_client.py; vllm#48031)",
        "severity": "warning",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 70,
    },
    {
        "id": "shm-broadcast-wait",
        "patterns": (r"No available shared memory broadcast block found in 60 seconds",),
        "cause": "the engine core waited 60 s for a rank: busy at start (JIT compilation, quantization: benign) or, after "
                 "startup, frozen (SIGSTOP, wedged collective) or dead with a request in flight; it repeats every 60 s "
                 "until the rank answers or the RPC times out (300 s), while /health stays 200",
        "fix": "none during first-boot JIT; after startup it is a hang: the pair guard's watchdog restarts the pair (worker "
               "first); read the worker's journal for why it stopped",
        "source": "real-vllm-on-device notes Part 1 §3 B, §4 (vLLM 0.26.0: every 60 s after the worker was killed mid-request "
                  "or stopped); vllm-ops.md §2.3E/§2.3G (shm_broadcast.py LONG_WAIT_TIME_LOG_MSG)",
        "severity": "info",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 80,
    },
    {
        "id": "worker-proc-died",
        "patterns": (r"Worker proc \S+ died unexpectedly",),
        "cause": "a local worker process died (OOM kill, SIGBUS, crash)",
        "fix": "look above for the worker's traceback; check journalctl -k for NVRM/OOM; check /dev/shm size",
        "source": "vllm-ops.md §2.3G (multiproc_executor.py)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 88,
    },
    {
        "id": "engine-dead",
        "patterns": (r"EngineDeadError",),
        "cause": "the engine core died (wrapper; the root cause is logged just above or on the other node: an NCCL error = a "
                 "rank died, an RPC timeout = a rank hung); vLLM answers HTTP 500 and exits with status 0 half a second later",
        "fix": "read earlier lines and the other node's log; systemd restarts the head (Restart=always) and its prestart the "
               "worker first; a unit on Restart=on-failure stays down after this exit 0: re-run the vllm_service role",
        "source": "real-vllm-on-device notes Part 1 §3 (vLLM 0.26.0: EngineDeadError, 'Shutting down', exit status 0); "
                  "vllm-ops.md §2.3F (v1/engine/exceptions.py)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 89,
    },
    {
        "id": "engine-core-init-failed",
        "patterns": (r"Engine core initialization failed\. See root cause above",),
        "cause": "engine core initialization failed (generic wrapper); the specific cause is logged above it",
        "fix": "read the lines above; check journalctl -k for NVRM / NV_ERR_NO_MEMORY",
        "source": "vllm-ops.md §2.3G (v1/engine/utils.py::wait_for_engine_startup)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 90,
    },
    {
        "id": "json-flag-ignored",
        "patterns": (),
        "cause": "a JSON flag did not reach vLLM as intended (quotes stripped): non-default args lack the expected value",
        "fix": "pass JSON flags only through the rendered launch script; never through ssh / docker exec bash -c",
        "source": "seed 000 failure #6 ('silently falls back to default compilation'); non-default args log line (vllm-ops.md §1.3)",
        "severity": "error",
        "where": ("vllm",),
        "roles": ROLES_BOTH,
        "rank": 37,
    },
)

_COMPILED = dict((e["id"], tuple(re.compile(p) for p in e["patterns"])) for e in CATALOGUE)
_BY_ID = dict((e["id"], e) for e in CATALOGUE)

_ROLE_ALIASES = {"head": "head", "worker": "worker", "0": "head", "1": "worker", "rank0": "head", "rank1": "worker"}


def entry(entry_id: str) -> dict[str, Any]:
    """Return the catalogue entry with this id (KeyError if unknown)."""
    return _BY_ID[entry_id]


def _role_of(node: object, role: object) -> str | None:
    if role is not None:
        return _ROLE_ALIASES.get(str(role).lower())
    if node is not None:
        return _ROLE_ALIASES.get(str(node).lower())
    return None


def _applies(ent: Mapping[str, Any], role: str | None, source: str | None) -> bool:
    if source is not None and source not in ent["where"]:
        return False
    if ent.get("needs_role"):
        return role == ent["needs_role"]
    return role is None or role in ent["roles"]


def _finding(ent: Mapping[str, Any], node: str | None, hits: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": ent["id"],
        "cause": ent["cause"],
        "fix": ent["fix"],
        "severity": ent["severity"],
        "source": ent["source"],
        "rank": ent["rank"],
        "node": node,
        "lines": hits,
    }


def match(lines: str | Iterable[str], node: str | None = None, source: str | None = None, role: str | None = None,
          max_lines: int = 5) -> list[dict[str, Any]]:
    """Match log lines against the catalogue.

    lines: iterable of str (or one str, split on newlines).
    node: node label used in the verdict ('spark1', 'head', ...); also the role when it is
          'head'/'worker'/'0'/'1' and role is None.
    source: 'vllm' | 'journal' | 'kernel' | None (None = every entry).
    role: 'head' | 'worker' | None; decides EADDRINUSE = master port in use (head/unknown)
          vs --headless missing (worker).

    Returns findings sorted by (rank, first line number): dicts with keys id, cause, fix,
    severity, source, rank, node, lines (list of {'lineno': 1-based int, 'text': str},
    at most max_lines per finding).  An 'info' entry never outranks an error.
    """
    lines = lines.splitlines() if isinstance(lines, str) else list(lines)
    role = _role_of(node, role)
    candidates = [e for e in CATALOGUE if e["patterns"] and _applies(e, role, source)]
    hits: dict[str, list[dict[str, Any]]] = dict((e["id"], []) for e in candidates)
    for lineno, raw in enumerate(lines, 1):
        text = raw.rstrip("\r\n")
        for ent in candidates:
            found = hits[ent["id"]]
            if len(found) >= max_lines:
                continue
            for rx in _COMPILED[ent["id"]]:
                if rx.search(text):
                    found.append({"lineno": lineno, "text": text})
                    break
    # the worker-side EADDRINUSE is headless-missing; do not also report master-port-in-use
    if hits.get("headless-missing") and "master-port-in-use" in hits:
        hits["master-port-in-use"] = []
    findings = [_finding(_BY_ID[i], node, h) for i, h in hits.items() if h]
    findings.extend(_finding(e, node, [last]) for e, last in _absences(lines, role, source))
    findings.sort(key=lambda f: (f["severity"] == "info", f["rank"], f["lines"][0]["lineno"]))
    return findings


_JOURNAL_STARTED = re.compile(r"systemd-journald\[\d+\]: Journal started")
_JOURNAL_STOPPED = re.compile(r"systemd-journald\[\d+\]: Journal stopped")
# What only a shutdown leaves (systemd-shutdown(8) logs to the kernel ring buffer, so journalctl's _TRANSPORT=kernel
# carries it; journald's own SIGTERM line names the sender; pstore/console captures end with the kernel's reboot line).
_SHUTDOWN = (
    re.compile(r"systemd-journald\[\d+\]: Received SIGTERM from PID 1 \(systemd-shutdow\)"),
    re.compile(r"systemd-shutdown\[1\]: (?:Syncing filesystems and block devices|Sending SIGTERM to remaining processes)"),
    re.compile(r"\breboot: (?:Restarting system|Power down|System halted)"),
)


def boot_end(lines: str | Iterable[str]) -> dict[str, Any]:
    """How a previous boot's log ended: {'end', 'lineno', 'text', 'why'} (lineno/text: the line that tells, or the last).

    'unknown': no "Journal started" (journalctl -k alone, an empty log): the log cannot tell.
    'clean': after the LAST "Journal started" (journald restarts inside a boot write "Journal stopped" then "Journal
             started" again) there is a line only a shutdown leaves: systemd-shutdown's own lines, journald's "Received
             SIGTERM from PID 1 (systemd-shutdow)" or the kernel's "reboot: Restarting system / Power down".
    'unclean': anything else: the log just stops (a freeze, a reset, a power cut; journald syncs warnings to disk only
             every few minutes, so the last lines may be missing), or journald was stopped by something else and never
             came back.
    """
    lines = lines.splitlines() if isinstance(lines, str) else list(lines)
    numbered = [(n, raw.rstrip("\r\n")) for n, raw in enumerate(lines, 1)]
    filled = [(n, t) for n, t in numbered if t.strip()]
    if not filled:
        return {"end": "unknown", "lineno": 0, "text": "", "why": "empty log"}
    starts = [n for n, t in numbered if _JOURNAL_STARTED.search(t)]
    last_n, last_t = filled[-1]
    if not starts:
        return {"end": "unknown", "lineno": last_n, "text": last_t, "why": "no 'Journal started' line: the log cannot tell"}
    after = [(n, t) for n, t in numbered if n > starts[-1]]
    for n, t in after:
        if any(rx.search(t) for rx in _SHUTDOWN):
            return {"end": "clean", "lineno": n, "text": t, "why": "shutdown sequence after the last 'Journal started'"}
    stopped = [(n, t) for n, t in after if _JOURNAL_STOPPED.search(t)]
    if stopped:
        return {"end": "unclean", "lineno": stopped[-1][0], "text": stopped[-1][1],
                "why": "journald stopped without a shutdown and never started again"}
    return {"end": "unclean", "lineno": last_n, "text": last_t, "why": "the log stops with no shutdown sequence"}


def _absences(lines: list[str], role: str | None, source: str | None) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """[(entry, last line)] for the absence rules the log breaks: a line matching 'requires', none matching 'absent';
    a 'boot_end' rule: the log ended uncleanly (boot_end)."""
    rules = [e for e in CATALOGUE if (e.get("absent") or e.get("boot_end")) and _applies(e, role, source)]
    if not rules:
        return []
    numbered = [(n, raw.rstrip("\r\n")) for n, raw in enumerate(lines, 1)]
    last = [{"lineno": n, "text": t} for n, t in numbered if t.strip()][-1:]
    out: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for ent in rules:
        if ent.get("boot_end"):
            end = boot_end(lines)
            if end["end"] == "unclean":
                out.append((ent, {"lineno": end["lineno"], "text": end["text"]}))
            continue
        requires = [re.compile(p) for p in ent["requires"]]
        absent = [re.compile(p) for p in ent["absent"]]
        if (last and any(rx.search(t) for _n, t in numbered for rx in requires)
                and not any(rx.search(t) for _n, t in numbered for rx in absent)):
            out.append((ent, last[0]))
    return out


def diagnose(sources: Iterable[Mapping[str, Any]], max_lines: int = 5) -> list[dict[str, Any]]:
    """Match several logs at once (both nodes; vLLM log, journal, kernel log).

    sources: iterable of dicts {'lines': [...] or str, 'node': str|None, 'role': 'head'|'worker'|None,
    'source': 'vllm'|'journal'|'kernel'|None}.  Each finding gets 'log_source' (the source given).
    Returns all findings ordered like match() (errors before info, then rank), ties broken by
    the order of the sources and then line number.
    """
    merged: list[tuple[bool, int, int, int, dict[str, Any]]] = []
    for order, src in enumerate(sources):
        for f in match(src.get("lines") or [], node=src.get("node"), source=src.get("source"), role=src.get("role"),
                       max_lines=max_lines):
            f["log_source"] = src.get("source")
            merged.append((f["severity"] == "info", f["rank"], order, f["lines"][0]["lineno"], f))
    merged.sort(key=lambda t: t[:4])
    return [t[4] for t in merged]


def verdict(finding: Mapping[str, Any], width: int = 200) -> str:
    """One line: '<node>: <cause> — fix: <fix> [<line>]' (line = first matching line, trimmed)."""
    node = finding.get("node") or "node"
    line = finding["lines"][0]["text"].strip() if finding.get("lines") else ""
    if len(line) > width:
        line = line[:width - 3] + "..."
    return u"%s: %s \u2014 fix: %s [%s]" % (node, finding["cause"], finding["fix"], line)


_NON_DEFAULT = re.compile(r"non-default args: (\{.*\})\s*$")


def _dict_slice(text: str, key: str) -> str | None:
    """Return the text of the value of 'key' in a python-repr dict string, or None."""
    start = text.find("'%s': " % key)
    if start < 0:
        return None
    pos = start + len(key) + 4
    if pos < len(text) and text[pos] in "{[":
        depth = 0
        for i in range(pos, len(text)):
            if text[i] in "{[":
                depth += 1
            elif text[i] in "}]":
                depth -= 1
                if depth == 0:
                    return text[pos:i + 1]
        return text[pos:]
    end = pos
    depth = 0
    while end < len(text):
        ch = text[end]
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch in ",}" and depth <= 0:
            break
        end += 1
    return text[pos:end].strip()


def _norm_value(raw: str | None) -> str | None:
    if raw is None:
        return None
    raw = raw.strip()
    m = re.match(r"<\w+\.(\w+): .*>$", raw)
    if m:
        return m.group(1)
    return raw.strip("'\"")


def check_json_flags(lines: str | Iterable[str], expected: Mapping[str, Mapping[str, Any]],
                     node: str | None = None) -> list[dict[str, Any]]:
    """Detect JSON flags that vLLM did not receive as intended.

    vLLM logs 'non-default args: {...}' (python repr) at startup.  A JSON flag that arrived
    intact shows its keys there, e.g. 'compilation_config': {... 'cudagraph_mode':
    <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)> ...}.  This check compares it with what the
    launch script meant to pass.

    expected: {dest: {key: value}}, e.g. {'compilation_config': {'cudagraph_mode':
    'FULL_AND_PIECEWISE'}, 'speculative_config': {'num_speculative_tokens': 2}}.
    Values compare as strings, case-insensitively; enum reprs compare by member name.

    Returns findings (id 'json-flag-ignored', same shape as match()) with 'detail' naming the
    flag and key; [] when every expectation holds.  If no 'non-default args' line exists,
    returns [] (nothing to judge; the caller decides whether that is a failure).
    """
    if isinstance(lines, str):
        lines = lines.splitlines()
    ent = _BY_ID["json-flag-ignored"]
    findings: list[dict[str, Any]] = []
    for lineno, raw in enumerate(lines, 1):
        m = _NON_DEFAULT.search(raw.rstrip())
        if not m:
            continue
        text = m.group(1)
        for dest, keys in sorted(expected.items()):
            sub = _dict_slice(text, dest)
            problems: list[str] = []
            if sub is None:
                problems.append("%s absent from non-default args" % dest)
            else:
                for key, want in sorted(keys.items()):
                    got = _norm_value(_dict_slice(sub, key))
                    if got is None:
                        problems.append("%s.%s missing (want %s)" % (dest, key, want))
                    elif got.lower() != str(want).lower():
                        problems.append("%s.%s = %s (want %s)" % (dest, key, got, want))
            if problems:
                f = _finding(ent, node, [{"lineno": lineno, "text": raw.rstrip()}])
                f["detail"] = "; ".join(problems)
                findings.append(f)
    return findings
