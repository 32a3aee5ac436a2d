# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Give the simulator image the vLLM version it stands in for, where a real vLLM image has it (test code only).

`python3 install_dist.py 0.27.1 [SITE_DIR]` writes into SITE_DIR (default: this Python's first site-packages
directory) a `vllm` package whose __version__ is the version and its `vllm-<version>.dist-info` (METADATA, RECORD,
INSTALLER), replacing any vllm dist-info there. So `importlib.metadata.version('vllm')` (what
dgxspark.ds4.container_image reads from an image), `import vllm; vllm.__version__` and the simulator's own
`vllm --version` (vllm_sim.cli.image_version) all say that version. Run by tests/harness/build-sim-image.sh.
The package holds nothing else: it is not vLLM.
"""


import glob
import os
import re
import shutil
import site
import sys

VERSION_RE = re.compile(r'^\d+\.\d+(\.\d+)?([.+-]?[A-Za-z0-9.+-]*)?$')


def install(version, site_dir):
    if not VERSION_RE.match(version):
        raise ValueError('not a vLLM version: %r' % (version,))
    os.makedirs(site_dir, exist_ok=True)
    for old in glob.glob(os.path.join(site_dir, 'vllm-*.dist-info')):
        shutil.rmtree(old)
    pkg = os.path.join(site_dir, 'vllm')
    os.makedirs(pkg, exist_ok=True)
    with open(os.path.join(pkg, '__init__.py'), 'w') as handle:
        handle.write('"""vLLM SIMULATOR stand-in package (tests/vllm_sim): only the version; not vLLM."""\n'
                     '__version__ = %r\n' % version)
    dist = os.path.join(site_dir, 'vllm-%s.dist-info' % version)
    os.makedirs(dist)
    with open(os.path.join(dist, 'METADATA'), 'w') as handle:
        handle.write('Metadata-Version: 2.1\nName: vllm\nVersion: %s\n'
                     'Summary: vLLM SIMULATOR stand-in (tests/vllm_sim, test code only; not vLLM)\n' % version)
    with open(os.path.join(dist, 'INSTALLER'), 'w') as handle:
        handle.write('dgxspark-ds4-test\n')
    with open(os.path.join(dist, 'RECORD'), 'w') as handle:
        handle.write('vllm/__init__.py,,\nvllm-%s.dist-info/METADATA,,\nvllm-%s.dist-info/INSTALLER,,\n'
                     'vllm-%s.dist-info/RECORD,,\n' % (version, version, version))
    return dist


def main(argv):
    if len(argv) not in (1, 2):
        sys.stderr.write('usage: install_dist.py VERSION [SITE_DIR]\n')
        return 2
    site_dir = argv[1] if len(argv) == 2 else site.getsitepackages()[0]
    print(install(argv[0], site_dir))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
