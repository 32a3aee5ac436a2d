# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Converge benchmark (not a timed test): what the controller spends on each everyday operation, against a floor.

Runs on the converged Molecule `replicas` scenario (two TP=2 pairs behind vllm-router, TLS on, over ssh: `make
converge-bench` converges it first) and measures, in one run, each figure in wall seconds and controller CPU-seconds
(getrusage of the children: ansible-playbook, its forked workers, the ssh clients it waited for; the ControlMaster
processes that outlive a run are not counted) and as a ratio to the floor:

  floor        one playbook run over the same inventory that gathers nothing and runs one ansible.builtin.ping per
               host (process start, inventory, variables, one module round trip per node)
  no-op        site.yml that changes nothing (changed=0 is checked, not assumed; every rank's container StartedAt is
               read before and after it: "restarted: none", or the benchmark fails naming the rank)
  one flag     site.yml with one launch flag changed (max-num-seqs), then back; orchestration = wall minus the
               waiting of the restart itself (the restart contract's stop/start/wait tasks and readiness)
  recipe       switch.yml to the throughput recipe (rolling, pair by pair), then rollback.yml back; orchestration =
               wall minus drains, restarts and readiness
  image        site.yml with another image (ds4-vllm-sim:next, same vLLM), then back; orchestration as above
  status       status.yml
  rolling      restart.yml over both pairs (drain, restart, readiness, back into rotation, one pair at a time);
               orchestration = wall minus drains, restarts and readiness
  slowest      the 15 slowest tasks of the no-op run (ansible.posix.profile_tasks)

Each figure also gives "smoke s": the smoke checks' own requests (validate.yml's one task that sends them, answered by
the simulator at its token rate: time spent waiting for the model, not on the controller), and the orchestration
without them. "orch s" keeps counting them, as the issue that set the targets (47) did.

--plan-off measures each figure a second time, right after, with the deploy's converge plan off (every playbook run
with --skip-tags: each role probes and decides itself, as before the plan): rows "<figure>_plan_off".

The read-only figures (floor, no-op, status) run --repeat times (default 3): the run of median CPU is reported, with
the range of all of them.

Usage: python3 benchmarks/converge_bench.py [--scenario replicas] [--json FILE] [--only noop,status,...] [--repeat N]
                                           [--plan-off]
"""


import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The test deployment's own overrides (molecule/resources/tests/ds4_drill.py BASE_OVERRIDES).
BASE_OVERRIDES = {
    'image': {'ref': 'ds4-vllm-sim:test', 'vllm_version': '0.27.1'},
    'model': {'revision': '0123456789abcdef0123456789abcdef01234567'},
}
# Scenario -> (subnet, container prefix): tests/harness/molecule_parallel.py's scenario_env gives the same.
RECAP = re.compile(r'^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)', re.M)
PROFILE = re.compile(r'^(.+?) -+ ([\d.]+)s$', re.M)
# The waiting an operation is made of, not orchestration: the restart contract's stop/start/wait, readiness, a
# drain's waits for requests in flight and the router's health check of a pair back in rotation.
WAITING_TASK = re.compile(
    r'(Restart \| (Stop the head|Then stop|Start the|Wait until)|Ready \| Wait until|Rollback \| .*(Stop|Start|Wait)'
    r'|Drain \| (Wait at each|The pair.s engine reads)|Rolling \| Back into every router.s rotation \(once)')
# The converge shortcut's line for a role that runs (plugins/module_utils/_converge/converge_state.py).
# The smoke checks (tasks/validate.yml): the task's time is shown apart. Within it, the time its requests wait on the
# model's answers (the module's own clock, in its summary: plugins/module_utils/_node/smoke_checks.py) is the model's,
# as readiness is: 'orch-mdl' is the orchestration without it. The simulator's decode rate sets that time in the test
# deployment, a GB10 pair's in the field; the task's time beyond it (module start, delegation) stays orchestration.
SMOKE_TASK = re.compile(r'^Deterministic answer, tool call, reasoning, garble under concurrency$')
MODEL_ANSWERS = re.compile(r'([\d.]+) s waiting on the model\b')
RAN = re.compile(r'\b([a-z_]+): runs \(')
STARTED_MARK = 'DS4_BENCH_STARTED'
STARTED = re.compile(r'%s host=(\S+) container=(\S+) started=([^\s"]+)' % STARTED_MARK)
STARTED_PLAYBOOK = """\
- hosts: spark
  gather_facts: false
  become: true
  tasks:
    # docker's CLI, not community.docker: one call lists the rank containers by label and one reads every StartedAt
    # (docker_host_info + docker_container_info would be a module run per container, load the benchmark adds itself)
    - name: Every vLLM rank container's StartedAt
      ansible.builtin.command: docker ps --filter label=org.dgxspark.ds4.role --format '{{ '{{' }}.Names{{ '}}' }}'
      register: bench_names
      changed_when: false
    - name: Inspect them
      ansible.builtin.command: >-
        docker inspect --format '%s host={{ inventory_hostname }} container={{ '{{' }}.Name{{ '}}' }}
        started={{ '{{' }}.State.StartedAt{{ '}}' }}' {{ bench_names.stdout_lines | join(' ') }}
      register: bench_started
      changed_when: false
      when: bench_names.stdout_lines | length > 0
    - name: Report
      ansible.builtin.debug:
        msg: "{{ bench_started.stdout_lines | default([]) }}"
