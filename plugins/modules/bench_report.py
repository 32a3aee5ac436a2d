#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
module: bench_report
short_description: Write a vllm_bench or llama_benchy report as JSON, markdown and a PNG plot with the seed reference
version_added: 0.1.0
description:
  - Writes C(<dest>/<name>.json) (the full report), C(<dest>/<name>.md) (method header and table) and
    C(<dest>/<name>.png) (decode tok/s against concurrency, measured aggregate and per-stream curves, the profile's
    seed reference figures beside them).
  - A M(dgxspark.ds4.llama_benchy) report (C(tool=llama-benchy)) gets its cell table (pp/tg tok/s, TTFT, seed figures,
    ratios) and a plot of pp and tg tok/s per cell beside the seed's.
  - A M(dgxspark.ds4.vllm_bench_mixed) report (C(tool=mixed)) gets its two figures and one row per request; no plot.
  - Meant for the controller (C(delegate_to) C(localhost)), where C(matplotlib) is installed from C(requirements.txt).
author:
  - dgxspark.ds4 contributors (@dgxspark)
extends_documentation_fragment:
  - dgxspark.ds4.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
options:
  report:
    description: The C(report) returned by M(dgxspark.ds4.vllm_bench), M(dgxspark.ds4.llama_benchy) or M(dgxspark.ds4.vllm_bench_mixed).
    type: dict
    required: true
  dest:
    description: Directory for the files (created 0755 when missing).
    type: path
    required: true
  name:
    description: Base name of the files.
    type: str
    required: true
  plot:
    description: Draw the PNG (needs matplotlib).
    type: bool
    default: true
requirements:
  - matplotlib (for O(plot=true))
'''

EXAMPLES = r'''
- name: Write the bench report on the controller
  dgxspark.ds4.bench_report:
    report: "{{ ds4_bench['report'] }}"
    dest: "{{ playbook_dir }}/../bench"
    name: "bench-throughput-20261122T101500Z"
  delegate_to: localhost
'''

RETURN = r'''
files:
  description: Paths written (or that would be written).
  returned: always
  type: list
  elements: str
markdown:
  description: The markdown text.
  returned: always
  type: str
'''

import json
import os
import tempfile
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.dgxspark.ds4.plugins.module_utils._bench import bench_benchy, bench_mixed, bench_plot, bench_sweep

try:
    import matplotlib  # noqa: F401  pylint: disable=unused-import
    HAS_MPL = True
    MPL_ERR = None
except ImportError:
    HAS_MPL = False
    MPL_ERR = traceback.format_exc()


def _write(module, path, data):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix='.ds4-')
    with os.fdopen(fd, 'w') as f:
        f.write(data)
    os.chmod(tmp, 0o644)
    module.atomic_move(tmp, path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            report=dict(type='dict', required=True),
            dest=dict(type='path', required=True),
            name=dict(type='str', required=True),
            plot=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if '/' in p['name'] or p['name'] in ('', '.', '..'):
        module.fail_json(msg='name must be a plain file name, got %r' % p['name'])
    if p['plot'] and not HAS_MPL and p['report'].get('tool') != 'mixed':
        module.fail_json(msg=missing_required_lib('matplotlib'), exception=MPL_ERR)
    base = os.path.join(p['dest'], p['name'])
    # one writer for every tool: the report says which made it; the mixed bench has two figures and no plot
    benchy = p['report'].get('tool') == 'llama-benchy'
    mixed = p['report'].get('tool') == 'mixed'
    plot = p['plot'] and not mixed
    files = [base + '.json', base + '.md'] + ([base + '.png'] if plot else [])
    md = (bench_mixed if mixed else bench_benchy if benchy else bench_sweep).markdown_report(p['report'])
    if module.check_mode:
        module.exit_json(changed=True, files=files, markdown=md)
    if not os.path.isdir(p['dest']):
        os.makedirs(p['dest'], 0o755)
    _write(module, base + '.json', json.dumps(p['report'], indent=2, sort_keys=True) + '\n')
    _write(module, base + '.md', md)
    if plot:
        (bench_plot.render_benchy_plot if benchy else bench_plot.render_plot)(p['report'], base + '.png')
    module.exit_json(changed=True, files=files, markdown=md, msg='wrote %s' % ', '.join(files))


if __name__ == '__main__':
    main()
