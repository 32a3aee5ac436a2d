#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: api_proxy_config
short_description: nginx configuration of the API proxy (endpoint allowlist + key check) and its 0600 keys file
version_added: 0.1.0
description:
  - Renders the nginx configuration of the head's API proxy (logic in C(plugins/module_utils/_security/api_exposure.py));
    only the paths in O(endpoints) are forwarded to vLLM on loopback, every other path answers 404, and paths
    marked C(auth) answer 401 unless the request carries the header C(Authorization) with the value
    C(Bearer <one of api_keys>).
  - The keys live in a separate include (O(keys_path), mode 0600, owner root; the nginx master reads it as root);
    the main file (O(path), 0644) holds no secret. The client key is never forwarded; vLLM receives
    O(upstream_api_key) (or no Authorization header).
  - Both files are checked together with C(nginx -t) before either is replaced. The keys never appear in the
    result, the diff or an error message.
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
    details: Renders and compares; writes and validates nothing.
  diff_mode:
    support: partial
    details: The main configuration is diffed; the keys file only reports C(keys_changed).
options:
  state:
    description: V(present) writes both files; V(absent) removes them.
    type: str
    choices: [present, absent]
    default: present
  path:
    description: The nginx main configuration file.
    type: path
    default: /etc/dgxspark-ds4/proxy/nginx.conf
  keys_path:
    description: The keys include (0600, root).
    type: path
    default: /etc/dgxspark-ds4/proxy/keys.conf
  listen:
    description: Addresses the proxy listens on (port O(public_port)), e.g. C(0.0.0.0), C([::]).
    type: list
    elements: str
    default: ['0.0.0.0']
  public_port:
    description: The API port clients use.
    type: int
  upstream_host:
    description: vLLM's loopback address.
    type: str
    default: 127.0.0.1
  upstream_port:
    description: vLLM's loopback port.
    type: int
  health_gate:
    description:
      - A file the pair guard creates while the pair must not take requests (a worker rank down, a hang, a pair
        restart). While it exists C(/health) answers 503, so a router or load balancer takes the pair out of rotation
        (vLLM's own C(/health) stays 200 with a dead peer). Unset = C(/health) is vLLM's.
    type: path
  pass_client_key:
    description:
      - The router's front (several pairs, on the router's host, an nginx instance of its own) - O(upstream_port) is
        vllm-router's loopback port and the client's key is passed on to it (every pair head's proxy checks it
        again) instead of being replaced by O(upstream_api_key). Not with O(health_gate).
    type: bool
    default: false
  endpoints:
    description:
      - The allowlist, exact paths. Each item has C(path), C(auth) (bool, default true) and C(methods) (list).
      - Only C(/health), C(/ping) and C(/version) may have C(auth=false); vLLM's control and unguarded paths
        (C(/invocations), C(/tokenize), C(/metrics), C(/pause), ...) are refused.
    type: list
    elements: dict
  api_keys:
    description: Client keys (Bearer tokens), 16-256 characters from C(A-Za-z0-9._~+/=-).
    type: list
    elements: str
    default: []
  upstream_api_key:
    description: The key vLLM checks (its C(VLLM_API_KEY)); empty = none sent.
    type: str
    default: ''
  user:
    description: The unprivileged user of the nginx worker processes.
    type: str
    default: www-data
  worker_processes:
    description: nginx worker processes.
    type: int
    default: 2
  pid_path:
    description: nginx pid file.
    type: path
    default: /run/dgxspark-ds4-proxy.pid
  client_max_body_size:
    description: Largest request body (long-context prompts are large).
    type: str
    default: 64m
  read_timeout_s:
    description: Upstream read/send timeout in seconds (long generations).
    type: int
    default: 3600
  tls_cert_path:
    description:
      - The front's certificate (PEM, leaf first, then intermediates) on the host. Set, the port answers TLS only
        (TLSv1.2 and 1.3; a plain HTTP request gets a 400 and is never forwarded); its SHA-256 fingerprint is written
        into O(path) as a comment, so a renewed certificate changes the file and the role reloads nginx.
      - Unset = plain HTTP (C(ds4_tls=false), the explicit choice).
    type: path
  tls_key_path:
    description: The certificate's private key on the host (0600, root; read by the nginx master). Required with O(tls_cert_path).
    type: path
  nginx_bin:
    description: nginx binary used for C(nginx -t). Default found on PATH (C(/usr/sbin/nginx)).
    type: path
  validate:
    description: Run C(nginx -t) on the new files before replacing the old ones.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Proxy configuration
  dgxspark.ds4.api_proxy_config:
    public_port: 8000
    upstream_port: 8001
    endpoints:
      - {path: /v1/models, auth: true, methods: [GET]}
      - {path: /v1/chat/completions, auth: true, methods: [POST]}
      - {path: /health, auth: false, methods: [GET]}
    api_keys: "{{ ds4_api_keys }}"
  no_log: true
"""

RETURN = r"""
conf_changed:
  description: Whether the main configuration changed.
  type: bool
  returned: always
keys_changed:
  description: Whether the keys file changed (its content is never returned).
  type: bool
  returned: always
