"""Test support: a randomly initialised tiny Qwen3 chat model and a Qwen3-like tokenizer, built offline in a fraction
of a second, for tests of generation code that must see Qwen3's chat markup (`<|im_start|>`, `<|im_end|>`,
`<think>`/`</think>`) without downloading the real checkpoint."""
import inspect
import json
import textwrap
import functools
import collections
from pathlib import Path

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers.utils import logging as hf_logging
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

__all__ = ['build_random_qwen3_chat']

SPECIAL_TOKENS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>']   # Qwen3's specials; ids 0, 1, 2 here
THINK_TOKENS = ['<think>', '</think>']                              # added but NOT special, as in Qwen3

# Behaves like Qwen3's template for plain messages: one `<|im_start|>role\ncontent<|im_end|>\n` block per message;
# the generation prompt opens an assistant turn, and `enable_thinking=False` pre-fills an empty thinking block.
CHAT_TEMPLATE = (
    "{%- for m in messages -%}"
    "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}{{ '<think>\\n\\n</think>\\n\\n' }}{%- endif -%}"
    "{%- endif -%}")

_MIN_VOCAB = 256 + len(SPECIAL_TOKENS) + len(THINK_TOKENS)   # a byte-level BPE needs every byte as a token


@functools.lru_cache(maxsize=1)
def _corpus() -> str:
    "~140 KB of local Python source (stdlib), enough text for a few hundred BPE merges."
    return ''.join(inspect.getsource(m) for m in (json.decoder, json.encoder, textwrap, functools, collections))


def _train_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    "Byte-level BPE with Qwen3's special tokens; `len(result) == vocab_size`."
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(THINK_TOKENS), special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus().splitlines(keepends=True), trainer=trainer)
    # normalized=False so the byte-level pre-tokenizer cannot split them: one id wherever they occur in text
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK_TOKENS])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token='<|im_end|>', pad_token='<|endoftext|>',
                                   extra_special_tokens=SPECIAL_TOKENS[1:],   # listed as special, as Qwen3 lists them
                                   padding_side='left',                 # in the constructor, or it is not saved
                                   clean_up_tokenization_spaces=False,  # keeps decode(encode(s)) == s
                                   model_max_length=2048,               # the model's max_position_embeddings
                                   chat_template=CHAT_TEMPLATE)


def build_random_qwen3_chat(out_dir,             # directory to write (created if missing)
                            seed: int = 0,       # torch seed for the weights; same seed, same weights
                            vocab_size: int = 600,  # tokenizer length = embedding rows; at least 261
                           ) -> Path:
    "Save a randomly initialised tiny Qwen3 causal LM with a Qwen3-like chat tokenizer to `out_dir`; return its path."
    if vocab_size < _MIN_VOCAB: raise ValueError(f"vocab_size={vocab_size} is below {_MIN_VOCAB}: a byte-level BPE needs "
                                                 f"256 byte tokens plus {len(SPECIAL_TOKENS) + len(THINK_TOKENS)} markup tokens")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = _train_tokenizer(vocab_size)
    if len(tok) != vocab_size: raise RuntimeError(f"tokenizer has {len(tok)} tokens, not {vocab_size}: the corpus is too small")
    eot, im_end = tok.convert_tokens_to_ids(['<|endoftext|>', '<|im_end|>'])
    cfg = Qwen3Config(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=2048,
                      tie_word_embeddings=True, bos_token_id=None, eos_token_id=im_end)
    # no pad_token_id in the config (Qwen3's has none): with one, the init zeroes that embedding row, and tied to the
    # head it would pin the <|endoftext|> logit at 0; generation reads the pad id from generation_config instead
    with torch.random.fork_rng(devices=[]):   # seed the init without touching the caller's global RNG
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(cfg)
    model.generation_config = GenerationConfig(eos_token_id=[im_end, eot], pad_token_id=eot, bos_token_id=None)
    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()        # no "Writing model shards" bar in test or notebook output
    try: model.save_pretrained(out)
    finally:
        if bars_were_on: hf_logging.enable_progress_bar()
    tok.save_pretrained(out)
    return out
