"""Seconds per training epoch of the `tiny` preset (ugttt.trainer.train on the embedded model, CPU).

The config is `make_config("cp26", method, "tiny")`: 8 groups x 8 rollouts per epoch, K = 5 adapters for `ugttt`
(with the streaming gate, as on CP26), K = 1 for `baseline` (TTT-Discover). Each method trains for 2 epochs in a fresh
temporary run directory, with its own sandbox (cfg.sandbox.workers workers), as `ugttt train` would. Per epoch the table
gives the trainer's own time split, read from the epoch records' `time/*` keys:
  generate = time/rollout (PUCT parents, prompts, batched decoding), verify = time/verify (sandbox + scoring of the
  programs), score = time/score (all-adapter scoring: token MI, U_i, base log-probs), update = time/train (advantages,
  the K adapters' backward, batched or one after another, NNM, AdamW), epoch = time/total (all of run_epoch, logs included);
ckpt = the epoch's checkpoint (save_checkpoint, timed by wrapping it); setup (model load, sandbox start) is printed
per method. The per-epoch figure compared with the target is epoch + ckpt.
Epoch 1 includes warm-up (first decode, allocator, sandbox workers' first programs): read epoch 2 as the steady state.
The target is at most 20 s per epoch (epoch 2) on a 2-core CPU. The machine may be shared: the load average is printed
before and after, and torch threads competing with another process's threads slow small ops down many times over.
Each method runs once per ensemble (`--ensembles`): `stacked-batched` (the default of the tiny preset: the batched
module of ugttt.ensemble, all K adapters in one training forward and backward), `stacked` (the same module, adapters
trained one after another, the paper preset's way) and `peft` (K peft adapters, one after another: the path before
the batched module, and the mechanism study's pinned one). Each UG-TTT epoch is compared with the baseline epoch of the
same ensemble, measured in the same run (the target: at most 1.5x). `ugttt-own` is UG-TTT with `update.train_on="own"`:
each adapter trains only on the rollouts it generated (batched: every rollout once, through its own adapter).
`ugttt-drop` is UG-TTT with `update.shared_negatives="drop"` (the stable-ensemble setting of the mechanism study,
docs/mechanism.md stage 4): another adapter's rollout enters adapter k's loss only where its advantage is positive.

On a CPU the arithmetic sets that ratio: a UG-TTT epoch scores every rollout under K adapters and the base (K + 1
forwards, the baseline 2) and trains K adapters on every rollout (K forward+backward passes, the baseline 1; with
train_on="own" one, as the baseline), while generation and verification cost the same. If each forward costs what the
baseline's does, the ratio is
  (generate + verify + (K + 1)/2 * score + n * update) / epoch       (all of the baseline's, same ensemble; n = K or 1),
the "arithmetic estimate" the script prints next to the measured ratio (one epoch each: +-10% of noise). Batching the K
forwards into one does not change the arithmetic; only a device where one batched forward of K blocks costs less than
K forwards (a GPU with a small model, where launches and not flops set the time) can go well below it.

Usage: python bench/trainer_epoch.py [--threads 2] [--quick] [--methods ugttt ugttt-own ugttt-drop baseline] [--ensembles stacked-batched peft] [--task cp26]
"""
import argparse, os, sys, tempfile, time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch

TARGET_S = 20.0      # seconds per epoch of the tiny preset on this 2-core machine
SPLIT = [("generate", "time/rollout"), ("verify", "time/verify"), ("score", "time/score"), ("update", "time/train"),
         ("epoch", "time/total")]


VARIANTS = {"ugttt-own": ("ugttt", {"update.train_on": "own"}),                 # name -> (method, overrides)
            "ugttt-drop": ("ugttt", {"update.shared_negatives": "drop"})}
ENSEMBLES = {"peft": dict(ensemble="peft", train_mode="per_adapter"), "stacked": dict(ensemble="stacked", train_mode="per_adapter"),
             "stacked-batched": dict(ensemble="stacked", train_mode="batched")}


