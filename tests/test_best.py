"""A run keeps its best programs (best.jsonl, best/) as it trains, a resume keeps them consistent with its checkpoint,
and `ugttt best` re-verifies them in the sandbox, draws them, and treats a received run as data."""
import json, os, subprocess, sys, uuid
from pathlib import Path

import pytest
from fastcore.test import test_eq

from ugttt.best import BEST_DIR, BEST_LOG, read_best, restore_best
from ugttt.presets import make_config
from ugttt.sandbox import Sandbox
from ugttt.trainer import train

pytestmark = pytest.mark.training   # whole (short) runs
UGTTT = str(Path(sys.executable).parent / "ugttt")
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    "A 2-epoch tiny CP26 run (2 groups of 8) that writes correct programs: its directory."
    d = tmp_path_factory.mktemp("best") / "run"
    with Sandbox(workers=2, budget_s=5.0) as sb:
        train(make_config("cp26", "ugttt", "tiny", epochs=2, groups_per_epoch=2), d, progress=False, sandbox=sb)
    return d


def test_the_run_keeps_its_best_as_the_logs_say(run):
    "best.jsonl's best reward is the logs' R_max, best/ holds it, and every kept program is one a rollout wrote."
    records = read_best(run)
    assert records, "the tiny run wrote no correct program: the test says nothing"
    metrics = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    r_max = max(m["train/reward/exec/best"] for m in metrics if "progress/epoch" in m)
    test_eq(max(r["reward"] for r in records), r_max)
    best = json.loads((run / BEST_DIR / "best.json").read_text())
    test_eq(best["reward"], r_max)
    trajs = {(t["epoch"], t["group_idx"], t["rollout_idx"]): t for t in map(json.loads, (run / "trajectories.jsonl").read_text().splitlines())}
    for r in records:
        t = trajs[(r["epoch"], r["group"], r["rollout"])]
        test_eq((t["reward_exec"], t["adapter_idx"], t["correctness"]), (r["reward"], r["adapter"], 1))
    test_eq(len({r["program"] for r in records}) == len(records) or len(records) > 5, True)


def test_a_resume_drops_the_best_of_epochs_after_its_checkpoint(run, tmp_path):
    "restore_best keeps best.jsonl's records up to the checkpoint and rebuilds best/ from them."
    import shutil
    copy = tmp_path / "copy"; shutil.copytree(run, copy)
    hall = restore_best(copy, 0)
    test_eq(all(r["epoch"] == 0 for r in read_best(copy)), True)
    if hall: test_eq(json.loads((copy / BEST_DIR / "best.json").read_text())["reward"], hall[0]["reward"])
    else: test_eq((copy / BEST_DIR).exists(), False)


def test_ugttt_best_reproduces_and_draws(run, tmp_path):
    "`ugttt best` recomputes each kept program's score in the sandbox, writes its files and a figure, and never overwrites."
    out = tmp_path / "out"
    p = subprocess.run([UGTTT, "best", str(run), "--top", "2", "--out", str(out)], env=ENV, capture_output=True, text=True)
    test_eq((p.returncode, p.stderr), (0, ""))
    assert "reproduced" in p.stdout and "MISMATCH" not in p.stdout, p.stdout
    for k in ("1",) + (("2",) if len({r["program"] for r in read_best(run)}) > 1 else ()):
        test_eq(sorted(x.name for x in (out / k).iterdir()),
                ["construction.json", "construction.pdf", "construction.png", "program.py", "result.json"])
        test_eq(json.loads((out / k / "result.json").read_text())["reproduced"], True)
    again = subprocess.run([UGTTT, "best", str(run), "--out", str(out)], env=ENV, capture_output=True, text=True)
    test_eq(again.returncode, 2); assert "exists; ugttt best writes a new folder" in again.stderr


def test_a_forged_record_is_reported_as_a_mismatch(run, tmp_path):
    "A received run whose log claims more than its program scores: the recomputed score is shown, exit status 1."
    import shutil
    forged = tmp_path / "forged"; shutil.copytree(run, forged)
    recs = read_best(forged)
    best = max(recs, key=lambda r: r["reward"])
    (forged / BEST_LOG).write_text(json.dumps(dict(best, reward=best["reward"] + 1.0)) + "\n")
    p = subprocess.run([UGTTT, "best", str(forged), "--top", "1", "--out", str(tmp_path / "o")], env=ENV, capture_output=True, text=True)
    test_eq(p.returncode, 1); assert "MISMATCH" in p.stdout, p.stdout


def test_a_received_run_names_no_module_that_is_imported(run, tmp_path):
    "A run whose config names a module of its own: refused in one line before anything is imported."
    import shutil
    sent = tmp_path / "sent"; shutil.copytree(run, sent)
    mod = f"planted_{uuid.uuid4().hex[:8]}"; marker = tmp_path / "imported"
    (tmp_path / f"{mod}.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    cfg = json.loads((sent / "config.json").read_text()); cfg["task"] = f"{mod}:TASK"
    (sent / "config.json").write_text(json.dumps(cfg))
    p = subprocess.run([UGTTT, "best", str(sent), "--out", str(tmp_path / "o")], env={**ENV, "PYTHONPATH": str(tmp_path)},
                       capture_output=True, text=True, cwd=tmp_path)
    test_eq(p.returncode, 2); assert "is not a built-in task, and --task does not name it" in p.stderr, p.stderr
    test_eq(marker.exists(), False)
    for bad, words in ((["--top", "9"], "--top must be an int in [1, 5]"), (["--out", str(run / "x")], "is inside the run")):
        q = subprocess.run([UGTTT, "best", str(run), *bad], env=ENV, capture_output=True, text=True)
        test_eq(q.returncode, 2); assert words in q.stderr, q.stderr
