# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Garble detectors for a model reply to an English prompt (validate.yml).

Pure Python (no Ansible imports).  Each detector returns a list of findings
{'check': name, 'excerpt': str, 'detail': str}; [] means clean.

Checks (names are stable):
  empty_reply        reply is empty or whitespace only
  unexpected_script  share of letters from CJK / Hangul / Kana / Cyrillic / Arabic / Hebrew /
                     Thai / Devanagari scripts above max_ratio (default 0.05) of all letters,
                     or a run of >= min_run (default 8) such letters even below the ratio
  char_run           one non-space character repeated >= 40 times in a row (separator
                     characters - = _ * # ~ . are ignored: markdown rules and tables)
  substring_loop     a 2-40 character unit containing a letter or digit, repeated back to back
                     >= 8 times and spanning >= 60 characters (catches loops without spaces)
  token_loop         a 1-8 word n-gram repeated back to back >= 6 times and >= 24 words
                     (words = runs of letters/digits; punctuation ignored)
  leaked_token       chat-template / tool markup in the reply: DeepSeek <｜...｜> tokens,
                     <|im_start|>-style tokens, <tool_call>, </think>, <function_calls>, ...

API:
  check_reply(text, **thresholds) -> [finding]    all checks
  empty_reply(text), unexpected_script(text, max_ratio=0.05, min_run=8), char_run(text, min_run=40),
  substring_loop(text, min_repeats=8, min_span=60), token_loop(text, min_repeats=6, min_tokens=24),
  leaked_tokens(text) -> [finding]
  script_ratio(text) -> (unexpected_letters, letters)
"""

from __future__ import annotations

import re
from collections.abc import Iterable

EXCERPT = 60

# (start, end) code point ranges counted as unexpected for an English reply
UNEXPECTED_RANGES = (
    (0x0400, 0x052F),   # Cyrillic
    (0x0590, 0x05FF),   # Hebrew
    (0x0600, 0x06FF),   # Arabic
    (0x0900, 0x097F),   # Devanagari
    (0x0E00, 0x0E7F),   # Thai
    (0x1100, 0x11FF),   # Hangul Jamo
    (0x3040, 0x30FF),   # Hiragana, Katakana
    (0x3100, 0x312F),   # Bopomofo
    (0x3400, 0x4DBF),   # CJK Extension A
    (0x4E00, 0x9FFF),   # CJK Unified Ideographs
    (0xAC00, 0xD7AF),   # Hangul syllables
    (0xF900, 0xFAFF),   # CJK compatibility ideographs
    (0x20000, 0x2FA1F),  # CJK Extensions B..
)
# CJK punctuation / fullwidth forms: not letters, but a strong drift signal
# (U+FF5C, the fullwidth bar of DeepSeek template tokens, is left to leaked_tokens)
UNEXPECTED_PUNCT = ((0x3000, 0x303F), (0xFF00, 0xFF5B), (0xFF5D, 0xFFEF))

LEAK_PATTERNS = (
    ("deepseek_special", r"</?\uff5c[^<>\uff5c\s]{1,60}\uff5c"),    # <｜begin▁of▁sentence｜>, <｜Assistant｜>, <｜DSML｜invoke
    ("deepseek_special_ascii", r"<\|(?:begin|end)[\u2581_]of[\u2581_]sentence\|>"),
    ("chatml", r"<\|(?:im_start|im_end|im_sep|endoftext|eot_id|start_header_id|end_header_id|eom_id|"
               r"tool_call_begin|tool_call_end|tool_calls_section_begin|tool_calls_section_end|assistant|user|system)\|>"),
    ("tool_call_tag", r"</?tool_call>"),
    ("tool_calls_tag", r"</?tool_calls>"),
    ("think_tag", r"</?think>"),
    ("function_calls_tag", r"</?(?:antml:)?function_calls>|<invoke name=|</invoke>|<parameter name="),
    ("tool_response_tag", r"</?tool_response>"),
)
_LEAKS = tuple((name, re.compile(p)) for name, p in LEAK_PATTERNS)
_SEPARATORS = set("-=_*#~.")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _in(cp: int, ranges: Iterable[tuple[int, int]]) -> bool:
    for lo, hi in ranges:
        if lo <= cp <= hi:
            return True
    return False


def _is_unexpected(ch: str) -> bool:
    cp = ord(ch)
    return _in(cp, UNEXPECTED_RANGES) or _in(cp, UNEXPECTED_PUNCT)


def _excerpt(text: str, start: int, end: int | None = None, width: int = EXCERPT) -> str:
    end = start + 1 if end is None else end
    a = max(0, start - 10)
    b = min(len(text), max(end, a + width))
    b = min(b, a + width)
    return text[a:b].replace("\n", "\\n")


def script_ratio(text: str) -> tuple[int, int]:
    """(unexpected, letters): unexpected-script characters vs all letters + unexpected punctuation."""
    unexpected = 0
    letters = 0
    for ch in text:
        bad = _is_unexpected(ch)
        if ch.isalpha() or bad:
            letters += 1
            if bad:
                unexpected += 1
    return unexpected, letters


def empty_reply(text: str | None) -> list[dict[str, str]]:
    if text is None or not text.strip():
        return [{"check": "empty_reply", "excerpt": repr(text), "detail": "reply is empty"}]
    return []


def unexpected_script(text: str, max_ratio: float = 0.05, min_run: int = 8) -> list[dict[str, str]]:
    if not text:
        return []
    bad, letters = script_ratio(text)
    if not bad:
        return []
    first = next(i for i, ch in enumerate(text) if _is_unexpected(ch))
    ratio = float(bad) / letters if letters else 0.0
    if ratio > max_ratio:
        detail = "%d of %d letters (%.1f%%) are CJK/non-Latin script (limit %.1f%%)" % (bad, letters, 100 * ratio, 100 * max_ratio)
        return [{"check": "unexpected_script", "excerpt": _excerpt(text, first), "detail": detail}]
    run = re.search(u"(?:[%s]){%d,}" % (_class(), min_run), text)
    if run:
        return [{"check": "unexpected_script", "excerpt": _excerpt(text, run.start(), run.end()),
                 "detail": "run of %d CJK/non-Latin characters" % (run.end() - run.start())}]
    return []


def _class() -> str:
    parts: list[str] = []
    for lo, hi in UNEXPECTED_RANGES + UNEXPECTED_PUNCT:
        parts.append(u"%s-%s" % (_u(lo), _u(hi)))
    return u"".join(parts)


def _u(cp: int) -> str:
    return u"\\U%08x" % cp


def char_run(text: str, min_run: int = 40) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for m in re.finditer(r"(\S)\1{%d,}" % (min_run - 1), text or ""):
        if m.group(1) in _SEPARATORS:
            continue
        out.append({"check": "char_run", "excerpt": _excerpt(text, m.start(), m.end()),
                    "detail": "%r repeated %d times" % (m.group(1), m.end() - m.start())})
        break
    return out


def substring_loop(text: str, min_repeats: int = 8, min_span: int = 60) -> list[dict[str, str]]:
    rx = re.compile(r"(.{2,40}?)\1{%d,}" % (min_repeats - 1), re.S)
    pos = 0
    text = text or ""
    while True:
        m = rx.search(text, pos)
        if not m:
            return []
        unit = m.group(1)
        span = m.end() - m.start()
        if span >= min_span and re.search(r"[^\W_]", unit, re.UNICODE) and len(set(unit.strip())) > 1:
            return [{"check": "substring_loop", "excerpt": _excerpt(text, m.start(), m.end()),
                     "detail": "%r repeated %d times" % (unit, span // len(unit))}]
        pos = m.start() + 1


def token_loop(text: str, min_repeats: int = 6, min_tokens: int = 24, max_n: int = 8) -> list[dict[str, str]]:
    words = [w.lower() for w in _WORD.findall(text or "")]
    spans = [m.span() for m in _WORD.finditer(text or "")]
    n_words = len(words)
    for n in range(1, max_n + 1):
        i = 0
        while i + n <= n_words:
            unit = words[i:i + n]
            k = 1
            while i + (k + 1) * n <= n_words and words[i + k * n:i + (k + 1) * n] == unit:
                k += 1
            if k >= min_repeats and k * n >= min_tokens:
                start, end = spans[i][0], spans[i + k * n - 1][1]
                return [{"check": "token_loop", "excerpt": _excerpt(text, start, end),
                         "detail": "%r repeated %d times" % (" ".join(unit), k)}]
            i += max(1, (k - 1) * n) if k > 1 else 1
    return []


def leaked_tokens(text: str) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for name, rx in _LEAKS:
        m = rx.search(text or "")
        if m:
            out.append({"check": "leaked_token", "excerpt": _excerpt(text, m.start(), m.end()),
                        "detail": "%s: %s" % (name, m.group(0))})
    return out


def check_reply(text: str | None, max_script_ratio: float = 0.05, script_run: int = 8, char_run_min: int = 40,
                loop_repeats: int = 6, loop_tokens: int = 24, substring_repeats: int = 8,
                substring_span: int = 60) -> list[dict[str, str]]:
    """Run every check; [] when the reply is clean.  Empty replies return only empty_reply."""
    empty = empty_reply(text)
    if empty:
        return empty
    if text is None:  # pragma: no cover - empty_reply flags None
        raise AssertionError('check_reply: no text past empty_reply')
    out: list[dict[str, str]] = []
    out += unexpected_script(text, max_script_ratio, script_run)
    out += char_run(text, char_run_min)
    out += token_loop(text, loop_repeats, loop_tokens)
    if not out:
        out += substring_loop(text, substring_repeats, substring_span)
    out += leaked_tokens(text)
    return out
