#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: llama_benchy
short_description: Run llama-benchy against the endpoint, cell for cell as the seed's own llama-benchy runs
version_added: 0.2.0
description:
  - Runs the llama-benchy executable O(benchy) (installed by bench.yml into its own venv on the controller) once per
    context depth, with the pp/tg/depth/concurrency cells of the profile's seed llama-benchy table
    (C(plugins/module_utils/_bench/bench_benchy.py)), or seed 001's depth-0 cells for a profile without one.
  - The text corpus (O(corpus), files concatenated) is served by this module on 127.0.0.1 for the run, so llama-benchy
    downloads nothing; its cache lives in a temporary HOME removed afterwards, and C(HF_HUB_OFFLINE=1) keeps the
    tokenizer load off the network.
  - Returns the report (cells with the seed figures and ratios); bench.yml writes the JSON, markdown and plot with
    M(dgxspark.ds4.bench_report).
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
  - dgxspark.ds4.vllm_endpoint
  - dgxspark.ds4.vllm_endpoint.model
attributes:
  check_mode:
    support: full
    details: In check mode nothing runs; the command lines are returned.
  diff_mode:
    support: none
options:
  benchy:
    description: Path of the llama-benchy executable.
    type: path
    required: true
  tokenizer:
    description: Directory holding the model's C(tokenizer.json) (or the file itself) on this machine.
    type: path
    required: true
  corpus:
    description: Text files on this machine, concatenated into the corpus llama-benchy cuts its prompts from.
    type: list
    elements: path
    required: true
  profile:
    description: Profile name; selects the seed cells and figures.
    type: str
  version:
    description: The llama-benchy version O(benchy) runs (bench.yml installs it pinned), written into the report.
    type: str
    default: 0.4.0
  runs:
    description: Measured runs per cell (after one warm-up run).
    type: int
    default: 3
  cells:
    description: Cells to run instead of the profile's, each C({depth, concurrency}); O(pp) and O(tg) then apply.
    type: list
    elements: dict
  pp:
    description: Prompt tokens per request (default the seed table's, else 2048).
    type: int
  tg:
    description: Generated tokens per request (default the seed table's, else 128).
    type: int
  ca_file:
    description:
      - PEM CA bundle on this machine that signs the endpoint's certificate (an https O(url), the collection's TLS
        fronts). llama-benchy trusts it through C(SSL_CERT_FILE) (its aiohttp requests) and C(REQUESTS_CA_BUNDLE) (its
        model-list check); unset, the system's trust store. Refused when it does not exist.
    type: path
notes:
  - C(changed) is always false; the benchmark reads.
  - llama-benchy takes the API key only as a command-line argument (C(--api-key)); it is visible in the process list of
    the controller while the run lasts, and never in the task's output.
'''

EXAMPLES = r'''
- name: llama-benchy against the head, seed 001's cells
  dgxspark.ds4.llama_benchy:
    url: http://192.168.1.20:8000
    model: deepseek-v4-flash
    api_key: "{{ vllm_service_api_key }}"
    profile: long-context-1m
    benchy: /home/me/.cache/dgxspark-ds4/llama-benchy-0.4.0/bin/llama-benchy
    tokenizer: /home/me/ds4/bench/tokenizer-long-context-1m
    corpus: [/home/me/books/1661-0.txt]
  delegate_to: localhost
'''

RETURN = r'''
report:
  description: Settings, method, cells (llama-benchy's pp/tg/TTFT means and std per cell, the seed figures, the ratios).
  returned: success
  type: dict
commands:
  description: The llama-benchy command lines (API key replaced by C(***)).
  returned: always
  type: list
  elements: list
'''

import json
import os
import shutil
import tempfile
import threading
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves import BaseHTTPServer
from ansible.module_utils.six.moves.urllib.parse import urlparse
from ansible_collections.dgxspark.ds4.plugins.module_utils._bench import bench_benchy


def _corpus_server(data):
    """An HTTP server on 127.0.0.1 answering GET /corpus.txt with data; returns (server, url)."""
    class Handler(BaseHTTPServer.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802  pylint: disable=invalid-name
            if self.path.split('?', 1)[0] != '/corpus.txt':
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header('Content-Type', 'text/plain; charset=utf-8')
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):  # pylint: disable=arguments-differ
            return

    server = BaseHTTPServer.HTTPServer(('127.0.0.1', 0), Handler)
    thread = threading.Thread(target=server.serve_forever)
    thread.daemon = True
    thread.start()
    return server, 'http://127.0.0.1:%d/corpus.txt' % server.server_address[1]


def _env(home, url, ca_file=None):
    env = dict(os.environ, HOME=home, HF_HUB_OFFLINE='1', TRANSFORMERS_OFFLINE='1', PYTHONUNBUFFERED='1')
    if ca_file:
        # aiohttp's default context (ssl.create_default_context) reads SSL_CERT_FILE; requests reads REQUESTS_CA_BUNDLE
        env.update(SSL_CERT_FILE=ca_file, REQUESTS_CA_BUNDLE=ca_file)
    hosts = ['127.0.0.1', 'localhost', urlparse(url).hostname or '']
    for name in ('NO_PROXY', 'no_proxy'):
        env[name] = ','.join([h for h in (env.get(name) or '').split(',') if h] + hosts)
    return env


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str', required=True),
            model=dict(type='str', required=True),
            api_key=dict(type='str', no_log=True),
            benchy=dict(type='path', required=True),
            tokenizer=dict(type='path', required=True),
            corpus=dict(type='list', elements='path', required=True),
            profile=dict(type='str'),
            version=dict(type='str', default=bench_benchy.BENCHY_VERSION),
            runs=dict(type='int', default=3),
            cells=dict(type='list', elements='dict'),
            pp=dict(type='int'),
            tg=dict(type='int'),
            ca_file=dict(type='path'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    reference, pp, tg, cells = bench_benchy.cells_for(p['profile'])
    if p['cells']:
        try:
            cells = [(int(c['depth']), int(c['concurrency'])) for c in p['cells']]
        except (KeyError, TypeError, ValueError):
            module.fail_json(msg='cells = %r: each cell needs integer depth and concurrency, e.g. {depth: 0, concurrency: 1}'
                             % (p['cells'],))
    pp = p['pp'] or pp
    tg = p['tg'] or tg
    if pp < 1 or tg < 2 or p['runs'] < 1 or any(d < 0 or c < 1 for d, c in cells):
        module.fail_json(msg='pp >= 1, tg >= 2, runs >= 1, depth >= 0 and concurrency >= 1 are needed (pp=%s tg=%s runs=%s '
                             'cells=%s)' % (pp, tg, p['runs'], cells))
    runs_plan = bench_benchy.invocations(cells)
    shown = [bench_benchy.argv(p['benchy'], p['url'], p['model'], p['tokenizer'], 'http://127.0.0.1:PORT/corpus.txt', pp, tg,
                               depth, conc, p['runs'], 'RESULT.json', api_key='***' if p['api_key'] else None)
             for depth, conc in runs_plan]
    if module.check_mode:
        module.exit_json(changed=False, commands=shown, msg='check mode: would run %d llama-benchy command(s)' % len(shown))
    tok_file = p['tokenizer'] if os.path.isfile(p['tokenizer']) else os.path.join(p['tokenizer'], 'tokenizer.json')
    problems = []
    if not os.path.isfile(tok_file):
        problems.append('tokenizer = %s: no tokenizer.json there. Fix: point ds4_benchy_tokenizer at the model directory '
                        'copy holding tokenizer.json (bench.yml fetches it from the head)' % p['tokenizer'])
    missing = [c for c in p['corpus'] if not os.path.isfile(c)]
    if missing or not p['corpus']:
        problems.append('corpus = %s: %s. Fix: give text files on the controller (ds4_benchy_corpus)'
                        % (p['corpus'], 'missing: %s' % ', '.join(missing) if missing else 'empty'))
    if p['ca_file'] and not os.path.isfile(p['ca_file']):
        problems.append('ca_file = %s does not exist on this machine. Fix: give the CA bundle that signs %s (the collection\'s '
                        'ca.crt in ds4_tls_ca_dir, or ds4_benchy_ca_file)' % (p['ca_file'], p['url']))
    if not os.access(p['benchy'], os.X_OK):
        problems.append('benchy = %s: not an executable. Fix: let bench.yml install llama-benchy %s into ds4_benchy_venv'
                        % (p['benchy'], p['version']))
    if problems:
        module.fail_json(msg='; '.join(problems))
    data = b''
    for path in p['corpus']:
        with open(path, 'rb') as handle:
            data += handle.read() + b'\n\n'
    started = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())
    home = tempfile.mkdtemp(prefix='ds4-benchy-')
    server, book_url = _corpus_server(data)
    cells_out = []
    errors = []
    try:
        for depth, conc in runs_plan:
            result = os.path.join(home, 'result-d%d.json' % depth)
            args = bench_benchy.argv(p['benchy'], p['url'], p['model'], p['tokenizer'], book_url, pp, tg, depth, conc,
                                     p['runs'], result, api_key=p['api_key'])
            # llama-benchy bounds each request itself (aiohttp total timeout 3600 s)
            rc, out, err = module.run_command(args, environ_update=_env(home, p['url'], p['ca_file']))
            if rc != 0 or not os.path.isfile(result):
                tail = '\n'.join((out + err).splitlines()[-15:])
                errors.append('depth %d: llama-benchy exited %d: %s' % (depth, rc, tail))
                continue
            with open(result) as handle:
                got = bench_benchy.parse_results(json.load(handle))
            if not got:
                errors.append('depth %d: llama-benchy wrote no result: %s' % (depth, '\n'.join(out.splitlines()[-15:])))
            cells_out += got
    finally:
        server.shutdown()
        server.server_close()
        shutil.rmtree(home, ignore_errors=True)
    report = bench_benchy.build_report(p['url'], p['model'], p['profile'], pp, tg, p['runs'], cells_out, reference,
                                       p['version'], started,
                                       time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()), p['tokenizer'],
                                       ', '.join(os.path.basename(c) for c in p['corpus']), errors)
    msg = '; '.join('c%d d%d pp %s tg %s tok/s' % (c['concurrency'], c['depth'], '%.1f' % c['pp_tps'] if c['pp_tps'] else '-',
                                                   '%.1f' % c['tg_tps'] if c['tg_tps'] else '-') for c in report['cells'])
    if errors:
        module.fail_json(msg='llama-benchy failed: %s' % ' | '.join(errors), report=report, commands=shown)
    module.exit_json(changed=False, msg=msg, report=report, markdown=bench_benchy.markdown_report(report), commands=shown)


if __name__ == '__main__':
    main()
