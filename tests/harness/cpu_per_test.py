# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""pytest plugin: the CPU each Molecule test costs, controller and nodes (test harness; issue 47's measurements).

CI is CPU-bound on two cores, so a test's cost is its CPU, not its wall time (another lane runs while it waits).
Per test (setup, call and teardown together) this records:
- controller: CPU-seconds of the processes the test ran and waited for (ansible-playbook with its workers and ssh
  clients, load generators: `getrusage(RUSAGE_CHILDREN)`), plus pytest's own;
- nodes: CPU-seconds of the scenario's node containers (their cgroups' cpuacct, v1 or v2: the nodes' modules,
  sshd, systemd, the inner Docker and the vLLM simulators), the containers named DS4_MOLECULE_PREFIX*.
The terminal summary lists the costliest tests; every figure goes to .cache/molecule-logs/<scenario>-cpu.json
(DS4_CPU_REPORT overrides the path). Loaded by the verifier's options (.config/molecule/config.yml).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_ROWS: list[dict] = []
_CGROUP_FILES: dict[str, str] = {}


def _controller_cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _cgroup_file(cid: str) -> str | None:
    for path in ('/sys/fs/cgroup/cpuacct/docker/%s/cpuacct.usage' % cid,
                 '/sys/fs/cgroup/cpu,cpuacct/docker/%s/cpuacct.usage' % cid,
                 '/sys/fs/cgroup/system.slice/docker-%s.scope/cpu.stat' % cid,
                 '/sys/fs/cgroup/docker/%s/cpu.stat' % cid):
        if os.path.exists(path):
            return path
    return None


def _node_cpu() -> dict[str, float]:
    """{container: CPU-seconds so far} of the scenario's node containers (found once, when first asked)."""
    prefix = os.environ.get('DS4_MOLECULE_PREFIX')
    if not prefix:
        return {}
    if not _CGROUP_FILES:
        out = subprocess.run(['docker', 'ps', '--no-trunc', '--filter', 'name=^' + prefix, '--format', '{{.ID}} {{.Names}}'],
                             capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            cid, name = line.split(' ', 1)
            path = _cgroup_file(cid)
            if path:
                _CGROUP_FILES[name] = path
    out = {}
    for name, path in _CGROUP_FILES.items():
        try:
            with open(path, encoding='ascii') as handle:
                text = handle.read()
        except OSError:
            continue  # a container a test removed: counted until then
        if path.endswith('cpuacct.usage'):
            out[name] = int(text) / 1e9
        else:
            fields = dict(line.split() for line in text.splitlines() if line)
            out[name] = int(fields.get('usage_usec', 0)) / 1e6
    return out


def _nodes_delta(before: dict[str, float], after: dict[str, float]) -> float:
    """CPU-seconds the containers used between two readings; a container restarted in between (a reboot drill: its
    cgroup and counter start again from 0) counts what it used since its restart."""
    return sum(now - before.get(name, 0.0) if now >= before.get(name, 0.0) else now for name, now in after.items())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # pylint: disable=unused-argument
    wall0, ctl0, nodes0 = time.monotonic(), _controller_cpu(), _node_cpu()
    yield
    _ROWS.append({'test': item.nodeid, 'wall_s': round(time.monotonic() - wall0, 2),
                  'controller_cpu_s': round(_controller_cpu() - ctl0, 2),
                  'nodes_cpu_s': round(_nodes_delta(nodes0, _node_cpu()), 2)})


def pytest_terminal_summary(terminalreporter):
    if not _ROWS:
        return
    scenario = os.environ.get('MOLECULE_SCENARIO_NAME', 'tests')
    path = os.environ.get('DS4_CPU_REPORT') or os.path.join(_ROOT, '.cache', 'molecule-logs', '%s-cpu.json' % scenario)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w', encoding='utf-8') as handle:
        json.dump(_ROWS, handle, indent=1)
    rows = sorted(_ROWS, key=lambda r: -(r['controller_cpu_s'] + r['nodes_cpu_s']))
    total_ctl = sum(r['controller_cpu_s'] for r in _ROWS)
    total_nodes = sum(r['nodes_cpu_s'] for r in _ROWS)
    terminalreporter.write_sep('=', 'CPU per test: controller %.1f s + nodes %.1f s (%s)' % (total_ctl, total_nodes, path))
    for row in rows[:25]:
        terminalreporter.write_line('%7.1f ctl %7.1f nodes %7.1f wall  %s' % (
            row['controller_cpu_s'], row['nodes_cpu_s'], row['wall_s'], row['test']))
