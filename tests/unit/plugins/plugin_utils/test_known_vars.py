# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unknown prefixed variables are refused (plugins/plugin_utils/known_vars.py), and the known names
generated from the collection's files cover every prefixed name the repository uses."""


import os
import re

import yaml

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import known_vars as kv

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))

# Tokens with a collection prefix that are not variables (module, file, tag, dict-key names).
NOT_VARIABLES = {
    "api_proxy_config": "module dgxspark.ds4.api_proxy_config",
    "config_set": "module dgxspark.ds4.config_set",
    "router_pool": "module dgxspark.ds4.router_pool",
    "router_admin": "plugins/module_utils/_node/router_admin.py (installed on the router host for the pool keeper)",
    "router_config": "playbooks/tasks/router_config.yml and plugins/plugin_utils/router_config.py",
    "router_url": "option of module dgxspark.ds4.router_pool",
    "router_metrics_url": "option of module dgxspark.ds4.router_pool",
    "monitoring_networks": "option of module dgxspark.ds4.nft_table",
    "config_play": "playbooks/config_play.yml",
    "config_options": "Molecule config key",
    "config_dir": "key of ds4_effective['service'] and of modules' options",
    "ds4_": "the prefix itself (comments)",
    "ds4_config": "plugins/plugin_utils/ds4_config.py",
    "host_hardening_": "prefix in documentation",
    "peer_access_": "name pattern of the converge shortcut (roles/*/vars/main.yml)",
    "nccl_fabric_": "name pattern of the converge shortcut",
    "nccl_fabric_env_": "name pattern of the converge shortcut",
    "model_cache_": "name pattern of the converge shortcut",
    "api_proxy_": "name pattern of the converge shortcut",
    "ds4_api_": "name pattern of the converge shortcut",
    "container_image_": "name pattern of the converge shortcut",
    "firewall_": "name pattern of the converge shortcut",
    "router_": "name pattern of the converge shortcut",
    "_converge_inputs": "name suffix: roles/_converge reads __<role>_converge_inputs of the calling role",
    "_converge_checks": "name suffix: roles/_converge reads __<role>_converge_checks of the calling role",
    "ds4_allreduce": "file roles/nccl_fabric/files/ds4_allreduce.py",
    "ds4_doctor": "module dgxspark.ds4.ds4_doctor",
    "ds4_drill": "molecule/resources/tests/ds4_drill.py",
    "ds4_units_active": "key of host_hardening's per-host preflight facts",
    "ds4_user_table": "nft table name in the security scenario",
    "host_hardening_vm_": "prefix of the vm.* sysctl variables (loop)",
    "vllm_service_": "prefix in a comment",
    "vllm_service_restart": "tag of roles/vllm_service",
}


def _scan():
    return kv.scan_collection(REPO, yaml.safe_load)


def test_prefixes_are_ds4_and_every_role():
    known, roles = _scan()
    assert {"config", "vllm_service", "host_hardening", "nccl_fabric", "firewall", "api_proxy", "peer_access",
            "container_image", "model_cache"} <= set(roles)
    pre = kv.prefixes(roles)
    assert "ds4_" in pre and "vllm_service_" in pre and "config_" in pre
    assert pre == tuple(sorted(pre, key=lambda p: (-len(p), p)))
    assert kv.prefixes(["bad-name", ""]) == ("ds4_",)


def test_known_names_come_from_specs_defaults_vars_and_playbooks():
    known, dummy = _scan()
    # argument specs
    assert {"ds4_node_memory_gib", "ds4_profile", "ds4_api_keys", "vllm_service_config_dir"} <= known
    # role defaults / vars
    assert {"vllm_service_worker_wait_s", "config_base", "config_group"} <= known
    # play vars, vars files, register, set_fact (internal names are never refused)
    assert {"ds4_render_dir", "ds4_status_chat", "ds4_logs_lines", "ds4_ops_unit", "ds4_ops_client"} <= known
    assert {"ds4_ready", "ds4_rollback_swap", "ds4_effective"} <= known
    assert {n for n in known if n.startswith("ds4_switch_")}, "switch.yml's registered names"
    # the documented collection-wide names
    assert set(kv.COLLECTION_VARS) <= known
    # a misspelling is not known
    assert "ds4_node_memory_gb" not in known


