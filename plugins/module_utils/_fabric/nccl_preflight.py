# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Glue of the nccl_fabric role: per-node NCCL env from discovery + inventory, jumbo ping
findings, the all-reduce preflight's docker argv and its verdict.

Pure Python (no Ansible imports).  Discovery itself is fabric_discovery; log parsing is nccl_log.

API:
  ipv4_from_interface_facts(facts) -> {ifname: [ipv4, ...]}
  gid_index_by_hca(discovered) -> {hca: index|None}   (RoCE v2 IPv4 GID of each fabric twin)
  twin_findings(discovered) -> [{'check', 'finding', 'fix'}]   (only when NCCL_IB_GID_INDEX is pinned)
  hca_findings(discovered, hcas, expected_mtu) -> [{'check', 'finding', 'fix'}]   (every HCA of NCCL_IB_HCA)
  mtu_policy(expected_mtu, discovered, hcas=None, min_busbw_gbps=None) -> dict   (strict or 1500-with-a-warning)
  build_env(effective, discovered, fabric_env, gid_mode='auto') -> dict (see build_env)
  render_env_file(built, header) -> str
  env_header(eff, built) -> [str]; compile_env_file(eff, fabric_env, gid_mode, exact_match) -> str
  ping_args(peer_ip, mtu, count=3) / ping_finding(rc, stdout, stderr, peer_ip, mtu) -> dict|None
  docker_argv(...) -> [str]
  judge(text, rank, threshold_gbps, expected_hcas) -> dict
  fabric_facts(params, dev_infiniband_present) -> (result, warnings)   (the fabric_facts module body)
