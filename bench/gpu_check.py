"""A decisive first GPU run: memory and time of every phase of a paper-scale run, next to what `ugttt plan` predicts.

    python bench/gpu_check.py                          # on a CUDA GPU: shape-exact Qwen3-8B, all parts (about 20 min)
    python bench/gpu_check.py --parts decode scoring   # some parts only
    python bench/gpu_check.py --device cpu --smoke     # the same code at toy shapes (what the test suite runs, < 1 min)

Weights cannot reach the GPU machine, and memory and time depend only on shapes, so the model is Qwen3-8B built from
its shipped configuration (`ugttt/assets/model_configs/qwen3-8b.json`) with random weights, directly on the device,
in bfloat16, with the paper preset's K = 5 LoRA adapters. A random model never stops by itself: lengths are fixed by
the inputs (decode, scoring, training) and by `think_cap` / `max_new_tokens` (end to end). `--smoke` swaps in a tiny
random Qwen3 (2 layers, hidden size 64) and lengths of a few hundred tokens, so CI runs every line of it.

Parts (the allocator's peak is reset before each step; `plan` is `ugttt.plan` at the same lengths, without the CUDA
context, which the allocator does not see):
1. decode: 8 rows prefilled to L tokens (L in 2k, 8k, 16k, 28k), then 32 decode steps (--smoke: 8) timed for the base model, one
   adapter and the 5 adapters mixed round robin (the sampler on the device's generator); one streaming-gate check
   at 28k with that KV cache resident.
2. scoring: `score_rollouts` of a group of lengths 32k, 24k, 16k, 8k (paper preset: one rollout's K rows per
   forward, no padding, the base model's log-probs too); MI exactly 0 with identical adapters; float32 MI against
   float64 on 256 positions.
3. training: `update_epoch` of one rollout through the 5 adapters at 8k, 16k, 32k with gradient checkpointing and at
   8k without, with NNM and the AdamW step.
4. e2e: `ugttt.trainer.train` with the paper preset on the random model (saved to a temporary directory), 2 groups
   of 8 (--smoke: of 2), short budgets; seconds per phase from the epoch record.

Prints one table and writes JSON (`--out`, default bench/out/gpu_check.json). Without a CUDA device and without
`--device cpu` it says so and exits 0 (`make bench` runs it everywhere) and records nothing; on a GPU each measured
peak goes to `bench/run_all.py`'s table next to the plan's figure (`bench/report.py`).
"""
import argparse, json, math, sys, tempfile, time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]   # ugttt, the test model's tokenizer, report.py
GiB = 2**30
K, ROWS = 5, 8
# (decode lengths, gate length, scoring group, training lengths, no-checkpointing length, think_cap, code_budget)
FULL = dict(decode=[2048, 8192, 16384, 28672], gate=28672, group=[32768, 24576, 16384, 8192], train=[8192, 16384, 32768],
            train_nock=8192, mi_positions=256, e2e_think=192, e2e_code=64, e2e_group=8, steps=32)
SMOKE = dict(decode=[64], gate=64, group=[128, 96, 64, 32], train=[32, 64], train_nock=32,
             mi_positions=32, e2e_think=6, e2e_code=4, e2e_group=2, steps=8)
TINY_QWEN3 = dict(model_type="qwen3", vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096,
                  tie_word_embeddings=False, rope_theta=1000000, rms_norm_eps=1e-6, bos_token_id=None, eos_token_id=2)


def sync(device) -> None:
    "Wait for the device's queued work (timings on CUDA are otherwise launch times)."
    if torch.device(device).type == "cuda": torch.cuda.synchronize()


class Phase:
    "Time a block and the allocator's peak inside it (peak reset first); CPU: time only."
    def __init__(self, device): self.device, self.cuda = device, torch.device(device).type == "cuda"
    def __enter__(self):
        sync(self.device)
        if self.cuda: torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
        self.t = time.perf_counter(); return self
    def __exit__(self, *exc):
        sync(self.device)
        self.seconds = time.perf_counter() - self.t
        self.peak_gib = torch.cuda.max_memory_allocated() / GiB if self.cuda else None


