"""Time and peak memory of `ugttt` on inputs whose cost an attacker chooses: a YAML alias bomb, a sparse 4 GiB adapter
file on resume, and `ugttt report` on a 200 MiB metrics.jsonl.

Each case runs the console script in a fresh process, the way a user would, and prints its wall time, its peak
resident memory (the child's ru_maxrss), its exit code and the length of its error output. The run they damage is a
smoke run trained once (`ensure_runs(smoke=True)`, about 20 s) in a temporary directory. `--source DIR` runs the cases
against the package in another checkout (imported from there, not from the installed one), e.g. an older commit's tree, so that two
versions are measured side by side by the same script; `--levels` sets the alias bomb's nesting (9**levels values if
expanded: an unbounded reader takes about 13 s and 1 GB at 8 levels, 74 s and 9.5 GB at 9).

Usage: python bench/bounded_inputs.py [--levels 8 9 10] [--source DIR] [--report-mib 200]
"""
import argparse, json, os, shutil, subprocess, sys, tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# `ugttt` with the package imported from the directory in argv[1]: the editable install's finder is dropped so that
# sys.path decides (it would otherwise import this checkout whatever PYTHONPATH says)
CLI = ("import sys\n"
       "src = sys.argv.pop(1)\n"
       "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '')]\n"
       "sys.path.insert(0, src)\n"
       "from ugttt.cli import main\n"
       "sys.argv[0] = 'ugttt'; sys.exit(main())")
# the child's peak RSS: this wrapper's only child is the command, so RUSAGE_CHILDREN's ru_maxrss is its own (KiB on Linux)
MEASURE = ("import json, resource, subprocess, sys, time\n"
           "t = time.perf_counter(); p = subprocess.run(sys.argv[1:], capture_output=True)\n"
           "print(json.dumps(dict(rc=p.returncode, s=time.perf_counter() - t, kib=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,"
           " err=len(p.stderr), line=p.stderr[:160].decode(errors='replace'))))")


def measure(args: list, source: Path) -> dict:
    "Run `ugttt args` (the package in source) in a fresh process: exit code, wall seconds, peak RSS (KiB), stderr bytes and its start."
    out = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-c", CLI, str(source), *map(str, args)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def bomb(levels: int) -> str:
    "A config whose one field holds `levels` nested levels of nine aliases: 9**levels values if expanded."
    return ("method: ugttt\nseed:\n  - &a0 [x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"  - &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, levels)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", type=int, nargs="+", default=[8, 9, 10], help="alias bomb nesting levels to try")
    ap.add_argument("--source", type=Path, help="measure the package in this checkout instead of this one")
    ap.add_argument("--report-mib", type=int, default=200, help="size the metrics.jsonl of the report case is grown to")
    a = ap.parse_args()
    source = (a.source or ROOT).resolve()
    from ugttt.reproduce import RunSpec, ensure_runs, run_path
    rows = []
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        for lv in a.levels:
            (d / f"bomb{lv}.yaml").write_text(bomb(lv))
            rows.append((f"alias bomb, {lv} levels ({(d / f'bomb{lv}.yaml').stat().st_size} bytes)",
                         measure(["train", "--config", d / f"bomb{lv}.yaml", "--out", d / "never", "--quiet"], source)))
        spec = RunSpec("cp26", "ugttt", 0)
        ensure_runs([spec], d / "runs", smoke=True, workers=1, progress=False)
        run = run_path(d / "runs", spec, smoke=True)
        sparse = shutil.copytree(run, d / "sparse")
        with open(sparse / "checkpoints/epoch_0001/adapters/adapter_1/adapter_model.safetensors", "r+b") as f: f.truncate(4 * 2**30)
        rows.append(("resume, a 4 GiB sparse adapter file", measure(["train", "--config", sparse / "config.json", "--resume",
                                                                      "--out", sparse, "--quiet"], source)))
        big = shutil.copytree(run, d / "big")
        body = [l for l in (big / "metrics.jsonl").read_text().splitlines(keepends=True) if '"progress/epoch"' not in l]
        with open(big / "metrics.jsonl", "a") as f:   # rollout records appended after the logged epochs: a longer, valid log
            while f.tell() < a.report_mib * 2**20: f.writelines(body)
        rows.append((f"report, metrics.jsonl of {(big / 'metrics.jsonl').stat().st_size / 2**20:.0f} MiB", measure(["report", big], source)))
    print(f"package: {source}")
    print(f"{'case':<48} {'wall s':>8} {'peak MiB':>9} {'exit':>5} {'stderr bytes':>13}  start of stderr")
    for name, r in rows:
        print(f"{name:<48} {r['s']:>8.2f} {r['kib'] / 1024:>9.0f} {r['rc']:>5} {r['err']:>13,}  {r['line'][:90]!r}")


if __name__ == "__main__":
    main()
