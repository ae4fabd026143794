"""The tiny random Qwen3 chat fixture (`tests/qwen3_chat.py`) behaves like Qwen3 where generation code cares: its
special tokens and their roles, `<think>`/`</think>` as single non-special tokens, an exact text round trip, the chat
template's strings, a local reload, and the same weights for the same seed."""
import hashlib

import pytest
import torch
from fastcore.test import test_eq, test_ne, test_fail
from transformers import AutoModelForCausalLM, AutoTokenizer

from qwen3_chat import build_random_qwen3_chat   # tests/ is on sys.path under pytest


def _digest(path): return hashlib.sha256(path.read_bytes()).hexdigest()   # test_eq on raw bytes is slow


def _load(path):
    "Tokenizer and model from a saved directory (local files only)."
    return AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path)


@pytest.fixture(scope='module')
def saved(tmp_path_factory):
    return build_random_qwen3_chat(tmp_path_factory.mktemp('qwen3') / 'm', seed=0)


@pytest.fixture(scope='module')
def tok(saved): return AutoTokenizer.from_pretrained(saved)


def test_special_tokens_and_roles(tok):
    ids = tok.convert_tokens_to_ids(['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<think>', '</think>'])
    test_eq(ids, [0, 1, 2, 598, 599])
    test_eq(len(tok), 600)
    test_eq((tok.eos_token, tok.pad_token, tok.bos_token), ('<|im_end|>', '<|endoftext|>', None))
    test_eq(tok.padding_side, 'left')
    test_eq(sorted(tok.all_special_ids), [0, 1, 2])          # <think> and </think> are not special


def test_think_is_one_non_special_token(tok):
    think, close, im_end = tok.convert_tokens_to_ids(['<think>', '</think>', '<|im_end|>'])
    ids = tok("a</think>b", add_special_tokens=False).input_ids
    test_eq(ids.count(close), 1)
    test_eq(len(ids), 3)                                   # 'a', '</think>', 'b'
    ids = tok("<think>\nx = 1\n</think>\n\nok<|im_end|>", add_special_tokens=False).input_ids
    test_eq((ids.count(think), ids.count(close), ids[-1]), (1, 1, im_end))
    # skip_special_tokens drops the chat markup but keeps the thinking markers, as Qwen3's tokenizer does
    test_eq(tok.decode(ids, skip_special_tokens=True), "<think>\nx = 1\n</think>\n\nok")


def test_text_round_trips(tok):
    for s in ["def f(x):\n    return x + 1  # ok .\n", "\n\n\t  trailing  \n", "a , b . c ! ' \" ~`@#$%^&*()",
              "x" * 300, "", "é ∑ 🙂"]:
        test_eq(tok.decode(tok(s, add_special_tokens=False).input_ids), s)


def test_left_padding(tok):
    batch = tok(["a", "a longer line"], padding=True, return_tensors='pt')
    test_eq(batch.input_ids[0, 0].item(), tok.pad_token_id)
    test_eq(batch.attention_mask[0, 0].item(), 0)
    test_eq(batch.attention_mask[:, -1].tolist(), [1, 1])


def test_chat_template(tok):
    msgs = [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'Hi\nthere'}]
    convo = '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi\nthere<|im_end|>\n'
    test_eq(tok.apply_chat_template(msgs, tokenize=False), convo)
    test_eq(tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True), convo + '<|im_start|>assistant\n')
    test_eq(tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=True),
            convo + '<|im_start|>assistant\n')
    test_eq(tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=False),
            convo + '<|im_start|>assistant\n<think>\n\n</think>\n\n')


def test_reload_and_generation_config(saved):
    tok, model = _load(saved)
    cfg = model.config
    test_eq((cfg.model_type, cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads,
             cfg.head_dim, cfg.intermediate_size, cfg.max_position_embeddings, cfg.vocab_size, cfg.tie_word_embeddings),
            ('qwen3', 2, 64, 4, 2, 16, 128, 2048, 600, True))
    test_eq((model.generation_config.eos_token_id, model.generation_config.pad_token_id), ([2, 0], 0))
    test_ne(model.model.embed_tokens.weight[0].detach().abs().sum().item(), 0.0)   # the pad row is random too
    ids = tok.apply_chat_template([{'role': 'user', 'content': 'hi'}], add_generation_prompt=True,
                                  return_tensors='pt', return_dict=True).input_ids
    with torch.no_grad(): out = model.generate(ids, max_new_tokens=5, do_sample=False)
    test_eq(out.shape[0], 1)
    test_eq(out[0, :ids.shape[1]].tolist(), ids[0].tolist())


def test_same_seed_same_model(saved, tmp_path):
    state = torch.get_rng_state()
    again, other = build_random_qwen3_chat(tmp_path / 'a', seed=0), build_random_qwen3_chat(tmp_path / 'b', seed=1)
    test_eq(torch.get_rng_state(), state)                  # building does not move the caller's global RNG
    for name in ('model.safetensors', 'tokenizer.json', 'chat_template.jinja'):
        test_eq(_digest(again / name), _digest(saved / name))
    w0, w1 = (AutoModelForCausalLM.from_pretrained(p).model.embed_tokens.weight for p in (saved, other))
    test_ne(w0.detach(), w1.detach())


def test_bad_vocab_size(tmp_path):
    test_fail(lambda: build_random_qwen3_chat(tmp_path, vocab_size=200), contains="vocab_size=200 is below 261")
