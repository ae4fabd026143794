"""Generation throughput of one group: new tokens per second of `ugttt.generation.generate_group` on the embedded model
(CPU, `PolicyConfig.preset("tiny")`: K LoRA adapters round robin, two-phase thinking budget, no streaming gate),
next to plain Hugging Face `model.generate` sampling on the base model without adapters.

Setting: the CP26 compact root prompt (`get_task("cp26").prompt(None, style="compact")`), G rollouts in one batch.
- ensemble: `generate_group(ens, prompt, G)`: one batched decode with a per-row adapter (peft mixed-adapter batch),
  finished rows dropped from the batch and the KV cache; new tokens = `Rollouts.n_generated.sum()` (sampled tokens
  and the forced transition, every one of them a decoding step of its row).
- plain HF: a freshly loaded base model (no peft wrapping), `model.generate` with the sampling arguments of
  `ugttt.default_model._sample_new_ids` (do_sample, temperature 1, top_k 0, top_p 1), G copies of the same prompt,
  min_new_tokens = max_new_tokens = L with L the mean new tokens per rollout of one ensemble group drawn before the
  repetitions (seed + reps), so both produce about the same number of tokens, G·L.
Per repetition both run once with the same seed, in alternating order; printed are the medians over repetitions of
tokens/s and of the per-repetition ratio. The CPU may be shared: read ratios, not absolutes.

Usage: python bench/policy_generation.py [--quick] [--threads 1] [--reps 5] [--groups 4 8 16] [--K 3]
"""
import argparse, os, statistics, sys, time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch


def ensemble_run(ens, prompt, G, seed):
    "Wall seconds and new tokens of one generate_group call; also the mean new tokens per rollout."
    from ugttt.generation import generate_group
    t = time.perf_counter()
    r = generate_group(ens, prompt, G, generator=torch.Generator().manual_seed(seed))
    dt = time.perf_counter() - t
    n = int(r.n_generated.sum())
    return dt, n, n / G


def plain_run(model, tok, prompt, G, L, seed):
    "Wall seconds and new tokens of one plain model.generate call of G rows and exactly L new tokens each."
    enc = dict(input_ids=torch.tensor([prompt] * G), attention_mask=torch.ones(G, len(prompt), dtype=torch.long))
    torch.manual_seed(seed)
    t = time.perf_counter()
    with torch.no_grad():
        out = model.generate(**enc, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, min_new_tokens=L,
                             max_new_tokens=L, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)   # (G, P + L)
    dt = time.perf_counter() - t
    return dt, (out.shape[1] - len(prompt)) * G


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a short run: 2 repetitions, G = 8 only")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--reps", type=int, default=5, help="repetitions; medians are reported")
    ap.add_argument("--groups", type=int, nargs="+", default=[4, 8, 16], help="group sizes G")
    ap.add_argument("--K", type=int, default=3, help="adapters (the tiny preset: 3)")
    ap.add_argument("--seed", type=int, default=0, help="repetition r samples with seed + r; adapters from seed")
    args = ap.parse_args()
    if args.quick: args.reps, args.groups = 2, [8]
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    from ugttt.policy import LoRAEnsemble, PolicyConfig, load_base_model
    from ugttt.generation import encode_prompt
    from report import record
    from ugttt.tasks import get_task

    cfg = PolicyConfig.preset("tiny", n_adapters=args.K, seed=args.seed)
    ens = LoRAEnsemble.from_config(cfg)
    plain, tok = load_base_model(cfg)                     # a second, unwrapped copy of the base model
    prompt = encode_prompt(ens, get_task("cp26").prompt(None, style="compact"))
    print(f"policy generation bench: embedded model (preset tiny, float32, CPU), torch {torch.__version__}, "
          f"threads = {torch.get_num_threads()}, K = {args.K}, seed = {args.seed}, reps = {args.reps}, "
          f"prompt = CP26 compact root ({len(prompt)} tokens), think_cap = {cfg.think_cap}, code_budget = {cfg.code_budget}")
    ensemble_run(ens, prompt, 2, args.seed); plain_run(plain, tok, prompt, 2, 8, args.seed)   # warm-up

    print(f"\n{'G':>3} | {'ens tok/row':>8} {'plain L':>8} | {'ensemble tok/s':>14} {'plain HF tok/s':>14} | plain / ensemble")
    for G in args.groups:
        _, _, L = ensemble_run(ens, prompt, G, args.seed + args.reps)               # L for the plain runs (and a warm-up)
        L = round(L)
        ens_tps, plain_tps, ratio, lens = [], [], [], []
        for r in range(args.reps):
            runs = dict(ens=lambda: ensemble_run(ens, prompt, G, args.seed + r),
                        plain=lambda: plain_run(plain, tok, prompt, G, L, args.seed + r))
            res = {k: runs[k]() for k in (("ens", "plain") if r % 2 == 0 else ("plain", "ens"))}
            (dt_e, n_e, mean_e), (dt_p, n_p) = res["ens"], res["plain"]
            lens.append(mean_e)
            ens_tps.append(n_e / dt_e); plain_tps.append(n_p / dt_p); ratio.append((n_p / dt_p) / (n_e / dt_e))
        print(f"{G:>3} | {statistics.median(lens):8.1f} {L:>8} | {statistics.median(ens_tps):14.0f} "
              f"{statistics.median(plain_tps):14.0f} | {statistics.median(ratio):.2f}")
        record("policy_generation.py", f"ensemble generation, G={G}, K={args.K}", statistics.median(ens_tps), "tokens/s",
               "plain HF generate", statistics.median(plain_tps))
    print("ens tok/row: median over repetitions of the mean new tokens per rollout (sampled + forced); plain L: new "
          "tokens per row of every plain run, the mean of one extra ensemble group (seed + reps)")


if __name__ == "__main__":
    main()
