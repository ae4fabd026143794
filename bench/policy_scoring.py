"""Scoring cost of the K-LoRA ensemble (ugttt.policy) on the embedded model, CPU, `PolicyConfig.preset("tiny")`.

(a) What token MI adds to scoring. Both paths start from the same final hidden states of B sequences under all K
adapters (`member_hidden`, one mixed-adapter forward), so the comparison isolates the LM-head work:
  - MI path:       `ugttt.uncertainty.ensemble_token_scores` per sequence (K realised-token log-probs, token MI over
                   the full vocabulary, the realised-token diagnostics), as `sequence_scores` does;
  - log-prob path: `ugttt.uncertainty.chunked_token_logprobs` for each of the K members, under torch.no_grad.
Also timed: the bare LM-head matmul (K, T, D) @ (D, V) of the same positions, so that what each path spends beyond
it (log-softmax, MI, gathers) is measured, not guessed. The whole scoring time of a path is the forward of that
repetition plus that path's head; "MI adds" = (MI - log-prob) / log-prob, for the head alone and for the whole.
Target: MI adds at most 10% to the scoring time. (Paper App. D, "Chunked MI and base-logprob scoring", puts the MI at
under 0.1% of the LM-head matmul for Qwen3-8B, D = 4096; part (c) measures that share against the hidden size D.)
Token ids are uniform random over the vocabulary (seeded): the cost depends on the shapes, not on the ids.

(b) Mixed-adapter scoring (`scoring="mixed"`: one forward of K·B rows with a per-row adapter name) against the loop
(`scoring="loop"`: K forwards of B rows, one adapter each): `member_hidden` on the random sequences of (a), and
`score_rollouts(..., base=False)` on one real group of G rollouts from `generate_group` on the CP26 compact prompt.

Every comparison is measured side by side in one run: the variants alternate inside each repetition (their order
flips every repetition) and the median over repetitions is printed. The CPU may be shared: read ratios, not absolutes.

Usage: python bench/policy_scoring.py [--quick] [--threads 1] [--reps 7] [--lengths 128 480] [--ks 3 5] [--batch 2]
"""
import argparse, os, statistics, sys, time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch
import torch.nn.functional as F


def timed(f) -> float:
    "Wall seconds of one call of f()."
    t = time.perf_counter(); f(); return time.perf_counter() - t


def interleaved(fns: dict, reps: int) -> dict:
    "Median wall seconds of each named function over `reps` repetitions, the functions alternating (order flipped each rep)."
    names, times = list(fns), {n: [] for n in fns}
    for r in range(reps):
        for n in (names if r % 2 == 0 else names[::-1]): times[n].append(timed(fns[n]))
    return {n: statistics.median(v) for n, v in times.items()}


def head_paths(hidden, weight, ids, lengths, chunk):
    "The three LM-head computations over the same hidden states (K, B, L, D): MI, K log-prob passes, bare matmul."
    from ugttt.uncertainty import chunked_token_logprobs, ensemble_token_scores
    K = hidden.shape[0]

    def mi():
        for j, n in enumerate(lengths): ensemble_token_scores(hidden[:, j, :n - 1], weight, ids[j, 1:n], chunk)

    def logprob():
        with torch.no_grad():
            for j, n in enumerate(lengths):
                for k in range(K): chunked_token_logprobs(hidden[k, j, :n - 1], weight, ids[j, 1:n], chunk)

    def matmul():
        with torch.no_grad():
            for j, n in enumerate(lengths):
                for s in range(0, n - 1, chunk): F.linear(hidden[:, j, s:min(s + chunk, n - 1)], weight)   # (K, c, V)

    return dict(mi=mi, logprob=logprob, matmul=matmul)


