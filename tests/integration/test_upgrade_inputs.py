# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""upgrade.yml refuses what it cannot measure before any host changes, naming the variable: thresholds out of range
or not numbers, a kit file without a usable kit, a recipe that does not exist, a pair that serves nothing yet (the
local two-node inventory of local_pair: nothing is deployed on this machine). With one pair it says first what a
regression costs."""


import pytest

import local_pair  # pylint: disable=import-error

NOTHING_CHANGED = 'Nothing was changed.'
# switch.yml (and so upgrade.yml) refuses an unpinned model revision first: pinned here, so the checks below are reached
SITE = {'ds4_model_revisions': {'deepseek-v4-flash': '0123456789abcdef0123456789abcdef01234567'}}


def _run(tmp_path, extra):
    return local_pair.run_playbook(tmp_path, 'upgrade.yml', extra, site=SITE)


def _flat(out):
    return ' '.join(out.split())


@pytest.mark.parametrize('extra,words', [
    ({'ds4_upgrade_max_decode_drop_pct': 95}, 'ds4_upgrade_max_decode_drop_pct=95 is out of range. Fix: a percentage from 0.0 to 90.0'),
    ({'ds4_upgrade_max_prefill_drop_pct': 'fast'}, "ds4_upgrade_max_prefill_drop_pct='fast' is not a number"),
])
def test_bad_thresholds_refused_before_any_change(tmp_path, extra, words):
    rc, out = _run(tmp_path, extra)
    flat = _flat(out)
    assert rc != 0 and words in flat and NOTHING_CHANGED in flat, out[-3000:]
    assert 'TASK [Keep the live set' not in flat


def test_a_kit_file_without_a_kit_is_refused(tmp_path):
    bad = tmp_path / 'kit.yml'
    bad.write_text('recipes: {}\n')
    rc, out = _run(tmp_path, {'ds4_upgrade_kit_file': str(bad)})
    flat = _flat(out)
    assert rc != 0 and 'the regression kit data has no `default` kit' in flat and NOTHING_CHANGED in flat, out[-3000:]


def test_an_unknown_recipe_is_refused_by_the_config_check(tmp_path):
    rc, out = _run(tmp_path, {'ds4_profile': 'no-such-recipe'})
    flat = _flat(out)
    assert rc != 0 and 'ds4_profile' in flat and 'no-such-recipe' in flat and 'unknown recipe' in flat, out[-3000:]
    assert 'TASK [Keep the live set' not in flat


def test_a_pair_that_serves_nothing_is_refused_and_one_pair_is_warned_first(tmp_path):
    rc, out = _run(tmp_path, {})
    flat = _flat(out)
    assert rc != 0, out[-3000:]
    assert 'upgrade.yml with one pair: the kit measures the pair before the change and after it' in flat
    assert 'has no launch script at /etc/dgxspark-ds4/launch-head.sh: nothing is deployed' in flat
    assert 'Fix: deploy with playbooks/site.yml first' in flat and NOTHING_CHANGED in flat
    assert 'TASK [Keep the live set' not in flat


def test_an_unknown_model_is_refused_by_the_config_check(tmp_path):
    rc, out = _run(tmp_path, {'ds4_model': 'no-such-model'})
    flat = _flat(out)
    assert rc != 0 and 'ds4_model' in flat and 'no-such-model' in flat, out[-3000:]
    assert 'TASK [Keep the live set' not in flat
