# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/plugin_utils/template_cache.py: each template compiled once, shared by the run's workers and the runs after
it, never given for a compile that would differ, and kept only where nobody else can write.

Each case runs in its own Python process (install() patches jinja2.Environment for the process), with its own local
temporary directory, as ansible-playbook's main process is; a worker is an os.fork() of it, as ansible-playbook's
are."""


import json
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
LINK_ROOT = os.path.join(REPO, '.collections')

SETUP = r'''
import json, os, sys
from ansible.plugins.loader import init_plugin_loader
init_plugin_loader([%r])
from ansible import constants as C
from ansible.template import Templar, trust_as_template
from ansible.parsing.dataloader import DataLoader
from ansible._internal._templating._jinja_bits import _TemplateCompileContext
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import template_cache as tc
import jinja2

def render(templates, variables):
    templar = Templar(loader=DataLoader(), variables=variables)
    return [templar.template(trust_as_template(t)) for t in templates]

def in_worker(fn):
    """fn() in a forked child (a worker of this 'run'): its JSON result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, json.dumps(fn()).encode())
        os._exit(0)
    os.close(w)
    data = b''
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.waitpid(pid, 0)
    return json.loads(data)
''' % LINK_ROOT

TEMPLATES = ["{{ ds4_effective['pair']['group'] | default('spark') }}", "{{ port | int + 1 }}",
             "{% for h in hosts %}{{ h }}:{{ port }} {% endfor %}", "{{ (hosts | length > 1) and port == 8000 }}"]
VARS = {'ds4_effective': {'pair': {'group': 'spark'}}, 'port': 8000, 'hosts': ['a', 'b']}


def _python(code, tmp_path):
    env = dict(os.environ, ANSIBLE_LOCAL_TEMP=str(tmp_path), ANSIBLE_COLLECTIONS_PATH=LINK_ROOT)
    proc = subprocess.run([sys.executable, '-c', SETUP + code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_template_one_worker_compiled_is_read_by_the_next_not_compiled_again(tmp_path):
    result = _python(r'''
templates, variables = %r, %r
plain = in_worker(lambda: render(templates, variables))               # not installed: the reference output
assert tc.install() is True
def worker():
    out = render(templates, variables)
    return {'out': out, 'stats': dict(tc.STATS), 'files': sorted(os.listdir(tc.cache_dir()))}
first, second = in_worker(worker), in_worker(worker)
print(json.dumps({'first': first, 'second': second, 'plain': plain}))
''' % (TEMPLATES, VARS), tmp_path)
    assert result['first']['out'] == result['second']['out'] == result['plain']
    assert result['plain'] == ['spark', 8001, 'a:8000 b:8000 ', True]
    # every template compiled by the first worker (it found the cache empty), none by the second: it read them all
    assert result['first']['stats']['compiled'] >= len(TEMPLATES) and result['first']['stats']['shared'] == 0
    assert result['second']['stats']['compiled'] == 0 and result['second']['stats']['shared'] >= len(TEMPLATES)
    assert len(result['second']['files']) == result['first']['stats']['compiled']


def test_a_compile_that_reads_other_settings_is_never_given_another_ones_code(tmp_path):
    result = _python(r'''
tc.install()
source = "{% if true %}\nx{% endif %}\n  {{ 'a' ~ 'b' }}"
out = {}
for trim in (True, False):
    env = jinja2.Environment(trim_blocks=trim)
    out['trim=%s' % trim] = env.from_string(source).render()
env = jinja2.Environment()
keys = [tc.key(env, source, None, None, False),
        tc.key(jinja2.Environment(variable_start_string='[[', variable_end_string=']]'), source, None, None, False),
        tc.key(jinja2.Environment(trim_blocks=True), source, None, None, False),
        tc.key(env, source + ' ', None, None, False)]
