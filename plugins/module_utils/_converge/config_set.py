# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rendered config set of one rank kept as a rollback target (switch.yml / rollback.yml).

Pure Python (no Ansible imports).  A set is a list of {'name': key, 'path': live absolute path}
(launch script, nccl.env, secrets env, prestart json, the unit file, the deployment evidence).
The stored copy lives in one directory (default /etc/dgxspark-ds4/previous/, 0700) as
<store>/<name> plus <store>/manifest.json {saved_utc, label, files: {name: {path, sha256, mode, present}}}.

  live_state(files) -> {name: {path, present, sha256, mode}}
  read_manifest(store) -> dict | None
  plan_save(files, store) -> (changed, diff_lines)
  save(files, store, label) -> manifest            copy live -> store (replacing the stored set)
  plan_swap(store) -> (changed, diff_lines)
  swap(store, label) -> manifest                   live <-> store for every file (rollback; again = redo)

Copies are written to a temporary name and renamed (a crash never leaves half a file).
"""

from __future__ import annotations


import hashlib
import json
import os
import shutil
import stat
import time
from collections.abc import Callable
from typing import Any

MANIFEST = "manifest.json"


class ConfigSetError(Exception):
    pass


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            h.update(block)
    return h.hexdigest()


def _check_files(files: list[dict[str, Any]]) -> None:
    names = set()
    for f in files:
        name, path = f.get("name"), f.get("path")
        if not name or "/" in name or name in (MANIFEST, ".", ".."):
            raise ConfigSetError("bad file key %r (a plain name other than %s)" % (name, MANIFEST))
        if not path or not os.path.isabs(path):
            raise ConfigSetError("%s: path %r must be absolute" % (name, path))
        if name in names:
            raise ConfigSetError("file key %r given twice" % name)
        names.add(name)


def live_state(files: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    _check_files(files)
    out: dict[str, dict[str, Any]] = {}
    for f in files:
        p = f["path"]
        if os.path.isfile(p):
            out[f["name"]] = {"path": p, "present": True, "sha256": _sha256(p), "mode": stat.S_IMODE(os.stat(p).st_mode)}
        else:
            out[f["name"]] = {"path": p, "present": False, "sha256": None, "mode": None}
    return out


def read_manifest(store: str) -> Any:
    path = os.path.join(store, MANIFEST)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def _copy_atomic(src: str, dst: str, mode: int) -> None:
    tmp = "%s.ds4tmp-%d" % (dst, os.getpid())
    shutil.copyfile(src, tmp)
    os.chmod(tmp, mode)
    os.replace(tmp, dst)


def _write_manifest(store: str, manifest: dict[str, Any]) -> None:
    tmp = os.path.join(store, MANIFEST + ".tmp")
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, os.path.join(store, MANIFEST))


def plan_save(files: list[dict[str, Any]], store: str) -> tuple[bool, list[str]]:
    live = live_state(files)
    old = (read_manifest(store) or {}).get("files") or {}
    diff = []
    for name, st in sorted(live.items()):
        prev = old.get(name) or {}
        if st["present"] != bool(prev.get("present")) or st["sha256"] != prev.get("sha256") or st["path"] != prev.get("path"):
            diff.append("%s: stored %s -> %s" % (name, (prev.get("sha256") or "absent")[:12], (st["sha256"] or "absent")[:12]))
    for name in sorted(set(old) - set(live)):
        diff.append("%s: dropped from the stored set" % name)
    return bool(diff), diff


def save(files: list[dict[str, Any]], store: str, label: str | None = None) -> dict[str, Any]:
    """Copy the live set into the store (replacing what was stored).  At least one live file must exist."""
    live = live_state(files)
    if not any(v["present"] for v in live.values()):
        raise ConfigSetError("nothing to keep: none of %s exists" % ", ".join(v["path"] for v in live.values()))
    if not os.path.isdir(store):
        os.makedirs(store, 0o700)
    os.chmod(store, 0o700)
    for name, st in live.items():
        dst = os.path.join(store, name)
        if st["present"]:
            _copy_atomic(st["path"], dst, st["mode"])
        elif os.path.exists(dst):
            os.remove(dst)
    manifest = {"saved_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "label": label, "files": live}
    _write_manifest(store, manifest)
    return manifest


def plan_swap(store: str) -> tuple[bool, list[str], list[str]]:
    """What a swap changes: (changed, one line per file that differs, the names of the files it writes into place: the
    kept set has them and the live ones differ; a kept file that is absent removes the live one instead)."""
    manifest = read_manifest(store)
    if not manifest:
        raise ConfigSetError("no rollback target in %s (switch.yml keeps one when it changes the profile)" % store)
    files = [{"name": n, "path": v["path"]} for n, v in sorted(manifest["files"].items())]
    live = live_state(files)
    diff, written = [], []
    for name, st in sorted(manifest["files"].items()):
        cur = live[name]
        if cur["sha256"] != st.get("sha256"):
            diff.append("%s (%s): live %s -> %s" % (name, st["path"], (cur["sha256"] or "absent")[:12],
                                                    (st.get("sha256") or "absent")[:12]))
            if st.get("present"):
                written.append(name)
    return bool(diff), diff, written


def swap(store: str, label: str | None = None) -> dict[str, Any]:
    """Exchange live and stored files (rollback).  The replaced live set becomes the stored set, so a
    second swap returns to it.  Stored files are verified against the manifest before anything moves."""
    manifest = read_manifest(store)
    if not manifest:
        raise ConfigSetError("no rollback target in %s (switch.yml keeps one when it changes the profile)" % store)
    stored = manifest["files"]
    for name, st in stored.items():
        p = os.path.join(store, name)
        if st.get("present"):
            if not os.path.isfile(p):
                raise ConfigSetError("stored %s is missing (%s): the rollback target is incomplete" % (name, p))
            if _sha256(p) != st["sha256"]:
                raise ConfigSetError("stored %s (%s) does not match its manifest checksum" % (name, p))
    files = [{"name": n, "path": v["path"]} for n, v in sorted(stored.items())]
    live = live_state(files)
    staging = os.path.join(store, ".swap")
    if os.path.isdir(staging):
        shutil.rmtree(staging)
    os.makedirs(staging, 0o700)
    # 1. live -> staging, 2. store -> live, 3. staging -> store
    for name, cur in live.items():
        if cur["present"]:
            _copy_atomic(cur["path"], os.path.join(staging, name), cur["mode"])
    for name, st in stored.items():
        if st.get("present"):
            d = os.path.dirname(st["path"])
            if not os.path.isdir(d):
                os.makedirs(d, 0o755)
            _copy_atomic(os.path.join(store, name), st["path"], st.get("mode") or 0o644)
        elif os.path.isfile(st["path"]):
            os.remove(st["path"])
    for name, cur in live.items():
        dst = os.path.join(store, name)
        if cur["present"]:
            os.replace(os.path.join(staging, name), dst)
        elif os.path.exists(dst):
            os.remove(dst)
    shutil.rmtree(staging)
    new_manifest = {"saved_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "label": label,
                    "files": live, "swapped_from": {"saved_utc": manifest.get("saved_utc"), "label": manifest.get("label")}}
    _write_manifest(store, new_manifest)
    return {"restored": {"label": manifest.get("label"), "saved_utc": manifest.get("saved_utc"), "files": stored},
            "stored": new_manifest}


# The launch facts of a config set (ds4_effective.launch, copied into the set's deployed record).
LAUNCH_KEYS = ('served_model_name', 'max_model_len', 'max_num_seqs', 'thinking', 'vllm_port', 'vllm_host', 'public_port',
               'engine_url', 'headless')


def read_text(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def launch_from_record(record: Any, read_script: Callable[[str], str] | None = read_text) -> dict[str, Any]:
    """The launch facts of a config set, from its deployed record (deployed-<role>.json, part of the set): the slice
    the config compile published as ds4_effective.launch, copied there when the set was deployed.

    A record written before the slice existed carries the clients' port (api_port), the served name and the engine
    URL; for that one transition the rest is read from the launch script it names (read_script(path) -> text;
    launch_facts). Returns {} for no record."""
    if not isinstance(record, dict):
        return {}
    if isinstance(record.get('launch'), dict):
        return dict((key, record['launch'].get(key)) for key in LAUNCH_KEYS)
    parsed: dict[str, Any] = {}
    if record.get('launch_script') and read_script is not None:
        try:
            parsed = launch_facts(read_script(record['launch_script']))
        except (IOError, OSError):
            parsed = {}
    facts = dict((key, parsed.get(key)) for key in ('served_model_name', 'max_model_len', 'max_num_seqs', 'thinking', 'headless'))
    facts.update(vllm_port=parsed.get('api_port'), vllm_host=parsed.get('api_host'), public_port=record.get('api_port'))
    facts['served_model_name'] = facts['served_model_name'] or record.get('served_model')
    facts['engine_url'] = record.get('engine_url') or (
        'http://%s:%s' % (facts['vllm_host'] or '127.0.0.1', facts['vllm_port']) if facts['vllm_port'] else None)
    return facts


def read_record(path: str) -> dict[str, Any] | None:
    """A deployed record as a dict, or None (absent or not JSON)."""
    try:
        with open(path) as handle:
            record = json.load(handle)
    except (IOError, OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def launch_facts(script_text: str | None) -> dict[str, Any]:
    """A launch script's serve arguments, read back from its `exec <entrypoint> ...` command (backslash continuations
    joined, shell words split): served_model_name, max_model_len, thinking, api_port (vLLM's --port), api_host,
    max_num_seqs, headless. Only for a deployed record written before ds4_effective.launch existed
    (launch_from_record); the unit tests show it equals the published slice for every shipped recipe."""
    import shlex  # pylint: disable=import-outside-toplevel
    text = (script_text or "").replace("\\\n", " ")
    cmd = None
    for line in text.splitlines():
        if line.strip().startswith("exec "):
            cmd = line.strip()[5:]
    facts: dict[str, Any] = {"served_model_name": None, "max_model_len": None, "thinking": False, "api_port": None,
                             "api_host": None, "max_num_seqs": None, "headless": False}
    if cmd is None:
        return facts
    try:
        words = shlex.split(cmd)
    except ValueError:
        return facts
    args: dict[str, str | bool] = {}
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("--"):
            key, _sep, text = w[2:].partition("=")
            val: str | bool = text
            key = key.replace("_", "-")
            if not _sep:
                if i + 1 < len(words) and not words[i + 1].startswith("--"):
                    val = words[i + 1]
                    i += 1
                else:
                    val = True
            args[key] = val
        i += 1
    facts["served_model_name"] = args.get("served-model-name")
    facts["api_host"] = args.get("host") if isinstance(args.get("host"), str) else None
    for key, name in (("max-model-len", "max_model_len"), ("port", "api_port"), ("max-num-seqs", "max_num_seqs")):
        try:
            facts[name] = int(args[key]) if key in args else None
        except (TypeError, ValueError):
            facts[name] = None
    kw: Any = args.get("default-chat-template-kwargs")
    if isinstance(kw, str):
        try:
            kw = json.loads(kw)
        except ValueError:
            kw = {}
    if isinstance(kw, dict):
        facts["thinking"] = bool(kw.get("thinking") or kw.get("enable_thinking"))
    facts["headless"] = "headless" in args
    return facts
