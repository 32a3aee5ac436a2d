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
once. The lanes themselves are tests/harness/lanes.py. Exit status: 0 when every scenario passed.

`--first node-image --free lint sanity` (`make suite`): the images are built in one lane while lint and sanity, which
need none, take the others; every scenario and every other check waits for them (CI22: 173.7 s for the images, 99.9
CPU-s of it, beside lint and sanity; docs/measurements.md).

`--beside integration-sim unit-sim` (`make suite`): the simulator's integration tests and its own unit tests mostly
wait on the clock (CI36: integration-sim 448.7 s for 84.8 CPU-s); run last in a lane, integration-sim left the machine
7-66 % busy over the run's last ~250 s. Each takes a lane of its own from the start instead, beside the three (they
need no image).

`--then unit integration-sim ...` (`make suite`, the last step of `make test`) runs those make targets in the same
lanes once every scenario has started: the checks fill the lanes the shorter scenarios leave, while the longest
ones finish (alone, a scenario keeps this 2-core machine's cores only 40-60 % busy: restarts, readiness waits).
They run at the scenarios' priority: a check takes a lane as a scenario would, so the load stays what three
scenarios make, and several checks measure against the clock themselves (the simulator's rates, llama-benchy: at
nice 10 a 0.74 s rate window came out 5 % low). The checks' logs and timings are `make checks`'s (.cache/check-logs,
.cache/check-timings.json).
"""


import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lanes as lanes_mod  # noqa: E402  pylint: disable=wrong-import-position

ROOT = lanes_mod.ROOT
# Seconds each scenario took in a fresh-clone CI run (CI36, three at once; docs/measurements.md): used to start the
# longest first when no timings file is there yet (a clean clone's CI run).
WEIGHTS = {'replicas': 1763, 'drills': 1158, 'default': 1137, 'security': 704, 'image': 473, 'model': 181}
TIMINGS = os.path.join(ROOT, '.cache', 'molecule-timings.json')
LOG_DIR = os.path.join(ROOT, '.cache', 'molecule-logs')
CHECK_LOG_DIR = os.path.join(ROOT, '.cache', 'check-logs')


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
    return lanes_mod.longest_first(names, weights)


def runner(names, jobs, molecule, action, stream=False, then=(), first=None, free=(), beside=()):
    """The lanes that run `molecule <action> -s <name>` for each scenario, each under its scenario lock, then
    `make <target>` for each of `then`; `first` (a make target) before them all, `free` (checks in `then`) beside it,
    `beside` (checks in `then`) each in a lane of its own from the start."""
    scenarios = all_scenarios()
    make = os.environ.get('MAKE', 'make')

    then = list(then) + ([first] if first else [])

    def command(name):
        if name in then:
            return [make, '--no-print-directory', name]
        return ['flock', '/tmp/ds4-molecule-%s.lock' % name, molecule, '--base-config',
                '.config/molecule/config.yml', action, '-s', name]

    def describe(name):
        if name in then:
            return '--- make %s' % name
        env = scenario_env(name, scenarios)
        return '--- molecule %s -s %s (containers %s*, subnet %s.0/24)' % (
            action, name, env['DS4_MOLECULE_PREFIX'], env['DS4_MOLECULE_NET'])

    return lanes_mod.Lanes(list(names) + list(then), jobs, command,
                           lambda name: CHECK_LOG_DIR if name in then else LOG_DIR,
                           env=lambda name: dict(os.environ) if name in then else scenario_env(name, scenarios),
                           describe=describe, stream=stream,
                           label=lambda name: '' if name in then else ('suite:' if then and not name else 'molecule:'),
                           first=first, free=free, beside=beside)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    ap.add_argument('scenarios', nargs='*', help='scenario names (default: every molecule/*/molecule.yml)')
    ap.add_argument('--jobs', type=int, default=int(os.environ.get('MOLECULE_JOBS', '3')),
                    help='scenarios at once (MOLECULE_JOBS, default 3)')
    ap.add_argument('--molecule', default=os.path.join(ROOT, '.venv', 'bin', 'molecule'))
    ap.add_argument('--action', default='test', choices=('test', 'converge', 'verify', 'destroy'))
    ap.add_argument('--stream', action='store_true', help='also print the output as it comes (one scenario at a time)')
    ap.add_argument('--then', nargs='+', default=[], metavar='TARGET',
                    help='make targets (checks) to run in the same lanes once every scenario has started')
    ap.add_argument('--first', metavar='TARGET',
                    help='a make target (the images) run before every scenario and check, except the --free ones')
    ap.add_argument('--free', nargs='+', default=[], metavar='TARGET',
                    help='checks of --then that need nothing --first makes: they run beside it')
    ap.add_argument('--beside', nargs='+', default=[], metavar='TARGET',
                    help='checks of --then that mostly wait and need nothing --first makes: each in a lane of its own')
    args = ap.parse_args(argv)
    known = all_scenarios()
    names = args.scenarios or known
    unknown = [n for n in names if n not in known]
    if unknown:
        ap.error('unknown scenario(s) %s; known: %s' % (', '.join(unknown), ', '.join(known)))
    if args.jobs < 1:
        ap.error('--jobs / MOLECULE_JOBS must be 1 or more, got %d' % args.jobs)
    if args.stream and args.jobs != 1:
        ap.error('--stream runs one scenario at a time: give --jobs 1')
    if not set(args.free) <= set(args.then) or (args.free and not args.first):
        ap.error('--free names checks of --then, beside a --first target')
    if not set(args.beside) <= set(args.then) or set(args.beside) & set(args.free):
        ap.error('--beside names checks of --then, not of --free')
    if args.then and args.action != 'test':
        ap.error('--then runs checks after `molecule test` only, not after %s' % args.action)
    then = lanes_mod.longest_first(args.then, lanes_mod.load_weights(lanes_mod.TIMINGS, lanes_mod.WEIGHTS))
    lanes = runner(plan(names, lanes_mod.load_weights(TIMINGS, WEIGHTS)), args.jobs, args.molecule, args.action,
                   args.stream, then, args.first, args.free, args.beside)
    lanes.run()
    if lanes.failed():
        return 1
    if args.action == 'test':
        results = dict((n, r) for n, r in lanes.results.items() if n not in then and n != args.first)
        lanes_mod.save_weights(TIMINGS, WEIGHTS, results)
        if then:
            lanes_mod.save_weights(lanes_mod.TIMINGS, lanes_mod.WEIGHTS,
                                   dict((n, r) for n, r in lanes.results.items() if n in then and n != args.first))
    return 0


if __name__ == '__main__':
    sys.exit(main())
