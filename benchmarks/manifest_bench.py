# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark (not a timed test) of the model manifest: copy and full-verify vs raw read speed.

On one machine: write a synthetic model directory (a few shards of random bytes plus
small config files) in a temp dir, then measure, with the page cache evicted before
each pass (fsync + posix_fadvise DONTNEED; checked against an O_DIRECT read):

  read    one sequential buffered pass over every file (the baseline)
  direct  the same with O_DIRECT (cross-check that eviction worked)
  copy    parallel-stream copy src -> dst on the same disk (read + write + fsync),
          the local stand-in for the head -> worker copy
  verify  dgxspark.ds4 model_manifest full check of dst (parallel sha256)

and prints throughputs and the two ratios the compass asks for:
  copy throughput / read throughput  (target >= 0.8)
  verify time / read time            (target <= 1.2)

Honest caveats are printed too: copy on ONE disk reads and writes the same device,
so it cannot reach the read speed of that device; the head -> worker copy reads on
one node and writes on the other.

Usage: python3 benchmarks/manifest_bench.py [--size-gib 2] [--shards 4] [--dir /var/tmp] [--json]
"""


import argparse
import hashlib
import importlib.util
import json
import mmap
import os
import shutil
import sys
import tempfile
import time

from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
MU_PATH = os.path.join(HERE, '..', 'plugins', 'module_utils', '_model', 'model_manifest.py')
MIB = 1024 * 1024
CHUNK = 8 * MIB


def load_manifest_utils():
    spec = importlib.util.spec_from_file_location('ds4_model_manifest', MU_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def files_under(root):
    out = []
    for dirpath, dummy, names in os.walk(root):
        for name in sorted(names):
            out.append(os.path.join(dirpath, name))
    return sorted(out)


def evict(paths):
    """Write back and drop these files' pages (no root needed, unlike drop_caches)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def make_model(root, size_gib, shards):
    os.makedirs(root)
    per = int(size_gib * 1024 * MIB) // shards
    per -= per % 4096
    block = os.urandom(CHUNK)
    for i in range(shards):
        path = os.path.join(root, 'model-%05d-of-%05d.safetensors' % (i + 1, shards))
        with open(path, 'wb') as handle:
            left = per
            n = 0
            while left:
                # vary every chunk so no file system can dedupe or compress it
                piece = block if n % 16 else os.urandom(CHUNK)
                block = piece
                head = hashlib.sha256(b'%d-%d' % (i, n)).digest()
                data = head + piece[len(head):]
                take = min(left, len(data))
                handle.write(data[:take])
                left -= take
                n += 1
            handle.flush()
            os.fsync(handle.fileno())
    for name, text in (('config.json', '{"model_type": "deepseek_v4"}\n'),
                       ('tokenizer.json', '{"version": "1.0"}\n' * 1000)):
        with open(os.path.join(root, name), 'w') as handle:
            handle.write(text)
    return files_under(root)


def read_pass(paths, direct=False):
    total = 0
    start = time.time()
    if direct:
        buf = mmap.mmap(-1, CHUNK)  # page aligned, as O_DIRECT needs
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            except OSError:
                return None
            try:
                with open(fd, 'rb', buffering=0, closefd=False) as handle:
                    while True:
                        try:
                            num = handle.readinto(buf)
                        except OSError:
                            return None
                        if not num:
                            break
                        total += num
            finally:
                os.close(fd)
    else:
        buf = bytearray(CHUNK)
        for path in paths:
            with open(path, 'rb', buffering=0) as handle:
                while True:
                    num = handle.readinto(buf)
                    if not num:
                        break
                    total += num
    return total, time.time() - start


def write_pass(path, nbytes):
    """Sequential write + fsync of nbytes (the disk's write speed bounds any copy onto it)."""
    buf = os.urandom(CHUNK)
    start = time.time()
    with open(path, 'wb', buffering=0) as handle:
        left = nbytes
        while left > 0:
            left -= handle.write(buf[:min(left, CHUNK)])
        os.fsync(handle.fileno())
    elapsed = time.time() - start
    os.unlink(path)
    return nbytes, elapsed


def copy_one(src, dst):
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    with open(src, 'rb', buffering=0) as fin, open(dst, 'wb', buffering=0) as fout:
        while True:
            num = fin.readinto(buf)
            if not num:
                break
            fout.write(view[:num])
        os.fsync(fout.fileno())
    return os.path.getsize(dst)


