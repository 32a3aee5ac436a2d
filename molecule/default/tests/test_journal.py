# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One journal entry per vLLM log line on both nodes: the unit runs `docker run` attached, so systemd keeps the
container's output under the unit; the container's own log driver (none) adds no second copy under dockerd's
CONTAINER_NAME. A unique marker is written to the running container's stdout (the pipe vLLM writes to: PID 1's fd 1,
inherited by vLLM) and counted in the WHOLE journal of the node (every unit, every field), not only `-u`."""


import json
import os
import sys
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'resources', 'tests'))
import ds4_drill as d  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not d.INVENTORY, reason='runs inside molecule verify only')


def _message(entry):
    message = entry.get('MESSAGE', '')
    if isinstance(message, list):  # journald gives bytes as a list of ints
        message = bytes(message).decode('utf-8', 'replace')
    return message


def _marked(name, since, marker):
    """Every journal entry of the node since `since` whose message holds the marker (all units, all transports)."""
    out = d.node(name, 'sh', '-c', 'journalctl --no-pager -o json --since @%d | grep -F %s || true' % (since, marker))
    return [e for e in (json.loads(line) for line in out.splitlines() if line.startswith('{')) if marker in _message(e)]


@pytest.mark.parametrize('name, role', [('spark1', 'head'), ('spark2', 'worker')])
def test_one_journal_entry_per_container_log_line(name, role):
    unit = d.unit(role)
    driver = d.node(name, 'docker', 'inspect', '-f', '{{.HostConfig.LogConfig.Type}}', d.container(role))
    assert driver == 'none', driver
    since = int(d.node(name, 'date', '+%s')) - 1
    marker = 'ds4-journal-marker-%s-%s' % (role, uuid.uuid4().hex)
    d.node(name, 'docker', 'exec', d.container(role), 'sh', '-c', 'echo "%s" > /proc/1/fd/1' % marker)
    # the unit's copy arrives through the attached CLI; wait for it, then make journald write everything it holds
    d.wait_until('the marker under %s on %s' % (unit, name),
                 lambda: [e for e in _marked(name, since, marker) if e.get('_SYSTEMD_UNIT') == unit], 30.0)
    d.node(name, 'journalctl', '--sync')
    entries = _marked(name, since, marker)
    where = [(e.get('_SYSTEMD_UNIT'), e.get('CONTAINER_NAME'), e.get('SYSLOG_IDENTIFIER')) for e in entries]
    print('%s: %d journal entries for one container log line: %s' % (name, len(entries), where))
    assert len(entries) == 1, where
    assert entries[0].get('_SYSTEMD_UNIT') == unit and 'CONTAINER_NAME' not in entries[0], where
    assert _message(entries[0]) == marker