def run(task: str, method: str, epochs: int, ensemble: str = "peft") -> tuple[list[dict], list[float], float]:
    "Train the tiny preset for `epochs` epochs in a temporary directory: epoch records, checkpoint seconds, whole call's seconds."
    import ugttt.trainer as trainer
    from ugttt.presets import make_config
    method, over = VARIANTS.get(method, (method, {}))
    cfg = make_config(task, method, "tiny", epochs=epochs, **over, **{f"policy.{k}": v for k, v in ENSEMBLES[ensemble].items()})
    save, ckpt = trainer.save_checkpoint, []

    def timed_save(*args, **kw):
        t = time.perf_counter(); out = save(*args, **kw); ckpt.append(time.perf_counter() - t); return out

    trainer.save_checkpoint = timed_save          # train() looks the name up in its module at each epoch
    try:
        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            records = trainer.train(cfg, Path(tmp) / "run", progress=False)
            return records, ckpt, time.perf_counter() - t
    finally: trainer.save_checkpoint = save


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--quick", action="store_true", help="1 epoch per method instead of 2")
    p.add_argument("--methods", nargs="+", default=["ugttt", "ugttt-own", "baseline"],
                   help="methods to time (default ugttt ugttt-own baseline; ugttt-own: update.train_on='own', "
                        "ugttt-drop: update.shared_negatives='drop')")
    p.add_argument("--task", default="cp26", help="task (default cp26)")
    p.add_argument("--ensembles", nargs="+", default=["stacked-batched", "peft"], choices=list(ENSEMBLES),
                   help="how the adapters are held and trained (default stacked-batched peft)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    from ugttt.presets import make_config
    epochs = 1 if a.quick else 2
    shape = make_config(a.task, "ugttt", "tiny")
    print(f"trainer epoch, tiny preset on {a.task}: {shape.groups_per_epoch} groups x {shape.group_size} rollouts, "
          f"K = {shape.n_adapters} (ugttt) / 1 (baseline); torch threads {torch.get_num_threads()}, "
          f"sandbox workers {shape.sandbox.workers}, {epochs} epoch(s) per method")
    print("load average before: %.2f %.2f %.2f" % os.getloadavg())
    head = ["method", "epoch"] + [n for n, _ in SPLIT] + ["ckpt", "R_max", "correct", "H bits"]
    rows, steady, setup, phases = [], {}, {}, {}
    for ensemble in a.ensembles:
        for method in a.methods:
            name = f"{method} ({ensemble})"
            records, ckpt, wall = run(a.task, method, epochs, ensemble)
            setup[name] = wall - sum(r["time/total"] for r in records) - sum(ckpt)
            for r, c in zip(records, ckpt):
                rows.append([name, str(r["progress/epoch"] + 1)] + [f"{r[k]:.2f}" for _, k in SPLIT] +
                            [f"{c:.2f}", f"{r['train/reward/exec/best']:.4f}", f"{r['train/correctness/rate']:.0%}",
                             f"{r['families/entropy_bits']:.2f}"])
            steady[name] = records[-1]["time/total"] + ckpt[-1]
            phases[name] = {n: records[-1][k] for n, k in SPLIT}
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    for row in [head] + rows: print("  ".join(v.rjust(w) for v, w in zip(row, widths)))
    print("(seconds) setup, model load and sandbox start: " + ", ".join(f"{m} {s:.1f} s" for m, s in setup.items()))
    print("load average after:  %.2f %.2f %.2f" % os.getloadavg())
    which = "epoch 2" if epochs == 2 else "epoch 1, with warm-up"
    from report import record
    K = shape.n_adapters
    for ensemble in a.ensembles:
        base = f"baseline ({ensemble})"
        if base in steady: record("trainer_epoch.py", f"tiny epoch ({which}), {base} on {a.task}", steady[base], "s", "", None)
        for variant, n_train in (("ugttt", K), ("ugttt-own", 1), ("ugttt-drop", K)):   # training forwards per rollout (drop: at most K)
            ug = f"{variant} ({ensemble})"
            if ug not in steady: continue
            record("trainer_epoch.py", f"tiny epoch ({which}), {ug} on {a.task}", steady[ug], "s",
                   base if base in steady else "", steady.get(base))
            if base not in steady: continue
            b = phases[base]
            estimate = (b["generate"] + b["verify"] + (K + 1) / 2 * b["score"] + n_train * b["update"]) / b["epoch"]
            print(f"{ensemble}: {variant} / baseline epoch {steady[ug] / steady[base]:.2f}x (target <= 1.5x); phases "
                  + ", ".join(f"{n} {phases[ug][n] / b[n]:.2f}x" for n, _ in SPLIT[:-1] if b[n] > 0)
                  + f"; arithmetic estimate {estimate:.2f}x (K = {K}: score x{(K + 1) / 2:g}, update x{n_train})")
    if "ugttt (peft)" in steady:
        for ensemble in a.ensembles:
            if ensemble != "peft" and f"ugttt ({ensemble})" in steady:
                record("trainer_epoch.py", f"tiny epoch ({which}), ugttt ({ensemble}) against ugttt through peft",
                       steady[f"ugttt ({ensemble})"], "s", "ugttt (peft)", steady["ugttt (peft)"])
    for method, s in steady.items():
        print(f"target <= {TARGET_S:.0f} s per epoch ({which}, epoch + ckpt), {method}: {s:.1f} s, "
              f"{'holds' if s <= TARGET_S else 'does NOT hold'}")


if __name__ == "__main__":
    main()
