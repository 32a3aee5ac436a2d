# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The quality canary in the pair guard's loop (the node package's pairguard/ + quality_canary.py): one canary
at a time in a child job, the baseline from the head's first passing canary, a failure gating the pair out of rotation
at once with its evidence kept, a pair restart after canary_failures_to_restart in a row (worker first, through the
head's prestart; within the storm limit), skipped while saturated, a new head starting over. The child itself
(CanaryJob: fork, deadline, result file) runs for real."""


import json
import os
import threading
import time

from .test_pairguard import HEAD, SSH, WORKER, FakeSystemd
from .test_pairguard_memory import Clock, gate

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import bench_stats
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import cli as pg_cli
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import canary as pg_canary
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import pair as pg_pair
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import state as pg_state
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import watch as pg_watch
from ansible_collections.dgxspark.ds4.plugins.module_utils._node import quality_canary

IDLE = 'vllm:num_requests_running 0.0\nvllm:num_requests_waiting 0.0\nvllm:generation_tokens_total 10.0\n'
BUSY = 'vllm:num_requests_running 3.0\nvllm:num_requests_waiting 2.0\nvllm:generation_tokens_total 10.0\n'


def passing(ttft=0.2, tps=50.0):
    return {'ok': True, 'failures': [], 'requests': [{'request': 'decode', 'content': 'The sky is blue.'}],
            'skipped_checks': [], 'ttft_s': ttft, 'decode_tps': tps}


def garbled():
    return {'ok': False, 'ttft_s': 0.2, 'decode_tps': 50.0, 'skipped_checks': [],
            'requests': [{'request': 'arithmetic', 'prompt': 'What is 2+2? Answer with one word.', 'content': '我们 的 模型'}],
            'failures': [{'request': 'arithmetic', 'check': 'known_answer', 'excerpt': '我们 的 模型',
                          'detail': "expected 'four' or '4' at temperature 0, got '我们 的 模型'"}]}


class FakeJob(object):
    """CanaryJob's stand-in: done after `polls` polls, with `result`."""

    def __init__(self, result, polls=1):
        self.value, self.polls, self.killed = result, polls, False

    def poll(self):
        self.polls -= 1
        return self.polls <= 0

    def result(self):
        return self.value

    def kill(self):
        self.killed = True


class Canaries(object):
    """The job factory: hands out the next result of a script and counts the canaries started."""

    def __init__(self, *results):
        self.results, self.jobs = list(results), []

    def __call__(self, cfg):
        job = FakeJob(self.results.pop(0))
        self.jobs.append(job)
        return job


def watch(tmp_path, clock, canaries, metrics=None, **extra):
    box = {'text': IDLE}
    cfg = {'head_unit': HEAD, 'head_name': 'spark1', 'pair_state_file': str(tmp_path / 'pair-head.json'),
           'max_restarts': 3, 'window_s': 600, 'health_gate': str(tmp_path / 'health-gate'),
           'state_file': str(tmp_path / 'state.json'), 'textfile': str(tmp_path / 'guard.prom'),
           'evidence_dir': str(tmp_path / 'evidence'), 'metrics_url': 'http://127.0.0.1:8001/metrics',
           'canary': True, 'canary_url': 'https://127.0.0.1:8000', 'canary_model': 'deepseek-v4-flash',
           'canary_interval_s': 600, 'canary_retry_s': 60, 'canary_failures_to_restart': 2, 'canary_max_num_seqs': 8,
           'peers': [{'name': 'spark2', 'addr': '10.77.0.12', 'unit': WORKER, 'ssh': SSH}]}
    cfg.update(extra)
    pg_pair.save_record(cfg['pair_state_file'], {'workers': {'spark2': 'w1'}})

    def fetch():
        if box['text'] is None:
            raise OSError('Connection refused')
        return box['text']
    guard = pg_watch.Watch(cfg, runner=metrics or FakeSystemd(), clock=clock, fetch=fetch)
    guard.canary_job_factory = canaries
    return guard, box


def test_a_healthy_pair_sets_its_baseline_then_runs_every_interval_never_gated(tmp_path):
    clock, canaries = Clock(), Canaries(passing(), passing(ttft=0.25, tps=48.0))
    guard, _box = watch(tmp_path, clock, canaries)
    assert guard.step() is None and len(canaries.jobs) == 1      # the head serves: its first canary at once
    assert guard.step() is None and gate(tmp_path) is None
    d = guard.state.data
    assert d['canary_baseline'] == {'ttft_s': 0.2, 'decode_tps': 50.0, 'at': clock.now}
    assert d['canary_runs_total'] == 1 and d['last_canary_ok'] is True and d['canary_consecutive'] == 0
    clock.now += 599
    assert guard.step() is None and len(canaries.jobs) == 1       # not due yet
    clock.now += 1
    guard.step()
    guard.step()
    assert len(canaries.jobs) == 2 and d['canary_runs_total'] == 2 and d['canary_baseline']['ttft_s'] == 0.2
    prom = (tmp_path / 'guard.prom').read_text()
    for line in ('dgxspark_ds4_canary_enabled 1', 'dgxspark_ds4_canary_runs_total{result="pass"} 2',
                 'dgxspark_ds4_canary_runs_total{result="fail"} 0', 'dgxspark_ds4_canary_consecutive_failures 0',
                 'dgxspark_ds4_canary_last_run_timestamp_seconds %d' % clock.now, 'dgxspark_ds4_canary_ttft_seconds 0.25',
                 'dgxspark_ds4_canary_decode_tokens_per_second 48.0'):
        assert line in prom, (line, prom)
    assert len(bench_stats.parse_prometheus(prom)) == len([ln for ln in prom.splitlines() if ln and not ln.startswith('#')])


def test_a_garbled_pair_is_gated_at_once_evidence_kept_and_restarted_after_n_failures(tmp_path, capsys):
    clock, canaries = Clock(), Canaries(passing(), garbled(), garbled())
    systemd = FakeSystemd()
    guard, _box = watch(tmp_path, clock, canaries, metrics=systemd)
    guard.step()
    guard.step()                                                     # baseline taken, pair in rotation
    capsys.readouterr()
    clock.now += 600
    guard.step()
    assert guard.step() is None                                      # the first failure: gated, not restarted
    why = gate(tmp_path)
    assert why.startswith('quality canary failed (1 of 2 in a row before a pair restart): 1 check(s) failed: '
                          'arithmetic known_answer'), why
    out = capsys.readouterr().out
    assert 'pair out of rotation (health gate); evidence in %s' % str(tmp_path / 'evidence' / 'canary-') in out
    evidence = sorted(os.listdir(str(tmp_path / 'evidence')))
    assert len(evidence) == 1 and evidence[0].startswith('canary-')
    kept = tmp_path / 'evidence' / evidence[0]
    record = json.loads((kept / 'canary.json').read_text())
    assert record['requests'][0]['prompt'] == 'What is 2+2? Answer with one word.'
    assert record['requests'][0]['content'] == '我们 的 模型' and record['baseline']['ttft_s'] == 0.2
    assert record['url'] == 'https://127.0.0.1:8000' and (kept / 'metrics-before.txt').read_text() == IDLE
    assert (kept / 'metrics-after.txt').read_text() == IDLE
    # still out of rotation between two canaries; nothing restarted yet
    clock.now += 30
    assert guard.step() is None and gate(tmp_path) is not None and systemd.actions() == []
    # the retry after canary_retry_s fails again: the pair is restarted (the head; its prestart takes the worker first)
    clock.now += 30
    guard.step()
    assert guard.step() == 'restart'
    assert systemd.actions() == [('local', 'restart', HEAD)]
    d = guard.state.data
    assert d['restarts_by_cause'] == {'quality_canary': 1} and d['canary_consecutive'] == 2
    assert d['canary_failures_total'] == 2 and d['last_canary_evidence'].startswith(str(tmp_path / 'evidence' / 'canary-'))
    assert 'quality canary failed (2 of 2 in a row before a pair restart)' in capsys.readouterr().out
    prom = (tmp_path / 'guard.prom').read_text()
    assert 'dgxspark_ds4_canary_consecutive_failures 2' in prom and 'dgxspark_ds4_canary_runs_total{result="fail"} 2' in prom
    assert 'dgxspark_ds4_guard_restarts_total{cause="quality_canary"} 1' in prom


def test_the_restarted_head_starts_over_and_a_pass_puts_it_back_in_rotation(tmp_path, capsys):
    clock, canaries = Clock(), Canaries(passing(), garbled(), passing(ttft=0.3, tps=45.0))
    systemd = FakeSystemd()
    guard, _box = watch(tmp_path, clock, canaries, metrics=systemd, canary_failures_to_restart=1)
    guard.step()
    guard.step()
    clock.now += 600
    guard.step()
    assert guard.step() == 'restart'
    # the new head (a new invocation) serves: failures from 0, a new baseline from its first canary
    clock.now += 5
    assert guard.step() is None and len(canaries.jobs) == 3
    assert guard.state.data['canary_consecutive'] == 0 and guard.state.data['canary_baseline'] == {}
    assert gate(tmp_path) is None
    guard.step()
    assert guard.state.data['canary_baseline'] == {'ttft_s': 0.3, 'decode_tps': 45.0, 'at': clock.now}


def test_a_pass_after_a_failure_puts_the_pair_back_in_rotation_in_one_line(tmp_path, capsys):
    clock = Clock()
    guard, _box = watch(tmp_path, clock, Canaries(passing(), garbled(), passing()))
    guard.step()
    guard.step()
    clock.now += 600
    guard.step()
    guard.step()
    assert gate(tmp_path) is not None
    capsys.readouterr()
    clock.now += 60
    guard.step()
    guard.step()
    assert gate(tmp_path) is None and guard.state.data['canary_consecutive'] == 0
    assert capsys.readouterr().out.strip().endswith('quality canary passed again after 1 failure(s): pair back in rotation')


def test_a_slow_pair_fails_on_its_own_baseline(tmp_path):
    clock, canaries = Clock(), Canaries(passing(ttft=0.2, tps=50.0), passing(ttft=0.3, tps=10.0))
    guard, _box = watch(tmp_path, clock, canaries)
    guard.step()
    guard.step()
    clock.now += 600
    guard.step()
    guard.step()
    assert guard.state.data['canary_consecutive'] == 1
    assert 'decode decode_drift: decode 10.0 tok/s, below 15.0 tok/s' in gate(tmp_path)


def test_skipped_while_saturated_and_while_not_serving_never_a_failure(tmp_path):
    clock, canaries = Clock(), Canaries(passing())
    guard, box = watch(tmp_path, clock, canaries)
    box['text'] = None                                             # loading: no /metrics yet (connection refused)
    assert guard.step() is None and canaries.jobs == [] and guard.state.data['canary_skips_total'] == 0
    box['text'] = BUSY
    clock.now += 5
    assert guard.step() is None and canaries.jobs == []
    assert guard.state.data['canary_skips_total'] == 1
    assert guard.state.data['last_canary_skip'].startswith('saturated: 2 request(s) waiting in the queue')
    clock.now += 30
    assert guard.step() is None and canaries.jobs == []             # retried after canary_retry_s, not every poll
    box['text'] = IDLE
    clock.now += 30
    guard.step()
    assert len(canaries.jobs) == 1 and gate(tmp_path) is None
    assert 'dgxspark_ds4_canary_runs_total{result="skipped"} 1' in (tmp_path / 'guard.prom').read_text()


def test_a_new_head_kills_the_canary_of_the_old_one(tmp_path):
    clock = Clock()
    canaries = Canaries(passing(), passing())
    systemd = FakeSystemd()
    guard, _box = watch(tmp_path, clock, canaries, metrics=systemd)
    canaries.results[0] = passing()
    guard.step()
    first = canaries.jobs[0]
    first.polls = 100                                                 # still running
    systemd.units[('local', HEAD)]['InvocationID'] = 'h2'
    guard.step()
    assert first.killed and len(canaries.jobs) == 2


def test_the_guard_refuses_bad_canary_settings_before_it_watches(tmp_path, capsys):
    path = tmp_path / 'pairguard.json'
    path.write_text(json.dumps({'head_unit': HEAD, 'canary': True, 'canary_url': 'http://127.0.0.1:8000',
                                'canary_model': 'm', 'canary_failures_to_restart': 0}))
    assert pg_cli.main(['pairguard.py', 'watch', str(path)]) == 2
    assert 'vllm_service_canary_failures_to_restart = 0: must be a number from 1 to 20' in capsys.readouterr().err


def test_the_canary_child_writes_its_result_and_is_cut_at_its_deadline(tmp_path):
    cfg = {'state_file': str(tmp_path / 'state.json'), 'canary_timeout_s': 10}

    def work_ok():
        with open(str(tmp_path / 'canary-result.json'), 'w') as fh:
            json.dump(passing(), fh)
    job = pg_canary.CanaryJob(cfg, work=work_ok)
    assert job.wait(10) and job.ok() and job.result()['ok'] is True
    # the whole canary's bound: its four requests at their timeout, plus 10 s
    assert pg_canary.canary_deadline_s(cfg) == 50 and pg_canary.canary_deadline_s({'canary_timeout_s': 120}) == 490
    job = pg_canary.CanaryJob(cfg, work=lambda: time.sleep(30), limit=0.5)
    assert job.wait(20)
    result = job.result()
    assert not result['ok'] and result['failures'][0]['check'] == 'deadline'
    assert result['failures'][0]['detail'] == 'the canary did not finish within 0.5 s'
    # a child that fails without a result: the failure says so
    job = pg_canary.CanaryJob(cfg, work=lambda: 1 / 0)
    assert job.wait(10) and not job.result()['ok']
    assert job.result()['failures'][0]['detail'].startswith('the canary process failed (wait status')


def test_timings_are_judged_and_the_baseline_taken_on_an_idle_pair_only(tmp_path):
    """Under client load TTFT and the per-stream decode rate follow the batch (seed 000: 44 tok/s single stream,
    5.6 per stream at c16): only the answers count then."""
    clock, canaries = Clock(), Canaries(passing(ttft=0.9, tps=12.0), passing(ttft=0.2, tps=50.0),
                                        passing(ttft=1.5, tps=5.0), passing(ttft=4.0, tps=5.0))
    guard, box = watch(tmp_path, clock, canaries)
    box['text'] = 'vllm:num_requests_running 3.0\nvllm:num_requests_waiting 0.0\n'
    guard.step()
    guard.step()
    d = guard.state.data
    assert d['last_canary_ok'] is True and d['canary_baseline'] == {} and d['last_canary_load'] == 3
    box['text'] = IDLE
    clock.now += 600
    guard.step()
    guard.step()
    assert d['canary_baseline']['decode_tps'] == 50.0                 # the first idle canary sets it
    box['text'] = 'vllm:num_requests_running 5.0\nvllm:num_requests_waiting 0.0\n'
    clock.now += 600
    guard.step()
    guard.step()
    assert d['last_canary_ok'] is True and d['canary_consecutive'] == 0   # 5 tok/s under load: not judged
    box['text'] = IDLE
    clock.now += 600
    guard.step()
    guard.step()
    assert d['canary_consecutive'] == 1 and 'decode_drift' in d['last_canary_why']   # the same on an idle pair: drift


def test_a_new_head_reloads_the_canary_settings_the_switch_wrote(tmp_path, capsys):
    """switch.yml rewrites pairguard.json (another served name, another port) before it restarts the pair; the guard
    itself is restarted by the role's handler only after the new head serves: its canary must not ask the new head
    for the old model on the old port."""
    clock, canaries = Clock(), Canaries(*[passing()] * 4)
    systemd = FakeSystemd()
    guard, _box = watch(tmp_path, clock, canaries, metrics=systemd)
    path = tmp_path / 'pairguard.json'
    path.write_text(json.dumps(dict(guard.cfg, peers=[])))
    guard.cfg_path = str(path)
    guard.step()
    path.write_text(json.dumps(dict(guard.cfg, peers=[], canary_url='http://127.0.0.1:8888', canary_model='dspark')))
    guard.step()
    assert guard.cfg['canary_url'] == 'https://127.0.0.1:8000'        # the same head: nothing reloaded
    systemd.units[('local', HEAD)]['InvocationID'] = 'h2'
    guard.step()
    assert guard.cfg['canary_url'] == 'http://127.0.0.1:8888' and guard.cfg['canary_model'] == 'dspark'
    assert 'quality canary: settings reloaded for the new head (canary_model, canary_url)' in capsys.readouterr().out
    # a config that fails the check keeps what is in force
    path.write_text(json.dumps(dict(guard.cfg, peers=[], canary_url='', canary_model='x')))
    systemd.units[('local', HEAD)]['InvocationID'] = 'h3'
    guard.step()
    assert guard.cfg['canary_model'] == 'dspark'


def test_a_canary_is_judged_only_on_a_whole_pair_and_dropped_when_a_rank_restarted_under_it(tmp_path, capsys):
    """A worker killed while a canary runs: its requests fail because the engine died, not because the output decayed.
    While the worker is seen down (below down_polls) the finished canary waits; the worker's new invocation restarts
    the pair and the canary is dropped."""
    clock, canaries = Clock(), Canaries(passing(), garbled(), garbled())
    systemd = FakeSystemd()
    guard, _box = watch(tmp_path, clock, canaries, metrics=systemd, down_polls=3)
    guard.step()
    guard.step()
    clock.now += 600
    guard.step()                                                       # a canary starts on the whole pair
    job = canaries.jobs[-1]
    job.polls = 1                                                      # finished (garbled: its requests failed)
    systemd.units[(SSH[-1], WORKER)]['ActiveState'] = 'activating'   # the worker is down at this poll
    assert guard.step() is None and canaries.jobs[-1] is job
    assert guard.state.data['canary_failures_total'] == 0             # not judged while the pair is not whole
    systemd.units[(SSH[-1], WORKER)].update({'ActiveState': 'active', 'InvocationID': 'w1'})
    # the worker came back with a new invocation in a second pair: judged on other ranks than it started on -> dropped
    guard.canary_ranks['spark2'] = 'w0'
    capsys.readouterr()
    assert guard.step() is None
    assert guard.state.data['canary_failures_total'] == 0 and gate(tmp_path) is None
    assert 'quality canary dropped: a rank restarted while it ran (spark2)' in capsys.readouterr().out


def test_an_unreachable_serving_path_is_a_skip_never_a_gate(tmp_path):
    """The first canary of a first deploy runs when vLLM serves, before the API proxy is installed: refused."""
    refused = dict(garbled(), unreachable=['arithmetic: ConnectionRefusedError: [Errno 111] Connection refused'])
    clock, canaries = Clock(), Canaries(refused, passing())
    guard, _box = watch(tmp_path, clock, canaries)
    guard.step()
    guard.step()
    d = guard.state.data
    assert gate(tmp_path) is None and d['canary_failures_total'] == 0 and d['canary_skips_total'] == 1
    assert d['last_canary_skip'].startswith('unreachable: arithmetic: ConnectionRefusedError')
    clock.now += 60
    guard.step()
    guard.step()
    assert d['last_canary_ok'] is True and d['canary_baseline']


def test_a_canary_never_brings_back_a_storm_window_a_deliberate_restart_cleared(tmp_path):
    """restart.yml and every deploy that restarts the pair clear the storm window in the state file (reset-window)
    while the guard runs; the canary writes its own fields only (seen in drills: the window came back and the guard
    stopped the pair at its storm limit)."""
    clock, canaries = Clock(), Canaries(passing(), passing())
    guard, _box = watch(tmp_path, clock, canaries)
    guard.state.data['restart_times'] = [clock.now - 10, clock.now - 5]
    guard.state.save()
    assert pg_state.reset_window(guard.cfg) == 2
    guard.step()
    guard.step()                                                        # a canary started, ran and passed
    record = json.loads((tmp_path / 'state.json').read_text())
    assert record['restart_times'] == [] and record['canary_runs_total'] == 1 and record['last_canary_ok'] is True


# --------------------------------------------------------------------------- load is not decay
# The head's queue gauges while a short request waits behind a long chunked prefill on real vLLM 0.26.0 (the
# real-vllm-on-device notes, Part 1b: waiting 1, running 2 for the whole wait: a decode stream and the 250,000-token
# prompt running, the short request waiting); the long prompt alone prefilling, before the canary sent anything
# (Part 1 §2: running 1, waiting 0 throughout the prefill).
PART_1B = {'vllm:num_requests_waiting': 1.0, 'vllm:num_requests_running': 2.0}
PREFILLING = 'vllm:num_requests_running 1.0\nvllm:num_requests_waiting 0.0\nvllm:generation_tokens_total 10.0\n'
BEHIND = 'vllm:num_requests_running 2.0\nvllm:num_requests_waiting 1.0\nvllm:generation_tokens_total 10.0\n'
ALONE = {'vllm:num_requests_waiting': 0.0, 'vllm:num_requests_running': 1.0}
TIMED_OUT = 'stream interrupted: TimeoutError: timed out'


def canary_run(readings, stuck=1, mode=None):
    """A canary result as quality_canary.run_canary makes it: the gauges read `readings` while its requests waited; the
    first `stuck` requests got no first token within the timeout; `mode` garbles the answers that came."""
    qc = quality_canary

    def probe():
        box['read'].set()
        return readings

    def stream(base_url, body, api_key=None, timeout=600.0):
        assert box['read'].wait(5)          # the first request ends only after a reading of the gauges meanwhile
        if box['stuck']:
            box['stuck'] -= 1
            return {'t_start': 1.0, 't_first': None, 't_last': None, 'completion_tokens': None, 'error': TIMED_OUT,
                    'status': 200, 'content': '', 'tool_calls': [], 'finish_reason': None}
        prompt = body['messages'][0]['content']
        content = {'What is 2+2? Answer with one word.': 'Four', 'What is the capital of France? Answer with one word.':
                   'Paris'}.get(prompt, 'The sky looks blue because the air scatters blue sunlight more than red light.')
        if mode == 'cjk':
            content = '我们 的 模型 在 这个 问题 上 给出 了 答案'
        calls = [{'id': 'c1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': '{"city": "Paris"}'}}]
        tool = body.get('tools') and mode is None
        return {'t_start': 1.0, 't_first': 1.2, 't_last': 2.0, 'completion_tokens': 41, 'error': None, 'status': 200,
                'content': '' if tool else content, 'tool_calls': calls if tool else [],
                'finish_reason': 'tool_calls' if tool else 'stop'}
    box = {'stuck': stuck, 'read': threading.Event()}
    return qc.run_canary('http://127.0.0.1:8000', 'deepseek-v4-flash', timeout=120, stream=stream, probe=probe,
                         probe_every_s=0.001)


