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
    path = os.pathsep.join(filter(None, [ENV.get("PYTHONPATH"), str(tmp_path)]))   # after the checkout under test, if any
    p = subprocess.run([UGTTT, "best", str(sent), "--out", str(tmp_path / "o")], env={**ENV, "PYTHONPATH": path},
                       capture_output=True, text=True, cwd=tmp_path)
    test_eq(p.returncode, 2); assert "is not a built-in task, and --task does not name it" in p.stderr, p.stderr
    test_eq(marker.exists(), False)
    for bad, words in ((["--top", "9"], "--top must be an int in [1, 5]"), (["--out", str(run / "x")], "is inside the run")):
        q = subprocess.run([UGTTT, "best", str(run), *bad], env=ENV, capture_output=True, text=True)
        test_eq(q.returncode, 2); assert words in q.stderr, q.stderr


# A received run as data (issue 58): hand-made runs (a config.json and a best.jsonl, nothing trained), each refused in
# one line with exit code 2, or read and printed without harm. Every file they write is under tmp_path.
PACKING = ("def run_packing():\n    c = np.array([[0.25 + 0.5 * (i % 2), 0.25 + 0.5 * (i // 2)] for i in range(4)] * 7)[:26]\n"
           "    r = np.full(26, 1e-3); c[4:, 0] = np.linspace(0.05, 0.95, 22); c[4:, 1] = 0.5\n    return c, r, r.sum()")


def kept(program: str = PACKING, reward: float = 0.026, construction=None, **more) -> dict:
    "A best.jsonl record as the trainer writes it (best_record), of a CP26 program; construction: 26 small circles."
    c = [[0.1, 0.1, 1e-3]] * 26 if construction is None else construction
    return {**dict(epoch=0, group=0, rollout=0, adapter=0, reward=reward, bound=reward, bound_name="sum of radii",
                   program=program, construction=c, stdout="", parent_construction=None), **more}


def hand_run(path: Path, records=(), task: str = "cp26", lines: str | None = None) -> Path:
    "A run directory at path with only config.json (task, budget) and best.jsonl (the records, or the raw lines given)."
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(dict(task=task, budget_s=5.0, budget_clock="cpu")))
    (path / BEST_LOG).write_text(lines if lines is not None else "".join(json.dumps(r) + "\n" for r in records))
    return path


def best(*args, cwd=None, timeout=600) -> subprocess.CompletedProcess:
    "`ugttt best` on the command line."
    return subprocess.run([UGTTT, "best", *map(str, args)], env=ENV, capture_output=True, text=True, cwd=cwd, timeout=timeout)


def refused(p: subprocess.CompletedProcess, words: str) -> None:
    "Exit code 2, one line on stderr holding words, no traceback."
    assert p.returncode == 2, (p.returncode, p.stdout[-1000:], p.stderr[-2000:])
    test_eq(p.stderr.count("\n"), 1)
    assert words in p.stderr and "Traceback" not in p.stderr, p.stderr[:2000]


def test_out_through_a_link_of_the_run_is_refused(tmp_path):
    "The run's best/ is a link to a victim folder: --out RUN/best/reverified, or through a link outside into the run, is refused; nothing is written."
    run = hand_run(tmp_path / "run", [kept()])
    victim = tmp_path / "victim"; victim.mkdir()
    (run / "best").symlink_to(victim)
    (tmp_path / "door").symlink_to(run)                            # a link of yours that leads into the run
    for out in (run / "best" / "reverified", tmp_path / "door" / "x", run / "best" / ".." / "x", Path("run") / "best" / "r"):
        refused(best(run, "--out", out, cwd=tmp_path), "is inside the run")
        test_eq(list(victim.iterdir()), [])
    test_eq(sorted(p.name for p in run.iterdir()), ["best", BEST_LOG, "config.json"])


def test_a_construction_larger_than_the_task_is_refused(tmp_path):
    "A CP26 record of 1,000 circles (the verifier takes 26), its program failing: refused in one line before anything is drawn."
    big = [[0.5, 0.5, 1e-4]] * 1000
    run = hand_run(tmp_path / "run", [kept("def run_packing(:", construction=big)])
    refused(best(run, "--out", tmp_path / "o"), "construction holds 3,000 numbers, more than the 78")
    test_eq((tmp_path / "o").exists(), False)


def test_an_unverified_construction_is_not_drawn(tmp_path):
    "A kept program that fails to re-verify: its logged construction is written as data, never drawn, and result.json says so."
    run = hand_run(tmp_path / "run", [kept("def run_packing(:")])
    p = best(run, "--out", tmp_path / "o")
    test_eq(p.returncode, 1); assert "FAILS" in p.stdout, p.stdout
    test_eq(sorted(x.name for x in (tmp_path / "o" / "1").iterdir()), ["construction.json", "program.py", "result.json"])
    assert "did not re-verify" in json.loads((tmp_path / "o" / "1" / "result.json").read_text())["drawing"]