"""

import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.ds4.plugins.module_utils._security.api_exposure import (
    DEFAULT_ENDPOINTS,
    ExposureError,
    render_proxy_conf,
    render_proxy_keys,
)
from ansible_collections.dgxspark.ds4.plugins.module_utils._security.tls_plan import pem_fingerprint


def _read(path):
    try:
        with open(path, 'r') as f:
            return f.read()
    except (IOError, OSError):
        return None


def _mode_ok(path, mode):
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_mode & 0o7777) == mode and st.st_uid == 0 and st.st_gid == 0


def _write(module, path, content, mode):
    fd, tmp = tempfile.mkstemp(prefix='.ds4proxy.', dir=os.path.dirname(path))
    with os.fdopen(fd, 'w') as f:
        f.write(content)
    os.chmod(tmp, mode)
    module.atomic_move(tmp, path, unsafe_writes=False)
    os.chmod(path, mode)
    os.chown(path, 0, 0)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', choices=['present', 'absent'], default='present'),
            path=dict(type='path', default='/etc/dgxspark-ds4/proxy/nginx.conf'),
            keys_path=dict(type='path', default='/etc/dgxspark-ds4/proxy/keys.conf', no_log=False),
            listen=dict(type='list', elements='str', default=['0.0.0.0']),
            public_port=dict(type='int'),
            upstream_host=dict(type='str', default='127.0.0.1'),
            upstream_port=dict(type='int'),
            health_gate=dict(type='path'),
            pass_client_key=dict(type='bool', default=False),
            endpoints=dict(type='list', elements='dict'),
            api_keys=dict(type='list', elements='str', default=[], no_log=True),
            upstream_api_key=dict(type='str', default='', no_log=True),
            user=dict(type='str', default='www-data'),
            worker_processes=dict(type='int', default=2),
            pid_path=dict(type='path', default='/run/dgxspark-ds4-proxy.pid'),
            client_max_body_size=dict(type='str', default='64m'),
            read_timeout_s=dict(type='int', default=3600),
            tls_cert_path=dict(type='path'),
            tls_key_path=dict(type='path', no_log=False),
            nginx_bin=dict(type='path'),
            validate=dict(type='bool', default=True),
        ),
        required_if=[('state', 'present', ('public_port', 'upstream_port'))],
        required_together=[('tls_cert_path', 'tls_key_path')],
        supports_check_mode=True,
    )
    p = module.params
    old_conf = _read(p['path'])
    old_keys = _read(p['keys_path'])
    if p['state'] == 'absent':
        changed = old_conf is not None or old_keys is not None
        if changed and not module.check_mode:
            for path in (p['path'], p['keys_path']):
                if os.path.exists(path):
                    os.unlink(path)
        module.exit_json(changed=changed, conf_changed=old_conf is not None, keys_changed=old_keys is not None,
                         diff={'before': old_conf or '', 'after': ''})

    endpoints = p['endpoints'] if p['endpoints'] is not None else [dict(e) for e in DEFAULT_ENDPOINTS]
    spec = dict(listen=p['listen'], public_port=p['public_port'], upstream_host=p['upstream_host'],
                upstream_port=p['upstream_port'], endpoints=endpoints, keys_path=p['keys_path'], pid_path=p['pid_path'],
                user=p['user'], worker_processes=p['worker_processes'], client_max_body_size=p['client_max_body_size'],
                read_timeout_s=p['read_timeout_s'])
    if p['health_gate']:
        spec['health_gate'] = p['health_gate']
    if p['pass_client_key']:
        spec['pass_client_key'] = True
    if p['tls_cert_path']:
        spec['tls'] = {'cert_path': p['tls_cert_path'], 'key_path': p['tls_key_path'],
                       'fingerprint': pem_fingerprint(_read(p['tls_cert_path']) or '')}
    try:
        conf = render_proxy_conf(spec)
        keys = render_proxy_keys(p['api_keys'], p['upstream_api_key'] or '')
    except ExposureError as exc:
        module.fail_json(msg='dgxspark.ds4.api_proxy_config: bad input:\n- ' + '\n- '.join(exc.errors), errors=exc.errors)
    conf_changed = old_conf != conf or not _mode_ok(p['path'], 0o644)
    keys_changed = old_keys != keys or not _mode_ok(p['keys_path'], 0o600)
    result = dict(changed=conf_changed or keys_changed, conf_changed=conf_changed, keys_changed=keys_changed,
                  diff={'before': old_conf or '', 'after': conf, 'before_header': p['path'], 'after_header': p['path']})
    if module.check_mode or not result['changed']:
        module.exit_json(**result)

    conf_dir = os.path.dirname(p['path'])
    for d in sorted(set([conf_dir, os.path.dirname(p['keys_path'])])):
        if not os.path.isdir(d):
            module.fail_json(msg='directory %s does not exist (the role creates it)' % d)
    if p['validate']:
        nginx = p['nginx_bin'] or module.get_bin_path('nginx', required=True, opt_dirs=['/usr/sbin'])
        tmpdir = tempfile.mkdtemp(prefix='.ds4proxy-check.', dir=conf_dir)
        try:
            os.chmod(tmpdir, 0o700)
            tkeys = os.path.join(tmpdir, 'keys.conf')
            tconf = os.path.join(tmpdir, 'nginx.conf')
            with open(tkeys, 'w') as f:
                f.write(keys)
            os.chmod(tkeys, 0o600)
            with open(tconf, 'w') as f:
                f.write(conf.replace('include %s;' % p['keys_path'], 'include %s;' % tkeys))
            rc, out, err = module.run_command([nginx, '-t', '-q', '-c', tconf])
            if rc != 0:
                text = (err or out).strip().replace(tmpdir, '<check dir>')
                for secret in list(p['api_keys']) + [p['upstream_api_key'] or '']:
                    if secret:
                        text = text.replace(secret, '********')
                module.fail_json(msg='nginx -t refused the rendered proxy configuration (nothing replaced): %s' % text)
        finally:
            shutil.rmtree(tmpdir, ignore_errors=True)
    # Keys first: the main file includes them.
    if keys_changed:
        _write(module, p['keys_path'], keys, 0o600)
    if conf_changed:
        _write(module, p['path'], conf, 0o644)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