def test_a_canary_behind_a_long_prefill_is_inconclusive_never_a_gate_or_a_restart(tmp_path, capsys):
    """The issue's case: a long prompt prefills (running 1, waiting 0: not saturated, the canary starts), the canary's
    request queues behind it and times out. Three times in a row, more than canary_failures_to_restart (2)."""
    behind = canary_run(PART_1B)
    assert behind['inconclusive'] and not behind['failures']
    clock, canaries = Clock(), Canaries(passing(), behind, behind, behind, passing())
    systemd = FakeSystemd()
    guard, box = watch(tmp_path, clock, canaries, metrics=systemd)
    guard.step()
    guard.step()                                                     # baseline taken on an idle pair
    box['text'] = PREFILLING
    capsys.readouterr()
    for _n in range(3):
        clock.now += 600
        assert guard.step() is None                                  # not saturated: the canary starts
        assert guard.step() is None and gate(tmp_path) is None       # inconclusive: no gate, no restart
    d = guard.state.data
    assert systemd.actions() == [] and d['restarts_by_cause'] == {} and len(canaries.jobs) == 4
    assert d['canary_inconclusive_total'] == 3 and d['canary_failures_total'] == 0 and d['canary_consecutive'] == 0
    assert d['canary_skips_total'] == 0 and d['canary_runs_total'] == 1 and d['last_canary_ok'] is True
    assert d['last_canary_inconclusive'].startswith('quality canary inconclusive (the pair is busy; not a failure: no '
                                                    'gate, no restart): arithmetic: no answer within 120 s while the '
                                                    'engine was busy: 2 request(s) running, 1 waiting')
    lines = [ln for ln in capsys.readouterr().out.splitlines() if 'inconclusive' in ln]
    assert len(lines) == 3 and lines[0].endswith('; next canary in 60s'), lines
    assert not os.path.exists(str(tmp_path / 'evidence'))           # no failure, no evidence
    prom = (tmp_path / 'guard.prom').read_text()
    for line in ('dgxspark_ds4_canary_runs_total{result="inconclusive"} 3', 'dgxspark_ds4_canary_runs_total{result="fail"} 0',
                 'dgxspark_ds4_canary_runs_total{result="pass"} 1', 'dgxspark_ds4_canary_runs_total{result="skipped"} 0',
                 'dgxspark_ds4_canary_consecutive_failures 0'):
        assert line in prom, (line, prom)
    # the prefill ends: the retry (canary_retry_s after an inconclusive one) runs on the idle pair and passes
    box['text'] = IDLE
    clock.now += 60
    guard.step()
    guard.step()
    assert d['canary_runs_total'] == 2 and d['last_canary_ok'] is True and gate(tmp_path) is None


