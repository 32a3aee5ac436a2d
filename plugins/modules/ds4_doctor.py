#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r'''
---
module: ds4_doctor
short_description: Collect read-only evidence from one node of the vLLM pair and diagnose it with the failure catalogue
version_added: 0.1.0
description:
  - Reads, never changes. Collects the units' state (C(systemctl show)), the units' recent journal (vLLM's output;
    the container runs in the unit's foreground, so the unit's journal is the one copy of its log; C(docker logs) is
    not read), the container's state when a container exists,
    kernel log lines (C(journalctl -k), NVRM/Xid/OOM lines), C(/proc/meminfo), listening sockets on the master and API
    ports (C(ss -ltnp)), the image ID of the configured image, the rendered env files (secrets redacted), the
    fabric netdev's addresses and RDMA links, and C(/dev/shm) usage.
  - Matches the units' journal and the kernel log against C(plugins/module_utils/_node/failure_catalogue.py) and
    returns the findings with one verdict line each (node, cause, fix and the matching line).
  - Every text returned is redacted (values of names containing KEY, TOKEN, SECRET, PASSWORD; C(--api-key);
    Bearer tokens; C(hf_...) tokens).
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Only reads, so it runs the same in check mode.
  diff_mode:
    support: none
options:
  role:
    description: V(head) or V(worker); decides how EADDRINUSE is read (master port in use vs C(--headless) missing).
    type: str
    choices: [head, worker]
    required: true
  node:
    description: Node label used in the verdicts.
    type: str
  units:
    description: Units to report (state + journal). Default both C(dgxspark-ds4-head.service) and C(dgxspark-ds4-worker.service).
    type: list
    elements: str
  container_name:
    description: Container of this rank. Default C(dgxspark-ds4-<role>).
    type: str
  ports:
    description: TCP ports whose listeners are reported (master port, API port).
    type: list
    elements: int
    default: []
  image:
    description: Image reference whose ID is reported.
    type: str
  config_dir:
    description: Directory of the rendered files; its C(*.env) and C(*.sh) files are included, redacted.
    type: path
    default: /etc/dgxspark-ds4
  fabric_ifname:
    description: Fabric netdev to report.
    type: str
  journal_lines:
    description: Journal lines per unit.
    type: int
    default: 400
  kernel_lines:
    description: Kernel log lines scanned (the matching ones are returned).
    type: int
    default: 3000
  docker_cli:
    description: Docker CLI.
    type: str
    default: docker
  crash_hold:
    description:
      - The boot forensics' record of a crash of the previous boot (head, C(<state_dir>/crash-hold.json)); when present
        its lines (held or not, cause, fix, evidence, playbooks/ack.yml) lead the verdicts.
    type: path
  secrets:
    description: Literal secret values to redact as well (for example the API key).
    type: list
    elements: str
    default: []
seealso:
  - module: dgxspark.ds4.vllm_ready
'''

EXAMPLES = r'''
- name: Collect and diagnose
  dgxspark.ds4.ds4_doctor:
    role: "{{ ds4_effective['role'] }}"
    ports: [29501, 8000]
  register: ds4_doctor_node
'''

RETURN = r'''
findings:
  description: Catalogue findings (id, cause, fix, severity, node, lines, earlier_run), most specific first; findings whose
    lines all precede the unit's last start have C(earlier_run=true) and sort last.
  returned: always
  type: list
  elements: dict
summary:
  description: One line per installed unit (state, NRestarts, last exit status) and one for memory.
  returned: always
  type: list
  elements: str
verdicts:
  description: One line per finding; C((earlier run)) prefixed when it is about a previous start of the unit.
  returned: always
  type: list
  elements: str
evidence:
  description: Collected texts (redacted), keyed by name (C(unit_<name>), C(journal_<name>), C(kernel),
    C(meminfo), C(ports), C(image), C(env_files), C(fabric), C(shm)).
  returned: always
  type: dict
units:
  description: State per unit (ActiveState, SubState, NRestarts, ExecMainStatus, Result).
  returned: always
  type: dict