"""

from __future__ import annotations


from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._fabric import fabric_discovery, nccl_log

PER_NODE_KEYS = ("VLLM_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX")
GID_MODES = ("auto", "discover", "inventory", "unset")
IP_HEADER = 28  # IPv4 (20) + ICMP (8) header bytes
JUMBO_MTU = 9000     # seed 000's fabric (mtu 9000 on both nodes)
STANDARD_MTU = 1500  # NVIDIA's connect-two-Sparks netplan sets no MTU: the netdevs stay at 1500


def ipv4_from_interface_facts(facts: dict[str, Any] | None) -> dict[str, list[str]]:
    """facts: {ifname: ansible_facts[<ifname with - as _>]} -> {ifname: [primary, secondaries...]}."""
    out: dict[str, list[str]] = {}
    for ifname, fact in (facts or {}).items():
        if not isinstance(fact, dict):
            continue
        ips: list[str] = []
        primary = fact.get("ipv4")
        if isinstance(primary, dict) and primary.get("address"):
            ips.append(primary["address"])
        for sec in fact.get("ipv4_secondaries") or []:
            if isinstance(sec, dict) and sec.get("address") and sec["address"] not in ips:
                ips.append(sec["address"])
        if ips:
            out[fact.get("device") or ifname] = ips
    return out


def gid_index_by_hca(discovered: dict[str, Any]) -> dict[str, int | None]:
    """RoCE v2 IPv4 GID index of each twin HCA of the fabric port (its own netdev's IPv4)."""
    nd = discovered.get("netdevs") or {}
    out: dict[str, int | None] = {}
    for ifname in discovered.get("fabric_twin_ifnames") or []:
        dev = nd.get(ifname) or {}
        if dev.get("hca"):
            out[dev["hca"]] = dev.get("roce_v2_ipv4_gid_index")
    return out


def twin_findings(discovered: dict[str, Any]) -> list[dict[str, str]]:
    """A pinned NCCL_IB_GID_INDEX is one value for all HCAs of a node: the twins must agree."""
    by_hca = gid_index_by_hca(discovered)
    values = set(v for v in by_hca.values() if v is not None)
    if len(values) > 1:
        return [{"check": "gid_index_differs_between_twins",
                 "finding": "RoCE v2 IPv4 GID index differs between the twins: %s" % ", ".join(
                     "%s=%s" % (k, by_hca[k]) for k in sorted(by_hca)),
                 "fix": "leave NCCL_IB_GID_INDEX unset (nccl_fabric_gid_index: auto and no ds4_nccl_ib_gid_index: NCCL picks the "
                        "RoCE v2 GID per HCA) or give both twins the same address layout"}]
    return []


def hca_findings(discovered: dict[str, Any], hcas: list[str] | None, expected_mtu: Any = 9000) -> list[dict[str, str]]:
    """Every HCA NCCL_IB_HCA lists (both RoCE twins) must exist on this node, have a RoCE v2 IPv4 GID
    (NCCL picks that GID itself when NCCL_IB_GID_INDEX is unset; a twin without an IPv4 address has
    none) and a netdev whose MTU is at least expected_mtu. Each finding names the twin.

    The fabric netdev's own MTU and GID are checked by fabric_discovery.checks (mtu_low,
    no_roce_v2_gid); they are not repeated here."""
    nd = discovered.get("netdevs") or {}
    by_hca = dict((d["hca"], name) for name, d in nd.items() if d.get("hca"))
    fabric_ifname = discovered.get("fabric_ifname")
    out: list[dict[str, str]] = []
    for pos, hca in enumerate(hcas or []):
        label = "twin %d of %d" % (pos + 1, len(hcas or []))
        ifname = by_hca.get(hca)
        if ifname is None:
            out.append({"check": "hca_missing",
                        "finding": "NCCL_IB_HCA lists %s (%s) but this node has no such RDMA device (ConnectX-7 HCAs here: %s)" % (
                            hca, label, ", ".join("%s (%s)" % (h, by_hca[h]) for h in sorted(by_hca)) or "none"),
                        "fix": "set ds4_rdma_hcas in this node's host_vars to the HCAs ibdev2netdev shows for the cabled port"})
            continue
        if ifname == fabric_ifname:
            continue
        dev = nd[ifname]
        if dev.get("roce_v2_ipv4_gid_index") is None:
            addrs = ", ".join(dev.get("ipv4") or []) or "no IPv4 address"
            out.append({"check": "hca_no_roce_v2_gid",
                        "finding": "RoCE twin %s (%s, netdev %s: %s) in NCCL_IB_HCA has no RoCE v2 IPv4 GID: NCCL cannot use it "
                                   "(one twin = half the bandwidth, vllm-ops 3.4)" % (hca, label, ifname, addrs),
                        "fix": "give %s its own static IPv4 in the fabric subnet plan (netplan, both nodes) so the RoCE v2 "
                               "IPv4 GID appears (show_gids), or remove %s from ds4_rdma_hcas" % (ifname, hca)})
        mtu = dev.get("mtu")
        if expected_mtu and (mtu is None or mtu < int(expected_mtu)):
            out.append({"check": "hca_mtu_low",
                        "finding": "RoCE twin %s (%s, netdev %s) MTU is %s, expected at least %d" % (
                            hca, label, ifname, mtu, int(expected_mtu)),
                        "fix": "set mtu: %d on %s in netplan on both nodes and netplan apply" % (int(expected_mtu), ifname)})
    return out


def mtu_policy(expected_mtu: Any, discovered: dict[str, Any], hcas: list[str] | None = None,
               min_busbw_gbps: Any = None) -> dict[str, Any]:
    """How the fabric MTU is judged (nccl_fabric_expected_mtu).

    expected_mtu set: strict, as before: the fabric netdev and every HCA twin in NCCL_IB_HCA must have at least
    that MTU (else mtu_low / hca_mtu_low) and the ping is that size.
    expected_mtu None (the default): STANDARD_MTU is the floor; the ping is JUMBO_MTU when the fabric netdev has at
    least that, else STANDARD_MTU; netdevs between the two are accepted with one warning, and the all-reduce busbw
    gate (min_busbw_gbps, None when the preflight is off) decides whether the fabric is good enough.

    Returns {'strict', 'minimum', 'ping_mtu', 'below_jumbo': [[ifname, mtu]], 'warning': str|None}."""
    if expected_mtu is not None:
        mtu = int(expected_mtu)
        return {"strict": True, "minimum": mtu, "ping_mtu": mtu, "below_jumbo": [], "warning": None}
    nd = discovered.get("netdevs") or {}
    by_hca = dict((d["hca"], name) for name, d in nd.items() if d.get("hca"))
    fabric_ifname = discovered.get("fabric_ifname")
    names = [fabric_ifname] if fabric_ifname in nd else []
    names += [by_hca[h] for h in hcas or [] if h in by_hca and by_hca[h] not in names]
    below = [[n, nd[n].get("mtu")] for n in names
             if nd[n].get("mtu") is not None and STANDARD_MTU <= nd[n]["mtu"] < JUMBO_MTU]
    fabric_mtu = (nd.get(fabric_ifname) or {}).get("mtu")
    ping_mtu = JUMBO_MTU if fabric_mtu is not None and fabric_mtu >= JUMBO_MTU else STANDARD_MTU
    warning = None
    if below:
        gate = ("the two-node all-reduce busbw gate (nccl_fabric_min_busbw_gbps=%s GB/s) decides whether the fabric is "
                "good enough" % min_busbw_gbps if min_busbw_gbps is not None else
                "the two-node all-reduce busbw gate would decide whether the fabric is good enough, but "
                "nccl_fabric_preflight is off: nothing measures it on this run")
        warning = ("fabric MTU below %d: %s. Accepted because nccl_fabric_expected_mtu is unset (null). NVIDIA's "
                   "connect-two-Sparks netplan leaves MTU %d and RoCE runs at it, with an RDMA MTU of 1024 instead of "
                   "the 4096 that jumbo frames allow; the vllm-ops notes say MTU 9000 mainly matters for TCP (the socket "
                   "paths: Gloo, the model copy), and no measured NCCL busbw at %d versus %d on a Spark pair is known "
                   "to this collection, so %s. Jumbo frames: mtu: %d on both nodes' netplan (and every twin); to "
                   "refuse anything below it set nccl_fabric_expected_mtu: %d" % (
                       JUMBO_MTU, ", ".join("%s MTU %s" % (n, m) for n, m in below), STANDARD_MTU, STANDARD_MTU,
                       JUMBO_MTU, gate, JUMBO_MTU, JUMBO_MTU))
    return {"strict": False, "minimum": STANDARD_MTU, "ping_mtu": ping_mtu, "below_jumbo": below, "warning": warning}


def _fabric(effective: dict[str, Any] | None) -> dict[str, Any]:
    fab = (effective or {}).get("fabric") or {}
    return {
        "ip": fab.get("ip"), "ifname": fab.get("ifname"),
        "rdma_hcas": list(fab.get("rdma_hcas") or []) or None, "gid_index": fab.get("gid_index"),
    }


def build_env(effective: dict[str, Any] | None, discovered: dict[str, Any] | None, fabric_env: dict[str, Any] | None = None,
              gid_mode: Any = "auto", exact_match: bool = True) -> dict[str, Any]:
    """One node's NCCL/Gloo/vLLM network env.

    effective: ds4_effective (reads fabric{ip,ifname,rdma_hcas,gid_index}, env, per_node_env, host,
    role, profile); discovered: fabric_discovery.discover(); fabric_env: the role's fabric values
    (NCCL_NET=IB, ...); a profile NCCL_* value for the same key wins (the launch script exports it)
    and is listed in 'profile_overrides'.  gid_mode: auto (the inventory's ds4_nccl_ib_gid_index when
    set, else unset: NCCL picks the RoCE v2 GID itself, and a pinned index drifts after a reboot),
    discover (pin discovery's index, warning when the inventory differs), inventory (inventory only,
    else unset; the same as auto), unset (never written; an inventory value is an error).
    exact_match: prefix NCCL_SOCKET_IFNAME / NCCL_IB_HCA with '=' (NCCL exact match).

    Returns {'env': [[name, value]], 'sources': {name: 'inventory'|'discovery'|'profile'|'role'|'unset'},
    'profile_overrides': [{'name', 'role', 'profile'}], 'hcas': [the HCAs of NCCL_IB_HCA], 'errors': [str]}.
    """
    inv = _fabric(effective)
    disc = discovered or {}
    errors: list[str] = []
    sources: dict[str, str | None] = {}
    env: list[list[Any]] = []
    per_node_names = set(PER_NODE_KEYS) | set((effective or {}).get("per_node_env") or [])
    profile_env = [(k, str(v)) for k, v in ((effective or {}).get("env") or {}).items()
                   if k.startswith("NCCL_") and k not in per_node_names and v is not None]
    profile_keys = dict(profile_env)
    overrides: list[dict[str, str]] = []
    for name, value in profile_env:
        env.append([name, value])
        sources[name] = "profile"
    for name, value in (fabric_env or {}).items():
        if value is None or name in per_node_names:
            continue
        value = str(value)
        if name in profile_keys:
            if profile_keys[name] != value:
                overrides.append({"name": name, "role": value, "profile": profile_keys[name]})
            continue
        env.append([name, value])
        sources[name] = "role"

    def pick(key: str, inv_value: Any, disc_value: Any, var: str) -> Any:
        if inv_value not in (None, "", []):
            sources[key] = "inventory"
            return inv_value
        if disc_value not in (None, "", []):
            sources[key] = "discovery"
            return disc_value
        errors.append("%s: neither the inventory (%s) nor discovery found a value" % (key, var))
        return None

    ip = pick("VLLM_HOST_IP", inv["ip"], disc.get("fabric_ip"), "ds4_fabric_ip")
    ifname = pick("NCCL_SOCKET_IFNAME", inv["ifname"], disc.get("fabric_ifname"), "ds4_fabric_ifname")
    hcas = pick("NCCL_IB_HCA", inv["rdma_hcas"], disc.get("fabric_hcas"), "ds4_rdma_hcas")
    prefix = "=" if exact_match else ""
    env.append(["VLLM_HOST_IP", ip])
    env.append(["NCCL_SOCKET_IFNAME", prefix + ifname if ifname else None])
    for key in ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME"):
        env.append([key, ifname])
        sources[key] = sources.get("NCCL_SOCKET_IFNAME")
    env.append(["NCCL_IB_HCA", prefix + ",".join(hcas) if hcas else None])
    gid = None
    if gid_mode not in GID_MODES:
        errors.append("nccl_fabric_gid_index: %r is not one of %s" % (gid_mode, ", ".join(GID_MODES)))
    elif gid_mode == "unset":
        if inv["gid_index"] is not None:
            errors.append("NCCL_IB_GID_INDEX: nccl_fabric_gid_index is 'unset' but ds4_nccl_ib_gid_index=%s is set (the launch "
                          "script would export it); remove ds4_nccl_ib_gid_index from host_vars" % inv["gid_index"])
        sources["NCCL_IB_GID_INDEX"] = "unset"
    elif gid_mode in ("auto", "inventory"):
        gid = inv["gid_index"]
        sources["NCCL_IB_GID_INDEX"] = "inventory" if gid is not None else "unset"
    elif disc.get("fabric_gid_index") is not None:  # discover
        gid = disc.get("fabric_gid_index")
        sources["NCCL_IB_GID_INDEX"] = "discovery"
    else:
        gid = pick("NCCL_IB_GID_INDEX", inv["gid_index"], None, "ds4_nccl_ib_gid_index")
    if gid is not None:
        env.append(["NCCL_IB_GID_INDEX", str(gid)])
    env = [[k, str(v)] for k, v in env if v is not None]
    return {"env": env, "sources": sources, "profile_overrides": overrides, "hcas": list(hcas or []), "errors": errors}


def env_header(eff: dict[str, Any], built: dict[str, Any]) -> list[str]:
    """The header lines of nccl.env every render shares (no profile name: a recipe switch with the same network env
    changes nothing there). The words are those nodes already carry: a collection upgrade rewrites no nccl.env."""
    return ["nccl.env for %s (%s). Rendered by dgxspark.ds4.nccl_fabric; do not edit." % (eff.get("host", "?"), eff.get("role", "?")),
            "Per-node values: " + ", ".join("%s=%s" % (k, built["sources"].get(k, "-")) for k in PER_NODE_KEYS)]


def compile_env_file(eff: dict[str, Any], fabric_env: dict[str, Any] | None, gid_mode: Any = "auto", exact_match: bool = True) -> str:
    """nccl.env as the config compile knows it (ds4_effective.env_file: the goldens, render.yml, vllm_service without
    nccl_fabric): build_env() from the inventory alone, with the nccl_fabric role's values (nccl_fabric_env,
    nccl_fabric_gid_index, nccl_fabric_exact_match). On a node nccl_fabric renders the same through fabric_facts(),
    discovery filling what the inventory leaves out, plus one "Discovered:" comment line."""
    built = build_env(eff, {}, fabric_env or {}, gid_mode or "auto", exact_match)
    return render_env_file(built, env_header(eff, built))


def render_env_file(built: dict[str, Any], header_lines: list[str] | None = None) -> str:
    """docker --env-file text (KEY=value, no quotes): header comments, then built['env']."""
    lines = ["# %s" % h for h in (header_lines or [])]
    for name, value in built["env"]:
        lines.append("%s=%s" % (name, value))
    return "\n".join(lines) + "\n"


def ping_args(peer_ip: str, mtu: Any, count: int = 3, wait_s: int = 2) -> list[str]:
    """Full-size, don't-fragment ping: proves jumbo frames end to end."""
    return ["ping", "-M", "do", "-s", str(int(mtu) - IP_HEADER), "-c", str(count), "-W", str(wait_s), str(peer_ip)]


def ping_finding(rc: int, stdout: str | None, stderr: str | None, peer_ip: str, mtu: Any,
                 ifname: str | None = None) -> dict[str, str] | None:
    """None when the ping passed, else {'check': 'jumbo_ping', 'finding', 'fix'}."""
    if rc == 0:
        return None
    text = "\n".join(x for x in (stdout or "", stderr or "") if x).strip()
    size = int(mtu) - IP_HEADER
    if "message too long" in text or "Frag needed" in text or "frag needed" in text:
        why = "a %d-byte non-fragmented packet does not fit the path MTU" % int(mtu)
        fix = "set mtu: %d on the fabric netdev%s of BOTH nodes (netplan) and on any switch in between" % (
            int(mtu), " (%s)" % ifname if ifname else "")
    elif "100% packet loss" in text or "0 received" in text:
        why = "no reply to a %d-byte non-fragmented ping (jumbo frames dropped on the way, or the peer is down)" % int(mtu)
        fix = "check the peer is up, its fabric IP, and that the MTU is %d on both ends of the cable" % int(mtu)
    else:
        why = "ping failed (rc=%s)" % rc
        fix = "check the fabric route to the peer (ip route get %s) and the peer's fabric IP" % peer_ip
    return {"check": "jumbo_ping",
            "finding": "peer %s not reachable over the fabric with ping -M do -s %d: %s. Output: %s" % (
                peer_ip, size, why, " | ".join(l for l in text.splitlines() if l.strip())[-400:]),
            "fix": fix}


def docker_argv(image: str, program: str, rank: int, world_size: int, master_addr: str, master_port: int, env_file: str,
                docker: str = "docker", gpus: bool = True, rdma_devices: bool = True, extra_args: list[str] | None = None,
                program_args: list[str] | None = None, name: str | None = None, timeout_s: int = 300,
                python: str = "python3") -> list[str]:
    """docker run argv of one preflight rank (same network/ipc/ulimits/env file as the service), run by `python`,
    the image's Python that runs vLLM (its torch and NCCL; container_image finds it, image_python.py)."""
    argv = [docker, "run", "--rm", "--network", "host", "--ipc", "host", "--ulimit", "memlock=-1:-1",
            "--ulimit", "stack=67108864"]
    if name:
        argv += ["--name", name]
    if gpus:
        argv += ["--gpus", "all"]
    if rdma_devices:
        argv += ["--device", "/dev/infiniband"]
    argv += ["--env-file", env_file, "-e", "NCCL_DEBUG=INFO", "-e", "NCCL_DEBUG_SUBSYS=INIT,NET", "-e", "PYTHONUNBUFFERED=1",
             "-v", "%s:/ds4_allreduce.py:ro" % program, "--entrypoint", python]
    argv += list(extra_args or [])
    argv += [image, "/ds4_allreduce.py", "--rank", str(rank), "--world-size", str(world_size),
             "--master-addr", str(master_addr), "--master-port", str(master_port), "--timeout-s", str(timeout_s)]
    argv += list(program_args or [])
    return argv


def judge(text: str, rank: int, threshold_gbps: float = 18.0, expected_hcas: int | None = 2) -> dict[str, Any]:
    """Verdict for one rank's output.  Rank 0 prints the rows (busbw judged there); every rank
    prints NCCL INFO lines (transport and HCAs judged on each)."""
    summary = nccl_log.summarize(text, threshold_gbps=threshold_gbps, expected_hcas=expected_hcas)
    rows = nccl_log.parse_rows(text)
    failures = list(summary["failures"])
    if rank != 0:
        failures = [f for f in failures if not f.startswith("busbw") and f != "no all-reduce result rows found"]
    summary["failures"] = failures
    summary["ok"] = not failures
    summary["rows"] = rows
    summary["rank"] = rank
    return summary


def discovery_checks(discovered: dict[str, Any], expected_mtu: Any, dev_infiniband_present: bool, hcas: list[str] | None = None,
                     gid_pinned: bool = False) -> list[dict[str, str]]:
    """fabric_discovery.checks, every HCA of NCCL_IB_HCA (hcas), and, when NCCL_IB_GID_INDEX is
    pinned (one value for all HCAs of the node), the twins' GID indexes agreeing."""
    out = fabric_discovery.checks(discovered, expected_mtu, dev_infiniband_present)
    out += hca_findings(discovered, hcas if hcas is not None else discovered.get("fabric_hcas"), expected_mtu)
    if gid_pinned:
        out += twin_findings(discovered)
    return out


def fabric_facts(params: dict[str, Any], dev_infiniband_present: bool) -> tuple[dict[str, Any], list[str]]:
    """Body of the fabric_facts module. params: the module's options.  Returns (result dict, [warning str])."""
    eff = params.get("effective") or {}
    fab = eff.get("fabric") or {}
    if params.get("ipv4_by_ifname") is not None:
        ipv4 = dict((k, list(v) if isinstance(v, (list, tuple)) else [v]) for k, v in params["ipv4_by_ifname"].items())
    else:
        ipv4 = ipv4_from_interface_facts(params.get("interface_facts") or {})
    fabric_ip = params.get("fabric_ip") or fab.get("ip")
    disc = fabric_discovery.discover(params.get("sysfs_root") or "/sys", ipv4, fabric_ip)
    inventory = {"ds4_fabric_ifname": fab.get("ifname"), "ds4_rdma_hcas": fab.get("rdma_hcas"),
                 "ds4_nccl_ib_gid_index": fab.get("gid_index"), "ds4_fabric_ip": fab.get("ip")}
    disagreements = fabric_discovery.compare(inventory, disc)
    built = build_env(eff, disc, params.get("fabric_env") or {}, params.get("gid_index") or "auto",
                      params.get("exact_match", True))
    mtu = mtu_policy(params.get("expected_mtu"), disc, built["hcas"], params.get("min_busbw_gbps"))
    findings = discovery_checks(disc, mtu["minimum"], dev_infiniband_present, built["hcas"],
                                any(k == "NCCL_IB_GID_INDEX" for k, _v in built["env"]))
    warnings = [mtu["warning"]] if mtu["warning"] else []
    for d in disagreements:
        used = "inventory"
        if d["key"] == "ds4_nccl_ib_gid_index" and params.get("gid_index") == "discover":
            used = "discovery"
        warnings.append("%s: inventory says %s, discovery found %s on this node; using the %s value" % (
            d["key"], d["inventory"], d["discovered"], used))
    for o in built["profile_overrides"]:
        warnings.append("%s: the profile sets %s, the nccl_fabric role would set %s; the profile value is used" % (
            o["name"], o["profile"], o["role"]))
    nd = disc["netdevs"].get(disc.get("fabric_ifname") or "", {})
    summary = {
        "ip": disc.get("fabric_ip"), "ifname": disc.get("fabric_ifname"), "is_cx7": disc.get("fabric_is_cx7"),
        "hcas": disc.get("fabric_hcas"), "twin_ifnames": disc.get("fabric_twin_ifnames"),
        "gid_index": disc.get("fabric_gid_index"), "gid_index_by_hca": gid_index_by_hca(disc),
        "mtu": nd.get("mtu"), "operstate": nd.get("operstate"), "speed_mbps": nd.get("speed_mbps"),
    }
    header = env_header(eff, built) + [
        "Discovered: %s on %s, HCAs %s, RoCE v2 IPv4 GID %s (sysfs %s)." % (
            summary["ip"], summary["ifname"], ",".join(summary["hcas"] or []) or "-", summary["gid_index"],
            params.get("sysfs_root") or "/sys"),
    ]
    result = {
        "discovered": disc, "fabric": summary, "disagreements": disagreements, "findings": findings,
        "dev_infiniband_present": bool(dev_infiniband_present), "env": built["env"], "env_sources": built["sources"],
        "env_file": render_env_file(built, header), "errors": built["errors"],
        "profile_overrides": built["profile_overrides"], "mtu_policy": mtu,
    }
    return result, warnings
