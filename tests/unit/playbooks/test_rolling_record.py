# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling operations read the pair's deployed record in one place (tasks/rolling.yml's block variables): the
clients' port and the head's engine URL from the record's launch slice (ds4_effective.launch as deployed), the
top-level copies (api_port, engine_url) only in a record written before the slice existed; rolling_out.yml and
rolling_back.yml read those variables and nothing else of the record."""


import json
import os
import subprocess
import sys

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
TASKS = os.path.join(REPO, 'playbooks', 'tasks')


def _block_vars():
    with open(os.path.join(TASKS, 'rolling.yml')) as handle:
        tasks = yaml.safe_load(handle)
    blocks = [t for t in tasks if 'block' in t and '_ds4_rolling_record_port' in (t.get('vars') or {})]
    assert len(blocks) == 1
    return blocks[0]['vars']


# Ansible's templating with the collection's filters (dgxspark.ds4.record_launch), in a child process: the plugin
# loader is set up there as ansible-playbook sets it up, and this process's imports stay as they are
_RESOLVE = r'''
import base64, json, sys
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template
init_plugin_loader([%r])
block_vars, records = json.loads(sys.stdin.read())
out = []
for record in records:
    variables = dict((k, trust_as_template(v) if isinstance(v, str) else v) for k, v in block_vars.items()
                     if k.startswith('_ds4_rolling_record'))
    if record is not None:
        variables['_ds4_rolling_record'] = {'content': base64.b64encode(json.dumps(record).encode()).decode()}
    templar = Templar(loader=DataLoader(), variables=variables)
    out.append([templar.template(trust_as_template('{{ %%s }}' %% name))
                for name in ('_ds4_rolling_record_port', '_ds4_rolling_record_engine_url')])
print(json.dumps(out))
''' % os.path.join(REPO, '.collections')


def _resolve(*records):
    """(port, engine URL) the block's variables give for each record (None: no record)."""
    proc = subprocess.run([sys.executable, '-c', _RESOLVE], cwd=REPO, input=json.dumps([_block_vars(), list(records)]),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [tuple(pair) for pair in json.loads(proc.stdout.strip().splitlines()[-1])]


def test_the_launch_slice_wins_over_the_top_level_copy():
    record = {'api_port': 8000, 'engine_url': 'http://127.0.0.1:8001',
              'launch': {'public_port': 8888, 'engine_url': 'http://127.0.0.1:18888', 'vllm_port': 18888}}
    assert _resolve(record) == [(8888, 'http://127.0.0.1:18888')]


def test_a_record_from_before_the_launch_slice_and_no_record():
    assert _resolve({'api_port': 8000, 'engine_url': 'http://127.0.0.1:8001'}, {'api_port': 8000}, None) == [
        (8000, 'http://127.0.0.1:8001'), (8000, ''), ('', '')]


def test_the_task_files_read_the_one_resolution():
    for name in ('rolling_out.yml', 'rolling_back.yml'):
        with open(os.path.join(TASKS, name)) as handle:
            text = handle.read()
        assert "['api_port']" not in text and "['engine_url']" not in text and 'from_json' not in text, name
        assert '_ds4_rolling_record_port' in text, name


def test_the_block_reads_the_record_through_the_one_reader():
    """rolling.yml holds no copy of the record rule: the filter dgxspark.ds4.record_launch is config_set's reader
    (launch_from_record) without the node's launch script."""
    from ansible_collections.dgxspark.ds4.plugins.filter.ops import record_launch  # pylint: disable=import-outside-toplevel
    from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import config_set  # pylint: disable=import-outside-toplevel
    block = _block_vars()
    assert block['_ds4_rolling_record_launch'].replace(' ', '') == '{{_ds4_rolling_record_json|dgxspark.ds4.record_launch}}'
    assert not [k for k, v in block.items() if '_ds4_rolling_record_json[' in str(v)]
    slice_ = {'public_port': 8888, 'engine_url': 'http://127.0.0.1:18888', 'vllm_port': 18888}
    for record in ({'api_port': 8000, 'launch': slice_, 'launch_script': '/x.sh'},
                   {'api_port': 8000, 'engine_url': 'http://127.0.0.1:8001', 'launch_script': '/x.sh'}, {}):
        assert record_launch(record) == config_set.launch_from_record(record, None)
    assert record_launch({'launch': slice_})['public_port'] == 8888
    assert record_launch({'api_port': 8000, 'launch_script': '/x.sh'})['public_port'] == 8000
    assert record_launch(None)['public_port'] is None
