"""The stacked LoRA ensemble (ugttt.ensemble, the default) against the peft ensemble (ugttt.policy.LoRAEnsemble) on the embedded
model in float64: the same seeds give the same adapters; mixed-adapter logits equal peft's mixed-adapter batch; all-K
scoring as K blocks equals K single-adapter forwards; one batched backward of the K losses gives the gradients of K
sequential per-adapter backwards through peft (and through a gradient-checkpointed model); KV-cached decoding equals
the full forward; saved members are standard peft adapters that PeftModel.from_pretrained loads with equal logits; a
decode step dispatches as many operators with 5 mixed adapters as with one (no loop over adapters or rows)."""
import json

import pytest
import torch
import torch.nn.functional as F
from fastcore.test import test_eq, test_close, test_fail

from ugttt.default_model import load_default_model
from ugttt.ensemble import StackedLoRAEnsemble
from ugttt.policy import LoRAEnsemble, PolicyConfig, peft_deprecation_silenced
from ugttt.scores import adapter_logprobs
from ugttt.regularizer import nnm_loss
from ugttt.policy import a_stacks as peft_a_stacks

pytestmark = pytest.mark.model   # not in test-fast (pytest.ini): float64 passes of the embedded model, K adapters

K, N, T = 5, 8, 12                      # the paper's K; a batch of 8 rows of 12 tokens
CFG = PolicyConfig.preset("tiny", n_adapters=K, lora_dropout=0.0, seed=3,   # dropout 0: the two paths draw no masks
                         ensemble="peft", train_mode="per_adapter")         # peft_ens: K peft adapters; stacked: the same draws
EPS = 1e-10                             # float64 throughout: sums of a few thousand terms round at ~1e-13


def _f64():
    "A fresh float64 copy of the embedded model and its tokenizer (each ensemble edits its own copy in place)."
    return load_default_model(dtype=torch.float64)


@pytest.fixture(scope="module")
def peft_ens():
    model, tok = _f64()
    return LoRAEnsemble(model, tok, CFG)


@pytest.fixture(scope="module")
def stacked():
    return StackedLoRAEnsemble.from_policy_config(_f64()[0], CFG)


@pytest.fixture(scope="module")
def batch():
    "(N, T) ids of the embedded model's vocabulary, rows 5-7 left-padded as generation pads prompts, and their mask."
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 2048, (N, T), generator=g)
    am = torch.ones(N, T, dtype=torch.long)
    am[5:, :3] = 0; ids[5:, :3] = 1                                         # pad id 1
    return ids, am


def _pos(am): return (am.cumsum(-1) - 1).clamp_min(0)                     # positions of real tokens (left padding)


def test_same_seeds_give_the_same_adapters(peft_ens, stacked):
    from ugttt.policy import lora_layers
    layers = lora_layers(peft_ens)
    test_eq(len(layers), len(stacked.layers))
    for m, s in zip(layers, stacked.layers):
        for k, name in enumerate(peft_ens.names):
            test_eq(torch.equal(m.lora_A[name].weight, s.lora_A[k]), True)
            test_eq(torch.equal(m.lora_B[name].weight, s.lora_B[k]), True)
    test_eq(stacked.layers[0].lora_A.dtype, torch.float64)
    test_close(nnm_loss(stacked.a_stacks()), nnm_loss(peft_a_stacks(peft_ens)), eps=EPS)   # NNM sees the same stacks


def test_mixed_adapter_logits_equal_peft(peft_ens, stacked, batch):
    ids, am = batch
    index = torch.arange(N) % K                                             # round robin: 0 1 2 3 4 0 1 2
    with torch.no_grad():
        want = peft_ens.model(input_ids=ids, attention_mask=am, position_ids=_pos(am),
                              adapter_names=[peft_ens.names[k] for k in index.tolist()]).logits
        got = stacked(ids, index, attention_mask=am, position_ids=_pos(am)).logits
        with stacked.base_only(), peft_ens.model.disable_adapter():
            base_got = stacked(ids, 0, attention_mask=am, position_ids=_pos(am)).logits
            base_want = peft_ens.model(input_ids=ids, attention_mask=am, position_ids=_pos(am)).logits
    peft_ens.model.set_requires_grad(peft_ens.names, True)                  # disable_adapter re-freezes them
    test_close(got, want, eps=EPS)
    test_close(base_got, base_want, eps=EPS)
    test_eq(float((got - base_got).abs().max()) > 1e-4, True)              # the adapters do change the logits


