# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shipped sample site inventory (placeholder addresses, RFC 5737 TEST-NET) is refused before any ssh, whatever
the recipe.

Real ansible-playbook, run as the README says (from the repository root, `ansible-playbook site.yml -l spark`, or
`-i inventories/sample-site -e ds4_profile=<recipe>`), with ANSIBLE_SSH_EXECUTABLE pointing at a stand-in ssh that
records every call in a file and fails like an unreachable host. The refusal must name the file to fill in
(inventories/sample-site/hosts.yml, with its line) and the stand-in must never have been called; the control case (same inventory, real-looking addresses)
gets past the config check and calls the stand-in, so the fixture would have seen an attempt.
"""

import os
import shutil
import subprocess
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.dirname(sys.executable)
SAMPLE_SITE = os.path.join("inventories", "sample-site")
# the shipped recipes (roles/config/files/recipes/<name>.yml), each picked with -e ds4_profile=<name>
PROFILES = sorted(f[:-len(".yml")] for f in os.listdir(os.path.join(REPO, "roles", "config", "files", "recipes")) if f.endswith(".yml"))


@pytest.fixture
def fake_ssh(tmp_path):
    """(path of the stand-in ssh, path of its call log)."""
    log = tmp_path / "ssh-calls.log"
    script = tmp_path / "ssh"
    script.write_text("#!/bin/sh\necho \"$@\" >> '%s'\necho 'ssh: connect to host: stand-in ssh, no route' >&2\nexit 255\n" % log)
    script.chmod(0o755)
    return str(script), log


def _run(playbook, ssh, *args):
    env = dict(os.environ)
    for k in ("ANSIBLE_CONFIG", "ANSIBLE_INVENTORY", "ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS"):
        env.pop(k, None)
    env.update(ANSIBLE_SSH_EXECUTABLE=ssh, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_RETRY_FILES_ENABLED="0",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), playbook] + list(args), cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
    return proc.returncode, proc.stdout


def _shipped_line(host):
    """Line of `host`'s ansible_host in inventories/sample-site/hosts.yml (the message names it)."""
    with open(os.path.join(REPO, SAMPLE_SITE, "hosts.yml")) as handle:
        lines = handle.read().splitlines()
    start = lines.index("    %s:" % host)
    return next(i + 1 for i in range(start, len(lines)) if lines[i].strip().startswith("ansible_host:"))


def _assert_refused(rc, out, log):
    assert rc != 0, out
    assert "still holds the shipped placeholder addresses" in out, out
    assert not log.exists(), "ssh was attempted:\n%s\n%s" % (log.read_text(), out)
    assert "UNREACHABLE" not in out, out
    assert out.count("PLAY [") == 1, "a play after the config play started:\n%s" % out


def test_readme_deploy_command_refuses_the_shipped_inventory(fake_ssh):
    ssh, log = fake_ssh
    rc, out = _run("site.yml", ssh, "-l", "spark")
    _assert_refused(rc, out, log)
    for host, addr in (("spark1", "192.0.2.10"), ("spark2", "192.0.2.11")):
        assert ('[host %s] ansible_host = "%s": a shipped placeholder (TEST-NET-1 192.0.2.0/24' % (host, addr)) in out, out
        assert "Fix: fill in inventories/sample-site/hosts.yml:%d with the real address of %s." % (_shipped_line(host), host) in out, out


# site.yml with every profile (-e ds4_profile=<profile> over the sample site); the read-only playbooks (which go on
# with defaults when an inventory merely fails to validate) with one, their config play being the same.
CASES = ([(p, "playbooks/site.yml") for p in PROFILES]
         + [("balanced", "playbooks/status.yml"), ("balanced", "playbooks/bench.yml")])


@pytest.mark.parametrize("profile,playbook", CASES, ids=["%s-%s" % (p, os.path.basename(b)) for p, b in CASES])
def test_every_shipped_profile_is_refused(fake_ssh, profile, playbook):
    ssh, log = fake_ssh
    rc, out = _run(os.path.join(REPO, playbook), ssh, "-i", SAMPLE_SITE, "-e", "ds4_profile=%s" % profile)
    _assert_refused(rc, out, log)
    assert "Fix: fill in inventories/sample-site/hosts.yml:" in out, out


def _copy_inventory(tmp_path, ansible_hosts):
    """A copy of the sample site (recipe balanced), hosts.yml's addresses replaced and the site's model revision
    pinned (site.yml refuses an unpinned one before any connection)."""
    inv = tmp_path / "inv"
    shutil.copytree(os.path.join(REPO, SAMPLE_SITE), str(inv), symlinks=False)
    (inv / "hosts.yml").write_text(yaml.safe_dump({"spark": {"hosts": dict((h, {"ansible_host": a}) for h, a in ansible_hosts.items())}}))
    site_file = inv / "group_vars" / "spark" / "site.yml"
    site = yaml.safe_load(site_file.read_text())
    site["ds4_model_revisions"] = {"deepseek-v4-flash": "0123456789abcdef0123456789abcdef01234567"}
    site_file.write_text(yaml.safe_dump(site))
    return inv


def test_testnet_fabric_and_router_addresses_are_refused(fake_ssh, tmp_path):
    ssh, log = fake_ssh
    inv = _copy_inventory(tmp_path, {"spark1": "10.255.0.10", "spark2": "10.255.0.11"})
    with open(str(inv / "host_vars" / "spark2.yml"), "a") as handle:
        handle.write("ds4_fabric_ip: 198.51.100.11\n")
    (inv / "group_vars" / "spark" / "router.yml").write_text("ds4_router_address: 203.0.113.5\n")
    rc, out = _run(os.path.join(REPO, "playbooks", "site.yml"), ssh, "-i", str(inv))
    _assert_refused(rc, out, log)
    assert '[host spark2] ds4_fabric_ip = "198.51.100.11": a shipped placeholder (TEST-NET-2 198.51.100.0/24' in out, out
    assert "Fix: fill in %s:" % (inv / "host_vars" / "spark2.yml") in out, out
    assert '[host spark1] ds4_router_address = "203.0.113.5": a shipped placeholder (TEST-NET-3 203.0.113.0/24' in out, out
    assert "ansible_host" not in out.split("placeholder addresses", 1)[1], out
    assert "[host spark1] ds4_fabric_ip" not in out, out


def test_control_real_addresses_pass_the_check_and_reach_ssh(fake_ssh, tmp_path):
    """Control: the same inventory with non-placeholder addresses is accepted and ssh is then attempted (the stand-in
    records it), so the tests above would have seen an attempt."""
    ssh, log = fake_ssh
    inv = _copy_inventory(tmp_path, {"spark1": "10.255.0.10", "spark2": "10.255.0.11"})
    rc, out = _run(os.path.join(REPO, "playbooks", "site.yml"), ssh, "-i", str(inv))
    assert rc != 0, out
    assert "placeholder" not in out, out
    assert log.exists(), "the stand-in ssh was never called:\n%s" % out
    assert "10.255.0.10" in log.read_text(), log.read_text()
