"""Property tests of ugttt.advantage (paper Eq. 4-6, 10-11) over many random groups; the notebook runs a quick subset."""
import math
import torch
from fastcore.test import test_eq, test_close
from hypothesis import given, settings, strategies as st
from ugttt.advantage import (entropic_beta, kl_to_uniform, loo_advantages, gamma_eff, standardize_uncertainty,
                             shaped_advantages, is_constant_group)
from ugttt.advantage import _naive_loo_advantages

for _helper in (test_close, test_eq): _helper.__test__ = False   # fastcore's assertions, not tests to collect

LN2 = math.log(2)
MANY = settings(max_examples=400, deadline=None, derandomize=True)
# rewards in [0, 1e3]; a share drawn from a small pool so that ties, also at the maximum, are common
reward = st.one_of(st.floats(0, 1e3, allow_nan=False), st.sampled_from([0.0, 0.5, 1.0, 2.0, 1e3]),
                   st.integers(0, 1000).map(float))
groups = st.lists(reward, min_size=2, max_size=64)
betas = st.one_of(st.floats(0, 1e6), st.sampled_from([0.0, 1e-3, 1.0, 40.0, 745.0, 1e6]))


def n_at_max(r):
    t = torch.tensor(r, dtype=torch.float64)
    return int((t == t.max()).sum())


@MANY
@given(groups)
def test_beta_meets_the_kl_budget_when_the_root_is_in_the_bracket(r):
    b = entropic_beta(r)
    assert 0 < b <= 1e6
    if 2 * n_at_max(r) < len(r) and kl_to_uniform(r, 1e6).item() >= LN2:
        assert abs(kl_to_uniform(r, b).item() - LN2) <= 1e-6
        assert b < 1e6
    else:
        assert b == 1e6


@MANY
@given(groups)
def test_root_is_in_the_bracket_for_a_clear_top_gap(r):
    t = torch.tensor(r, dtype=torch.float64)
    rest = t[t < t.max()]
    if 2 * n_at_max(r) < len(r) and rest.numel() and t.max() - rest.max() >= 1e-4:
        assert abs(kl_to_uniform(r, entropic_beta(r)).item() - LN2) <= 1e-6


@MANY
@given(groups, st.floats(1e-3, 1e3))
def test_beta_is_scale_covariant_and_permutation_invariant(r, c):
    b = entropic_beta(r)
    if b < 1e6 and entropic_beta([c * x for x in r]) < 1e6:
        assert math.isclose(entropic_beta([c * x for x in r]) * c, b, rel_tol=1e-6)
    assert math.isclose(entropic_beta(list(reversed(r))), b, rel_tol=1e-9, abs_tol=1e-9)


@MANY
@given(groups, betas)
def test_loo_advantages_are_finite_and_bounded(r, beta):
    for b in (beta, entropic_beta(r)):
        a = loo_advantages(r, b)
        test_eq(a.shape, (len(r),)); test_eq(a.dtype, torch.float64)
        assert torch.isfinite(a).all() and (a >= -1).all() and (a <= 1e12 - 1).all()
        if is_constant_group(r): test_eq(a, torch.zeros(len(r), dtype=torch.float64))


@MANY
@given(st.lists(st.floats(0, 10), min_size=2, max_size=16), st.floats(0, 5))
def test_loo_advantages_match_the_unshifted_formula(r, beta):
    naive = _naive_loo_advantages(r, beta).clamp(max=1e12 - 1)   # no overflow: beta * r <= 50; the documented cap on w_i
    assert torch.allclose(loo_advantages(r, beta), naive, rtol=1e-10, atol=1e-12)


@MANY
@given(groups)
def test_saturated_groups_give_winners_positive_and_the_rest_minus_one(r):
    n = n_at_max(r)
    if 2 * n < len(r) or n == len(r): return
    a = loo_advantages(r, entropic_beta(r))
    t = torch.tensor(r, dtype=torch.float64)
    top = t == t.max()
    rest_gap = (t.max() - t[~top]).min().item()
    if rest_gap * 1e6 > 800:                     # rivals underflow: the exact limits
        assert torch.allclose(a[top], torch.full((n,), (len(r) - 1) / (n - 1) - 1 if n > 1 else 1e12 - 1,
                                                 dtype=torch.float64))
        assert a[~top].eq(-1).all()
    else:                                        # a rival close to the max may itself get w > 1
        assert (a[top] >= 0).all() and (a[~top] < a[top].min()).all()


@MANY
@given(groups, st.floats(0, 10), st.data())
def test_shaping_reduces_to_plain_advantages(r, u_const, data):
    beta = entropic_beta(r)
    for dtype in (torch.float32, torch.float64):
        A = loo_advantages(r, beta).to(dtype)
        U = data.draw(st.lists(st.floats(0, 5), min_size=len(r), max_size=len(r)))
        test_eq(shaped_advantages(A, U, beta, alpha=0.0), A)
        test_eq(shaped_advantages(A, [u_const] * len(r), beta), A)
        out = shaped_advantages(A, U, beta)
        test_eq(out.dtype, dtype)
        assert torch.isfinite(out).all()


# uncertainties: arbitrary floats, or a large common value plus a tiny spread (the hard case for centring)
uncertainties = st.one_of(
    st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=64),
    st.tuples(st.floats(0.01, 10), st.sampled_from([1e-12, 1e-9, 1e-6]), st.lists(st.integers(0, 3), min_size=2, max_size=64))
      .map(lambda t: [t[0] + t[1] * k for k in t[2]]))


@MANY
@given(uncertainties)
def test_standardised_uncertainty_is_zero_mean_unit_variance_when_unclipped(u):
    z = standardize_uncertainty(u)
    assert z.abs().max() <= 3
    if len(u) <= 10: assert z.abs().max() <= (len(u) - 1) / math.sqrt(len(u)) + 1e-6   # clip inactive
    raw = torch.tensor(u, dtype=torch.float64)
    if len(u) >= 2 and raw.max() > raw.min() and raw.std() > 1e-300:
        assert abs(z.sum().item()) < 1e-13 * len(u) or z.abs().max() == 3   # sum z = 0 unless clipped (Prop. 1)
        if z.abs().max() < 3: assert math.isclose(z.pow(2).sum().item(), len(u) - 1, rel_tol=1e-9)


def test_gamma_eff_is_monotone_and_saturates():
    vals = [gamma_eff(b) for b in (0.0, 0.5, 1.0, 2.0, 10.0, 20.0, 1e6)]
    test_eq(vals, sorted(vals)); test_eq(vals[-2:], [1.0, 1.0])
