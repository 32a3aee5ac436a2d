# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Converge benchmark (not a timed test): how long site.yml takes when it has nothing or one flag to do.

Runs on a converged pair (the Molecule `default` pair: `make converge-bench` creates and converges it
when needed) and prints, each figure also as a ratio to the floor measured in the same run:

  floor      one `ansible -m ping` of the pair (process start, inventory, one round trip), and one
             module round trip per node measured as (a playbook of 21 ping tasks - one of 1) / 20
  no-op      wall time of site.yml that changes nothing (changed=0 is checked, not assumed), tasks
             executed per host, seconds per task, floor = ping + round trip x tasks of the busiest host;
             both ranks' vLLM container StartedAt is read before and after it (docker inspect on the
             nodes, container name from the rank's deployed record, else dgxspark-ds4-head/worker):
             "restarted: none", or the benchmark fails naming the rank that restarted
  one flag   wall time of site.yml that changes one launch flag (max-num-seqs), minus the restart
             (the restart contract's tasks and the readiness wait: the simulator's startup), then the
             run back to the scenario's flag, measured the same way
  slowest    the 15 slowest tasks of the no-op run (ansible.posix.profile_tasks)

Usage: python3 benchmarks/converge_bench.py --inventory <molecule ephemeral inventory dir> [--json]
"""

from __future__ import (absolute_import, division, print_function)

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The test deployment's own overrides (molecule/resources/tests/ds4_drill.py BASE_OVERRIDES), plus one flag.
BASE_OVERRIDES = {
    'image': {'ref': 'ds4-vllm-sim:test', 'vllm_version': '0.27.1'},
    'model': {'revision': '0123456789abcdef0123456789abcdef01234567'},
}
RECAP = re.compile(r'^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)', re.M)
PROFILE = re.compile(r'^(.+?) -+ ([\d.]+)s$', re.M)
# What a restart costs on top of orchestration: the contract's stop/start/wait tasks and readiness.
RESTART_TASK = re.compile(r'(Restart \| (Stop|Start|Wait|Restart)|^Ready \|)')
# Each rank's container start: the container name comes from the rank's deployed record
# (<state_dir>/deployed-<role>.json, the published layout), else the role's defaults.
STARTED_MARK = 'DS4_BENCH_STARTED'
STARTED = re.compile(r'%s rank=(\d+) host=(\S+) container=(\S+) started=([^\s"]+)' % STARTED_MARK)
STARTED_PLAYBOOK = """\
- hosts: spark
  gather_facts: false
  become: true
  vars:
    state_dir: "{{ vllm_service_state_dir | default('/var/lib/dgxspark-ds4') }}"
    rank: "{{ ds4_node_rank | int }}"
  tasks:
    - name: Deployed record of this rank
      ansible.builtin.find:
        paths: "{{ state_dir }}"
        patterns: deployed-*.json
      register: bench_records
    - name: Read it
      ansible.builtin.slurp:
        src: "{{ bench_records.files[0].path }}"
      register: bench_record
      when: bench_records.files | length == 1
    - name: Container StartedAt
      community.docker.docker_container_info:
        name: "{{ bench_container }}"
      register: bench_inspect
      failed_when: not bench_inspect.exists
      vars:
        layout: "{{ (bench_record.content | b64decode | from_json) if bench_record.content is defined else {} }}"
        bench_container: "{{ layout.container | default('dgxspark-ds4-' ~ ('head' if rank | int == 0 else 'worker')) }}"
    - name: Report
      ansible.builtin.debug:
        msg: "%s rank={{ rank }} host={{ inventory_hostname }} container={{ info.Name | regex_replace('^/', '') }} started={{ info.State.StartedAt }}"
      vars:
        info: "{{ bench_inspect.container }}"