print(json.dumps({'out': out, 'keys': keys, 'stats': tc.STATS}))
''', tmp_path)
    assert result['out'] == {'trim=True': 'x  ab', 'trim=False': '\nx\n  ab'}, result['out']
    assert result['stats']['compiled'] == 2                   # two settings: two compiles, neither given the other's code
    assert len(set(result['keys'])) == len(result['keys'])   # delimiters, whitespace handling and text each change the key


def test_ansible_cores_compile_time_escaping_leaves_a_template_without_a_backslash_alone_and_one_with_is_not_cached(tmp_path):
    """The one compile-time state of ansible-core's templating the cache's key cannot see (escape_backslashes, set per
    templating call): a template without a backslash compiles to the same code with it on or off, so it is cached; one
    with a backslash, whose code differs, is compiled each time and rendered as ansible-core renders it."""
    result = _python(r'''
import marshal
from ansible._internal._templating._jinja_bits import AnsibleEnvironment, _TemplateCompileContext
plain = %r + ["{{ x | regex_replace('a', 'b') }}", "{%% for i in [1, 2] %%}{{ i }}{%% endfor %%}"]
env = AnsibleEnvironment()
same = []
for source in plain:
    codes = []
    for escape in (True, False):
        with _TemplateCompileContext(escape_backslashes=escape):
            codes.append(marshal.dumps(env.compile(source)))
    same.append(codes[0] == codes[1])
slashed = "{{ 'a\\\\1' }}"
codes = []
for escape in (True, False):
    with _TemplateCompileContext(escape_backslashes=escape):
        codes.append(marshal.dumps(env.compile(slashed)))
reference = in_worker(lambda: render([slashed], {}))        # not installed: as ansible-core renders it
tc.install()
before = dict(tc.STATS)
rendered = render([slashed, slashed], {})
print(json.dumps({'same': same, 'slashed_differs': codes[0] != codes[1], 'before': before, 'after': tc.STATS,
                  'rendered': rendered, 'reference': reference}))
''' % (TEMPLATES,), tmp_path)
    assert result['same'] == [True] * (len(TEMPLATES) + 2)
    assert result['slashed_differs'] is True
    assert result['after'] == result['before']                # compiled twice, outside the cache both times
    assert result['rendered'] == result['reference'] * 2 and result['reference'] == ['a\\\\1']  # escaped: both kept


def test_an_unreadable_or_broken_cache_file_is_compiled_again(tmp_path):
    result = _python(r'''
tc.install()
templates, variables = %r, %r
render(templates, variables)                                 # fills the shared directory
directory = tc.cache_dir()
for name in os.listdir(directory):
    with open(os.path.join(directory, name), 'wb') as handle:
        handle.write(b'not marshal data')
def worker():
    tc._MEMO.clear()
    return {'out': render(templates, variables), 'stats': dict(tc.STATS)}
print(json.dumps(in_worker(worker)))
''' % (TEMPLATES, VARS), tmp_path)
    assert result['out'] == ['spark', 8001, 'a:8000 b:8000 ', True]
    assert result['stats']['shared'] == 0 and result['stats']['compiled'] >= 2 * len(TEMPLATES)


def test_a_later_run_reads_what_an_earlier_one_compiled(tmp_path):
    run = r'''
tc.install()
out = render(%r, %r)
print(json.dumps({'out': out, 'stats': tc.STATS, 'dir': tc.cache_dir(), 'run_dir': C.DEFAULT_LOCAL_TMP}))
''' % (TEMPLATES, VARS)
    first, second = _python(run, tmp_path), _python(run, tmp_path)
    assert first['out'] == second['out'] == ['spark', 8001, 'a:8000 b:8000 ', True]
    assert first['dir'] == second['dir'] == str(tmp_path / 'ds4-jinja-compiled')   # local_tmp's root, not the run's
    assert first['run_dir'] != second['run_dir']
    assert first['stats']['compiled'] >= len(TEMPLATES) and second['stats'] == {
        'compiled': 0, 'memo': second['stats']['memo'], 'shared': first['stats']['compiled']}


def test_a_directory_others_can_write_to_is_not_used_and_old_files_are_pruned(tmp_path):
    shared = tmp_path / 'ds4-jinja-compiled'
    shared.mkdir()
    shared.chmod(0o777)
    (shared / 'planted').write_bytes(b'x')
    result = _python(r'''
