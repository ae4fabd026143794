"""Integration tests of ugttt.policy on real models (CPU): the two-phase budget on a random tiny Qwen3 chat model, the
streaming gate inside generation on constructed histories, the round robin across calls, seeded reproducibility, clear
errors for bad inputs, the requires_grad invariant after scoring, and U_i over every position versus the completion."""
from dataclasses import replace

import math

import pytest
import torch
from fastcore.test import test_eq, test_ne, test_close, test_fail

from ugttt.policy import PAPER_TRANSITION, PolicyConfig, LoRAEnsemble, load_base_model, adapter_grads, round_robin, trainable_groups
from ugttt.generation import encode_prompt, generate_group, window_scores
from ugttt.scores import score_rollouts, adapter_logprobs
from ugttt.streaming import StreamingConfig, StreamingHistory, truncated_rollout_mask
from ugttt.tasks import get_task
from ugttt.uncertainty import float_tol
from qwen3_chat import build_random_qwen3_chat   # tests/ is on sys.path under pytest

pytestmark = pytest.mark.model   # not in test-fast (pytest.ini): generation and scoring with real models

TINY = PolicyConfig.preset("tiny", n_adapters=3)   # embedded model, K = 3 (short tests), think_cap 24, code_budget 160
GATE = StreamingConfig(window=8, min_tokens=8, interval=4, warmup_epochs=1)   # checks at 8, 12, 16, 20 thinking tokens
BIG = 1e3                                          # far above any window MI of the tiny ensemble (about 1e-4 nats)


def _seed(s): return torch.Generator().manual_seed(s)


@pytest.fixture(scope="module")
def ens(): return LoRAEnsemble.from_config(TINY)


@pytest.fixture(scope="module")
def prompt(ens): return encode_prompt(ens, get_task("cp26").prompt(None, style="compact"))


@pytest.fixture(scope="module")
def group(ens, prompt): return generate_group(ens, prompt, 4, generator=_seed(0))


@pytest.fixture(scope="module")
def ens64():
    "The tiny ensemble in float64, for claims of exact equality (in float32 they hold only to CPU-dependent rounding)."
    return LoRAEnsemble.from_config(replace(TINY, dtype="float64"))


# --- 1. the two-phase budget on a chat model -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    path = build_random_qwen3_chat(tmp_path_factory.mktemp("qwen3") / "m", seed=0)
    cfg = PolicyConfig(model=str(path), dtype="float32", device="cpu", n_adapters=2, think_cap=12, code_budget=8,
                       context_window=256, score_batch=4, train_batch=4, seed=0)
    return LoRAEnsemble.from_config(cfg)


def test_chat_prompt_uses_the_template(qwen):
    tok = qwen.tokenizer
    ids = encode_prompt(qwen, "Write a function.")
    test_eq(tok.decode(ids), "<|im_start|>user\nWrite a function.<|im_end|>\n<|im_start|>assistant\n")
    test_eq(encode_prompt(qwen, "Write a function.", chat=False), tok("Write a function.", add_special_tokens=False).input_ids)


def test_chat_stop_ids_and_think_end(qwen):
    tok = qwen.tokenizer
    test_eq(tok.convert_tokens_to_ids("<|im_end|>") in qwen.stop_ids, True)
    test_eq(tok.convert_tokens_to_ids("<|endoftext|>") in qwen.stop_ids, True)     # from generation_config
    test_eq(qwen.think_end_id, tok.convert_tokens_to_ids("</think>"))
    test_eq(qwen.transition_ids, tok(PAPER_TRANSITION, add_special_tokens=False).input_ids)
    test_eq(tok.decode(qwen.transition_ids), PAPER_TRANSITION)


