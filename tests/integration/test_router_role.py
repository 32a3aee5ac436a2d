# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/router with the real ansible-playbook on localhost, its paths in a temporary directory and
router_manage_service=false (no systemd here): check mode with --diff writes nothing and shows the unit;
a bad input is refused by the preflight before anything is written; a real run installs the pinned
vllm-router into the venv and writes the unit whose ExecStart is router_config's command line; the unit
passes systemd-analyze verify (where it exists); the second run changes nothing. The pip install needs the
package index: without it the install test skips, except under CI=true."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

_LINK_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".collections")
if os.path.isdir(_LINK_ROOT) and _LINK_ROOT not in sys.path:
    sys.path.insert(0, _LINK_ROOT)

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import router_config  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.dirname(sys.executable)
PAIRS = [{"name": "spark_pair1", "head": "spark1", "api_host": "192.0.2.10", "api_port": 8000,
          "served_model": "deepseek-v4-flash", "profile": "balanced"},
         {"name": "spark_pair2", "head": "spark3", "api_host": "192.0.2.12", "api_port": 8000,
          "served_model": "deepseek-v4-flash", "profile": "balanced"}]
PLAY = """
- name: Router
  hosts: localhost
  gather_facts: false
  roles:
    - role: dgxspark.ds4.router
"""


def _play(tmp_path, *extra, **kwargs):
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    evars = {"router_pairs": kwargs.get("pairs", PAIRS), "router_venv": str(tmp_path / "opt" / "router-venv"),
             "router_python": sys.executable, "router_unit_dir": str(tmp_path / "units"),
             "router_manage_service": False, "ansible_python_interpreter": sys.executable,
             "router_libexec_dir": str(tmp_path / "opt" / "libexec"),
             "router_pool_config_path": str(tmp_path / "opt" / "etc" / "router-pool.json")}
    evars.update(kwargs.get("evars", {}))
    (tmp_path / "units").mkdir(exist_ok=True)
    env = dict(os.environ)
    env.update(ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_RETRY_FILES_ENABLED="0", ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    argv = [os.path.join(BIN, "ansible-playbook"), str(play), "-c", "local", "-e", json.dumps(evars)] + list(extra)
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False)


def _recap(out):
    line = [ln for ln in out.splitlines() if ln.startswith("localhost") and "ok=" in ln][-1]
    return dict(kv.split("=") for kv in line.split(":", 1)[1].split())


def test_check_mode_diff_writes_nothing_and_shows_the_unit(tmp_path):
    proc = _play(tmp_path, "--check", "--diff")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert not (tmp_path / "opt").exists() and os.listdir(str(tmp_path / "units")) == []
    plan = router_config.plan(PAIRS, {}, str(tmp_path / "opt" / "router-venv" / "bin" / "vllm-router"))
    assert "+ExecStart=%s" % plan["exec_start"] in proc.stdout, proc.stdout[-3000:]
    assert int(_recap(proc.stdout)["changed"]) >= 2


@pytest.mark.parametrize("kwargs, expected", [
    ({"pairs": []}, "router_pairs: no pair to route to"),
    ({"pairs": [PAIRS[0], dict(PAIRS[1], profile="latency")]}, "replicas of deepseek-v4-flash run different profiles"),
    ({"evars": {"router_health_check_interval_s": 5}}, "could stay in rotation up to 12 s"),
    ({"evars": {"router_policy": "kv_aware"}}, "router_policy"),
])
def test_bad_input_refused_before_any_change(tmp_path, kwargs, expected):
    proc = _play(tmp_path, **kwargs)
    assert proc.returncode != 0
    assert expected in proc.stdout, proc.stdout[-3000:]
    assert not (tmp_path / "opt").exists() and os.listdir(str(tmp_path / "units")) == []


def _local_vrrp():
    """router_vrrp_* for this machine as the first of two router hosts: its first non-loopback IPv4 address (the
    interface the role must find), a peer and a VIP in that network; None when it has none."""
    import ipaddress
    ran = subprocess.run(["ip", "-j", "-4", "addr", "show"], capture_output=True, text=True, check=False)
    for link in json.loads(ran.stdout or "[]"):
        for info in link.get("addr_info") or []:
            iface = ipaddress.ip_interface("%s/%s" % (info["local"], info["prefixlen"]))
            if iface.ip.is_loopback or iface.network.num_addresses < 8:
                continue
            free = [str(a) for a in iface.network.hosts() if a != iface.ip][-2:]
            return link["ifname"], {"router_vrrp_vip": "%s/%d" % (free[1], iface.network.prefixlen),
                                    "router_vrrp_hosts": [{"host": "localhost", "address": str(iface.ip)},
                                                          {"host": "peer", "address": free[0]}],
                                    "router_vrrp_auth_pass": "s3cret"}
    return None


