# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node probe: what one node says about its vLLM rank, read the same way by doctor, readiness and status.

Pure Python standard library (no Ansible imports).  Every probe is an argv builder plus a parser; the
``probe_*`` functions run the argv through a ``run(argv) -> (rc, stdout, stderr)`` callable (a module's
``run_command``, or a fake in the unit tests) and return a ``Probed(value, rc, out, err)``: the parsed
value and the raw text (doctor keeps the raw text as evidence).

  systemd unit   unit_show_argv / parse_unit_show / parse_units_show / unit_state / probe_unit
                 (``systemctl show -p ...``; the one parser of its output: verify_unit's drop-in check and the converge
                 probe read it here too)
  container      container_argv / parse_container_state / parse_container_inspect / parse_container_summary
                 / probe_container                                           (``docker inspect``)
  journal        journal_argv / split_cursor / probe_journal                 (``journalctl [--after-cursor]
                 --show-cursor -o ...``)
  meminfo        parse_meminfo / read_meminfo                                 (``/proc/meminfo``)
  API port       probe_host / tcp_state                                       (a TCP connect on the node)
  a command     run_command: a probe's `run` without a module (the actions' direct runs)
  one shell poll poll_command / parse_poll: the unit, container, port and journal probes above as one POSIX
                 shell command, for the vllm_ready action that polls over its connection without a module
                 upload (about 0.1 s a poll); the same argv builders and parsers.

