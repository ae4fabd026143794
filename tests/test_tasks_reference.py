"""Task scoring against the published constructions (tests/data/constructions, copied from shared/reference).

Every construction must reproduce its recomputed value (docs/benchmarks.md) through `Task.score` to 1e-9 relative;
CP26 validity must match the table of docs/benchmarks.md at the reference tolerance and at tolerance 0; the Erdős
SimpleTES file's reported C5 must be rejected. Also: the FFT convolution path and the reference's loop-order L2 sum
agree with what we compute, the root states are those of the reference, bit for bit, scoring never raises on hostile
input, and the size cap holds.
"""
import hashlib
import json
import math
import os
import time
from pathlib import Path

import numpy as np
import pytest
from fastcore.test import test_eq, test_close
from hypothesis import given, settings, HealthCheck, strategies as st

import ugttt.scoring as scoring
from ugttt.tasks import get_task, TASK_NAMES, MAX_ENTRIES, Score, c1_upper_bound, c2_lower_bound, State

for _helper in (test_close, test_eq): _helper.__test__ = False   # fastcore's assertions, not tests to collect

DATA = Path(__file__).resolve().parent / "data" / "constructions"
FILES = sorted(DATA.glob("*.json"))
# The three constructions of 30,000 to 50,000 heights: the 13 tests and cases that score them took 190 s of this
# module's 199 s on a loaded 2-core machine (343 s at load 12), nearly all of it numpy's direct convolution of 50,000
# heights (scoring.DIRECT_CONVOLUTION_MAX), 20 of them. Each is marked `large` and `slow`: `make slow` runs them,
# `make test` and test-fast do not (`make test` stays within 15 minutes with the wheel smoke added). Every code path
# they take stays in `make test` through the smaller constructions of the same tests (direct convolution, lists and
# arrays, the vectorised L2, and the FFT path forced on a construction of a few thousand heights).
LARGE = {"ac1_ttt_discover", "ac2_alphaevolve_v2", "ac2_ttt_discover"}
BIG = (pytest.mark.large, pytest.mark.slow)


def cases(paths):
    "The construction files `paths` as parameters, the large ones marked large and slow."
    return [pytest.param(p, marks=BIG) if p.stem in LARGE else p for p in paths]


def load(name):
    return json.loads((DATA / f"{name}.json").read_text())


def result_of(d, c5=None):
    "What the task's entry point would have returned for the stored construction."
    data = d["data"]
    if d["task"] in ("ac1", "ac2"): return data["heights"]
    if d["task"] == "cp26": return (data["centers"], data["radii"], sum(data["radii"]))
    return (data["h"], d["computed_value"] if c5 is None else c5, data["n"])


def test_the_reference_data_is_all_there():
    names = {f.stem for f in FILES}
    test_eq(len(FILES), 20)
    assert {"ac1_ttt_discover", "ac2_alphaevolve_v2", "cp26_simpletes", "erdos_simpletes"} <= names
    test_eq({json.loads(f.read_text())["task"] for f in FILES}, set(TASK_NAMES))


@pytest.mark.parametrize("path", cases(FILES), ids=lambda p: p.stem)
def test_every_construction_reproduces_its_value(path):
    d = json.loads(path.read_text())
    s = get_task(d["task"]).score(result_of(d))
    test_eq((s.valid, s.reason), (True, None))
    test_close(s.bound, d["computed_value"], eps=1e-9 * d["computed_value"])
    task = get_task(d["task"])
    test_eq(s.reward, 1 / s.bound if task.direction == "min" else s.bound)


@pytest.mark.parametrize("path", cases(p for p in FILES if p.stem.startswith(("ac1", "ac2"))), ids=lambda p: p.stem)
def test_ac_lists_and_arrays_score_identically_and_the_construction_reproduces_the_bound(path):
    d = json.loads(path.read_text())
    task = get_task(d["task"])
    s_list, s_array = task.score(d["data"]["heights"]), task.score(np.array(d["data"]["heights"]))
    test_eq(s_list, s_array)
    test_eq(task.score(s_list.construction).bound, s_list.bound)
    test_eq(len(s_list.construction), d["data"]["n"])


@pytest.mark.parametrize("name", ["ac1_alphaevolve_v2", "ac2_thetaevolve"]
                         + [pytest.param(n, marks=BIG) for n in ["ac1_ttt_discover", "ac2_alphaevolve_v2", "ac2_ttt_discover"]])
