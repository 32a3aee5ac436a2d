# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run Molecule scenarios side by side on one Docker engine (test harness, `make molecule`).

Each scenario gets its own node-container prefix (DS4_MOLECULE_PREFIX=ds4-<scenario>-) and fabric subnet
(DS4_MOLECULE_NET=10.77.<n>, n = the scenario's place among molecule/*/molecule.yml + 1), which the shared
create/destroy playbooks (molecule/resources/playbooks) and the inventories read, so no two scenarios share a
container or network name. Up to --jobs scenarios run at once, the longest first (weights from the last
recorded run, .cache/molecule-timings.json, else WEIGHTS). Each scenario's output goes to
.cache/molecule-logs/<scenario>.log; a failed scenario's log is printed whole. One TIMING line per scenario.
A lock per scenario (/tmp/ds4-molecule-<scenario>.lock) keeps two checkouts from running the same scenario at
once. Exit status: 0 when every scenario passed.
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
# Seconds each scenario took in the last fresh-clone CI run before parallel runs (docs/measurements.md):
# used to start the longest first when no timings file is there yet.
WEIGHTS = {'default': 770, 'replicas': 600, 'drills': 600, 'security': 290, 'image': 235, 'model': 120}
TIMINGS = os.path.join(ROOT, '.cache', 'molecule-timings.json')
LOG_DIR = os.path.join(ROOT, '.cache', 'molecule-logs')


def all_scenarios():
    base = os.path.join(ROOT, 'molecule')
    return sorted(d for d in os.listdir(base) if os.path.isfile(os.path.join(base, d, 'molecule.yml')))


# Scenarios whose inventory names its containers and addresses (users read them): `default` runs on the demo's
# inventory (molecule/demo/inventory: `make demo` brings it up and prints its endpoint, 10.77.100.11).
FIXED_NETS = {'default': '10.77.100'}
FIXED_PREFIXES = {'default': 'ds4-demo-'}


def scenario_env(name, scenarios):
    """The environment that gives scenario `name` its own containers and subnet."""
    env = dict(os.environ)
    env['DS4_MOLECULE_PREFIX'] = FIXED_PREFIXES.get(name) or 'ds4-%s-' % name
    env['DS4_MOLECULE_NET'] = FIXED_NETS.get(name) or '10.77.%d' % (scenarios.index(name) + 1)
    return env


def plan(names, weights):
    """Longest first (unknown scenarios first of all: they may be long)."""
    return sorted(names, key=lambda n: (-weights.get(n, 10 ** 6), n))


def _load_weights():
    weights = dict(WEIGHTS)
    try:
        with open(TIMINGS) as fh:
            weights.update(json.load(fh))
    except (OSError, ValueError):
        pass
    return weights


class Runner(object):
    def __init__(self, names, jobs, molecule, action, stream=False):
        self.stream = stream
        self.queue = list(names)
        self.jobs = max(1, jobs)
        self.molecule = molecule
        self.action = action
        self.scenarios = all_scenarios()
        self.lock = threading.Lock()
        self.results = {}

    def _next(self):
        with self.lock:
            return self.queue.pop(0) if self.queue else None

    def _run_one(self, name):
        os.makedirs(LOG_DIR, exist_ok=True)
        log = os.path.join(LOG_DIR, '%s.log' % name)
        cmd = ['flock', '/tmp/ds4-molecule-%s.lock' % name, self.molecule, '--base-config',
               '.config/molecule/config.yml', self.action, '-s', name]
        env = scenario_env(name, self.scenarios)
        with self.lock:
            print('--- molecule %s -s %s (containers %s*, subnet %s.0/24, log %s)'
                  % (self.action, name, env['DS4_MOLECULE_PREFIX'], env['DS4_MOLECULE_NET'],
                     os.path.relpath(log, ROOT)), flush=True)
        t0 = time.monotonic()
        with open(log, 'w') as out:
            if self.stream:
                proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        universal_newlines=True)
                for line in proc.stdout:
                    out.write(line)
                    sys.stdout.write(line)
                rc = proc.wait()
            else:
                rc = subprocess.call(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        took = time.monotonic() - t0
        with self.lock:
            self.results[name] = (rc, took)
            print('TIMING molecule:%-9s %7.1f s  %s' % (name, took, 'ok' if rc == 0 else 'FAILED (rc %d)' % rc),
                  flush=True)
            if rc != 0 and not self.stream:
                print('=== log of the failed scenario %s (%s)' % (name, os.path.relpath(log, ROOT)), flush=True)
                with open(log) as fh:
                    sys.stdout.write(fh.read())
                print('=== end of the log of %s' % name, flush=True)

    def _lane(self):
        while True:
            name = self._next()
            if name is None:
                return
            self._run_one(name)

    def run(self):
        lanes = [threading.Thread(target=self._lane) for _lane_no in range(min(self.jobs, len(self.queue)))]
        for lane in lanes:
            lane.start()
        for lane in lanes:
            lane.join()
        return self.results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    ap.add_argument('scenarios', nargs='*', help='scenario names (default: every molecule/*/molecule.yml)')
    ap.add_argument('--jobs', type=int, default=int(os.environ.get('MOLECULE_JOBS', '3')),
                    help='scenarios at once (MOLECULE_JOBS, default 3)')
    ap.add_argument('--molecule', default=os.path.join(ROOT, '.venv', 'bin', 'molecule'))
    ap.add_argument('--action', default='test', choices=('test', 'converge', 'destroy'))
    ap.add_argument('--stream', action='store_true', help='also print the output as it comes (one scenario at a time)')
    args = ap.parse_args(argv)
    known = all_scenarios()
    names = args.scenarios or known
    unknown = [n for n in names if n not in known]
    if unknown:
        ap.error('unknown scenario(s) %s; known: %s' % (', '.join(unknown), ', '.join(known)))
    if args.jobs < 1:
        ap.error('--jobs / MOLECULE_JOBS must be 1 or more, got %d' % args.jobs)
    t0 = time.monotonic()
    if args.stream and args.jobs != 1:
        ap.error('--stream runs one scenario at a time: give --jobs 1')
    results = Runner(plan(names, _load_weights()), args.jobs, args.molecule, args.action, args.stream).run()
    failed = sorted(n for n, (rc, _took) in results.items() if rc != 0)
    print('TIMING molecule:%-9s %7.1f s  %d scenarios, %d at once%s' % (
        'all', time.monotonic() - t0, len(results), args.jobs, ', FAILED: ' + ' '.join(failed) if failed else ''))
    if args.action == 'test' and not failed:
        weights = _load_weights()
        weights.update(dict((n, round(took, 1)) for n, (_rc, took) in results.items()))
        os.makedirs(os.path.dirname(TIMINGS), exist_ok=True)
        with open(TIMINGS, 'w') as fh:
            json.dump(weights, fh, indent=1, sort_keys=True)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
