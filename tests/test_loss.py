"""Properties of ugttt.loss (paper App. A, Eq. 12-13) over random small groups: the ratio-1 gradient is REINFORCE,
the reference's form matches its formula written out independently, the clip is pessimistic, masks are respected."""
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st
from ugttt.loss import token_mean, kl_token_advantages, clipped_surrogate, adapter_pg_loss
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
