"""Properties of ugttt.loss (paper App. A, Eq. 12-13) over random small groups: the ratio-1 gradient is REINFORCE,
the reference's form matches its formula written out independently, the clip is pessimistic, masks are respected;
the tapered loss of another member's negative rollouts (TOPR) matches its formula, "drop" trains on the rows its
definition names, and train_subsample keeps positions 0, n, 2n, ... of each adapter's rows."""
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st
from ugttt.loss import (token_mean, kl_token_advantages, clipped_surrogate, adapter_pg_loss, GroupPart, adapter_loss_term, training_rows,
                        subsample_rows)
from ugttt.update import UpdateConfig

FEW = settings(max_examples=40, deadline=None, derandomize=True)


@st.composite
def groups(draw):
    "A small random group: logits (G, T, V), realised ids, a 0/1 mask, advantages, base and generator log-probs."
    G, T, V = draw(st.integers(1, 4)), draw(st.integers(1, 6)), draw(st.integers(2, 6))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(G, T, V, generator=g, dtype=torch.float64)
    ids = torch.randint(V, (G, T), generator=g)
    mask = torch.randint(2, (G, T), generator=g)
    adv = torch.randn(G, generator=g, dtype=torch.float64)
    base = -torch.rand(G, T, generator=g, dtype=torch.float64) * 3
    gen = -torch.rand(G, T, generator=g, dtype=torch.float64) * 3
    return logits, ids, mask, adv, base, gen


def logp_of(logits, ids):
    return logits.log_softmax(-1).gather(-1, ids[..., None])[..., 0]


@FEW
@given(groups(), st.sampled_from([0.2, 1e-6, None]), st.sampled_from([0.0, 0.01, 0.5]))
def test_ratio_one_gradient_is_reinforce(group, eps, kl):
    logits, ids, mask, adv, base, _ = group
    z = logits.clone().requires_grad_(True)
    old = logp_of(logits, ids)
    adapter_pg_loss(logp_of(z, ids), adv, mask, old, base, cfg=UpdateConfig(kl_coef=kl, clip_eps=eps)).sum().backward()
    adv_t = adv[:, None] - kl * (old - base)
    onehot, p = F.one_hot(ids, logits.shape[-1]).double(), logits.softmax(-1)
    expected = -(mask * adv_t / mask.sum(-1, keepdim=True).clamp_min(1))[..., None] * (onehot - p)
    assert torch.allclose(z.grad, expected, rtol=0, atol=1e-12)


@FEW
@given(groups(), st.sampled_from([0.0, 0.01, 0.3]))
def test_reference_form_matches_its_formula(group, kl):
    "Reference: A_it = A_i m + lam m (d_bar - d), d from the generator; L_i = -sum_t m rho A_it / max(1, sum_t m), rho = pi_k / pi_gen."
    logits, ids, mask, adv, base, gen = group
    lp = logp_of(logits, ids)
    m = mask.double()
    d = (gen - base) * m
    d_bar = d.sum() / m.sum().clamp_min(1)
    A_t = adv[:, None] * m + kl * m * (d_bar - d)
    expected = -(m * torch.exp(lp - gen) * A_t).sum(-1) / m.sum(-1).clamp_min(1)
    got = adapter_pg_loss(lp, adv, mask, logp_gen=gen, logp_base=base,
                          cfg=UpdateConfig(kl_coef=kl, clip_eps=None, ratio_to="generator", kl_group_centred=True))
    assert torch.allclose(got, expected, rtol=1e-12, atol=1e-12)


@FEW
@given(groups(), st.floats(0.01, 0.9))
def test_clip_is_pessimistic(group, eps):
    logits, ids, mask, adv, base, gen = group
    lp = logp_of(logits, ids)
    adv_t = kl_token_advantages(adv, mask, gen, base, kl_coef=0.05)
    clipped = clipped_surrogate(lp, gen, adv_t, mask, clip_eps=eps)
    plain = clipped_surrogate(lp, gen, adv_t, mask, clip_eps=None)
    assert (clipped <= plain + 1e-12).all()
    rho = torch.exp(lp - gen)
    inside = mask.bool() & (rho >= 1 - eps) & (rho <= 1 + eps)
    assert torch.equal(clipped[inside], plain[inside])


@FEW
@given(groups())
def test_masked_positions_do_not_matter(group):
    logits, ids, mask, adv, base, gen = group
    junk = lambda x: torch.where(mask.bool(), x, torch.full_like(x, float("nan")))
    lp = logp_of(logits, ids)
    ref = UpdateConfig(ratio_to="generator", kl_group_centred=True, kl_coef=0.1)
    clean = adapter_pg_loss(lp, adv, mask, lp, base, gen, cfg=ref)
    dirty = adapter_pg_loss(lp, adv, mask, junk(lp), junk(base), junk(gen), cfg=ref)
    assert torch.equal(clean, dirty)
    assert torch.equal(token_mean(junk(lp), mask), token_mean(lp, mask))
    assert torch.equal(kl_token_advantages(adv, mask, kl_coef=0.0), torch.where(mask.bool(), adv[:, None], torch.zeros(())))


