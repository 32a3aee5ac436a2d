# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action for dgxspark.ds4.vllm_ready: poll this host's rank every interval, print the phases on the controller,
coordinate with the other rank's instance through a controller-side directory.
Logic: plugins/plugin_utils/readiness_pair.py (ReadyInstance), one poll: plugins/module_utils/_node/node_probe.py
(poll_command, parse_poll: one shell command); the head's checks once its port listens (the journal after the poll, the
HTTP checks): plugins/module_utils/_readiness/ready_checks.py, run directly in the node's Python as converge_state's
direct runs are where the connection pipelines and the Python is known (no module build or upload), else through the
module."""


import os
import time

from ansible import constants as C
from ansible.errors import AnsibleActionFail
from ansible.utils.display import Display
from ansible_collections.dgxspark.ds4.plugins.action import converge_state as direct_action
from ansible_collections.dgxspark.ds4.plugins.module_utils._image.compile_cache import MARKER, marker_matches
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.node_probe import NO_DIR, parse_poll, poll_command
from ansible_collections.dgxspark.ds4.plugins.module_utils._readiness.vllm_ready_spec import ACTION_ARGUMENT_SPEC, ARGUMENT_SPEC as MODULE_SPEC
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.readiness_pair import (
    PEER_RECHECK, SETTLE_INTERVAL, WIDEN_INTERVAL, ReadyInstance, state_dir, wait_round)
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.service_layout import (
    CONTAINER_NAME, DEFAULTS, UNIT_NAME)

display = Display()

_MODULE = "dgxspark.ds4.vllm_ready"

# The module's options (plugins/module_utils/_readiness/vllm_ready_spec.py), without defaults: unset options are filled
# from ds4_effective below, the rest by the module.
ARGUMENT_SPEC = ACTION_ARGUMENT_SPEC


def rank_names(eff, role):
    """unit, container and docker CLI of this rank: what the config role published in
    ds4_effective['service'] (plugins/plugin_utils/service_layout.py), else the vllm_service defaults."""
    service = eff.get("service") or {}
    return {
        "unit": service.get("unit_name") or eff.get("unit_name") or UNIT_NAME % role,
        "container_name": service.get("container_name") or CONTAINER_NAME % role,
        "docker_cli": service.get("docker_bin") or DEFAULTS["docker_bin"],
    }


class ActionModule(direct_action.ActionModule):
    """The wait; its node checks run as converge_state's direct runs do where they can (the class it extends decides:
    _direct_interpreter), else through the module."""

    TRANSFERS_FILES = False

    def _defaults(self, task_vars):
        dummy, validated = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        args = dict((k, v) for k, v in validated.items() if v is not None)
        eff = (task_vars.get("ansible_facts") or {}).get("ds4_effective") or task_vars.get("ds4_effective") or {}
        eff = self._templar.template(eff) if eff else {}
        sargs = eff.get("serve_args") or {}
        api = eff.get("api") or {}
        role = args.get("role") or eff.get("role")
        if role not in ("head", "worker"):
            raise AnsibleActionFail("vllm_ready: role unknown (no ds4_effective fact and no role option); run dgxspark.ds4.config first")
        args["role"] = role
        for key, value in rank_names(eff, role).items():
            args.setdefault(key, value)
        if role == "head":
            args.setdefault("api_host", api.get("host") or "127.0.0.1")
            args.setdefault("api_port", api.get("port") or 8000)
            if sargs.get("served-model-name") is not None:
                args.setdefault("served_model_name", sargs["served-model-name"])
            if sargs.get("max-model-len") is not None:
                args.setdefault("max_model_len", int(sargs["max-model-len"]))
            kw = sargs.get("default-chat-template-kwargs") or {}
            args.setdefault("thinking", bool(kw.get("thinking") or kw.get("enable_thinking")) if isinstance(kw, dict) else False)
        else:
            for k in ("api_host", "api_port", "api_key", "served_model_name", "max_model_len", "thinking"):
                args.pop(k, None)
        # the two ranks of one pair meet in one state directory per task and pair (several pairs wait side by side)
        args["pair"] = str((eff.get("pair") or {}).get("name") or "spark")
        # the compile cache's marker, read by each poll (RV compile_cache_marked: tasks/ready.yml marks only when not)
        cache = eff.get("compile_cache") or {}
        args["marker"] = os.path.join(cache["host_dir"], MARKER) if cache.get("host_dir") else None
        args["cache_dir"] = cache.get("host_dir")
        args["launch_digest"] = cache.get("launch_digest")
        if role == "head" and not args.get("api_key") and task_vars.get("vllm_service_api_key"):
            args["api_key"] = self._templar.template(task_vars["vllm_service_api_key"])
        if not args.get("api_key"):
            args.pop("api_key", None)
        return args

    def _checks(self, interpreter, direct_defaults, module_args, task_vars, node):
        """The module's checks on this node (ready_checks.checks): a direct run where the node's Python is known and the
        connection pipelines (the module's defaults filled here as the module fills them), else the module."""
        if interpreter:
            res = self._probe_directly(interpreter, dict(direct_defaults, **module_args), entry="checks")
        else:
            res = self._execute_module(module_name=_MODULE, module_args=module_args, task_vars=task_vars)
        if res.get("failed"):
            raise AnsibleActionFail("vllm_ready checks failed to run on %s: %s" % (node, res.get("msg")))
        return res

    @staticmethod
    def _recheck_until(inst, deadline):
        """Re-decide on the last poll (ReadyInstance.recheck: the other rank's report read again, no new poll) every
        PEER_RECHECK until `deadline` or a decision other than continue; while the other rank is going down
        (wait_peer), on until its poller's final report, as after a poll. Returns the decision and its message."""
        decision, message = "continue", ""
        while decision == "wait_peer" or (decision == "continue" and time.monotonic() + PEER_RECHECK < deadline):
            time.sleep(PEER_RECHECK)
            events, decision, message = inst.recheck()
            for ev in events:
                display.display("  [vllm_ready] %s" % ev["message"], color=C.COLOR_VERBOSE)
        return decision, message

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(direct_action.ActionModule, self).run(tmp, task_vars)  # ActionBase.run: the task's own setup
        del tmp
        args = self._defaults(task_vars)
        interval = float(args.pop("interval", 0.5) or 0.5)
        timeout = float(args.pop("timeout", 2400) or 2400)
        sdir_base = args.pop("state_dir", None)
        marker, launch_digest, cache_dir = args.pop("marker"), args.pop("launch_digest"), args.pop("cache_dir")
        mark = bool(args.pop("mark_compile_cache", False))
        role = args["role"]
        node = task_vars.get("inventory_hostname", role)
        # What this run waits for, in its result: the playbooks pass ds4_ready_timeout / ds4_ready_chat_timeout here.
        result["limits"] = dict(timeout=timeout, chat_timeout=args.get("chat_timeout"))
        if self._play_context.check_mode:
            checks = ["unit %s state, NRestarts and main PID" % args["unit"], "container %s" % args["container_name"],
                      "journal of %s: startup phases and failure catalogue" % args["unit"]]
            if role == "head":
                checks += ["TCP %s:%s (refused = starting)" % (args["api_host"], args["api_port"]), "GET /health = 200",
                           "GET /v1/models: id %s, max_model_len %s" % (args.get("served_model_name"), args.get("max_model_len")),
                           "POST /v1/chat/completions: non-empty content%s" % (", reasoning field" if args.get("thinking") else "")]
            result.update(changed=False, skipped=False, ready=False, would_check=checks,
                          msg="check mode: nothing polled; every %.1f s for up to %.0f s it would check: %s" % (interval, timeout, "; ".join(checks)))
            return result

        # The two ranks' instances of this wait meet under its round: given, or the task's file and line with how many
        # times this host has run it in this run (readiness_pair.wait_round: both ranks run it as often), under the
        # run's own local temporary directory
        wait = args.pop("round", None) or wait_round(sdir_base or C.DEFAULT_LOCAL_TMP, self._task.get_path(), node)
        key = "%s-%s" % (wait, args.pop("pair"))
        sdir = state_dir(key, sdir_base or C.DEFAULT_LOCAL_TMP)
        inst = ReadyInstance(role, node, sdir, timeout)
        module_args = dict(args)
        module_args["checks"] = True
        # the head's checks (ready_checks.checks) without a module upload where the node's Python is known and the
        # connection pipelines: the module's defaults filled here as the module fills them
        interpreter = self._direct_interpreter(task_vars) if role == "head" else None
        direct_defaults = dict((name, spec.get("default")) for name, spec in MODULE_SPEC.items())
        cursor = args.get("cursor") or ""
        polls = 0
        poll_cost = []
        decision, message = "continue", ""
        while True:
            t0 = time.monotonic()
            widen = decision == "widen"
            # one shell command per poll (no module upload); the checks only once the head's API port listens;
            # a widened poll re-reads the unit's whole journal since this wait began (a few seconds of margin)
            cmd = poll_command(args["unit"], args.get("container_name"), "" if widen else cursor, args.get("api_host"),
                               args.get("api_port"), int(args.get("max_lines") or 2000), args.get("docker_cli") or "docker",
                               since=(inst.wall_started - 5) if widen else None, marker=marker)
            # the head's first poll runs on the node with its checks after it (one node call: the module's `poll`; the
            # HTTP checks when the poll found the API port open), so that a pair already serving is seen in one call
            first = role == "head" and polls == 0 and not widen
            res = self._checks(interpreter, direct_defaults, dict(module_args, poll=cmd), task_vars, node) if first else None
            raw = res["poll"] if first else self._low_level_execute_command(cmd, sudoable=True)
            if raw.get("rc") not in (0, 1) and not raw.get("stdout"):
                raise AnsibleActionFail("vllm_ready poll failed on %s: rc=%s %s" % (node, raw.get("rc"), raw.get("stderr")))
            snap = parse_poll(raw.get("stdout") or "", args["unit"], "" if widen else cursor)
            snap["window"] = widen
            cursor = cursor if widen else (snap.get("cursor") or cursor)
            if first:
                snap["http"] = res.get("http")
            elif role == "head" and not widen and snap.get("api_port") == "open":
                # the port opened since: the checks after this poll, with the unit and the container as it just read
                # them (the module reads the journal after it, then the HTTP checks)
                res = self._checks(interpreter, direct_defaults, dict(module_args, cursor=cursor, status=not cursor),
                                   task_vars, node)
                snap["lines"] = snap["lines"] + (res.get("lines") or [])
                snap["http"] = res.get("http")
                cursor = res.get("cursor") or cursor
            poll_cost.append(time.monotonic() - t0)
            polls += 1
            events, decision, message = inst.step(snap, now=t0)
            while decision == "wait_peer":  # the other rank is down: wait for its poller's final report, locally
                time.sleep(PEER_RECHECK)
                more, decision, message = inst.recheck()
                events.extend(more)
            for ev in events:
                display.display("  [vllm_ready] %s" % ev["message"], color=C.COLOR_VERBOSE)
            if decision not in ("continue", "settle", "widen"):
                break
            deadline = t0 + {"settle": SETTLE_INTERVAL, "widen": WIDEN_INTERVAL}.get(decision, interval)
            if role == "worker" and decision == "continue":
                # this rank runs and what ends its wait is the head's report (ready, or failed): read that locally
                # until the next poll is due, so that the worker ends when the head does, not a poll later
                decision, message = self._recheck_until(inst, deadline)
                if decision not in ("continue", "settle", "widen"):
                    break
            time.sleep(max(0.0, deadline - time.monotonic()))
        out = inst.result()
        # Whether the compile cache's marker already records the image this rank's container runs and this launch (the
        # last poll's): what dgxspark.ds4.compile_cache state=present would write. No cache directory: nothing to mark.
        # None when not known (no marker path, no container).
        container = snap["status"].get("container") or {}
        out["compile_cache_marked"] = (None if not marker or not container.get("image_id")
                                       else snap.get("marker") == NO_DIR
                                       or marker_matches(snap.get("marker"), container["image_id"], container.get("image_ref"),
                                                         launch_digest))
        out["polls"] = polls
        out["poll_seconds_mean"] = round(sum(poll_cost) / len(poll_cost), 3) if poll_cost else None
        result.update(out)
        result["changed"] = False
        result["ready"] = decision in ("ready", "done")
        if result["ready"] and mark and marker and out["compile_cache_marked"] is not True:
            # the pair serves: this node's compile cache marked with the image of its running container and this launch
            marked = self._execute_module(module_name="dgxspark.ds4.compile_cache", task_vars=task_vars, module_args=dict(
                path=cache_dir, state="present", container=args["container_name"], launch_digest=launch_digest))
            result["compile_cache"] = dict((k, v) for k, v in marked.items() if not k.startswith("_ansible"))
            if marked.get("failed"):
                result.update(failed=True, msg="%s: the pair serves, but its compile cache could not be marked: %s" % (
                    node, marked.get("msg")))
                return result
            result["changed"] = bool(marked.get("changed"))
        if decision == "fail":
            result["failed"] = True
            lines = out.get("verdicts") or []
            result["msg"] = "%s: %s%s" % (node, message, ("\n" + "\n".join(lines)) if lines else " (no known cause matched; see lines)")
        elif role == "head":
            result["msg"] = "ready after %s s (%s s after 'Application startup complete.')" % (
                out.get("time_to_ready"), out.get("ready_after_startup_complete"))
        else:
            result["msg"] = "worker running; %s" % message
        return result
