# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The commands the README gives work as written (from the repo root and from an installed collection).

- From the repository root, with the inventory of ansible.cfg (inventories/sample-site, recipe balanced):
  ``ansible-playbook site.yml -l spark`` (root site.yml imports playbooks/site.yml).
- From a collection installed from the built tarball: ``ansible-playbook dgxspark.ds4.site -i <inventory>
  -l spark`` (relative imports and vars_files resolve inside the installed collection), and the render path
  ``ansible-playbook dgxspark.ds4.render -i <inventory>`` writes the same launch scripts as the golden files.

Syntax check and --list-hosts only: no host is contacted. One build + install per module (< 30 s).
"""

import glob
import os
import shutil
import subprocess
import sys
import tarfile

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.dirname(sys.executable)
GOLDEN = os.path.join(REPO, "tests", "golden", "balanced")


def _run(args, cwd, env_extra=None, timeout=180):
    env = dict(os.environ)
    for k in ("ANSIBLE_CONFIG", "ANSIBLE_INVENTORY", "ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS"):
        env.pop(k, None)
    env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_RETRY_FILES_ENABLED="0")
    env.update(env_extra or {})
    proc = subprocess.run([os.path.join(BIN, args[0])] + list(args[1:]), cwd=str(cwd), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout


def test_site_yml_from_the_repo_root_as_written():
    """`ansible-playbook site.yml -l spark` from the root: ansible.cfg gives the inventory and the FQCN link."""
    if not os.path.exists(os.path.join(REPO, ".collections", "ansible_collections", "dgxspark", "ds4")):
        pytest.fail("the FQCN link .collections/ansible_collections/dgxspark/ds4 is missing: run make collection-link")
    rc, out = _run(["ansible-playbook", "site.yml", "-l", "spark", "--syntax-check"], REPO)
    assert rc == 0, out
    assert "playbook: site.yml" in out, out
    rc, out = _run(["ansible-playbook", "site.yml", "-l", "spark", "--list-hosts"], REPO)
    assert rc == 0, out
    assert "spark1" in out and "spark2" in out, "the default inventory (ansible.cfg) was not used:\n%s" % out


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Build the collection tarball and install it (offline, no deps: they come with the `ansible` package)."""
    tmp = tmp_path_factory.mktemp("collection")
    rc, out = _run(["ansible-galaxy", "collection", "build", "--output-path", str(tmp), REPO], tmp)
    assert rc == 0, out
    tarballs = glob.glob(str(tmp / "dgxspark-ds4-*.tar.gz"))
    assert len(tarballs) == 1, out
    coll = tmp / "collections"
    rc, out = _run(["ansible-galaxy", "collection", "install", "--offline", "--no-deps", "--force", "-p", str(coll),
                    tarballs[0]], tmp, {"ANSIBLE_COLLECTIONS_PATH": str(coll)})
    assert rc == 0, out
    inv = tmp / "inventory"
    shutil.copytree(os.path.join(REPO, "inventories", "sample-site"), str(inv), symlinks=False)
    return {"tmp": tmp, "tarball": tarballs[0], "coll": coll, "inv": inv,
            "root": coll / "ansible_collections" / "dgxspark" / "ds4"}


def test_tarball_ships_the_playbooks_and_what_they_read(installed):
    with tarfile.open(installed["tarball"]) as tar:
        names = set(tar.getnames())
    for path in ("playbooks/site.yml", "playbooks/render.yml", "playbooks/config_play.yml", "playbooks/vars/ops.yml",
                 "roles/config/meta/argument_specs.yml", "roles/vllm_service/defaults/main.yml",
                 "plugins/action/effective_config.py", "plugins/plugin_utils/known_vars.py"):
        assert path in names, "%s is not in the built collection" % path


def test_installed_collection_site_syntax_check(installed):
    env = {"ANSIBLE_COLLECTIONS_PATH": str(installed["coll"])}
    rc, out = _run(["ansible-playbook", "dgxspark.ds4.site", "-i", str(installed["inv"]), "-l", "spark", "--syntax-check"],
                   installed["tmp"], env)
    assert rc == 0, out
    assert "playbook: %s" % (installed["root"] / "playbooks" / "site.yml") in out, out
    rc, out = _run(["ansible-playbook", "dgxspark.ds4.site", "-i", str(installed["inv"]), "-l", "spark", "--list-hosts"],
                   installed["tmp"], env)
    assert rc == 0, out
    assert "spark1" in out and "spark2" in out, out


def test_installed_collection_render(installed):
    """The render path of the installed collection: validation (incl. the unknown-variable check, which reads the
    installed roles and playbooks) and the same launch scripts as the golden files."""
    out_dir = installed["tmp"] / "render"
    rc, out = _run(["ansible-playbook", "dgxspark.ds4.render", "-i", str(installed["inv"]), "-e", "ds4_render_dir=%s" % out_dir],
                   installed["tmp"], {"ANSIBLE_COLLECTIONS_PATH": str(installed["coll"])})
    assert rc == 0, out
    for host, script in (("spark1", "launch-head.sh"), ("spark2", "launch-worker.sh")):
        for name in (script, "nccl.env"):
            with open(str(out_dir / "balanced" / host / name)) as got, open(os.path.join(GOLDEN, host, name)) as want:
                assert got.read() == want.read(), "%s/%s differs from tests/golden/balanced" % (host, name)
