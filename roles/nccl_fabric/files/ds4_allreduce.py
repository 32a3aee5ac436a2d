# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two-rank NCCL all-reduce preflight for the dgxspark.ds4 fabric (one rank per node).

Run inside the profile's image with the service's env file, e.g.
  docker run --rm --network host --ipc host --gpus all --device /dev/infiniband \
    --ulimit memlock=-1 --env-file /etc/dgxspark-ds4/nccl.env -e NCCL_DEBUG=INFO \
    -e NCCL_DEBUG_SUBSYS=INIT,NET -v /usr/local/libexec/dgxspark-ds4/ds4_allreduce.py:/ds4_allreduce.py:ro \
    --entrypoint <image python> <image> /ds4_allreduce.py --rank R --world-size 2 --master-addr <head fabric ip> --master-port 29511

Prints nccl-tests style rows on rank 0 (parsed by dgxspark.ds4 nccl_log.parse_rows):
  #       size         count      type   redop    root     time   algbw   busbw
Each row's result is checked (sum of rank+1 over ranks); a wrong sum exits 3.
Two ranks on one host with two GPUs: pass --local-rank (default: rank modulo GPU count).
"""


import argparse
import os
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--master-addr", required=True)
    p.add_argument("--master-port", type=int, default=29511)
    p.add_argument("--local-rank", type=int, default=None, help="CUDA device index (default: rank %% device count)")
    p.add_argument("--min-bytes", type=int, default=1 << 20)
    p.add_argument("--max-bytes", type=int, default=1 << 30)
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--timeout-s", type=int, default=300)
    return p.parse_args(argv)


def sizes(min_bytes, max_bytes, factor):
    out = []
    size = min_bytes
    while size < max_bytes:
        out.append(size)
        size *= factor
    out.append(max_bytes)
    return out


def main(argv=None):
    args = parse_args(argv)
    import datetime
    import torch
    import torch.distributed as dist

    ndev = torch.cuda.device_count()
    if ndev < 1:
        print("ds4_allreduce: no CUDA device visible (pass --gpus all)", file=sys.stderr)
        return 2
    local = args.local_rank if args.local_rank is not None else args.rank % ndev
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    init = "tcp://%s:%d" % (args.master_addr, args.master_port)
    print("# ds4_allreduce rank %d/%d device cuda:%d (%s) init %s torch %s nccl %s" % (
        args.rank, args.world_size, local, torch.cuda.get_device_name(local), init, torch.__version__,
        ".".join(str(v) for v in torch.cuda.nccl.version())))
    for name in ("VLLM_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_NET"):
        print("# env %s=%s" % (name, os.environ.get(name, "")))
    sys.stdout.flush()
    kwargs = {"backend": "nccl", "init_method": init, "rank": args.rank, "world_size": args.world_size,
              "timeout": datetime.timedelta(seconds=args.timeout_s)}
    try:
        dist.init_process_group(device_id=dev, **kwargs)
    except TypeError:
        dist.init_process_group(**kwargs)
    n = args.world_size
    if args.rank == 0:
        print("#")
        print("# %10s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s" % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"))
        print("# %10s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s" % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", ""))
    wrong_total = 0
    for size in sizes(args.min_bytes, args.max_bytes, args.factor):
        count = size // 4
        buf = torch.empty(count, dtype=torch.float32, device=dev)
        for _warm in range(args.warmup):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        dist.barrier()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _iter in range(args.iters):
            dist.all_reduce(buf)
        end.record()
        torch.cuda.synchronize()
        time_us = start.elapsed_time(end) * 1000.0 / args.iters
        # Timing is per rank; report the slowest rank like nccl-tests.
        t = torch.tensor([time_us], dtype=torch.float64, device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        time_us = float(t.item())
        buf.fill_(float(args.rank + 1))
        dist.all_reduce(buf)
        torch.cuda.synchronize()
        expected = float(n * (n + 1) // 2)
        wrong = int((buf != expected).sum().item())
        wrong_total += wrong
        algbw = size / (time_us * 1e-6) / 1e9
        busbw = algbw * 2.0 * (n - 1) / n
        if args.rank == 0:
            print("  %10d  %12d  %8s  %6s  %6d  %9.1f  %7.2f  %7.2f  %6d" % (size, count, "float", "sum", -1, time_us, algbw, busbw, wrong))
            sys.stdout.flush()
        del buf
    dist.barrier()
    dist.destroy_process_group()
    if args.rank == 0:
        print("# ds4_allreduce done %s wrong=%d" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), wrong_total))
    return 3 if wrong_total else 0


if __name__ == "__main__":
    sys.exit(main())
