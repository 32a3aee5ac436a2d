# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of dgxspark.ds4.router_pool and what one run does, written once for the module and its action plugin.

The module (plugins/modules/router_pool.py) validates ``ARGUMENT_SPEC`` and calls ``pool``; the action
(plugins/action/router_pool.py) validates the same spec and runs ``pool`` directly in the node's Python where it can
(converge_state's direct runs: no module build or upload), else through the module. The HTTP calls are
router_admin's. Pure Python standard library.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import router_admin

ARGUMENT_SPEC: dict[str, dict[str, Any]] = dict(
    router_url=dict(type='str', required=True),
    worker_url=dict(type='list', elements='str', required=True),
    state=dict(type='str', default='present', choices=['drained', 'present']),
    drain_timeout=dict(type='int', default=600),
    restore_timeout=dict(type='int', default=600),
    metrics_url=dict(type='str'),
    router_metrics_url=dict(type='str'),
    api_key=dict(type='str', no_log=True),
    allow_last=dict(type='bool', default=False),
    listen_timeout=dict(type='int', default=router_admin.LISTEN_WAIT_S),
    hold_dir=dict(type='path'),
    waits_for=dict(type='str'),
    replaces=dict(type='str'),
    wait_in_flight=dict(type='bool', default=True),
    stale_after=dict(type='int'),
    verify_models=dict(type='bool', default=False),
    models_api_key=dict(type='str', no_log=True),
)


def diff(router_url: str, before: list[str], after: list[str]) -> dict[str, str]:
    """The router's worker list before and after, as diff mode shows it."""
    header = 'vllm-router %s workers' % router_admin.normalize_url(router_url)
    return {'before': ''.join('%s\n' % u for u in before), 'after': ''.join('%s\n' % u for u in after),
            'before_header': header, 'after_header': header}


def _refusal(p: Mapping[str, Any]) -> str | None:
    for key in ('drain_timeout', 'restore_timeout', 'listen_timeout', 'stale_after'):
        if p.get(key) is not None and p[key] < 0:
            return '%s = %d: must be at least 0' % (key, p[key])
    urls = p['worker_url']
    if not urls or (p['state'] == 'drained' and len(urls) != 1):
        return 'worker_url = %s: state=%s takes %s. Fix: give %s' % (
            urls, p['state'], 'exactly one URL' if p['state'] == 'drained' else 'at least one URL',
            'one router_pool task per pair to drain' if p['state'] == 'drained' else 'the pair heads\' URLs')
    return None


def _present(p: Mapping[str, Any], check_mode: bool) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for url in p['worker_url']:  # one after the other: each is the router's list as the last one left it
        one = router_admin.restore(p['router_url'], url, timeout=p['restore_timeout'], check_mode=check_mode,
                                   listen_timeout=p['listen_timeout'], hold_dir=p['hold_dir'], replaces=p['replaces'])
        if not result:
            result = one
        else:
            result.update(changed=result['changed'] or one['changed'], workers_after=one['workers_after'],
                          msg='%s; %s' % (result['msg'], one['msg']),
                          waited_s=None if one['waited_s'] is None else round((result['waited_s'] or 0) + one['waited_s'], 3),
                          router_wait_s=round(result['router_wait_s'] + one['router_wait_s'], 3))
    result.update(in_flight_waited_s=None, in_flight_initial=None)
    if p['verify_models'] and not check_mode:
        try:
            result.update(router_admin.models_through(p['router_url'], p['models_api_key'], timeout=p['restore_timeout']))
        except router_admin.RouterAdminError as exc:  # a pair put back above is still a change
            exc.fields['changed'] = result['changed']
            raise
        result['msg'] += '; GET /v1/models through the router: 200 (%s)' % ', '.join(map(str, result['models']))
    return result


def pool(p: Mapping[str, Any], run: Callable[..., Any] | None = None, check_mode: bool = False) -> dict[str, Any]:
    """One run with validated options p -> the module's result; {'failed': True, 'msg', ...} on a refusal or an error
    (changed told truthfully: a pair put back before a later error is still a change). run: unused (the direct runs'
    entry signature; every call here is HTTP)."""
    del run
    refusal = _refusal(p)
    if refusal:
        return {'failed': True, 'msg': refusal, 'changed': False}
    try:
        if p['state'] == 'drained':
            url = p['worker_url'][0]
            result = router_admin.drain(
                p['router_url'], url,
                in_flight_fn=router_admin.in_flight_reader(url, p['metrics_url'], p['router_metrics_url'], p['api_key']),
                timeout=p['drain_timeout'], check_mode=check_mode, allow_last=p['allow_last'],
                listen_timeout=p['listen_timeout'], hold_dir=p['hold_dir'], waits_for=p['waits_for'],
                wait=p['wait_in_flight'], stale_after=p['stale_after'])
            result['waited_s'] = None
            return result
        return _present(p, check_mode)
    except router_admin.RouterAdminError as exc:
        fields = dict(exc.fields)
        fields.setdefault('changed', False)
        return dict(fields, failed=True, msg=exc.msg)
    except (IOError, OSError) as exc:
        return {'failed': True, 'changed': False, 'msg': 'router_pool: hold_dir %s: %s' % (p['hold_dir'], exc)}
