"""Verification backends side by side: programs per second of the local warm sandbox and of Ray (`ugttt.sandbox.ray`).

    python bench/sandbox_backends.py                  # 200 programs of each kind, 2 workers, a local Ray with 2 CPUs
    python bench/sandbox_backends.py --quick          # 40 of each
    python bench/sandbox_backends.py --address auto   # a running Ray cluster instead of a local one

Two kinds of program, each run N times through `Executor.map` with the same worker count: a trivial one (`return 1`,
pure overhead: dispatch, isolation, result) and a real circle-packing verification (`Task.evaluate` of a numpy
program that builds a 26-circle grid, then the CP26 verifier on its result, as in a training run). On one machine
Ray adds its scheduler, object store and task dispatch to every program, so the local sandbox is the faster of the two
there; Ray is for spreading programs with budgets of minutes over a cluster, where that overhead is noise. The figure
to read is the Ray/local ratio, measured in one run.
"""
import argparse, os, sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ugttt.sandbox import Sandbox
from ugttt.tasks import get_task

TRIVIAL = "def run():\n    return 1\n"
PACKING = """```python
import numpy as np
def run_packing():
    xs, ys = np.meshgrid((np.arange(6) + 0.5) / 6, (np.arange(5) + 0.5) / 5)
    centers = np.stack([xs.ravel(), ys.ravel()], axis=1)[:26]
    radii = np.full(26, 0.08)
    return centers, radii, float(radii.sum())
```"""


def trivial_per_s(ex, n: int) -> float:
    "Programs per second of `ex.map` over n trivial programs."
    t = time.perf_counter()
    rs = ex.map([(TRIVIAL, "run")] * n)
    dt = time.perf_counter() - t
    assert all(r.ok and r.value == 1 for r in rs), [r.error for r in rs if not r.ok][:3]
    return n / dt


def verified_per_s(ex, n: int, workers: int) -> float:
    "Verified circle packings per second: Task.evaluate of n programs, `workers` at a time, through `ex`."
    task = get_task("cp26")
    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        evals = list(pool.map(lambda _: task.evaluate(PACKING, None, 10.0, ex), range(n)))
    dt = time.perf_counter() - t
    assert all(e.correct and abs(e.bound - 2.08) < 1e-9 for e in evals), [e.error for e in evals if not e.correct][:3]
    return n / dt


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200, help="programs of each kind per backend")
    ap.add_argument("--workers", type=int, default=2, help="programs in flight at once, both backends")
    ap.add_argument("--address", default=None, help="Ray cluster to join; default: a local Ray with --workers CPUs")
    ap.add_argument("--quick", action="store_true", help="40 programs of each kind")
    a = ap.parse_args()
    n = 40 if a.quick else a.n
    import ray
    from ugttt.sandbox.ray import RaySandbox
    res = {}
    with Sandbox(workers=a.workers, budget_s=10.0) as local:
        local.map([(TRIVIAL, "run")] * a.workers)                        # warm: every worker started once
        res["local_trivial"] = trivial_per_s(local, n)
        res["local_verified"] = verified_per_s(local, n, a.workers)
        layers = local.layers
    t = time.perf_counter()
    if a.address is None:
        ray.init(num_cpus=a.workers, include_dashboard=False, object_store_memory=100 * 2**20, log_to_driver=False,
                 configure_logging=False)
    else: ray.init(address=a.address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        with RaySandbox(workers=a.workers, budget_s=10.0) as rsb:
            rsb.warm()
            res["ray_start_s"] = time.perf_counter() - t
            res["ray_trivial"] = trivial_per_s(rsb, n)
            res["ray_verified"] = verified_per_s(rsb, n, a.workers)
    finally: ray.shutdown()
    print(f"{os.cpu_count()} CPUs, {a.workers} workers, {n} programs of each kind; local isolation layers: {len(layers)}")
    print(f"Ray start and warm-up: {res['ray_start_s']:.1f} s")
    print(f"trivial programs:        local {res['local_trivial']:7.1f} /s   Ray {res['ray_trivial']:7.1f} /s   "
          f"Ray/local {res['ray_trivial'] / res['local_trivial']:.2f}x")
    print(f"verified CP26 packings:  local {res['local_verified']:7.1f} /s   Ray {res['ray_verified']:7.1f} /s   "
          f"Ray/local {res['ray_verified'] / res['local_verified']:.2f}x")
    from report import record
    record("sandbox_backends.py", f"Ray: trivial programs, {a.workers} workers", res["ray_trivial"], "programs/s",
           "the local sandbox, same workers", res["local_trivial"])
    record("sandbox_backends.py", f"Ray: verified CP26 programs, {a.workers} workers", res["ray_verified"], "programs/s",
           "the local sandbox, same workers", res["local_verified"])
    return res


if __name__ == "__main__":
    main()