def test_a_garbled_answer_while_the_pair_is_busy_is_still_a_failure_gated_then_restarted(tmp_path):
    garbled_busy = canary_run(PART_1B, stuck=0, mode='cjk')
    assert garbled_busy['busy'] and garbled_busy['failures'] and not garbled_busy['inconclusive']
    clock, canaries = Clock(), Canaries(passing(), garbled_busy, garbled_busy)
    systemd = FakeSystemd()
    guard, box = watch(tmp_path, clock, canaries, metrics=systemd)
    guard.step()
    guard.step()
    box['text'] = PREFILLING
    clock.now += 600
    guard.step()
    assert guard.step() is None
    assert gate(tmp_path).startswith('quality canary failed (1 of 2 in a row before a pair restart)')
    clock.now += 60
    guard.step()
    assert guard.step() == 'restart' and systemd.actions() == [('local', 'restart', HEAD)]
    d = guard.state.data
    assert d['restarts_by_cause'] == {'quality_canary': 1} and d['canary_inconclusive_total'] == 0
    record = json.loads(open(os.path.join(d['last_canary_evidence'], 'canary.json')).read())
    assert 'timings: 1 request(s) in flight when the canary started (judged on an idle pair only)' in record['skipped_checks']


def test_a_timeout_with_the_engine_idle_otherwise_is_a_failure_gated_then_restarted(tmp_path):
    idle_timeout = canary_run(ALONE, stuck=4)
    assert not idle_timeout['inconclusive'] and [f['check'] for f in idle_timeout['failures']] == ['http'] * 4
    clock, canaries = Clock(), Canaries(passing(), idle_timeout, idle_timeout)
    systemd = FakeSystemd()
    guard, _box = watch(tmp_path, clock, canaries, metrics=systemd)
    guard.step()
    guard.step()
    clock.now += 600
    guard.step()
    guard.step()
    assert 'the engine had no other work' in gate(tmp_path)
    clock.now += 60
    guard.step()
    assert guard.step() == 'restart'
    assert guard.state.data['canary_inconclusive_total'] == 0 and guard.state.data['canary_failures_total'] == 2