image_id:
  description: ID of O(image) on this node, empty when absent.
  returned: always
  type: str
container_image:
  description: Image ID of this rank's container when one exists, else empty.
  returned: always
  type: str
memory:
  description: MemTotal, MemAvailable, Cached, SwapTotal, SwapFree in KiB.
  returned: always
  type: dict
'''

import glob
import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import node_probe, ops_status
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.failure_catalogue import diagnose, verdict
from ansible_collections.dgxspark.ds4.plugins.module_utils._security.redact import redact

_START_RX = re.compile(r"systemd\[1\]: Starting |systemd\[1\]: Started ")
_KERNEL_RX = re.compile(r"NVRM|Xid|NV_ERR|Out of memory|oom-kill|oom_reaper|mlx5|segfault|hung_task|BUG:", re.I)
_UNIT_PROPS = ("LoadState", "ActiveState", "SubState", "NRestarts", "MainPID", "ExecMainStatus", "Result", "ExecMainStartTimestamp",
               "ExecMainExitTimestamp", "FragmentPath")
_MEMORY_KEYS = ("MemTotal", "MemAvailable", "Cached", "SwapTotal", "SwapFree", "Shmem")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            role=dict(type="str", required=True, choices=["head", "worker"]),
            node=dict(type="str"),
            units=dict(type="list", elements="str"),
            container_name=dict(type="str"),
            ports=dict(type="list", elements="int", default=[]),
            image=dict(type="str"),
            config_dir=dict(type="path", default="/etc/dgxspark-ds4"),
            fabric_ifname=dict(type="str"),
            journal_lines=dict(type="int", default=400),
            kernel_lines=dict(type="int", default=3000),
            docker_cli=dict(type="str", default="docker"),
            crash_hold=dict(type="path"),
            secrets=dict(type="list", elements="str", default=[], no_log=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    role = p["role"]
    node = p["node"] or role
    secrets = [s for s in p["secrets"] if s]
    units = p["units"] or ["dgxspark-ds4-head.service", "dgxspark-ds4-worker.service"]
    container = p["container_name"] or "dgxspark-ds4-%s" % role
    docker = module.get_bin_path(p["docker_cli"]) if not os.path.isabs(p["docker_cli"]) else p["docker_cli"]
    evidence = {}
    sources = []

    def run(cmd):
        if not cmd[0]:
            return 127, "", "not found"
        rc, out, err = module.run_command(cmd)
        return rc, out, err

    def keep(name, text):
        evidence[name] = redact(text, secrets)
        return evidence[name]

    unit_state = {}
    for unit in units:
        shown = node_probe.probe_unit(run, unit, _UNIT_PROPS, "us+utc")
        props = shown.value
        unit_state[unit] = props
        keep("unit_%s" % unit, shown.out + shown.err)
        if props.get("LoadState") == "not-found":
            continue
        rc, out, err = run(node_probe.journal_argv(unit, output="short-iso", lines=p["journal_lines"]))
        text = keep("journal_%s" % unit, out + err)
        unit_role = "head" if "head" in unit else ("worker" if "worker" in unit else role)
        raw = text.splitlines()
        msgs = [re.sub(r"^\S+ \S+ [^:]+: ", "", ln) for ln in raw]
        # lines before the unit's last start belong to earlier runs: their findings are marked as such
        starts = [i + 1 for i, ln in enumerate(raw) if _START_RX.search(ln)]
        sources.append({"lines": msgs, "node": node, "role": unit_role, "source": None, "last_start": starts[-1] if starts else 0})

    inspected = node_probe.probe_container(run, container, docker, node_probe.CONTAINER_SUMMARY_FORMAT,
                                           node_probe.parse_container_summary)
    keep("container_state", inspected.out if inspected.rc == 0 else "no container %s" % container)
    container_image = ""
    if inspected.value is not None:
        container_image = inspected.value["image"]

    rc, out, err = run(node_probe.journal_argv(kernel=True, output="short-iso", lines=p["kernel_lines"]))
    if rc != 0 or not out.strip():
        rc, out, err = run(["dmesg", "-T"])
    kern = [ln for ln in out.splitlines() if _KERNEL_RX.search(ln)][-200:]
    keep("kernel", "\n".join(kern))
    sources.append({"lines": kern, "node": node, "role": role, "source": "kernel"})

    memory = {}
    try:
        meminfo, values = node_probe.read_meminfo()
        keep("meminfo", meminfo)
        memory = dict((k, values[k]) for k in _MEMORY_KEYS if k in values)
    except (IOError, OSError) as e:
        keep("meminfo", str(e))

    if p["ports"]:
        flt = " or ".join("sport = :%d" % port for port in p["ports"])
        rc, out, err = run(["ss", "-ltnpH", flt])
        keep("ports", out + err)

    image_id = ""
    if p["image"]:
        rc, out, err = run([docker, "image", "inspect", "--format", "{{.Id}} {{.Created}} {{json .RepoTags}}", p["image"]])
        keep("image", out + err)
        if rc == 0 and out.strip():
            image_id = out.split()[0]

    env_texts = []
    for path in sorted(glob.glob(os.path.join(p["config_dir"], "*.env")) + glob.glob(os.path.join(p["config_dir"], "*.sh"))):
        try:
            with open(path) as fh:
                env_texts.append("### %s\n%s" % (path, fh.read()))
        except (IOError, OSError) as e:
            env_texts.append("### %s: %s" % (path, e))
    keep("env_files", "\n".join(env_texts))

    fab = []
    if p["fabric_ifname"]:
        rc, out, err = run(["ip", "-d", "addr", "show", "dev", p["fabric_ifname"]])
        fab.append(out + err)
    for cmd in (["rdma", "link", "show"], ["ibdev2netdev"]):
        path = module.get_bin_path(cmd[0])
        if path:
            rc, out, err = run([path] + cmd[1:])
            fab.append("$ %s\n%s%s" % (" ".join(cmd), out, err))
    keep("fabric", "\n".join(fab))

    rc, out, err = run(["df", "-h", "/dev/shm"])
    shm = out
    psm = glob.glob("/dev/shm/psm_*")
    keep("shm", "%s\npsm segments: %d" % (shm, len(psm)))

    findings, seen = [], set()
    for src in sources:
        for f in diagnose([src]):
            f["earlier_run"] = bool(src.get("last_start")) and f["lines"][-1]["lineno"] < src["last_start"]
            key = (f["id"], f.get("node"))
            if key not in seen:  # one finding per cause and node (the head and worker units of one node)
                seen.add(key)
                findings.append(f)
    findings.sort(key=lambda f: (f["earlier_run"], f["severity"] == "info", f["rank"]))
    for f in findings:
        for ln in f.get("lines") or []:
            ln["text"] = redact(ln["text"], secrets)
    verdicts = [("(earlier run) " if f["earlier_run"] else "") + verdict(f) for f in findings]
    crash = ops_status.crash_summary(ops_status.read_json(p["crash_hold"]))
    if crash:
        verdicts = ["%s: %s" % (node, crash["lines"][0])] + crash["lines"][1:] + verdicts
    summary = ["%s: %s %s/%s, NRestarts %s, last exit status %s" % (node, unit, st.get("ActiveState"), st.get("SubState"),
                                                                    st.get("NRestarts"), st.get("ExecMainStatus"))
               for unit, st in unit_state.items() if st.get("LoadState") == "loaded"]
    if memory.get("MemTotal"):
        summary.append("%s: MemAvailable %.1f of %.1f GiB, page cache %.1f GiB" % (
            node, memory.get("MemAvailable", 0) / 1048576.0, memory["MemTotal"] / 1048576.0, memory.get("Cached", 0) / 1048576.0))
    module.exit_json(changed=False, summary=summary, findings=findings, verdicts=verdicts, evidence=evidence, units=unit_state,
                     image_id=image_id, container_image=container_image, memory=memory, node=node, role=role)


if __name__ == "__main__":
    main()
