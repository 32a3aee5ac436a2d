# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Record a real kernel filling its page cache, and what the memory guard says about every reading (TEST CODE ONLY).

Run on a Linux host that is not serving anything (the lent GPU machine; never a Spark in production): a sparse file
of 1.2 x MemTotal is read once through the page cache (no disk space used: the holes read as zero pages that still
fill the cache), so the kernel's page cache grows until kswapd has to keep MemFree between its watermarks, the
"full page cache" state of every serving Spark after a model load. Every 0.5 s the real /proc/meminfo,
/proc/pressure/memory and /proc/zoneinfo are read and judged by the collection's own memory guard
(plugins/module_utils/_node/memory_guard.py: assess() per reading, MemoryGuard.decide() over the sequence, its default
settings). The samples (numbers, levels, actions) and the raw /proc texts of the reading with the lowest MemFree go
to OUT/memory_band.json; tests/unit/plugins/module_utils/test_memory_guard_real_host.py replays them through the
current guard.

  python3 tests/harness/memory_band_real.py OUT_DIR [--deadline-s 240] [--factor 1.2]
"""

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.realpath(os.path.join(HERE, '..', '..'))


def load_guard():
    """The node package by its collection names (as on a node): a temporary ansible_collections/dgxspark/ds4 -> this
    checkout on sys.path. Returns (memory_guard, node_probe)."""
    root = tempfile.mkdtemp(prefix='ds4-harness-')
    os.makedirs(os.path.join(root, 'ansible_collections', 'dgxspark'))
    os.symlink(REPO, os.path.join(root, 'ansible_collections', 'dgxspark', 'ds4'))
    sys.path.insert(0, root)
    node = importlib.import_module('ansible_collections.dgxspark.ds4.plugins.module_utils._node')
    return (importlib.import_module(node.__name__ + '.memory_guard'), importlib.import_module(node.__name__ + '.node_probe'))


def read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except OSError as exc:
        return '# %s: %s\n' % (path, exc)


def snapshot():
    return {'meminfo': read('/proc/meminfo'), 'psi': read('/proc/pressure/memory'),
            'zoneinfo': read('/proc/zoneinfo'), 'min_free_kbytes': read('/proc/sys/vm/min_free_kbytes')}


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument('out')
    ap.add_argument('--deadline-s', type=float, default=240)
    ap.add_argument('--factor', type=float, default=1.2)
    ap.add_argument('--dir', default=None, help='where the sparse file goes (a disk filesystem, not tmpfs)')
    args = ap.parse_args(argv)
    mg, node_probe = load_guard()
    os.makedirs(args.out, exist_ok=True)
    first = snapshot()
    total = node_probe.parse_meminfo(first['meminfo'], in_bytes=True)['MemTotal']
    where = args.dir
    if where is None:
        for cand in ('/var/tmp', '/root', '/tmp'):
            fs = subprocess.run(['stat', '-f', '-c', '%T', cand], capture_output=True, text=True, check=False).stdout.strip()
            if fs and fs != 'tmpfs':
                where = cand
                break
    fstype = subprocess.run(['stat', '-f', '-c', '%T', where], capture_output=True, text=True, check=False).stdout.strip()
    path = os.path.join(where, 'ds4-memory-band.sparse')
    size = int(total * args.factor)
    with open(path, 'wb') as fh:
        fh.truncate(size)
    guard = mg.MemoryGuard({'memory_guard': True})
    samples, lowest = [], None
    t0 = time.monotonic()
    reader = subprocess.Popen(['dd', 'if=%s' % path, 'of=/dev/null', 'bs=16M'], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    after = None
    try:
        while time.monotonic() - t0 < args.deadline_s:
            snap = snapshot()
            reading = guard.assess('host', snap['meminfo'], snap['psi'], zoneinfo_text=snap['zoneinfo'],
                                   min_free_text=snap['min_free_kbytes'])
            action = guard.decide([reading])
            info = node_probe.parse_meminfo(snap['meminfo'], in_bytes=True)
            psi = mg.parse_psi(snap['psi'])
            sample = {'t': round(time.monotonic() - t0, 2), 'level': reading.get('level'), 'action': action,
                      'why': reading.get('why'), 'mem_free': info.get('MemFree'), 'mem_available': info.get('MemAvailable'),
                      'cached': info.get('Cached'), 'psi_some_avg10': psi.get('some', {}).get('avg10'),
                      'psi_full_avg10': psi.get('full', {}).get('avg10'),
                      'watermarks': reading.get('watermarks'), 'reader_done': reader.poll() is not None}
            samples.append(sample)
            if lowest is None or (info.get('MemFree') or 0) < lowest[0]:
                lowest = (info.get('MemFree') or 0, snap, sample['t'])
            if reader.poll() is not None:
                after = after if after is not None else time.monotonic()
                if time.monotonic() - after > 5:
                    break
            time.sleep(0.5)
    finally:
        if reader.poll() is None:
            reader.kill()
        os.unlink(path)
    result = {'recorded': {'date': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()), 'uname': ' '.join(os.uname()),
                           'sparse_file': {'dir': where, 'fstype': fstype, 'bytes': size},
                           'dd_stderr': reader.stderr.read() if reader.stderr else '',
                           'recorder': 'python3 tests/harness/memory_band_real.py ' + ' '.join(argv)},
              'first': first, 'lowest': {'t': lowest[2], 'texts': lowest[1]}, 'samples': samples}
    with open(os.path.join(args.out, 'memory_band.json'), 'w') as fh:
        json.dump(result, fh, indent=1, sort_keys=True, default=str)
    levels = sorted(set(str(s['level']) for s in samples))
    actions = [s for s in samples if s['action']]
    print('%d samples, levels %s, actions %d; MemFree lowest %.3f GiB at t=%.1f; cached max %.1f GiB; fs %s'
          % (len(samples), levels, len(actions), lowest[0] / 2.0 ** 30, lowest[2],
             max(s['cached'] or 0 for s in samples) / 2.0 ** 30, fstype))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
