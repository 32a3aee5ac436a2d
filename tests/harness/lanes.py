# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run named jobs side by side in a few lanes (test harness: `make checks`, and `make molecule` through
molecule_parallel.py).

Up to --jobs jobs run at once, in the order given (callers sort longest first). Each job's output goes to
<log dir>/<name>.log; a failed job's log is printed whole after it ends, so CI output shows every failure in full.
One `TIMING <name> <seconds> s ok|FAILED` line per job, one for all of them. As a command:
`python tests/harness/lanes.py --jobs 2 unit integration-sim integration-rest lint sanity` runs `make --no-print-directory <name>`
for each name, the longest first (seconds from the last green run in .cache/check-timings.json, else WEIGHTS).
Exit status: 0 when every job passed.
"""


import argparse
import json
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
# Seconds each `make` check took in a quiet fresh-clone CI run (CI36, docs/measurements.md; unit = CI36's 403 s less
# unit-sim's 136 s measured alone), for the longest-first order before a timings file exists.
WEIGHTS = {'integration-sim': 449, 'integration-rest': 212, 'integration': 661, 'unit': 270, 'unit-sim': 136,
           'sanity': 223, 'lint': 92}
TIMINGS = os.path.join(ROOT, '.cache', 'check-timings.json')


def longest_first(names, weights):
    """Longest first (unknown jobs first of all: they may be long)."""
    return sorted(names, key=lambda n: (-weights.get(n, 10 ** 6), n))


def load_weights(path, defaults):
    weights = dict(defaults)
    try:
        with open(path) as fh:
            weights.update(json.load(fh))
    except (OSError, ValueError):
        pass
    return weights


def save_weights(path, defaults, results):
    """Record each job's time after a green run (the next run's order)."""
    weights = load_weights(path, defaults)
    weights.update(dict((n, round(took, 1)) for n, (_rc, took) in results.items()))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as fh:
        json.dump(weights, fh, indent=1, sort_keys=True)


def machine_cpu():
    """(busy, total) jiffies of every CPU of this machine since boot (/proc/stat: busy = user, nice, system, irq,
    softirq, steal; total adds idle and iowait)."""
    with open('/proc/stat') as handle:
        fields = [int(x) for x in handle.readline().split()[1:9]]
    busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + fields[7]
    return busy, busy + fields[3] + fields[4]


def wait_with_cpu(proc):
    """Wait for a Popen child -> (exit status, CPU seconds of it and every descendant it waited for: ansible-playbook's
    forked workers, the ssh clients, pytest; not an ssh ControlMaster that outlives its run, not the node containers)."""
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime


class Lanes(object):
    """`command(name)` gives a job's argv, `env(name)` its environment, `describe(name)` the line printed as it
    starts. `stream` also copies the output to stdout as it comes (for one lane). `log_dir` and `label` (the TIMING
    lines' prefix) are a string or a function of the job's name (jobs of two kinds in one set of lanes)."""

    def __init__(self, names, jobs, command, log_dir, env=None, describe=None, stream=False, label='', first=None,
                 free=(), beside=()):
        """`first`: a job that starts before any other and that every job not in `free` waits for (a failed `first`
        fails them unrun); the jobs in `free` take the other lanes meanwhile. `beside`: jobs (of `names`) that mostly
        wait (timed requests, sleeps) and need nothing `first` makes: each starts at once in a lane of its own, beside
        the `jobs` lanes, so its waiting fills no lane that a busy job could use."""
        self.beside = [n for n in names if n in set(beside)]
        self.queue = [n for n in names if n not in set(beside)]
        self.jobs = max(1, jobs)
        self.command = command
        self.log_dir = log_dir
        self.env = env or (lambda _name: dict(os.environ))
        self.describe = describe or (lambda name: '--- %s' % name)
        self.stream = stream
        self.label = label
        self.lock = threading.Lock()
        self.results = {}
        self.cpu = {}
        self.first, self.free = first, set(free)
        self.first_done = threading.Event()
        if first is not None:
            self.queue = [first] + [n for n in self.queue if n in self.free] + [
                n for n in self.queue if n not in self.free and n != first]
        else:
            self.first_done.set()

    def _next(self):
        with self.lock:
            return self.queue.pop(0) if self.queue else None

    def _label(self, name):
        return self.label(name) if callable(self.label) else self.label

    def _run_one(self, name):
        log_dir = self.log_dir(name) if callable(self.log_dir) else self.log_dir
        os.makedirs(log_dir, exist_ok=True)
        log = os.path.join(log_dir, '%s.log' % name)
        with self.lock:
            print('%s (log %s)' % (self.describe(name), os.path.relpath(log, ROOT)), flush=True)
        t0 = time.monotonic()
        cmd, env = self.command(name), self.env(name)
        with open(log, 'w') as out:
            if self.stream:
                proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        universal_newlines=True)
                for line in proc.stdout:
                    out.write(line)
                    sys.stdout.write(line)
                rc = proc.wait()
                cpu = None
            else:
                proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
                rc, cpu = wait_with_cpu(proc)
        took = time.monotonic() - t0
        with self.lock:
            self.results[name] = (rc, took)
            self.cpu[name] = cpu
            status = 'ok' if rc == 0 else 'FAILED (rc %d)' % rc
            used = '' if cpu is None else '  (CPU %.1f s)' % cpu
            print('TIMING %-15s %7.1f s  %s%s' % (self._label(name) + name, took, status, used), flush=True)
            if rc != 0 and not self.stream:
                print('=== log of the failed job %s (%s)' % (name, os.path.relpath(log, ROOT)), flush=True)
                with open(log) as fh:
                    sys.stdout.write(fh.read())
                print('=== end of the log of %s' % name, flush=True)

    def _lane(self):
        while True:
            name = self._next()
            if name is None:
                return
            if name != self.first and name not in self.free:
                self.first_done.wait()
                if self.results.get(self.first, (0, 0))[0] != 0:
                    with self.lock:
                        self.results[name] = (1, 0.0)
                        print('TIMING %-15s %7.1f s  FAILED (not run: %s failed)' % (
                            self._label(name) + name, 0.0, self.first), flush=True)
                    continue
            try:
                self._run_one(name)
            finally:
                if name == self.first:
                    with self.lock:
                        self.results.setdefault(name, (1, 0.0))  # it raised: nothing waiting may run
                    self.first_done.set()

    def run(self):
        t0, busy0 = time.monotonic(), machine_cpu()
        count = len(self.queue) + len(self.beside)
        lanes = [threading.Thread(target=self._run_one, args=(name,)) for name in self.beside]
        lanes += [threading.Thread(target=self._lane) for _lane_no in range(min(self.jobs, len(self.queue)))]
        for lane in lanes:
            lane.start()
        for lane in lanes:
            lane.join()
        failed = self.failed()
        busy1 = machine_cpu()
        print('TIMING %-15s %7.1f s  %d jobs, %d at once%s%s; the machine\'s %d CPUs %.0f %% busy' % (
            self._label('') + 'all', time.monotonic() - t0, count, self.jobs,
            ' (and %s beside)' % ' '.join(self.beside) if self.beside else '',
            ', FAILED: ' + ' '.join(failed) if failed else '', os.cpu_count() or 0,
            100.0 * (busy1[0] - busy0[0]) / max(busy1[1] - busy0[1], 1)), flush=True)
        return self.results

    def failed(self):
        return sorted(n for n, (rc, _took) in self.results.items() if rc != 0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    ap.add_argument('targets', nargs='+', help='make targets to run side by side')
    ap.add_argument('--jobs', type=int, default=int(os.environ.get('CHECK_JOBS', '2')),
                    help='targets at once (CHECK_JOBS, default 2)')
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error('--jobs / CHECK_JOBS must be 1 or more, got %d' % args.jobs)
    make = os.environ.get('MAKE', 'make')
    lanes = Lanes(longest_first(args.targets, load_weights(TIMINGS, WEIGHTS)), args.jobs,
                  command=lambda name: [make, '--no-print-directory', name],
                  log_dir=os.path.join(ROOT, '.cache', 'check-logs'),
                  describe=lambda name: '--- make %s' % name)
    lanes.run()
    if lanes.failed():
        return 1
    save_weights(TIMINGS, WEIGHTS, lanes.results)
    return 0


if __name__ == '__main__':
    sys.exit(main())
