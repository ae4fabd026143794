"""Resume, reuse and config loading under damaged inputs (issue 32), on copies of the shared finished smoke run.

Every case ends in one of two ways: a resume that trains exactly as the run's own config says (the uninterrupted
run's rollouts and adapters, bit for bit), or one line naming the file and the problem, exit code 2 on the command
line, with the run directory unchanged and nothing created. What is checked besides: a checkpoint's values, not only
its shapes; config files and logs read at a cost bounded by what they can legitimately hold (bench/bounded_inputs.py
measures the time and memory); and logs edited after the run wrote them refused on reuse and resume, flagged by
`ugttt report`, while a run from before log digests still resumes, reports and is reused with a warning.
"""
import json, os, warnings
from pathlib import Path

import pytest
import torch
from fastcore.test import test_eq
from safetensors.torch import load_file, save_file

from security_run import CFG, SPEC, cli, copy_run, make_partial, refused, resume_refused, rewards, tree   # tests/ is on sys.path
from ugttt.config import config_to_dict
from ugttt.reproduce import ensure_runs, run_path
from ugttt.rundir import LogsEditedError

pytestmark = pytest.mark.training   # not in test-fast (pytest.ini): resumes of a smoke run

STATE = "checkpoints/epoch_0001/trainer_state.pt"
ADAPTER = "checkpoints/epoch_0001/adapters/adapter_1/adapter_model.safetensors"


def _adapters(run: Path, epoch: int) -> list[bytes]:
    "The bytes of each adapter file of an epoch's checkpoint."
    return [p.read_bytes() for p in sorted((run / "checkpoints" / f"epoch_{epoch:04d}" / "adapters").glob("*/*.safetensors"))]


# ---- the config wins: a resume trains under the run's config whatever trainer_state.pt says --------------------------------

def test_resume_takes_the_optimiser_hyperparameters_from_the_config(tmp_path, finished):
    "lr 1e6, a string lr or eps, betas (5, 5), AMSGrad in the saved state: the resumed run is the uninterrupted one."
    runs = tmp_path / "runs"
    run = copy_run(finished[1], run_path(runs, SPEC, smoke=True))
    make_partial(run)
    path = run / "checkpoints" / "epoch_0000" / "trainer_state.pt"
    st = torch.load(path, weights_only=True)
    for g in st["optimizers"][0]["param_groups"]:
        g.update(lr=1e6, betas=(5.0, 5.0), eps="1e-8", weight_decay="0.1", amsgrad=True, maximize=True)
    torch.save(st, path)
    got = ensure_runs([SPEC], runs, smoke=True, workers=1, progress=False)[SPEC]   # resumes epoch 1 in a worker
    test_eq((got.n_epochs, got.verified), (2, True))
    test_eq(rewards(run), rewards(finished[1]))
    test_eq(_adapters(run, 1), _adapters(finished[1], 1))                          # weights moved as the config says


# ---- a checkpoint checked in value: one line naming the file, the run unchanged ----------------------------------------------

def _entry(**change):
    "Damage: parameter 0's saved AdamW state with entries changed (a callable of the state gets the old one)."
    def f(run):
        st = torch.load(run / STATE, weights_only=True)
        e = st["optimizers"][0]["state"][0]
        e.update({k: v(e) if callable(v) else v for k, v in change.items()})
        torch.save(st, run / STATE)
    return f

def _state_of_param_0(value):
    def f(run):
        st = torch.load(run / STATE, weights_only=True)
        st["optimizers"][0]["state"][0] = value
        torch.save(st, run / STATE)
    return f

def _adapter(change):
    "Damage: adapter 1's first tensor replaced by change(tensor)."
    def f(run):
        w = load_file(run / ADAPTER); key = sorted(w)[0]; w[key] = change(w[key]); save_file(w, run / ADAPTER)
    return f

def _sparse(rel, size):
    def f(run):
        with open(run / rel, "r+b") as fh: fh.truncate(size)
    return f

def _append(line: str):
    def f(run):
        with open(run / "metrics.jsonl", "a") as fh: fh.write(line + "\n")
    return f

