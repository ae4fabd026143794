"""Quality figures of the embedded default model: per task, 64 samples at temperature 1.0 from the compact prompt of
the root state, each run and scored by Task.evaluate in the sandbox (correct programs, their families and the
entropy in bits, the best bound against the best known); then load time and generation throughput (batch of 8).
Prints numbers; asserts nothing.

    python bench/default_model_quality.py [--n 64] [--seed 0] [--threads 2] [--json out.json]
"""
import argparse
import json
import sys
import time
from collections import Counter


def quality_report(model, tokenizer, n=64, tasks=None, temperature=1.0, seed=0, budget_s=10.0, workers=2):
    "Per task: n samples from the root prompt, evaluated; correct count, families, entropy, best bound, failures."
    from ugttt.corpus import evaluate_at_root, worse_than_best
    from ugttt.default_model import sample_programs
    from ugttt.families import family_entropy, label_family
    from ugttt.tasks import TASK_NAMES, get_task
    report = {}
    for name in tasks or TASK_NAMES:
        task = get_task(name)
        texts = sample_programs(model, tokenizer, task.prompt(task.initial_state(), style="compact"), n, temperature,
                                seed=seed)
        evals = evaluate_at_root([(name, t) for t in texts], budget_s, workers=workers)
        good = [e for e in evals if e.correct and e.reward > 0]
        labels = [label_family(name, e.code) for e in good]
        bounds = [e.bound for e in good]
        best = (min(bounds) if task.direction == "min" else max(bounds)) if bounds else None
        report[name] = {"n": n, "correct": len(good), "families": dict(Counter(labels).most_common()),
                        "entropy_bits": family_entropy(labels), "best": best, "best_known": task.best_known,
                        "direction": task.direction, "room_left": best is not None and worse_than_best(task, best),
                        "thinking_first": sum(t.startswith("<think>") and "</think>" in t for t in texts),
                        "errors": dict(Counter((e.error or "?").split(":")[0][:40] for e in evals if not e.correct))}
    return report


def generation_throughput(model, tokenizer, batch_size=8, max_new_tokens=320, seed=0, tasks=None):
    "New tokens per second when sampling a batch from each task's compact root prompt (tokens up to each row's EOS)."
    import torch
    from ugttt.default_model import _sample_new_ids
    from ugttt.tasks import TASK_NAMES, get_task
    torch.manual_seed(seed)
    tokens, seconds = 0, 0.0
    for name in tasks or TASK_NAMES:
        t = get_task(name)
        enc = tokenizer([t.prompt(t.initial_state(), style="compact")] * batch_size, return_tensors="pt",
                        add_special_tokens=False)
        start = time.perf_counter()
        new = _sample_new_ids(model, tokenizer, enc, 1.0, max_new_tokens)   # (B, T_new)
        seconds += time.perf_counter() - start
        ended = (new == tokenizer.eos_token_id).int().cumsum(1) > 0         # (B, T_new) at or after the first EOS
        tokens += int((~ended).sum()) + int(ended.any(1).sum())             # tokens up to and including each EOS
    return {"new_tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds, "batch_size": batch_size}


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
    from ugttt.default_model import DEFAULT_MODEL_DIR, MODEL_FILES, load_default_model
    import_s = time.perf_counter() - t
    t = time.perf_counter()
    model, tokenizer = load_default_model()
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    load_default_model()
    reload_s = time.perf_counter() - t
    info = json.loads((DEFAULT_MODEL_DIR / "training_info.json").read_text())
    size = sum((DEFAULT_MODEL_DIR / f).stat().st_size for f in MODEL_FILES)
    c = info["config"]
    print(f"default model: {info['n_params']:,} parameters, {size / 2**20:.2f} MB on disk, corpus {info['corpus_version']}, "
          f"seed {c['seed']}, {c['steps']} steps x {c['batch_size']}, final loss {info['final_loss']}, "
          f"training {info['train_wall_s'] / 60:.1f} min")
    print(f"load time (from_pretrained, model + tokenizer): {load_s:.2f} s first call, {reload_s:.2f} s again "
          f"(importing transformers and ugttt.default_model before: {import_s:.2f} s)")
    generation_throughput(model, tokenizer, batch_size=8, max_new_tokens=16)          # warm-up
    thr = generation_throughput(model, tokenizer, batch_size=8, seed=args.seed)
    print(f"generation throughput (batch of 8, temperature 1.0): {thr['tokens_per_s']:.0f} new tokens/s "
          f"({thr['new_tokens']} tokens in {thr['seconds']:.2f} s)")
    t = time.perf_counter()
    report = quality_report(model, tokenizer, n=args.n, seed=args.seed)
    print(f"quality report: {time.perf_counter() - t:.0f} s for {args.n} samples x {len(report)} tasks\n")
    print("| task | correct | families among the correct | entropy (bits) | best | best known | thinking first |")
    print("|---|---|---|---|---|---|---|")
    for task, r in report.items():
        fams = ", ".join(f"{k} {v}" for k, v in r["families"].items())
        best = f"{r['best']:.4f}" if r["best"] is not None else "-"
        print(f"| {task} ({r['direction']}) | {r['correct']}/{r['n']} ({100 * r['correct'] / r['n']:.0f} %) | "
              f"{len(r['families'])}: {fams} | {r['entropy_bits']:.2f} | {best}{'' if r['room_left'] else ' (!)'} | "
              f"{r['best_known']:.4f} | {r['thinking_first']}/{r['n']} |")
    for task, r in report.items():
        if r["errors"]: print(f"{task} failures: {r['errors']}")
    from report import record
    record("default_model_quality.py", "embedded model: generation, batch of 8", thr["tokens_per_s"], "tokens/s")
    for task, r in report.items():
        record("default_model_quality.py", f"embedded model: correct programs at the {task} root", 100 * r["correct"] / r["n"], "%")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"import_s": import_s, "load_s": load_s, "reload_s": reload_s, "throughput": thr,
                       "report": report, "training_info": info}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
