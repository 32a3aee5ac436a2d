# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared harness for running a module's real main() in unit tests (community.general style):
exit_json / fail_json raise instead of exiting, carrying the result."""


from ansible.module_utils import basic


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


def exit_json(self, **kwargs):  # pylint: disable=unused-argument
    raise ExitJson(kwargs)


def fail_json(self, **kwargs):  # pylint: disable=unused-argument
    raise FailJson(kwargs)


def patch_exit(monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, 'exit_json', exit_json)
    monkeypatch.setattr(basic.AnsibleModule, 'fail_json', fail_json)


def run_main(main, args):
    """Run a module's main() with args (patch_exit first); -> (ExitJson or FailJson, the result)."""
    import pytest  # pylint: disable=import-outside-toplevel
    from ansible.module_utils.testing import patch_module_args  # pylint: disable=import-outside-toplevel
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as info:
            main()
    return info.type, info.value.args[0]


class _Conn(object):
    """A connection that pipelines, or not (pipelining)."""
    pipelining = True

    def is_pipelining_enabled(self):
        return self.pipelining


def bare_action(cls):
    """An action plugin object with only a pipelining connection (the decisions under test read nothing else)."""
    plugin = object.__new__(cls)
    plugin._connection = _Conn()
    return plugin
