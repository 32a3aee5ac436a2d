# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watch config's own checks (the memory guard and the canary check theirs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.jobs import evidence_problems


# config key -> (role variable that sets it, smallest value allowed)
POSITIVE_KEYS = (
    ('interval_s', 'vllm_service_pair_guard_interval_s', 1),
    ('max_restarts', 'vllm_service_pair_guard_max_restarts', 1),
    ('window_s', 'vllm_service_pair_guard_window_s', 1),
    ('hang_after_s', 'vllm_service_hang_after_s (with vllm_service_hang_prefill_tokens_per_s)', 1),
    ('hang_after_no_kv_s', 'vllm_service_hang_after_s (with vllm_service_hang_prefill_tokens_per_s)', 1),
    ('hang_poll_s', 'vllm_service_hang_poll_s', 1),
    ('metrics_timeout_s', 'vllm_service_hang_metrics_timeout_s', 1),
    ('evidence_timeout_s', 'vllm_service_hang_evidence_timeout_s', 1),
)


def check_config(cfg: Mapping[str, Any]) -> list[str]:
    """Problems of a guard config (one line each, naming the key, the role variable and the fix); [] when usable."""
    problems = []
    if not cfg.get('head_unit'):
        problems.append('head_unit is missing: re-run the dgxspark.ds4.vllm_service role to render the config')
    for key, variable, least in POSITIVE_KEYS:
        if key not in cfg:
            continue
        value = cfg[key]
        try:
            ok = not isinstance(value, bool) and float(value) >= least
        except (TypeError, ValueError):
            ok = False
        if not ok:
            problems.append('%s = %r: must be a number >= %s. Fix: set %s and re-run the role' % (key, value, least, variable))
    if cfg.get('hang_watchdog') and not problems and 'hang_after_s' in cfg and 'hang_poll_s' in cfg:
        if float(cfg['hang_after_s']) < 2 * float(cfg['hang_poll_s']):
            problems.append('hang_after_s = %r is shorter than two polls (hang_poll_s = %r). Fix: raise vllm_service_hang_after_s '
                            'or lower vllm_service_hang_poll_s' % (cfg['hang_after_s'], cfg['hang_poll_s']))
    problems.extend(evidence_problems(cfg))
    return problems