def copy_tree(src_root, dst_root, streams):
    jobs = []
    for path in files_under(src_root):
        rel = os.path.relpath(path, src_root)
        dst = os.path.join(dst_root, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        jobs.append((path, dst))
    start = time.time()
    with ThreadPoolExecutor(max_workers=streams) as pool:
        total = sum(pool.map(lambda job: copy_one(*job), jobs))
    return total, time.time() - start


def sha_core_speed():
    data = os.urandom(64 * MIB)
    start = time.time()
    hashlib.sha256(data).hexdigest()
    return len(data) / (time.time() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--size-gib', type=float, default=2.0)
    parser.add_argument('--shards', type=int, default=4)
    parser.add_argument('--dir', default=None, help='parent of the temp dir (same disk for source and copy)')
    parser.add_argument('--copy-streams', type=int, default=4)
    parser.add_argument('--workers', type=int, default=None, help='hashing threads (default: CPU count)')
    parser.add_argument('--keep', action='store_true')
    parser.add_argument('--json', action='store_true')
    args = parser.parse_args()

    mm = load_manifest_utils()
    base = tempfile.mkdtemp(prefix='ds4-manifest-bench-', dir=args.dir)
    src = os.path.join(base, 'src')
    dst = os.path.join(base, 'dst')
    fig = dict(size_gib=args.size_gib, shards=args.shards, cpus=os.cpu_count(), dir=base,
               workers=args.workers or mm.default_workers(), copy_streams=args.copy_streams)
    try:
        start = time.time()
        paths = make_model(src, args.size_gib, args.shards)
        fig['create_s'] = round(time.time() - start, 2)
        fig['sha256_one_core_mib_s'] = round(sha_core_speed() / MIB, 1)

        hot = read_pass(paths)  # pages still cached from writing: shows the page-cache speed
        evict(paths)
        nbytes, read_s = read_pass(paths)
        evict(paths)
        direct = read_pass(paths, direct=True)
        evict(paths)
        wbytes, write_s = write_pass(os.path.join(base, 'write-test.bin'), nbytes)
        fig['write_mib_s'] = round(wbytes / write_s / MIB, 1)
        fig.update(bytes=nbytes, read_s=round(read_s, 3), read_mib_s=round(nbytes / read_s / MIB, 1),
                   hot_read_mib_s=round(hot[0] / hot[1] / MIB, 1))
        if direct:
            fig['direct_read_mib_s'] = round(direct[0] / direct[1] / MIB, 1)

        start = time.time()
        built = mm.build(src, workers=args.workers)
        fig['build_s'] = round(time.time() - start, 3)
        evict(paths)

        copied, copy_s = copy_tree(src, dst, args.copy_streams)
        dst_paths = files_under(dst)
        evict(paths)
        evict(dst_paths)
        fig.update(copy_s=round(copy_s, 3), copy_mib_s=round(copied / copy_s / MIB, 1))

        start = time.time()
        res = mm.check(dst, built['manifest'], mode='full', workers=args.workers)
        verify_s = time.time() - start
        if not res['ok']:
            raise SystemExit('verify found differences: %s' % res['problems'])
        fig.update(verify_s=round(verify_s, 3), verify_mib_s=round(nbytes / verify_s / MIB, 1))

        evict(dst_paths)
        start = time.time()
        mm.check(dst, built['manifest'], mode='full', workers=1)
        fig['verify_1_worker_s'] = round(time.time() - start, 3)

        fig['copy_vs_read_throughput'] = round(fig['copy_mib_s'] / fig['read_mib_s'], 3)
        fig['verify_vs_read_time'] = round(verify_s / read_s, 3)
        fig['copy_vs_write_throughput'] = round(fig['copy_mib_s'] / fig['write_mib_s'], 3)
        fig['copy_target_met'] = fig['copy_vs_read_throughput'] >= 0.8
        fig['verify_target_met'] = fig['verify_vs_read_time'] <= 1.2
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)

    if args.json:
        print(json.dumps(fig, indent=2, sort_keys=True))
        return
    print('synthetic model: %.2f GiB in %d shards + 2 configs under %s (%d CPUs)'
          % (fig['bytes'] / 1024.0 ** 3, args.shards, base, fig['cpus']))
    print('sha256 on one core (in memory): %8.1f MiB/s' % fig['sha256_one_core_mib_s'])
    print('read, page cache hot:           %8.1f MiB/s  (no eviction: what a careless benchmark measures)'
          % fig['hot_read_mib_s'])
    print('read, evicted, buffered:        %8.1f MiB/s  %.2f s  <- baseline' % (fig['read_mib_s'], read_s))
    if direct:
        print('read, O_DIRECT (cross-check):   %8.1f MiB/s' % fig['direct_read_mib_s'])
    print('write + fsync, sequential:      %8.1f MiB/s  (a copy onto this disk cannot beat this)' % fig['write_mib_s'])
    print('build manifest (hash src):      %8.2f s' % fig['build_s'])
    print('copy, %d streams, incl. fsync:   %8.1f MiB/s  %.2f s' % (args.copy_streams, fig['copy_mib_s'], copy_s))
    print('verify full, %2d workers:        %8.1f MiB/s  %.2f s  (1 worker: %.2f s)'
          % (fig['workers'], fig['verify_mib_s'], verify_s, fig['verify_1_worker_s']))
    print('copy throughput / read throughput = %.2f  (target >= 0.8: %s)'
          % (fig['copy_vs_read_throughput'], 'met' if fig['copy_target_met'] else 'NOT met'))
    print('copy throughput / write speed     = %.2f  (how close the copy gets to the disk\'s write bound)'
          % fig['copy_vs_write_throughput'])
    print('verify time / read time           = %.2f  (target <= 1.2: %s)'
          % (fig['verify_vs_read_time'], 'met' if fig['verify_target_met'] else 'NOT met'))
    print('note: the copy reads and writes the same disk here; head->worker reads on one node and writes on the other.')


if __name__ == '__main__':
    sys.exit(main())
