# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check that every fenced excerpt in docs/sources.md occurs verbatim (whitespace folded) in its seed file.

The seed documents are other people's pages and are not part of this repository, so CI cannot run this
check; a maintainer who holds them runs it whenever docs/sources.md changes:

    python3 tests/harness/check-seed-excerpts.py DIR_WITH_THE_SEED_FILES [docs/sources.md]

Exit 0: every excerpt line found; 1: a line not found or a seed file missing (each named); 2: usage.
"""


import os
import re
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))


def seed_excerpts(text):
    """{seed file name: the verbatim excerpt blocks of its section in docs/sources.md, joined}."""
    out = {}
    for section in re.split(r"^## (?=seed \d{3} )", text, flags=re.M)[1:]:
        head = re.match(r"seed (\d{3}) \S+ `((\d{3})_[0-9a-f]+\.txt)`", section)
        if not head or head.group(1) != head.group(3):
            raise ValueError('malformed seed heading: %s' % section.splitlines()[0])
        blocks = re.findall(r"```text\n(.*?)\n[ \t]*```", section, re.S)
        out[head.group(2)] = "\n".join(blocks)
    return out


def check(seed_dir, sources_md):
    with open(sources_md, encoding='utf-8') as f:
        excerpts = seed_excerpts(f.read())
    problems = []
    if not excerpts:
        problems.append('%s: no seed sections found' % sources_md)
    for name, block in sorted(excerpts.items()):
        path = os.path.join(seed_dir, name)
        if not os.path.isfile(path):
            problems.append('%s: no %s' % (seed_dir, name))
            continue
        with open(path, encoding='utf-8') as f:
            seed = " ".join(f.read().split())
        for line in block.splitlines():
            words = " ".join(line.split())
            if words and words not in seed:
                problems.append('%s: not verbatim: %s' % (name, words))
    return excerpts, problems


def main(argv):
    if len(argv) not in (2, 3):
        sys.stderr.write(__doc__)
        return 2
    sources_md = argv[2] if len(argv) == 3 else os.path.join(REPO, 'docs', 'sources.md')
    excerpts, problems = check(argv[1], sources_md)
    for line in problems:
        print(line)
    if problems:
        return 1
    print('%d seed sections, every excerpt line verbatim' % len(excerpts))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
