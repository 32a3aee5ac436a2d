# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r'''
---
name: preload
type: aggregate
short_description: Import the collection's plugins once per run before the workers fork; share compiled templates
version_added: 0.1.0
description:
  - ansible-playbook forks one worker process per task and host. A plugin the main process has not imported is imported
    again in every worker that uses it, and a collection's filter is found by importing that collection's filter files
    one after the other until one defines it. This callback imports the filter, test and action plugins of
    C(dgxspark.ds4), ansible-core's own filters and tests and the lookups the collection uses once, when the playbook
    starts, with community.crypto's C(x509_certificate_info) filter, which the collection's TLS filters call; every
    worker then inherits them. On a no-op C(site.yml) over two pairs it took 16 % off the controller's
    CPU (C(docs/measurements.md)).
  - It also installs a template compile cache (C(plugins/plugin_utils/template_cache.py)). Jinja compiles each
    template string anew in every worker that renders it (a role default read on four hosts, four compiles, again in
    the next task and the next run); with the cache, a worker keeps the code object it compiled in C(ds4-jinja-compiled)
    under the root of C(local_tmp) (C(~/.ansible/tmp); only when that directory is the user's and nobody else can
    write to it, else in the run's own temporary directory, removed at its end; files older than 14 days are removed
    when a run starts), and the other workers and later runs read it instead of compiling it again. The key is the
    template's text and every setting the compile reads (delimiters, whitespace handling, extensions, the Python, Jinja
    and ansible-core versions); a template with a backslash is not cached (ansible-core may escape it at compile time). On a no-op
    C(site.yml) over two pairs about a fifth of the controller's CPU was compiling templates (C(docs/measurements.md)).
  - It prints nothing and changes no result. A plugin that cannot be imported here is left to the task that uses it,
    which reports the error exactly as it would without this callback.
  - Enable it in C(ansible.cfg) (C(callbacks_enabled = dgxspark.ds4.preload) in C([defaults])), as the
    collection's own C(ansible.cfg) does.
author:
  - dgxspark.ds4 contributors (@dgxspark)
requirements:
  - Enabled in C(ansible.cfg) (C([defaults] callbacks_enabled)) or C(ANSIBLE_CALLBACKS_ENABLED).
'''

import importlib
import pkgutil

from ansible.plugins.callback import CallbackBase

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import template_cache

COLLECTION = 'dgxspark.ds4'
# ansible-core's lookups this collection calls from its roles and playbooks. Only a speed hint: a lookup missing here
# is imported by the worker that needs it, as without this callback.
BUILTIN_LOOKUPS = ('env', 'file', 'fileglob', 'password', 'template', 'varnames', 'vars')
# Filters of other collections that the collection's own call (plugins/filter/tls.py: every deploy with ds4_tls reads
# each host's certificate through it; importing it is importing cryptography)
OTHER_FILTERS = ('community.crypto.x509_certificate_info',)


def _plugin_names(kind):
    """The module names of the collection's plugins of one kind (its plugins/<kind>/*.py)."""
    try:
        package = importlib.import_module('ansible_collections.dgxspark.ds4.plugins.%s' % kind)
    except ImportError:
        return []
    return sorted(name for dummy, name, ispkg in pkgutil.iter_modules(package.__path__) if not ispkg)


def preload():
    """Import the plugins into this process; what fails is left for the task that needs it. Returns the failures."""
    from ansible.plugins.loader import action_loader, filter_loader, lookup_loader, test_loader
    failed = []

    def load(loader, name, **kwargs):
        try:
            loader.get(name, **kwargs)
        except KeyError:
            pass  # a Jinja loader asked for a name no file defines: every file of the collection was imported on the way
        except Exception as exc:  # pylint: disable=broad-except
            failed.append('%s %s: %s' % (loader.type, name, exc))

    # ansible-core's own filters and tests (one call loads them all), then every filter and test file of the
    # collection: a name none of them defines makes the loader import each file in turn
    load(filter_loader, 'ansible.builtin.to_json')
    load(test_loader, 'ansible.builtin.match')
    load(filter_loader, COLLECTION + '.preload_every_filter_file')
    load(test_loader, COLLECTION + '.preload_every_test_file')
    for name in _plugin_names('action'):
        load(action_loader, '%s.%s' % (COLLECTION, name), class_only=True)
    for name in BUILTIN_LOOKUPS:
        load(lookup_loader, 'ansible.builtin.' + name)
    for name in OTHER_FILTERS:
        load(filter_loader, name)
    return failed


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'dgxspark.ds4.preload'
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        template_cache.install()
        for line in preload():
            self._display.vvv('dgxspark.ds4.preload: left to the task that uses it: %s' % line)
