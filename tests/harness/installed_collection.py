# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection as a user installs it (test harness): `ansible-galaxy collection build` of a checkout, then
`ansible-galaxy collection install` of that tarball into a directory of its own. Used by
tests/integration/test_installed_collection.py and the Molecule helper ds4_drill.installed_collection."""


import glob
import os
import subprocess


def build_and_install(project, top, galaxy='ansible-galaxy'):
    """Build `project` into top/dist and install the tarball into top/collections -> (collections path, output).
    Raises AssertionError naming the step's output when a step fails or the installed tree lacks the recipes."""
    out = []
    dist, collections = os.path.join(top, 'dist'), os.path.join(top, 'collections')

    def run(argv, env=None):
        proc = subprocess.run(argv, cwd=top, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, timeout=300, check=False)
        out.append(proc.stdout)
        assert proc.returncode == 0, '%s: rc %d\n%s' % (' '.join(argv), proc.returncode, proc.stdout)

    run([galaxy, 'collection', 'build', project, '--output-path', dist])
    tarballs = glob.glob(os.path.join(dist, 'dgxspark-ds4-*.tar.gz'))
    assert len(tarballs) == 1, tarballs
    # Only the target path configured: with make's ANSIBLE_COLLECTIONS_PATH (.collections, where the checkout is
    # linked) galaxy would find the collection "already installed" and install nothing.
    run([galaxy, 'collection', 'install', '--no-deps', '-p', collections, tarballs[0]],
        env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections))
    recipes = os.path.join(collections, 'ansible_collections', 'dgxspark', 'ds4', 'roles', 'config', 'files', 'recipes')
    assert os.path.isdir(recipes) and os.listdir(recipes), 'the installed collection lacks the recipes:\n' + '\n'.join(out)
    return collections, '\n'.join(out)
