# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Discover the ConnectX-7 RoCE fabric of one DGX Spark from sysfs; compare and check it.

Pure Python (no Ansible imports); reads a sysfs tree under a configurable root so tests use
fixture trees (a node_a / node_b sysfs copy in the repository's tests).

What it reads (paths relative to sysfs_root, default '/sys'):
  class/net/<if>/device -> PCI function; device/vendor == 0x15b3 and device/device == 0x1021
                                       means ConnectX-7
  class/net/<if>/{operstate,speed,mtu}
  class/net/<if>/device/infiniband/<hca>  (or class/infiniband/<hca>/device/net/<if>)
  class/infiniband/<hca>/ports/1/gids/<i>, gid_attrs/types/<i>, gid_attrs/ndevs/<i>

RoCE twins: the Spark's CX-7 shows each physical port as two PCI functions on two PCI domains
(0000:01:00.1 and 0002:01:00.1 -> enp1s0f1np1/rocep1s0f1 and enP2p1s0f1np1/roceP2p1s0f1).
Twins share bus:device.function and differ in domain.

API:
  discover(sysfs_root='/sys', ipv4_by_ifname=None, fabric_ip=None) -> dict
  compare(inventory, discovered) -> [{'key', 'inventory', 'discovered'}]
  checks(discovered, expected_mtu=9000, dev_infiniband_present=True) -> [{'check', 'finding', 'fix'}]
  gid_to_ipv4(gid) -> str|None
"""

from __future__ import annotations


import os
from typing import Any

CX7_VENDOR = "0x15b3"
CX7_DEVICE = "0x1021"
_IPV4_MAPPED_PREFIX = "0000:0000:0000:0000:0000:ffff:"


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except (IOError, OSError):
        return None


def _int(text: Any) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except (IOError, OSError):
        return []


def gid_to_ipv4(gid: str | None) -> str | None:
    """'0000:0000:0000:0000:0000:ffff:c0a8:640a' -> '192.168.100.10'; None if not IPv4-mapped."""
    if not gid or not gid.lower().startswith(_IPV4_MAPPED_PREFIX):
        return None
    tail = gid.lower()[len(_IPV4_MAPPED_PREFIX):].replace(":", "")
    if len(tail) != 8:
        return None
    try:
        return ".".join(str(int(tail[i:i + 2], 16)) for i in range(0, 8, 2))
    except ValueError:
        return None


def _gid_table(sysfs_root: str, hca: str, port: str = "1") -> list[dict[str, Any]]:
    pdir = os.path.join(sysfs_root, "class", "infiniband", hca, "ports", port)
    table: list[dict[str, Any]] = []
    for name in _listdir(os.path.join(pdir, "gids")):
        idx = _int(name)
        if idx is None:
            continue
        gid = _read(os.path.join(pdir, "gids", name))
        if not gid or gid.replace("0", "").replace(":", "") == "":
            continue
        table.append({
            "index": idx,
            "gid": gid,
            "type": _read(os.path.join(pdir, "gid_attrs", "types", name)),
            "ndev": _read(os.path.join(pdir, "gid_attrs", "ndevs", name)),
            "ipv4": gid_to_ipv4(gid),
        })
    table.sort(key=lambda g: g["index"])
    return table


def _hca_for_netdev(sysfs_root: str, ifname: str) -> str | None:
    names = _listdir(os.path.join(sysfs_root, "class", "net", ifname, "device", "infiniband"))
    if names:
        return names[0]
    for hca in _listdir(os.path.join(sysfs_root, "class", "infiniband")):
        if ifname in _listdir(os.path.join(sysfs_root, "class", "infiniband", hca, "device", "net")):
            return hca
    return None


def _roce_v2_ipv4_gid(gids: list[dict[str, Any]], ifname: str, want_ip: str | None = None) -> int | None:
    """Index of the RoCE v2 IPv4-mapped GID on ifname (matching want_ip when given)."""
    cands = [g for g in gids if g["type"] == "RoCE v2" and g["ipv4"] and g["ndev"] in (ifname, None)]
    if want_ip:
        exact = [g for g in cands if g["ipv4"] == want_ip]
        if exact:
            return exact[0]["index"]
        return None
    return cands[0]["index"] if cands else None


def discover(sysfs_root: str = "/sys", ipv4_by_ifname: dict[str, list[str]] | None = None,
             fabric_ip: str | None = None) -> dict[str, Any]:
    """Discover one node's fabric.

    ipv4_by_ifname: {ifname: [ipv4, ...]} (from ansible facts: ansible_facts[<if>]['ipv4'] and
    'ipv4_secondaries'); fabric_ip: the inventory's ds4_fabric_ip (optional).

    Returns dict:
      netdevs: {ifname: {ifname, pci_address, pci_domain, pci_function (bus:dev.fn),
                vendor, device, is_cx7, operstate, speed_mbps (int|None; -1 when down),
                mtu (int|None), hca (str|None), ipv4 [str], gids [gid entries],
                roce_v2_ipv4_gid_index (int|None)}}   every netdev with a PCI device
      cx7_netdevs: [ifname]            sorted
      hcas: {hca: ifname}              CX-7 RDMA devices
      ports: [{pci_function, netdevs [ifname], hcas [hca], up (bool: all twins up)}]
             one per physical port (twins grouped), sorted by pci_function
      fabric_ip: str|None              fabric_ip, else the single IPv4 on an up CX-7 netdev
      fabric_ifname: str|None          netdev holding fabric_ip (any netdev, CX-7 or not)
      fabric_is_cx7: bool
      fabric_hcas: [hca]               both twins of fabric_ifname's port (domain order)
      fabric_twin_ifnames: [ifname]    netdevs of that port (domain order)
      fabric_gid_index: int|None       RoCE v2 IPv4 GID index of fabric_ifname for fabric_ip
    """
    ipv4_by_ifname = ipv4_by_ifname or {}
    netdevs: dict[str, dict[str, Any]] = {}
    for ifname in _listdir(os.path.join(sysfs_root, "class", "net")):
        base = os.path.join(sysfs_root, "class", "net", ifname)
        devlink = os.path.join(base, "device")
        if not os.path.exists(devlink):
            continue  # virtual (lo, docker0, bridges)
        addr = os.path.basename(os.path.realpath(devlink))
        vendor = _read(os.path.join(devlink, "vendor"))
        device = _read(os.path.join(devlink, "device"))
        is_cx7 = vendor == CX7_VENDOR and device == CX7_DEVICE
        hca = _hca_for_netdev(sysfs_root, ifname) if is_cx7 else None
        ipv4 = list(ipv4_by_ifname.get(ifname) or [])
        gids = _gid_table(sysfs_root, hca) if hca else []
        want = fabric_ip if fabric_ip in ipv4 else (ipv4[0] if ipv4 else None)
        netdevs[ifname] = {
            "ifname": ifname,
            "pci_address": addr,
            "pci_domain": addr.split(":", 1)[0] if addr.count(":") == 2 else None,
            "pci_function": addr.split(":", 1)[1] if addr.count(":") == 2 else addr,
            "vendor": vendor,
            "device": device,
            "is_cx7": is_cx7,
            "operstate": _read(os.path.join(base, "operstate")),
            "speed_mbps": _int(_read(os.path.join(base, "speed"))),
            "mtu": _int(_read(os.path.join(base, "mtu"))),
            "hca": hca,
            "ipv4": ipv4,
            "gids": gids,
            "roce_v2_ipv4_gid_index": _roce_v2_ipv4_gid(gids, ifname, want) if hca else None,
        }
    cx7 = sorted(n for n, d in netdevs.items() if d["is_cx7"])
    groups: dict[str, list[str]] = {}
    for n in cx7:
        groups.setdefault(netdevs[n]["pci_function"], []).append(n)
    ports: list[dict[str, Any]] = []
    for func in sorted(groups):
        members = sorted(groups[func], key=lambda n: netdevs[n]["pci_domain"] or "")
        ports.append({
            "pci_function": func,
            "netdevs": members,
            "hcas": [netdevs[n]["hca"] for n in members if netdevs[n]["hca"]],
            "up": all(netdevs[n]["operstate"] == "up" for n in members),
        })
    if fabric_ip is None:
        up_ips = [ip for n in cx7 if netdevs[n]["operstate"] == "up" for ip in netdevs[n]["ipv4"]]
        fabric_ip = up_ips[0] if len(up_ips) == 1 else None
    fabric_ifname = None
    if fabric_ip:
        for n in sorted(ipv4_by_ifname):
            if fabric_ip in (ipv4_by_ifname.get(n) or []):
                fabric_ifname = n
                break
    fab = netdevs.get(fabric_ifname) if fabric_ifname else None
    port = None
    if fab and fab["is_cx7"]:
        port = [p for p in ports if fabric_ifname in p["netdevs"]][0]
    return {
        "netdevs": netdevs,
        "cx7_netdevs": cx7,
        "hcas": dict((netdevs[n]["hca"], n) for n in cx7 if netdevs[n]["hca"]),
        "ports": ports,
        "fabric_ip": fabric_ip,
        "fabric_ifname": fabric_ifname,
        "fabric_is_cx7": bool(fab and fab["is_cx7"]),
        "fabric_hcas": list(port["hcas"]) if port else [],
        "fabric_twin_ifnames": list(port["netdevs"]) if port else [],
        "fabric_gid_index": fab["roce_v2_ipv4_gid_index"] if fab and fab["is_cx7"] else None,
    }


_COMPARE_KEYS = (
    # (inventory keys accepted, discovered key, compare as set)
    (("ds4_fabric_ifname", "fabric_ifname"), "fabric_ifname", False),
    (("ds4_rdma_hcas", "rdma_hcas"), "fabric_hcas", True),
    (("ds4_nccl_ib_gid_index", "nccl_ib_gid_index", "gid_index"), "fabric_gid_index", False),
    (("ds4_fabric_ip", "fabric_ip"), "fabric_ip", False),
)


def compare(inventory: dict[str, Any], discovered: dict[str, Any]) -> list[dict[str, Any]]:
    """Report where inventory values disagree with discovery (inventory wins; this only reports).

    inventory: dict with any of ds4_fabric_ifname, ds4_rdma_hcas, ds4_nccl_ib_gid_index,
    ds4_fabric_ip (unprefixed names accepted too); None / missing keys are skipped.
    Returns [{'key': <inventory key>, 'inventory': value, 'discovered': value}].
    """
    out: list[dict[str, Any]] = []
    for names, dkey, as_set in _COMPARE_KEYS:
        for name in names:
            if inventory.get(name) is None:
                continue
            inv = inventory[name]
            disc = discovered.get(dkey)
            if as_set:
                inv_v = sorted(inv if isinstance(inv, (list, tuple)) else str(inv).split(","))
                same = inv_v == sorted(disc or [])
            elif dkey == "fabric_gid_index":
                same = _int(inv) == disc
            else:
                same = str(inv) == str(disc)
            if not same:
                out.append({"key": name, "inventory": inv, "discovered": disc})
            break
    return out


def checks(discovered: dict[str, Any], expected_mtu: int | None = 9000, dev_infiniband_present: bool = True) -> list[dict[str, str]]:
    """Fabric checks.  Returns [{'check', 'finding', 'fix'}]; [] means pass.

    check names: fabric_ip_missing, fabric_ip_not_cx7, link_down, twin_link_down, mtu_low,
    no_roce_v2_gid, dev_infiniband_missing.
    """
    out: list[dict[str, str]] = []
    ip = discovered.get("fabric_ip")
    ifname = discovered.get("fabric_ifname")
    nd = discovered.get("netdevs", {})
    if not dev_infiniband_present:
        out.append({"check": "dev_infiniband_missing",
                    "finding": "/dev/infiniband does not exist: NCCL would fall back to TCP sockets",
                    "fix": "load the mlx5_ib / ib_uverbs modules (DOCA-OFED / DGX OS) and pass --device /dev/infiniband to the container"})
    if not ip or not ifname:
        out.append({"check": "fabric_ip_missing",
                    "finding": "fabric IP %s is not assigned to any netdev on this node" % (ip or "(unknown)"),
                    "fix": "assign ds4_fabric_ip to the cabled CX-7 port (netplan, e.g. enp1s0f1np1) or correct the inventory"})
        return out
    dev = nd.get(ifname, {})
    if not discovered.get("fabric_is_cx7"):
        out.append({"check": "fabric_ip_not_cx7",
                    "finding": "fabric IP %s is on %s, which is not a ConnectX-7 netdev (CX-7 netdevs: %s)" % (
                        ip, ifname, ", ".join(discovered.get("cx7_netdevs") or []) or "none"),
                    "fix": "move the fabric IP to the cabled CX-7 port and set ds4_fabric_ifname accordingly"})
        return out
    if dev.get("operstate") != "up":
        out.append({"check": "link_down",
                    "finding": "%s (fabric IP %s) is %s" % (ifname, ip, dev.get("operstate")),
                    "fix": "check the QSFP cable and that both nodes use the same physical port; ip link set %s up" % ifname})
    for twin in discovered.get("fabric_twin_ifnames") or []:
        if twin != ifname and nd.get(twin, {}).get("operstate") != "up":
            out.append({"check": "twin_link_down",
                        "finding": "RoCE twin %s of %s is %s: NCCL gets half the bandwidth" % (twin, ifname, nd[twin].get("operstate")),
                        "fix": "bring %s up (cold boot if it dropped after a warm reboot)" % twin})
    mtu = dev.get("mtu")
    if expected_mtu and (mtu is None or mtu < expected_mtu):
        out.append({"check": "mtu_low",
                    "finding": "%s MTU is %s, expected %d" % (ifname, mtu, expected_mtu),
                    "fix": "set mtu: %d on %s in netplan on both nodes and netplan apply" % (expected_mtu, ifname)})
    if discovered.get("fabric_gid_index") is None:
        out.append({"check": "no_roce_v2_gid",
                    "finding": "no RoCE v2 IPv4 GID for %s on %s" % (ip, dev.get("hca")),
                    "fix": "check the IPv4 address is on %s and the RDMA device is bound (ibdev2netdev / show_gids)" % ifname})
    return out
