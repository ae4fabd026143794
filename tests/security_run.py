"""The finished smoke run the security tests share (`finished` in conftest.py trains it once per session), and the
helpers they use to damage copies of it and to watch the command line refuse them.

One finished smoke run, trained by `ensure_runs` (the path `reproduce` takes), is copied by each test
(`shutil.copytree(symlinks=True)`, so planted links stay links) and the copy damaged. What every case checks: a
one-line error naming the problem (exit code 2 on the command line), no code from the run executed, nothing inside or
outside the run written (a content hash of the tree before and after), and nothing created for a refused new run.
"""
import hashlib, json, os, shutil, subprocess, sys
from pathlib import Path

import pytest
from fastcore.test import test_eq

from ugttt.reproduce import RunSpec, ensure_runs, run_config, run_path
from ugttt.rundir import read_jsonl

ROOT = Path(__file__).resolve().parents[1]
UGTTT = str(Path(sys.executable).parent / "ugttt")                 # the console script of this environment
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
SPEC = RunSpec("cp26", "ugttt", 0)                                  # smoke: 2 epochs of 1 group of 4, K = 2
CFG = run_config(SPEC, smoke=True)


def finished_run(runs: Path) -> tuple[Path, Path]:
    "Train the smoke run in a worker process under runs: (runs, its directory)."
    ensure_runs([SPEC], runs, smoke=True, workers=1, progress=False)
    path = run_path(runs, SPEC, smoke=True)
    test_eq([r["progress/epoch"] for r in read_jsonl(path / "metrics.jsonl")[0] if "progress/epoch" in r], [0, 1])
    return runs, path


def copy_run(src: Path, dst: Path) -> Path:
    "A copy of a run directory, links kept as links."
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, dst, symlinks=True)
    return dst


def tree(root: Path) -> dict:
    "Every entry under root (links not followed) -> its content hash, link target or kind: to show nothing changed."
    out = {}
    for dirpath, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink(): out[rel] = "link:" + os.readlink(p)
            elif p.is_file():
                h = hashlib.sha256()
                with open(p, "rb") as f:
                    for block in iter(lambda: f.read(2**20), b""): h.update(block)
                out[rel] = h.hexdigest()
            else: out[rel] = "dir" if p.is_dir() else "special"
    return out


def cli(*args, cwd=None, timeout=300) -> subprocess.CompletedProcess:
    "Run the console script as a user would."
    return subprocess.run([UGTTT, *map(str, args)], env=ENV, capture_output=True, text=True, cwd=cwd, timeout=timeout)


def refused(proc: subprocess.CompletedProcess, words: str) -> None:
    "Exit code 2, exactly one line on stderr naming the problem, no traceback."
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    test_eq(proc.stderr.count("\n"), 1)
    assert words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[:2000]


def resume_refused(run: Path, words: str, root: Path, command_line: bool = False) -> None:
    "A resume of run (through train(), or `ugttt train --resume`) is refused in one line holding words; nothing under root changes."
    from ugttt.trainer import train
    before = tree(root)
    if command_line: refused(cli("train", "--config", run / "config.json", "--resume", "--out", run, "--quiet"), words)
    else:
        with pytest.raises((ValueError, FileNotFoundError)) as e: train(CFG, run, resume=True, progress=False)   # RunDirError is a ValueError
        assert words in str(e.value) and "\n" not in str(e.value), str(e.value)
    test_eq(tree(root), before)                                        # nothing was overwritten, nothing created


def make_partial(run: Path) -> None:
    "Turn a finished 2-epoch run into one killed after epoch 1's logs and before its checkpoint."
    shutil.rmtree(run / "checkpoints" / "epoch_0001")
    (run / "checkpoints" / "latest.json").write_text(json.dumps(dict(epoch=0, path="epoch_0000")))


def rewards(run: Path) -> list:
    return [(t["epoch"], t["reward_exec"], t["generated_text"]) for t in read_jsonl(run / "trajectories.jsonl")[0]]
