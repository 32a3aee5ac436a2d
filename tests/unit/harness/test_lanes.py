# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/harness/lanes.py: the lanes `make checks` and `make molecule` run on."""


import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'harness'))
import lanes  # noqa: E402  pylint: disable=wrong-import-position


def _lanes(tmp_path, scripts, jobs):
    return lanes.Lanes(list(scripts), jobs, command=lambda name: ['sh', '-c', scripts[name]], log_dir=str(tmp_path))


def test_jobs_run_side_by_side_and_each_result_is_kept(tmp_path, capsys):
    # Each job marks that it started, then waits (up to 10 s) for the other's mark: one after the other, the first
    # would time out and fail; side by side both pass.
    wait = 'touch %s/{me}.up; i=0; while [ ! -e %s/{other}.up ]; do i=$((i+1)); [ $i -gt 200 ] && exit 9; ' \
           'sleep 0.05; done; echo {me}' % (tmp_path, tmp_path)
    scripts = {'a': wait.format(me='a', other='b'), 'b': wait.format(me='b', other='a')}
    run = _lanes(tmp_path, scripts, 2)
    results = run.run()
    assert run.failed() == [], capsys.readouterr().out
    assert sorted(results) == ['a', 'b']
    assert (tmp_path / 'a.log').read_text() == 'a\n'
    out = capsys.readouterr().out
    assert 'TIMING a ' in out and 'TIMING b ' in out and '2 jobs, 2 at once' in out


def test_one_lane_runs_in_order_and_a_failure_prints_its_log_whole(tmp_path, capsys):
    scripts = {'first': 'echo one; exit 3', 'second': 'echo two'}
    run = _lanes(tmp_path, scripts, 1)
    run.run()
    assert run.failed() == ['first']
    out = capsys.readouterr().out
    assert out.index('--- first') < out.index('--- second')
    assert 'FAILED (rc 3)' in out
    assert '=== log of the failed job first' in out and 'one\n' in out and 'FAILED: first' in out


def test_longest_first_unknown_before_known():
    assert lanes.longest_first(['lint', 'new', 'unit', 'integration'], {'integration': 330, 'unit': 115, 'lint': 42}) \
        == ['new', 'integration', 'unit', 'lint']


def test_weights_recorded_after_a_run(tmp_path):
    path = str(tmp_path / 'sub' / 't.json')
    lanes.save_weights(path, {'unit': 1}, {'lint': (0, 12.34)})
    with open(path) as fh:
        assert json.load(fh) == {'unit': 1, 'lint': 12.3}
    assert lanes.load_weights(path, {'unit': 5, 'x': 2}) == {'unit': 1, 'lint': 12.3, 'x': 2}
    assert lanes.load_weights(str(tmp_path / 'missing.json'), {'x': 2}) == {'x': 2}


def test_checks_follow_the_scenarios_in_the_same_lanes(tmp_path, monkeypatch):
    # `make suite`: molecule_parallel.runner(..., then=checks) queues every scenario before any check, runs each
    # check through make, and keeps the two kinds' logs apart.
    import molecule_parallel  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(molecule_parallel, 'all_scenarios', lambda: ['default', 'drills', 'model'])
    monkeypatch.setenv('MAKE', 'make')
    run = molecule_parallel.runner(['drills', 'default', 'model'], 3, '/venv/bin/molecule', 'test',
                                   then=['integration-sim', 'unit'])
    assert run.queue == ['drills', 'default', 'model', 'integration-sim', 'unit']
    assert run.command('unit') == ['make', '--no-print-directory', 'unit']
    assert run.command('integration-sim') == ['make', '--no-print-directory', 'integration-sim']
    assert run.command('model')[:2] == ['flock', '/tmp/ds4-molecule-model.lock'] and run.command('model')[-2:] == ['-s', 'model']
    assert run.log_dir('unit') == molecule_parallel.CHECK_LOG_DIR and run.log_dir('model') == molecule_parallel.LOG_DIR
    assert run.env('model')['DS4_MOLECULE_PREFIX'] == 'ds4-model-' and run.env('unit') == dict(os.environ)
    assert (run.label('unit'), run.label('model'), run.label('')) == ('', 'molecule:', 'suite:')
    suite = molecule_parallel.runner(['drills', 'model'], 3, '/venv/bin/molecule', 'test', then=['unit', 'lint'],
                                     first='node-image', free=['lint'])
    assert suite.queue == ['node-image', 'lint', 'drills', 'model', 'unit']
    assert suite.command('node-image') == ['make', '--no-print-directory', 'node-image']
    assert suite.log_dir('node-image') == molecule_parallel.CHECK_LOG_DIR
    alone = molecule_parallel.runner(['model'], 1, '/venv/bin/molecule', 'test')
    assert alone.queue == ['model'] and alone.label('') == 'molecule:'


