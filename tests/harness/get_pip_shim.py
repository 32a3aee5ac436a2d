# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in for ansible-test's pip bootstrap script (get-pip-<version>.py).

`ansible-test sanity --venv` downloads get-pip from ci-files.testing.ansible.com, which CI
cannot reach. `make sanity` copies this file to ~/.ansible/test/cache/get_pip_<version>.py
when none is cached. Like get-pip it installs pip plus the arguments it is given
(e.g. pip==25.2 setuptools wheel) into the running interpreter: it uses the pip bundled
with Python (ensurepip) to fetch them from PyPI.
"""

import subprocess
import sys


def main():
    args = [a for a in sys.argv[1:] if a not in ('--no-setuptools', '--no-wheel')]
    subprocess.check_call([sys.executable, '-m', 'ensurepip', '--default-pip'])
    subprocess.check_call([sys.executable, '-m', 'pip', 'install', '--upgrade', '--quiet'] + args)


if __name__ == '__main__':
    main()