def test_collection_vars_are_really_read_somewhere():
    text = []
    for top in ("playbooks", "roles"):
        for dirpath, dummy, files in os.walk(os.path.join(REPO, top)):
            for fn in files:
                if fn.endswith((".yml", ".j2")):
                    with open(os.path.join(dirpath, fn)) as f:
                        text.append(f.read())
    text = "\n".join(text)
    stale = [n for n in kv.COLLECTION_VARS if not re.search(r"\b%s\b" % n, text)]
    assert not stale, "COLLECTION_VARS lists names nothing reads: %s" % stale


def _molecule_assigned():
    """Names Molecule's own playbooks register or set (they never reach the config play's hostvars)."""
    names = set()
    for dirpath, dummy, files in os.walk(os.path.join(REPO, "molecule")):
        for fn in files:
            if fn.endswith(".yml"):
                with open(os.path.join(dirpath, fn)) as f:
                    try:
                        docs = list(yaml.safe_load_all(f))
                    except yaml.YAMLError:
                        continue
                for doc in docs:
                    names |= kv.assigned_names(doc)
    return names


COMMENT_RE = re.compile(r"(^|\s)#.*$", re.M)
JINJA_RE = re.compile(r"{{.*?}}|{%.*?%}", re.S)


def _code(text, filename):
    """What can name a variable: comments dropped; in a template only the Jinja parts (the rest is output text,
    e.g. Prometheus label names)."""
    if filename.endswith(".j2"):
        return "\n".join(JINJA_RE.findall(text))
    return COMMENT_RE.sub("", text)


def test_every_prefixed_name_used_in_the_repository_is_known():
    """Drift guard: a new variable anywhere (role, playbook, inventory, Molecule inventory or extra vars, templates)
    must be declared where scan_collection finds it (argument spec, defaults, vars, play vars, register/set_fact)
    or in COLLECTION_VARS; otherwise the config role would refuse it."""
    known, roles = _scan()
    pre = kv.prefixes(roles)
    alt = "|".join(re.escape(p) for p in pre)
    token = re.compile(r"\b(?:%s)[A-Za-z0-9_]*" % alt)
    # in Python (tests passing extra vars): only a dict key ("name": ...) or a key=value string
    py_token = re.compile(r"\b((?:%s)[A-Za-z0-9_]*)(?=[\"']\s*:|=[^=])" % alt)
    found = {}
    for top in ("roles", "playbooks", "inventories", "molecule", ".config", "tests/integration", "plugins"):
        for dirpath, dummy, files in os.walk(os.path.join(REPO, top)):
            for fn in files:
                if not fn.endswith((".yml", ".yaml", ".j2", ".py", ".cfg")):
                    continue
                path = os.path.join(dirpath, fn)
                if top == "plugins" and not fn.startswith(("effective_config", "vllm_ready")):
                    continue
                if fn == "test_unknown_vars.py":  # misspells on purpose
                    continue
                with open(path, errors="replace") as f:
                    for name in (py_token if fn.endswith(".py") else token).findall(_code(f.read(), fn)):
                        found.setdefault(name, set()).add(os.path.relpath(path, REPO))
    allowed = known | set(NOT_VARIABLES) | _molecule_assigned()
    missing = dict((n, sorted(p)[:3]) for n, p in found.items() if n not in allowed)
    assert not missing, ("prefixed names used in the repository but unknown to the config role's check "
                         "(declare them in an argument spec / defaults, or add them to known_vars.COLLECTION_VARS): %s" % missing)


def test_every_shipped_inventory_passes():
    known, roles = _scan()
    pre = kv.prefixes(roles)
    inv_root = os.path.join(REPO, "inventories")
    for dirpath, dummy, files in os.walk(inv_root):
        for fn in files:
            if fn.endswith(".yml") and fn != "hosts.yml":
                with open(os.path.join(dirpath, fn)) as f:
                    doc = yaml.safe_load(f) or {}
                cands = dict((k, {"hosts": ["spark1"], "value": v}) for k, v in doc.items())
                assert kv.find_unknown(cands, known, pre) == [], os.path.join(dirpath, fn)