def test_fft_convolution_agrees_with_direct_on_the_large_constructions(name, monkeypatch):
    d = load(name)
    task = get_task(d["task"])
    direct = task.score(d["data"]["heights"]).bound
    monkeypatch.setattr(scoring, "DIRECT_CONVOLUTION_MAX", 0)   # force the FFT path
    via_fft = task.score(d["data"]["heights"]).bound
    test_close(via_fft, direct, eps=1e-12 * direct)


def reference_loop_c2(heights):
    "AC2 as the reference computes it: linspace grid, L2 accumulated interval by interval in a Python loop."
    a = np.minimum(np.maximum(np.array(heights, dtype=float), 0.0), 1000.0)
    c = np.convolve(a, a)
    x = np.linspace(-0.5, 0.5, len(c) + 2)
    y = np.concatenate(([0.0], c, [0.0]))
    l2 = 0.0
    for i in range(len(c) + 1):
        y1, y2 = y[i], y[i + 1]
        l2 += ((x[i + 1] - x[i]) / 3) * (y1 * y1 + y1 * y2 + y2 * y2)
    return float(l2 / ((np.sum(np.abs(c)) / (len(c) + 1)) * np.max(np.abs(c))))


@pytest.mark.parametrize("path", cases(p for p in FILES if p.stem.startswith("ac2")), ids=lambda p: p.stem)
def test_ac2_vectorised_l2_matches_the_reference_loop_order(path):
    d = json.loads(path.read_text())
    ours, loop = c2_lower_bound(d["data"]["heights"]), reference_loop_c2(d["data"]["heights"])
    test_close(ours, loop, eps=1e-12 * loop)


@pytest.mark.large
@pytest.mark.slow
def test_ac2_ttt_discover_matches_the_value_the_reference_stored():
    d = load("ac2_ttt_discover")      # the reference's loop stored 0.9591797711481764; we sum pairwise
    s = get_task("ac2").score(d["data"]["heights"])
    test_close(s.bound, d["claimed_value"], eps=1e-12 * d["claimed_value"])
    assert s.bound != d["claimed_value"]        # documented: summation order differs at ~1e-13


def test_best_known_values_are_the_best_reproduced_constructions():
    best = {"ac1": "ac1_ttt_discover", "ac2": "ac2_alphaevolve_v2", "cp26": "cp26_alphaevolve_v2_repo",
            "erdos": "erdos_together_ai_2026"}
    for task_name, file in best.items():
        task, d = get_task(task_name), load(file)
        test_eq(task.best_known, d["computed_value"])
        if file not in LARGE or os.environ.get("UGTTT_SLOW"):   # a large one's score is checked under make slow only
            test_close(task.score(result_of(d)).bound, task.best_known, eps=1e-14 * task.best_known)   # an ulp of summation order
        # the best among constructions that reproduce; for CP26 among those valid at tolerance 0 (docs/benchmarks.md:
        # SimpleTES sums 3e-12 more but only with the 1e-12 overlap allowance)
        others = [json.loads(f.read_text()) for f in FILES if f.stem.startswith(task_name) and f.stem != "erdos_simpletes"]
        others = [o for o in others if o.get("checks", {}).get("valid_tol0_float", True)]
        values = [o["computed_value"] for o in others]
        test_eq(task.best_known, min(values) if task.direction == "min" else max(values))
    test_eq([get_task(n).target for n in TASK_NAMES], [1.5030, 0.97, 2.636, 0.3808])
    test_eq([get_task(n).bound_name for n in TASK_NAMES], ["C1", "C2", "sum of radii", "C5"])


# CP26 validity per docs/benchmarks.md: (valid at the reference tolerance 1e-12, valid at tolerance 0).
CP26_TABLE = {"cp26_alphaevolve_v1": (True, True), "cp26_alphaevolve_v2_repo": (True, True),
              "cp26_shinkaevolve": (True, True), "cp26_thetaevolve_formal": (True, True),
              "cp26_ttt_discover": (True, True), "cp26_simpletes": (True, False)}


@pytest.mark.parametrize("name", sorted(CP26_TABLE))
def test_cp26_tolerant_and_strict_validity_match_the_table_and_the_files_checks(name):
    d = load(name)
    task = get_task("cp26")
    tolerant, strict = task.score(result_of(d)), task.score(result_of(d), strict=True)
    test_eq((tolerant.valid, strict.valid), CP26_TABLE[name])
    test_eq(strict.valid, d["checks"]["valid_tol0_float"])
    if not strict.valid:
        i, j = d["checks"]["worst_pair"]
        assert f"circles {i} and {j} overlap by 9.99" in strict.reason and "tolerance 0" in strict.reason
        test_eq((strict.reward, strict.bound), (0.0, None))
    test_close(tolerant.bound, d["computed_value"], eps=1e-15 * d["computed_value"])    # np.sum vs sum: an ulp or two
    test_eq([c[2] for c in tolerant.construction], d["data"]["radii"])


