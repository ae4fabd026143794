"""Sandbox throughput: programs per second and per-program overhead of `ugttt.sandbox`, next to a fresh interpreter.

    python bench/sandbox_throughput.py                 # defaults: 200 programs, 2 workers, 12 fresh interpreters
    python bench/sandbox_throughput.py --n 500 --workers 2 --json bench/out/sandbox.json
    python bench/sandbox_throughput.py --isolation mountns   # the same without bubblewrap (ugttt.isolation)

Per-program overhead is the wall time of a program that does nothing (`def run(): return 1`), measured one at a time
from the caller: waiting for the worker to be idle, dispatch, the program, result, report. As root that includes, per
program, a fork, a fresh tmpfs `/tmp` and `/dev/shm`, an IPC namespace, a uid switch and a seccomp filter, the sweep
of the program's processes and the zygote's health check. The baselines run the same program the way a
harness without a warm worker must: a fresh interpreter per program (`python -c`), once importing numpy and scipy
(`import numpy, scipy`, lazy submodules) and once importing the modules our zygote preloads (numpy and the scipy
submodules programs use). Throughput is `Sandbox.map` over N programs with W workers (programs per second), for the
trivial program and for a small numpy program.
"""
import argparse, json, os, statistics, subprocess, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ugttt.sandbox import DEFAULT_PRELOAD, Sandbox

TRIVIAL = 'def run():\n    return 1\n'
NUMPY = 'import numpy as np\ndef run():\n    x = np.arange(10_000, dtype=float)\n    return float(np.sum(x * x))\n'


def fresh_interpreter_s(imports: str, program: str, n: int) -> list:
    "Wall seconds of `n` fresh interpreters that import `imports`, define `program` and call run()."
    code = f'{imports}\n{program}\nprint(run())'
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'OPENBLAS_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1'}
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([sys.executable, '-c', code], check=True, stdout=subprocess.DEVNULL, env=env)
        out.append(time.perf_counter() - t)
    return out


def sequential_s(sb: Sandbox, program: str, n: int) -> list:
    "Wall seconds of `n` programs run one after the other (the per-program latency seen by a caller)."
    out = []
    for _ in range(n):
        t = time.perf_counter()
        r = sb.run(program, 'run')
        out.append(time.perf_counter() - t)
        assert r.ok, r
    return out


def throughput(sb: Sandbox, program: str, n: int) -> float:
    "Programs per second of `Sandbox.map` over `n` copies of `program`."
    t = time.perf_counter()
    rs = sb.map([(program, 'run')] * n)
    dt = time.perf_counter() - t
    assert all(r.ok for r in rs), [r.error for r in rs if not r.ok][:3]
    return n / dt


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--n', type=int, default=200, help='programs per sandbox measurement')
    ap.add_argument('--workers', type=int, default=2)
    ap.add_argument('--baseline-n', type=int, default=12, help='fresh interpreters per baseline')
    ap.add_argument('--json', type=Path, default=None, help='also write the figures here')
    ap.add_argument('--isolation', default='auto', help="the sandbox's isolation mode: auto, bwrap, mountns (netns, limits: unconfined)")
    a = ap.parse_args()
    med = lambda xs: statistics.median(xs)
    res = {'cpus': os.cpu_count(), 'load_avg_before': os.getloadavg()[0], 'n': a.n, 'workers': a.workers}
    t = time.perf_counter()
    with Sandbox(workers=a.workers, budget_s=10.0, isolation=a.isolation) as sb:
        sb.map([(TRIVIAL, 'run')] * a.workers)                     # warm: every worker started and used once
        res['isolation'], res['layers'], res['missing'] = sb.isolation, sb.layers, sb.missing
        res['worker_start_s'] = time.perf_counter() - t
        seq = sequential_s(sb, TRIVIAL, a.n)
        res['sandbox_overhead_ms'] = 1000 * med(seq)
        res['sandbox_overhead_p90_ms'] = 1000 * sorted(seq)[int(0.9 * len(seq))]
        res['sandbox_numpy_program_ms'] = 1000 * med(sequential_s(sb, NUMPY, a.n // 2))
        res['sandbox_programs_per_s'] = throughput(sb, TRIVIAL, a.n)
        res['sandbox_numpy_programs_per_s'] = throughput(sb, NUMPY, a.n)
    preload = 'import ' + ', '.join(m for m in DEFAULT_PRELOAD)
    res['fresh_numpy_scipy_ms'] = 1000 * med(fresh_interpreter_s('import numpy, scipy', TRIVIAL, a.baseline_n))
    res['fresh_preload_ms'] = 1000 * med(fresh_interpreter_s(preload, TRIVIAL, a.baseline_n))
    res['ratio_vs_numpy_scipy'] = res['fresh_numpy_scipy_ms'] / res['sandbox_overhead_ms']
    res['ratio_vs_preload'] = res['fresh_preload_ms'] / res['sandbox_overhead_ms']
    res['load_avg_after'] = os.getloadavg()[0]

    print(f"isolation: {res['isolation']}  ({res['cpus']} CPUs, load average {res['load_avg_before']:.1f} -> {res['load_avg_after']:.1f})")
    for layer in res['layers']: print('  -', layer)
    for gap in res['missing']: print('  - MISSING:', gap)
    print(f"worker start (both workers, in parallel):       {res['worker_start_s']:.2f} s")
    print(f"sandbox per-program overhead (median, p90):      {res['sandbox_overhead_ms']:.1f} ms, {res['sandbox_overhead_p90_ms']:.1f} ms")
    print(f"sandbox small numpy program (median):            {res['sandbox_numpy_program_ms']:.1f} ms")
    print(f"sandbox throughput, {a.workers} workers, trivial / numpy:  {res['sandbox_programs_per_s']:.0f} / {res['sandbox_numpy_programs_per_s']:.0f} programs/s")
    print(f"fresh interpreter, import numpy, scipy:          {res['fresh_numpy_scipy_ms']:.0f} ms  -> ratio {res['ratio_vs_numpy_scipy']:.1f}x")
    print(f"fresh interpreter, same preloads as the zygote:  {res['fresh_preload_ms']:.0f} ms  -> ratio {res['ratio_vs_preload']:.1f}x")
    from report import record
    record('sandbox_throughput.py', 'sandbox: per-program overhead, median', res['sandbox_overhead_ms'], 'ms',
           'a fresh interpreter with the same preloads', res['fresh_preload_ms'])
    record('sandbox_throughput.py', f'sandbox: trivial programs, {a.workers} workers', res['sandbox_programs_per_s'], 'programs/s')
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(res, indent=1))
    return res


if __name__ == '__main__':
    main()
