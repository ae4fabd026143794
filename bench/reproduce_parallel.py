"""Wall time of training a set of reproduce runs one after the other (all cores each) vs side by side (cores split).

`ugttt.reproduce.train_runs` trains `workers` runs at once, each in its own process with cores/workers torch threads.
This script trains the same runs twice, in fresh temporary directories, interleaved in one invocation:
  sequential = workers 1, threads = all cores;   parallel = workers 2, threads = cores / 2.
The runs are the tiny preset's baseline and UG-TTT with two seeds each on one task (default cp26), with a small
budget (default 3 epochs of 2 groups) so that the script takes a few minutes; read the ratio, not the absolute times.
Four runs of unequal length, ensembles first, as `ensure_runs` orders them: with only two runs the parallel arm
would wait on the longer one alone. Decoding the embedded
model is bound by Python overhead more than arithmetic, so two single-threaded runs make better use of 2 cores.
Per run the trainer's own epoch times are also printed (time/total summed), which shows how much each run slowed down
when it shared the machine.

Usage: python bench/reproduce_parallel.py [--task cp26] [--epochs 3] [--groups 2] [--repeats 1]
"""
import argparse, json, os, sys, tempfile, time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def trial(task: str, epochs: int, groups: int, workers: int, threads: int) -> tuple[float, list[float]]:
    "Train UG-TTT and the baseline (two seeds each) with the given workers/threads: wall seconds and each run's summed epoch seconds."
    from ugttt.reproduce import RunSpec, run_config, train_runs
    with tempfile.TemporaryDirectory() as d:
        specs = [RunSpec(task, "ugttt", 0), RunSpec(task, "ugttt", 1), RunSpec(task, "baseline", 0), RunSpec(task, "baseline", 1)]
        jobs = [(run_config(s, epochs=epochs, groups_per_epoch=groups), Path(d) / s.name, False) for s in specs]
        t0 = time.perf_counter()
        train_runs(jobs, workers=workers, threads=threads, progress=False)
        wall = time.perf_counter() - t0
        own = []
        for _, path, _ in jobs:
            recs = [json.loads(l) for l in (path / "metrics.jsonl").read_text().splitlines() if "progress/epoch" in l]
            own.append(sum(r["time/total"] for r in recs))
    return wall, own


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="cp26"); ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--groups", type=int, default=2); ap.add_argument("--repeats", type=int, default=1)
    a = ap.parse_args()
    cores = os.cpu_count() or 1
    print(f"reproduce_parallel: {a.task}, ugttt and baseline x 2 seeds, {a.epochs} epochs x {a.groups} groups, {cores} cores, "
          f"load average before {os.getloadavg()[0]:.2f}")
    seq, par = [], []
    for _ in range(a.repeats):   # interleaved, so drift in the machine's load hits both arms
        seq.append(trial(a.task, a.epochs, a.groups, workers=1, threads=cores))
        par.append(trial(a.task, a.epochs, a.groups, workers=2, threads=max(1, cores // 2)))
    for name, res, cfg in (("sequential", seq, f"1 worker x {cores} threads"), ("parallel", par, f"2 workers x {max(1, cores // 2)} thread(s)")):
        walls = [w for w, _ in res]
        own = " ".join(f"{x:.1f}" for _, runs in res for x in runs)
        print(f"  {name:10s} ({cfg:22s}) wall {min(walls):7.1f} s   summed epoch seconds per run (ugttt s0 s1, baseline s0 s1): {own}")
    ratio = min(w for w, _ in seq) / min(w for w, _ in par)
    print(f"  speed-up of parallel over sequential: {ratio:.2f}x   (load average after {os.getloadavg()[0]:.2f})")
    from report import record
    record("reproduce_parallel.py", f"4 tiny runs, 2 workers x {max(1, cores // 2)} thread(s)", min(w for w, _ in par), "s",
           f"1 worker x {cores} threads", min(w for w, _ in seq))


if __name__ == "__main__":
    main()