def model_dict(smoke: bool) -> dict:
    "The config.json values of the model: the shipped Qwen3-8B, or the tiny random Qwen3 of --smoke."
    from ugttt.plan import model_config
    return dict(TINY_QWEN3) if smoke else model_config("Qwen/Qwen3-8B")


def build_ensemble(device: str, smoke: bool, model_dir: Path):
    "A random shape-exact model built on the device, a Qwen3-like tokenizer, K adapters (paper preset); also saved to model_dir."
    from transformers import AutoConfig, AutoModelForCausalLM
    from qwen3_chat import _train_tokenizer                       # tests/qwen3_chat.py: Qwen3's chat markup, offline
    from ugttt.policy import LoRAEnsemble, PolicyConfig, dtype_kwarg
    d = model_dict(smoke)
    hf = AutoConfig.for_model(d.pop("model_type"), **{k: v for k, v in d.items() if k not in ("architectures", "transformers_version", "torch_dtype")})
    dtype = torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
    with torch.device(device): model = AutoModelForCausalLM.from_config(hf, **dtype_kwarg(dtype))
    tok = _train_tokenizer(600)
    model.generation_config.eos_token_id = tok.convert_tokens_to_ids("<|im_end|>")
    model.save_pretrained(model_dir); tok.save_pretrained(model_dir)     # for part 4 and for `plan`
    cfg = PolicyConfig.preset("paper", model=str(model_dir), device=device, dtype="bfloat16" if dtype == torch.bfloat16 else "float32")
    return LoRAEnsemble(model.eval(), tok, cfg)


