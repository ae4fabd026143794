"""A fifth benchmark is one file: a toy module written to a temporary directory is found as a built-in (its directory
appended to `ugttt.tasks.__path__`) and, the same file, loaded as the entry point `toy5:TASK` from PYTHONPATH; either
way one tiny epoch trains, the run is reported, and the rollouts are labelled with the toy's own family rules."""
import json, os, subprocess, sys, textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.training   # not in test-fast (pytest.ini): two `ugttt train` runs

TOY = '''
import numpy as np
from ugttt.families import Rule
from ugttt.scoring import Score
from ugttt.tasks import Task

def spread(x):
    "Largest minus smallest of a sequence of numbers, the verifier programs may call."
    x = np.asarray(x, dtype=float)
    return float(x.max() - x.min())

def score_toy5(result, strict=False):
    "Any non-empty 1-D sequence of finite numbers is valid; its spread is the bound (a trivial scorer)."
    try: x = np.asarray(result, dtype=float)
    except (TypeError, ValueError) as e: return Score(False, None, 0.0, f"not numbers: {e}")
    if x.ndim != 1 or x.size == 0 or not np.isfinite(x).all(): return Score(False, None, 0.0, "expected a list of numbers")
    g = spread(x)
    return Score(True, g, g, None, x.tolist())

TASK = Task(name="toy5", entry_point="propose_candidate", direction="max", best_known=1e6, target=1e6, bound_name="spread",
            title="a list of numbers, maximise its spread", problem="Return numbers as far apart as possible.",
            returns="a list of floats", returns_short="list of floats", unit="numbers", digits=4,
            warm_start=None, scorer=score_toy5, root=lambda rng: rng.random(5), helpers=(spread,),
            family_rules=(Rule("toy_numpy", "numpy in the code", lambda f: f.name("np", "numpy")),
                          Rule("toy_any", "anything else", lambda f: True)),
            winning_motifs=("toy_numpy",), streams_by_default=True)
'''

TRAIN = ["--method", "ugttt", "--preset", "tiny", "--epochs", "1", "--groups_per_epoch", "1", "--group_size", "2",
         "--policy.n_adapters", "2", "--quiet"]

DRIVER = '''
import json, sys
import ugttt.tasks
if sys.argv[1] == "builtin": ugttt.tasks.__path__.append(sys.argv[2])     # one more directory of benchmarks
from ugttt.tasks import TASK_NAMES, get_task
from ugttt.families import describe_families
from ugttt.analysis import motif_families
from ugttt.cli import main
task = sys.argv[3]
out = sys.argv[4]
info = dict(names=list(TASK_NAMES), name=get_task(task).name, table=describe_families(get_task(task)),
            motif=list(motif_families(task)))
rc = main(["train", "--task", task, *sys.argv[5:], "--out", out])
info["train"] = rc
info["report"] = main(["report", out])
print("INFO " + json.dumps(info))
'''


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    "The toy benchmark as one file, toy5.py, in a directory of its own."
    base = tmp_path_factory.mktemp("toybench")
    (base / "toy5.py").write_text(textwrap.dedent(TOY))
    return base


def run(toy, how, task, out):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0"}
    if how == "entry": env["PYTHONPATH"] = str(toy) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", DRIVER, how, str(toy), task, str(out), *TRAIN], capture_output=True, text=True,
                       env=env, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    info = json.loads(next(l for l in p.stdout.splitlines() if l.startswith("INFO "))[5:])
    assert (info["train"], info["report"]) == (0, 0), (info, p.stderr[-3000:])
    assert "toy_numpy" in info["table"] and "toy_any" in info["table"]
    rows = [json.loads(l) for l in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    fams = {r.get("family") for r in rows}
    assert fams <= {"toy_numpy", "toy_any", None} and fams - {None}, fams   # labelled by the toy's own rules
    return info, json.loads((out / "config.json").read_text())


@pytest.mark.parametrize("how", ["builtin", "entry"])
def test_a_fifth_benchmark_is_one_file(toy, tmp_path, how):
    task = "toy5" if how == "builtin" else "toy5:TASK"
    info, cfg = run(toy, how, task, tmp_path / "run")
    assert info["name"] == "toy5" and cfg["task"] == task
    if how == "builtin":     # found as a built-in: listed, its defaults apply, its motif is reported
        assert "toy5" in info["names"] and info["names"][:4] == ["ac1", "ac2", "cp26", "erdos"]
        assert info["motif"] == ["toy_numpy"] and cfg["streaming_on"] is True
    else:                    # an entry point: never imported by the config or the report, so no defaults from it
        assert "toy5" not in info["names"] and info["motif"] == [] and cfg["streaming_on"] is False
