"""Quality bars of the embedded default model (issue 4): per task, 64 samples at temperature 1.0 from the compact
prompt of the root state, run and scored by Task.evaluate; plus load time and generation throughput (batch of 8).

    python bench/toy_quality.py [--n 64] [--seed 0] [--json out.json]
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=64, help="samples per task")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(args.threads)
    t = time.perf_counter()
    import transformers  # noqa: F401  (timed apart: the import is paid once per process, whatever the model)
    from ugttt.toy import DEFAULT_MODEL_DIR, MODEL_FILES, generation_throughput, load_default_model, quality_report
    import_s = time.perf_counter() - t
    t = time.perf_counter()
    model, tokenizer = load_default_model()
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    load_default_model()
    reload_s = time.perf_counter() - t
    info = json.loads((DEFAULT_MODEL_DIR / "training_info.json").read_text())
    size = sum((DEFAULT_MODEL_DIR / f).stat().st_size for f in MODEL_FILES)
    print(f"default model: {info['n_params']:,} parameters, {size / 2**20:.2f} MB on disk, corpus {info['corpus_version']}, "
          f"seed {info['seed']}, {info['steps']} steps, final loss {info['final_loss']}, "
          f"training {info['train_wall_s'] / 60:.1f} min")
    print(f"load time (from_pretrained, model + tokenizer): {load_s:.2f} s first call, {reload_s:.2f} s again "
          f"(importing transformers and ugttt.toy before: {import_s:.2f} s)")
    generation_throughput(model, tokenizer, batch_size=8, max_new_tokens=16)          # warm-up
    thr = generation_throughput(model, tokenizer, batch_size=8, max_new_tokens=256, seed=args.seed)
    print(f"generation throughput (batch of 8, temperature 1.0): {thr['tokens_per_s']:.0f} new tokens/s "
          f"({thr['new_tokens']} tokens in {thr['seconds']:.2f} s)")
    t = time.perf_counter()
    report = quality_report(model, tokenizer, n=args.n, seed=args.seed)
    print(f"quality report: {time.perf_counter() - t:.0f} s for {args.n} samples x {len(report)} tasks\n")
    print(f"| task | correct | families (correct) | entropy (bits) | best | best known | bars |")
    print(f"|---|---|---|---|---|---|---|")
    for task, r in report.items():
        fams = ", ".join(f"{k} {v}" for k, v in r["families"].items())
        best = f"{r['best']:.4f}" if r["best"] is not None else "-"
        print(f"| {task} | {r['correct']}/{r['n']} ({100 * r['valid_frac']:.0f}%) | {r['n_families']}: {fams} | "
              f"{r['entropy_bits']:.2f} | {best} | {r['best_known']:.4f} ({r['direction']}) | "
              f"{'pass' if r['passes'] else 'FAIL'} |")
    for task, r in report.items():
        if r["errors"]: print(f"{task} failures: {r['errors']}")
    ok = all(r["passes"] for r in report.values())
    print("\nall quality bars met" if ok else "\nsome quality bars NOT met")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"import_s": import_s, "load_s": load_s, "reload_s": reload_s, "throughput": thr, "report": report, "training_info": info}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
