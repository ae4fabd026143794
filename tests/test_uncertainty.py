"""Tests of ugttt.uncertainty (paper Eq. 2-3) against its naive references (`_naive_*`), over random and adversarial inputs.

Tolerances, and why:
* token_mutual_information vs. float64 explicit probabilities: float32 log-probs carry an absolute rounding error
  of about eps32 * |log p|, which moves MI by at most a few times that; we allow 1e-6 + 1e-6 * max|logit|.
* ensemble kernel vs. its unchunked one-liner: float32 GEMM results depend on the blocking (i.e. on the chunk's
  row count) by ~1e-6 relative, so 1e-4 absolute; bf16/fp16 LM heads round their logits to the half dtype, and
  the CPU GEMM may round a chunk's logit differently from the full matrix by one half-precision ulp
  u = ulp * max|logit| (bf16 ulp 2^-7, fp16 2^-10). Log-probs, MI, entropy and gap then move by at most 2u, the
  variance by 4u * (1 + spread of the log-probs); those are the tolerances. With inputs whose products are exact in
  every dtype (small integers times 1/4) there is no GEMM rounding and every dtype must match to 1e-5.
"""
import math
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fastcore.test import test_eq, test_close, test_fail
from hypothesis import given, settings, strategies as st
from ugttt.uncertainty import (token_mutual_information, realised_token_diagnostics, EnsembleTokenScores,
                               ensemble_token_scores, chunked_token_logprobs, top_frac_count, top_frac_mean,
                               float_tol)
from ugttt.uncertainty import (_naive_token_mi, _naive_realised_token_diagnostics, _naive_ensemble_scores,
                               _naive_token_logprobs, _naive_top_frac_mean)

for _helper in (test_close, test_eq, test_fail): _helper.__test__ = False   # fastcore's assertions, not tests to collect

MANY = settings(max_examples=300, deadline=None, derandomize=True)
INF = float('inf')
HALF_ULP = {torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}


# ---------------------------------------------------------------- tolerances
def mi_tol(logits):
    finite = logits.double()[torch.isfinite(logits)]
    return 1e-6 + 1e-6 * (finite.abs().max().item() if finite.numel() else 0.0)


# ---------------------------------------------------------------- token_mutual_information
@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize('scale', [1e-3, 1.0, 8.0, 60.0])
def test_mi_matches_naive_on_random_logits(dtype, scale):
    g = torch.Generator().manual_seed(int(scale * 1000))
    logits = (torch.randn(5, 40, 300, generator=g) * scale).to(dtype)
    mi = token_mutual_information(logits)
    assert mi.shape == (40,) and mi.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    tol = 1e-12 if dtype == torch.float64 else mi_tol(logits)
    test_close(mi.double(), _naive_token_mi(logits), eps=tol)
    assert (mi >= 0).all()


def test_mi_kl_form_beats_entropy_difference_for_tiny_mi():
    # the collapsed-ensemble regime (MI ~ 4e-7): the KL form keeps ~3% relative accuracy in float32, while the
    # difference of two float32 entropies of size ~log V is pure rounding noise there
    logits = torch.randn(5, 100, 1000, generator=torch.Generator().manual_seed(0)) * 1e-3
    ref = _naive_token_mi(logits)
    lp = logits.log_softmax(-1); p = lp.exp()
    ent_diff = -torch.special.xlogy(p.mean(0), p.mean(0)).sum(-1) + (p * lp).sum(-1).mean(0)
    err_kl = (token_mutual_information(logits).double() - ref).abs().max().item()
    err_ent = (ent_diff.double() - ref).abs().max().item()
    assert err_kl < 0.1 * ref.min().item() and err_kl * 20 < err_ent


logit = st.one_of(st.floats(-1e4, 1e4, allow_nan=False, width=32), st.sampled_from([0.0, 1e4, -1e4, -INF, 1.0, 30.0]))


@st.composite
def logit_tensors(draw):
    K, T, V = draw(st.integers(1, 4)), draw(st.integers(0, 3)), draw(st.integers(1, 6))
    x = torch.tensor(draw(st.lists(logit, min_size=K * T * V, max_size=K * T * V)), dtype=torch.float32).reshape(K, T, V)
    # every member row needs one finite logit (else there is no distribution, which is an error, tested below)
    dead = torch.isneginf(x).all(-1)                                             # (K, T)
    x[..., 0] = torch.where(dead, torch.zeros_like(x[..., 0]), x[..., 0])
    return x