def test_chat_rows_reach_the_cap_then_transition_then_bounded_code(qwen):
    "A random model (almost) never writes </think>: every row thinks 12 tokens, gets the transition verbatim, then <= 8 code tokens."
    g = generate_group(qwen, encode_prompt(qwen, "Write a function."), 4, generator=_seed(0))
    P, n_tr, cfg = g.prompt_len, len(qwen.transition_ids), qwen.cfg
    test_eq(g.closed, ["cap"] * 4)
    test_eq(g.n_think.tolist(), [cfg.think_cap] * 4)
    for i in range(4):
        n = int(g.attention_mask[i].sum())
        n_code = n - P - cfg.think_cap - n_tr
        forced = slice(P + cfg.think_cap, P + cfg.think_cap + n_tr)
        test_eq(g.input_ids[i, forced].tolist(), qwen.transition_ids)               # teacher-forced verbatim
        test_eq(g.gen_logprobs[i, forced].abs().sum().item(), 0.0)                   # ...with no log-prob
        test_eq(g.completion_mask[i, :n], truncated_rollout_mask(P, cfg.think_cap, n_tr, n_code))
        test_eq(g.think_mask[i, P:P + cfg.think_cap].all().item(), True)
        test_eq(1 <= n_code <= cfg.code_budget, True)
        if g.ends[i] == "code_budget": test_eq(n_code, cfg.code_budget)
        else: test_eq((g.ends[i], g.input_ids[i, n - 1].item() in qwen.stop_ids), ("eos", True))
        test_eq(g.completion_mask[i, n:].any().item(), False)                        # padding
        test_eq("</think>" in g.texts[i], True)                                      # the thinking tag survives decoding
    scores = score_rollouts(qwen, g, base=False)
    own = scores.token_logprobs[g.adapters, torch.arange(4)][g.completion_mask]     # the generator's re-scored log-probs
    D = qwen.base_model.config.hidden_size                              # 64: the length of every dot product
    # KV-cached decode against one full forward in float32: equal to rounding (measured 1e-6 at a scale of 7: tolerance 5e-5)
    test_close(own, g.gen_logprobs[g.completion_mask], eps=float_tol(torch.float32, D, float(own.abs().max())))


def test_chat_without_thinking_phase(qwen):
    "think_cap=None: every sampled token is code, nothing is forced, a row ends at EOS or the context window; no gate."
    cfg = replace(qwen.cfg, think_cap=None, context_window=48)
    plain = LoRAEnsemble(*load_base_model(cfg), cfg)
    g = generate_group(plain, encode_prompt(plain, "Write a function."), 3, generator=_seed(0))
    P = g.prompt_len
    test_eq((g.closed, g.n_think.tolist(), g.think_mask.any().item()), ([""] * 3, [0] * 3, False))
    test_eq(g.completion_mask, g.attention_mask & (torch.arange(g.input_ids.shape[1]) >= P))
    for i, n in enumerate(g.attention_mask.sum(-1).tolist()):
        if g.ends[i] == "context": test_eq(n, cfg.context_window)
        else: test_eq((g.ends[i], g.input_ids[i, n - 1].item() in plain.stop_ids), ("eos", True))
    test_fail(lambda: generate_group(plain, [1, 2], 2, streaming=StreamingConfig(), history=StreamingHistory()),
              contains="it needs think_cap")


# --- 2. the streaming gate inside generation -------------------------------------------------------------------------

def test_gate_closes_every_thinking_row_at_min_tokens(ens64, prompt):
    "A history far above any MI: each row still thinking at 8 tokens is closed there, then transition and code phase."
    ens = ens64                                                    # float64: the recorded score is compared exactly below
    group = generate_group(ens, prompt, 4, generator=_seed(0))
    g = generate_group(ens, prompt, 4, streaming=GATE, history=StreamingHistory(values=[BIG] * 20, epoch=1), generator=_seed(0))
    P, n_tr = g.prompt_len, len(ens.transition_ids)
    test_eq("gate" in g.closed, True)
    for i, rec in enumerate(g.streams):
        if g.closed[i] != "gate":                                  # closed itself (or ended) before the first check
            test_eq((g.closed[i] in ("model", ""), g.n_think[i].item() <= GATE.min_tokens, rec.check_steps), (True, True, []))
            continue
        test_eq((rec.stopped, rec.stop_step, rec.check_steps, len(rec.window_scores)), (True, 8, [8], 1))
        test_eq(g.n_think[i].item(), 8)
        test_eq(rec.tokens_after_stop, g.n_generated[i].item() - 8)
        test_eq(g.input_ids[i, P + 8:P + 8 + n_tr].tolist(), ens.transition_ids)
        n_code = rec.tokens_after_stop - n_tr
        test_eq(1 <= n_code <= TINY.code_budget, True)
        test_eq(g.completion_mask[i, :P + 8 + n_tr + n_code], truncated_rollout_mask(P, 8, n_tr, n_code))
        test_eq(g.input_ids[i, :P + 8], group.input_ids[i, :P + 8])   # same draws as without the gate up to the check
        # the recorded score (the due rows in one batch) is window_scores on the same prefix alone: the paper's window
        # with context. An MI is a difference of entropies of up to log V nats, so its rounding error scales with log V.
        prefix, think = g.input_ids[i, :P + 8], g.think_mask[i, :P + 8]
        D, V = ens.base_model.config.hidden_size, len(ens.tokenizer)
        test_close(window_scores(ens, [prefix], [think], GATE)[0], rec.window_scores[0], eps=float_tol(torch.float64, D, math.log(V)))
        # ...and the reference's window alone is another, still finite number
        alone = window_scores(ens, [prefix], [think], replace(GATE, context=False))[0]
        test_eq(torch.isfinite(torch.tensor(alone)).item(), True)
        test_ne(alone, rec.window_scores[0])