DAMAGE = {
    "exp_avg_sq negative": (_entry(exp_avg_sq=lambda e: -torch.ones_like(e["exp_avg_sq"])), f"{STATE}: optimiser 0: parameter 0: exp_avg_sq holds negative values"),
    "step NaN": (_entry(step=torch.tensor(float("nan"))), "step nan is not an int in [0, 2]"),
    "step past the epochs": (_entry(step=torch.tensor(1e6)), "step 1e+06 is not an int in [0, 2]"),
    "step a string": (_entry(step="2"), "step is '2', not a number"),
    "moment a string": (_entry(exp_avg="x"), "exp_avg is str, not a tensor"),
    "state a string": (_state_of_param_0("x"), "the state of parameter 0 is str, not a dict"),
    "moment float64": (_entry(exp_avg=lambda e: e["exp_avg"].double()), "exp_avg is torch.float64, the parameter torch.float32"),
    "moment 1e30": (_entry(exp_avg=lambda e: torch.full_like(e["exp_avg"], 1e30)), "exp_avg exceeds"),
    "adapter bool": (_adapter(lambda t: t.bool()), "is torch.bool, the adapter holds torch.float32"),
    "adapter complex": (_adapter(lambda t: t.to(torch.complex64)), "is torch.complex64, the adapter holds torch.float32"),
    "adapter float64 1e300": (_adapter(lambda t: torch.full(t.shape, 1e300, dtype=torch.float64)), "is torch.float64, the adapter holds torch.float32"),
    "adapter x1e30": (_adapter(lambda t: t * 1e30 + 1e30), "beyond the 10000 no training reaches"),
    "adapter 64 MiB sparse": (_sparse(ADAPTER, 2**26), f"{ADAPTER} is 67,108,864 bytes, more than the"),
    "state 64 MiB sparse": (_sparse(STATE, 2**26), f"{STATE} is 67,108,864 bytes, more than the"),
    "record without an epoch": (_append('{"foo": 1}'), "{line} is a record without an epoch (none of epoch, rollout/epoch"),
    "epoch a string": (_append('{"epoch": "x"}'), "{line}: epoch must be an int >= 0, got 'x'"),
    "epoch 1e400": (_append('{"epoch": 1e400}'), "{line}: epoch must be an int >= 0, got inf"),   # JSON reads 1e400 as inf
    "epoch a list": (_append('{"epoch": [1]}'), "{line}: epoch must be an int >= 0, got [1]"),
}
ON_THE_COMMAND_LINE = ("step NaN", "adapter float64 1e300", "adapter 64 MiB sparse", "epoch 1e400")   # the others through train()


@pytest.mark.parametrize("case", list(DAMAGE))
def test_damaged_checkpoint_or_log_is_one_line_and_changes_nothing(case, tmp_path, finished):
    damage, words = DAMAGE[case]
    run = copy_run(finished[1], tmp_path / "run")
    damage(run)
    words = words.replace("{line}", f"metrics.jsonl line {len((run / 'metrics.jsonl').read_text().splitlines())}")   # the appended one
    resume_refused(run, words, tmp_path, command_line=case in ON_THE_COMMAND_LINE)


# ---- config files of bounded cost: refused in one short line, nothing created ---------------------------------------------------

def _bomb(levels: int) -> str:
    "levels nested levels of nine aliases, all in one field: 9**levels values if expanded, a few hundred bytes on disk."
    return ("seed:\n  - &a0 [x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"  - &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, levels)))

CONFIGS = [
    ("bomb.yaml", _bomb(10), "bomb.yaml is not valid YAML: anchors and aliases (&name, *name) are not allowed in a config at line 2"),
    ("deep.json", "[" * 100_000 + "]" * 100_000, "deep.json nests deeper than 8 levels"),
    ("deep.yaml", "seed: " + "[" * 100_000 + "]" * 100_000, "deep.yaml is not valid YAML: it nests deeper than 8 levels"),
    ("long.json", json.dumps({"seed": "9" * 900_000}), "seed must be an int in [0, 2**63), got '999"),
    ("long.yaml", "method: " + "m" * 900_000, "unknown method 'mmm"),
]