@MANY
@given(logit_tensors())
def test_mi_adversarial_no_nan_nonnegative_and_close_to_naive(x):
    mi = token_mutual_information(x)
    assert mi.shape == (x.shape[1],) and torch.isfinite(mi).all() and (mi >= 0).all()
    test_close(mi.double(), _naive_token_mi(x), eps=mi_tol(x))
    assert (mi <= math.log(x.shape[0]) + 1e-5).all()          # MI <= log K (mixture of K components)


@MANY
@given(logit_tensors(), st.integers(1, 6), st.sampled_from([torch.float32, torch.bfloat16, torch.float16, torch.float64]))
def test_mi_is_exactly_zero_for_identical_members(x, K, dtype):
    same = x[:1].expand(K, -1, -1).to(dtype)                   # K copies of one member, masks included
    test_eq(token_mutual_information(same), torch.zeros(x.shape[1], dtype=torch.float64 if dtype == torch.float64 else torch.float32))


def test_mi_masked_in_some_members_only():
    # entry 2 is masked in member 0 only, entry 3 in every member: finite and equal to the naive value
    x = torch.tensor([[[1.0, 2.0, -INF, -INF]], [[1.0, 2.0, 3.0, -INF]], [[0.5, -INF, 3.0, -INF]]])
    mi = token_mutual_information(x)
    assert torch.isfinite(mi).all()
    test_close(mi.double(), _naive_token_mi(x), eps=1e-6)


def test_mi_huge_logits_saturate_at_log_k():
    x = torch.full((4, 1, 4), -1e4)
    for k in range(4): x[k, 0, k] = 1e4                         # 4 members, each certain of a different token
    test_close(token_mutual_information(x), torch.tensor([math.log(4)]), eps=1e-6)
    test_close(token_mutual_information(x.half()), torch.tensor([math.log(4)]), eps=1e-6)   # 1e4 is exact in fp16


def test_mi_does_not_modify_its_input_and_builds_no_graph():
    x = torch.randn(3, 4, 5, requires_grad=True)
    before = x.detach().clone()
    mi = token_mutual_information(x)
    test_eq(x.detach(), before)
    test_eq(mi.grad_fn, None)


@pytest.mark.parametrize('bad, err, msg', [
    (torch.zeros(3, 4), ValueError, '(K, T, V)'),
    (torch.zeros(2, 3, 4, 5), ValueError, '(K, T, V)'),
    (torch.zeros(0, 3, 4), ValueError, 'K >= 1'),
    (torch.zeros(2, 3, 0), ValueError, 'V >= 1'),
    (torch.zeros(2, 3, 4, dtype=torch.long), TypeError, 'float'),
    (np.zeros((2, 3, 4)), TypeError, 'torch.Tensor'),
    (torch.tensor([[[0.0, float('nan')]]]), ValueError, 'NaN'),
    (torch.tensor([[[0.0, INF]]]), ValueError, '+inf'),
    (torch.tensor([[[0.0, 1.0]], [[-INF, -INF]]]), ValueError, 'member 1'),
])
def test_mi_rejects_bad_input_clearly(bad, err, msg):
    test_fail(lambda: token_mutual_information(bad), exc=err, contains=msg)


# ---------------------------------------------------------------- realised-token diagnostics
@MANY
@given(st.integers(1, 6), st.integers(0, 5), st.floats(0.01, 30.0), st.integers(0, 2**31 - 1))
def test_diagnostics_match_naive(K, T, scale, seed):
    ell = -(torch.rand(K, T, generator=torch.Generator().manual_seed(seed)) * scale)   # (K, T) log-probs <= 0
    pe, rmi, var = realised_token_diagnostics(ell)
    npe, nrmi, nvar = _naive_realised_token_diagnostics(ell)
    test_close(pe.double(), npe, eps=1e-6)
    test_close(rmi.double(), nrmi.clamp_min(0), eps=1e-5)
    test_close(var.double(), nvar, eps=1e-5 * (1 + scale ** 2))
    assert (rmi >= 0).all() and (var >= 0).all() and (pe >= 0).all()


