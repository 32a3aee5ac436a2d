#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r'''
---
module: vllm_ready
short_description: Wait until the two-node vLLM pair serves, showing the startup phases, and fail fast with the cause
version_added: 0.1.0
description:
  - The action plugin of the same name runs on every host of the play at once (both ranks). Each instance polls
    only its own node, through its own connection, with this module (one fast execution per poll, every
    O(interval) seconds), and prints each startup phase once as it is reached with the elapsed time (weights
    loading with shard progress, KV cache tokens and maximum concurrency, CUDA graph capture, startup complete).
  - One poll reads the unit state (C(ActiveState), C(SubState), C(NRestarts), C(MainPID), C(ExecMainStatus)), the
    container state (C(docker inspect)), the unit's journal lines since the last poll (vLLM runs in the foreground
    of the unit, so its output is in the journal) and, on the head, a TCP connect to the API port on the node
    itself (the API may be bound to 127.0.0.1). Connection refused means still starting.
  - When the head's port listens, the head checks C(/health) (200), C(/v1/models) with the API key (served model
    name and C(max_model_len) equal to the effective config's) and a real chat completion (non-empty content; a
    C(reasoning) field when thinking is on).
  - The two instances coordinate through a small controller-side directory (keyed by the task's UUID). A rank
    whose unit or container exits or restarts fails both instances within a poll or two (well under 5 seconds),
    with the cause diagnosed by the failure catalogue over the dying node's recent lines, the fix and the lines.
    The worker instance finishes when the head reports ready or failed. Timeout fails with the diagnosis too.
  - Defaults come from the host fact C(ds4_effective) (role, unit name, API host/port, served model name,
    max-model-len, thinking), so the task usually needs no options.
  - Called directly (without the action), the module does one poll and returns it.
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: In check mode nothing is polled; the result lists what would be checked.
  diff_mode:
    support: none
options:
  role:
    description: V(head) (rank 0, serves the API) or V(worker) (rank 1, headless). Default C(ds4_effective.role).
    type: str
    choices: [head, worker]
  unit:
    description: systemd unit of this rank. Default C(ds4_effective.service.unit_name) (published by the config role).
    type: str
  container_name:
    description: Container of this rank. Default C(ds4_effective.service.container_name), else C(dgxspark-ds4-<role>).
    type: str
  api_host:
    description: Address the API binds (C(0.0.0.0) is probed as C(127.0.0.1)). Default C(ds4_effective.api.host). Head only.
    type: str
  api_port:
    description: API port. Default C(ds4_effective.api.port). Head only.
    type: int
  api_key:
    description: API key for C(/v1) requests. Default the variable C(vllm_service_api_key) when it is set.
    type: str
  served_model_name:
    description: Expected C(data[].id) of C(/v1/models). Default C(ds4_effective.serve_args['served-model-name']).
    type: str
  max_model_len:
    description: Expected C(max_model_len). Default C(ds4_effective.serve_args['max-model-len']).
    type: int
  thinking:
    description: Require a C(reasoning) field in the reply. Default from C(default-chat-template-kwargs.thinking).
    type: bool
  checks:
    description: Run the HTTP checks when the API port listens (the action sets this on the head).
    type: bool
    default: false
  status:
    description:
      - Read the unit's state and the container (C(systemctl show), C(docker inspect)) before the journal. The action
        sets it to false when it runs the module right after its own poll of them (the HTTP checks on the head); that
        poll's state is the one it uses, and a second C(docker inspect) on the head was on every readiness wait's path.
      - False needs O(cursor) (the journal is read after it); the result's C(status) is then empty.
    type: bool
    default: true
  poll:
    description:
      - The action's own poll (a shell command, C(node_probe.poll_command)) to run here first, instead of reading the
        unit, the container and the journal itself; its output is returned as C(poll) (the action parses it as it parses
        its own polls) and the HTTP checks follow when it found the API port open. The action sets it for the head's
        first poll, so that its poll and its checks are one node call on every readiness wait's path.
      - With it, O(status) and O(cursor) are not read (the poll reads the journal itself).
    type: str
  cursor:
    description: Journal cursor of the previous poll; empty = the lines of the unit's current (or last) run.
    type: str
    default: ''
  max_lines:
    description: At most this many journal lines per poll (the most recent).
    type: int
    default: 2000
  chat_timeout:
    description: Seconds the chat completion may take (a hang shows as an open port and no tokens).
    type: float
    default: 60
  docker_cli:
    description: Docker CLI. The action passes C(ds4_effective.service.docker_bin) (C(vllm_service_docker_bin)) when not set.
    type: str
    default: docker
  interval:
    description: (action) Seconds between polls (each poll is one shell command over the connection).
    type: float
    default: 0.5
  timeout:
    description: (action) Seconds until the task fails. A cold start takes about 9 minutes, up to 15+ with cold JIT caches.
    type: float
    default: 2400
  state_dir:
    description: (action) Controller-side coordination directory; default under the controller's temporary directory.
    type: path
  round:
    description:
      - (action) The identity of this wait, the same on both ranks of a pair and new for every wait; the two ranks'
        instances meet under it in O(state_dir).
      - Without it (the collection's C(tasks/ready.yml) gives none) the task's file and line with how many times this
        host has run the task in this C(ansible-playbook) run stand for it; both ranks of a pair run it as often, so
        their nth runs meet, and a run of the task again (an include run again) is a new wait.
    type: str
  mark_compile_cache:
    description:
      - (action) Once the pair serves, mark this node's torch.compile cache (C(ds4_effective.compile_cache.host_dir))
        with the image of its running container and the launch digest, as M(dgxspark.ds4.compile_cache) C(state=present)
        does (that module runs), unless the wait's last poll found the marker already so (a deploy that restarted
        nothing runs nothing more). The result's C(compile_cache) is that module's result; its change is the task's.
      - The collection's C(tasks/ready.yml) sets it except after a rollback (the restored set's flags are not what
        C(ds4_effective) describes).
    type: bool
    default: false
