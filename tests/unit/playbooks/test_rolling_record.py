# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling operations read the pair's deployed record in one place (tasks/rolling.yml's block variables): the
clients' port and the head's engine URL from the record's launch slice (ds4_effective.launch as deployed), the
top-level copies (api_port, engine_url) only in a record written before the slice existed; rolling_out.yml and
rolling_back.yml read those variables and nothing else of the record."""


import base64
import json
import os

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
TASKS = os.path.join(REPO, 'playbooks', 'tasks')


def _block_vars():
    with open(os.path.join(TASKS, 'rolling.yml')) as handle:
        tasks = yaml.safe_load(handle)
    blocks = [t for t in tasks if 'block' in t and '_ds4_rolling_record_port' in (t.get('vars') or {})]
    assert len(blocks) == 1
    return blocks[0]['vars']


def _resolve(record):
    from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel
    from ansible.template import Templar, trust_as_template  # pylint: disable=import-outside-toplevel
    variables = dict((k, trust_as_template(v) if isinstance(v, str) else v) for k, v in _block_vars().items()
                     if k.startswith('_ds4_rolling_record'))
    if record is not None:
        variables['_ds4_rolling_record'] = {'content': base64.b64encode(json.dumps(record).encode()).decode()}
    templar = Templar(loader=DataLoader(), variables=variables)
    return tuple(templar.template(trust_as_template('{{ %s }}' % name))
                 for name in ('_ds4_rolling_record_port', '_ds4_rolling_record_engine_url'))


def test_the_launch_slice_wins_over_the_top_level_copy():
    record = {'api_port': 8000, 'engine_url': 'http://127.0.0.1:8001',
              'launch': {'public_port': 8888, 'engine_url': 'http://127.0.0.1:18888', 'vllm_port': 18888}}
    assert _resolve(record) == (8888, 'http://127.0.0.1:18888')


def test_a_record_from_before_the_launch_slice_and_no_record():
    assert _resolve({'api_port': 8000, 'engine_url': 'http://127.0.0.1:8001'}) == (8000, 'http://127.0.0.1:8001')
    assert _resolve({'api_port': 8000}) == (8000, '')
    assert _resolve(None) == ('', '')


def test_the_task_files_read_the_one_resolution():
    for name in ('rolling_out.yml', 'rolling_back.yml'):
        with open(os.path.join(TASKS, name)) as handle:
            text = handle.read()
        assert "['api_port']" not in text and "['engine_url']" not in text and 'from_json' not in text, name
        assert '_ds4_rolling_record_port' in text, name
