# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hang detector: Prometheus text from the head's /metrics, progress and its window."""

from __future__ import annotations

import math
import re
import http.client as httplib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node.bench_stats import parse_prometheus
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.jobs import _num, _ratio
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard.pair import GuardError


# --------------------------------------------------------------------------- Prometheus text format
# The text is parsed by the node package's one parser, bench_stats.parse_prometheus ({'name', 'labels', 'value'}).


def metric_total(samples: Iterable[Mapping[str, Any]], name: str) -> float | None:
    """Sum of every sample of that name (all engines / label sets); None when the series is absent."""
    values = [sample['value'] for sample in samples if sample['name'] == name and not math.isnan(sample['value'])]
    return sum(values) if values else None


def fetch_metrics(url: str, timeout: float) -> str:
    """GET url (http://host:port/path) -> body text; raises on a timeout, a refusal or a non-200."""
    m = re.match(r'^http://([^/:]+)(?::(\d+))?(/.*)?$', url)
    if not m:
        raise GuardError('metrics_url %r: only http://host:port/path is supported' % url)
    conn = httplib.HTTPConnection(m.group(1), int(m.group(2) or 80), timeout=timeout)
    try:
        conn.request('GET', m.group(3) or '/metrics')
        resp = conn.getresponse()
        body = resp.read().decode('utf-8', 'replace')
        if resp.status != 200:
            raise GuardError('GET %s: HTTP %d' % (url, resp.status))
        return body
    finally:
        conn.close()


# --------------------------------------------------------------------------- hang watchdog
# What moves while vLLM makes progress. The three counters move only on engine steps that return output
# tokens; during a chunked prefill only the KV-cache usage gauge changes (every step), real-vllm-on-device
# notes Part 1 §2. Order matters: the hang line and evidence name them in this order.
PROGRESS_SERIES = ('vllm:generation_tokens_total', 'vllm:prompt_tokens_total', 'vllm:iteration_tokens_total_count',
                   'vllm:kv_cache_usage_perc')
KV_USAGE = 'vllm:kv_cache_usage_perc'


def progress_values(samples: Sequence[Mapping[str, Any]]) -> tuple[float | None, ...]:
    """The progress signals of one scrape, in PROGRESS_SERIES order (None for a series that is absent)."""
    return tuple(metric_total(samples, name) for name in PROGRESS_SERIES)


class HangDetector(object):
    """Decides from successive /metrics scrapes whether the engine is hung; pure logic, clock given by the caller.

    A stall: requests running while no progress signal (generation tokens, prompt tokens, engine steps with
    output, KV-cache usage) changed for hang_after_s. Idle (nothing running) is never a hang. Without a
    KV-cache usage series (a vLLM that does not publish it) the window is hang_after_no_kv_s, the longest
    prefill, since nothing else moves during one. A silence: the API answered /metrics once since the head
    started and has not answered for hang_after_s since (a head still loading never answered: not a hang).
    """

    def __init__(self, cfg: Mapping[str, Any], fetch: Callable[[], str]) -> None:
        self.after = float(cfg.get('hang_after_s', 120))
        self.after_no_kv = max(self.after, float(cfg.get('hang_after_no_kv_s') or self.after))
        self.fetch = fetch
        self.reset()

    def reset(self) -> None:
        self.counters: tuple[float | None, ...] | None = None
        self.progress_at: float | None = None
        self.progress_text: str | None = None
        self.answered = False
        self.silent_since: float | None = None
        self.silent_error: str | None = None
        self.last_text: str | None = None
        self.running: float | None = None

    def poll(self, now: float) -> dict[str, Any] | None:
        """One scrape. Returns None, or a dict describing the hang (kind stall/silent, why, numbers)."""
        try:
            text = self.fetch()
        except Exception as exc:  # pylint: disable=broad-except
            if not self.answered:
                return None
            if self.silent_since is None:
                self.silent_since = now
            self.silent_error = '%s: %s' % (type(exc).__name__, exc)
            silent = now - self.silent_since
            if silent >= self.after:
                return {'kind': 'silent', 'cause': 'hang_api_silent', 'silent_s': silent, 'since': self.silent_since,
                        'before_text': self.last_text, 'error': self.silent_error,
                        'why': 'hang: the API has not answered /metrics for %.0f s (limit %.0f s; last error %s) while the '
                               'head container runs' % (silent, self.after, self.silent_error)}
            return None
        self.answered = True
        self.silent_since = None
        samples = parse_prometheus(text)
        running = metric_total(samples, 'vllm:num_requests_running')
        counters = progress_values(samples)
        was_running, self.running = self.running, running
        if (not running or not was_running or self.counters is None or counters != self.counters
                or self.progress_at is None):
            self.progress_at = now
            self.progress_text = text
        self.counters = counters
        self.last_text = text
        stalled = now - self.progress_at
        gen, prompt, steps, kv = counters
        limit = self.after if kv is not None else self.after_no_kv
        if running and running > 0 and stalled >= limit:
            return {'kind': 'stall', 'cause': 'hang_no_tokens', 'stalled_s': stalled, 'since': self.progress_at,
                    'running': running, 'generation_tokens': gen, 'prompt_tokens': prompt, 'steps': steps,
                    'kv_cache_usage': kv, 'limit_s': limit, 'before_text': self.progress_text,
                    'why': 'hang: %d requests running, generation tokens stuck at %s, prompt tokens at %s, engine steps at %s, '
                           'KV cache usage at %s for %.0f s (limit %.0f s)'
                           % (running, _num(gen), _num(prompt), _num(steps), _ratio(kv), stalled, limit)}
        return None

    def stalled_s(self, now: float) -> float:
        """Seconds requests have been running without progress (0 when idle or progressing)."""
        if self.silent_since is not None:
            return now - self.silent_since
        if not self.running or self.progress_at is None:
            return 0.0
        return now - self.progress_at