notes:
  - Run it on both hosts in one task (the linear strategy runs it on both at once; keep C(forks) >= 2 and no C(serial)).
  - Each poll is one shell command over the connection (C(systemctl show), C(docker inspect), a bash C(/dev/tcp) probe,
    C(journalctl --after-cursor)), not a module upload; on the head the first poll runs inside the module's checks (O(poll);
    one node call for the poll and the HTTP checks), and the checks run again after a later poll that finds the API port
    newly open. Needs root or the C(systemd-journal) group for the journal (use C(become)).
  - Do not wrap the task in C(until)/C(retries); the instances coordinate through files keyed by O(round), and it has its own
    O(timeout).
seealso:
  - module: dgxspark.ds4.ds4_doctor
'''

EXAMPLES = r'''
- name: Wait until the endpoint serves (prints the phases)
  dgxspark.ds4.vllm_ready:
    api_key: "{{ vllm_service_api_key | default(omit, true) }}"
    timeout: 2400
  register: ds4_ready

- name: Show the time to ready
  ansible.builtin.debug:
    msg: "ready after {{ ds4_ready.time_to_ready }} s, KV cache {{ ds4_ready.kv_cache_tokens }} tokens"
  when: ds4_effective['role'] == 'head'
'''

RETURN = r'''
ready:
  description: (action) The pair serves and every check passed.
  returned: always
  type: bool
limits:
  description: (action) What this run waited for, as given (O(timeout), O(chat_timeout); null = the module's default).
  returned: always
  type: dict
  sample: {"timeout": 2400.0, "chat_timeout": 60.0}
time_to_ready:
  description: (action, head) Seconds from the task start to every check passing.
  returned: success
  type: float
ready_after_startup_complete:
  description: (action, head) Seconds from seeing C(Application startup complete.) to every check passing.
  returned: success
  type: float
phases:
  description: (action) Seconds from the task start to each phase (C(loading), C(shards), C(weights_loaded), C(kv_cache),
    C(cuda_graphs), C(graphs_done), C(engine_ready), C(api_starting), C(startup_complete)).
  returned: always
  type: dict
kv_cache_tokens:
  description: (action) C(GPU KV cache size) in tokens, from the log.
  returned: when logged
  type: int
max_concurrency:
  description: (action) C(Maximum concurrency for <max_model_len> tokens per request).
  returned: when logged
  type: float
compile_cache_marked:
  description:
    - (action) Whether the last poll found the compile cache's marker (C(ds4_effective.compile_cache.host_dir)) already
      recording the image this rank's container runs and the launch digest, as M(dgxspark.ds4.compile_cache)
      with C(state=present) would write it (V(true) too when the cache directory does not exist, with nothing to mark).
    - V(null) when not known (no cache directory in the effective config, no container).
  returned: success
  type: bool
findings:
  description: (action) Failure-catalogue findings (id, cause, fix, node, lines) when it failed.
  returned: on failure
  type: list
  elements: dict
verdicts:
  description: "(action) One line per finding: C(node: cause — fix: ... [line])."
  returned: on failure
  type: list
  elements: str
status:
  description: (module) Unit and container state of this poll (empty with O(status=false)).
  returned: always
  type: dict
lines:
  description: (module) New journal lines of the unit.
  returned: always
  type: list
  elements: str
compile_cache:
  description: (action, O(mark_compile_cache)) The result of M(dgxspark.ds4.compile_cache) C(state=present) on this node.
  returned: when the cache was marked
  type: dict
poll:
  description: (module, with O(poll)) The poll's C(rc), C(stdout) and C(stderr).
  returned: with O(poll)
  type: dict
cursor:
  description: (module) Journal cursor after these lines.
  returned: always
  type: str
api_port:
  description: (module, head) C(open), C(refused), C(timeout) or C(error ...).
  returned: when an API port is known
  type: str
http:
  description: (module) Result of the HTTP checks (ok, problems, health, models_status, chat, timings).
  returned: when O(checks) and the port is open
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._readiness.vllm_ready_spec import ARGUMENT_SPEC
from ansible_collections.dgxspark.ds4.plugins.module_utils._readiness.ready_checks import checks


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    p = module.params
    if not p["unit"]:
        module.fail_json(msg="unit is required when the module runs without its action plugin")
    if module.check_mode:
        module.exit_json(changed=False, msg="check mode: would poll unit %s, container %s, the journal and the API" % (
            p["unit"], p["container_name"]), status={}, lines=[], cursor=p["cursor"])
    if not p["status"] and not p["cursor"] and not p["poll"]:
        module.fail_json(msg="status=false needs cursor (the journal is read after it)")
    module.exit_json(**checks(p, module.run_command))


if __name__ == "__main__":
    main()
