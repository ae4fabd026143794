"""`update.bonus_signal` through the trainer (docs/mechanism.md, stage 6): what each rollout's bonus was paid for, read back
from the run's own log. The logged total reward is R_exec + alpha·S_i, so S_i is recovered from the log and checked
against what the signal must be: the epoch's family rarity recomputed from the logged programs, or the group's U
permuted; and "mi" pays U_i itself, on the same rollouts."""
import json, math
from collections import Counter
from pathlib import Path

import pytest
from fastcore.test import test_close, test_eq

from ugttt.families import label_family
from ugttt.presets import make_config
from ugttt.sandbox import Sandbox
from ugttt.tasks.core import extract_program
from ugttt.trainer import read_jsonl, train

pytestmark = pytest.mark.training   # not in test-fast (pytest.ini): whole runs
SMALL = dict(epochs=2, groups_per_epoch=2, group_size=4)   # two epochs of two groups of four: the signal's epoch-wide counts matter


@pytest.fixture(scope="module")
def sandbox():
    "One sandbox for the module's runs."
    with Sandbox(workers=2, budget_s=5.0) as sb: yield sb


def logged(run: Path) -> list[dict]:
    "The run's trajectory lines in file order."
    rows, partial = read_jsonl(run / "trajectories.jsonl")
    test_eq(partial, 0)
    return rows


def signal(row: dict, alpha: float) -> float:
    "S_i as the log holds it: (reward_total - reward_exec) / alpha."
    return (row["reward_total"] - row["reward_exec"]) / alpha


def test_rarity_pays_each_rollout_the_surprise_of_its_family_in_the_epoch(tmp_path, sandbox):
    "K = 1 with the rarity bonus: S_i = -log(n_f / N) over the epoch's 8 rollouts, the families read from the logged programs."
    alpha = 0.5
    cfg = make_config("cp26", "baseline", "tiny", **SMALL, **{"update.mi_coef": alpha, "update.bonus_signal": "rarity"})
    train(cfg, tmp_path / "run", progress=False, sandbox=sandbox)
    rows = logged(tmp_path / "run")
    for epoch in (0, 1):
        ep = [r for r in rows if r["epoch"] == epoch]
        test_eq(len(ep), 8)
        code = [extract_program(r["generated_text"]) for r in ep]
        fams = [label_family("cp26", c) if c else None for c in code]
        counts = Counter(f for f in fams if f is not None)
        want = [math.log(len(ep) / (counts[f] if f is not None else 1)) for f in fams]
        test_close([signal(r, alpha) for r in ep], want, eps=1e-9)
        test_eq([r["family"] for r, f in zip(ep, fams) if r["correctness"]], [f for r, f in zip(ep, fams) if r["correctness"]])


def test_shuffled_mi_pays_a_permutation_of_the_groups_own_uncertainty(tmp_path, sandbox):
    "K = 2 with shuffled_mi: in every group the paid signals are the logged U_i reordered, and somewhere not in place."
    alpha = 1.0
    over = {"policy.n_adapters": 2, "update.mi_coef": alpha, "update.bonus_signal": "shuffled_mi"}
    cfg = make_config("cp26", "ugttt", "tiny", **SMALL, **over)
    train(cfg, tmp_path / "run", progress=False, sandbox=sandbox)
    rows, moved = logged(tmp_path / "run"), 0
    for key in sorted({(r["epoch"], r["group_idx"]) for r in rows}):
        grp = sorted((r for r in rows if (r["epoch"], r["group_idx"]) == key), key=lambda r: r["rollout_idx"])
        paid, own = [signal(r, alpha) for r in grp], [r["uncertainty_true_mi"] for r in grp]
        test_close(sorted(paid), sorted(own), eps=1e-6)
        moved += any(abs(p - u) > 1e-9 for p, u in zip(paid, own))
    assert moved > 0, "no group's signal was permuted"
    # the paper's signal from the same seed: epoch 0 (before any update) samples and scores the same rollouts; only the pay differs
    train(make_config("cp26", "ugttt", "tiny", **SMALL, **{**over, "update.bonus_signal": "mi"}), tmp_path / "mi", progress=False,
          sandbox=sandbox)
    first = lambda rs: [(r["group_idx"], r["rollout_idx"], r["generated_text"], r["uncertainty_true_mi"]) for r in rs if r["epoch"] == 0]
    mi_rows = logged(tmp_path / "mi")
    test_eq(first(rows), first(mi_rows))
    test_close([signal(r, alpha) for r in mi_rows], [r["uncertainty_true_mi"] for r in mi_rows], eps=1e-6)   # "mi" pays U_i itself
    test_eq(json.loads((tmp_path / "mi" / "config.json").read_text())["update"]["bonus_signal"], "mi")