def test_gate_below_every_mi_checks_but_never_closes(ens, prompt, group):
    "Threshold -1: the checks at 8, 12, 16, 20 are recorded, nothing is closed by the gate, and the rollouts are unchanged."
    g = generate_group(ens, prompt, 4, streaming=GATE, history=StreamingHistory(values=[-1.0] * 20, epoch=1), generator=_seed(0))
    test_eq("gate" in g.closed, False)
    test_eq(g.input_ids, group.input_ids)                          # a gate that never fires changes nothing
    for i, rec in enumerate(g.streams):
        test_eq(rec.stopped, False)
        test_eq(rec.check_steps, [s for s in (8, 12, 16, 20) if s < g.n_think[i]])   # 24 is the cap: closed before a check
        test_eq(len(rec.window_scores), len(rec.check_steps))
        test_eq(all(s >= 0 for s in rec.window_scores), True)
    test_eq(sum(len(r.window_scores) for r in g.streams) > 0, True)


def test_gate_is_silent_in_warmup(ens, prompt, group):
    g = generate_group(ens, prompt, 4, streaming=GATE, history=StreamingHistory(values=[BIG] * 20, epoch=0), generator=_seed(0))
    test_eq([(r.stopped, r.check_steps, r.window_scores) for r in g.streams], [(False, [], [])] * 4)
    test_eq(g.input_ids, group.input_ids)


# --- 3-4. round robin across calls, seeded sampling ------------------------------------------------------------------

def test_round_robin_continues_across_groups(ens, prompt):
    first = generate_group(ens, prompt, 4, start=0, generator=_seed(5))
    second = generate_group(ens, prompt, 4, start=4, generator=_seed(6))
    test_eq((first.adapters.tolist(), second.adapters.tolist()), ([0, 1, 2, 0], [1, 2, 0, 1]))
    test_eq(first.adapters.tolist() + second.adapters.tolist(), round_robin(0, 8, 3))


def test_seeded_generation_is_reproducible(ens, prompt, group):
    test_eq(generate_group(ens, prompt, 4, generator=_seed(0)).input_ids, group.input_ids)
    other = generate_group(ens, prompt, 4, generator=_seed(1))
    test_eq(other.input_ids.shape == group.input_ids.shape and torch.equal(other.input_ids, group.input_ids), False)


# --- 5. bad inputs ---------------------------------------------------------------------------------------------------

