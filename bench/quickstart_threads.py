"""CPU seconds per group of the README's quick start at 1 and 2 torch threads, on an idle machine and beside busy processes.

The run is the quick start's (`make_config("cp26", "ugttt", "tiny")`, as `ugttt train --task cp26 --method ugttt
--preset tiny` builds it) with Table 1's `groups_per_epoch=4`, trained for `--epochs` epochs in a fresh interpreter per
setting, so that torch starts with the thread count it is given (`torch.set_num_threads`, and OMP_NUM_THREADS for the
libraries beneath it). Per setting the table gives
  cpu/group   = the trainer process's CPU seconds (every thread of it: torch's intra-op threads included) per group,
  box/group   = the CPU seconds of the sandbox's processes (its workers and the programs they ran, as reaped) per group,
  wall/group  = wall-clock seconds of the train() call per group,
and the ratio of cpu/group to the 1-thread figure of the same load. "busy N" starts N spin loops (plain Python
`while True: pass`, one core each) before the run and stops them after it: a machine that is also doing other work.
Model loading and the sandbox's start are inside the figures (the same in every setting).

The question it answers: torch's intra-op threads spin while they wait for each other, and on a core another
process holds they wait long; how much CPU does that cost per group, and which default never costs more than 1.2x the
best. Run it on an otherwise idle machine: the load average is printed before and after.

Usage: python bench/quickstart_threads.py [--threads 1 2] [--busy 0 2] [--epochs 2] [--quick]
"""
import argparse, json, os, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from report import record
GROUPS = 4           # Table 1's groups_per_epoch (reproduce/table1.ipynb)
RATIO_TARGET = 1.2   # the default's CPU per group may cost at most this times the best setting's, in every load

# one training run in a fresh interpreter: argv = threads, epochs, groups; prints one JSON line
CHILD = ("import json, os, resource, sys, tempfile, time\n"
         "from pathlib import Path\n"
         "threads, epochs, groups = map(int, sys.argv[1:4])\n"
         "import torch; torch.set_num_threads(threads)\n"
         "from ugttt.presets import make_config\n"
         "from ugttt.trainer import train\n"
         "cfg = make_config('cp26', 'ugttt', 'tiny', epochs=epochs, groups_per_epoch=groups)\n"
         "with tempfile.TemporaryDirectory() as d:\n"
         "    c0, t0 = time.process_time(), time.perf_counter()\n"
         "    recs = train(cfg, Path(d) / 'run', progress=False)\n"
         "    cpu, wall = time.process_time() - c0, time.perf_counter() - t0\n"
         "ch = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
         "print(json.dumps(dict(cpu=cpu, box=ch.ru_utime + ch.ru_stime, wall=wall, groups=epochs * groups,\n"
         "                      logged=recs[-1].get('torch/threads'), r_max=recs[-1].get('r_max'))))")


def run(threads: int, busy: int, epochs: int) -> dict:
    "One quick-start run at `threads` torch threads beside `busy` spin loops: CPU and wall seconds per group."
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1",
               "TRANSFORMERS_VERBOSITY": "error", "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, "-c", CHILD, str(threads), str(epochs), str(GROUPS)], env=env,
                             capture_output=True, text=True)
        if out.returncode: raise RuntimeError(f"the run at {threads} thread(s) failed:\n{out.stderr[-2000:]}")
        r = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        for s in spinners: s.kill(); s.wait()
    return dict(threads=threads, busy=busy, **{f"{k}_per_group": r[k] / r["groups"] for k in ("cpu", "box", "wall")},
                groups=r["groups"], logged_threads=r["logged"])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch thread counts to compare (default 1 2)")
    p.add_argument("--busy", type=int, nargs="+", default=[0, 2], help="spin loops beside the run (default 0 2)")
    p.add_argument("--epochs", type=int, default=2, help=f"epochs per run, {GROUPS} groups each (default 2)")
    p.add_argument("--quick", action="store_true", help="1 epoch per run")
    a = p.parse_args()
    epochs = 1 if a.quick else a.epochs
    print(f"machine: {os.cpu_count()} CPUs; load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows = [run(t, b, epochs) for b in a.busy for t in a.threads]
    print(f"\nquick start (cp26, ugttt, tiny, groups_per_epoch {GROUPS}), {epochs} epoch(s) = {epochs * GROUPS} groups per setting")
    print(f"{'load':>8} {'threads':>7} {'cpu/group':>10} {'box/group':>10} {'wall/group':>10} {'cpu vs 1 thread':>16}")
    for r in rows:
        one = next((x for x in rows if x["busy"] == r["busy"] and x["threads"] == 1), None)
        ratio = f"{r['cpu_per_group'] / one['cpu_per_group']:.2f}x" if one else "-"
        print(f"{'busy ' + str(r['busy']) if r['busy'] else 'idle':>8} {r['threads']:>7} {r['cpu_per_group']:>9.2f}s "
              f"{r['box_per_group']:>9.2f}s {r['wall_per_group']:>9.2f}s {ratio:>16}")
    best = {b: min(r["cpu_per_group"] for r in rows if r["busy"] == b) for b in a.busy}
    for t in a.threads:
        worst = max(r["cpu_per_group"] / best[r["busy"]] for r in rows if r["threads"] == t)
        print(f"{t} thread(s): at most {worst:.2f}x the best CPU per group in any load "
              f"({'within' if worst <= RATIO_TARGET else 'over'} the {RATIO_TARGET}x target)")
    for r in rows:
        one = next((x for x in rows if x["busy"] == r["busy"] and x["threads"] == 1), None)
        if r["threads"] != 1 and one:
            record("quickstart_threads.py", f"quick start CPU per group, {r['threads']} threads, {r['busy']} busy loops beside it",
                   r["cpu_per_group"], "s", "1 thread, same load", one["cpu_per_group"])
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(json.dumps(dict(rows=rows)))


if __name__ == "__main__":
    main()
