# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make demo` / `make demo-down`: two SIMULATED Sparks on this machine, deployed by the real site.yml.

  check  Docker (and debootstrap, which builds the node image) present and answering; else what to install.
  up     the Molecule scenario `default` up to converge (node containers ds4-demo-spark1/2 with systemd and their own
         Docker engine, the vLLM simulator image, then playbooks/site.yml with molecule/demo/inventory), a chat
         completion through the endpoint, and the commands to try next.
  down   the demo's containers and network removed (molecule destroy).

The engine is tests/vllm_sim, a stand-in that speaks vLLM's CLI, logs, HTTP API and metrics and runs no model: the
demo shows the collection at work (deploy, status, switch, rollback, bench, doctor), not DeepSeek-V4-Flash. Stdlib
only (`check` runs before the venv exists). molecule/default/tests/test_demo.py and test_zz_ops.py run next_steps()
as printed.
"""


import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
INVENTORY = 'molecule/demo/inventory'
# The Molecule scenario `make demo` brings up: CI's main scenario runs on the demo inventory, so the demo is what CI tests.
SCENARIO = 'default'
HEAD = '10.77.100.11'
ENDPOINT = 'http://%s:8000' % HEAD
MODEL = 'deepseek-v4-flash'
# The demo's API key: the test deployment's (molecule/resources/inventory/group_vars/spark/test.yml), a fixed
# test value and no secret, since the demo endpoint is reachable from this machine only.
TEST_VARS = os.path.join(ROOT, 'molecule', 'resources', 'inventory', 'group_vars', 'spark', 'test.yml')
PLAYBOOK = '.venv/bin/ansible-playbook'
BANNER = ('*** dgxspark.ds4 demo: the engine is the vLLM SIMULATOR (tests/vllm_sim), not vLLM, and the two "Sparks" '
          'are containers on this machine. Nothing here ran a model or touched a GPU. ***')


def api_key():
    """The first of ds4_api_keys in the shared test vars (read without PyYAML: one `  - value` line after the key)."""
    with open(TEST_VARS) as fh:
        lines = fh.read().splitlines()
    start = lines.index('ds4_api_keys:')
    return lines[start + 1].strip().lstrip('-').strip()


def next_steps():
    """(what it shows, argv) for each command the demo tells the user to try, run from the repository root."""
    inv = ['-i', INVENTORY]
    return [
        ('state of both ranks and the endpoint', [PLAYBOOK, 'playbooks/status.yml'] + inv),
        ('switch to the throughput recipe (worker first, through readiness)',
         [PLAYBOOK, 'playbooks/switch.yml'] + inv + ['-e', 'ds4_profile=throughput']),
        ('back to the previous recipe', [PLAYBOOK, 'playbooks/rollback.yml'] + inv),
        ('the benchmark (tok/s per stream and concurrency)', [PLAYBOOK, 'playbooks/bench.yml'] + inv),
        ('read-only diagnosis of both nodes', [PLAYBOOK, 'playbooks/doctor.yml'] + inv),
    ]


def step(name):
    """argv of the printed next step whose playbook is playbooks/<name>.yml."""
    return [argv for _what, argv in next_steps() if 'playbooks/%s.yml' % name in argv][0]


def chat(prompt='Say hello to a new dgxspark.ds4 user.', timeout=60):
    """One chat completion through the endpoint with the demo key -> (seconds, answer text)."""
    body = json.dumps({'model': MODEL, 'messages': [{'role': 'user', 'content': prompt}], 'max_tokens': 32,
                       'temperature': 0}).encode()
    req = urllib.request.Request(ENDPOINT + '/v1/chat/completions', data=body, method='POST',
                                 headers={'Content-Type': 'application/json', 'Authorization': 'Bearer ' + api_key()})
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        answer = json.loads(resp.read().decode())
    return time.monotonic() - t0, answer['choices'][0]['message']['content']


def check():
    """None when this machine can run the demo, else the message that says what to install."""
    missing = []
    if not shutil.which('docker'):
        missing.append('Docker is not installed: `sudo apt-get install docker.io` (Debian/Ubuntu; or Docker Engine from '
                       'docs.docker.com), then `sudo systemctl start docker`')
    elif subprocess.call(['docker', 'info'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) != 0:
        missing.append('Docker is installed but `docker info` fails: start it (`sudo systemctl start docker`, or '
                       '`sudo dockerd &` without systemd) and run make demo as root or as a member of the docker group')
    if not (shutil.which('debootstrap') or os.path.exists('/usr/sbin/debootstrap')):
        missing.append('debootstrap builds the node image: `sudo apt-get install debootstrap zstd`')
    if not missing:
        return None
    return 'make demo needs, on this machine:\n' + '\n'.join('  - ' + m for m in missing) + \
        '\n(`sudo make bootstrap` installs and starts all of it on Debian 12.)'


def _molecule(action):
    return subprocess.call([sys.executable, os.path.join(ROOT, 'tests', 'harness', 'molecule_parallel.py'),
                            '--jobs', '1', '--stream', '--action', action, SCENARIO], cwd=ROOT)


def _started_at():
    """When `make demo` started (DS4_DEMO_T0, epoch seconds, set by the Makefile), else now."""
    try:
        return float(os.environ['DS4_DEMO_T0'])
    except (KeyError, ValueError):
        return time.time()


def up():
    print(BANNER, flush=True)
    t0 = _started_at()
    if _molecule('converge') != 0:
        print('make demo: the deploy failed (log above, also .cache/molecule-logs/default.log); `make demo-down` cleans up.')
        return 1
    took, answer = chat()
    first = time.time() - t0
    print('\n' + BANNER)
    print('Endpoint (OpenAI API, from this machine only): %s/v1   model: %s' % (ENDPOINT, MODEL))
    print('API key: %s' % api_key())
    print('curl %s/v1/chat/completions -H "Authorization: Bearer %s" -H "Content-Type: application/json" \\\n'
          "  -d '{\"model\": \"%s\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}'"
          % (ENDPOINT, api_key(), MODEL))
    print('Chat completion (%.2f s): %s' % (took, answer))
    print('From `make demo` to this first answer: %.0f s' % first)
    print('Try next, from the repository root:')
    for what, argv in next_steps():
        print('  %-60s # %s' % (' '.join(argv), what))
    print('make demo-down removes the demo (both containers and the network).')
    return 0


def down():
    return _molecule('destroy')


def main(argv):
    action = argv[1] if len(argv) > 1 else 'up'
    if action == 'check':
        print(BANNER, flush=True)
        msg = check()
        if msg:
            print(msg, file=sys.stderr)
            return 1
        return 0
    if action == 'up':
        return up()
    if action == 'down':
        return down()
    print('usage: demo.py check|up|down', file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