def test_diagnostics_reject_bad_input():
    for bad, err, msg in [(torch.zeros(3), ValueError, '(K, T)'), (torch.zeros(0, 2), ValueError, '(K, T)'),
                          (torch.tensor([[0.0, -INF]]), ValueError, 'finite'),
                          (torch.zeros(2, 2, dtype=torch.long), TypeError, 'float')]:
        test_fail(lambda: realised_token_diagnostics(bad), exc=err, contains=msg)


# ---------------------------------------------------------------- the chunked ensemble kernel
CHUNKS = lambda T: [1, 3, 7, T, T + 5]


def _inputs(dtype, K=4, T=37, D=16, V=300, seed=0, exact=False):
    g = torch.Generator().manual_seed(seed)
    if exact:   # small integers times 1/4: every product and sum is exact in bf16/fp16/fp32, so no GEMM rounding
        h = torch.randint(-3, 4, (K, T, D), generator=g) * 0.25
        w = torch.randint(-3, 4, (V, D), generator=g) * 0.25
        b = torch.randint(-4, 5, (V,), generator=g) * 0.25
    else:
        h, w, b = torch.randn(K, T, D, generator=g), torch.randn(V, D, generator=g), torch.randn(V, generator=g)
    return h.to(dtype), w.to(dtype), b.to(dtype), torch.randint(0, V, (T,), generator=g)


FIELDS = ('token_logprobs', 'token_mi', 'predictive_entropy', 'rmi', 'variance')


def _errors(s, ref):
    "Max abs error of each field of `s` against the naive scores `ref`: token_logprobs, token_mi, predictive_entropy, rmi, variance."
    return [(getattr(s, f) - getattr(ref, f)).abs().max().item() if getattr(ref, f).numel() else 0.0 for f in FIELDS]


def _max_err(s, ref):
    return max(_errors(s, ref))


@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_kernel_equals_unchunked_for_every_chunk_size_exact_products(dtype):
    h, w, b, tok = _inputs(dtype, exact=True)
    ref = _naive_ensemble_scores(h, w, tok, b)
    for c in CHUNKS(h.shape[1]):
        s = ensemble_token_scores(h, w, tok, chunk_size=c, bias=b)
        assert _max_err(s, ref) <= (1e-10 if dtype == torch.float64 else 1e-5), (dtype, c)


@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize('with_bias', [False, True])
@pytest.mark.parametrize('seed', [1, 2, 3])
def test_kernel_equals_unchunked_for_every_chunk_size_random(dtype, with_bias, seed):
    h, w, b, tok = _inputs(dtype, seed=seed)
    b = b if with_bias else None
    ref, logits = _naive_ensemble_scores(h, w, tok, b), F.linear(h, w, b)
    ell = ref.token_logprobs
    spread = (ell - ell.mean(0)).abs().max().item()            # scale of the variance's sensitivity
    if dtype in HALF_ULP:   # u = one half-precision ulp of the largest logit: the most a chunk's GEMM may differ
        u = HALF_ULP[dtype] * logits.float().abs().max().item()
        tols = [2 * u, 2 * u, 2 * u, 2 * u, 4 * u * (1 + spread)]
    else:
        tols = [1e-10 if dtype == torch.float64 else 1e-4] * 4
        tols.append(tols[0] * (1 + spread))
    for c in CHUNKS(h.shape[1]):
        s = ensemble_token_scores(h, w, tok, chunk_size=c, bias=b)
        assert s.token_logprobs.shape == (4, 37) and s.token_mi.shape == s.rmi.shape == (37,)
        assert all(e <= t for e, t in zip(_errors(s, ref), tols)), (dtype, c, _errors(s, ref), tols)


