"""Sandbox throughput: programs per second and per-program overhead of `ugttt.sandbox`, next to a fresh interpreter.

    python bench/sandbox_throughput.py                 # defaults: 200 programs, 2 workers, 12 fresh interpreters
    python bench/sandbox_throughput.py --n 500 --workers 2 --json bench/out/sandbox.json
    python bench/sandbox_throughput.py --isolation mountns   # the same without bubblewrap (ugttt.sandbox.confine)
    python bench/sandbox_throughput.py --source ../main      # the package of another checkout (before and after a change)

Per-program overhead is the wall time of a program that does nothing (`def run(): return 1`), measured one at a time
from the caller: waiting for the worker to be idle, dispatch, the program, result, report. As root that includes, per
program, a fork, a fresh tmpfs `/tmp` and `/dev/shm`, an IPC namespace, a uid switch and a seccomp filter, the sweep
of the program's processes and the zygote's health check. The baselines run the same program the way a
harness without a warm worker must: a fresh interpreter per program (`python -c`), once importing numpy and scipy
(`import numpy, scipy`, lazy submodules) and once importing the modules our zygote preloads (numpy and the scipy
submodules programs use). Throughput is `Sandbox.map` over N programs with W workers (programs per second), for the
trivial program and for a small numpy program. On a loaded machine wall times measure the scheduler as much as the
sandbox, so the CPU time per trivial program (the caller's and the worker's whole process tree's, zygote and
children) is printed too, next to the CPU time of a fresh interpreter importing numpy and scipy: that ratio does not
depend on the load.
"""
import argparse, json, os, resource, statistics, subprocess, sys, time
from pathlib import Path

_src = next((sys.argv[i + 1] for i, x in enumerate(sys.argv[:-1]) if x == '--source'), None)   # before the import below
sys.path.insert(0, str(Path(_src).resolve() if _src else Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parent))          # report.py, whichever package is measured
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


def _tree_cpu_s(pid: int) -> float:
    "CPU seconds of `pid` and every descendant, with what each has reaped (utime + stime + cutime + cstime)."
    todo, total = [pid], 0
    while todo:
        p = todo.pop()
        try:
            total += sum(int(x) for x in Path(f'/proc/{p}/stat').read_text().rpartition(')')[2].split()[11:15])
            for t in os.listdir(f'/proc/{p}/task'): todo += [int(k) for k in Path(f'/proc/{p}/task/{t}/children').read_text().split()]
        except OSError: pass
    return total / os.sysconf('SC_CLK_TCK')


def cpu_per_program_s(sb: Sandbox, program: str, n: int) -> float:
    "CPU seconds per program, one at a time, of the caller and of the worker's whole process tree (a one-worker sandbox)."
    root = sb._all[0].proc.pid
    w, c = _tree_cpu_s(root), time.process_time()
    for _ in range(n): assert sb.run(program, 'run').ok
    return (_tree_cpu_s(root) - w + time.process_time() - c) / n


def fresh_interpreter_cpu_s(imports: str, n: int) -> float:
    "CPU seconds of a fresh interpreter that imports `imports`, the mean of `n`."
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(n): subprocess.run([sys.executable, '-c', imports], check=True, stdout=subprocess.DEVNULL)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / n


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
    ap.add_argument('--source', type=Path, default=None, help='measure the package of this checkout instead of this one')
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
    with Sandbox(workers=1, budget_s=10.0, isolation=a.isolation) as sb:
        sb.map([(TRIVIAL, 'run')] * 10)
        res['sandbox_cpu_per_program_ms'] = 1000 * cpu_per_program_s(sb, TRIVIAL, a.n)
    res['fresh_numpy_scipy_cpu_ms'] = 1000 * fresh_interpreter_cpu_s('import numpy, scipy', a.baseline_n)
    res['ratio_cpu_vs_numpy_scipy'] = res['fresh_numpy_scipy_cpu_ms'] / res['sandbox_cpu_per_program_ms']
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
    print(f"CPU per program (caller + worker tree), trivial:  {res['sandbox_cpu_per_program_ms']:.2f} ms; a fresh interpreter importing "
          f"numpy, scipy: {res['fresh_numpy_scipy_cpu_ms']:.0f} ms CPU  -> ratio {res['ratio_cpu_vs_numpy_scipy']:.1f}x")
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