def bench_mi(ens_by_k, lengths, B, reps, head_reps, gen):
    "Part (a): per (K, T), median forward and head times, and what MI adds to the head and to the whole scoring."
    from ugttt.policy import lm_head, member_hidden
    rows = []
    for K, ens in ens_by_k.items():
        weight, _ = lm_head(ens)
        V = weight.shape[0]
        for T in lengths:
            ids = torch.randint(0, V, (B, T), generator=gen)                         # (B, T) random realised tokens
            am = torch.ones(B, T, dtype=torch.bool)
            with torch.no_grad(): hidden = member_hidden(ens, ids, am)              # (K, B, T, D), mixed forward
            paths = head_paths(hidden, weight, ids, [T] * B, ens.cfg.chunk_size)
            for f in paths.values(): f()                                           # warm-up
            with torch.no_grad(): fwd = [timed(lambda: member_hidden(ens, ids, am)) for _ in range(reps)]
            med = interleaved(paths, head_reps)                                    # the heads are cheap: more repetitions
            f = statistics.median(fwd)
            rows.append(dict(K=K, T=T, fwd=f, **med, whole_mi=f + med["mi"], whole_lp=f + med["logprob"]))
    print(f"\n(a) MI vs realised-token log-probs only, B = {B} sequences, chunk_size = {ens.cfg.chunk_size}, "
          f"V = {V}, D = {weight.shape[1]}; ms, median of {reps} (forward) and {head_reps} (heads)")
    print(f"{'K':>2} {'T':>4} | {'forward':>8} | {'matmul':>7} {'logprob':>8} {'MI':>8} | {'head: MI adds':>13} | "
          f"{'whole lp':>8} {'whole MI':>8} | {'whole: MI adds':>14} | target <= 10%")
    for r in rows:
        head_add = r["mi"] / r["logprob"] - 1
        whole_add = r["whole_mi"] / r["whole_lp"] - 1
        print(f"{r['K']:>2} {r['T']:>4} | {1e3 * r['fwd']:8.1f} | {1e3 * r['matmul']:7.1f} {1e3 * r['logprob']:8.1f} "
              f"{1e3 * r['mi']:8.1f} | {100 * head_add:12.0f}% | {1e3 * r['whole_lp']:8.1f} {1e3 * r['whole_mi']:8.1f} | "
              f"{100 * whole_add:13.1f}% | {'holds' if whole_add <= 0.10 else 'MISSED'}")
    print("matmul = the bare LM head (K, T, D) @ (D, V); logprob = K chunked_token_logprobs calls (matmul + logsumexp + "
          "gather); MI = ensemble_token_scores (matmul + in-place log-softmax + MI over V + diagnostics); "
          "whole = median forward + median head")
    return rows


def bench_head_dim(dims, K, T, V, reps, gen, chunk):
    "Part (c): the same three heads on synthetic hidden states of growing hidden size D (fixed K, T, V): MI's share vs D."
    print(f"\n(c) LM head only, synthetic hidden states and weight, K = {K}, one sequence of T = {T}, V = {V}; ms, median of {reps}")
    print(f"{'D':>5} | {'matmul':>8} {'logprob':>8} {'MI':>8} | {'logprob - matmul':>16} {'MI - matmul':>11} | head: MI adds")
    for D in dims:
        hidden = torch.randn(K, 1, T, D, generator=gen)                            # (K, 1, T, D)
        weight = torch.randn(V, D, generator=gen).mul_(D ** -0.5)                  # (V, D)
        ids = torch.randint(0, V, (1, T), generator=gen)                           # (1, T)
        paths = head_paths(hidden, weight, ids, [T], chunk)
        for f in paths.values(): f()                                               # warm-up
        m = interleaved(paths, reps)
        print(f"{D:>5} | {1e3 * m['matmul']:8.1f} {1e3 * m['logprob']:8.1f} {1e3 * m['mi']:8.1f} | "
              f"{1e3 * (m['logprob'] - m['matmul']):16.1f} {1e3 * (m['mi'] - m['matmul']):11.1f} | {100 * (m['mi'] / m['logprob'] - 1):12.0f}%")
    print("the non-matmul work (log-softmax, MI, gathers) is O(K·T·V) whatever D is; the matmul is O(K·T·V·D)")