Used by ``plugins/modules/ds4_doctor.py``, ``plugins/modules/vllm_ready.py`` and ``plugins/action/vllm_ready.py``
(through ``readiness_pair``), ``plugins/modules/vllm_status.py`` (through ``ops_status``) and
``plugins/module_utils/_model/drop_caches.py``, the memory guard, prestart, the swap, image-work and all-reduce guards
(meminfo: the one parser and reader of ``/proc/meminfo``).
"""

from __future__ import annotations

import calendar
import json
import os
import re
import shlex
import socket
import subprocess
from collections import namedtuple
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

Probed = namedtuple("Probed", "value rc out err")

# unit properties read by readiness (rank death/restart detection and the exit time of the rank)
READY_UNIT_PROPS = ("ActiveState", "SubState", "Result", "NRestarts", "MainPID", "ExecMainStatus", "InactiveExitTimestamp",
                    "ExecMainExitTimestamp")
# docker inspect --format for readiness: id, running, start time, exit code, image ID and the image as named (one JSON
# word each; the last two are what the compile cache's marker records: plugins/module_utils/_image/compile_cache.py)
CONTAINER_STATE_FORMAT = ("{{json .Id}} {{json .State.Running}} {{json .State.StartedAt}} {{json .State.ExitCode}}"
                          " {{json .Image}} {{json .Config.Image}}")
CURSOR_PREFIX = "-- cursor: "
NO_ENTRIES = "-- No entries --"
# run(argv) -> (rc, stdout, stderr): a module's run_command, or a fake in the unit tests
Runner = Callable[..., "tuple[int, str, str]"]


# ---------------------------------------------------------------------------------------------
# systemd unit


def unit_show_argv(unit: str, props: Iterable[str], timestamp: str | None = None, systemctl: str = "systemctl") -> list[str]:
    """``systemctl show <unit> [--timestamp=<style>] -p A,B,C``."""
    argv = [systemctl, "show", unit]
    if timestamp:
        argv.append("--timestamp=%s" % timestamp)
    return argv + ["-p", ",".join(props)]


def parse_unit_show(text: str | None) -> dict[str, str]:
    """``Key=value`` lines of systemctl show -> {Key: value}."""
    out = {}
    for line in (text or "").splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def parse_units_show(text: str | None) -> list[dict[str, str]]:
    """``systemctl show`` of several units (a block each, separated by a blank line, in the order asked) -> [{Key:
    value}, ...], one per block (an empty output is one empty block)."""
    return [parse_unit_show(block) for block in (text or "").strip().split("\n\n")]


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def epoch(value: str | None) -> float | None:
    """A systemd timestamp -> epoch seconds (float) or None.

    'Sun 2026-11-22 08:17:14.123456 UTC' (``--timestamp=us+utc``) or '@1763799434' (``--timestamp=unix``)."""
    if not value or value == "n/a":
        return None
    if value.startswith("@"):
        try:
            return float(value[1:])
        except ValueError:
            return None
    m = re.search(r"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(\.\d+)? UTC", value)
    if not m:
        return None
    dt = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
    return calendar.timegm(dt.timetuple()) + float(m.group(2) or 0)


def unit_state(props: Mapping[str, str], unit: str = "") -> dict[str, Any]:
    """parse_unit_show() of READY_UNIT_PROPS -> the rank status readiness works on:
    {'unit', 'active_state', 'sub_state', 'n_restarts', 'main_pid', 'exec_main_status', 'result', 'since', 'exit_time',
    'container': None}; ``since`` / ``exit_time`` in epoch seconds; MainPID 0 of an active unit is None (no main process)."""
    status = {"unit": unit, "active_state": props.get("ActiveState"), "sub_state": props.get("SubState"),
              "n_restarts": _int_or_none(props.get("NRestarts")), "main_pid": _int_or_none(props.get("MainPID")),
              "exec_main_status": _int_or_none(props.get("ExecMainStatus")), "result": props.get("Result"),
              "since": epoch(props.get("InactiveExitTimestamp")), "exit_time": epoch(props.get("ExecMainExitTimestamp")),
              "container": None}
    if status["main_pid"] == 0 and status["active_state"] == "active":
        status["main_pid"] = None
    return status


def probe_unit(run: Runner, unit: str, props: Iterable[str], timestamp: str | None = None, systemctl: str = "systemctl") -> Probed:
    """Probed({Key: value}, rc, out, err) of systemctl show."""
    rc, out, err = run(unit_show_argv(unit, props, timestamp, systemctl))
    return Probed(parse_unit_show(out), rc, out, err)


# ---------------------------------------------------------------------------------------------
# container


def container_argv(name: str, docker: str = "docker", fmt: str | None = CONTAINER_STATE_FORMAT) -> list[str]:
    """``docker inspect --type container [--format FMT] <name>`` (no format: the full JSON document)."""
    argv = [docker, "inspect", "--type", "container"]
    if fmt:
        argv += ["--format", fmt]
    return argv + [name]


def parse_container_state(text: str | None) -> dict[str, Any] | None:
    """Output of CONTAINER_STATE_FORMAT -> {'id', 'running', 'started_at', 'exit_code', 'image_id', 'image_ref'}, or
    None (no container); the image fields None when not given."""
    words = (text or "").split()
    if len(words) < 4:
        return None
    try:
        state = {"id": json.loads(words[0]), "running": json.loads(words[1]), "started_at": json.loads(words[2]),
                 "exit_code": json.loads(words[3])}
        state.update(image_id=json.loads(words[4]) if len(words) > 4 else None,
                     image_ref=json.loads(words[5]) if len(words) > 5 else None)
        return state
    except ValueError:
        return None


def parse_container_inspect(text: str | None) -> dict[str, Any]:
    """The full ``docker inspect`` JSON list -> {exists, running, status, started_at, image_id, image_ref,
    restart_count}; exists False when the container is absent."""
    try:
        data = json.loads(text or "[]")
    except ValueError:
        data = []
    if not data:
        return {"exists": False, "running": False, "status": "absent", "started_at": None, "image_id": None,
                "image_ref": None, "restart_count": None}
    c = data[0]
    st = c.get("State") or {}
    return {"exists": True, "running": bool(st.get("Running")), "status": st.get("Status") or "?",
            "started_at": st.get("StartedAt"), "image_id": c.get("Image"),
            "image_ref": (c.get("Config") or {}).get("Image"), "restart_count": c.get("RestartCount")}


# doctor's human-readable line (kept as evidence as it is)
CONTAINER_SUMMARY_FORMAT = ("{{.Id}} running={{.State.Running}} exit={{.State.ExitCode}} started={{.State.StartedAt}} "
                            "oom={{.State.OOMKilled}} image={{.Image}}")


def parse_container_summary(text: str | None) -> dict[str, str]:
    """Output of CONTAINER_SUMMARY_FORMAT -> {'id', 'running', 'exit', 'started', 'oom', 'image'} (strings; missing: '')."""
    words = (text or "").split()
    out = {"id": words[0] if words and "=" not in words[0] else ""}
    for key in ("running", "exit", "started", "oom", "image"):
        m = re.search(r"(?:^|\s)%s=(\S+)" % key, text or "")
        out[key] = m.group(1) if m else ""
    return out


def probe_container(run: Runner, name: str, docker: str = "docker", fmt: str | None = CONTAINER_STATE_FORMAT,
                    parse: Callable[[str], Any] = parse_container_state) -> Probed:
    """Probed(parsed, rc, out, err) of docker inspect; parsed is None when rc != 0 (no such container)."""
    rc, out, err = run(container_argv(name, docker, fmt))
    return Probed(parse(out) if rc == 0 else None, rc, out, err)


# ---------------------------------------------------------------------------------------------
# journal


def journal_argv(unit: str | None = None, output: str = "cat", lines: int | str | None = None, cursor: str | None = "",
                 since: str | None = None, show_cursor: bool = False, kernel: bool = False,
                 journalctl: str = "journalctl") -> list[str]:
    """``journalctl (-u <unit>|-k) -o <output> --no-pager [--show-cursor] [-n N] [--after-cursor C | --since S]``.

    ``cursor`` wins over ``since``; ``since`` is any journalctl time (epoch seconds as ``@<int>``)."""
    argv: list[Any] = [journalctl] + (["-k"] if kernel else ["-u", unit]) + ["-o", output, "--no-pager"]
    if show_cursor:
        argv.append("--show-cursor")
    if lines is not None:
        argv += ["-n", str(int(lines))]
    if cursor:
        argv += ["--after-cursor", cursor]
    elif since:
        argv += ["--since", since]
    return argv


def split_cursor(lines: Iterable[str], cursor: str | None = "") -> tuple[list[str], str | None]:
    """Journal lines printed with --show-cursor -> (lines without the cursor line and '-- No entries --', the new
    cursor, else the old one)."""
    lines = list(lines)
    new_cursor = cursor
    if lines and lines[-1].startswith(CURSOR_PREFIX):
        new_cursor = lines.pop()[len(CURSOR_PREFIX):]
    return [ln for ln in lines if ln != NO_ENTRIES], new_cursor


def since_epoch(seconds: float | None) -> str | None:
    """Epoch seconds -> journalctl's ``--since`` word (``@<int>``)."""
    if seconds is None:
        return None
    return "@%d" % int(seconds)


