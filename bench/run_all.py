"""Every benchmark script, one after the other, then one table of their headline figures (`make bench`).

    python bench/run_all.py                       # all scripts with their defaults (about 7 min on 2 cores)
    python bench/run_all.py --quick               # shorter settings where a script has them
    python bench/run_all.py --only sandbox_throughput.py trainer_epoch.py

Each script prints its own detailed report (kept in bench/out/<script>.log) and records its headline figures through
`bench/report.py`: a value, its unit, and the anchor it is compared with, measured side by side in the same run. The
table gives value / anchor as the ratio, which is what carries over to another machine; absolute values describe the
machine named above the table. A script that fails is listed as failed and the others still run. Run it on an idle
machine: the scripts time CPU work, and a second busy process on 2 cores changes the absolute figures.
"""
import argparse, datetime, json, os, platform, subprocess, sys, tempfile, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# (script, extra arguments with --quick)
SCRIPTS = [
    ("mi_memory.py", ["--T", "1024"]),
    ("inplace_buffers.py", ["--V", "50000"]),
    ("sandbox_throughput.py", ["--n", "100"]),
    ("sandbox_backends.py", ["--quick"]),
    ("default_model_quality.py", ["--n", "16"]),
    ("policy_scoring.py", ["--quick"]),
    ("policy_generation.py", []),
    ("update_memory.py", ["--quick"]),
    ("trainer_epoch.py", ["--quick"]),
    ("quickstart_threads.py", ["--quick"]),
    ("reproduce_parallel.py", ["--epochs", "2"]),
    ("gpu_smoke.py", ["--quick"]),
    ("ensemble_batched.py", ["--quick"]),
    ("gpu_check.py", ["--parts", "decode", "scoring"]),   # nothing without a CUDA GPU; about 20 min with one (quick: 8)
]


def machine() -> str:
    "The machine in one line: CPU model, cores, memory, GPU if any, Python and torch versions."
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration): pass
    try: mem = f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB"
    except (ValueError, OSError): mem = "? GiB"
    import torch
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return (f"{cpu}, {os.cpu_count()} cores, {mem}, {gpu}; Python {platform.python_version()}, torch {torch.__version__}; "
            f"{datetime.date.today().isoformat()}")


def fmt(x: float | None) -> str:
    "A figure with 3-4 significant digits."
    if x is None: return ""
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"


def table(rows: list[dict], failed: list[str]) -> str:
    "The Markdown table of recorded rows, then the failed scripts."
    lines = ["| script | figure | value | compared with | its value | ratio |", "|---|---|---|---|---|---|"]
    for r in rows:
        anchor_value = f"{fmt(r['anchor_value'])} {r['unit']}" if r["anchor_value"] is not None else ""
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] is not None else ""
        lines.append(f"| {r['script']} | {r['figure']} | {fmt(r['value'])} {r['unit']} | {r['anchor']} | {anchor_value} | {ratio} |")
    lines += [f"| {s} | FAILED (see bench/out/{s}.log) | | | | |" for s in failed]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="each script's short settings")
    ap.add_argument("--only", nargs="+", help="run only these scripts")
    ap.add_argument("--out", type=Path, default=HERE / "out", help="logs, rows.jsonl and table.md go here")
    a = ap.parse_args()
    known = [s for s, _ in SCRIPTS]
    unknown = [s for s in a.only or [] if s not in known]
    if unknown: ap.error(f"unknown script {unknown[0]!r}; scripts: {', '.join(known)}")
    a.out.mkdir(parents=True, exist_ok=True)
    rows_path = a.out / "rows.jsonl"
    rows_path.write_text("")
    failed = []
    for script, quick in SCRIPTS:
        if a.only and script not in a.only: continue
        argv = [sys.executable, str(HERE / script)] + (quick if a.quick else [])
        print(f"\n=== {script} {' '.join(argv[2:])}", flush=True)
        t = time.perf_counter()
        with open(a.out / f"{script}.log", "w") as log:
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 env={**os.environ, "UGTTT_BENCH_OUT": str(rows_path)})
            for line in p.stdout: sys.stdout.write(line); log.write(line)
            code = p.wait()
        print(f"=== {script}: exit {code}, {time.perf_counter() - t:.0f} s", flush=True)
        if code: failed.append(script)
    rows = [json.loads(l) for l in rows_path.read_text().splitlines() if l.strip()]
    text = f"Machine: {machine()}{' (--quick)' if a.quick else ''}\n\n{table(rows, failed)}\n"
    (a.out / "table.md").write_text(text)
    print("\n" + text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
