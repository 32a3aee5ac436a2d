# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/architecture.md's repository map stays current: every path it names exists (brace lists expanded), and every
role, every plugins/ folder and every top-level folder of the repository is named in it. A folder added without a
line in the map, or a line left for a file that moved, fails here."""

import os
import re
import subprocess

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
MAP_HEADING = '## Where things live (repository map)'
# Paths in the map that are on the nodes, not in the repository.
ON_HOSTS = ('/etc/', '/var/', '/usr/')
# Tracked top-level folders the map leaves to their own documents (release notes, CI entry point, Galaxy metadata).
NOT_MAPPED = {'changelogs', '.ci', 'meta'}


def map_rows():
    text = open(os.path.join(REPO, 'docs', 'architecture.md')).read()
    section = text[text.index(MAP_HEADING):]
    nxt = section.find('\n## ', len(MAP_HEADING))
    section = section if nxt < 0 else section[:nxt]
    return [line for line in section.splitlines() if line.startswith('| ') and not line.startswith('| Path')]


def _expand(path):
    match = re.search(r'\{([^{}]*)\}', path)
    if not match:
        return [path]
    out = []
    for part in match.group(1).split(','):
        out.extend(_expand(path[:match.start()] + part + path[match.end():]))
    return out


def named_paths():
    """Every backticked path in the map's first column (a slash or a known file ending; the collection's FQCNs and
    variables are not paths)."""
    out = []
    for row in map_rows():
        first = row.split('|')[1]
        for item in re.findall(r'`([^`]+)`', first):
            if item.startswith(ON_HOSTS) or ('/' not in item and not re.search(r'\.(yml|py|md|cfg)$', item)):
                continue
            out.extend(_expand(item))
    return out


def test_the_map_is_found():
    assert len(map_rows()) >= 20 and len(named_paths()) >= 20, named_paths()


def test_every_path_the_map_names_exists():
    # a <placeholder> segment stands for any name: its parent must exist
    missing = [p for p in named_paths() if not os.path.exists(os.path.join(REPO, re.split(r'/?<[^>]+>', p)[0].rstrip('/')))]
    assert not missing, 'docs/architecture.md names paths that do not exist: %s' % missing


def test_every_role_and_plugin_folder_is_in_the_map():
    text = '\n'.join(map_rows())
    wanted = ['roles/%s' % r for r in sorted(os.listdir(os.path.join(REPO, 'roles'))) if not r.startswith('_')]
    wanted += ['plugins/%s/' % d for d in sorted(os.listdir(os.path.join(REPO, 'plugins')))
               if os.path.isdir(os.path.join(REPO, 'plugins', d)) and not d.startswith('__')]
    absent = [w for w in wanted if '`%s' % w not in text]
    assert not absent, 'docs/architecture.md "%s" has no row for %s' % (MAP_HEADING, absent)


def test_every_top_level_folder_is_in_the_map_or_named_as_outside_it():
    text = '\n'.join(map_rows())
    tracked = subprocess.check_output(['git', 'ls-files'], cwd=REPO, universal_newlines=True).splitlines()
    folders = sorted(set(p.split('/')[0] for p in tracked if '/' in p) - NOT_MAPPED)
    absent = [d for d in folders if '`%s/' % d not in text and '`%s`' % d not in text]
    assert not absent, 'top-level folders missing from the repository map: %s' % absent