def test_kernel_identical_members_give_exact_zeros_and_k1_works():
    h, w, b, tok = _inputs(torch.float32, K=1, T=20, V=50, seed=2)
    s1 = ensemble_token_scores(h, w, tok, chunk_size=6, bias=b)
    for f in ('token_mi', 'rmi', 'variance'): test_eq(getattr(s1, f), torch.zeros(20))
    test_close(s1.predictive_entropy, torch.special.entr(s1.token_logprobs[0].exp()), eps=1e-6)
    s5 = ensemble_token_scores(h.expand(5, -1, -1), w, tok, chunk_size=7, bias=b)
    for f in ('token_mi', 'rmi', 'variance'): test_eq(getattr(s5, f), torch.zeros(20))
    # GEMM shapes differ, so float32 sums run in other orders: a D-term logit, then a V-term log-sum-exp (measured 2e-6)
    test_close(s5.token_logprobs, s1.token_logprobs.expand(5, -1), eps=float_tol(torch.float32, 16 + 50, float(s1.token_logprobs.abs().max())))


def test_kernel_empty_sequence_and_no_graph():
    h, w, b, tok = _inputs(torch.float32, T=0)
    s = ensemble_token_scores(h, w, tok)
    assert isinstance(s, EnsembleTokenScores)
    test_eq(s.token_logprobs.shape, (4, 0)); test_eq(s.token_mi.shape, (0,))
    h, w, b, tok = _inputs(torch.float32, T=5)
    s = ensemble_token_scores(h.requires_grad_(), w.requires_grad_(), tok)
    test_eq([t.grad_fn for t in (s.token_logprobs, s.token_mi, s.rmi)], [None] * 3)


def test_kernel_masked_vocabulary_through_the_bias():
    h, w, b, tok = _inputs(torch.float32, seed=3)
    b[::3] = -INF                                  # mask a third of the vocabulary in every member
    tok = torch.where(tok % 3 == 0, tok + 1, tok)  # realised tokens are never masked
    ref = _naive_ensemble_scores(h, w, tok, b)
    s = ensemble_token_scores(h, w, tok, chunk_size=5, bias=b)
    assert torch.isfinite(s.token_mi).all() and _max_err(s, ref) <= 1e-4
    bad = tok.clone(); bad[4] = 0                   # a realised token with probability 0
    test_fail(lambda: ensemble_token_scores(h, w, bad, bias=b), exc=ValueError, contains='probability 0')


@pytest.mark.parametrize('kwargs, err, msg', [
    (dict(hidden=torch.zeros(3, 4)), ValueError, '(K, T, D)'),
    (dict(hidden=torch.zeros(0, 5, 4)), ValueError, 'K >= 1'),
    (dict(weight=torch.zeros(9, 3)), ValueError, 'hidden size mismatch'),
    (dict(weight=torch.zeros(9)), ValueError, '(V, D)'),
    (dict(weight=torch.zeros(9, 4, dtype=torch.float64)), TypeError, 'differs from hidden dtype'),
    (dict(bias=torch.zeros(8)), ValueError, 'bias must have shape (9,)'),
    (dict(bias=torch.zeros(9, dtype=torch.float16)), TypeError, 'bias dtype'),
    (dict(tokens=torch.tensor([0, 1, 2])), ValueError, 'tokens must have shape (5,)'),
    (dict(tokens=torch.tensor([0.0, 1, 2, 3, 4])), TypeError, 'integer token ids'),
    (dict(tokens=torch.tensor([0, 1, 9, 3, 4])), ValueError, 'token id 9 at position 2'),
    (dict(tokens=torch.tensor([0, 1, 2, -1, 4])), ValueError, 'token id -1 at position 3'),
    (dict(chunk_size=0), ValueError, 'chunk_size'),
    (dict(chunk_size=2.5), ValueError, 'chunk_size'),
    (dict(chunk_size=True), ValueError, 'chunk_size'),
    (dict(hidden=torch.zeros(2, 5, 4, dtype=torch.long)), TypeError, 'float'),
    (dict(weight=torch.full((9, 4), float('nan'))), ValueError, 'NaN'),
])
def test_kernel_rejects_bad_input_clearly(kwargs, err, msg):
    args = dict(hidden=torch.ones(2, 5, 4), weight=torch.ones(9, 4), tokens=torch.arange(5), chunk_size=2, bias=None)
    args.update(kwargs)
    test_fail(lambda: ensemble_token_scores(**args), exc=err, contains=msg)


