# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""api_proxy disables the distribution's default nginx site (port 80, started by the Ubuntu package) when it
installs or uses nginx, and keeps a way back: the sites-enabled symlink is removed, sites-available/default
stays; a regular file is moved aside, never deleted. Real ansible-playbook on localhost running the role's
tasks/default_site.yml against a temporary /etc/nginx tree (its paths passed as extra vars), with a fake
systemctl on PATH (nginx.service reported inactive: nothing to reload)."""

import os
import subprocess
import sys

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.dirname(sys.executable)
ROLE = os.path.join(REPO, "roles", "api_proxy")

PLAY = """
- name: Default site
  hosts: localhost
  gather_facts: false
  tasks:
    - name: The role's default-site tasks
      ansible.builtin.include_role:
        name: dgxspark.ds4.api_proxy
        tasks_from: default_site.yml
    - name: Handlers
      ansible.builtin.meta: flush_handlers
"""


def _tree(tmp_path):
    etc = tmp_path / "nginx"
    (etc / "sites-available").mkdir(parents=True)
    (etc / "sites-enabled").mkdir()
    (etc / "sites-available" / "default").write_text("server { listen 80 default_server; }\n")
    return etc


def _play(tmp_path, etc, disable=True):
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    log = tmp_path / "systemctl.log"
    (fake / "systemctl").write_text('#!/bin/sh\necho "$*" >> %s\necho inactive\nexit 3\n' % log)
    os.chmod(str(fake / "systemctl"), 0o755)
    env = dict(os.environ)
    env.update(ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_RETRY_FILES_ENABLED="0", ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               PATH="%s:%s" % (fake, env.get("PATH", "")))
    argv = [os.path.join(BIN, "ansible-playbook"), str(play),
            "-e", "_api_proxy_default_site_path=%s" % (etc / "sites-enabled" / "default"),
            "-e", "_api_proxy_default_site_aside=%s" % (etc / "sites-available" / "default.disabled-by-dgxspark-ds4"),
            "-e", "api_proxy_disable_default_site=%s" % ("true" if disable else "false"),
            "-e", "ansible_python_interpreter=%s" % sys.executable]
    proc = subprocess.run(argv, cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=120, check=False)
    calls = log.read_text() if log.exists() else ""
    return proc.returncode, proc.stdout, calls


def test_default_site_symlink_removed_and_available_file_kept(tmp_path):
    etc = _tree(tmp_path)
    (etc / "sites-enabled" / "default").symlink_to(etc / "sites-available" / "default")
    rc, out, calls = _play(tmp_path, etc)
    assert rc == 0, out
    assert not os.path.lexists(str(etc / "sites-enabled" / "default")), out
    assert (etc / "sites-available" / "default").read_text() == "server { listen 80 default_server; }\n"
    # nginx.service is asked whether it runs (inactive here: no reload)
    assert "is-active nginx.service" in calls, calls
    assert "changed=1" in out
    # the way back stays one command: ln -s sites-available/default sites-enabled/default; a second run changes nothing
    rc, out, _calls = _play(tmp_path, etc)
    assert rc == 0 and "changed=0" in out, out


def test_default_site_regular_file_moved_aside_not_deleted(tmp_path):
    etc = _tree(tmp_path)
    (etc / "sites-enabled" / "default").write_text("# edited by hand\nserver { listen 80; }\n")
    aside = etc / "sites-available" / "default.disabled-by-dgxspark-ds4"
    aside.write_text("an older aside copy\n")
    rc, out, _calls = _play(tmp_path, etc)
    assert rc == 0, out
    assert not os.path.lexists(str(etc / "sites-enabled" / "default"))
    assert aside.read_text() == "# edited by hand\nserver { listen 80; }\n"
    # an earlier aside copy is kept too (mv --backup=numbered)
    assert (etc / "sites-available" / "default.disabled-by-dgxspark-ds4.~1~").read_text() == "an older aside copy\n"
    assert (etc / "sites-available" / "default").exists()


def test_default_site_left_alone_when_switched_off(tmp_path):
    etc = _tree(tmp_path)
    (etc / "sites-enabled" / "default").symlink_to(etc / "sites-available" / "default")
    rc, out, calls = _play(tmp_path, etc, disable=False)
    assert rc == 0, out
    assert os.path.islink(str(etc / "sites-enabled" / "default"))
    assert calls == ""


def test_role_wiring_only_where_nginx_is_used_and_observed_by_the_converge_check():
    with open(os.path.join(ROLE, "tasks", "install.yml")) as fh:
        install = yaml.safe_load(fh)
    assert any(t.get("ansible.builtin.import_tasks") == "default_site.yml" for t in install)
    with open(os.path.join(ROLE, "tasks", "absent.yml")) as fh:
        assert "default_site" not in fh.read()
    with open(os.path.join(ROLE, "tasks", "converge.yml")) as fh:
        converge = yaml.safe_load(fh)
    inc = [t for t in converge if t.get("ansible.builtin.include_tasks") == "install.yml"][0]
    assert inc["when"] == "_api_proxy_active | bool"
    with open(os.path.join(ROLE, "vars", "main.yml")) as fh:
        rv = yaml.safe_load(fh)
    assert "{{ _api_proxy_default_site_path }}" in rv["__api_proxy_converge_checks"]["files"]
    assert rv["_api_proxy_default_site_path"] == "/etc/nginx/sites-enabled/default"
    assert "/sites-enabled/" not in rv["_api_proxy_default_site_aside"]
    with open(os.path.join(ROLE, "defaults", "main.yml")) as fh:
        defaults = yaml.safe_load(fh)
    with open(os.path.join(ROLE, "meta", "argument_specs.yml")) as fh:
        spec = yaml.safe_load(fh)["argument_specs"]["main"]["options"]
    assert defaults["api_proxy_disable_default_site"] is True
    assert spec["api_proxy_disable_default_site"]["default"] is True
