# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection as a user installs it: `ansible-galaxy collection build` + `install` into a temporary directory, a
site inventory of a few lines (two hosts and their fabric values, no recipe anywhere in it), and a shipped recipe
chosen with -e ds4_profile=<recipe>:

* dgxspark.ds4.render writes the same launch scripts and env files as tests/golden (same per-host values);
* dgxspark.ds4.site refuses the unpinned model revision before any host, naming ds4_model_revisions[<model>];
* dgxspark.ds4.site with the pin in the site inventory passes the configuration play and goes on to the hosts
  (here containers that do not exist: the first contact fails, which proves the recipe resolved from the tarball).
Run from a directory outside the checkout with no ansible.cfg: nothing can come from the repository.
"""

import os
import subprocess
import sys
import uuid

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "harness"))
import installed_collection  # noqa: E402  pylint: disable=wrong-import-position,import-error
BIN = os.path.dirname(sys.executable)
GOLDEN = os.path.join(REPO, "tests", "golden")
RECIPE = "upstream-0731-dspark"
SHA = "0123456789abcdef0123456789abcdef01234567"


def _run(argv, cwd, env=None, timeout=300):
    proc = subprocess.run(argv, cwd=str(cwd), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(collections path, work dir): the collection built from this checkout and installed from its tarball."""
    top = tmp_path_factory.mktemp("installed")
    collections, out = installed_collection.build_and_install(REPO, str(top), os.path.join(BIN, "ansible-galaxy"))
    recipes = top / "collections" / "ansible_collections" / "dgxspark" / "ds4" / "roles" / "config" / "files" / "recipes"
    assert collections == str(top / "collections")
    assert (recipes / (RECIPE + ".yml")).is_file(), "the tarball lacks the recipes: %s" % out
    work = top / "work"
    work.mkdir()
    return str(top / "collections"), work


def _site(work, connection, site_vars=None):
    """The user's whole site inventory: hosts with their per-host values (the shipped host_vars' fabric values)."""
    inv = work / ("site-%s" % uuid.uuid4().hex[:8])
    inv.mkdir()
    hosts = {}
    for name in ("spark1", "spark2"):
        with open(os.path.join(REPO, "inventories", "sample-site", "host_vars", name + ".yml")) as handle:
            hosts[name] = dict(yaml.safe_load(handle), **connection(name))
    (inv / "hosts.yml").write_text(yaml.safe_dump({"spark": {"hosts": hosts, "vars": site_vars or {}}}))
    return inv


def _playbook(installed, name, inv, *extra):
    colls, work = installed
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=colls, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_RETRY_FILES_ENABLED="0", ANSIBLE_LOCAL_TEMP=str(work / "tmp"), PATH=BIN + os.pathsep + os.environ["PATH"])
    for var in ("ANSIBLE_CONFIG", "ANSIBLE_INVENTORY"):
        env.pop(var, None)
    argv = [os.path.join(BIN, "ansible-playbook"), name, "-i", str(inv), "-e", "ds4_profile=%s" % RECIPE]
    for item in extra:
        argv += ["-e", item]
    return _run(argv, work, env)


def _local(_name):
    return {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}


def _absent(_name):
    return {"ansible_connection": "community.docker.docker", "ansible_host": "ds4-itest-absent-%s" % uuid.uuid4().hex[:12]}


def test_render_from_the_tarball_writes_the_golden_files(installed):
    _colls, work = installed
    inv = _site(work, _local)
    out_dir = work / "render"
    rc, out = _playbook(installed, "dgxspark.ds4.render", inv, "ds4_render_dir=%s" % out_dir)
    assert rc == 0, out
    for host, script in (("spark1", "launch-head.sh"), ("spark2", "launch-worker.sh")):
        for name in (script, "nccl.env"):
            with open(os.path.join(GOLDEN, RECIPE, host, name)) as want:
                assert (out_dir / RECIPE / host / name).read_text() == want.read(), (host, name)


def test_site_from_the_tarball_refuses_the_unpinned_revision_before_any_host(installed):
    _colls, work = installed
    rc, out = _playbook(installed, "dgxspark.ds4.site", _site(work, _absent))
    assert rc != 0, out
    flat = " ".join(out.split())
    assert "ds4_model_revisions[deepseek-v4-flash-0731] is not set" in flat, out
    assert "https://huggingface.co/deepseek-ai/DeepSeek-V4-Flash-0731/commits/main" in flat, out
    assert "No such container" not in out and "UNREACHABLE" not in out, out
    assert out.count("PLAY [") == 1, out


def test_site_from_the_tarball_with_the_pin_passes_the_config_play(installed):
    _colls, work = installed
    inv = _site(work, _absent, {"ds4_model_revisions": {"deepseek-v4-flash-0731": SHA}})
    rc, out = _playbook(installed, "dgxspark.ds4.site", inv)
    assert rc != 0, out  # the hosts do not exist
    assert "configuration refused" not in out, out
    assert out.count("PLAY [") >= 2, out
    assert "No such container" in out or "UNREACHABLE" in out, out
