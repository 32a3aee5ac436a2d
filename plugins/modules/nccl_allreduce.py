#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r'''
---
module: nccl_allreduce
short_description: Run one rank of the two-node NCCL all-reduce preflight in a container and judge it
version_added: "0.1.0"
description:
  - Runs C(ds4_allreduce.py) (shipped by the nccl_fabric role) in O(image) with C(docker run --rm --network host
    --ipc host --gpus all --device /dev/infiniband --ulimit memlock=-1 --env-file) O(env_file), with
    C(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET), as rank O(rank) of O(world_size).
  - Parses the output with C(nccl_log.summarize) (transport, HCAs, busbw at the largest size) and returns the verdict;
    it does not fail on a bad verdict (RV(ok) false, RV(failures) with the figures) so the caller can show both ranks.
  - Every rank judges transport and HCAs; rank 0 (which prints the rows) also judges busbw.
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: partial
    details: In check mode the container is not started; RV(skipped_run) is true and RV(cmd) shows what would run.
  diff_mode:
    support: none
    details: Changes nothing.
options:
  image:
    description: Container image (the profile's vLLM image).
    type: str
    required: true
  python:
    description:
      - The image's Python that runs vLLM (its torch and NCCL run the program); role dgxspark.ds4.container_image finds it
        (C(container_image_vllm_python)). A venv image such as b12x's keeps it in C(/opt/env/bin).
    type: str
    default: python3
  program:
    description: Host path of ds4_allreduce.py (mounted read-only as /ds4_allreduce.py).
    type: path
    required: true
  env_file:
    description: Host path of the node's nccl.env.
    type: path
    required: true
  rank:
    description: This node's rank (0 = head, prints the result rows).
    type: int
    required: true
  world_size:
    description: Number of ranks.
    type: int
    default: 2
  master_addr:
    description: Head's fabric IP.
    type: str
    required: true
  master_port:
    description: TCP port of the preflight's rendezvous (not the service's master port).
    type: int
    default: 29511
  threshold_gbps:
    description: Minimum busbw at the largest size.
    type: float
    default: 18.0
  expected_hcas:
    description: HCAs expected on the C(NET/IB Using) line (0 = do not check).
    type: int
    default: 2
  gpus:
    description: Pass C(--gpus all).
    type: bool
    default: true
  rdma_devices:
    description: Pass C(--device /dev/infiniband).
    type: bool
    default: true
  timeout_s:
    description: Rendezvous / collective timeout of the program, seconds.
    type: int
    default: 300
  program_args:
    description: Extra program arguments (e.g. C(--max-bytes 1073741824)).
    type: list
    elements: str
    default: []
  docker:
    description: Docker CLI.
    type: str
    default: docker
'''

EXAMPLES = r'''
- name: All-reduce preflight (one rank per node, run on both nodes at once)
  dgxspark.ds4.nccl_allreduce:
    image: "{{ ansible_facts['ds4_effective']['image']['ref'] }}"
    program: /usr/local/libexec/dgxspark-ds4/ds4_allreduce.py
    env_file: /etc/dgxspark-ds4/nccl.env
    rank: "{{ ansible_facts['ds4_effective']['node_rank'] }}"
    master_addr: "{{ ansible_facts['ds4_effective']['master_addr'] }}"
  register: allreduce
'''

RETURN = r'''
ok:
  description: Transport IB, enough HCAs and (rank 0) busbw at or above the threshold.
  returned: success
  type: bool
failures:
  description: Why not ok, each with the figures.
  returned: success
  type: list
  elements: str
summary:
  description: One line, e.g. C(transport=IB hcas=rocep1s0f1,roceP2p1s0f1 busbw=21.95 GB/s at 1073741824 bytes (both_twins)).
  returned: success
  type: str
transport:
  description: C(IB), C(Socket) or null.
  returned: success
  type: str
busbw_gbps:
  description: Bus bandwidth at the largest size (rank 0).
  returned: success
  type: float
rows:
  description: Parsed result rows.
  returned: success
  type: list
  elements: dict
rc:
  description: Exit status of docker run.
  returned: success
  type: int
cmd:
  description: The docker argv.
  returned: always
  type: list
  elements: str
stdout_lines:
  description: The program's output (stdout and stderr).
  returned: success
  type: list
  elements: str
skipped_run:
  description: True in check mode.
  returned: always
  type: bool
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._fabric import nccl_preflight


def main():
    module = AnsibleModule(
        argument_spec=dict(
            image=dict(type='str', required=True),
            python=dict(type='str', default='python3'),
            program=dict(type='path', required=True),
            env_file=dict(type='path', required=True),
            rank=dict(type='int', required=True),
            world_size=dict(type='int', default=2),
            master_addr=dict(type='str', required=True),
            master_port=dict(type='int', default=29511),
            threshold_gbps=dict(type='float', default=18.0),
            expected_hcas=dict(type='int', default=2),
            gpus=dict(type='bool', default=True),
            rdma_devices=dict(type='bool', default=True),
            timeout_s=dict(type='int', default=300),
            program_args=dict(type='list', elements='str', default=[]),
            docker=dict(type='str', default='docker'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    argv = nccl_preflight.docker_argv(
        p['image'], p['program'], p['rank'], p['world_size'], p['master_addr'], p['master_port'], p['env_file'],
        docker=p['docker'], gpus=p['gpus'], rdma_devices=p['rdma_devices'], program_args=p['program_args'],
        name='dgxspark-ds4-allreduce-%d' % p['rank'], timeout_s=p['timeout_s'], python=p['python'])
    if module.check_mode:
        module.exit_json(changed=False, skipped_run=True, cmd=argv)
    rc, out, err = module.run_command(argv)
    text = (out or '') + (err or '')
    verdict = nccl_preflight.judge(text, p['rank'], p['threshold_gbps'], p['expected_hcas'])
    if rc != 0:
        verdict['failures'].insert(0, 'the preflight container exited %d (last lines: %s)' % (
            rc, ' | '.join(text.strip().splitlines()[-5:])))
        verdict['ok'] = False
    module.exit_json(changed=False, skipped_run=False, cmd=argv, rc=rc, stdout_lines=text.splitlines(), **verdict)


if __name__ == '__main__':
    main()
