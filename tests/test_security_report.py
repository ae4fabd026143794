"""`ugttt report` on a received run (issue 47, docs/security.md): `--plot` never writes through a link planted in a run
nor into a run, and every text taken from a run reaches the terminal with its control characters escaped.

The runs are hand-made (a config.json and one epoch record each, as `nbs/66_cli` makes them): no model, no training.
Every link points at a file or folder made for the test, whose contents are checked unchanged after.
"""
import json, uuid
from pathlib import Path

import pytest
from fastcore.test import test_eq

from security_run import cli, refused, tree   # tests/ is on sys.path under pytest
from ugttt.rundir import append_jsonl


def hand_run(root: Path, name: str, method: str = "ugttt", task: str = "cp26", seed: int = 0) -> Path:
    "A run directory with a config and one epoch record."
    run = root / name
    run.mkdir()
    (run / "config.json").write_text(json.dumps(dict(task=task, method=method, seed=seed)))
    append_jsonl(run / "metrics.jsonl", [{"progress/epoch": 0, "train/reward/exec/best": 0.5, "families/entropy_bits": 1.0,
                                          "mi/token_mean": 0.0, "train/correctness/rate": 0.5}])
    return run


@pytest.mark.parametrize("planted", ["file", "folder"])
def test_plot_never_writes_through_a_link_planted_in_the_run(tmp_path, planted):
    "run/fig.png -> a file of ours, or run/figs -> a folder of ours: --plot there is refused in one line, and ours is unchanged."
    run = hand_run(tmp_path, "sent")
    ours = tmp_path / f"ours-{uuid.uuid4().hex[:8]}"
    if planted == "file":
        ours.write_text("mine")
        (run / "fig.png").symlink_to(ours)
        plot = run / "fig.png"
    else:
        ours.mkdir()
        (run / "figs").symlink_to(ours, target_is_directory=True)
        plot = run / "figs" / "fig.png"
    before = tree(tmp_path)
    refused(cli("report", run, "--plot", plot), "lies inside the run directory")
    test_eq(tree(tmp_path), before)                                         # nothing written, ours untouched
    test_eq(ours.read_text() if planted == "file" else sorted(ours.iterdir()), "mine" if planted == "file" else [])


def test_plot_refuses_a_link_and_replaces_a_regular_file(tmp_path):
    "A --plot file outside the runs that is a link is refused (its target unchanged); a regular file of ours is replaced by the figure."
    run = hand_run(tmp_path, "run")
    ours = tmp_path / "ours.txt"
    ours.write_text("mine")
    (tmp_path / "link.png").symlink_to(ours)
    refused(cli("report", run, "--plot", tmp_path / "link.png"), "is a link or not a regular file; the figure is not written through it")
    test_eq(ours.read_text(), "mine")
    (tmp_path / "fig.png").write_text("an older figure")
    proc = cli("report", run, "--plot", tmp_path / "fig.png")
    test_eq((proc.returncode, proc.stderr), (0, ""))
    test_eq((tmp_path / "fig.png").read_bytes()[:4], b"\x89PNG")
    test_eq(sorted(p.name for p in tmp_path.iterdir()), ["fig.png", "link.png", "ours.txt", "run"])   # no temporary left


CONTROLS = "\x1b[2J\x1b]0;owned\x07\x9b1m\u202e"   # clear screen, set the title, a C1 CSI, a right-to-left override


def test_texts_from_a_run_reach_the_terminal_escaped(tmp_path):
    "A method, task and folder name holding control characters: table, comparison, legend and warnings carry no raw control byte."
    a = hand_run(tmp_path, "base", method="baseline", task=f"cp26{CONTROLS}")
    b = hand_run(tmp_path, f"arm{CONTROLS}", method=f"mine{CONTROLS}", task=f"cp26{CONTROLS}")
    proc = cli("report", a, b)
    test_eq(proc.returncode, 0)
    out = proc.stdout + proc.stderr
    raw = [c for c in out if not (c.isprintable() or c == "\n")]
    test_eq(raw, [])
    assert "mine\\x1b[2J\\x1b]0;owned\\x07\\x9b1m\\u202e" in proc.stdout, proc.stdout    # the comparison names the arm, escaped
    assert "cp26\\x1b[2J" in proc.stdout and "vs baseline" in proc.stdout, proc.stdout


def test_an_error_quoting_a_run_is_escaped(tmp_path):
    "A run folder whose name holds control characters and whose config is not a run's: one line, escaped."
    run = tmp_path / f"bad{CONTROLS}"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(dict(task=1, method=2)))
    proc = cli("report", run)
    refused(proc, "is not a run's config (no task and method)")
    test_eq([c for c in proc.stderr if not (c.isprintable() or c == "\n")], [])