def cut_at_deadline():
    return {'ok': False, 'requests': [], 'skipped_checks': [], 'ttft_s': None, 'decode_tps': None, 'failures': [
        {'request': 'canary', 'check': 'deadline', 'excerpt': '', 'detail': 'the canary did not finish within 490 s'}]}


def test_a_canary_cut_at_its_deadline_is_inconclusive_when_the_guard_saw_the_pair_busy_else_a_failure(tmp_path):
    """A canary request running beside a long prefill gets a token per engine step (seconds each at 1M context): its
    reads never time out, yet the whole canary can outlast its deadline. The guard reads the gauges every hang_poll_s
    while the child runs."""
    clock, canaries = Clock(), Canaries(passing(), cut_at_deadline(), cut_at_deadline())
    systemd = FakeSystemd()
    guard, box = watch(tmp_path, clock, canaries, metrics=systemd, hang_poll_s=5)
    guard.step()
    guard.step()
    clock.now += 600
    guard.step()                                                     # started on an idle pair
    canaries.jobs[-1].polls = 2
    box['text'] = BEHIND                                             # a long prompt came; the canary waits behind it
    clock.now += 5
    guard.step()
    clock.now += 5
    guard.step()                                                     # cut at its deadline
    d = guard.state.data
    assert gate(tmp_path) is None and d['canary_inconclusive_total'] == 1 and d['canary_failures_total'] == 0
    assert 'the canary did not finish within its deadline (490 s) while the engine was busy' in d['last_canary_inconclusive']
    # the same cut with the engine idle otherwise (the canary's own request alone): a failure
    box['text'] = 'vllm:num_requests_running 1.0\nvllm:num_requests_waiting 0.0\n'
    clock.now += 60
    guard.step()
    canaries.jobs[-1].polls = 2
    clock.now += 5
    guard.step()
    clock.now += 5
    guard.step()
    assert d['canary_failures_total'] == 1 and 'canary deadline' in gate(tmp_path) and systemd.actions() == []