def test_check_mode_with_a_vip_finds_the_interface_and_shows_the_keepalived_unit(tmp_path):
    local = _local_vrrp()
    if local is None:
        pytest.skip("no non-loopback IPv4 network here")
    ifname, evars = local
    evars["router_vrrp_config_path"] = str(tmp_path / "opt" / "etc" / "keepalived.conf")
    proc = _play(tmp_path, "--check", "--diff", "-v", evars=evars)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    peer = evars["router_vrrp_hosts"][1]["address"]
    assert "%s on %s (VRRP priority 150, peers %s)" % (evars["router_vrrp_vip"], ifname, peer) in proc.stdout
    assert "+ExecStart=/usr/sbin/keepalived --dont-fork --vrrp --use-file=%s" % evars["router_vrrp_config_path"] \
        in proc.stdout, proc.stdout[-3000:]
    # the configuration holds the VRRP secret: no diff of it, and nothing else shows it (-v); the variable's name may
    # appear (the converge line names the inputs that differ from the record), keepalived's auth_pass line may not
    assert "s3cret" not in proc.stdout and not re.search(r"(?<!router_vrrp_)auth_pass", proc.stdout)
    assert not (tmp_path / "opt").exists() and os.listdir(str(tmp_path / "units")) == []


def test_a_vip_without_its_secret_is_refused_before_any_change(tmp_path):
    local = _local_vrrp()
    if local is None:
        pytest.skip("no non-loopback IPv4 network here")
    evars = dict(local[1], router_vrrp_auth_pass="")
    proc = _play(tmp_path, evars=evars)
    assert proc.returncode != 0
    assert "router_vrrp (keepalived on localhost): auth_pass: 1-8 characters" in proc.stdout, proc.stdout[-3000:]
    assert not (tmp_path / "opt").exists() and os.listdir(str(tmp_path / "units")) == []


def test_install_writes_the_unit_and_second_run_changes_nothing(tmp_path):
    proc = _play(tmp_path)
    if proc.returncode != 0 and "vllm-router" in proc.stdout and "pip" in proc.stdout.lower():
        message = "pip could not install vllm-router==%s: %s" % (router_config.ROUTER_VERSION, proc.stdout[-800:])
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    binary = tmp_path / "opt" / "router-venv" / "bin" / "vllm-router"
    assert os.access(str(binary), os.X_OK)
    version = subprocess.run([str(tmp_path / "opt" / "router-venv" / "bin" / "python"), "-c",
                              "import importlib.metadata as m; print(m.version('vllm-router'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == router_config.ROUTER_VERSION
    unit = (tmp_path / "units" / "dgxspark-ds4-router.service").read_text()
    exec_line = [ln for ln in unit.splitlines() if ln.startswith("ExecStart=")][0]
    argv = shlex.split(exec_line[len("ExecStart="):])
    assert argv == router_config.router_argv({}, str(binary))
    # no worker on the command line (the router would wait for every one): the pool keeper's file has them
    assert "--worker-urls" not in exec_line and "192.0.2" not in exec_line
    pool = json.loads((tmp_path / "opt" / "etc" / "router-pool.json").read_text())
    assert pool["workers"] == ["http://192.0.2.10:8000", "http://192.0.2.12:8000"]
    assert pool["router_url"] == "http://127.0.0.1:30000" and pool["hold_dir"] == "/run/dgxspark-ds4/router-hold"
    pool_unit = (tmp_path / "units" / "dgxspark-ds4-router-pool.service").read_text()
    keeper = str(tmp_path / "opt" / "libexec" / "routerpool.py")
    assert "ExecStart=%s %s %s" % (sys.executable, keeper, pool["router_url"] and
                                   str(tmp_path / "opt" / "etc" / "router-pool.json")) in pool_unit
    # the installed keeper imports the installed router_admin (no collection on a router host) and says why it waits
    with open(str(tmp_path / "pool.json"), "w") as handle:
        json.dump(dict(pool, router_url="http://127.0.0.1:9", poll_s=0.2), handle)
    try:
        ran = subprocess.run([sys.executable, "-S", keeper, str(tmp_path / "pool.json")], capture_output=True, text=True,
                             timeout=3, check=False, env={"PATH": os.environ["PATH"], "PYTHONUNBUFFERED": "1"})
        out = ran.stdout + ran.stderr
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode() + (exc.stderr or b"").decode()
    assert "pool keeper: 2 pair(s)" in out and "the router does not answer yet" in out, out
    assert "Restart=always" in unit and "DynamicUser=yes" in unit and "StartLimitIntervalSec=0" in unit
    # the rendered command line parses with the installed router's own argument parser
    parsed = subprocess.run([str(tmp_path / "opt" / "router-venv" / "bin" / "python"), "-c",
                             "import sys, json; from vllm_router.launch_router import parse_router_args as p; "
                             "a = p(sys.argv[1:]); print(json.dumps([a.worker_urls, a.policy, a.health_check_interval_secs, "
                             "a.cb_timeout_duration_secs]))"] + argv[1:],
                            capture_output=True, text=True, check=False)
    assert parsed.returncode == 0, parsed.stderr
    assert json.loads(parsed.stdout) == [[], "cache_aware", 1, 5]
    # systemd's own check of the unit file (unknown keys, bad ExecStart path) where systemd-analyze exists
    analyze = shutil.which("systemd-analyze")
    if analyze:
        verify = subprocess.run([analyze, "verify", str(tmp_path / "units" / "dgxspark-ds4-router.service")],
                                capture_output=True, text=True, check=False)
        assert verify.returncode == 0 and "dgxspark-ds4-router.service" not in verify.stderr, verify.stderr
    again = _play(tmp_path)
    assert again.returncode == 0 and _recap(again.stdout)["changed"] == "0", again.stdout[-3000:]
