# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Redaction: secret values replaced by ``<redacted>`` in text that leaves a node (doctor's evidence and findings).

Pure Python standard library (no Ansible imports).  Used by ``dgxspark.ds4.ds4_doctor``.
"""

from __future__ import annotations


import re
from collections.abc import Iterable

_SECRET_NAME = r"[A-Za-z0-9_.-]*(?:KEY|TOKEN(?!S|IZ)|SECRET|PASSWORD|PASSWD|CREDENTIAL)[A-Za-z0-9_.-]*"
_RX_ASSIGN = re.compile(r"(?i)(\b%s\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;}]+)" % _SECRET_NAME)
_RX_DICT = re.compile(r"(?i)(['\"]%s['\"]\s*:\s*)(\"[^\"]*\"|'[^']*'|\[[^\]]*\]|[^\s,}]+)" % _SECRET_NAME)
_RX_FLAG = re.compile(r"(?i)(--(?:api[-_]key|hf[-_]token|[a-z-]*(?:token|secret|password))(?:\s+|=))(\"[^\"]*\"|'[^']*'|\S+)")
_RX_BEARER = re.compile(r"(?i)(Bearer\s+)[A-Za-z0-9._~+/=-]+")
_RX_HF = re.compile(r"\bhf_[A-Za-z0-9]{20,}\b")
REDACTED = "<redacted>"


def redact(text: str | None, extra: Iterable[str] = ()) -> str | None:
    """Replace secret values: NAME=value / NAME: value / 'name': value where NAME contains KEY, TOKEN,
    SECRET, PASSWORD; --api-key/--hf-token values; Bearer tokens; hf_... tokens; and every literal in extra."""
    if text is None:
        return text
    for lit in extra:
        if lit:
            text = text.replace(lit, REDACTED)
    text = _RX_FLAG.sub(lambda m: m.group(1) + REDACTED, text)
    text = _RX_DICT.sub(lambda m: m.group(1) + ("'%s'" % REDACTED), text)
    text = _RX_ASSIGN.sub(lambda m: m.group(1) + REDACTED, text)
    text = _RX_BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _RX_HF.sub(REDACTED, text)
    return text