def test_misspelt_memory_is_refused_with_the_real_name():
    """The motivating case: ds4_node_memory_gb on a 96 GB node silently got the 128 GiB cap."""
    known, roles = _scan()
    pre = kv.prefixes(roles)
    cands = {
        "ds4_node_memory_gb": {"hosts": ["spark2"], "where": "inventories/x/host_vars/spark2.yml:3", "value": 96},
        "ds4_node_memory_gib": {"hosts": ["spark1"], "value": 128},
        "_ds4_private": {"hosts": ["spark1"], "value": 1},
        "other_var": {"hosts": ["spark1"], "value": 1},
        "ds4_effective": {"hosts": ["spark1"], "value": {}},
    }
    out = kv.find_unknown(cands, known, pre)
    assert [u["name"] for u in out] == ["ds4_node_memory_gb"]
    assert out[0]["suggestion"] == "ds4_node_memory_gib"
    line = kv.format_unknown(out[0], ["spark1", "spark2"])
    assert line.startswith("[host spark2] ds4_node_memory_gb = 96 (set in inventories/x/host_vars/spark2.yml:3)")
    assert "rename it to ds4_node_memory_gib" in line and "Fix:" in line


def test_role_prefixed_typo_and_allow_list():
    known, roles = _scan()
    pre = kv.prefixes(roles)
    cands = {"vllm_service_config_dri": {"hosts": ["spark1", "spark2"], "where": "extra vars (-e)", "value": "/srv"},
             "firewall_rules": {"hosts": ["spark1", "spark2"], "value": []}}
    out = kv.find_unknown(cands, known, pre)
    assert [u["name"] for u in out] == ["firewall_rules", "vllm_service_config_dri"]
    assert out[1]["suggestion"] == "vllm_service_config_dir"
    line = kv.format_unknown(out[1], ["spark1", "spark2"])
    assert line.startswith('vllm_service_config_dri = "/srv" (set in extra vars (-e))'), line
    # another role's variable that happens to share a prefix: accepted when listed
    assert [u["name"] for u in kv.find_unknown(cands, known, pre, allowed=["firewall_rules"])] == ["vllm_service_config_dri"]


def test_secret_looking_values_are_not_shown():
    item = {"name": "vllm_service_api_kye", "hosts": [], "where": None, "value": "sk-very-secret",
            "suggestion": "vllm_service_api_key"}
    line = kv.format_unknown(item)
    assert "sk-very-secret" not in line and "(value not shown)" in line
    assert "Ansible does not say which file" in line
    item = {"name": "ds4_api_keyz", "hosts": [], "where": None, "value": ["k1"], "suggestion": None}
    assert "k1" not in kv.format_unknown(item)


def test_no_suggestion_when_nothing_is_close():
    assert kv.closest("ds4_zzzzzzzzzzzzzzzzzzz", {"ds4_profile"}) is None
    assert kv.closest("x", set()) is None
    item = {"name": "ds4_zzz", "hosts": [], "value": 1, "suggestion": None}
    assert "remove it, or rename it to a documented input" in kv.format_unknown(item)


def test_assigned_names_walks_blocks_set_fact_register_vars():
    doc = [{"hosts": "spark", "vars": {"ds4_a": 1}, "tasks": [
        {"block": [{"ansible.builtin.set_fact": {"ds4_b": 1, "cacheable": True}},
                   {"ansible.builtin.command": "true", "register": "ds4_c", "loop_control": {"loop_var": "ds4_d"}}],
         "rescue": [{"ansible.builtin.include_role": {"name": "x"}, "vars": {"ds4_e": 2}}]}]}]
    assert kv.assigned_names(doc) == {"ds4_a", "ds4_b", "ds4_c", "ds4_d", "ds4_e"}
    assert kv.assigned_names(None) == set()
    assert kv.argument_spec_names({"argument_specs": {"main": {"options": {"a": {}}}, "x": {"options": {"b": {}}}}}) == {"a", "b"}
    assert kv.argument_spec_names("junk") == set()


def test_describe_origin():
    assert kv.describe_origin("/w/inv/group_vars/spark/site.yml", 3, "/w") == "inv/group_vars/spark/site.yml:3"
    assert kv.describe_origin("/elsewhere/x.yml", None, "/w") == "/elsewhere/x.yml"
    assert kv.describe_origin(None) is None


def test_scan_of_a_missing_collection_knows_only_the_documented_names(tmp_path):
    known, roles = kv.scan_collection(str(tmp_path), yaml.safe_load)
    assert roles == []
    assert known == set(kv.COLLECTION_VARS) | set(kv.INTERNAL_NAMES)


