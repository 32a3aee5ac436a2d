# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: keepalived_conf
short_description: keepalived's VRRP configuration of one router host (the clients' one address)
version_added: 0.1.0
description:
  - Renders the keepalived configuration that holds C(ds4_router_vip) on one of the router hosts (logic in
    C(plugins/plugin_utils/keepalived_render.py)) - every host C(state BACKUP) with C(nopreempt), unicast adverts
    between the router hosts, a track script on the local router front.
  - An empty C(interface) is discovered as the interface carrying C(unicast_src_ip) in O(addr_json).
  - Returns C(errors) (one sentence each, naming the role variable and the fix; empty when valid), C(interface) and
    C(text).
author:
  - dgxspark.ds4 contributors (@dgxspark)
options:
  _input:
    description:
      - name (the host), hosts, interface, vip, virtual_router_id, advert_int, auth_pass,
        check_command, check_interval, check_timeout, check_fall, check_rise, script_user.
    type: dict
    required: true
  addr_json:
    description: The host's C(ip -j -4 addr show), parsed (for the interface discovery).
    type: list
    elements: dict
    default: []
'''

EXAMPLES = r'''
- name: Render the VRRP configuration of this router host
  ansible.builtin.set_fact:
    vrrp: "{{ spec | dgxspark.ds4.keepalived_conf(ip_addr.stdout | from_json) }}"
'''

RETURN = r'''
_value:
  description: errors, interface, text.
  type: dict
'''

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.keepalived_render import host_config


def keepalived_conf(spec, addr_json=None):
    return host_config(spec or {}, addr_json or [])


class FilterModule(object):
    def filters(self):
        return {'keepalived_conf': keepalived_conf}