def bench_mixed_loop(ens_by_k, lengths, B, reps, gen, group, G):
    "Part (b): member_hidden and score_rollouts with scoring='mixed' against scoring='loop', side by side."
    from ugttt.policy import member_hidden
    from ugttt.scores import score_rollouts
    print(f"\n(b) mixed-adapter scoring (one forward of K·B rows) vs loop (K forwards of B rows); ms, median of {reps}")
    print(f"{'what':<38} {'K':>2} | {'mixed':>8} {'loop':>8} | loop / mixed")
    for K, ens in ens_by_k.items():
        base_cfg = ens.cfg
        cfgs = dict(mixed=replace(base_cfg, scoring="mixed"), loop=replace(base_cfg, scoring="loop"))
        V = ens.base_model.get_output_embeddings().weight.shape[0]
        cases = []
        for T in lengths:
            ids = torch.randint(0, V, (B, T), generator=gen); am = torch.ones(B, T, dtype=torch.bool)
            cases.append((f"member_hidden, B = {B}, T = {T}", lambda ids=ids, am=am: member_hidden(ens, ids, am)))
        if group is not None:
            n_tok = int(group.attention_mask.sum())
            cases.append((f"score_rollouts, G = {G} real ({n_tok} tok)", lambda: score_rollouts(ens, group, base=False)))
        for label, f in cases:
            def run(mode, f=f):
                ens.cfg = cfgs[mode]
                with torch.no_grad(): f()
            run("mixed"); run("loop")                                              # warm-up
            med = interleaved(dict(mixed=lambda: run("mixed"), loop=lambda: run("loop")), reps)
            print(f"{label:<38} {K:>2} | {1e3 * med['mixed']:8.1f} {1e3 * med['loop']:8.1f} | {med['loop'] / med['mixed']:.2f}")
        ens.cfg = base_cfg


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a short run: 3 repetitions, T = 128 only, K = 3 only")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--reps", type=int, default=7, help="repetitions; the median is reported")
    ap.add_argument("--lengths", type=int, nargs="+", default=[128, 480], help="sequence lengths T (tokens)")
    ap.add_argument("--ks", type=int, nargs="+", default=[3, 5], help="ensemble sizes K")
    ap.add_argument("--batch", type=int, default=2, help="sequences B per scoring forward (score_batch)")
    ap.add_argument("--group", type=int, default=8, help="G, rollouts of the real group scored in (b)")
    ap.add_argument("--head-dims", type=int, nargs="+", default=[256, 1024, 4096], help="hidden sizes D of part (c)")
    ap.add_argument("--seed", type=int, default=0, help="seeds the token ids, the adapters' offsets and sampling")
    args = ap.parse_args()
    if args.quick: args.reps, args.lengths, args.ks, args.head_dims = 3, [128], [3], [256, 1024]
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    from ugttt.policy import LoRAEnsemble, PolicyConfig
    from ugttt.generation import encode_prompt, generate_group
    from ugttt.tasks import get_task

    ens_by_k = {K: LoRAEnsemble.from_config(PolicyConfig.preset("tiny", n_adapters=K, seed=args.seed, score_batch=args.batch))
                for K in args.ks}
    cfg = next(iter(ens_by_k.values())).cfg
    print(f"policy scoring bench: embedded model (preset tiny, float32, CPU), torch {torch.__version__}, "
          f"threads = {torch.get_num_threads()}, seed = {args.seed}, K in {args.ks}, T in {args.lengths}, reps = {args.reps}")
    gen = torch.Generator().manual_seed(args.seed)
    rows = bench_mi(ens_by_k, args.lengths, args.batch, args.reps, 3 * args.reps, gen)
    from report import record
    r = max(rows, key=lambda r: (r["K"], r["T"]))
    record("policy_scoring.py", f"scoring with token MI, K={r['K']}, T={r['T']}, B={args.batch}", 1e3 * r["whole_mi"], "ms",
           "scoring with log-probs only", 1e3 * r["whole_lp"])
    V = next(iter(ens_by_k.values())).base_model.get_output_embeddings().weight.shape[0]
    bench_head_dim(args.head_dims, max(args.ks), 128, V, args.reps, gen, cfg.chunk_size)

    ens0 = next(iter(ens_by_k.values()))
    prompt = encode_prompt(ens0, get_task("cp26").prompt(None, style="compact"))
    group = generate_group(ens0, prompt, args.group, generator=torch.Generator().manual_seed(args.seed))
    for ens in ens_by_k.values(): ens.cfg = replace(ens.cfg, score_batch=args.group)   # the whole group in one forward
    bench_mixed_loop(ens_by_k, args.lengths, args.batch, args.reps, gen, group, args.group)
    print(f"\n(b) random sequences use score_batch = B = {args.batch}; the real group uses score_batch = G = {args.group} "
          f"(prompt {group.prompt_len} tokens, padded width {group.input_ids.shape[1]})")


if __name__ == "__main__":
    main()