def test_cp26_ignores_the_reported_sum_and_shrinking_the_radii_makes_simpletes_strictly_valid():
    d = load("cp26_simpletes")
    centers, radii = d["data"]["centers"], d["data"]["radii"]
    s = get_task("cp26").score((centers, radii, 1e9))                 # a lie about the sum changes nothing
    test_eq(s.valid, True)
    test_close(s.reward, d["computed_value"], eps=1e-15 * d["computed_value"])
    shrunk = [r - d["checks"]["uniform_radius_shrink_for_exact_validity"] for r in radii]
    assert get_task("cp26").score((centers, shrunk, 0.0), strict=True).valid


def test_cp26_a_small_overlap_fails_both_checks():
    d = load("cp26_ttt_discover")
    radii = list(d["data"]["radii"]); radii[8] += 1e-9                 # circle 8 touched its neighbours: now overlaps by ~1e-9
    for strict in (False, True):
        s = get_task("cp26").score((d["data"]["centers"], radii, 0.0), strict=strict)
        assert not s.valid and "circles 8 and 9 overlap by 1.000e-09" in s.reason, s.reason   # the deepest overlap


def test_erdos_simpletes_reported_c5_is_rejected():
    d = load("erdos_simpletes")
    reported = d["claimed_value"]                                       # 0.38085596768904106 stored in the file
    s = get_task("erdos").score(result_of(d, c5=reported))
    test_eq((s.valid, s.reward, s.bound), (False, 0.0, None))
    assert "disagrees" in s.reason and "0.38094895" in s.reason         # the value recomputed from h
    # the reference's check (np.isclose, atol 1e-4) would have accepted it and rewarded 1/0.380856:
    assert np.isclose(d["computed_value"], reported, atol=1e-4)
    honest = get_task("erdos").score(result_of(d))                      # reporting the true C5 is fine (and worse)
    test_eq(honest.valid, True)
    test_close(honest.bound, 0.3809489501030183, eps=1e-9)


@pytest.mark.parametrize("name", ["erdos_haugland2016", "erdos_ttt_discover", "erdos_together_ai_2026"])
def test_erdos_rescaling_and_report_check(name):
    d = load(name)
    h, n, c5 = np.array(d["data"]["h"]), d["data"]["n"], d["computed_value"]
    task = get_task("erdos")
    scaled = h * 0.999                                                 # sum != n/2: rescaled back, same C5
    s = task.score((scaled, c5, n))
    test_eq(s.valid, True)
    test_close(s.bound, c5, eps=1e-12 * c5)
    test_close(sum(s.construction), n / 2, eps=1e-14 * n)
    assert h.max() * 1.01 > 1                                          # every file has a value near 1 ...
    test_eq(task.score((h * 1.01, c5, n)).valid, False)                # ... so h * 1.01 leaves [0, 1]: rescaling
    assert "h must lie in [0, 1]" in task.score((h * 1.01, c5, n)).reason   # cannot rescue it
    assert task.score((h, c5 * (1 + 2e-9), n)).reason.startswith("invalid solution: reported c5_bound")
    assert task.score((h, c5 * (1 + 5e-10), n)).valid
    assert "n_points" in task.score((h, c5, n + 1)).reason


def test_initial_values_of_the_reference_roots():
    ac1, ac2 = get_task("ac1").initial_state(), get_task("ac2").initial_state()
    test_eq((round(ac1.bound, 10), round(ac2.bound, 10)), (2.0377367798, 0.6553266717))   # the reference's first prompts
    test_eq(ac1.construction, np.random.default_rng(42).random(1000).tolist())
    test_eq(ac2.construction, ac1.construction)
    er = get_task("erdos").initial_state(seed=42)
    test_eq(get_task("erdos").score((er.construction, er.bound, len(er.construction))).bound, er.bound)


# Root states as computed before the roots moved into the Task (bound, length and sha256 of repr(construction)).
ROOTS = {("ac1", 42): (2.037736779839904, 1000, "e898932ab7163b4d"), ("ac1", 7): (2.0500517035919636, 1000, "390f36dc57c074a8"),
         ("ac2", 42): (0.6553266717187283, 1000, "e898932ab7163b4d"), ("ac2", 7): (0.6525401833508168, 1000, "390f36dc57c074a8"),
         ("erdos", 42): (0.48962887120768206, 45, "543046bb0fe83fd5"), ("erdos", 7): (0.5075194735624508, 96, "f9abdbed6c256cfd")}


