# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks for dgxspark.ds4.host_hardening on both test nodes after converge.

prepare_host_hardening.yml put `/swapfile none swap sw 0 0` into /etc/fstab and installed an
inert zramswap.service, so the swap handling had something real to change. The nodes share the
test machine's kernel: the inventory sets host_hardening_apply_kernel false, so only files are
checked here, never /proc/sys values. Idempotence is Molecule's own idempotence step.
"""

import os
import re

import testinfra.utils.ansible_runner

RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"])
testinfra_hosts = RUNNER.get_hosts("spark")

SYSCTL_FILE = "/etc/sysctl.d/60-dgxspark-ds4.conf"
FSTAB_BACKUP = "/etc/fstab.dgxspark-ds4.orig"
PREPARED_SWAP_LINE = "/swapfile none swap sw 0 0"
DEFAULTS = {
    "host_hardening_vm_overcommit_memory": 0,
    "host_hardening_vm_min_free_kbytes": 1572864,
    "host_hardening_vm_swappiness": 0,
}
# Third whitespace-separated field "swap" on a line that is not a comment.
ACTIVE_SWAP = re.compile(r"^\s*[^#\s]\S*\s+\S+\s+swap(\s|$)")


def _var(host, name):
    return RUNNER.get_variables(host.backend.get_hostname()).get(name, DEFAULTS.get(name))


def test_inventory_keeps_the_shared_kernel_untouched(host):
    # Safety of the test machine itself: the role must only write files here.
    assert str(_var(host, "host_hardening_apply_kernel")).lower() in ("false", "no", "0")


def test_fstab_has_no_active_swap_line(host):
    fstab = host.file("/etc/fstab").content_string
    active = [line for line in fstab.splitlines() if ACTIVE_SWAP.match(line)]
    assert active == []
    disabled = [line for line in fstab.splitlines()
                if line.startswith("# disabled by dgxspark.ds4 host_hardening") and PREPARED_SWAP_LINE in line]
    assert len(disabled) == 1, fstab


def test_fstab_backup_is_the_original(host):
    backup = host.file(FSTAB_BACKUP)
    assert backup.is_file
    assert backup.user == "root"
    assert PREPARED_SWAP_LINE in backup.content_string.splitlines()


def test_zram_swap_service_is_masked(host):
    assert host.file("/usr/lib/systemd/system/zramswap.service").exists
    cmd = host.run("systemctl is-enabled zramswap.service")
    assert cmd.stdout.strip() == "masked"


def test_sysctl_file_content(host):
    f = host.file(SYSCTL_FILE)
    assert f.is_file
    assert f.user == "root"
    assert f.mode == 0o644
    settings = {}
    for line in f.content_string.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _sep, value = line.partition("=")
            settings[key.strip()] = value.strip()
    assert settings == {
        "vm.overcommit_memory": str(int(_var(host, "host_hardening_vm_overcommit_memory"))),
        "vm.min_free_kbytes": str(int(_var(host, "host_hardening_vm_min_free_kbytes"))),
        "vm.swappiness": str(int(_var(host, "host_hardening_vm_swappiness"))),
    }


def test_logind_remove_ipc_off(host):
    f = host.file("/etc/systemd/logind.conf.d/60-dgxspark-ds4.conf")
    assert f.is_file
    lines = [line.strip() for line in f.content_string.splitlines()]
    assert "[Login]" in lines
    assert "RemoveIPC=no" in lines
    # The drop-in is the last word on RemoveIPC in logind's merged configuration.
    merged = host.run("systemd-analyze cat-config systemd/logind.conf")
    assert merged.rc == 0
    remove_ipc = [line.strip() for line in merged.stdout.splitlines() if line.strip().startswith("RemoveIPC=")]
    assert remove_ipc[-1:] == ["RemoveIPC=no"]
    assert host.service("systemd-logind").is_running


def test_limits_memlock_unlimited(host):
    f = host.file("/etc/security/limits.d/60-dgxspark-ds4.conf")
    assert f.is_file
    rows = {tuple(line.split()) for line in f.content_string.splitlines()
            if line.strip() and not line.startswith("#")}
    for domain in ("*", "root"):
        for kind in ("soft", "hard"):
            assert (domain, kind, "memlock", "unlimited") in rows


def test_container_runtime_limit_memlock(host):
    for unit in ("docker.service", "containerd.service"):
        dropin = host.file("/etc/systemd/system/%s.d/60-dgxspark-ds4.conf" % unit)
        assert dropin.is_file, unit
        assert "LimitMEMLOCK=infinity" in dropin.content_string.splitlines()
        shown = host.run("systemctl show -p LimitMEMLOCK %s" % unit).stdout.strip()
        # systemd shows the configured value even where the container may not raise it.
        assert shown in ("LimitMEMLOCK=infinity", "LimitMEMLOCK=18446744073709551615"), (unit, shown)
    assert host.service("docker").is_running


def test_first_week_holds_cover_what_is_installed(host):
    """host_hardening_hold_default_packages is on by default: the node image's Docker (docker.io) and containerd are
    held; the NVIDIA packages the Debian test node does not have are skipped, never given to dpkg."""
    for name in ("docker.io", "containerd"):
        want = host.run("dpkg-query -W -f '${db:Status-Want}' %s" % name)
        assert want.rc == 0 and want.stdout.strip() == "hold", (name, want.stdout, want.stderr)
    absent = host.run("dpkg-query -W -f '${db:Status-Want}' nvidia-container-toolkit")
    assert absent.rc != 0, absent.stdout