""" % STARTED_MARK
FLOOR_PLAYBOOK = """\
- hosts: all
  gather_facts: false
  tasks:
    - name: One module round trip per host
      ansible.builtin.ping:
"""


# What the controller's Python compiles on every run: where PYTHONDONTWRITEBYTECODE is set and its standard library has
# no bytecode (an unpacked distribution Python), every process compiles the modules it imports again, which the floor
# pays in a larger share than the figures do (docs/measurements.md, thirty-ninth session: the no-op's ratio 2.98x
# without, 3.52x with the bytecode). The report says which it was.
STDLIB_BYTECODE = """\
import importlib.util, os, sys, sysconfig
root = sysconfig.get_paths()['stdlib']
skip = ('test', 'tests', 'idlelib', 'lib2to3', 'site-packages', 'dist-packages')
py = [os.path.join(d, f) for d, dirs, files in os.walk(root) if not set(d[len(root):].split(os.sep)) & set(skip)
      for f in files if f.endswith('.py')]
print(sys.version.split()[0], sum(os.path.exists(importlib.util.cache_from_source(p)) for p in py), len(py))
"""


def controller_python(env):
    """The Python ansible-playbook runs under in env (its script's #! line) and how much of its standard library has
    bytecode: {interpreter, version, stdlib_bytecode, stdlib_modules, dont_write_bytecode}."""
    playbook = shutil.which('ansible-playbook', path=env.get('PATH'))
    if not playbook:
        raise SystemExit('converge_bench: no ansible-playbook on the PATH')
    with open(playbook) as handle:
        interpreter = handle.readline()[2:].split()[0]
    out = subprocess.run([interpreter, '-c', STDLIB_BYTECODE], stdout=subprocess.PIPE, universal_newlines=True, env=env,
                         check=True).stdout.split()
    return dict(interpreter=interpreter, version=out[0], stdlib_bytecode=int(out[1]), stdlib_modules=int(out[2]),
                dont_write_bytecode=bool(env.get('PYTHONDONTWRITEBYTECODE')))


def molecule_env(scenario):
    """The environment Molecule gives the scenario's verify: its ansible.cfg (ssh ControlMaster, pipelining), its
    ephemeral directory (the TLS CA lives there), its containers' prefix and subnet."""
    sys.path.insert(0, os.path.join(PROJECT, 'tests', 'harness'))
    import molecule_parallel  # pylint: disable=import-outside-toplevel,import-error
    from molecule.text import checksum  # pylint: disable=import-outside-toplevel,import-error
    env = molecule_parallel.scenario_env(scenario, molecule_parallel.all_scenarios())
    eph = os.path.join(os.path.expanduser('~'), '.ansible', 'tmp', 'molecule.%s.%s' % (checksum(os.path.basename(PROJECT), 4), scenario))
    if not os.path.isfile(os.path.join(eph, 'inventory', 'ansible_inventory.yml')):
        raise SystemExit('converge_bench: no converged %s scenario (%s/inventory): run `make converge-bench`' % (scenario, eph))
    env.update(MOLECULE_EPHEMERAL_DIRECTORY=eph, ANSIBLE_CONFIG=os.path.join(eph, 'ansible.cfg'),
               MOLECULE_SCENARIO_DIRECTORY=os.path.join(PROJECT, 'molecule', scenario),
               MOLECULE_INVENTORY_FILE=os.path.join(eph, 'inventory', 'ansible_inventory.yml'),
               MOLECULE_PROJECT_DIRECTORY=PROJECT, ANSIBLE_NOCOLOR='1',
               ANSIBLE_COLLECTIONS_PATH=os.path.join(PROJECT, '.collections'),
               ANSIBLE_CALLBACKS_ENABLED='ansible.posix.profile_tasks,dgxspark.ds4.preload',
               PROFILE_TASKS_TASK_OUTPUT_LIMIT='all', PROFILE_TASKS_SORT_ORDER='descending')
    env['PATH'] = os.path.join(PROJECT, '.venv', 'bin') + os.pathsep + env.get('PATH', '')
    return env, os.path.join(eph, 'inventory')


class Bench(object):
    def __init__(self, scenario):
        self.scenario = scenario
        # --plan-off: every playbook run with --skip-tags, which turns the deploy's converge plan off (each role probes
        # and decides itself, as before the plan); no task carries this tag, so nothing else is skipped
        self.extra_args = []
        self.env, self.inventory = molecule_env(scenario)
        extra = os.path.join(PROJECT, 'molecule', scenario, 'vars', '%s.yml' % scenario)
        self.extra_files = [extra] if os.path.isfile(extra) else []

    def run(self, argv):
        """argv under the scenario's environment -> (wall s, controller CPU s, output); a failure stops the bench."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                              env=self.env, cwd=PROJECT, check=False)
        wall = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if proc.returncode != 0:
            # what failed (each failed task with its header), then the end of the run (the recap)
            failed = re.findall(r'^TASK \[[^\n]*\n(?:(?!TASK \[)[^\n]*\n)*?(?:fatal|failed): [^\n]*\n(?:[ \t][^\n]*\n)*',
                                proc.stdout, re.M)
            sys.stderr.write(''.join(f[-4000:] for f in failed[-3:]) + '\n...\n' + proc.stdout[-3000:])
            raise SystemExit('converge_bench: %s failed (rc=%d)' % (' '.join(argv[:4]), proc.returncode))
        return wall, cpu, proc.stdout

    def playbook(self, path, *extra):
        argv = ['ansible-playbook', '-i', self.inventory, path]
        for name in self.extra_files:
            argv += ['-e', '@' + name]
        for ev in extra:
            argv += ['-e', json.dumps(ev)]
        wall, cpu, out = self.run(argv + self.extra_args)
        recap = dict((m.group(1), dict(ok=int(m.group(2)), changed=int(m.group(3)), skipped=int(m.group(6))))
                     for m in RECAP.finditer(out))
        tail = out[out.rfind('TASKS RECAP'):] if 'TASKS RECAP' in out else ''
        tasks = [(m.group(1).strip(), float(m.group(2))) for m in PROFILE.finditer(tail)]
        waiting = sum(t for name, t in tasks if WAITING_TASK.search(name))
        smoke = sum(t for name, t in tasks if SMOKE_TASK.search(name))
        model = model_answers(out)
        return dict(wall_s=wall, cpu_s=cpu, waiting_s=waiting, orchestration_s=max(wall - waiting, 0.0), smoke_s=smoke,
                    model_s=model,
                    orchestration_less_model_s=max(wall - waiting - model, 0.0),
                    tasks=sum(v['ok'] + v['changed'] + v['skipped'] for v in recap.values()),
                    changed=dict((h, v['changed']) for h, v in recap.items()), slowest=tasks[:15],
                    roles_ran=sorted(set(RAN.findall(out))))

    def shipped(self, name, *extra):
        return self.playbook(os.path.join(PROJECT, 'playbooks', name), *extra)

    def inline(self, text, *extra):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'bench.yml')
            with open(path, 'w') as handle:
                handle.write(text)
            return self.playbook(path, *extra)

    def started_at(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'started.yml')
            with open(path, 'w') as handle:
                handle.write(STARTED_PLAYBOOK)
            dummy, dummy2, out = self.run(['ansible-playbook', '-i', self.inventory, path])
        return parse_started(out)


def model_answers(out):
    """Seconds the run's smoke checks waited on the model: per task (its hosts' checks run at once, so the longest of
    them), summed over the tasks (rolling.yml checks one pair after the other)."""
    total = 0.0
    for block in re.split(r'^TASK \[', out, flags=re.M):
        found = [float(x) for x in MODEL_ANSWERS.findall(block)]
        total += max(found) if found else 0.0
    return total


def parse_started(out):
    """The STARTED_PLAYBOOK output -> {(host, container): StartedAt}; at least one rank must be there."""
    found = dict(((m.group(1), m.group(2)), m.group(3)) for m in STARTED.finditer(out))
    if not found:
        raise SystemExit('converge_bench: no vLLM rank container found on the scenario\'s nodes:\n' + out[-3000:])
    return found


def restarted(before, after):
    """The (host, container) whose StartedAt moved or that is gone, sorted."""
    return sorted(k for k in before if before[k] != after.get(k))


def with_ratio(res, floor):
    res = dict(res)
    res['ratio_wall'] = res['wall_s'] / floor['wall_s']
    res['ratio_cpu'] = res['cpu_s'] / floor['cpu_s']
    res['ratio_orchestration'] = res['orchestration_s'] / floor['wall_s']
    return res


FIGURES = ('noop', 'one_flag', 'recipe', 'image', 'status', 'rolling')


def median_run(runs):
    """The run of median controller CPU among repeats of one read-only figure, with the spread of all of them (this
    machine's run-to-run noise on a 12-17 CPU-s no-op was +-2-3 CPU-s: one run cannot show a 10 % change)."""
    ordered = sorted(runs, key=lambda r: r['cpu_s'])
    mid = dict(ordered[len(ordered) // 2])
    mid.update(runs=len(runs), cpu_range=[ordered[0]['cpu_s'], ordered[-1]['cpu_s']],
               wall_range=[min(r['wall_s'] for r in runs), max(r['wall_s'] for r in runs)])
    return mid


PLAN_OFF = ['--skip-tags', 'ds4_bench_converge_plan_off']


def measure(bench, only, repeat=3, plan_off=False):
    """The figures in `only` against the floor of the same run; with plan_off, each one again with the deploy's converge
    plan off (key '<figure>_plan_off'), right after: the plan's effect in one run."""
    result = {}
    floor = median_run([bench.inline(FLOOR_PLAYBOOK) for dummy in range(repeat)])
    result['floor'] = floor
    for variant in ([[], PLAN_OFF] if plan_off else [[]]):
        bench.extra_args = variant
        # settle: whatever the last run left (a rollback.yml leaves vllm_service's record of the switch), the next one
        # is the no-op
        bench.shipped('site.yml')
        figures = _figures(bench, only, repeat, floor)
        result.update((key + ('_plan_off' if variant else ''), value) for key, value in figures.items())
    bench.extra_args = []
    return result


def _figures(bench, only, repeat, floor):
    result = {}
    if 'noop' in only:
        before = bench.started_at()
        noops = [bench.shipped('site.yml') for dummy in range(repeat)]
        after = bench.started_at()
        for noop in noops:
            if any(noop['changed'].values()):
                raise SystemExit('converge_bench: the no-op run changed something: %s' % noop['changed'])
        moved = restarted(before, after)
        if moved:
            raise SystemExit('converge_bench: the no-op run restarted %s' % ', '.join('%s on %s' % (c, h) for h, c in moved))
        noop = median_run(noops)
        noop['restarted'] = 'none (%d rank containers, StartedAt before = after)' % len(before)
        result['noop'] = with_ratio(noop, floor)
    if 'one_flag' in only:
        result['one_flag'] = with_ratio(bench.shipped('site.yml', {'ds4_site_overrides': dict(BASE_OVERRIDES, serve_args={'max-num-seqs': 4})}), floor)
        result['one_flag_back'] = with_ratio(bench.shipped('site.yml'), floor)
    if 'recipe' in only:
        result['recipe'] = with_ratio(bench.shipped('switch.yml', {'ds4_profile': 'throughput'}), floor)
        result['recipe_back'] = with_ratio(bench.shipped('rollback.yml'), floor)
    if 'image' in only:
        other = dict(BASE_OVERRIDES, image={'ref': 'ds4-vllm-sim:next', 'vllm_version': '0.27.1'})
        result['image'] = with_ratio(bench.shipped('site.yml', {'ds4_site_overrides': other}), floor)
        result['image_back'] = with_ratio(bench.shipped('site.yml'), floor)
    if 'status' in only:
        result['status'] = with_ratio(median_run([bench.shipped('status.yml') for dummy in range(repeat)]), floor)
    if 'rolling' in only:
        result['rolling'] = with_ratio(bench.shipped('restart.yml'), floor)
    return result


def report(result):
    floor = result['floor']
    if 'python' in result:
        py = result['python']
        print('controller Python %s (%s): standard library byte-compiled %d of %d modules; PYTHONDONTWRITEBYTECODE %s' % (
            py['version'], py['interpreter'], py['stdlib_bytecode'], py['stdlib_modules'],
            'set' if py['dont_write_bytecode'] else 'unset'))
    print('floor: one ping per host (%d hosts): %.2f s wall, %.2f CPU-s (median of %d runs)' % (
        floor['tasks'], floor['wall_s'], floor['cpu_s'], floor.get('runs', 1)))
    print('%-14s %8s %8s %8s %8s %8s %8s %8s %8s %8s %7s  %s' % (
        'figure', 'wall s', 'x floor', 'CPU s', 'x floor', 'orch s', 'x floor', 'smoke s', 'model s', 'orch-mdl', 'tasks',
        'roles that ran'))
    keys = ('noop', 'one_flag', 'one_flag_back', 'recipe', 'recipe_back', 'image', 'image_back', 'status', 'rolling')
    for key in [k + suffix for suffix in ('', '_plan_off') for k in keys]:
        if key not in result:
            continue
        r = result[key]
        print('%-14s %8.1f %8.2f %8.1f %8.2f %8.1f %8.2f %8.1f %8.1f %8.1f %7d  %s' % (
            key, r['wall_s'], r['ratio_wall'], r['cpu_s'], r['ratio_cpu'], r['orchestration_s'], r['ratio_orchestration'],
            r['smoke_s'], r['model_s'], r['orchestration_less_model_s'], r['tasks'], ' '.join(r['roles_ran']) or '-'))
    print('orch s: wall less the restart contract\'s stop/start/wait, readiness and the drains\' waits; smoke s: the smoke '
          'checks\' task; model s: its requests waiting on the model\'s answers; orch-mdl: orch s less model s')
    for key in ('floor', 'noop', 'status', 'noop_plan_off', 'status_plan_off'):
        if result.get(key, {}).get('runs', 1) > 1:
            r = result[key]
            print('%s: the run of median CPU of %d; all of them %.1f-%.1f CPU-s, %.1f-%.1f s' % (
                key, r['runs'], r['cpu_range'][0], r['cpu_range'][1], r['wall_range'][0], r['wall_range'][1]))
    if 'noop' in result:
        print('no-op site.yml: restarted: %s' % result['noop']['restarted'])
        print('15 slowest tasks of the no-op run:')
        for name, secs in result['noop']['slowest']:
            print('  %6.2f s  %s' % (secs, name))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--scenario', default='replicas')
    parser.add_argument('--json', metavar='FILE', help='also write the figures as JSON here')
    parser.add_argument('--only', default=','.join(FIGURES), help='comma-separated subset of %s' % ', '.join(FIGURES))
    parser.add_argument('--plan-off', action='store_true',
                        help='each figure again with the deploy\'s converge plan off (--skip-tags), right after it')
    parser.add_argument('--repeat', type=int, default=3,
                        help='runs of each read-only figure (floor, noop, status); the one of median CPU is reported')
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error('--repeat must be 1 or more, got %d' % args.repeat)
    only = [x for x in args.only.split(',') if x]
    unknown = [x for x in only if x not in FIGURES]
    if unknown:
        parser.error('--only: unknown figure(s) %s; known: %s' % (', '.join(unknown), ', '.join(FIGURES)))
    bench = Bench(args.scenario)
    result = measure(bench, only, args.repeat, plan_off=args.plan_off)
    result['python'] = controller_python(bench.env)
    if args.json:
        with open(args.json, 'w') as handle:
            json.dump(result, handle, indent=1)
    report(result)


if __name__ == '__main__':
    main()