""" % STARTED_MARK


def _env():
    env = dict(os.environ)
    env.setdefault('ANSIBLE_COLLECTIONS_PATH', os.path.join(PROJECT, '.collections'))
    env.update(ANSIBLE_NOCOLOR='1', ANSIBLE_CALLBACKS_ENABLED='ansible.posix.profile_tasks',
               PROFILE_TASKS_TASK_OUTPUT_LIMIT='all', PROFILE_TASKS_SORT_ORDER='descending')
    return env


def run(argv):
    t0 = time.monotonic()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          env=_env(), cwd=PROJECT, check=False)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:])
        raise SystemExit('converge_bench: %s failed (rc=%d)' % (' '.join(argv[:4]), proc.returncode))
    return wall, proc.stdout


def site(inventory, *extra):
    argv = ['ansible-playbook', '-i', inventory, os.path.join(PROJECT, 'playbooks', 'site.yml')]
    for ev in extra:
        argv += ['-e', json.dumps(ev)]
    wall, out = run(argv)
    recap = dict((m.group(1), dict(ok=int(m.group(2)), changed=int(m.group(3)), skipped=int(m.group(6))))
                 for m in RECAP.finditer(out))
    tail = out[out.rfind('TASKS RECAP'):] if 'TASKS RECAP' in out else ''
    tasks = [(m.group(1).strip(), float(m.group(2))) for m in PROFILE.finditer(tail)]
    restart = sum(t for name, t in tasks if RESTART_TASK.search(name))
    executed = max(v['ok'] + v['changed'] for v in recap.values()) if recap else 0
    return dict(wall=wall, recap=recap, tasks=tasks, restart_s=restart, executed=executed)


def floor(inventory):
    ping_wall, dummy = run(['ansible', '-i', inventory, 'spark', '-m', 'ansible.builtin.ping'])
    walls = {}
    with tempfile.TemporaryDirectory() as tmp:
        for count in (1, 21):
            path = os.path.join(tmp, 'ping%d.yml' % count)
            with open(path, 'w') as handle:
                handle.write('- hosts: spark\n  gather_facts: false\n  become: true\n  tasks:\n')
                for i in range(count):
                    handle.write('    - name: ping %d\n      ansible.builtin.ping:\n' % i)
            walls[count], dummy = run(['ansible-playbook', '-i', inventory, path])
    return dict(ping_s=ping_wall, round_trip_s=max(walls[21] - walls[1], 0.0) / 20.0)


def parse_started(out):
    """The STARTED_PLAYBOOK output -> {rank: {'host', 'container', 'started'}}; both ranks must be there."""
    ranks = dict((int(m.group(1)), dict(host=m.group(2), container=m.group(3), started=m.group(4)))
                 for m in STARTED.finditer(out))
    if sorted(ranks) != [0, 1]:
        raise SystemExit('converge_bench: expected the StartedAt of ranks 0 and 1, got %s:\n%s' % (sorted(ranks), out[-4000:]))
    return ranks


def restarted(before, after):
    """Ranks whose container StartedAt changed (or that changed container): [(rank, before, after)]."""
    return [(rank, before[rank], after.get(rank)) for rank in sorted(before) if before[rank] != after.get(rank)]


def started_at(inventory):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'started.yml')
        with open(path, 'w') as handle:
            handle.write(STARTED_PLAYBOOK)
        dummy, out = run(['ansible-playbook', '-i', inventory, path])
    return parse_started(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--inventory', default=os.environ.get('MOLECULE_INVENTORY_DIR', ''), required=False)
    parser.add_argument('--json', action='store_true')
    args = parser.parse_args()
    if not args.inventory:
        parser.error('--inventory (the Molecule ephemeral inventory directory of the default scenario) is required')
    fl = floor(args.inventory)
    site(args.inventory)  # settle: whatever the last run left, the next one is the no-op
    before = started_at(args.inventory)
    noop = site(args.inventory)
    after = started_at(args.inventory)
    changed = dict((h, r['changed']) for h, r in noop['recap'].items())
    if any(changed.values()):
        raise SystemExit('converge_bench: the no-op run changed something: %s' % changed)
    moved = restarted(before, after)
    if moved:
        raise SystemExit('converge_bench: the no-op run restarted %s' % '; '.join(
            'rank %d (%s on %s): StartedAt %s -> %s' % (rank, b['container'], b['host'], b['started'], (a or {}).get('started'))
            for rank, b, a in moved))
    flag = site(args.inventory, {'ds4_site_overrides': dict(BASE_OVERRIDES, serve_args={'max-num-seqs': 4})})
    back = site(args.inventory)

    def floor_of(res):
        return fl['ping_s'] + fl['round_trip_s'] * res['executed']

    result = dict(
        floor=fl,
        noop=dict(wall_s=noop['wall'], tasks_per_host=dict((h, r['ok'] + r['changed']) for h, r in noop['recap'].items()),
                  s_per_task=noop['wall'] / max(noop['executed'], 1), floor_s=floor_of(noop),
                  ratio=noop['wall'] / floor_of(noop), slowest=noop['tasks'][:15], restarted='none',
                  started_at=dict((str(rank), v) for rank, v in sorted(after.items()))),
        one_flag=[dict(wall_s=r['wall'], restart_s=r['restart_s'], orchestration_s=r['wall'] - r['restart_s'],
                       tasks_max=r['executed'], floor_s=floor_of(r), ratio=(r['wall'] - r['restart_s']) / floor_of(r),
                       changed=dict((h, v['changed']) for h, v in r['recap'].items()))
                  for r in (flag, back)],
    )
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print('floor: ansible -m ping %.2f s; one module round trip %.3f s' % (fl['ping_s'], fl['round_trip_s']))
    n = result['noop']
    print('no-op site.yml: %.1f s wall, changed=0, tasks per host %s, %.3f s/task, floor %.1f s, ratio %.2f'
          % (n['wall_s'], n['tasks_per_host'], n['s_per_task'], n['floor_s'], n['ratio']))
    print('no-op site.yml: restarted: %s (StartedAt before = after: %s)'
          % (n['restarted'], ', '.join('rank %s %s %s' % (r, v['container'], v['started']) for r, v in sorted(n['started_at'].items()))))
    for label, r in zip(('one flag', 'flag back'), result['one_flag']):
        print('%s: %.1f s wall - %.1f s restart = %.1f s orchestration (%d tasks, floor %.1f s, ratio %.2f), changed %s'
              % (label, r['wall_s'], r['restart_s'], r['orchestration_s'], r['tasks_max'], r['floor_s'], r['ratio'],
                 r['changed']))
    print('15 slowest tasks of the no-op run:')
    for name, secs in n['slowest']:
        print('  %6.2f s  %s' % (secs, name))


if __name__ == '__main__':
    main()