@pytest.mark.parametrize("task_name,seed", sorted(ROOTS))
def test_root_states_are_unchanged_bit_for_bit(task_name, seed):
    s = get_task(task_name).initial_state(seed=seed)
    bound, n, digest = ROOTS[task_name, seed]
    test_eq((s.bound, len(s.construction), hashlib.sha256(repr(s.construction).encode()).hexdigest()[:16]), (bound, n, digest))
    test_eq((s.code, s.parent_bounds, s.stdout), ("", [], ""))
    test_eq(s.reward, 1 / bound if get_task(task_name).direction == "min" else bound)
    test_eq(get_task("cp26").initial_state(seed=seed), State())


def test_the_size_cap():
    task = get_task("ac1")
    big = np.random.default_rng(0).random(MAX_ENTRIES)
    t = time.perf_counter(); s = task.score(big); elapsed = time.perf_counter() - t
    assert s.valid and elapsed < 5, elapsed                           # FFT path: fast even at the cap
    test_close(s.bound, c1_upper_bound(big), eps=1e-15 * s.bound)
    for too_big in (np.zeros(MAX_ENTRIES + 1) + 1, [1.0] * (MAX_ENTRIES + 1)):
        s = task.score(too_big)
        assert not s.valid and "too many numbers" in s.reason
    assert "too many" in get_task("erdos").score(([0.5] * (MAX_ENTRIES + 2), 0.5, MAX_ENTRIES + 2)).reason


class Liar:
    "Lies about everything it is asked."
    def __len__(self): return 3
    def __iter__(self): return iter([0.5, 0.5, 0.5])
    def __float__(self): return 0.5
    def __getitem__(self, i): return 0.5
    def __array__(self, *a, **k): return np.full(3, 0.5)


class Hang:
    "Would hang or explode if asked anything."
    def __len__(self):
        while True: pass
    def __iter__(self):
        while True: yield 1.0
    def __float__(self): raise SystemExit("boom")
    def __index__(self): raise SystemExit("boom")


def test_objects_that_lie_or_hang_yield_a_clean_invalid_score():
    for task_name in TASK_NAMES:
        task = get_task(task_name)
        for bad in (Liar(), Hang(), [Liar()] * 3, [0.5, Hang()], (Liar(), 0.5, 3), (Hang(), Hang(), Hang()),
                    ([0.5] * 4, Hang(), 4), ([0.5] * 4, 0.5, Hang()), ([[0.5, 0.5]] * 26, [Liar()] * 26, 1.0),
                    ([Liar()] * 26, [0.1] * 26, Hang())):
            s = task.score(bad)
            assert isinstance(s, Score) and not s.valid and s.reward == 0.0 and s.reason


def test_bools_nan_inf_empty_and_wrong_nesting_are_invalid():
    ac1, cp, er = get_task("ac1"), get_task("cp26"), get_task("erdos")
    for bad in ([True, 1.0], [], [float("nan")], [1.0, float("inf")], [[1.0, 2.0]], np.array([[1.0]]), "1,2",
                {"a": 1.0}, None, 3.0, np.array([1 + 1j]), np.array(["1"])):
        assert not ac1.score(bad).valid and not get_task("ac2").score(bad).valid
    good = load("cp26_ttt_discover")["data"]
    for centers, radii in [(good["centers"], good["radii"][:-1] + [float("nan")]), (good["centers"][:-1], good["radii"]),
                           ([c + [0.0] for c in good["centers"]], good["radii"]), (good["radii"], good["radii"])]:
        assert not cp.score((centers, radii, 0.0)).valid
    for bad in (([0.5, 0.5], 0.5, True), ([0.5, True], 0.5, 2), ([0.5, 0.5], float("inf"), 2), ([0.5, 0.5], 0.5),
                ([[0.5, 0.5]], 0.5, 2), ([], 0.5, 0)):
        assert not er.score(bad).valid


nested = st.recursive(
    st.none() | st.booleans() | st.integers(-10 ** 30, 10 ** 30) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=3) | st.builds(Liar),
    lambda children: st.lists(children, max_size=30) | st.tuples(children, children, children)
    | st.lists(st.floats(0, 1), min_size=1, max_size=60).map(np.array), max_leaves=80)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(task_name=st.sampled_from(TASK_NAMES), value=nested)
def test_score_never_raises_on_arbitrary_data(task_name, value):
    s = get_task(task_name).score(value)
    assert isinstance(s, Score)
    assert (s.valid and s.bound is not None and math.isfinite(s.reward) and s.reason is None) or \
           (not s.valid and s.reward == 0.0 and s.bound is None and s.reason)