def test_scoring_blocks_equal_single_adapter_forwards(peft_ens, stacked, batch):
    ids, am = batch
    with torch.no_grad():
        blocks = stacked(ids.repeat(K, 1), torch.arange(K).repeat_interleave(N), attention_mask=am.repeat(K, 1),
                         position_ids=_pos(am).repeat(K, 1)).logits.view(K, N, T, -1)        # (K, N, T, V)
        for k, name in enumerate(peft_ens.names):
            alone = stacked(ids, k, attention_mask=am, position_ids=_pos(am)).logits
            peft = peft_ens.model(input_ids=ids, attention_mask=am, position_ids=_pos(am), adapter_names=[name] * N).logits
            test_close(blocks[k], alone, eps=EPS)
            test_close(blocks[k], peft, eps=EPS)


def _realised_logprobs(logits, ids, am):
    "(B, T) log-probs of the realised tokens, 0 in column 0 and on padding, as policy.adapter_logprobs returns them."
    lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]        # (B, T-1)
    return F.pad(lp, (1, 0)) * am


def _sequential_peft_grads(peft_ens, ids, am, w):
    "Today's path: one forward and backward per adapter (policy.adapter_logprobs), right-padded rows."
    peft_ens.model.zero_grad()
    for k in range(K):
        lp = adapter_logprobs(peft_ens, k, ids, am)                                         # (N, T)
        (-(lp * w[k]).sum()).backward()
    from ugttt.policy import lora_layers
    return [(m.lora_A[n].weight.grad.clone(), m.lora_B[n].weight.grad.clone())
            for m in lora_layers(peft_ens) for n in peft_ens.names]


def _batched_grads(stacked, ids, am, w):
    "One forward of K adapter-major blocks and one backward of the sum of the K block losses."
    stacked.zero_grad()
    stacked.train()
    try:
        logits = stacked(ids.repeat(K, 1), torch.arange(K).repeat_interleave(N), attention_mask=am.repeat(K, 1)).logits
        lp = _realised_logprobs(logits, ids.repeat(K, 1), am.repeat(K, 1)).view(K, N, T)   # (K, N, T)
        (-(lp * w).sum()).backward()
    finally: stacked.eval()
    return [(m.lora_A.grad[k].clone(), m.lora_B.grad[k].clone()) for m in stacked.layers for k in range(K)]


@pytest.fixture(scope="module")
def right_padded(batch):
    "Training rows are right-padded (policy._right_pad): the same ids with rows 5-7 shorter at the end."
    ids, _ = batch
    am = torch.ones(N, T, dtype=torch.bool)
    am[5:, -3:] = False
    return ids.masked_fill(~am, 1), am


def test_batched_backward_equals_sequential_peft_backwards(peft_ens, stacked, right_padded):
    ids, am = right_padded
    w = torch.randn(K, N, T, generator=torch.Generator().manual_seed(1), dtype=torch.float64)   # per-adapter token weights
    want = _sequential_peft_grads(peft_ens, ids, am, w)
    got = _batched_grads(stacked, ids, am.long(), w)
    test_eq(len(got), len(want))
    for (ga, gb), (wa, wb) in zip(got, want):
        test_close(ga, wa, eps=EPS); test_close(gb, wb, eps=EPS)
    test_eq(all(float(g.abs().max()) > 0 for g, _ in got), True)          # every adapter got a gradient


