"""`ugttt report` on real tiny runs (smoke runs of cp26, as `reproduce/` trains them): the table, the comparison of
the methods paired by seed with its interval and sign-flip p (one seed: one line saying it cannot decide), the legend,
and `--plot` (PNG and PDF). The numbers are the analysis module's: R_max and the final-epoch entropy recomputed
from the trajectories by `ugttt.analysis` equal the report's, and the paired statistics are `compare_paired`'s.

The runs: `finished` (conftest.py, cp26 UG-TTT seed 0, shared with the security tests) copied in, then the
baseline for seed 0 and both methods for seed 1 trained by `ensure_runs` (three smoke runs, about a minute on 2 cores).
"""
import math
import pytest
from fastcore.test import test_close, test_eq

from security_run import SPEC, cli, copy_run
from ugttt.analysis import compare_paired, final_entropy, r_max
from ugttt.reproduce import RunSpec, ensure_runs, fmt_ci, run_path

pytestmark = pytest.mark.training   # trains three smoke runs (pytest.ini)


@pytest.fixture(scope="module")
def runs(finished, tmp_path_factory):
    "cp26 smoke runs of baseline and UG-TTT for seeds 0 and 1: {(method, seed): analysis.Run}."
    root = tmp_path_factory.mktemp("report") / "runs"
    copy_run(finished[1], run_path(root, SPEC, smoke=True))          # UG-TTT seed 0: reused, not retrained
    specs = [RunSpec("cp26", m, s) for m in ("baseline", "ugttt") for s in (0, 1)]
    got = ensure_runs(specs, root, smoke=True, workers=1, progress=False)
    return {(sp.method, sp.seed): run for sp, run in got.items()}


def line(text: str, start: str) -> str:
    "The first line of text that starts with start."
    return next(l for l in text.splitlines() if l.startswith(start))


def test_one_seed_each_says_it_cannot_decide_and_draws_the_figure(runs, tmp_path):
    base, ug = runs[("baseline", 0)], runs[("ugttt", 0)]
    proc = cli("report", base.path, ug.path, "--plot", tmp_path / "runs.png")
    test_eq((proc.returncode, proc.stderr), (0, ""))
    table, comparison, legend, figure = proc.stdout.split("\n\n")
    rows = [l.split() for l in table.splitlines()[1:]]
    test_eq([r[1:5] for r in rows], [["cp26", "baseline", "0", "2"], ["cp26", "ugttt", "0", "2"]])
    test_eq([float(r[5]) for r in rows], [round(r_max(base), 4), round(r_max(ug), 4)])      # the analysis module's R_max
    test_close([float(r[6]) for r in rows], [final_entropy(base), final_entropy(ug)], eps=0.006)
    assert comparison.startswith("cp26: ugttt vs baseline (difference = ugttt - baseline; 1 seed paired: 0)"), comparison
    d = r_max(ug) - r_max(base)
    test_eq(line(comparison, "R_max").split()[:5], ["R_max", "higher", f"{r_max(base):.4f}", f"{r_max(ug):.4f}",
                                                    ("+" if d >= 0 else "") + f"{d:.4f}"])
    assert line(comparison, "R_max").endswith("one seed: cannot decide")
    assert "One seed per method (seed 0): one seed cannot decide which is better" in comparison
    for col in ("run", "task", "method", "seed", "epochs", "R_max", "H_bits", "mean_MI", "correct", "logs", "better",
                "difference", "by seed", "verdict"):
        assert f"\n  {col} " in "\n" + legend, f"the legend does not explain {col}"
    test_eq(figure.strip(), f"figure: {tmp_path / 'runs.png'}")
    test_eq((tmp_path / "runs.png").read_bytes()[:4], b"\x89PNG")


def test_two_seeds_are_paired_with_an_interval_and_a_sign_flip_p(runs, tmp_path):
    paths = [runs[(m, s)].path for m in ("baseline", "ugttt") for s in (0, 1)]
    proc = cli("report", *paths, "--plot", tmp_path / "runs.pdf")
    test_eq((proc.returncode, proc.stderr), (0, ""))
    comparison = proc.stdout.split("\n\n")[1]
    assert comparison.startswith("cp26: ugttt vs baseline (difference = ugttt - baseline; 2 seeds paired: 0, 1)"), comparison
    by_seed = {s: r_max(runs[("ugttt", s)]) - r_max(runs[("baseline", s)]) for s in (0, 1)}
    stats = compare_paired({s: r_max(runs[("ugttt", s)]) for s in (0, 1)}, {s: r_max(runs[("baseline", s)]) for s in (0, 1)})
    row = line(comparison, "R_max")
    assert fmt_ci(stats, 4) in row, (fmt_ci(stats, 4), row)              # reproduce's paired cell: mean [interval] p
    for s, d in by_seed.items(): assert f"{s}: {'+' if d >= 0 else ''}{d:.4f}" in row, (s, d, row)
    test_eq(stats.p_min, 0.5)
    assert "With 2 paired seeds no sign-flip p can be below 0.5" in comparison
    if not math.isnan(stats.low) and (stats.low > 0 or stats.high < 0):
        assert row.endswith("better: the interval excludes 0"), row
    else: assert "cannot decide" in row, row
    assert line(comparison, "mean_MI").endswith("a diagnostic: neither direction is better")
    test_eq((tmp_path / "runs.pdf").read_bytes()[:4], b"%PDF")
