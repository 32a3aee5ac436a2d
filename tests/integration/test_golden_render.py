# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The golden files of EVERY profile are what `playbooks/render.yml` writes through real ansible-playbook.

tests/golden/regen.py writes tests/golden/<profile>/<host>/{launch-head.sh|launch-worker.sh, nccl.env} by calling
ds4_config.compute_effective directly; the unit tests compare the Python output with them. This proves the
other half for every profile: `ansible-playbook playbooks/render.yml -i inventories/sample-site` (the sample site's
own recipe) or `... -e ds4_profile=<profile>` (any other; the inventory as Ansible layers it, the config role, the
dgxspark.ds4.effective_config action, the render play's copy tasks) writes byte-identical files, and nothing else is
in the golden tree. One ansible-playbook run per profile (~5 s each); no host is contacted (render.yml delegates every write to localhost).
"""

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GOLDEN = os.path.join(REPO, "tests", "golden")
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
SCRIPTS = {"spark1": "launch-head.sh", "spark2": "launch-worker.sh"}
SAMPLE_SITE = os.path.join(REPO, "inventories", "sample-site")


def profiles():
    """Every shipped recipe (roles/config/files/recipes/<profile>.yml)."""
    folder = os.path.join(REPO, "roles", "config", "files", "recipes")
    return sorted(f[:-len(".yml")] for f in os.listdir(folder) if f.endswith(".yml"))


def sample_site_profile():
    """The recipe the sample site names (group_vars/spark/site.yml: ds4_profile)."""
    with open(os.path.join(SAMPLE_SITE, "group_vars", "spark", "site.yml")) as handle:
        return yaml.safe_load(handle)["ds4_profile"]


def test_golden_tree_has_every_profile_and_only_rendered_files():
    names = sorted(d for d in os.listdir(GOLDEN) if os.path.isdir(os.path.join(GOLDEN, d)) and not d.startswith("_"))
    assert names == profiles(), "tests/golden/ and roles/config/files/recipes/ disagree: regenerate with tests/golden/regen.py"
    assert len(names) == len(ds4_config.PROFILES) and names == list(ds4_config.PROFILES), names
    for profile in names:
        for host, script in SCRIPTS.items():
            assert sorted(os.listdir(os.path.join(GOLDEN, profile, host))) == sorted([script, "nccl.env"]), (profile, host)


def _variants():
    sys.path.insert(0, GOLDEN)
    try:
        import regen  # pylint: disable=import-error,import-outside-toplevel
    finally:
        sys.path.remove(GOLDEN)
    return regen.VARIANTS


def test_golden_variants_are_exactly_regen_variants():
    variants = _variants()
    found = sorted(os.listdir(os.path.join(GOLDEN, "_variants")))
    assert found == sorted(variants), "tests/golden/_variants/ and regen.VARIANTS disagree: regenerate with tests/golden/regen.py"
    for variant, (profile, _extra) in variants.items():
        assert profile in profiles(), (variant, profile)
        for host, script in SCRIPTS.items():
            assert sorted(os.listdir(os.path.join(GOLDEN, "_variants", variant, host))) == sorted([script, "nccl.env"])


@pytest.mark.parametrize("profile", profiles() + ["_variants/%s" % v for v in sorted(_variants())])
def test_render_playbook_writes_the_golden_files(profile, tmp_path):
    """The sample site as it ships (its own recipe) or with -e ds4_profile=<profile>; a variant (tests/golden/_variants/<v>):
    its profile so picked, with the variant's extra vars given with -e, the way an operator turns a collection setting on."""
    extra = []
    if profile.startswith("_variants/"):
        golden_name = profile
        profile, variables = _variants()[profile.split("/", 1)[1]]
        for name, value in sorted(variables.items()):
            extra += ["-e", "%s=%s" % (name, value)]
    else:
        golden_name = profile
    if not os.path.exists(PLAYBOOK):
        pytest.fail("ansible-playbook is not next to the test interpreter (%s): run the tests with .venv/bin/pytest" % PLAYBOOK)
    if profile != sample_site_profile():
        extra = ["-e", "ds4_profile=%s" % profile] + extra
    out = tmp_path / "render"
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_RETRY_FILES_ENABLED="0")
    for name in ("ANSIBLE_INVENTORY", "ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS"):
        env.pop(name, None)
    res = subprocess.run([PLAYBOOK, os.path.join(REPO, "playbooks", "render.yml"), "-i", SAMPLE_SITE,
                          "-e", "ds4_render_dir=%s" % out] + extra, cwd=REPO, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
    assert res.returncode == 0, res.stdout
    assert sorted(os.listdir(str(out))) == [profile], "render.yml wrote %s, not %s" % (os.listdir(str(out)), profile)
    for host, script in SCRIPTS.items():
        written = out / profile / host
        assert sorted(os.listdir(str(written))) == sorted([script, "nccl.env", "effective.json"]), (host, os.listdir(str(written)))
        for name in (script, "nccl.env"):
            with open(os.path.join(GOLDEN, golden_name, host, name)) as want:
                assert (written / name).read_text() == want.read(), (
                    "%s/%s/%s from render.yml differs from tests/golden: if the change is intended, run "
                    ".venv/bin/python tests/golden/regen.py and review git diff tests/golden/" % (golden_name, host, name))
        assert os.access(str(written / script), os.X_OK)
        # a shipped inventory deviates from its seed only where the recipe says so; a variant's setting is listed
        eff = json.loads((written / "effective.json").read_text())
        assert bool(eff["deviations"]) == golden_name.startswith("_variants/"), eff["deviations"]