def test_gradient_checkpointing_gives_the_same_gradients(stacked, right_padded):
    "The route stays set after the forward, so the checkpointed backward reruns each layer with the same blocks."
    ids, am = right_padded
    w = torch.randn(K, N, T, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    plain = _batched_grads(stacked, ids, am.long(), w)
    stacked.model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    try: ckpt = _batched_grads(stacked, ids, am.long(), w)
    finally: stacked.model.activation_checkpointing_disable()
    for (ga, gb), (wa, wb) in zip(ckpt, plain):
        test_close(ga, wa, eps=EPS); test_close(gb, wb, eps=EPS)


def test_kv_cache_decode_equals_full_forward(stacked, batch):
    ids, am = batch
    index = torch.arange(N) % K
    P = 6                                                                   # prefill 6 tokens, then decode 6 one by one
    with torch.no_grad():
        full = stacked(ids, index, attention_mask=am, position_ids=_pos(am)).logits           # (N, T, V)
        out = stacked(ids[:, :P], index, attention_mask=am[:, :P], position_ids=_pos(am)[:, :P], use_cache=True)
        steps = [out.logits[:, -1]]
        for t in range(P, T):
            out = stacked(ids[:, t:t + 1], index, attention_mask=am[:, :t + 1], position_ids=_pos(am)[:, t:t + 1],
                          past_key_values=out.past_key_values, use_cache=True)
            steps.append(out.logits[:, -1])
    test_close(torch.stack(steps, 1), full[:, P - 1:], eps=EPS)


def test_saved_members_are_peft_adapters(peft_ens, stacked, batch, tmp_path):
    from peft import PeftModel
    from safetensors import safe_open
    ids, am = batch
    subs = stacked.save(tmp_path / "ens")
    with peft_deprecation_silenced(): peft_ens.model.save_pretrained(tmp_path / "peft")   # peft's own layout and keys
    for k, sub in enumerate(subs):
        ours, theirs = sub, tmp_path / "peft" / peft_ens.names[k]
        with safe_open(ours / "adapter_model.safetensors", "pt") as f, safe_open(theirs / "adapter_model.safetensors", "pt") as g:
            test_eq(sorted(f.keys()), sorted(g.keys()))
            test_eq(f.metadata(), g.metadata())
        a, b = (json.loads((p / "adapter_config.json").read_text()) for p in (ours, theirs))
        for key in ("peft_type", "task_type", "r", "lora_alpha", "lora_dropout", "bias", "use_rslora", "use_dora", "fan_in_fan_out"):
            test_eq(a[key], b[key])
        test_eq(sorted(a["target_modules"]), sorted(b["target_modules"]))
        base, _ = _f64()
        with peft_deprecation_silenced(): pm = PeftModel.from_pretrained(base, ours).eval()
        with torch.no_grad():
            want = stacked(ids, k, attention_mask=am, position_ids=_pos(am)).logits
            got = pm(input_ids=ids, attention_mask=am, position_ids=_pos(am)).logits
        test_close(got, want, eps=EPS)
    fresh = StackedLoRAEnsemble.from_policy_config(_f64()[0], PolicyConfig.preset("tiny", n_adapters=K, seed=99))
    fresh.load(tmp_path / "ens")
    for s, f in zip(stacked.layers, fresh.layers):
        test_eq(torch.equal(s.lora_A, f.lora_A) and torch.equal(s.lora_B, f.lora_B), True)
    fresh.load(tmp_path / "peft")                                           # peft's own save loads too
    test_eq(torch.equal(fresh.layers[5].lora_B, stacked.layers[5].lora_B), True)


def test_load_refuses_bad_folders(stacked, tmp_path):
    subs = stacked.save(tmp_path / "ens")
    test_fail(lambda: stacked.save(tmp_path / "ens"), contains="already exists")
    from safetensors.torch import load_file, save_file
    t = load_file(subs[2] / "adapter_model.safetensors")
    key = sorted(t)[0]
    save_file({k: v for k, v in t.items() if k != key}, subs[2] / "adapter_model.safetensors")
    before = stacked.layers[0].lora_A.detach().clone()
    test_fail(lambda: stacked.load(tmp_path / "ens"), contains=f"missing key {key}")
    test_eq(torch.equal(stacked.layers[0].lora_A, before), True)            # nothing copied from a bad folder
    save_file({**t, key: t[key][:, :-1].contiguous()}, subs[2] / "adapter_model.safetensors")
    test_fail(lambda: stacked.load(tmp_path / "ens"), contains="has shape")


def test_bad_index_is_a_clear_error(stacked, batch):
    ids, am = batch
    test_fail(lambda: stacked(ids, torch.arange(N - 1) % K), contains="7 entries for a batch of 8 rows")
    test_fail(lambda: stacked(ids, torch.full((N,), K)), contains=f"outside [0, {K})")
    test_fail(lambda: stacked(ids, [0] * N), contains="an int or a (rows,) int64 tensor")


def _ops_per_decode_step(ens, index):
    "aten operators dispatched by one single-token step of a batch of len(index) rows with a 4-token KV cache."
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    ids = torch.randint(3, 2048, (len(index), 5), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        past = ens(ids[:, :4], index, use_cache=True).past_key_values
        with Count(): ens(ids[:, 4:], index, past_key_values=past, use_cache=True)
    return Count.n


def test_operator_count_does_not_grow_with_k_or_mixing():
    "No Python loop over adapters or rows: a decode step dispatches as many operators for 5 mixed adapters as for 1."
    five = StackedLoRAEnsemble(load_default_model()[0], n_adapters=5)
    two = StackedLoRAEnsemble(load_default_model()[0], n_adapters=2)
    rr = torch.arange(8) % 5
    n_mixed, n_one = _ops_per_decode_step(five, rr), _ops_per_decode_step(five, torch.zeros(8, dtype=torch.long))
    test_eq(n_mixed <= n_one, True)                                          # one adapter pays a gather too: never fewer ops
    test_eq(_ops_per_decode_step(two, torch.arange(8) % 2), n_mixed)         # the same count for K = 2 and K = 5
    with five.base_only(): n_base = _ops_per_decode_step(five, rr)
    layers = len(five.layers)
    test_eq(n_mixed - n_base <= 10 * layers, True)                          # a few operators per adapted module (9 today)


def test_bench_script_runs_and_records(tmp_path):
    "bench/ensemble_batched.py on the embedded model with the smallest settings: it runs and records its figures (timings never asserted)."
    import os, subprocess, sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    rows = tmp_path / "rows.jsonl"
    p = subprocess.run([sys.executable, str(root / "bench" / "ensemble_batched.py"), "--models", "embedded", "--reps", "1",
                        "--steps", "2", "--T", "8"], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "HF_HUB_OFFLINE": "1", "UGTTT_BENCH_OUT": str(rows)})
    assert p.returncode == 0, p.stdout + p.stderr
    recs = [json.loads(line) for line in rows.read_text().splitlines()]
    test_eq([r["unit"] for r in recs], ["ms", "ms", "ms", "s", "s", "MiB"])
    assert all(r["value"] > 0 and r["ratio"] is not None for r in recs)
    assert "peft 5 mixed" in p.stdout and "ops/step" in p.stdout and "saved activations" in p.stdout


def test_a_training_run_through_the_stacked_ensemble_equals_peft(tmp_path):
    "Two epochs of UG-TTT in float64 without dropout: the same rollouts and rewards, epoch records and saved adapters, peft against stacked (batched)."
    from safetensors.torch import load_file
    from ugttt.analysis import load_run
    from ugttt.presets import make_config
    from ugttt.trainer import train
    small = dict(epochs=2, groups_per_epoch=2, group_size=4, **{"policy.n_adapters": 3, "policy.dtype": "float64",
                                                                "policy.lora_dropout": 0.0})
    runs = {}
    for how, mode in (("peft", "per_adapter"), ("stacked", "batched")):
        cfg = make_config("cp26", "ugttt", "tiny", **small, **{"policy.ensemble": how, "policy.train_mode": mode})
        train(cfg, tmp_path / how, progress=False)
        runs[how] = load_run(tmp_path / how)
    peft, st = runs["peft"], runs["stacked"]
    test_eq([r["generated_text"] for r in st.rollouts], [r["generated_text"] for r in peft.rollouts])
    test_eq([r["reward_exec"] for r in st.rollouts], [r["reward_exec"] for r in peft.rollouts])
    for a, b in zip(st.epochs, peft.epochs):
        for key in ("mi/token_mean", "train/nnm_nuclear_norm", "policy/kl_to_base", "nnm/max_principal_cosine",
                    "adapter_0/grad_norm", "adapter_2/pg_loss"):
            test_close(a[key], b[key], eps=1e-8)
    for k in range(3):
        f = lambda how: load_file(tmp_path / how / "checkpoints" / "epoch_0001" / "adapters" / f"adapter_{k}" / "adapter_model.safetensors")
        got, want = f("stacked"), f("peft")
        test_eq(sorted(got), sorted(want))                                      # the same standard peft files
        for name in want: test_close(got[name], want[name], eps=1e-9)


def test_init_adapters_draws_the_same_members_through_either_ensemble():
    "ugttt.policy.init_adapters re-draws a stacked ensemble's members exactly as it draws peft's."
    from dataclasses import replace
    from ugttt.policy import init_adapters, member_A, trainable_groups
    cfg = PolicyConfig.preset("tiny", n_adapters=3)
    peft, stacked = LoRAEnsemble.from_config(replace(cfg, ensemble="peft", train_mode="per_adapter")), LoRAEnsemble.from_config(cfg)
    test_eq((peft.stack is None, stacked.stack is not None), (True, True))
    for e in (peft, stacked): init_adapters(e, 7, 0.02)
    for k in range(cfg.n_adapters):
        test_eq(all(torch.equal(a, b) for a, b in zip(member_A(stacked, k), member_A(peft, k))), True)
    test_eq(all(w.requires_grad for w in trainable_groups(stacked)[0]), True)
