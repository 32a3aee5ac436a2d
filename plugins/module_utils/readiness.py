# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness of the two-node vLLM pair: an index of where each part lives, and its names in one place.

Pure Python (no Ansible imports).  The parts, one file each:

  readiness_phases.py   phase tracking: the startup phases of one rank from its log lines (PhaseTracker, PHASES)
  readiness_pair.py     pair coordination on the controller: rank death/restart detection (unit_down, NodeWatch),
                        the shared directory of the two pollers (state_dir, publish, read_peer), decide(),
                        ReadyInstance (one poller)
  readiness_http.py     the head's HTTP checks (http_checks, check_models, check_chat), through vllm_client
  node_probe.py         the node probe: unit, container, journal, API port; poll_command / parse_poll (one shell poll)
  redact.py             secret redaction (redact)

New code imports from those files; the names below are re-exported for the callers and tests that import
``readiness``.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible_collections.dgxspark.ds4.plugins.module_utils.node_probe import (
    parse_poll, poll_command, probe_host, tcp_state)
from ansible_collections.dgxspark.ds4.plugins.module_utils.readiness_http import (
    check_chat, check_models, http_checks)
from ansible_collections.dgxspark.ds4.plugins.module_utils.readiness_pair import (
    PEER_RECHECK, SETTLE_INTERVAL, WIDEN_INTERVAL, WIDEN_POLLS, NodeWatch, ReadyInstance, decide, peer_role, publish,
    read_peer, state_dir, unit_down)
from ansible_collections.dgxspark.ds4.plugins.module_utils.readiness_phases import (
    PHASES, PhaseTracker)
from ansible_collections.dgxspark.ds4.plugins.module_utils.redact import REDACTED, redact

__all__ = ("PEER_RECHECK", "PHASES", "REDACTED", "SETTLE_INTERVAL", "NodeWatch", "PhaseTracker", "ReadyInstance", "check_chat",
           "check_models", "decide", "http_checks", "parse_poll", "peer_role", "poll_command", "probe_host", "publish", "read_peer",
           "redact", "state_dir", "tcp_state", "unit_down", "WIDEN_INTERVAL", "WIDEN_POLLS")
