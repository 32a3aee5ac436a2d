# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of dgxspark.ds4.vllm_ready, written once for the module and its action plugin.

The module validates them with these defaults. The action validates the same names without defaults
(``ACTION_ARGUMENT_SPEC``): an option left unset is filled from ds4_effective there, the rest by the module.
"""

from __future__ import annotations

from typing import Any

ARGUMENT_SPEC: dict[str, dict[str, Any]] = dict(
    role=dict(type="str", choices=["head", "worker"]),
    unit=dict(type="str"),
    container_name=dict(type="str"),
    api_host=dict(type="str"),
    api_port=dict(type="int"),
    api_key=dict(type="str", no_log=True),
    served_model_name=dict(type="str"),
    max_model_len=dict(type="int"),
    thinking=dict(type="bool"),
    checks=dict(type="bool", default=False),
    status=dict(type="bool", default=True),
    cursor=dict(type="str", default="", no_log=False),
    max_lines=dict(type="int", default=2000),
    chat_timeout=dict(type="float", default=60),
    docker_cli=dict(type="str", default="docker"),
    interval=dict(type="float", default=0.5),
    timeout=dict(type="float", default=2400),
    state_dir=dict(type="path"),
    round=dict(type="str"),
    mark_compile_cache=dict(type="bool", default=False),
    poll=dict(type="str"),
)

ACTION_ARGUMENT_SPEC = dict(
    (name, dict((key, value) for key, value in spec.items() if key != "default"))
    for name, spec in ARGUMENT_SPEC.items()
)