def test_bad_generation_inputs_fail_clearly(ens, prompt):
    test_fail(lambda: generate_group(ens, [], 4), contains="the prompt is empty")
    test_fail(lambda: generate_group(ens, prompt, 0), contains="n must be a positive int")
    too_long = prompt * (TINY.context_window // len(prompt) + 1)
    test_fail(lambda: generate_group(ens, too_long, 2), contains="does not fit the context window")
    test_fail(lambda: generate_group(ens, prompt, 2, streaming=GATE), contains="streaming needs the gate's history")


def test_think_end_must_be_one_token():
    cfg = replace(TINY, think_end="</thinking>", transition="</thinking>\n")   # seven tokens in the embedded vocabulary
    test_fail(lambda: LoRAEnsemble(*load_base_model(cfg), cfg), contains="one token")


# --- 6. requires_grad invariant --------------------------------------------------------------------------------------

def test_adapters_stay_trainable_and_base_frozen(ens, group):
    scores = score_rollouts(ens, group)                                   # base log-probs: inside adapters_off
    lp = adapter_logprobs(ens, 1, group.input_ids, group.attention_mask)  # adapter 1 alone, in train mode
    test_eq(lp.requires_grad, True)
    lora = {id(p) for params in trainable_groups(ens) for p in params}   # the adapters' parameters (the stacks, or peft's)
    params = list(ens.model.parameters())
    test_eq(all(p.requires_grad for p in params if id(p) in lora), True)
    test_eq(any(p.requires_grad for p in params if id(p) not in lora), False)
    test_eq(len(lora), sum(p.requires_grad for p in params))
    test_eq(ens.model.training, False)                                    # back in eval mode
    again = score_rollouts(ens, group, base=False)                        # every adapter is active again
    test_close(again.token_logprobs, scores.token_logprobs, eps=1e-6)


# --- 7. U_i over every position ------------------------------------------------------------------------------------

def test_mi_positions_all_includes_the_prompt(ens, group):
    everywhere = LoRAEnsemble(*load_base_model(TINY), replace(TINY, mi_positions="all"))   # same seed: same adapters
    sc, sa = score_rollouts(ens, group, base=False), score_rollouts(everywhere, group, base=False)
    P = group.prompt_len
    test_close(sa.token_mi, sc.token_mi, eps=1e-7)
    test_eq(sa.mi_mask[:, 1:P].all().item(), True)                     # prompt positions that are predicted
    test_eq(sa.mi_mask[:, 0].any().item(), False)                      # column 0 is never predicted
    test_eq(sc.mi_mask[:, :P].any().item(), False)
    test_eq(sa.mi_mask, group.attention_mask & (torch.arange(group.input_ids.shape[1]) > 0))
    test_eq((sc.mi_mask & ~sa.mi_mask).any().item(), False)            # the completion is a subset of "all"
    test_ne(sa.uncertainty, sc.uncertainty)


def test_shared_prompt_gives_the_same_gradient(prompt):
    "The prompt run once with its cache repeated (prefix_len) gives the training forward's gradient of the plain forward."
    e = LoRAEnsemble(*load_base_model(TINY), replace(TINY, lora_dropout=0.0))
    task = get_task("cp26")
    parent = next(ev for ev in map(task.evaluate, generate_group(e, prompt, 8, generator=_seed(4)).texts) if ev.correct)
    g = generate_group(e, encode_prompt(e, task.prompt(parent.child_state(None), style="compact")), 4, generator=_seed(5))
    assert g.prompt_len > 50                       # a parent program in the prompt: the prefix is most of each row
    cfg64 = replace(TINY, dtype="float64", lora_dropout=0.0)
    e = LoRAEnsemble(*load_base_model(cfg64), cfg64)   # the gradients in float64, where the claim is exact (same adapters)
    grads = []
    for prefix in (0, g.prompt_len):
        lp = adapter_logprobs(e, 2, g.input_ids, g.attention_mask, prefix_len=prefix)
        lp[g.completion_mask].sum().backward()
        grads.append(torch.cat([g.flatten() for g in adapter_grads(e, 2)]))
        e.model.zero_grad(set_to_none=True)
    scale = float(grads[0].abs().max())
    # each gradient entry sums over every position of the group: n = its real tokens (measured: float32 9e-7, float64 5e-15)
    test_close(grads[1] / scale, grads[0] / scale, eps=float_tol(torch.float64, int(g.attention_mask.sum())))


# --- 8. the GPU path: generator device, older libraries ----------------------------------------------------------

def test_sampling_generator_lives_on_the_policy_device(ens, prompt):
    from ugttt.generation import sampling_generator, check_generator
    gen = sampling_generator(ens.device, 0)
    test_eq(gen.device, ens.device)                                        # what train() hands to generate_groups
    test_eq(generate_group(ens, prompt, 2, generator=gen).input_ids.shape[0], 2)
    # a CUDA policy with a CPU generator is refused before any compute (ATen would fail at the first token)
    test_fail(lambda: check_generator(torch.Generator(), torch.device("cuda", 0)), contains="generator is on cpu")


def test_trainer_makes_its_generator_on_the_policy_device():
    import inspect
    from ugttt import trainer
    src = inspect.getsource(trainer.build_state)                # train() (start_run) and the replay build a run's state, the generator included, here
    assert "sampling_generator(ens.device, cfg.seed)" in src and "torch.Generator()" not in inspect.getsource(trainer)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_train_on_cuda_samples_its_first_tokens(tmp_path):
    from ugttt.presets import make_config
    from ugttt.trainer import train
    cfg = make_config("cp26", "ugttt", "tiny", epochs=1, groups_per_epoch=2, decode_groups=2, **{"policy.device": "cuda"})
    recs = train(cfg, tmp_path / "run", progress=False)
    test_eq(len(recs), 1)


OLD_LIBS = __import__("os").environ.get("UGTTT_OLD_HF_LIBS")   # a `pip install --target` folder of older transformers/peft

OLD_LIBS_SCRIPT = r'''
import sys, torch, transformers, peft
sys.path.insert(0, sys.argv[2])
from dataclasses import replace
import qwen3_chat
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast
from ugttt.policy import PolicyConfig, LoRAEnsemble, adapter_grads, adapter_tensors, dtype_kwarg
from ugttt.generation import encode_prompt, generate_group, sampling_generator
from ugttt.scores import score_rollouts, adapter_logprobs

class OlderTokenizer(PreTrainedTokenizerFast):   # transformers < 5 calls extra_special_tokens additional_special_tokens
    def __init__(self, *a, extra_special_tokens=(), **kw): super().__init__(*a, additional_special_tokens=list(extra_special_tokens), **kw)

qwen3_chat.PreTrainedTokenizerFast = OlderTokenizer   # only the test model's tokenizer; the package is untouched
path = qwen3_chat.build_random_qwen3_chat(sys.argv[1], seed=0)
cfg = PolicyConfig(model=str(path), dtype="float32", device="cpu", n_adapters=3, think_cap=12, code_budget=8,
                   context_window=256, score_batch=4, seed=0, gradient_checkpointing=True, ensemble="peft")   # peft under the old names
load = lambda: AutoModelForCausalLM.from_pretrained(path, **dtype_kwarg(torch.float32)).eval()   # torch_dtype before 4.56
tok = PreTrainedTokenizerFast.from_pretrained(path)
ens = LoRAEnsemble(load(), tok, cfg)                   # gradient checkpointing under the old name, set_requires_grad's fallback
assert all(p.requires_grad for k in range(3) for p in adapter_tensors(ens, k))
g = generate_group(ens, encode_prompt(ens, "Write a function."), 4, generator=sampling_generator(ens.device, 0))
padded = score_rollouts(ens, g)
one = score_rollouts(LoRAEnsemble(load(), tok, replace(cfg, score_batch=1)), g)
assert (padded.token_mi - one.token_mi).abs().max() < 1e-6, "unpadded scoring differs"
with ens.training(1):
    adapter_logprobs(ens, 1, g.input_ids, g.attention_mask)[g.completion_mask].sum().backward()
assert all(g is not None for g in adapter_grads(ens, 1))
print("OK", transformers.__version__, peft.__version__)
'''


@pytest.mark.skipif(not OLD_LIBS, reason="set UGTTT_OLD_HF_LIBS to a folder holding older transformers and peft")
def test_the_ensemble_runs_under_older_transformers_and_peft(tmp_path):
    import os, subprocess, sys
    from pathlib import Path
    root, tests = Path(__file__).resolve().parents[1], Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([OLD_LIBS, str(root)])}
    p = subprocess.run([sys.executable, "-c", OLD_LIBS_SCRIPT, str(tmp_path / "m"), str(tests)], capture_output=True,
                       text=True, env=env, timeout=600)
    assert p.returncode == 0 and "OK" in p.stdout, p.stdout + p.stderr[-3000:]
