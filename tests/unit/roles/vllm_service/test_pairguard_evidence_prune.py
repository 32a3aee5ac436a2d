# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pruning of the evidence directories (pg_jobs.prune_evidence), run by both writers when they make a new one: the
pair guard's evidence_path (hang-<UTC>[-n]/, canary-<UTC>[-n]/) and forensics.write_record (crash-<UTC>-<incident>/).

Real directories in a temporary evidence_dir, named by the real writers where a test needs a new one; the older ones
are made with the names those writers give (the same strftime pattern), their times set in the name."""


import json
import os
import time

import pytest

from .role_files import FILES

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import forensics
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import cli as pg_cli
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import config as pg_config
from ansible_collections.dgxspark.ds4.plugins.module_utils._node.pairguard import jobs as pg_jobs

DAY = 86400
NOW = 1796083200.0  # 2026-12-01T00:00:00Z


def stamp(at):
    return time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(at))


def make(base, kind, at, suffix=''):
    path = os.path.join(str(base), '%s-%s%s' % (kind, stamp(at), suffix))
    os.makedirs(path)
    with open(os.path.join(path, 'summary.txt'), 'w') as fh:
        fh.write('evidence\n')
    return path


def cfg_for(tmp_path, **extra):
    cfg = {'head_unit': 'dgxspark-ds4-head.service', 'evidence_dir': str(tmp_path / 'evidence'),
           'crash_hold_file': str(tmp_path / 'crash-hold.json')}
    cfg.update(extra)
    os.makedirs(cfg['evidence_dir'], exist_ok=True)
    return cfg


def names(cfg):
    return sorted(os.listdir(cfg['evidence_dir']))


def test_count_limit_keeps_the_newest_per_kind_and_says_each_removal(tmp_path, capsys):
    cfg = cfg_for(tmp_path, evidence_keep=3, evidence_max_age_days=30)
    hangs = [make(cfg['evidence_dir'], 'hang', NOW - 3600 * (6 - i)) for i in range(5)]   # 5 recent ones, oldest first
    canaries = [make(cfg['evidence_dir'], 'canary', NOW - 60 * (3 - i)) for i in range(2)]
    new = pg_jobs.evidence_path(cfg, NOW, 'hang')
    assert os.path.isdir(new) and os.path.basename(new) == 'hang-%s' % stamp(NOW)
    left = names(cfg)
    assert [os.path.basename(p) for p in hangs[-2:]] + [os.path.basename(new)] == [n for n in left if n.startswith('hang-')]
    assert all(os.path.isdir(p) for p in canaries)           # another kind: its own count
    out = capsys.readouterr().out.splitlines()
    gone = [ln for ln in out if ' removed (' in ln]
    assert len(gone) == 3, out
    assert all('beyond the newest 3' in ln and 'keep 3, max age 30 days' in ln for ln in gone), gone
    assert gone[-1].endswith('3 hang directories left, keep 3, max age 30 days)'), gone
    assert os.path.basename(hangs[0]) in ' '.join(gone)


def test_age_limit_and_the_newest_of_a_kind_is_kept_however_old(tmp_path, capsys):
    cfg = cfg_for(tmp_path)                                   # defaults: 20 per kind, 30 days
    old_canaries = [make(cfg['evidence_dir'], 'canary', NOW - (40 + i) * DAY) for i in range(3)]
    recent_hang = make(cfg['evidence_dir'], 'hang', NOW - 29 * DAY)
    old_hang = make(cfg['evidence_dir'], 'hang', NOW - 31 * DAY)
    new = pg_jobs.evidence_path(cfg, NOW, 'hang')
    assert os.path.isdir(new) and os.path.isdir(recent_hang) and not os.path.exists(old_hang)
    # a kind with only old directories keeps its newest (the last evidence of that fault), nothing else
    assert [os.path.isdir(p) for p in old_canaries] == [True, False, False]
    out = capsys.readouterr().out
    assert out.count('older than 30 days') == 3, out


def test_same_second_suffixes_order_and_a_new_canary_dir_is_never_pruned(tmp_path):
    cfg = cfg_for(tmp_path, evidence_keep=2)
    first = pg_jobs.evidence_path(cfg, NOW, 'canary')
    second = pg_jobs.evidence_path(cfg, NOW, 'canary')
    third = pg_jobs.evidence_path(cfg, NOW, 'canary')
    assert second.endswith('-2') and third.endswith('-3')
    assert not os.path.exists(first) and os.path.isdir(second) and os.path.isdir(third)
    # a clock set back: the new directory is older by name than the ones there; it and the newest by name are kept
    earlier = pg_jobs.evidence_path(cfg, NOW - 3600, 'canary')
    assert os.path.isdir(earlier) and os.path.isdir(third) and not os.path.exists(second)
    assert len(os.listdir(cfg['evidence_dir'])) == 2


def test_foreign_names_files_and_links_are_never_touched(tmp_path):
    cfg = cfg_for(tmp_path, evidence_keep=1, evidence_max_age_days=1)
    base = cfg['evidence_dir']
    outside = tmp_path / 'elsewhere'
    outside.mkdir()
    (outside / 'keep.txt').write_text(u'mine\n')
    foreign = {
        'notes': 'dir', 'hang-old': 'dir', 'hang-20200101T000000Z.bak': 'dir', 'HANG-20200101T000000Z': 'dir',
        'crash-20200101T000000Z-ABCDEF': 'dir', 'hang-20200101T000000': 'dir', 'oom-20200101T000000Z': 'dir',
        'hang-20200101T000000Z-2': 'file', 'README.txt': 'file', 'canary-20200101T000000Z-3': 'link',
    }
    for name, what in foreign.items():
        path = os.path.join(base, name)
        if what == 'dir':
            os.makedirs(path)
            with open(os.path.join(path, 'x'), 'w') as fh:
                fh.write('user\n')
        elif what == 'file':
            with open(path, 'w') as fh:
                fh.write('user\n')
        else:
            os.symlink(str(outside), path)
    ours = [make(base, 'hang', NOW - (100 + i) * DAY) for i in range(2)]
    ours += [make(base, 'canary', NOW - 100 * DAY, '-2'), make(base, 'canary', NOW - 101 * DAY)]
    pg_jobs.evidence_path(cfg, NOW, 'hang')
    for name in foreign:
        assert os.path.lexists(os.path.join(base, name)), name
    assert (outside / 'keep.txt').read_text() == u'mine\n'
    assert [os.path.isdir(p) for p in ours] == [False, False, True, False]


def test_the_held_incidents_directory_is_kept(tmp_path):
    """forensics.write_record of a new incident prunes; the crash the hold record points to stays, however old."""
    fcfg = cfg_for(tmp_path, evidence_keep=3, evidence_max_age_days=30)
    fcfg['hold_file'] = fcfg.pop('crash_hold_file')
    base = fcfg['evidence_dir']
    held = make(base, 'crash', NOW - 90 * DAY, '-0123456789ab')
    others = [make(base, 'crash', NOW - (60 + i) * DAY, '-%012x' % i) for i in range(2)]
    recent = [make(base, 'crash', NOW - i * DAY, '-%012x' % (100 + i)) for i in range(1, 3)]
    with open(fcfg['hold_file'], 'w') as fh:
        json.dump({'incident': '0123456789ab', 'evidence': held, 'held': True}, fh)
    path = forensics.write_record(fcfg, 'fedcba987654', {'spark1': ('log\n', [])}, [], 'hold', NOW, 'held: test')
    assert os.path.isfile(os.path.join(path, 'summary.json'))
    assert os.path.isdir(held)                               # beyond the count and the age: held, so kept
    assert not any(os.path.exists(p) for p in others)
    assert os.path.isdir(recent[0]) and not os.path.exists(recent[1])   # count 3: the new one, the held one, the newest before
    # the pair guard's writers honour the same hold record (crash_hold_file in the guard's config)
    gcfg = cfg_for(tmp_path, evidence_keep=1, evidence_max_age_days=1, crash_hold_file=fcfg['hold_file'])
    pg_jobs.evidence_path(gcfg, NOW, 'hang')
    assert os.path.isdir(held) and os.path.isdir(path)       # crash: the newest and the held one
    assert not os.path.exists(recent[0])
    # once acknowledged (no hold record), the next new record prunes it
    os.unlink(fcfg['hold_file'])
    forensics.write_record(fcfg, '00000000abcd', {'spark1': ('log\n', [])}, [], 'hold', NOW + 60, 'held: test')
    assert not os.path.exists(held)


def test_a_rewritten_record_of_a_seen_incident_does_not_prune(tmp_path):
    fcfg = cfg_for(tmp_path, evidence_keep=1)
    old = make(fcfg['evidence_dir'], 'crash', NOW - DAY, '-%012x' % 1)
    path = forensics.write_record(fcfg, 'fedcba987654', {'spark1': ('log\n', [])}, [], 'hold', NOW)
    assert not os.path.exists(old)
    again = make(fcfg['evidence_dir'], 'crash', NOW - DAY, '-%012x' % 2)
    assert forensics.write_record(fcfg, 'fedcba987654', {'spark1': ('log\n', [])}, [], 'hold', NOW) == path
    assert os.path.isdir(again)                               # the directory existed: nothing new written, no pruning


@pytest.mark.parametrize('key,value', [('evidence_keep', 0), ('evidence_keep', '20'), ('evidence_keep', True),
                                       ('evidence_max_age_days', 2.5), ('evidence_max_age_days', -1),
                                       ('evidence_max_age_days', None)])
def test_check_config_refuses_bad_settings_naming_the_variable(tmp_path, capsys, key, value):
    cfg = cfg_for(tmp_path, **{key: value})
    problems = pg_config.check_config(cfg)
    variable = 'vllm_service_' + key
    assert problems == ['%s = %r: must be a whole number >= 1. Fix: set %s and re-run the role' % (key, value, variable)]
    # the guard refuses to start on it (main exits 2); a writer that still meets it prunes nothing and says why
    path = tmp_path / 'pairguard.json'
    path.write_text(json.dumps(cfg))
    assert pg_cli.main(['pairguard.py', 'watch', str(path)]) == 2
    assert variable in capsys.readouterr().err
    old = make(cfg['evidence_dir'], 'hang', NOW - 400 * DAY)
    pg_jobs.evidence_path(cfg, NOW, 'hang')
    assert os.path.isdir(old)
    assert 'evidence not pruned: %s' % key in capsys.readouterr().out


def test_defaults_and_rendered_values_pass_check_config(tmp_path):
    assert pg_config.check_config(cfg_for(tmp_path)) == []
    assert pg_config.check_config(cfg_for(tmp_path, evidence_keep=1, evidence_max_age_days=1)) == []
    assert (pg_jobs.EVIDENCE_KEEP, pg_jobs.EVIDENCE_MAX_AGE_DAYS) == (20, 30)
    import yaml
    with open(os.path.join(FILES, '..', 'defaults', 'main.yml')) as fh:
        defaults = yaml.safe_load(fh)
    assert (defaults['vllm_service_evidence_keep'], defaults['vllm_service_evidence_max_age_days']) == (20, 30)