@FEW
@given(groups(), st.sampled_from([0.2, None]), st.sampled_from([0.0, 0.01, 0.5]), st.integers(0, 2**31 - 1))
def test_tapered_matches_its_formula(group, eps, kl, seed):
    "TOPR: L_i = -sum_t m w s / max(1, sum_t m), w = min(pi_k,old / pi_gen, 1) on another member's rollouts with A_i < 0, else 1."
    logits, ids, mask, adv, base, gen = group
    g = torch.Generator().manual_seed(seed)
    off = torch.randint(2, adv.shape, generator=g).bool()                       # which rollouts another member generated
    old = logp_of(logits, ids) - 0.3 * torch.rand(logits.shape[:2], generator=g, dtype=torch.float64)   # rho != 1
    cfg = UpdateConfig(shared_negatives="tapered", clip_eps=eps, kl_coef=kl)
    z1, z2 = logits.clone().requires_grad_(True), logits.clone().requires_grad_(True)
    got = adapter_pg_loss(logp_of(z1, ids), adv, mask, old, base, gen, cfg, GroupPart(off_policy=off))
    m = mask.double()
    w = torch.where((off & (adv < 0))[:, None], torch.minimum(torch.exp(old - gen), torch.ones(())), torch.ones(()))
    A_t = adv[:, None] - kl * (old - base)
    rho = torch.exp(logp_of(z2, ids) - old)
    s = rho * A_t if eps is None else torch.minimum(rho * A_t, rho.clamp(1 - eps, 1 + eps) * A_t)
    expected = -(m * w * s).sum(-1) / m.sum(-1).clamp_min(1)
    assert torch.allclose(got, expected, rtol=1e-12, atol=1e-12)
    got.sum().backward(); expected.sum().backward()
    assert torch.allclose(z1.grad, z2.grad, rtol=1e-12, atol=1e-12)
    plain = adapter_pg_loss(logp_of(logits, ids), adv, mask, old, base, gen, UpdateConfig(clip_eps=eps, kl_coef=kl))
    same = ~(off & (adv < 0))                                                    # untapered rollouts: the paper's loss, bit for bit
    assert torch.equal(adapter_pg_loss(logp_of(logits, ids), adv, mask, old, base, gen, cfg, GroupPart(off_policy=off))[same], plain[same])


@FEW
@given(groups(), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_drop_trains_on_own_and_positive_rows(group, K, seed):
    "'drop': adapter k's rows are the kept rollouts it generated or with A_i > 0; its share is the 'all' term on them over N_k."
    logits, ids, mask, adv, base, _ = group
    G = adv.numel()
    g = torch.Generator().manual_seed(seed)
    gens, keep = torch.randint(K, (G,), generator=g), torch.randint(2, (G,), generator=g).bool()
    rows = training_rows(keep, gens, K, advantages=adv, shared_negatives="drop")
    lp = logp_of(logits, ids)
    per = adapter_pg_loss(lp, adv, mask, lp, base)                              # (G,) L_i
    for k in range(K):
        left = [i for i in range(G) if keep[i] and (gens[i] == k or adv[i] > 0)]
        assert rows[k].nonzero().flatten().tolist() == left
        expected = sum((per[i] for i in left), torch.zeros((), dtype=per.dtype)) / (K * max(len(left), 1))
        assert torch.allclose(adapter_loss_term(per, rows[k], len(left), K), expected, rtol=1e-12, atol=1e-15)
    if K == 1: assert torch.equal(rows, training_rows(keep, gens, 1))          # one adapter: every rollout is its own


@FEW
@given(st.lists(st.integers(1, 6), min_size=1, max_size=5), st.integers(1, 4), st.integers(1, 7), st.integers(0, 2**31 - 1))
def test_subsample_keeps_positions_0_n_2n(widths, K, every, seed):
    "Each adapter keeps the rows at positions 0, n, 2n, ... of its rows in the epoch's order (groups, then rollouts)."
    g = torch.Generator().manual_seed(seed)
    rows = [torch.randint(2, (K, w), generator=g).bool() for w in widths]
    kept = subsample_rows(rows, every)
    for k in range(K):
        order = [(j, i) for j, r in enumerate(rows) for i in range(r.shape[1]) if r[k, i]]
        assert [(j, i) for j, r in enumerate(kept) for i in range(r.shape[1]) if r[k, i]] == order[::every]