def test_role_results_are_the_roles_registered_and_set_names_less_its_options(tmp_path):
    role = tmp_path / "roles" / "demo"
    (role / "tasks").mkdir(parents=True)
    (role / "handlers").mkdir()
    (role / "meta").mkdir()
    (role / "tasks" / "main.yml").write_text(yaml.safe_dump([
        {"name": "a", "ansible.builtin.command": "true", "register": "demo_probe"},
        {"block": [{"name": "b", "ansible.builtin.set_fact": {"demo_ref": 1, "demo_force": True, "cacheable": False}}],
         "rescue": [{"name": "c", "ansible.builtin.debug": {"msg": "x"}, "register": "_demo_private"}]},
        # scoped to the task: an input passed this way (include_role vars) is never a result
        {"name": "d", "ansible.builtin.debug": {"msg": "x"}, "vars": {"demo_pairs": [1]}},
        # another role's prefix: that role's result is this one's input
        {"name": "e", "ansible.builtin.set_fact": {"other_ref": 2}},
    ]))
    (role / "handlers" / "main.yml").write_text(yaml.safe_dump([
        {"name": "h", "ansible.builtin.command": "true", "register": "demo_handled"}]))
    (role / "meta" / "argument_specs.yml").write_text(yaml.safe_dump(
        {"argument_specs": {"main": {"options": {"demo_force": {"type": "bool"}, "demo_pairs": {"type": "list"}}}}}))
    assert kv.role_results(str(role), yaml.safe_load) == {"demo_probe", "demo_ref", "demo_handled"}


def test_what_a_skipped_role_publishes_is_among_its_results_so_a_second_include_never_takes_it_for_an_input():
    """converge_decide sets a skipped role's published facts (__<role>_converge_published); the role's inputs leave
    them out only if the role's own tasks set them too (known_vars.role_results)."""
    found = 0
    for role in sorted(os.listdir(os.path.join(REPO, "roles"))):
        path = os.path.join(REPO, "roles", role, "vars", "main.yml")
        if not os.path.isfile(path):
            continue
        with open(path) as handle:
            pattern = (yaml.safe_load(handle) or {}).get("__%s_converge_published" % role)
        if not pattern:
            continue
        results = kv.role_results(os.path.join(REPO, "roles", role), yaml.safe_load)
        assert set(n for n in results if re.match(pattern, n)), (role, pattern)
        # an option would stay an input (role_results leaves options in): none may be published
        with open(os.path.join(REPO, "roles", role, "meta", "argument_specs.yml")) as handle:
            options = kv.argument_spec_names(yaml.safe_load(handle))
        assert not [n for n in options if re.match(pattern, n)], (role, pattern)
        found += 1
    assert found >= 4


def test_the_config_actions_scan_is_kept_for_later_runs_under_what_it_read(tmp_path, monkeypatch):
    """effective_config.known_names: scanned once, then read back by a later run (a new process: the in-process cache
    emptied) from the template cache's directory; a changed role default, playbook or scanner is another key, scanned
    again; an unwritable directory only means scanning each time."""
    from ansible_collections.dgxspark.ds4.plugins.action import effective_config as ec
    root = tmp_path / "collection"
    (root / "roles" / "svc" / "defaults").mkdir(parents=True)
    (root / "roles" / "svc" / "defaults" / "main.yml").write_text("svc_port: 1\n")
    (root / "playbooks").mkdir()
    (root / "playbooks" / "site.yml").write_text("- hosts: all\n  vars:\n    ds4_site_thing: 1\n")
    cache = tmp_path / "cache"
    monkeypatch.setattr(ec.template_cache, "cache_dir", lambda: str(cache))
    scans = []
    real = ec.scan_collection
    monkeypatch.setattr(ec, "scan_collection", lambda r, load: scans.append(r) or real(r, load))

    def run():
        monkeypatch.setattr(ec, "_KNOWN_CACHE", {})          # a new ansible-playbook process
        return ec.known_names(str(root))
    first = run()
    assert "svc_port" in first[0] and "ds4_site_thing" in first[0] and "svc_" in first[1] and len(scans) == 1
    assert run() == first and len(scans) == 1                  # read back, not scanned
    (root / "roles" / "svc" / "defaults" / "main.yml").write_text("svc_port: 1\nsvc_host: x\n")
    assert "svc_host" in run()[0] and len(scans) == 2
    (root / "playbooks" / "site.yml").write_text("- hosts: all\n")
    assert "ds4_site_thing" not in run()[0] and len(scans) == 3
    monkeypatch.setattr(ec.template_cache, "cache_dir", lambda: str(tmp_path / "file" / "x"))
    (tmp_path / "file").write_text("not a directory")
    assert run()[0] == ec.known_names(str(root))[0] and len(scans) == 4