def test_a_label_and_log_dir_per_job(tmp_path, capsys):
    scripts = {'s': 'echo scenario', 'c': 'echo check'}
    run = lanes.Lanes(['s', 'c'], 1, command=lambda name: ['sh', '-c', scripts[name]],
                      log_dir=lambda name: str(tmp_path / ('m' if name == 's' else 'k')),
                      label=lambda name: 'molecule:' if name == 's' else '')
    run.run()
    assert (tmp_path / 'm' / 's.log').read_text() == 'scenario\n' and (tmp_path / 'k' / 'c.log').read_text() == 'check\n'
    out = capsys.readouterr().out
    assert 'TIMING molecule:s ' in out and 'TIMING c ' in out


def test_each_job_reports_the_cpu_of_its_whole_process_tree(tmp_path, capsys):
    # 'busy' burns ~0.4 s of CPU in a grandchild (sh -> python3), 'idle' sleeps as long: the CPU figure counts the
    # descendants a job waited for, and not the wall time.
    burn = '%s -c "import time; t = time.process_time()\nwhile time.process_time() - t < 0.4: pass"' % sys.executable
    run = _lanes(tmp_path, {'busy': burn, 'idle': 'sleep 0.4'}, 2)
    run.run()
    assert run.failed() == []
    assert run.cpu['busy'] >= 0.35 and run.cpu['idle'] < 0.1, run.cpu
    out = capsys.readouterr().out
    assert '(CPU ' in [ln for ln in out.splitlines() if ln.startswith('TIMING busy')][0]
    assert re.search(r"TIMING all .* the machine's \d+ CPUs \d+ % busy", out), out


def test_the_first_job_runs_beside_the_free_ones_and_the_rest_wait_for_it(tmp_path, capsys):
    # `make suite --first node-image --free lint sanity`: the images build while lint runs; the scenario starts only
    # once they are there. `first` waits (up to 10 s) for lint's mark: were lint queued after it, it would fail.
    # The scenario checks that first's mark exists when it starts.
    scripts = {'img': 'i=0; while [ ! -e %s/lint.up ]; do i=$((i+1)); [ $i -gt 200 ] && exit 9; sleep 0.05; done; '
                      'sleep 0.3; touch %s/img.done' % (tmp_path, tmp_path),
               'lint': 'touch %s/lint.up' % tmp_path,
               'scen': 'test -e %s/img.done' % tmp_path}
    run = lanes.Lanes(['scen', 'lint'], 3, command=lambda name: ['sh', '-c', scripts[name]], log_dir=str(tmp_path),
                      first='img', free=['lint'])
    assert run.queue == ['img', 'lint', 'scen']
    run.run()
    assert run.failed() == [], capsys.readouterr().out


def test_a_failed_first_job_fails_the_waiting_ones_unrun(tmp_path, capsys):
    scripts = {'img': 'exit 4', 'lint': 'true', 'scen': 'touch %s/ran' % tmp_path}
    run = lanes.Lanes(['scen', 'lint'], 2, command=lambda name: ['sh', '-c', scripts[name]], log_dir=str(tmp_path),
                      first='img', free=['lint'])
    run.run()
    out = capsys.readouterr().out
    assert run.failed() == ['img', 'scen'] and not (tmp_path / 'ran').exists(), out
    assert 'TIMING scen ' in out and 'not run: img failed' in out


def test_a_beside_job_runs_in_a_lane_of_its_own_from_the_start(tmp_path, capsys):
    # `make suite --beside integration-sim`: with one lane, the beside job runs while the first job and then the
    # scenario take that lane. It waits (up to 10 s) for the scenario's mark, which comes only after the first job,
    # which itself waits for the beside job's mark: queued in the lane, either order would time out.
    wait = 'i=0; while [ ! -e %s/{mark} ]; do i=$((i+1)); [ $i -gt 200 ] && exit 9; sleep 0.05; done; ' % tmp_path
    scripts = {'sim': 'touch %s/sim.up; ' % tmp_path + wait.format(mark='scen.up') + 'echo sim',
               'img': wait.format(mark='sim.up') + 'touch %s/img.done' % tmp_path,
               'scen': 'test -e %s/img.done && touch %s/scen.up' % (tmp_path, tmp_path)}
    run = lanes.Lanes(['scen', 'sim'], 1, command=lambda name: ['sh', '-c', scripts[name]], log_dir=str(tmp_path),
                      first='img', beside=['sim'])
    assert run.queue == ['img', 'scen'] and run.beside == ['sim']
    results = run.run()
    out = capsys.readouterr().out
    assert run.failed() == [] and sorted(results) == ['img', 'scen', 'sim'], out
    assert (tmp_path / 'sim.log').read_text() == 'sim\n'
    assert '3 jobs, 1 at once (and sim beside)' in out, out
