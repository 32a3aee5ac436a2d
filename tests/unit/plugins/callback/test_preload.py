# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/callback/preload.py: the collection's plugins imported once in the main process, nothing else changed.

Each case runs in its own Python process (ansible's plugin loaders are process-wide state): the loaders set up as
ansible-playbook sets them up (init_plugin_loader with the working tree's collection link), then preload()."""


import json
import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
LINK_ROOT = os.path.join(REPO, '.collections')
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')

SETUP = r'''
import json, sys
from ansible.plugins.loader import init_plugin_loader
init_plugin_loader([%r])
from ansible_collections.dgxspark.ds4.plugins.callback import preload
''' % LINK_ROOT


def _python(code):
    proc = subprocess.run([sys.executable, '-c', SETUP + code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _names(kind):
    return sorted(f[:-3] for f in os.listdir(os.path.join(REPO, 'plugins', kind)) if f.endswith('.py') and f != '__init__.py')


def test_every_filter_and_action_plugin_of_the_collection_is_imported_once_and_nothing_fails():
    result = _python(r'''
before = sorted(m for m in sys.modules if m.startswith('ansible_collections.dgxspark.ds4.plugins.'))
failed = preload.preload()
after = sorted(m for m in sys.modules if m.startswith('ansible_collections.dgxspark.ds4.plugins.'))
print(json.dumps({'before': before, 'after': after, 'failed': failed}))
''')
    assert result['failed'] == []
    filters = ['ansible_collections.dgxspark.ds4.plugins.filter.' + n for n in _names('filter')]
    actions = ['ansible_collections.dgxspark.ds4.plugins.action.' + n for n in _names('action')]
    assert len(filters) >= 5 and len(actions) >= 4  # the filters are grouped by subsystem, several a file
    assert not set(filters + actions) & set(result['before'])
    assert set(filters + actions) <= set(result['after']), sorted(set(filters + actions) - set(result['after']))


def test_the_other_collections_filter_the_tls_filters_call_is_imported_too():
    result = _python(r'''
name = 'ansible_collections.community.crypto.plugins.filter.x509_certificate_info'
before = name in sys.modules
failed = preload.preload()
print(json.dumps({'before': before, 'after': name in sys.modules, 'failed': failed}))
''')
    assert result == {'before': False, 'after': True, 'failed': []}


def test_a_plugin_that_cannot_be_imported_is_named_and_left_to_its_task():
    result = _python(r'''
from ansible.plugins.loader import action_loader
real = action_loader.get
def broken(name, *args, **kwargs):
    if name == 'dgxspark.ds4.vllm_ready':
        raise ImportError('No module named nowhere')
    return real(name, *args, **kwargs)
action_loader.get = broken
print(json.dumps({'failed': preload.preload()}))
''')
    assert result['failed'] == ['action dgxspark.ds4.vllm_ready: No module named nowhere']


@pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason='ansible-playbook not next to the test interpreter')
def test_a_run_with_it_enabled_prints_and_returns_what_a_run_without_it_does(tmp_path):
    play = tmp_path / 'play.yml'
    play.write_text('- hosts: localhost\n  gather_facts: false\n  tasks:\n'
                    '    - name: A collection filter in a worker\n      ansible.builtin.debug:\n'
                    '        msg: "{{ [\'10.0.0.0/8\', \'no network\'] | dgxspark.ds4.network_errors(\'ds4_api_allowed_networks\') }}"\n')
    with open(os.path.join(REPO, 'ansible.cfg')) as handle:
        shipped = handle.read()
    assert '\ncallbacks_enabled = dgxspark.ds4.preload\n' in shipped
    without = tmp_path / 'ansible.cfg'
    without.write_text(shipped.replace('\ncallbacks_enabled = dgxspark.ds4.preload\n', '\n'))
    outs = []
    for config in (os.path.join(REPO, 'ansible.cfg'), str(without)):
        env = dict(os.environ, ANSIBLE_CONFIG=config, ANSIBLE_NOCOLOR='1', ANSIBLE_COLLECTIONS_PATH=LINK_ROOT)
        env.pop('ANSIBLE_CALLBACKS_ENABLED', None)
        proc = subprocess.run([PLAYBOOK, '-i', 'localhost,', '-c', 'local', '-e', 'ansible_python_interpreter=%s' % sys.executable,
                               str(play)], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, timeout=300, check=False)
        outs.append((proc.returncode, proc.stdout))
    assert outs[0][0] == outs[1][0] == 0, outs
    assert outs[0][1] == outs[1][1]
    assert 'A collection filter in a worker' in outs[0][1] and 'ok=1' in outs[0][1]