# ---------------------------------------------------------------- the differentiable single-member kernel
@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_chunked_logprobs_value_and_gradient_match_naive(dtype):
    h, w, b, tok = _inputs(dtype, K=1, T=29, V=200, seed=4, exact=True)
    h = h[0]
    g_out = torch.randn(29, generator=torch.Generator().manual_seed(5)).to(torch.float64 if dtype == torch.float64 else torch.float32)
    hn, wn, bn = (t.clone().requires_grad_() for t in (h, w, b))
    ref = _naive_token_logprobs(hn, wn, tok, bn)
    ref_grads = torch.autograd.grad((ref * g_out).sum(), (hn, wn, bn))
    tol = {torch.float64: 1e-10, torch.float32: 1e-5}.get(dtype, 1e-5)
    gtol = {torch.float64: 1e-10, torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 6e-2}[dtype]   # grads are stored in dtype
    for c in CHUNKS(29):
        hc, wc, bc = (t.clone().requires_grad_() for t in (h, w, b))
        out = chunked_token_logprobs(hc, wc, tok, chunk_size=c, bias=bc)
        test_eq(out.shape, (29,)); test_eq(out.dtype, ref.dtype)
        test_close(out, ref, eps=tol)
        grads = torch.autograd.grad((out * g_out).sum(), (hc, wc, bc))
        for g, r in zip(grads, ref_grads):
            assert g.dtype == dtype and (g.double() - r.double()).abs().max().item() <= gtol * (1 + r.double().abs().max().item())


def test_chunked_logprobs_gradient_in_float64_by_gradcheck():
    g = torch.Generator().manual_seed(6)
    h = torch.randn(7, 3, dtype=torch.float64, generator=g, requires_grad=True)
    w = torch.randn(5, 3, dtype=torch.float64, generator=g, requires_grad=True)
    tok = torch.tensor([0, 4, 4, 1, 2, 3, 0])
    assert torch.autograd.gradcheck(lambda h, w: chunked_token_logprobs(h, w, tok, chunk_size=3), (h, w))


def test_chunked_logprobs_keeps_no_per_chunk_logits_for_backward():
    # checkpointing: the graph holds only the chunks' inputs (slices of hidden, the weight, the tokens), never a
    # (chunk, V) logits tensor, so the memory kept for backward does not grow with T * V
    T, D, V = 64, 8, 5000
    h = torch.randn(T, D, requires_grad=True); w = torch.randn(V, D); tok = torch.randint(0, V, (T,))
    storages = {}
    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes(); return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = chunked_token_logprobs(h, w, tok, chunk_size=16)
    inputs = h.numel() * 4 + w.numel() * 4 + tok.numel() * 8
    assert sum(storages.values()) <= inputs + 4096, sum(storages.values())
    assert 16 * V * 4 > 4096                                    # one chunk's logits would not fit in that slack
    out.sum().backward()
    test_close(h.grad, torch.autograd.grad(_naive_token_logprobs(h, w, tok).sum(), h)[0], eps=1e-5)


def test_chunked_logprobs_without_grad_and_errors():
    h, w, b, tok = _inputs(torch.float32, K=1, T=9, V=20, seed=7)
    with torch.no_grad():
        out = chunked_token_logprobs(h[0].requires_grad_(), w, tok, chunk_size=4)
    test_eq(out.grad_fn, None)
    test_close(out, _naive_token_logprobs(h[0], w, tok), eps=1e-5)
    test_eq(chunked_token_logprobs(h[0, :0], w, tok[:0]).shape, (0,))
    test_fail(lambda: chunked_token_logprobs(h, w, tok), exc=ValueError, contains='(T, D)')
    test_fail(lambda: chunked_token_logprobs(h[0], w, tok + 20), exc=ValueError, contains='outside the vocabulary')
    test_fail(lambda: chunked_token_logprobs(h[0], w * float('nan'), tok), exc=ValueError, contains='non-finite')