def probe_journal(run: Runner, unit: str, cursor: str | None = "", since: float | None = None, max_lines: int = 2000,
                  output: str = "cat") -> Probed:
    """Probed((lines, cursor), rc, out, err): the unit's lines after ``cursor`` (else since ``since``, epoch
    seconds; else the last ``max_lines``), at most ``max_lines`` of them, and the cursor after them."""
    rc, out, err = run(journal_argv(unit, output=output, lines=max_lines, cursor=cursor, since=since_epoch(since),
                                    show_cursor=True))
    return Probed(split_cursor(out.splitlines(), cursor), rc, out, err)


# ---------------------------------------------------------------------------------------------
# meminfo


def parse_meminfo(text: str | None, in_bytes: bool = False) -> dict[str, int]:
    """/proc/meminfo text -> {Name: value}; values as written (kB for sizes, counts for HugePages_*), or in bytes
    (``kB`` x 1024) with in_bytes.  Lines that do not parse are left out."""
    out = {}
    for line in (text or "").splitlines():
        name, sep, rest = line.partition(":")
        parts = rest.split()
        if not sep or not parts:
            continue
        try:
            value = int(parts[0])
        except ValueError:
            continue
        if in_bytes and len(parts) > 1 and parts[1].lower() == "kb":
            value *= 1024
        out[name.strip()] = value
    return out


def read_meminfo(path: str = "/proc/meminfo", in_bytes: bool = False) -> tuple[str, dict[str, int]]:
    """(text, parse_meminfo(text, in_bytes)); IOError/OSError propagate (the caller says what it could not read)."""
    with open(path) as fh:
        text = fh.read()
    return text, parse_meminfo(text, in_bytes)


# ---------------------------------------------------------------------------------------------
# API port (from the node itself)


def probe_host(api_host: str | None) -> str:
    """Where to reach an API bound to api_host, from the node itself."""
    if api_host in (None, "", "0.0.0.0", "::", "*"):
        return "127.0.0.1"
    return api_host


def tcp_state(host: str, port: int | str, timeout: float = 1.0) -> str:
    """'open' | 'refused' | 'timeout' | 'error: ...' for a TCP connect."""
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect((host, int(port)))
        return "open"
    except socket.timeout:
        return "timeout"
    except (ConnectionRefusedError, OSError) as e:
        if getattr(e, "errno", None) in (111, 61) or isinstance(e, ConnectionRefusedError):
            return "refused"
        return "error: %s" % e
    finally:
        s.close()