def test_best_jsonl_is_read_within_its_bounds(tmp_path):
    "A line longer than BEST_LINE_MAX_BYTES, or more than MAX_BEST_RECORDS records: one line each, exit code 2."
    from ugttt.best import BEST_LINE_MAX_BYTES, MAX_BEST_RECORDS
    line = json.dumps(kept())
    long = hand_run(tmp_path / "long", lines=line[:-1] + " " * (BEST_LINE_MAX_BYTES - len(line) + 1) + "}\n")
    refused(best(long, "--out", tmp_path / "o1"), f"longer than {BEST_LINE_MAX_BYTES:,} bytes")
    many = hand_run(tmp_path / "many", lines=(json.dumps(kept("x")) + "\n") * (MAX_BEST_RECORDS + 1))
    refused(best(many, "--out", tmp_path / "o2"), f"more than {MAX_BEST_RECORDS:,} records")
    for o in ("o1", "o2"): test_eq((tmp_path / o).exists(), False)


def _peak_rss_mb(*args, cwd) -> tuple[int, int]:
    "Run `ugttt best` in a fresh interpreter that waits for it: (its exit code, the peak RSS in MB of its largest process)."
    code = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True)\n"
            "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)")
    out = subprocess.run([sys.executable, "-c", code, UGTTT, "best", *map(str, args)], env=ENV, capture_output=True,
                         text=True, cwd=cwd, timeout=600)
    rc, mb = out.stdout.split()
    return int(rc), int(mb)


def test_best_jsonl_is_streamed_not_held(tmp_path):
    "40 AC1 records of 150,000 heights each (60 MB that parse to about 400 MB): the peak memory grows by far less than one record per line."
    heights = [0.5] * 150_000
    recs = [kept(f"def propose_candidate(:  # {k}", reward=0.5, construction=heights, parent_construction=heights)
            for k in range(40)]
    one = hand_run(tmp_path / "one", recs[:1], task="ac1")
    many = hand_run(tmp_path / "many", recs, task="ac1")
    rc1, small = _peak_rss_mb(one, "--top", "1", "--out", tmp_path / "o1", cwd=tmp_path)
    rc2, big = _peak_rss_mb(many, "--top", "1", "--out", tmp_path / "o2", cwd=tmp_path)
    test_eq((rc1, rc2), (1, 1))                                    # read, re-verified (each fails), written
    assert big - small < 150, f"peak RSS {big} MB for 40 records against {small} MB for one: best.jsonl was held in memory"


def test_text_from_the_run_reaches_the_terminal_escaped(tmp_path):
    "A run folder named with an OSC escape sequence: every line `ugttt best` prints shows it escaped."
    name = "e\x1b]0;PWNED\x07x"
    run = hand_run(tmp_path / name, [kept("def run_packing(:")])
    p = best(run, cwd=tmp_path)                                   # --out defaults to ./<run name>-best
    test_eq(p.returncode, 1)
    assert "\x1b" not in p.stdout + p.stderr and "\x07" not in p.stdout + p.stderr, p.stdout
    assert "e\\x1b]0;PWNED\\x07x-best" in p.stdout, p.stdout
    empty = hand_run(tmp_path / (name + "2"), [])
    q = best(empty, "--out", tmp_path / "o", cwd=tmp_path)
    test_eq(q.returncode, 0); assert "\x1b" not in q.stdout and "kept no program" in q.stdout, q.stdout


def test_a_number_float_cannot_hold_is_refused(tmp_path):
    "A 400-digit reward, bound or construction entry in best.jsonl: one line naming it, exit code 2, no OverflowError."
    huge = "1" + "0" * 400
    for k, (was, words) in enumerate((('"reward": 0.026', "reward must be a finite number"),
                                      ('"bound": 0.026', "bound must be a finite number"),
                                      ("0.001]", "construction must be a list of finite numbers"))):
        line = json.dumps(kept()).replace(was, was.replace("0.026", huge).replace("0.001", huge), 1)
        run = hand_run(tmp_path / f"run{k}", lines=line + "\n")
        refused(best(run, "--out", tmp_path / f"o{k}"), words)


def test_best_py_names_no_built_in_task():
    "Each built-in task draws itself (Task.draw in its own module): no built-in task's name appears in ugttt/best.py."
    import re
    from ugttt.tasks import get_task, task_names
    text = (Path(__file__).resolve().parents[1] / "ugttt" / "best.py").read_text()
    test_eq([n for n in task_names() if re.search(rf"\b{n}\b", text, re.IGNORECASE)], [])
    test_eq([n for n in task_names() if not callable(get_task(n).draw)], [])


def test_a_run_that_is_not_there_is_named_as_missing(tmp_path):
    "A path that does not exist says so; a folder without a run says it holds none (issue 56)."
    refused(best(tmp_path / "nope"), "nope does not exist")
    (tmp_path / "empty").mkdir()
    refused(best(tmp_path / "empty"), "holds no run (no config.json)")
