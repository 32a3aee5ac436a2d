# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A broken inventory makes playbooks/site.yml fail before any host is touched.

Every host in these temporary inventories uses the community.docker.docker connection with a
container name that does not exist, so any attempt to touch a host fails with a connection
error ("No such container"). The negative cases must fail with the validation message (naming
host and variable) and without any connection error; the control case (a valid inventory) must
get past validation and then hit exactly that connection error, which proves the fixture would
have revealed a touched host.
"""

import json
import os
import subprocess
import sys
import uuid

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.dirname(sys.executable)
CONNECTION_ERRORS = ("No such container", "UNREACHABLE")


def _host(rank, ip):
    return {
        "ansible_connection": "community.docker.docker",
        "ansible_host": "ds4-itest-absent-%s" % uuid.uuid4().hex[:12],
        "ds4_node_rank": rank,
        "ds4_fabric_ip": ip,
        "ds4_fabric_prefix": 24,
        "ds4_fabric_ifname": "enp1s0f1np1",
        "ds4_rdma_hcas": ["rocep1s0f1", "roceP2p1s0f1"],
    }


def _valid_hosts():
    return {"spark1": _host(0, "192.168.100.10"), "spark2": _host(1, "192.168.100.11")}


PIN = {"deepseek-v4-flash": "0123456789abcdef0123456789abcdef01234567"}
RECIPE = os.path.join(REPO, "roles", "config", "files", "recipes", "balanced.yml")


def _run_site(tmp_path, hosts, serve_args=None, pins=None, args=()):
    """Write an inventory (hosts, the site's revision pins, the recipe: ds4_profile balanced) and run site.yml against it.

    serve_args: entries written over the balanced recipe, given in full as the user's own ds4_profile_config."""
    inv = tmp_path / "inventory"
    (inv / "group_vars" / "spark").mkdir(parents=True)
    profile = str(inv / "group_vars" / "spark" / "profile.yml")
    with open(profile, "w") as f:
        yaml.safe_dump({"ds4_profile": "balanced"}, f)
    if serve_args:
        with open(RECIPE) as f:
            layer = yaml.safe_load(f)
        layer["serve_args"].update(serve_args)
        with open(profile, "a") as f:
            yaml.safe_dump({"ds4_profile_config": layer}, f, default_flow_style=False, sort_keys=False)
    site = {"ds4_model_revisions": PIN if pins is None else pins}
    (inv / "hosts.yml").write_text(yaml.safe_dump({"spark": {"hosts": hosts, "vars": site}}))
    env = dict(os.environ)
    env.update(ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_RETRY_FILES_ENABLED="0")
    proc = subprocess.run(
        [os.path.join(BIN, "ansible-playbook"), "-i", str(inv), os.path.join(REPO, "playbooks", "site.yml")] + list(args),
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False,
    )
    return proc.returncode, proc.stdout


def _assert_refused_untouched(rc, out):
    assert rc != 0, out
    assert "configuration refused" in out, out
    assert "nothing was changed on any host" in out, out
    for err in CONNECTION_ERRORS:
        assert err not in out, "a host was contacted (%r in the output):\n%s" % (err, out)
    assert out.count("PLAY [") == 1, "a play after the validation play started:\n%s" % out


def test_missing_fabric_ip_names_host_and_variable(tmp_path):
    hosts = _valid_hosts()
    del hosts["spark2"]["ds4_fabric_ip"]
    rc, out = _run_site(tmp_path, hosts)
    _assert_refused_untouched(rc, out)
    assert "[host spark2] ds4_fabric_ip = null" in out, out
    assert "host_vars/spark2.yml" in out, out
    assert "[host spark1] ds4_fabric_ip" not in out, out


def test_bad_role_variables_are_refused_in_the_first_play_naming_each_and_showing_no_secret(tmp_path):
    """Issue 46: role variables (not only the config role's) are checked on the controller before any host is
    contacted; a newline, a system directory, a wildcard admin listener, a bad secret and a misspelt secret name. The
    run is -vvv and no secret string appears anywhere in its output."""
    hosts = _valid_hosts()
    secrets = ("pa ss-Wd", "tOpSeCrEt-vrrp1", "sk-newline-secret-0123456789")
    hosts["spark1"].update({
        "router_health_check_endpoint": "/health\nExecStartPre=/bin/sh -c id",
        "api_proxy_config_dir": "/etc/nginx",
        "router_listen_host": "0.0.0.0",
        "router_vrrp_auth_pass": secrets[0],
    })
    hosts["spark2"]["router_vrrp_auth_pas"] = secrets[1]
    rc, out = _run_site(tmp_path, hosts, args=["-vvv", "-e", '{"vllm_service_api_key": "%s\\nHF_TOKEN=x"}' % secrets[2]])
    _assert_refused_untouched(rc, out)
    for line in ('- [host spark1] router_health_check_endpoint = "/health\\nExecStartPre=/bin/sh -c id" holds a control character',
                 '- [host spark1] api_proxy_config_dir = "/etc/nginx" is a system directory',
                 '- [host spark1] router_listen_host = "0.0.0.0" is not a loopback address',
                 '- [host spark1] router_vrrp_auth_pass = (secret, not shown) holds whitespace',
                 '- vllm_service_api_key = (secret, not shown) holds a control character',
                 '- [host spark2] router_vrrp_auth_pas = (value not shown)'):
        assert line in out, (line, out)
    for secret in secrets:
        assert secret not in out, secret


def test_an_ipv6_client_network_without_an_ipv6_proxy_address_is_refused_before_the_firewall_opens_it(tmp_path):
    hosts = _valid_hosts()
    for h in hosts.values():
        h.update(ds4_api_allowed_networks=["2001:db8::/64"], ds4_api_keys=["k" * 32])
    rc, out = _run_site(tmp_path, hosts)
    _assert_refused_untouched(rc, out)
    assert ("- [host spark1] api_proxy_listen_addresses = ['0.0.0.0'] has no IPv6 address, but ds4_api_allowed_networks "
            "opens the API to the IPv6 networks 2001:db8::/64") in out, out


def test_three_hosts_in_spark_is_refused(tmp_path):
    hosts = _valid_hosts()
    hosts["spark3"] = _host(1, "192.168.100.12")
    rc, out = _run_site(tmp_path, hosts)
    _assert_refused_untouched(rc, out)
    assert "groups['spark'] = [\"spark1\", \"spark2\", \"spark3\"]" in out, out
    assert "put exactly two hosts in group spark" in out, out


@pytest.mark.parametrize("bad_ip", ["10.0.0", "127.0.0.1"])
def test_malformed_fabric_ip_is_refused(tmp_path, bad_ip):
    hosts = _valid_hosts()
    hosts["spark1"]["ds4_fabric_ip"] = bad_ip
    rc, out = _run_site(tmp_path, hosts)
    _assert_refused_untouched(rc, out)
    assert '[host spark1] ds4_fabric_ip = "%s"' % bad_ip in out, out


# (serve_args entry, what the refusal must say besides the variable path and value: why and fix).
BAD_SERVE_ARGS = [
    (("max-num-seqs", "lots"), ["invalid int value", "Fix: write an integer"]),
    (("block-size", -1), ["must be a positive integer", "Fix: use an integer >= 1"]),
    (("enable-prefix-caching", "maybe"), ["is a switch in vLLM", "Fix: write enable-prefix-caching: true"]),
    (("max-num-seq", 8), ["has no flag --max-num-seq;", "Fix: did you mean max-num-seqs?"]),
]


@pytest.mark.parametrize("entry,says", BAD_SERVE_ARGS, ids=["%s=%s" % case[0] for case in BAD_SERVE_ARGS])
def test_bad_serve_args_value_is_refused_before_any_host(tmp_path, entry, says):
    """Through real ansible-playbook: a serve_args value vLLM would refuse is refused by the
    config role, naming the inventory path, the value and the fix, and no host is contacted."""
    flag, value = entry
    rc, out = _run_site(tmp_path, _valid_hosts(), serve_args={flag: value})
    _assert_refused_untouched(rc, out)
    assert "ds4_profile_config.serve_args[%s] = %s:" % (flag, json.dumps(value)) in out, out
    for text in says:
        assert text in out, out


def test_control_valid_inventory_passes_validation_then_touches_hosts(tmp_path):
    """Control: the same fixture with a valid inventory gets past validation and then fails
    on the first host contact, so the negative tests above would see a touched host."""
    rc, out = _run_site(tmp_path, _valid_hosts())
    assert rc != 0, out
    assert "configuration refused" not in out, out
    assert out.count("PLAY [") >= 2, "no play after the validation play ran:\n%s" % out
    assert any(err in out for err in CONNECTION_ERRORS), out


def test_unpinned_revision_is_refused_before_any_host_naming_the_variable_and_the_way_to_the_hash(tmp_path):
    """site.yml downloads the model (model_cache_source hub): a recipe whose model the site has not pinned is refused by
    the config play, naming ds4_model_revisions[<model>] and how to read the commit, and no host is contacted."""
    rc, out = _run_site(tmp_path, _valid_hosts(), pins={})
    _assert_refused_untouched(rc, out)
    flat = " ".join(out.split())
    assert "ds4_model_revisions[deepseek-v4-flash] is not set" in flat, out
    assert "set ds4_model_revisions: {deepseek-v4-flash: <40-hex commit>}" in flat, out
    assert "git ls-remote https://huggingface.co/deepseek-ai/DeepSeek-V4-Flash refs/heads/main" in flat, out


def _vaulted_keys(tmp_path, keys):
    """An extra-vars file holding ds4_api_keys with each key vaulted (ansible-vault encrypt_string, as the refusal
    tells the user to keep them), and the vault password file: the arguments that pass both to site.yml."""
    password = tmp_path / "vault-password"
    password.write_text("test-vault-password\n")
    lines = ["ds4_api_keys:"]
    for key in keys:
        proc = subprocess.run([os.path.join(BIN, "ansible-vault"), "encrypt_string", "--vault-password-file", str(password),
                               key], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=True)
        lines.append("  - " + proc.stdout.strip().replace("\n", "\n    "))
    path = tmp_path / "keys.yml"
    path.write_text("\n".join(lines) + "\n")
    return ["-e", "@%s" % path, "--vault-password-file", str(password)]


def test_an_exposed_api_without_valid_distinct_keys_is_refused_in_the_config_play_showing_no_key(tmp_path):
    """ds4_api_allowed_networks opens the API: ds4_api_keys must be a list of distinct valid keys. The config play's one
    action refuses the vaulted list below (a repeated key, a short one) before any host is contacted, naming each by
    position and length, never showing a key, in a -vvv run; an unset list is refused too."""
    good, short = "K" * 40, "tiny1"
    hosts = _valid_hosts()
    for h in hosts.values():
        h["ds4_api_allowed_networks"] = ["10.20.0.0/16"]
    rc, out = _run_site(tmp_path, hosts, args=["-vvv"] + _vaulted_keys(tmp_path, [good, good, short]))
    _assert_refused_untouched(rc, out)
    flat = " ".join(out.split())
    assert "ds4_api_allowed_networks opens the API to 10.20.0.0/16, so ds4_api_keys must be a list of distinct valid keys" in flat, out
    assert "ds4_api_keys[1] repeats an earlier key" in flat and "ds4_api_keys[2] (length 5) is not a valid key" in flat, out
    for secret in (good, short):
        assert secret not in out, secret
    rc, out = _run_site(tmp_path / "unset", hosts)
    _assert_refused_untouched(rc, out)
    assert "ds4_api_keys is not set: an exposed API needs at least one key" in " ".join(out.split()), out


def test_control_an_exposed_api_with_a_vaulted_valid_key_passes_the_config_play(tmp_path):
    """Control: the same exposure with one valid vaulted key gets past the config play to the first host contact."""
    hosts = _valid_hosts()
    for h in hosts.values():
        h["ds4_api_allowed_networks"] = ["10.20.0.0/16"]
    rc, out = _run_site(tmp_path, hosts, args=_vaulted_keys(tmp_path, ["K" * 40]))
    assert rc != 0 and "configuration refused" not in out, out
    assert any(err in out for err in CONNECTION_ERRORS), out