# ---------------------------------------------------------------------------------------------
# the probes as one shell command (vllm_ready's action polls this way: no module upload)

_MARK = "@@ds4-ready@@"
# poll_command's answer for a marker whose directory does not exist
NO_DIR = "@@ds4-no-dir@@"


def _sh(argv: Iterable[object]) -> str:
    return " ".join(shlex.quote(str(a)) for a in argv)


def poll_command(unit: str, container: str | None = None, cursor: str | None = "", api_host: str | None = None,
                 api_port: int | str | None = None, max_lines: int = 2000, docker_cli: str = "docker",
                 since: float | None = None, marker: str | None = None) -> str:
    """Shell command (POSIX sh; bash for the TCP probe) printing unit state, container state, API port state, the
    file `marker` (the compile cache's marker: its text, or NO_DIR when its directory does not exist) and the unit's
    journal lines since `cursor` (else since `since`, epoch seconds; else since the unit's current run started).
    parse_poll() reads it."""
    parts = ["echo %sshow" % _MARK, _sh(unit_show_argv(unit, READY_UNIT_PROPS, "us+utc")) + " 2>&1"]
    if container:
        parts += ["echo %sdocker" % _MARK, _sh(container_argv(container, docker_cli)) + " 2>/dev/null"]
    if marker:
        # echo after cat: a marker without a final newline must not run into the next section's line
        parts += ["echo %smarker" % _MARK, "{ cat %s 2>/dev/null && echo; } || test -d %s || echo %s" % (
            shlex.quote(marker), shlex.quote(os.path.dirname(marker) or "."), NO_DIR)]
    if api_port:
        parts += ["echo %sport" % _MARK,
                  "timeout 2 bash -c %s 2>&1 && echo open; echo rc=$?" % shlex.quote(
                      "exec 3<>/dev/tcp/%s/%d" % (probe_host(api_host), int(api_port)))]
    jr = _sh(journal_argv(unit, output="cat", lines=max_lines, cursor=cursor, since=since_epoch(since),
                          show_cursor=True))
    if not cursor and since is None:
        show_since = _sh(["systemctl", "show", "-P", "InactiveExitTimestamp", "--timestamp=unix", unit])
        jr = ('since=$(%s 2>/dev/null); if [ -n "$since" ]; then %s --since "$since"; else %s; fi' % (show_since, jr, jr))
    parts += ["echo %sjournal" % _MARK, jr + " 2>&1"]
    return "; ".join(parts)


def parse_poll(stdout: str, unit: str = "", cursor: str | None = "") -> dict[str, Any]:
    """Parse poll_command() output into a snapshot: {'status', 'lines', 'cursor', 'api_port', 'marker'}."""
    sections: dict[str, list[str]] = {}
    cur: str | None = None
    for line in stdout.splitlines():
        if line.startswith(_MARK):
            cur = line[len(_MARK):]
            sections[cur] = []
        elif cur is not None:
            sections[cur].append(line)
    status = unit_state(parse_unit_show("\n".join(sections.get("show", []))), unit)
    status["container"] = parse_container_state(" ".join(sections.get("docker", [])))
    snap: dict[str, Any] = {"status": status}
    if "port" in sections:
        text = "\n".join(sections["port"])
        if "open" in sections["port"]:
            snap["api_port"] = "open"
        elif "refused" in text.lower():
            snap["api_port"] = "refused"
        elif "rc=124" in text:
            snap["api_port"] = "timeout"
        else:
            snap["api_port"] = "error: %s" % text.strip()[:200]
    if "marker" in sections:
        text = "\n".join(sections["marker"]).strip()
        snap["marker"] = NO_DIR if text == NO_DIR else text
    snap["lines"], snap["cursor"] = split_cursor(sections.get("journal", []), cursor)
    return snap


def run_command(argv: list[str]) -> tuple[int, str, str]:
    """A probe's `run` outside a module (the actions' direct runs: converge_state, file_state, vllm_ready): (rc, stdout,
    stderr) with LC_ALL=C and no pager, as a module runs it. A program that cannot be started raises OSError, as a
    module's run_command fails."""
    env = dict(os.environ, LC_ALL='C', SYSTEMD_PAGER='')
    # no AnsibleModule here (its run_command is the module's `run`): a direct run has none
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,  # pylint: disable=ansible-bad-function
                            close_fds=True)
    out, err = proc.communicate()
    return proc.returncode, out.decode('utf-8', 'replace'), err.decode('utf-8', 'replace')
