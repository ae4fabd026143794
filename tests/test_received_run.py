"""A received run is data (issue 47, docs/security.md): `ugttt replay` and `ugttt train --resume` import no code a run
names, and a replay's sandbox is the user's, never the run's.

Each case copies the shared smoke run (`finished`, conftest.py) into a folder that also holds a module of a unique
name which, if imported, creates a marker file in that folder (made for the test). The folder is put on `sys.path`
(in process) or on `PYTHONPATH` (the console script), as a run unpacked next to its sender's module would be, or as
an installed module of that name would be. What every case checks: the marker never appears, the module is not in
`sys.modules`, the refusal is one line (exit code 2 on the command line), and nothing in the run changed.
"""
import json, subprocess, uuid, warnings
from dataclasses import asdict
from pathlib import Path

import pytest
from fastcore.test import test_eq

from security_run import ENV, UGTTT, copy_run, refused, tree   # tests/ is on sys.path under pytest
from ugttt.config import SandboxConfig
from ugttt.replay import replay

pytestmark = pytest.mark.training   # copies the shared smoke run (conftest's `finished`), and replays one of its epochs


def sent(finished, tmp_path: Path) -> tuple[Path, str, Path]:
    "A copy of the smoke run in tmp_path/sent/run, next to a module that would create tmp_path/sent/<marker> on import: (run, module, marker)."
    folder = tmp_path / "sent"
    run = copy_run(finished[1], folder / "run")
    mod = f"planted_{uuid.uuid4().hex[:12]}"
    marker = folder / f"{mod}.imported"
    (folder / f"{mod}.py").write_text(f"open({str(marker)!r}, 'x').close()\nfrom ugttt.tasks import get_task\nTASK = get_task('cp26')\n")
    return run, mod, marker


def edit_json(path: Path, change) -> None:
    "Rewrite a JSON file with change(d) applied."
    d = json.loads(path.read_text())
    change(d)
    path.write_text(json.dumps(d))


def console(*args, pythonpath: Path) -> subprocess.CompletedProcess:
    "The console script with `pythonpath` on PYTHONPATH (after the checkout), as a module installed or shipped next to the run."
    env = {**ENV, "PYTHONPATH": f"{ENV['PYTHONPATH']}:{pythonpath}"}
    return subprocess.run([UGTTT, *map(str, args)], env=env, capture_output=True, text=True, timeout=300)


def not_imported(mod: str, marker: Path) -> None:
    import sys
    assert not marker.exists(), f"{marker} exists: the run's module was imported"
    assert mod not in sys.modules


def test_replay_imports_no_task_the_run_names(finished, tmp_path, monkeypatch):
    "config.json names planted:TASK, the module on sys.path: replay refuses in one line, in process and on the command line, unless you name it."
    run, mod, marker = sent(finished, tmp_path)
    edit_json(run / "config.json", lambda d: d.update(task=f"{mod}:TASK"))
    before = tree(run)
    monkeypatch.syspath_prepend(str(run.parent))
    with pytest.raises(ValueError) as e: replay(run, 1)
    assert f"the run names the task '{mod}:TASK', which is not a built-in task" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError) as e: replay(run, 1, task="cp26")          # a task you name must be the run's
    assert f"the run's task is '{mod}:TASK', you named 'cp26'" in str(e.value)
    not_imported(mod, marker)
    refused(console("replay", run, "--epoch", "1", pythonpath=run.parent), "which is not a built-in task: a replay imports no code")
    refused(console("replay", run, "--epoch", "0", "--task", "cp26", pythonpath=run.parent), "you named 'cp26'")
    not_imported(mod, marker)
    test_eq(tree(run), before)


def test_a_checkpoint_names_no_code_that_is_resolved(finished, tmp_path, monkeypatch):
    "sampler.json naming planted:TASK, in the checkpoint a replay starts from and in the one a resume loads: refused, never imported."
    run, mod, marker = sent(finished, tmp_path)
    for epoch in (0, 1):
        edit_json(run / "checkpoints" / f"epoch_{epoch:04d}" / "sampler.json", lambda d: d["config"].update(task=f"{mod}:TASK"))
    before = tree(run)
    monkeypatch.syspath_prepend(str(run.parent))
    with pytest.raises(ValueError) as e: replay(run, 1)                       # loads epoch_0000 (--epoch 1)
    assert f"the sampler is of task '{mod}:TASK', the run's task is 'cp26'" in str(e.value) and "\n" not in str(e.value)
    not_imported(mod, marker)
    refused(console("train", "--config", run / "config.json", "--resume", "--out", run, "--quiet", pythonpath=run.parent),
            f"the sampler is of task '{mod}:TASK', the run's task is 'cp26'")   # loads epoch_0001 (latest.json)
    not_imported(mod, marker)
    test_eq(tree(run), before)


def test_resume_imports_no_task_the_run_names(finished, tmp_path):
    "`train --config RUN/config.json --resume` of a run whose config names planted:TASK: refused before the import, unless --task names it."
    run, mod, marker = sent(finished, tmp_path)
    edit_json(run / "config.json", lambda d: d.update(task=f"{mod}:TASK"))
    before = tree(run)
    refused(console("train", "--config", run / "config.json", "--resume", "--out", run, "--quiet", pythonpath=run.parent),
            f"--resume: the config names the task '{mod}:TASK', which is not a built-in task, and --task does not name it")
    not_imported(mod, marker)
    test_eq(tree(run), before)


SENT_SANDBOXES = {   # a run's sandbox section that the replay must not take
    "limits": dict(isolation="limits", workers=1),
    "ray_at_the_senders_address": dict(isolation="limits", executor="ray", ray_address="192.0.2.1:6379", workers=1),
}


@pytest.mark.parametrize("section", SENT_SANDBOXES, ids=list(SENT_SANDBOXES))
def test_replay_takes_your_sandbox_not_the_runs(finished, tmp_path, section):
    "A run whose sandbox section says isolation limits (and executor ray at its sender's address): replayed in SandboxConfig(), no unconfined warning."
    run = copy_run(finished[1], tmp_path / "run")
    edit_json(run / "config.json", lambda d: d["sandbox"].update(SENT_SANDBOXES[section]))
    from ugttt.sandbox import UnconfinedWarning
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        r = replay(run, 1)
    test_eq(r["sandbox"], asdict(SandboxConfig()))                            # local workers, isolation auto
    test_eq([w for w in seen if issubclass(w.category, UnconfinedWarning)], [])