tc.install()
render(%r, %r)
old = os.path.join(tc.cache_dir(), 'old')
with open(old, 'wb') as handle:
    handle.write(b'x')
os.utime(old, (0, 0))
fresh = sorted(os.listdir(tc.cache_dir()))
removed = tc.prune(tc.cache_dir())
print(json.dumps({'dir': tc.cache_dir(), 'run_dir': C.DEFAULT_LOCAL_TMP, 'removed': removed, 'fresh': fresh,
                  'after': sorted(os.listdir(tc.cache_dir())), 'private': tc.private_dir(%r)}))
''' % (TEMPLATES, VARS, str(shared)), tmp_path)
    # world-writable: not this run's cache (anyone could plant code there); the run's own directory instead
    assert result['private'] is None and result['dir'] == os.path.join(result['run_dir'], 'ds4-jinja-compiled')
    assert sorted(os.listdir(str(shared))) == ['planted']
    assert result['removed'] == 1 and 'old' in result['fresh'] and 'old' not in result['after']
    assert len(result['after']) == len(result['fresh']) - 1 >= len(TEMPLATES)


def test_kept_json_is_computed_once_read_back_and_computed_again_when_unreadable(tmp_path, monkeypatch):
    """template_cache.kept_json (the config action's variable scan, the converge probes' role results): the first call
    computes and keeps the result in the cache's directory, a later one (another worker, a later run) reads it; a
    broken file is computed again and replaced; an unwritable directory only means computing each time."""
    from ansible_collections.dgxspark.ds4.plugins.plugin_utils import template_cache as tc
    monkeypatch.setattr(tc, "cache_dir", lambda: str(tmp_path / "cache"))
    calls = []

    def compute():
        calls.append(1)
        return {"known": ["a", "b"], "n": len(calls)}
    assert tc.kept_json("k-1.json", compute) == {"known": ["a", "b"], "n": 1}
    assert tc.kept_json("k-1.json", compute) == {"known": ["a", "b"], "n": 1} and len(calls) == 1
    (tmp_path / "cache" / "k-1.json").write_text("{not json")
    assert tc.kept_json("k-1.json", compute)["n"] == 2 and json.loads((tmp_path / "cache" / "k-1.json").read_text())["n"] == 2
    assert tc.kept_json("k-2.json", compute)["n"] == 3                     # another key, another result
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setattr(tc, "cache_dir", lambda: str(tmp_path / "file" / "x"))
    assert [tc.kept_json("k-1.json", compute)["n"] for dummy in range(2)] == [4, 5]


def test_keyed_name_holds_the_whole_key():
    """template_cache.keyed_name (the converge plan's kept hint of each node's records): the same key, the same name
    (another worker, a later run finds it); any part of the key changed (the host, its address, the roles), another."""
    import hashlib
    from ansible_collections.dgxspark.ds4.plugins.plugin_utils import template_cache as tc
    key = ["spark1", "10.0.0.1", "/var/lib/dgxspark-ds4/converge", ["host_prep", "firewall"]]
    name = tc.keyed_name("converge-plan-published", key)
    assert name == "converge-plan-published-%s.json" % hashlib.sha256(json.dumps(key).encode("utf-8")).hexdigest()[:16]
    assert tc.keyed_name("converge-plan-published", list(key)) == name
    others = [["spark2"] + key[1:], key[:1] + ["10.0.0.2"] + key[2:], key[:3] + [["host_prep"]]]
    assert len(set(tc.keyed_name("converge-plan-published", k) for k in others) | {name}) == 4
    assert tc.keyed_name("other", key) != name