def plan_at(model_dir: Path, T: int, smoke: bool, **policy) -> "ugttt.plan.Plan":
    "ugttt.plan for the paper preset at context window T (the gate scoring in context at T)."
    from ugttt.presets import make_config
    from ugttt.plan import plan
    over = {"policy.model": "Qwen/Qwen3-8B" if not smoke else str(model_dir), "policy.context_window": T,
            "policy.think_cap": T // 2, "policy.code_budget": T // 4, **{f"policy.{k}": v for k, v in policy.items()}}
    return plan(make_config("cp26", "ugttt", "paper", **over))


def predicted(pl, *parts) -> float:
    "GiB the allocator should see: weights + adapter states + the named components (the CUDA context is invisible to it)."
    m = pl.memory
    return (m["weights"] + m["adapter_states"] + sum(m[p] for p in parts)) / GiB


def materialise_adapter_states(ens, optimizers) -> None:
    "Allocate every adapter's gradient and AdamW moments now (a step on zero gradients moves nothing), as a run holds them."
    from ugttt.policy import trainable_groups
    for params, opt in zip(trainable_groups(ens), optimizers):   # one per adapter (peft), or one over the stacks
        for p in params: p.grad = torch.zeros_like(p)
        opt.step(); opt.zero_grad(set_to_none=False)


def part_decode(ens, sz, model_dir, smoke, out) -> None:
    "Prefill 8 rows to L, time 32 decode steps (base, one adapter, 5 mixed), one gate check at the longest L."
    from ugttt.generation import _sample, sampling_generator, window_scores
    from ugttt.streaming import StreamingConfig
    from ugttt.policy import model_forward, adapters_off
    dev, V = ens.device, ens.base_model.get_output_embeddings().weight.shape[0]
    gen, STEPS = sampling_generator(dev, 0), sz["steps"]
    for L in sz["decode"]:
        pl = plan_at(model_dir, L + STEPS + 1, smoke)
        for mode, names in (("base", None), ("one adapter", [ens.names[0]] * ROWS), ("5 mixed", [ens.names[i % K] for i in range(ROWS)])):
            ids = torch.randint(0, 600, (ROWS, L), device=dev, generator=gen)
            with torch.no_grad(), (adapters_off(ens) if names is None else _null()):
                past = None
                for s in range(0, L, 4096):   # chunked prefill: only the resident cache matters here, not a 28k-token prefill
                    o = model_forward(ens, names, input_ids=ids[:, s:s + 4096], past_key_values=past, use_cache=True, logits_to_keep=1)
                    past = o.past_key_values
                logits = o.logits[:, -1]
                with Phase(dev) as ph:
                    for _ in range(STEPS):
                        nxt = _sample(logits, 1.0, gen)                                   # (ROWS,) on the device's generator
                        o = model_forward(ens, names, input_ids=nxt[:, None], past_key_values=past, use_cache=True)
                        logits, past = o.logits[:, -1], o.past_key_values
            out.append(dict(part="decode", what=f"{ROWS} rows at {L:,}, {mode}", seconds=ph.seconds,
                            figure=f"{ph.seconds / STEPS * 1e3:.1f} ms/step, {ROWS * STEPS / ph.seconds:.0f} tok/s",
                            peak_gib=ph.peak_gib, plan_gib=predicted(pl, "kv_cache", "decode_logits")))
            if L == sz["gate"] and mode == "5 mixed":                                     # the gate with this cache resident
                seq = ids[0].cpu()
                with Phase(dev) as ph:
                    window_scores(ens, [seq], [torch.ones(L, dtype=torch.bool)], StreamingConfig(window=min(4096, L // 2)))
                out.append(dict(part="decode", what=f"gate check at {L:,} (KV cache of {ROWS} rows resident)",
                                seconds=ph.seconds, figure=f"{ph.seconds:.2f} s", peak_gib=ph.peak_gib,
                                plan_gib=predicted(plan_at(model_dir, L, smoke), "kv_cache", "decode_logits", "gate_forward")))
            del past, o, logits


class _null:
    def __enter__(self): return self
    def __exit__(self, *exc): return False


def rollouts_of(lengths, prompt_len, dev_gen):
    "A Rollouts record of random ids of the given lengths (right-padded), every generated position sampled thinking."
    from ugttt.generation import Rollouts
    from ugttt.streaming import StreamRecord
    G, T = len(lengths), max(lengths)
    ids = torch.randint(0, 600, (G, T), generator=dev_gen)
    am = torch.arange(T)[None] < torch.tensor(lengths)[:, None]
    cm = am & (torch.arange(T)[None] >= prompt_len)
    return Rollouts(ids.masked_fill(~am, 0), am, cm, cm.clone(), torch.zeros(G, T), torch.arange(G) % K, prompt_len,
                    [""] * G, ["max_new_tokens"] * G, [""] * G, [StreamRecord() for _ in range(G)], cm.sum(-1))


def part_scoring(ens, sz, model_dir, smoke, out) -> None:
    "score_rollouts of a group of mixed lengths; MI = 0 with identical adapters; float32 MI against float64."
    import torch.nn.functional as F
    from ugttt.policy import lm_head, init_adapters, member_hidden
    from ugttt.scores import score_rollouts
    from ugttt.uncertainty import _naive_token_mi, ensemble_token_scores
    g = torch.Generator().manual_seed(1)
    ro = rollouts_of(sz["group"], 64, g)
    with Phase(ens.device) as ph: sc = score_rollouts(ens, ro, base=True)
    n = int(ro.attention_mask.sum())
    out.append(dict(part="scoring", what=f"group of {', '.join(f'{x:,}' for x in sz['group'])} (K + base forwards)",
                    seconds=ph.seconds, figure=f"{n * (K + 1) / ph.seconds:,.0f} token-forwards/s", peak_gib=ph.peak_gib,
                    plan_gib=predicted(plan_at(model_dir, max(sz["group"]), smoke), "scoring_activations", "scoring_hidden")))
    c = ens.cfg
    init_adapters(ens, c.seed, c.b_init_std, identical=True)
    same = score_rollouts(ens, rollouts_of(sz["group"][-1:], 64, g), base=False)
    out.append(dict(part="scoring", what="identical adapters: max token MI (must be 0)", seconds=None,
                    figure=f"{float(same.token_mi.max()):.1e}", ok=bool(same.token_mi.max() == 0)))
    init_adapters(ens, c.seed, c.b_init_std, identical=False)
    P = sz["mi_positions"]
    ids = ro.input_ids[:1, :P + 1].to(ens.device)
    with torch.no_grad():
        h = member_hidden(ens, ids, torch.ones_like(ids, dtype=torch.bool))[:, 0, :P]     # (K, P, D)
    w, b = lm_head(ens)
    mi32 = ensemble_token_scores(h, w, ids[0, 1:], c.chunk_size, b).token_mi.double()       # (P,)
    mi64 = _naive_token_mi(F.linear(h.double(), w.double(), None if b is None else b.double()))   # (P,) from the same inputs
    rel = float(((mi32 - mi64).abs() / mi64.clamp_min(1e-30)).max())
    out.append(dict(part="scoring", what=f"float32 MI vs float64 on {P} positions (MI {float(mi64.min()):.1e} to {float(mi64.max()):.1e})",
                    seconds=None, figure=f"max relative error {rel:.1e}", ok=rel < 2e-2))


def part_training(ens, optimizers, sz, model_dir, smoke, out) -> None:
    "update_epoch of one rollout through the K adapters, with and without gradient checkpointing; NNM and AdamW included."
    from ugttt.scores import score_rollouts
    from ugttt.update import GroupUpdate, UpdateConfig, update_epoch
    g = torch.Generator().manual_seed(2)
    runs = [(T, True) for T in sz["train"]] + [(sz["train_nock"], False)]
    for T, ck in runs:
        set_checkpointing(ens, ck)
        ro = rollouts_of([T], 64, g)
        sc = score_rollouts(ens, ro, base=True)
        grp = GroupUpdate(ro, sc, torch.ones(1), torch.ones(1, dtype=torch.bool))
        with Phase(ens.device) as ph: st = update_epoch(ens, [grp], optimizers, UpdateConfig())
        pl = plan_at(model_dir, T, smoke, gradient_checkpointing=ck)
        out.append(dict(part="training", what=f"1 rollout x {K} adapters at {T:,}, checkpointing {'on' if ck else 'off'}",
                        seconds=ph.seconds, figure=f"{K * T / ph.seconds:,.0f} token-fwd+bwd/s, NNM {st['nnm_loss']:.3g}",
                        peak_gib=ph.peak_gib,
                        plan_gib=predicted(pl, "activations_checkpointed" if ck else "activations", "training_head")))
    set_checkpointing(ens, True)


def set_checkpointing(ens, on: bool) -> None:
    "Turn activation checkpointing of the base model on or off, in the model and in the ensemble's config."
    from ugttt.policy import enable_activation_checkpointing
    base = ens.base_model
    if on: enable_activation_checkpointing(base)
    elif hasattr(base, "activation_checkpointing_disable"): base.activation_checkpointing_disable()
    else: base.gradient_checkpointing_disable()
    ens.cfg = replace(ens.cfg, gradient_checkpointing=on)


def part_e2e(device, sz, model_dir, out) -> None:
    "ugttt.trainer.train, paper preset, on the saved random model: 2 groups of G, short budgets; seconds per phase."
    from ugttt.presets import make_config
    from ugttt.trainer import train
    style = dict(prompt_style="compact") if sz is SMOKE else {}      # smoke: a short prompt, so CI scores in seconds
    cfg = make_config("cp26", "ugttt", "paper", epochs=1, groups_per_epoch=2, group_size=sz["e2e_group"], budget_s=2.0, **style,
                      **{"policy.model": str(model_dir), "policy.device": device, "policy.think_cap": sz["e2e_think"],
                         "policy.code_budget": sz["e2e_code"], "policy.max_new_tokens": sz["e2e_think"] + sz["e2e_code"] + 64,
                         "policy.dtype": "bfloat16" if torch.device(device).type == "cuda" else "float32"})
    with tempfile.TemporaryDirectory() as tmp, Phase(device) as ph:
        rec = train(cfg, Path(tmp) / "run", progress=False)[0]
    t = {k.split("/", 1)[1]: v for k, v in rec.items() if k.startswith("time/")}
    out.append(dict(part="e2e", what=f"train(): paper preset, 2 groups x {sz['e2e_group']}", seconds=ph.seconds,
                    figure=", ".join(f"{k} {v:.1f} s" for k, v in t.items() if isinstance(v, (int, float))), peak_gib=ph.peak_gib))


def table(rows: list[dict]) -> str:
    "One aligned table: part, what, seconds, figure, measured and planned GiB, their ratio."
    f = lambda x, p=2: "" if x is None else f"{x:.{p}f}"
    lines = [f"{'part':9s} {'what':62s} {'s':>8s} {'peak GiB':>9s} {'plan GiB':>9s} {'ratio':>6s}  figure"]
    for r in rows:
        ratio = r["peak_gib"] / r["plan_gib"] if r.get("peak_gib") and r.get("plan_gib") else None
        ok = "" if "ok" not in r else ("  OK" if r["ok"] else "  FAILED")
        lines.append(f"{r['part']:9s} {r['what'][:62]:62s} {f(r['seconds'], 1):>8s} {f(r.get('peak_gib')):>9s} "
                     f"{f(r.get('plan_gib')):>9s} {f(ratio):>6s}  {r['figure']}{ok}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    ap.add_argument("--smoke", action="store_true", help="toy shapes: a tiny random Qwen3 and lengths of a few hundred tokens")
    ap.add_argument("--parts", nargs="+", default=["decode", "scoring", "training", "e2e"], choices=["decode", "scoring", "training", "e2e"])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "gpu_check.json", help="where the JSON goes")
    a = ap.parse_args()
    device = a.device or ("cuda" if torch.cuda.is_available() else None)
    if device is None:
        print("gpu_check: no CUDA device; run with --device cpu --smoke for the toy-shape path. Nothing recorded."); return 0
    if torch.device(device).type != "cuda" and not a.smoke:
        print("gpu_check: a shape-exact Qwen3-8B on the CPU would take hours; use --smoke with --device cpu"); return 2
    sz = SMOKE if a.smoke else FULL
    torch.manual_seed(0)
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()                                # no shard bars between the table's lines
    rows, t0 = [], time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "random-qwen3"
        with Phase(device) as ph: ens = build_ensemble(device, a.smoke, model_dir)
        ctx = None
        if torch.device(device).type == "cuda":                      # what the allocator does not see: the CUDA context
            free, total = torch.cuda.mem_get_info()
            ctx = (total - free - torch.cuda.memory_reserved()) / GiB
        rows.append(dict(part="setup", what=f"random {'tiny Qwen3' if a.smoke else 'Qwen3-8B'} + {K} adapters on {device}",
                         seconds=ph.seconds, figure=f"CUDA context {ctx:.2f} GiB (plan assumes 1.00)" if ctx is not None else "",
                         peak_gib=ph.peak_gib))
        print(f"[gpu_check] setup: {ph.seconds:.0f} s", flush=True)
        from ugttt.update import UpdateConfig, make_optimizers
        optimizers = make_optimizers(ens, UpdateConfig())
        materialise_adapter_states(ens, optimizers)
        for part, run in (("decode", lambda: part_decode(ens, sz, model_dir, a.smoke, rows)),
                          ("scoring", lambda: part_scoring(ens, sz, model_dir, a.smoke, rows)),
                          ("training", lambda: part_training(ens, optimizers, sz, model_dir, a.smoke, rows))):
            if part in a.parts:
                t = time.perf_counter(); run(); print(f"[gpu_check] {part}: {time.perf_counter() - t:.0f} s", flush=True)
        del ens, optimizers
        if torch.device(device).type == "cuda": torch.cuda.empty_cache()
        if "e2e" in a.parts:
            t = time.perf_counter(); part_e2e(device, sz, model_dir, rows); print(f"[gpu_check] e2e: {time.perf_counter() - t:.0f} s", flush=True)
    print(table(rows))
    if torch.device(device).type == "cuda" and not a.smoke:          # the headline figures, for bench/run_all.py's table
        from report import record
        for r in rows:
            if r.get("peak_gib") and r.get("plan_gib"): record("gpu_check.py", f"peak, {r['what']}", r["peak_gib"], "GiB",
                                                               "ugttt plan", r["plan_gib"])
    a.out.parent.mkdir(parents=True, exist_ok=True)
    machine = torch.cuda.get_device_name(0) if torch.device(device).type == "cuda" else "cpu"
    a.out.write_text(json.dumps(dict(device=machine, smoke=a.smoke, torch=torch.__version__, seconds=time.perf_counter() - t0,
                                     rows=rows), indent=1))
    print(f"\nwrote {a.out}; {time.perf_counter() - t0:.0f} s in all")
    failed = [r["what"] for r in rows if r.get("ok") is False]
    if failed: print("FAILED: " + "; ".join(failed)); return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
