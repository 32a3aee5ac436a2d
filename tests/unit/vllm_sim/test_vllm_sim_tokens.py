# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prompt token counting: with the model directory's tokenizer.json the simulator counts like it (the `tokenizers`
library, or without it the WordLevel + Whitespace rule, which must give the same counts); else ceil(chars/4)."""


import json
import sys

import pytest

from vllm_sim import engine as eng  # pylint: disable=import-error

tokenizers = pytest.importorskip("tokenizers")

TEXTS = ["The quick brown fox, said Holmes (quietly), jumps over 2 lazy dogs: isn't it?",
         "## Heading\n\n- item `code` --flag=value; x.y/z [link](http://a.b/c) 3.14 ...!?",
         "naïve café — déjà vu 12,345 tok/s", "", "   "]


@pytest.fixture(autouse=True)
def _reset():
    yield
    eng.use_tokenizer(None)


def _wordlevel(path):
    from tokenizers import Tokenizer, models, pre_tokenizers  # pylint: disable=import-outside-toplevel
    tok = Tokenizer(models.WordLevel(vocab={"[UNK]": 0, "The": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path))
    return tok


def test_default_rule_without_tokenizer_json(tmp_path):
    assert eng.use_tokenizer(str(tmp_path)) == eng.DEFAULT_COUNT_RULE
    assert eng.count_prompt_tokens("x" * 9) == 3


def test_tokenizers_library_counts(tmp_path):
    tok = _wordlevel(tmp_path / "tokenizer.json")
    assert eng.use_tokenizer(str(tmp_path)).startswith("tokenizers: ")
    for text in TEXTS:
        assert eng.count_prompt_tokens(text) == max(1, len(tok.encode(text, add_special_tokens=False).ids)), text


def test_whitespace_rule_equals_the_library_without_it(tmp_path, monkeypatch):
    tok = _wordlevel(tmp_path / "tokenizer.json")
    monkeypatch.setitem(sys.modules, "tokenizers", None)   # import fails, as in the simulator image
    assert eng.use_tokenizer(str(tmp_path)).startswith("WordLevel+Whitespace rule: ")
    for text in TEXTS:
        assert eng.count_prompt_tokens(text) == max(1, len(tok.encode(text, add_special_tokens=False).ids)), text


def test_other_tokenizer_without_library_keeps_the_default(tmp_path, monkeypatch):
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE"}, "pre_tokenizer": {"type": "ByteLevel"}}))
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    assert eng.use_tokenizer(str(tmp_path)) == eng.DEFAULT_COUNT_RULE
    assert eng.count_prompt_tokens("abcdefgh") == 2
