# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The paths, unit and container names vllm_service takes as inputs are published once per host
(ds4_effective['service'], plugins/plugin_utils/service_layout.py) and read from there by
playbooks/vars/ops.yml, the vllm_ready action and doctor.yml."""


import os

import yaml

from ansible_collections.dgxspark.ds4.plugins.action import vllm_ready as ready_action
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import service_layout as sl

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ROLE = os.path.join(REPO, "roles", "vllm_service")


def _yaml(*parts):
    with open(os.path.join(*parts)) as f:
        return yaml.safe_load(f)


def test_defaults_equal_the_role_defaults_and_argument_spec():
    defaults = _yaml(ROLE, "defaults", "main.yml")
    spec = _yaml(ROLE, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    for var, key in sl.LAYOUT_VARS.items():
        assert var in spec, "%s is a vllm_service input" % var
        if key in sl.DEFAULTS:
            assert defaults[var] == sl.DEFAULTS[key], var
            assert spec[var]["default"] == sl.DEFAULTS[key], var
    # the role's templated name defaults are the same names for both ranks
    assert defaults["vllm_service_unit_name"] == "{{ ds4_effective['unit_name'] }}"
    assert defaults["vllm_service_container_name"] == "dgxspark-ds4-{{ ds4_effective['role'] }}"


def test_default_layout():
    layout, errors = sl.service_layout("worker", {})
    assert errors == []
    assert layout["unit_name"] == "dgxspark-ds4-worker.service"
    assert layout["container_name"] == "dgxspark-ds4-worker"
    assert layout["script_path"] == "/etc/dgxspark-ds4/launch-worker.sh"
    assert layout["deployed_record"] == "/var/lib/dgxspark-ds4/deployed-worker.json"
    assert layout["restart_pending_path"] == "/var/lib/dgxspark-ds4/restart-pending-worker"
    assert layout["unit_path"] == "/etc/systemd/system/dgxspark-ds4-worker.service"
    assert layout["rollback_store"] == "/etc/dgxspark-ds4/previous"
    assert layout["docker_bin"] == "/usr/bin/docker"


def test_every_override_is_published():
    values = {
        "vllm_service_config_dir": "/srv/ds4/etc/",
        "vllm_service_state_dir": "/srv/ds4/state",
        "vllm_service_unit_dir": "/run/systemd/system",
        "vllm_service_libexec_dir": "/opt/ds4/libexec",
        "vllm_service_docker_bin": "/usr/local/bin/docker",
        "vllm_service_unit_name": "vllm-head.service",
        "vllm_service_container_name": "vllm-head",
    }
    layout, errors = sl.service_layout("head", values, "spark1")
    assert errors == []
    assert layout["config_dir"] == "/srv/ds4/etc/"  # as given: vllm_service compares the same value
    assert layout["script_path"] == "/srv/ds4/etc/launch-head.sh"
    assert layout["secrets_path"] == "/srv/ds4/etc/secrets-head.env"
    assert layout["prestart_config_path"] == "/srv/ds4/etc/prestart-head.json"
    assert layout["rollback_store"] == "/srv/ds4/etc/previous"
    assert layout["deployed_record"] == "/srv/ds4/state/deployed-head.json"
    # the one restart request path vllm_service, model_cache and nccl_fabric use (it was derived in three vars files)
    assert layout["restart_pending_path"] == "/srv/ds4/state/restart-pending-head"
    assert layout["unit_path"] == "/run/systemd/system/vllm-head.service"
    assert layout["unit_name"] == "vllm-head.service"
    assert layout["container_name"] == "vllm-head"
    assert layout["docker_bin"] == "/usr/local/bin/docker"
    assert layout["libexec_dir"] == "/opt/ds4/libexec"
    # None = not set
    layout, errors = sl.service_layout("head", {"vllm_service_state_dir": None})
    assert errors == [] and layout["state_dir"] == "/var/lib/dgxspark-ds4"


def test_bad_values_are_refused_naming_variable_value_and_fix():
    layout, errors = sl.service_layout("head", {
        "vllm_service_config_dir": "etc/ds4",
        "vllm_service_state_dir": "/var/lib/my state",
        "vllm_service_unit_name": "vllm-head",
        "vllm_service_container_name": "-bad",
        "vllm_service_docker_bin": "{{ my_docker }}",
    }, "spark1")
    text = "\n".join(errors)
    assert len(errors) == 5, text
    assert "[host spark1] vllm_service_config_dir = 'etc/ds4': must be an absolute path" in text
    assert "vllm_service_state_dir = '/var/lib/my state'" in text
    assert "vllm_service_unit_name = 'vllm-head': must be a systemd service name ending in .service. Fix: e.g. dgxspark-ds4-head.service." in text
    assert "vllm_service_container_name = '-bad'" in text
    assert "vllm_service_docker_bin = '{{ my_docker }}': " in text and "cannot be a template" in text
    # refused values keep the defaults (nothing half-applied)
    assert layout["config_dir"] == "/etc/dgxspark-ds4" and layout["unit_name"] == "dgxspark-ds4-head.service"


def test_vllm_ready_reads_the_published_names():
    eff = {"role": "head", "unit_name": "vllm-head.service",
           "service": {"unit_name": "vllm-head.service", "container_name": "vllm-head", "docker_bin": "/opt/docker"}}
    assert ready_action.rank_names(eff, "head") == {"unit": "vllm-head.service", "container_name": "vllm-head",
                                                    "docker_cli": "/opt/docker"}
    # an older fact without 'service': the role's defaults
    assert ready_action.rank_names({"unit_name": "dgxspark-ds4-worker.service"}, "worker") == {
        "unit": "dgxspark-ds4-worker.service", "container_name": "dgxspark-ds4-worker", "docker_cli": "/usr/bin/docker"}


def test_vllm_ready_argument_spec_matches_the_module():
    """The module and the action take their options from one spec (module_utils/_readiness/vllm_ready_spec.py): the module
    passes ARGUMENT_SPEC to AnsibleModule, the action validates the same names and types without defaults (an
    unset option is filled from ds4_effective there)."""
    import ast
    from ansible_collections.dgxspark.ds4.plugins.module_utils._readiness import vllm_ready_spec
    with open(os.path.join(REPO, "plugins", "modules", "vllm_ready.py")) as f:
        tree = ast.parse(f.read())
    passed = [node.value for node in ast.walk(tree) if isinstance(node, ast.keyword) and node.arg == "argument_spec"]
    assert len(passed) == 1 and isinstance(passed[0], ast.Name) and passed[0].id == "ARGUMENT_SPEC", passed
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module.endswith("module_utils._readiness.vllm_ready_spec") for alias in node.names]
    assert imported == ["ARGUMENT_SPEC"], imported
    module_spec = vllm_ready_spec.ARGUMENT_SPEC
    assert ready_action.ARGUMENT_SPEC is vllm_ready_spec.ACTION_ARGUMENT_SPEC
    assert set(ready_action.ARGUMENT_SPEC) == set(module_spec)
    for name, spec in ready_action.ARGUMENT_SPEC.items():
        assert "default" not in spec, name
        assert spec["type"] == module_spec[name]["type"], name
        assert spec.get("choices") == module_spec[name].get("choices"), name
        assert spec.get("no_log") == module_spec[name].get("no_log"), name


def test_ops_vars_read_the_published_layout():
    """playbooks/vars/ops.yml takes every path and name from ds4_effective['service'] (no hard-coded default
    before it)."""
    ops = _yaml(REPO, "playbooks", "vars", "ops.yml")
    assert "ds4_ops_eff['service']" in ops["ds4_ops_service"]
    for var, key in (("ds4_ops_unit", "unit_name"), ("ds4_ops_container", "container_name"),
                     ("ds4_ops_config_dir", "config_dir"), ("ds4_ops_state_dir", "state_dir"),
                     ("ds4_ops_unit_dir", "unit_dir"), ("ds4_ops_docker_bin", "docker_bin")):
        text = ops[var].strip()
        assert text.startswith("{{ ds4_ops_service['%s'] | default(" % key), (var, text)
    paths = [f["path"] for f in ops["ds4_ops_config_files"]]
    assert all(p.startswith(("{{ ds4_ops_config_dir }}", "{{ ds4_ops_unit_dir }}", "{{ ds4_ops_deployed_record }}",
                             "{{ ds4_ops_script_path }}")) for p in paths), paths


def test_other_roles_reach_vllm_service_through_the_published_layout():
    """The roles that hand something to vllm_service (a restart request, a kept image) find its files through
    ds4_effective['service'], never through vllm_service_* variables or its defaults: with an overridden state
    directory a fabric or model change must still restart the pair, and pruning must still see the live unit and
    the rollback set."""
    # the restart request: one path, published (service_layout.paths), read by all three roles
    nccl = _yaml(REPO, "roles", "nccl_fabric", "vars", "main.yml")
    assert nccl["_nccl_fabric_pending_path"] == "{{ ansible_facts['ds4_effective']['service']['restart_pending_path'] }}"
    handlers = _yaml(REPO, "roles", "nccl_fabric", "handlers", "main.yml")
    assert [h["ansible.builtin.file"]["path"] for h in handlers if "ansible.builtin.file" in h] == [
        "{{ _nccl_fabric_pending_path | dirname }}"]
    model = _yaml(REPO, "roles", "model_cache", "vars", "main.yml")
    assert model["__model_cache_restart_marker"] == "{{ ansible_facts['ds4_effective']['service']['restart_pending_path'] }}"
    vllm = _yaml(ROLE, "vars", "main.yml")
    assert vllm["_vllm_service_pending_path"] == "{{ ds4_effective['service']['restart_pending_path'] }}"
    prune = ""
    for name in ("prune.yml", "prune_found.yml"):
        with open(os.path.join(REPO, "roles", "container_image", "tasks", name)) as f:
            prune += f.read()
    assert "vllm_service_" not in prune
    assert "ds4_effective']['service']['unit_dir']" in prune and "ds4_effective']['service']['config_dir']" in prune