def test_a_passing_canary_that_saw_the_pair_busy_neither_judges_timings_nor_sets_the_baseline(tmp_path):
    """A long prompt that arrived after the canary started on an idle pair: its TTFT is the prefill's, not drift."""
    slow_busy = dict(passing(ttft=12.0, tps=5.0), busy="decode: the engine was busy: 2 request(s) running, 1 waiting")
    clock, canaries = Clock(), Canaries(slow_busy, passing(), slow_busy)
    guard, _box = watch(tmp_path, clock, canaries)
    guard.step()
    guard.step()
    d = guard.state.data
    assert d['last_canary_ok'] is True and d['canary_baseline'] == {}           # no baseline from a busy canary
    clock.now += 600
    guard.step()
    guard.step()
    assert d['canary_baseline']['ttft_s'] == 0.2
    clock.now += 600
    guard.step()
    guard.step()
    assert d['last_canary_ok'] is True and d['canary_consecutive'] == 0         # 12 s TTFT behind a prefill: not drift


# --------------------------------------------------------------------------- time limits from the recipe
def _effective(recipe):
    """ds4_effective of the head as the config compile publishes it for a shipped recipe (the goldens' inventory)."""
    from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config  # pylint: disable=import-outside-toplevel
    from golden_regen import regen  # pylint: disable=import-error,import-outside-toplevel
    return ds4_config.compute_effective(regen.inventory_inputs(recipe), 'spark1')