def test_config_files_are_read_at_a_bounded_cost(tmp_path):
    for name, text, words in CONFIGS:
        (tmp_path / name).write_text(text)
    with open(tmp_path / "sparse.yaml", "wb") as f: f.truncate(4 * 2**30)
    for name, words in [(n, w) for n, _, w in CONFIGS] + [("sparse.yaml", "sparse.yaml is 4,294,967,296 bytes, more than the 1,048,576")]:
        proc = cli("train", "--config", tmp_path / name, "--out", tmp_path / "run", "--quiet", timeout=120)
        refused(proc, words)
        assert len(proc.stderr) < 600, (name, len(proc.stderr))              # a value quoted in 200 characters at most
    test_eq((tmp_path / "run").exists(), False)


def test_a_huge_value_in_a_runs_config_is_quoted_short(tmp_path, finished):
    run = copy_run(finished[1], tmp_path / "run")
    (run / "config.json").write_text(json.dumps({**config_to_dict(CFG), "task": "x" * 900_000}))
    good = tmp_path / "good.json"; good.write_text(json.dumps(config_to_dict(CFG)))
    before = tree(tmp_path)
    proc = cli("train", "--config", good, "--resume", "--out", run, "--quiet")
    refused(proc, "differs in: task: 'xxx")
    assert len(proc.stderr) < 600, len(proc.stderr)
    test_eq(tree(tmp_path), before)


def test_report_streams_and_refuses_an_endless_line(tmp_path, finished):
    run = copy_run(finished[1], tmp_path / "run")
    n = len((run / "metrics.jsonl").read_text().splitlines()) + 1
    os.truncate(run / "metrics.jsonl", 2**30)                                   # the log, then 1 GB of NUL bytes: no newline
    refused(cli("report", run, timeout=120), f"metrics.jsonl line {n} is longer than 67,108,864 bytes")


# ---- logs checked against their checkpoint -------------------------------------------------------------------------------------

def test_reuse_refuses_edited_rewards_resume_too_and_report_flags_them(tmp_path, finished):
    "What changed Table 1 in the issue: a reward raised in a reused run's trajectories."
    runs = tmp_path / "runs"
    run = copy_run(finished[1], run_path(runs, SPEC, smoke=True))
    lines = (run / "trajectories.jsonl").read_text().splitlines(keepends=True)
    first = json.loads(lines[0]); first["reward_exec"] = 0.9999
    (run / "trajectories.jsonl").write_text(json.dumps(first) + "\n" + "".join(lines[1:]))
    before = tree(runs)
    with pytest.raises(LogsEditedError, match="trajectories.jsonl no longer matches the SHA-256 of its first"):
        ensure_runs([SPEC], runs, smoke=True, workers=1, progress=False)
    resume_refused(run, "trajectories.jsonl no longer matches the SHA-256", runs, command_line=True)
    proc = cli("report", run, finished[1])
    test_eq(proc.returncode, 1)
    test_eq([row.split()[-1] for row in proc.stdout.split("\n\n")[0].splitlines()[1:]], ["EDITED", "ok"])   # the table, then the comparison
    assert proc.stderr.startswith("ugttt: warning: ") and proc.stderr.count("\n") == 1, proc.stderr
    test_eq(tree(runs), before)


def test_an_old_run_without_a_digest_reports_is_reused_with_a_warning_and_resumes(tmp_path, finished):
    runs = tmp_path / "runs"
    run = copy_run(finished[1], run_path(runs, SPEC, smoke=True))
    for p in run.glob("checkpoints/epoch_*/logs.json"): p.unlink()             # as written before log digests
    proc = cli("report", run)
    test_eq((proc.returncode, proc.stdout.splitlines()[1].split()[-1], proc.stderr), (0, "unchecked", ""))
    with pytest.warns(UserWarning, match=r"1 reused run\(s\) have no log digest to check"):
        got = ensure_runs([SPEC], runs, smoke=True, workers=1, progress=False)[SPEC]
    test_eq((got.n_epochs, got.verified), (2, False))
    make_partial(run)                                                            # an old run killed in its last epoch
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                           # resumed: its new checkpoint records a digest
        got = ensure_runs([SPEC], runs, smoke=True, workers=1, progress=False)[SPEC]
    test_eq((got.n_epochs, got.verified), (2, True))
    test_eq(rewards(run), rewards(finished[1]))
