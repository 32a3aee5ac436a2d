# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Golden vLLM units: tests/golden/_units/<profile>/<host>/<unit name> for every shipped recipe (both ranks), and
tests/golden/_units/_variants/<variant>/<host>/ for role settings that change the unit's docker run (UNIT_VARIANTS: a
recipe plus the vllm_service variables an inventory sets).

Each is roles/vllm_service/templates/vllm.service.j2 rendered by Ansible's own template lookup (what install.yml runs)
with the role's defaults and vars, the inventory's role variables and ds4_effective as the config play publishes it;
the one value only a node knows, the image's Id, is a fixed fake (FAKE_IMAGE_ID).

Regenerate after an intended change to the unit, the docker run argv or a recipe:
    .venv/bin/python tests/golden/regen_units.py
then review `git diff tests/golden/_units/`. tests/unit/roles/vllm_service/test_unit_golden.py checks them.
"""

import glob
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import regen  # noqa: E402  (sets up ansible_collections.dgxspark.ds4 from the working tree)

from ansible_collections.dgxspark.ds4.plugins.plugin_utils import ds4_config  # noqa: E402
from ansible_collections.dgxspark.ds4.plugins.plugin_utils import role_inputs  # noqa: E402
from ansible_collections.dgxspark.ds4.plugins.plugin_utils.service_layout import LAYOUT_VARS, publish  # noqa: E402

UNITS_DIR = os.path.join(HERE, '_units')
ROLE = os.path.join(regen.REPO, 'roles', 'vllm_service')
TEMPLATE = os.path.join(ROLE, 'templates', 'vllm.service.j2')
FAKE_IMAGE_ID = 'sha256:' + '0123456789abcdef' * 4
# variant -> (recipe, the vllm_service variables the inventory sets)
UNIT_VARIANTS = {
    'balanced-json-logs-privileged': ('balanced', {
        'vllm_service_container_log_driver': 'json-file', 'vllm_service_container_log_max_size': '200m',
        'vllm_service_container_log_max_file': 2, 'vllm_service_privileged': True,
        'vllm_service_ulimits': {'memlock': -1, 'nofile': '1024:2048'}}),
    'balanced-test-host': ('balanced', {
        'vllm_service_gpu': False, 'vllm_service_rdma_devices': False, 'vllm_service_capabilities': [],
        'vllm_service_extra_cache_volumes': {'/srv/ds4/cache/deepgemm': '/root/.deep_gemm'},
        'vllm_service_config_dir': '/srv/ds4/etc', 'vllm_service_container_name': 'ds4-test-vllm'}),
}


_LOADER = []


def _plugin_loader():
    """ansible-core's plugin loaders, set up once per process (the template lookup is ansible.builtin's)."""
    if not _LOADER:
        import warnings  # pylint: disable=import-outside-toplevel
        from ansible.plugins.loader import init_plugin_loader  # pylint: disable=import-outside-toplevel
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')  # the collection finder a test process already configured
            init_plugin_loader([regen.COLL_ROOT])
        _LOADER.append(True)


def _trust(value):
    from ansible.template import trust_as_template  # pylint: disable=import-outside-toplevel
    if isinstance(value, dict):
        return dict((k, _trust(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_trust(v) for v in value]
    return trust_as_template(value) if isinstance(value, str) else value


def effective(profile, host, role_values):
    """ds4_effective of host as the config play publishes it (plugins/action/effective_config.py): the compile, then
    ds4_effective.service (the layout and the docker run argv) from the inventory's role variables."""
    eff = ds4_config.compute_effective(regen.inventory_inputs(profile), host)
    errors, _warnings = publish(eff, dict((k, v) for k, v in role_values.items() if k in LAYOUT_VARS),
                                role_inputs.argv_settings(role_values, regen.role_options()), host)
    assert not errors, errors
    return eff


def render(profile, host, role_values=None):
    """-> (unit file name, text) of the vLLM unit of host, as install.yml's template lookup renders it."""
    from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel
    from ansible.plugins.loader import lookup_loader  # pylint: disable=import-outside-toplevel
    from ansible.template import Templar, trust_as_template  # pylint: disable=import-outside-toplevel
    _plugin_loader()
    role_values = dict(role_values or {})
    variables = {}
    for part in ('defaults', 'vars'):
        with open(os.path.join(ROLE, part, 'main.yml')) as handle:
            variables.update(_trust(yaml.safe_load(handle)))
    variables.update(_trust(role_values))
    eff = effective(profile, host, role_values)
    variables.update(ds4_effective=eff, inventory_hostname=host, _vllm_service_node={'image': {'id': FAKE_IMAGE_ID}})
    loader = DataLoader()
    templar = Templar(loader=loader, variables=variables)
    lookup = lookup_loader.get('ansible.builtin.template', loader=loader, templar=Templar(loader=loader, variables=variables))
    text = lookup.run([TEMPLATE], variables=variables)[0]
    return templar.template(trust_as_template('{{ vllm_service_unit_name }}')), text


def cases():
    """(golden directory of the host, recipe, host, role variables) of every golden unit."""
    out = []
    for profile in ds4_config.PROFILES:
        out.extend((os.path.join(UNITS_DIR, profile, host), profile, host, {}) for host in regen.HOSTS)
    for variant in sorted(UNIT_VARIANTS):
        profile, values = UNIT_VARIANTS[variant]
        out.extend((os.path.join(UNITS_DIR, '_variants', variant, host), profile, host, values) for host in regen.HOSTS)
    return out


def main():
    for out, profile, host, values in cases():
        name, text = render(profile, host, values)
        os.makedirs(out, exist_ok=True)
        for stale in glob.glob(os.path.join(out, '*')):
            os.unlink(stale)
        with open(os.path.join(out, name), 'w') as handle:
            handle.write(text)
        print('wrote %s/%s' % (os.path.relpath(out, regen.REPO), name))


if __name__ == '__main__':
    main()
