# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small randomly initialised Llama and a local WordLevel tokenizer, for the real-vLLM recorder (GPU machine).

    python3 tests/real_vllm/make_model.py OUTDIR [hidden layers heads kv_heads intermediate vocab max_pos]

Defaults (real-vllm-on-device notes, Part 2 section 5): 2048 16 16 8 5632 32000 262144 (886M parameters, bf16).
Vocabulary: <unk> <s> </s> <pad> system user assistant w7 ... w<vocab-1>, split on whitespace: one word
``wN`` is one token, so a prompt of N such words is exactly N prompt tokens.
Needs torch, transformers and tokenizers (the GPU machine's image has them); nothing is downloaded.
"""


import sys

SPECIALS = ['<unk>', '<s>', '</s>', '<pad>', 'system', 'user', 'assistant']
CHAT_TEMPLATE = ("{% for m in messages %}<s> {{ m['role'] }} {{ m['content'] }} </s> {% endfor %}"
                 "{% if add_generation_prompt %}<s> assistant {% endif %}")
DEFAULTS = (2048, 16, 16, 8, 5632, 32000, 262144)


def word(i):
    """The vocabulary word of token id i (i >= len(SPECIALS))."""
    return 'w%d' % i


def main(argv):
    import torch  # pylint: disable=import-error
    from tokenizers import Tokenizer, models, pre_tokenizers  # pylint: disable=import-error
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # pylint: disable=import-error
    out = argv[0]
    hidden, layers, heads, kv_heads, inter, vocab, max_pos = [int(x) for x in argv[1:8]] or DEFAULTS
    words = SPECIALS + [word(i) for i in range(len(SPECIALS), vocab)]
    tok = Tokenizer(models.WordLevel(vocab=dict((w, i) for i, w in enumerate(words)), unk_token='<unk>'))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token='<unk>', bos_token='<s>', eos_token='</s>',
                                   pad_token='<pad>')
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    cfg = LlamaConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                      intermediate_size=inter, vocab_size=vocab, max_position_embeddings=max_pos, rope_theta=1e6,
                      bos_token_id=1, eos_token_id=2, pad_token_id=3, tie_word_embeddings=False, torch_dtype='bfloat16')
    torch.manual_seed(0)
    with torch.device('cuda' if torch.cuda.is_available() else 'cpu'):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    print('model %s: %d parameters' % (out, sum(p.numel() for p in model.parameters())))


if __name__ == '__main__':
    main(sys.argv[1:])
