# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for garble detectors: planted garble is caught, normal replies pass."""


import pytest

from ansible_collections.dgxspark.ds4.plugins.module_utils._node import garble

CLEAN_PROSE = (
    "Tensor parallelism splits each weight matrix across the two GPUs, so every layer needs an all-reduce. "
    "With both RoCE twins in use, a 1 GiB all-reduce reaches about 22 GB/s, which is close to line rate for a "
    "200 Gbps link. Latency matters more than bandwidth for decode, because each step moves only a few kilobytes."
)

CLEAN_CODE = '''Here is a small Python function that computes per-stream decode speed:

```python
def decode_tps(tokens, t_first, t_last):
    """Return tokens per second, excluding the first token."""
    if tokens < 2 or t_last <= t_first:
        return None
    return (tokens - 1) / (t_last - t_first)

buf = [0, 0, 0, 0, 0, 0, 0, 0]
print(decode_tps(256, 0.16, 5.91))  # 44.35
```

# ==============================================================
# The separator above is long on purpose; it is not garble.
'''

CLEAN_TABLE = '''| Concurrency | Baseline | Throughput | Delta |
|---|---|---|---|
| 1 | 37.8 | 36.5 | -3% |
| 2 | 55.9 | 52.1 | -7% |
| 4 | 88.0 | 73.7 | -16% |
| 8 | 86.3 | 117.5 | +36% |
| 16 | 89.5 | 163.2 | +82% |

----------------------------------------------------------------

Numbers: 3.14159, 2.71828, 1,048,576 tokens, 192.168.100.10, 0x15b3, sha256 9e165c30e2704aec5d9d593cce3eebd58bbef1cb.
The Greek letters alpha (α) and beta (β) appear in formulas; "naïve" and "café" are English too.
'''

CLEAN_CHINESE_MENTION = "In Mandarin, hello is written 你好 (ni hao); the rest of this answer stays in English as requested."


@pytest.mark.parametrize("text", [CLEAN_PROSE, CLEAN_CODE, CLEAN_TABLE, CLEAN_CHINESE_MENTION, "OK", "NVFP4 DSPARK OK", "42"])
def test_clean_replies_pass(text):
    assert garble.check_reply(text) == []


def test_empty_reply():
    for text in ("", "   \n\t", None):
        out = garble.check_reply(text)
        assert [f["check"] for f in out] == ["empty_reply"]


def test_chinese_drift_ratio():
    text = CLEAN_PROSE[:120] + " 然后我们需要考虑模型的并行策略以及通信开销的问题。"
    out = garble.check_reply(text)
    assert [f["check"] for f in out] == ["unexpected_script"]
    assert out[0]["excerpt"].find(u"然") >= 0
    bad, letters = garble.script_ratio(text)
    assert bad == 25  # 24 ideographs + the ideographic full stop
    assert "%d of %d letters" % (bad, letters) in out[0]["detail"]


def test_cjk_run_below_ratio_is_caught():
    text = CLEAN_PROSE * 20 + u" 这是一个很长的中文句子片段"
    bad, letters = garble.script_ratio(text)
    assert float(bad) / letters < 0.05
    out = garble.unexpected_script(text)
    assert out and out[0]["detail"] == "run of 13 CJK/non-Latin characters"


def test_other_scripts():
    assert garble.check_reply("The answer is " + u"Привет мир как дела сегодня")[0]["check"] == "unexpected_script"
    assert garble.check_reply("Result: " + u"こんにちは世界")[0]["check"] == "unexpected_script"


def test_char_run():
    text = "The answer is " + "!" * 45 + " done."
    out = garble.check_reply(text)
    assert [f["check"] for f in out] == ["char_run"]
    assert out[0]["detail"] == "'!' repeated 45 times"
    # separators (markdown rules) are fine
    assert garble.char_run("=" * 80) == []
    assert garble.char_run("!" * 39) == []


def test_token_loop():
    text = "Sure. " + "I will check the file. " * 8 + "Done."
    out = garble.check_reply(text)
    assert [f["check"] for f in out] == ["token_loop"]
    assert out[0]["detail"] == "'i will check the file' repeated 8 times"


def test_single_word_loop():
    out = garble.token_loop("the " * 30)
    assert out[0]["detail"] == "'the' repeated 30 times"
    assert garble.token_loop("the " * 23) == []


def test_substring_loop_without_spaces():
    text = "Answer: " + "abc123" * 12
    out = garble.check_reply(text)
    assert [f["check"] for f in out] == ["substring_loop"]
    assert out[0]["detail"] == "'abc123' repeated 12 times"


@pytest.mark.parametrize("leak,name", [
    (u"<\uff5cbegin\u2581of\u2581sentence\uff5c>", "deepseek_special"),
    (u"<\uff5cAssistant\uff5c>", "deepseek_special"),
    (u"<\uff5cDSML\uff5cfunction_calls>", "deepseek_special"),
    ("<|im_start|>assistant", "chatml"),
    ("<|eot_id|>", "chatml"),
    ('<tool_call>{"name": "get_weather"}</tool_call>', "tool_call_tag"),
    ("</think>", "think_tag"),
    ("<function_calls>", "function_calls_tag"),
    ("<tool_response>", "tool_response_tag"),
])
def test_leaked_tokens(leak, name):
    out = garble.check_reply("The weather in Paris is mild. " + leak)
    assert [f["check"] for f in out] == ["leaked_token"]
    assert out[0]["detail"].startswith(name + ": ")
    assert leak[:8] in out[0]["excerpt"]


def test_multiple_findings_reported_together():
    text = u"\u4f60\u597d" * 20 + " </think>"
    checks = [f["check"] for f in garble.check_reply(text)]
    assert checks == ["unexpected_script", "leaked_token"]


def test_excerpt_is_short_and_single_line():
    out = garble.check_reply("x\n" * 3 + "!" * 200)
    assert len(out[0]["excerpt"]) <= 70
    assert "\n" not in out[0]["excerpt"]
