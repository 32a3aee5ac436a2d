# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every relative link in the README, CONTRIBUTING.md, docs/ and the role and test READMEs resolves: the file
exists, and a `#fragment` names a heading of the target as GitHub writes its anchor. The README sends readers to
docs/ for everything it no longer says itself; a link that breaks silently loses that text."""


import glob
import os
import re

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..'))
DOCUMENTS = sorted(
    [os.path.join(REPO, 'README.md'), os.path.join(REPO, 'CONTRIBUTING.md')]
    + glob.glob(os.path.join(REPO, 'docs', '*.md'))
    + glob.glob(os.path.join(REPO, 'roles', '*', 'README.md'))
    + glob.glob(os.path.join(REPO, 'tests', '**', 'README.md'), recursive=True))
LINK = re.compile(r'\[[^\]]*\]\(([^)\s]+)\)')
FENCE = re.compile(r'^\s*(```|~~~)')
INLINE_CODE = re.compile(r'`[^`]*`')
HEADING = re.compile(r'^#{1,6}\s+(.*?)\s*#*\s*$')
EXTERNAL = ('http://', 'https://', 'mailto:')


def _prose_lines(path):
    """(line number, text) outside fenced code blocks, with inline code removed."""
    in_fence = False
    with open(path, encoding='utf-8') as fh:
        for number, line in enumerate(fh, 1):
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if not in_fence:
                yield number, INLINE_CODE.sub('', line)


def github_anchor(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', heading)   # a link in a heading keeps its text
    text = text.strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


def anchors(path):
    """Every heading anchor of a Markdown file, with GitHub's -1, -2 suffixes for repeated headings."""
    seen = {}
    found = set()
    in_fence = False
    with open(path, encoding='utf-8') as fh:
        for line in fh:
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            match = None if in_fence else HEADING.match(line)
            if match:
                base = github_anchor(match.group(1))
                count = seen.get(base, 0)
                seen[base] = count + 1
                found.add(base if count == 0 else '%s-%d' % (base, count))
    return found


def broken_links(path):
    """'file:line: target (why)' for each relative link of `path` that does not resolve."""
    broken = []
    for number, line in _prose_lines(path):
        for target in LINK.findall(line):
            if target.startswith(EXTERNAL):
                continue
            file_part, fragment = (target.split('#', 1) + [''])[:2]
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            where = '%s:%d: %s' % (os.path.relpath(path, REPO), number, target)
            if not os.path.exists(resolved):
                broken.append('%s (no such file)' % where)
            elif fragment and resolved.endswith('.md') and fragment not in anchors(resolved):
                broken.append('%s (no heading with that anchor in %s)' % (where, os.path.relpath(resolved, REPO)))
    return broken


def test_anchor_rule_matches_github():
    assert github_anchor('8. Converging fast: a no-op `site.yml` in seconds, drift still repaired') == \
        '8-converging-fast-a-no-op-siteyml-in-seconds-drift-still-repaired'
    assert github_anchor('The unit (`dgxspark-ds4-head.service` / `dgxspark-ds4-worker.service`)') == \
        'the-unit-dgxspark-ds4-headservice--dgxspark-ds4-workerservice'


def test_the_checker_finds_a_broken_link_and_a_broken_anchor(tmp_path):
    (tmp_path / 'a.md').write_text('# Title\n\n[ok](a.md#title) [gone](b.md) [bad](a.md#nothing)\n'
                                   '```\n[in code](missing.md)\n```\n')
    found = broken_links(str(tmp_path / 'a.md'))
    assert len(found) == 2, found
    assert 'b.md (no such file)' in found[0]
    assert 'a.md#nothing (no heading' in found[1]


def test_readme_and_docs_are_checked():
    names = [os.path.relpath(path, REPO) for path in DOCUMENTS]
    for expected in ('README.md', os.path.join('docs', 'testing.md'), os.path.join('docs', 'measurements.md')):
        assert expected in names


@pytest.mark.parametrize('path', DOCUMENTS, ids=lambda p: os.path.relpath(p, REPO))
def test_every_relative_link_resolves(path):
    assert broken_links(path) == []


def test_readme_links_every_document_under_docs():
    with open(os.path.join(REPO, 'README.md'), encoding='utf-8') as fh:
        readme = fh.read()
    for path in sorted(glob.glob(os.path.join(REPO, 'docs', '*.md'))):
        link = '](docs/%s' % os.path.basename(path)
        assert link in readme, 'README.md does not link %s' % os.path.relpath(path, REPO)
