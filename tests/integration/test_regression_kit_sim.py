# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The regression kit (module dgxspark.ds4.regression_kit, run by ansible on this machine) against simulator pairs:
a pair whose image serves at half the rates (the simulator's image settings file, as the `slower` test image bakes
it) is judged regressed against an old pair, an equal one passes; the kit finds the pair's address and served name in
a launch script as rendered for a rank. Run with -s to see the numbers."""


import json
import os
import subprocess
import sys

import yaml

from test_ops_sim import MODEL, REPO, pair_factory  # noqa: F401  pylint: disable=import-error,unused-import

_LINK_ROOT = os.path.join(REPO, ".collections")
if _LINK_ROOT not in sys.path:
    sys.path.insert(0, _LINK_ROOT)
from ansible_collections.dgxspark.ds4.plugins.module_utils._converge import regression_kit  # noqa: E402  pylint: disable=wrong-import-position

with open(os.path.join(REPO, "roles", "config", "files", "regression_kit.yml")) as _fh:
    KIT = yaml.safe_load(_fh)
# 128 decode tokens in 1.3 s per run, the prefill of 2048 words in ~1 s: windows long enough that a few tens of ms of
# delay on this loaded 2-core machine stay well inside the 10 % (decode) and 15 % (prefill) an equal pair must meet
RATES = {"VLLM_SIM_TOKENS_PER_S": "100", "VLLM_SIM_PREFILL_TOKENS_PER_S": "2000"}


def kit_module(args, tmp_path):
    """ansible localhost -m dgxspark.ds4.regression_kit -> the module's result."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=_LINK_ROOT, ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
               ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-c", "local",
                           "-m", "dgxspark.ds4.regression_kit", "-a", json.dumps(args)], env=env, cwd=REPO,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def head_record(tmp_path, pair, legacy=False):
    """A head's deployment record as vllm_service writes one (its launch facts: ds4_effective.launch). legacy: one
    written before the record carried them (served name and clients' port, no engine URL), whose launch script, as
    launch_render writes one, gives the rest."""
    path = tmp_path / ("deployed-head-%d.json" % pair.port)
    if legacy:
        script = tmp_path / ("launch-head-%d.sh" % pair.port)
        script.write_text("#!/bin/bash\nset -euo pipefail\nexec vllm serve /models/ds4 \\\n  --served-model-name '%s' \\\n"
                          "  --host '127.0.0.1' \\\n  --port '%d' \\\n  --max-num-seqs '8'\n" % (MODEL, pair.port))
        record = {"role": "head", "api_port": pair.port, "served_model": MODEL, "launch_script": str(script)}
    else:
        record = {"role": "head", "api_port": pair.port, "served_model": MODEL, "engine_url": pair.url,
                  "launch": {"served_model_name": MODEL, "max_model_len": 131072, "max_num_seqs": 8, "thinking": True,
                             "vllm_port": pair.port, "vllm_host": "127.0.0.1", "public_port": pair.port,
                             "engine_url": pair.url, "headless": False}}
    path.write_text(json.dumps(record))
    return str(path)


def test_a_slower_image_is_regressed_an_equal_one_passes(pair_factory, tmp_path):
    settings = tmp_path / "image-settings.json"
    settings.write_text(json.dumps({"tokens_per_s_factor": 0.5, "prefill_tokens_per_s_factor": 0.5}))
    old = pair_factory(head_env=RATES)
    equal = pair_factory(head_env=dict(RATES, VLLM_SIM_IMAGE_SETTINGS=str(tmp_path / "absent.json")))
    slower = pair_factory(head_env=dict(RATES, VLLM_SIM_IMAGE_SETTINGS=str(settings)))
    runs = {}
    for name, pair in (("old", old), ("equal", equal), ("slower", slower)):
        # the old image's pair was deployed by a collection version whose record did not carry the launch facts yet
        runs[name] = kit_module({"record": head_record(tmp_path, pair, legacy=name == "old"), "kit": KIT, "recipe": "balanced",
                                 "timeout": 60}, tmp_path)
        assert runs[name]["url"] == pair.url and runs[name]["model"] == MODEL
        assert runs[name]["ok"] and runs[name]["failures"] == [], runs[name]
        # balanced: 2 known answers, 1 tool call, 1+2+4+6 garble prompts; MTP 2 acceptance from /metrics
        assert runs[name]["checks"] == {"known_answers": 2, "tool_calls": 1, "garble_requests": 13, "skipped": []}
        assert runs[name]["acceptance_rate"] is not None and 0.5 < runs[name]["acceptance_rate"] <= 1.0
    slow = regression_kit.verdict(runs["slower"], runs["old"])
    same = regression_kit.verdict(runs["equal"], runs["old"])
    print("\nkit: old decode %s prefill %s | equal %s | slower %s"
          % (runs["old"]["decode_tps"], runs["old"]["prefill_tps"], regression_kit.summary(same), regression_kit.summary(slow)))
    assert abs(runs["old"]["decode_tps"] / 100.0 - 1.0) <= 0.05, runs["old"]["runs"]
    assert same["verdict"] == "pass", same
    assert slow["verdict"] == "regressed", slow
    ratios = dict((c["figure"], c["ratio"]) for c in slow["compared"])
    assert 0.4 <= ratios["decode_tps"] <= 0.6 and ratios["prefill_tps"] < 0.85, ratios


def test_a_wrong_answer_fails_the_kit_without_failing_the_module(pair_factory, tmp_path):
    pair = pair_factory(head_env=RATES)
    wrong = [{"name": "capital", "prompt": KIT["default"]["known_answers"][1]["prompt"], "expected": ["berlin"]}]
    kit = {"default": dict(KIT["default"], known_answers=wrong, garble_levels=[1])}
    out = kit_module({"url": pair.url, "model": MODEL, "kit": kit, "recipe": "balanced", "timeout": 60}, tmp_path)
    assert not out["ok"] and [f["check"] for f in out["failures"]] == ["deterministic_answer"], out["failures"]
    verdict = regression_kit.verdict(out, out)
    assert verdict["verdict"] == "regressed" and verdict["regressions"][0].startswith("capital deterministic_answer")