def _role_vars(recipe, **overrides):
    """The role's vars/main.yml over its defaults, templated by Ansible as a play would (ds4_effective: the head's,
    as the config compile publishes it for a shipped recipe)."""
    import yaml  # pylint: disable=import-outside-toplevel
    from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel
    from ansible.template import Templar, trust_as_template  # pylint: disable=import-outside-toplevel

    def trust(value):
        if isinstance(value, dict):
            return dict((k, trust(v)) for k, v in value.items())
        if isinstance(value, list):
            return [trust(v) for v in value]
        return trust_as_template(value) if isinstance(value, str) else value
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..')
    variables = {}
    for part in ('defaults', 'vars'):
        with open(os.path.join(root, 'roles', 'vllm_service', part, 'main.yml')) as handle:
            variables.update(trust(yaml.safe_load(handle)))
    variables['ds4_effective'] = _effective(recipe)
    variables.update(overrides)
    templar = Templar(loader=DataLoader(), variables=variables)
    return lambda expr: templar.template(trust_as_template('{{ %s }}' % expr))


def test_the_canary_time_limits_follow_the_recipe_as_the_hang_window_with_the_role_variable_as_floor():
    # the shipped recipes at the defaults: one chunk (8192 or 16384 tokens) at 400 tokens/s is 21 or 41 s, plus one
    # 5-s poll; the floor (120 s) rules, as for the hang window
    for recipe, step in (('long-context-1m', 26), ('balanced', 46)):
        get = _role_vars(recipe)
        assert (get('_vllm_service_longest_step_s'), get('_vllm_service_hang_window_s')) == (step, 120)
        settings = get('_vllm_service_canary_settings')
        assert (settings['canary_timeout_s'], settings['canary_request_timeout_s'], settings['canary_deadline_s']) == (
            120, 120, 490)
        assert quality_canary.check_config(settings) == [], settings
    # chunked prefill off: one step is the whole 1M prompt (1048576 / 400 = 2622 s, plus the poll), above every floor
    no_chunks = dict(_role_vars('long-context-1m')('ds4_effective'))
    no_chunks['serve_args'] = dict(no_chunks['serve_args'], **{'enable-chunked-prefill': False, 'max-model-len': 1048576})
    get = _role_vars('long-context-1m', ds4_effective=no_chunks)
    settings = get('_vllm_service_canary_settings')
    assert (settings['canary_request_timeout_s'], settings['canary_deadline_s']) == (2627, 10518)
    assert get('_vllm_service_hang_window_s') == 2627 and quality_canary.check_config(settings) == []
    # the drills' settings (the simulator's 5000 tokens/s, a 10-s floor): 16384 / 5000 -> 4 s + 5 s: the floor rules
    get = _role_vars('balanced', vllm_service_canary_timeout_s=10, vllm_service_hang_prefill_tokens_per_s=5000)
    settings = get('_vllm_service_canary_settings')
    assert (settings['canary_request_timeout_s'], settings['canary_deadline_s']) == (10, 50)
    # and the guard uses what the role rendered
    assert pg_canary.canary_request_timeout_s(settings) == 10 and pg_canary.canary_deadline_s(settings) == 50
    assert pg_canary.canary_request_timeout_s({'canary_timeout_s': 30}) == 30
