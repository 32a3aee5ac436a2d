# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dgxspark-ds4 router pool keeper: the ExecStart of dgxspark-ds4-router-pool.service.

The node package's module; its entry point is roles/router/files/routerpool.py, installed by the dgxspark.ds4.router
role as /usr/local/libexec/dgxspark-ds4/router/routerpool.py, next to the node package (the router_admin client among
it) under ansible_collections/ in the same directory; reads its settings from the JSON file named on the command line (rendered by the role):
  {"router_url": "http://127.0.0.1:30000", "workers": ["http://<head>:<port>", ...],
   "hold_dir": "/run/dgxspark-ds4/router-hold", "poll_s": 1}

vllm-router runs without --worker-urls (0.1.17 does not listen until every one of them answers, so one pair
that is down would keep the whole endpoint down). This loop adds, through the router's own admin API
(router_admin.reconcile), every configured pair head that answers /health and is not held by a drain: at the
router's start, after a router restart (its registry starts empty) and when a pair that was down comes back.
It never removes a worker. Every change and every new reason to wait is printed once (journal).
Python 3 standard library only.
"""

from __future__ import annotations

# A node script's code, run by the node's own python3 (not an Ansible module): print and subprocess are its I/O.
# pylint: disable=ansible-bad-function
import json
import sys
import time
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import router_admin


def load(path: str) -> dict[str, Any]:
    with open(path) as handle:
        cfg: dict[str, Any] = json.load(handle)
    missing = [k for k in ('router_url', 'workers') if k not in cfg]
    if missing or not isinstance(cfg.get('workers'), list):
        raise SystemExit('%s: needs router_url and a workers list (missing: %s)' % (path, ', '.join(missing) or 'workers'))
    return cfg


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit('usage: routerpool.py <config.json>')
    cfg = load(argv[1])
    poll_s = float(cfg.get('poll_s') or 1)
    said: tuple[Any, ...] | None = None
    print('pool keeper: %d pair(s) %s for %s' % (len(cfg['workers']), ', '.join(cfg['workers']), cfg['router_url']))
    sys.stdout.flush()
    while True:
        try:
            res = router_admin.reconcile(cfg['router_url'], cfg['workers'], hold_dir=cfg.get('hold_dir'))
            for url in res['added']:
                print('added %s (it answers /health); the router lists %s' % (url, ', '.join(res['listed'])))
            state: tuple[Any, ...] = ('waiting', tuple(sorted(res['waiting'].items())), tuple(res['held']))
            if state != said and (res['waiting'] or res['held']):
                print('; '.join(['waiting for %s: %s' % kv for kv in sorted(res['waiting'].items())]
                                + ['held by a drain: %s' % u for u in res['held']]))
        except router_admin.RouterAdminError as exc:
            state = ('router', exc.msg.split(':')[0])
            if state != said:
                print('the router does not answer yet (%s); trying every %.0f s' % (exc.msg, poll_s))
        said = state
        sys.stdout.flush()
        time.sleep(poll_s)
