"""Your own problem from outside the package: a throwaway package `mypkg` written to a temporary directory defines a
Task; `get_task`, the config, `ugttt train` on the command line and the reproduce notebook table1 all take it by its
entry point `mypkg.problems:...`, and every way of getting the entry point wrong is one clear error."""
import json, os, subprocess, sys, textwrap
from pathlib import Path

import pytest
from fastcore.test import test_eq, test_fail

pytestmark = pytest.mark.training   # not in test-fast (pytest.ini): `ugttt train` and table1 on your own problem

ROOT = Path(__file__).resolve().parents[1]

PROBLEMS = '''
import numpy as np
from ugttt.families import Rule
from ugttt.scoring import Score
from ugttt.tasks import Task

def spread(x):
    "Smallest gap between sorted points of [0, 1], the verifier programs may call."
    x = np.sort(np.asarray(x, dtype=float))
    return float(np.diff(x).min())

def score_gaps(result, strict=False):
    try: x = np.asarray(result, dtype=float)
    except (TypeError, ValueError) as e: return Score(False, None, 0.0, f"not numbers: {e}")
    if x.shape != (5,) or not np.isfinite(x).all() or (x < 0).any() or (x > 1).any():
        return Score(False, None, 0.0, "expected 5 numbers in [0, 1]")
    g = spread(x)
    return Score(True, g, g, None, x.tolist())

gaps = Task(name="gaps5", entry_point="place", direction="max", best_known=0.25, target=0.25, bound_name="smallest gap",
            title="5 points in [0, 1], maximise the smallest gap", problem="Place 5 points in [0, 1] as far apart as possible.",
            returns="a list of 5 floats in [0, 1]", returns_short="list of 5 floats", unit="points", digits=4,
            warm_start="initial", scorer=score_gaps, root=lambda rng: rng.random(5), helpers=(spread,),
            family_rules=(Rule("even", "np.linspace", lambda f: f.name("linspace")),))

def make_gaps():
    return gaps

not_a_task = 42
broken = gaps.__class__(**{**gaps.__dict__, "name": "ac1"})   # shadows a built-in: refused when resolved
'''


@pytest.fixture(scope="module")
def mypkg(tmp_path_factory):
    "A package `mypkg` with a problems module, importable in this process and in subprocesses (PYTHONPATH)."
    base = tmp_path_factory.mktemp("userpkg")
    (base / "mypkg").mkdir()
    (base / "mypkg" / "__init__.py").write_text("")
    (base / "mypkg" / "problems.py").write_text(textwrap.dedent(PROBLEMS))
    sys.path.insert(0, str(base))
    yield base
    sys.path.remove(str(base))


def test_entry_point_resolves_checks_and_scores(mypkg):
    from ugttt.tasks import get_task
    from ugttt.families import label_family
    t = get_task("mypkg.problems:gaps")
    test_eq((t.name, t.direction), ("gaps5", "max"))
    assert get_task("mypkg.problems:make_gaps") is t                                   # a factory gives the same task
    test_eq(t.score([0, 0.25, 0.5, 0.75, 1.0]).bound, 0.25)
    ev = t.evaluate("```python\nimport numpy as np\ndef place():\n    return np.linspace(0, 1, 5)\n```", budget_s=5.0)
    test_eq((ev.correct, ev.bound), (True, 0.25))                                      # ran in the sandbox, scored here
    test_eq(label_family(t, ev.code), "even")
    warm = t.evaluate("def place():\n    return initial", parent=ev.child_state(t.initial_state()), budget_s=5.0)
    test_eq(warm.bound, 0.25)                                                          # the warm start is injected
    test_fail(lambda: get_task("mypkg.problems:not_a_task"), contains="is a int, not a ugttt.tasks.Task")
    test_fail(lambda: get_task("mypkg.problems:broken"), contains="shadows the built-in task 'ac1'")
    test_fail(lambda: get_task("mypkg.nope:gaps"), contains="cannot import 'mypkg.nope'")


def test_config_takes_the_entry_point(mypkg):
    from ugttt.presets import make_config
    cfg = make_config("mypkg.problems:gaps", "ugttt", "tiny")
    test_eq((cfg.task, cfg.streaming_on), ("mypkg.problems:gaps", False))             # the gate is the paper's AC1/CP26 choice
    from ugttt.trainer import preflight
    test_fail(lambda: preflight(make_config("mypkg.problems:missing")), contains="has no attribute 'missing'")   # when the run starts


def run_cli(args, mypkg, **kw):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(mypkg)}
    return subprocess.run([str(Path(sys.executable).parent / "ugttt"), *args], capture_output=True, text=True, env=env, timeout=600, **kw)


def test_cli_trains_your_own_problem(mypkg, tmp_path):
    out = tmp_path / "run"
    p = run_cli(["train", "--task", "mypkg.problems:gaps", "--method", "ugttt", "--preset", "tiny", "--epochs", "1",
                 "--groups_per_epoch", "1", "--group_size", "2", "--policy.n_adapters", "2", "--policy.max_new_tokens", "64",
                 "--quiet", "--out", str(out)], mypkg)
    assert p.returncode == 0, p.stderr[-3000:]
    test_eq(json.loads((out / "config.json").read_text())["task"], "mypkg.problems:gaps")
    lines = (out / "trajectories.jsonl").read_text().splitlines()
    test_eq(len(lines), 2)
    bad = run_cli(["train", "--task", "mypkg.problems:missing", "--out", str(tmp_path / "r2")], mypkg)
    test_eq(bad.returncode, 2)
    assert "has no attribute 'missing'" in bad.stderr and bad.stderr.count("\n") == 1 and not (tmp_path / "r2").exists()


def test_table1_takes_your_own_problem(mypkg, tmp_path):
    import papermill as pm
    os.environ["PYTHONPATH"] = str(mypkg) + os.pathsep + os.environ.get("PYTHONPATH", "")   # the kernel imports mypkg too
    try:
        pm.execute_notebook(str(ROOT / "reproduce" / "table1.ipynb"), str(tmp_path / "table1.out.ipynb"), cwd=str(ROOT / "reproduce"),
                            parameters=dict(smoke=True, seeds=[0], tasks=["mypkg.problems:gaps"], runs_dir=str(tmp_path / "runs"),
                                            out_dir=str(tmp_path / "out")),
                            progress_bar=False, log_output=False, stdout_file=None, stderr_file=None)
    finally: os.environ["PYTHONPATH"] = os.environ["PYTHONPATH"].split(os.pathsep, 1)[1]
    md = (tmp_path / "out" / "table1.md").read_text()
    assert "mypkg.problems:gaps · ours" in md and "paper (Qwen3-8B" not in md                 # no paper row for it
    assert (tmp_path / "runs" / "tiny-smoke" / "mypkg.problems--gaps" / "ugttt-s0" / "config.json").is_file()
