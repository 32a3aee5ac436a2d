#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r'''
---
module: effective_config
short_description: Validate the DGX Spark inventory and profile, and compute one node's effective config
version_added: 0.1.0
description:
  - Action plugin that runs on the controller only; it never contacts a host.
  - Merges the collection base layer, the profile layer (C(ds4_profile_config)), the site overrides
    (C(ds4_site_overrides)) and the per-host values (C(ds4_node_rank), C(ds4_fabric_ip), C(ds4_fabric_prefix),
    C(ds4_fabric_ifname), C(ds4_rdma_hcas), optional C(ds4_nccl_ib_gid_index), C(ds4_node_memory_gib),
    C(ds4_ack_unsafe_gpu_memory_utilization)) of every host in the group.
  - Validates everything first and fails with every error at once, each naming the host, the variable, the value,
    why it is refused and the fix.
  - Refuses every variable of a host in the group (inventory or extra vars) whose name starts with C(ds4_) or with a
    role's prefix (C(vllm_service_), C(host_hardening_), ...) and that the collection does not know, naming the
    variable, the file and line where it was set and the closest known name. The known names are read from the
    collection's roles (argument specs, defaults, vars) and playbooks (C(plugins/plugin_utils/known_vars.py)); list a
    prefixed name that belongs to something else in C(ds4_extra_known_vars).
  - Publishes the paths, unit and container name of each rank (from C(vllm_service_config_dir),
    C(vllm_service_state_dir), C(vllm_service_unit_dir), C(vllm_service_libexec_dir), C(vllm_service_docker_bin),
    C(vllm_service_unit_name), C(vllm_service_container_name)) as C(ds4_effective.service), read by the operations
    playbooks and C(dgxspark.ds4.vllm_ready) (C(plugins/plugin_utils/service_layout.py)).
  - Checks C(serve_args) and C(env) against the C(vllm serve) flag schema of the vLLM the image carries
    (C(image.vllm_version); data in C(plugins/plugin_utils/vllm_schemas/), logic in C(plugins/plugin_utils/vllm_schema.py)),
    refusing unknown flags, wrong types, values outside vLLM's choices, unknown or mistyped JSON keys and counts below 1;
    removed or unknown C(VLLM_*) env vars, deprecated flags and a version without a schema are warnings.
  - Sets the host fact C(ds4_effective), which every later role reads; nothing recomputes it.
  - Logic lives in C(plugins/plugin_utils/ds4_config.py) and C(plugins/plugin_utils/launch_render.py).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  base:
    description:
      - The collection base layer (C(config_base) from the config role's vars), with C(serve_args), C(container), C(env).
    type: dict
    required: true
  group:
    description:
      - Inventory group holding the two Sparks.
    type: str
    default: spark
  allow_placeholders:
    description:
      - false refuses, before anything else and before any connection, an inventory whose C(ansible_host),
        C(ds4_fabric_ip) or C(ds4_router_address) is still a shipped placeholder (RFC 5737 TEST-NET ranges
        192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24), naming the file to fill in. The result then carries
        C(placeholder_addresses=true).
      - true for previews that contact no host (C(playbooks/render.yml)).
    type: bool
    default: false
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Reads variables only; behaves the same in check mode.
  diff_mode:
    support: none
    details: Changes nothing, so there is no diff.
  platform:
    support: full
    platforms: all
    description: Runs on the controller.
notes:
  - The module file only documents the action plugin; executing it on a host fails.
'''

EXAMPLES = r'''
# Inside the dgxspark.ds4.config role, which owns config_base (roles/config/vars/main.yml).
- name: Compute ds4_effective for this node
  dgxspark.ds4.effective_config:
    base: "{{ config_base }}"

- name: Show the argv
  ansible.builtin.debug:
    msg: "{{ ansible_facts['ds4_effective']['argv'] }}"
'''

RETURN = r'''
ansible_facts:
  description: The effective config of this node.
  returned: success
  type: dict
  contains:
    ds4_effective:
      description:
        - profile, seed, host, node_rank, role (head/worker), nnodes, master_addr, master_port, fabric, node_memory_gib,
          gpu_memory_utilization_cap, api, image, model, entrypoint, container, env (ordered, common then per-node),
          per_node_env, serve_args, argv, script_name, unit_name, launch_script, env_file_name, env_file, volumes, host_dirs,
          overrides, deviations (collection settings that change the seed's launch, e.g. ds4_interactive_long_prompts),
          interactive_long_prompts (enabled, threshold, max_num_batched_tokens, fraction, deviation), warnings,
          service (config_dir, state_dir, unit_dir, libexec_dir, docker_bin, unit_name,
          container_name, script_path, env_file_path, secrets_path, prestart_config_path, unit_path, deployed_record,
          rollback_store).
      type: dict
      sample:
        role: head
        node_rank: 0
        script_name: launch-head.sh
        unit_name: dgxspark-ds4-head.service
errors:
  description: Every validation error, one per item.
  returned: failure
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(base=dict(type='dict', required=True), group=dict(type='str', default='spark'),
                                              allow_placeholders=dict(type='bool', default=False)),
                           supports_check_mode=True)
    module.fail_json(msg='dgxspark.ds4.effective_config is an action plugin that runs on the controller; '
                         'this module file must not execute on a host.')


if __name__ == '__main__':
    main()
