# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a refused variable was set (plugins/plugin_utils/var_origin.py): the place that decides the host's value,
named by file and line, from the files Ansible's inventory reads (public information only). The refusals through
ansible-playbook are in tests/integration/test_unknown_vars.py and test_placeholder_inventory.py."""


import os

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import var_origin as vo

YAML_INVENTORY = """all:
  children:
    spark:
      hosts:
        spark1:
          ansible_host: 10.0.0.1
        spark2:
          ansible_host: 10.0.0.2
          ds4_fabric_ip: 192.168.100.2
      vars:
        ds4_router_address: 10.0.0.9
"""
INI_INVENTORY = """# a comment: ds4_fabric_ip=1
[spark]
spark1 ansible_host=10.0.0.1
spark2 ansible_host=10.0.0.2 ds4_fabric_ip=192.168.100.2

[spark:vars]
ds4_router_address = 10.0.0.9
"""
GROUPS = {'all': ['spark1', 'spark2'], 'spark': ['spark1', 'spark2']}


def _origins(paths, extra=(), playbook_dir=None):
    return vo.Origins([str(p) for p in paths], playbook_dir, extra, lambda h: [g for g, m in GROUPS.items() if h in m])


def _site(tmp_path, inventory_name, text):
    inv = tmp_path / 'inv'
    (inv / 'group_vars' / 'spark').mkdir(parents=True)
    (inv / 'host_vars').mkdir()
    (inv / inventory_name).write_text(text)
    (inv / 'group_vars' / 'all.yml').write_text('---\nds4_tls: true\nds4_ready_timout: 60\n')
    (inv / 'group_vars' / 'spark' / 'site.yml').write_text('---\n# the recipe\nds4_profile: balanced\nds4_ready_timout: 90\n')
    (inv / 'host_vars' / 'spark2.yml').write_text('---\nds4_node_memory_gib: 96\n')
    return inv


def test_each_place_is_found_by_file_and_line_most_specific_first(tmp_path):
    for name, text in (('hosts.yml', YAML_INVENTORY), ('hosts.ini', INI_INVENTORY)):
        inv = _site(tmp_path / name, name, text)
        origins = _origins([inv / name])
        # host_vars, only for that host
        assert origins.find('spark2', 'ds4_node_memory_gib') == (str(inv / 'host_vars' / 'spark2.yml'), 2)
        assert origins.find('spark1', 'ds4_node_memory_gib') is None
        # the host's group before all
        assert origins.find('spark1', 'ds4_ready_timout') == (str(inv / 'group_vars' / 'spark' / 'site.yml'), 4)
        assert origins.find('spark1', 'ds4_tls') == (str(inv / 'group_vars' / 'all.yml'), 2)
        # the inventory file: the host's own entry (spark2's line, not spark1's), then its group's vars
        line2 = 8 if name == 'hosts.yml' else 4
        assert origins.find('spark2', 'ansible_host') == (str(inv / name), line2), name
        assert origins.find('spark1', 'ansible_host') == (str(inv / name), 6 if name == 'hosts.yml' else 3), name
        assert origins.find('spark2', 'ds4_fabric_ip') == (str(inv / name), 9 if name == 'hosts.yml' else 4), name
        assert origins.find('spark1', 'ds4_fabric_ip') is None, name  # the INI comment does not count
        assert origins.find('spark1', 'ds4_router_address') == (str(inv / name), 11 if name == 'hosts.yml' else 7), name


def test_the_extra_vars_win_and_a_directory_source_and_the_playbook_dir_are_read(tmp_path):
    inv = _site(tmp_path, 'hosts.yml', YAML_INVENTORY)
    play = tmp_path / 'play'
    (play / 'host_vars' / 'spark1').mkdir(parents=True)
    (play / 'host_vars' / 'spark1' / 'local.yml').write_text('vllm_service_config_dri: /srv\n')
    origins = _origins([inv], extra={'ds4_ready_timout'}, playbook_dir=str(play))
    assert vo.describe(origins.find('spark1', 'ds4_ready_timout')) == 'extra vars (-e)'
    assert origins.find('spark1', 'vllm_service_config_dri') == (str(play / 'host_vars' / 'spark1' / 'local.yml'), 1)
    assert origins.find('spark2', 'ansible_host') == (str(inv / 'hosts.yml'), 8)
    assert origins.find('spark1', 'ds4_nowhere') is None


def test_describe_is_relative_to_the_working_directory_and_resolves_a_link_when_asked(tmp_path):
    inv = _site(tmp_path, 'hosts.yml', YAML_INVENTORY)
    linked = tmp_path / 'other'
    linked.mkdir()
    os.symlink(str(inv / 'hosts.yml'), str(linked / 'hosts.yml'))
    origins = _origins([linked / 'hosts.yml'])
    found = origins.find('spark2', 'ansible_host')
    assert vo.describe(found, str(tmp_path)) == 'other/hosts.yml:8'
    assert vo.describe(found, str(tmp_path), resolve=True) == 'inv/hosts.yml:8'
    assert vo.describe(None) is None


def test_unreadable_or_broken_files_name_nothing(tmp_path):
    inv = tmp_path / 'inv'
    (inv / 'group_vars').mkdir(parents=True)
    (inv / 'hosts.yml').write_text('all: [unclosed\n')
    (inv / 'group_vars' / 'spark.yml').write_text('$ANSIBLE_VAULT;1.1;AES256\n6162\n')
    origins = _origins([inv / 'hosts.yml'])
    assert origins.find('spark1', 'ds4_tls') is None