# ---------------------------------------------------------------- top-frac count and mean (Eq. 3)
def test_top_frac_count_is_the_exact_decimal_ceiling():
    test_eq(math.ceil(0.07 * 100), 8)                              # the floating-point trap
    test_eq(top_frac_count(100), 7); test_eq(top_frac_count(200), 14)
    n = range(0, 200_001, 7)
    test_eq([top_frac_count(i) for i in n], [(7 * i + 99) // 100 for i in n])
    test_eq(top_frac_count(200_000), 14_000)
    for frac, num, den in [(0.05, 1, 20), (0.1, 1, 10), (0.3, 3, 10), (0.5, 1, 2), (1.0, 1, 1)]:
        test_eq([top_frac_count(i, frac) for i in range(1000)], [-(-i * num // den) for i in range(1000)])
    test_eq(top_frac_count(np.int64(100)), 7)


@pytest.mark.parametrize('n, frac, err, msg', [(-1, 0.07, ValueError, 'n must'), (1.5, 0.07, ValueError, 'n must'),
                                               (True, 0.07, ValueError, 'n must'), (10, 0.0, ValueError, 'frac'),
                                               (10, -0.1, ValueError, 'frac'), (10, 1.5, ValueError, 'frac'),
                                               (10, float('nan'), ValueError, 'frac'), (10, '0.07', TypeError, 'frac')])
def test_top_frac_count_rejects_bad_input(n, frac, err, msg):
    test_fail(lambda: top_frac_count(n, frac), exc=err, contains=msg)


@MANY
@given(st.lists(st.tuples(st.floats(-1e3, 1e3, allow_nan=False), st.booleans()), min_size=0, max_size=60),
       st.sampled_from([0.07, 0.01, 0.25, 0.5, 1.0]))
def test_top_frac_mean_matches_sorting_by_hand(rows, frac):
    v = np.array([r[0] for r in rows], dtype=np.float64); m = np.array([r[1] for r in rows], dtype=bool)
    got = top_frac_mean(torch.tensor(v), frac, mask=torch.tensor(m)).item()
    assert math.isclose(got, _naive_top_frac_mean(v, frac, mask=m), rel_tol=1e-12, abs_tol=1e-9)
    full = top_frac_mean(torch.tensor(v), frac).item()
    assert math.isclose(full, _naive_top_frac_mean(v, frac), rel_tol=1e-12, abs_tol=1e-9)


def test_top_frac_mean_batched_equals_rows_and_edge_cases():
    g = torch.Generator().manual_seed(8)
    v = torch.rand(6, 120, generator=g)
    lengths = torch.tensor([0, 1, 14, 15, 100, 120])
    m = torch.arange(120) < lengths[:, None]                            # (B, T) completion masks
    out = top_frac_mean(v, mask=m)
    test_eq(out.shape, (6,))
    tol = float_tol(torch.float32, 120)                                 # float32 means of values in [0, 1), rows of 120 (measured 6e-8)
    test_close(out, torch.stack([top_frac_mean(v[i], mask=m[i]) for i in range(6)]), eps=tol)
    test_close(out, torch.tensor([_naive_top_frac_mean(v[i], mask=m[i]) for i in range(6)]), eps=tol)
    test_eq(out[0].item(), 0.0)                                         # n = 0: no positions, no uncertainty
    test_eq(out[1].item(), v[1, 0].item()); test_eq(out[2].item(), v[2, :14].max().item())   # k = 1: the max
    test_close(out[4].item(), v[4, :100].topk(7).values.mean().item(), eps=tol)   # n = 100 -> 7
    test_eq(top_frac_mean(v, mask=m.int()), out)                         # 0/1 integer masks work too


def test_top_frac_mean_rejects_bad_input():
    v = torch.rand(10)
    for args, kw, err, msg in [((torch.rand(2, 3, 4),), {}, ValueError, 'shape'), ((torch.arange(5),), {}, TypeError, 'float'),
                               ((v,), dict(mask=torch.ones(9, dtype=torch.bool)), ValueError, 'mask'),
                               ((v,), dict(mask=torch.full((10,), 2)), ValueError, '0 and 1'),
                               ((torch.tensor([1.0, INF]),), {}, ValueError, 'finite'), ((v, 0.0), {}, ValueError, 'frac')]:
        test_fail(lambda: top_frac_mean(*args, **kw), exc=err, contains=msg)
    # a non-finite value outside the mask is ignored
    test_eq(top_frac_mean(torch.tensor([1.0, INF]), mask=torch.tensor([True, False])).item(), 1.0)
