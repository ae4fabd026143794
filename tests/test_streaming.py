"""Properties of ugttt.streaming (paper App. F) against naive Python versions: the window, its mean, the check
schedule, the percentile gate on its own history, the history's JSON round trip and the truncated-rollout mask."""
import json
import math
import torch
from hypothesis import given, settings, strategies as st
from ugttt.streaming import (StreamingConfig, window_mask, window_mi, is_check_step, percentile_threshold,
                             gate_stops, StreamingHistory, truncated_rollout_mask)

FEW = settings(max_examples=60, deadline=None, derandomize=True)
masks = st.lists(st.booleans(), min_size=1, max_size=40)


@FEW
@given(masks, st.integers(1, 12), st.one_of(st.none(), st.integers(0, 45)), st.data())
def test_window_is_the_last_w_thinking_tokens(mask, W, upto, data):
    mi = data.draw(st.lists(st.floats(0, 5), min_size=len(mask), max_size=len(mask)))
    think = [t for t, b in enumerate(mask) if b]
    kept = think[: upto] if upto is not None else think
    expected = kept[-W:] if kept else []
    got = window_mask(torch.tensor(mask), W, upto).nonzero().flatten().tolist()
    assert got == expected
    mean = sum(mi[t] for t in expected) / len(expected) if expected else 0.0
    assert math.isclose(window_mi(torch.tensor(mi, dtype=torch.float64), torch.tensor(mask), W, upto=upto).item(),
                        mean, rel_tol=1e-12, abs_tol=1e-12)


@FEW
@given(st.integers(1, 50), st.one_of(st.none(), st.integers(1, 20)))
def test_check_schedule(min_tokens, interval):
    cfg = StreamingConfig(min_tokens=min_tokens, interval=interval)
    got = [n for n in range(200) if is_check_step(n, cfg)]
    expected = [min_tokens] if interval is None else list(range(min_tokens, 200, interval))
    assert got == expected


@FEW
@given(st.lists(st.floats(0, 1), min_size=1, max_size=50), st.floats(0, 100))
def test_gate_on_its_own_history_fires_at_most_p_percent(history, p):
    "With linear interpolation at most floor(p (n-1) / 100) + 1 values lie strictly below the p-th percentile."
    thr = percentile_threshold(history, p)
    fired = sum(gate_stops(h, thr, epoch=3) for h in history)
    assert fired == sum(h < thr for h in history)
    assert fired <= math.floor(p * (len(history) - 1) / 100) + 1
    assert not any(gate_stops(h, thr, epoch=2) for h in history)       # warm-up
    assert sorted(history)[0] >= thr or fired >= 1                     # something below the threshold fires


@FEW
@given(st.lists(st.lists(st.floats(0, 1), max_size=5), max_size=4))
def test_history_round_trip(epochs):
    h = StreamingHistory()
    for vals in epochs:
        h.add(vals); h.end_epoch()
    h.add([0.5])
    back = StreamingHistory.from_dict(json.loads(json.dumps(h.to_dict())))
    assert back == h and back.epoch == len(epochs)
    assert back.threshold(25) == percentile_threshold([v for vals in epochs for v in vals], 25)


@FEW
@given(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5), st.integers(0, 5))
def test_truncated_mask_segments(P, n_think, n_forced, n_code):
    m = truncated_rollout_mask(P, n_think, n_forced, n_code).tolist()
    assert m == [False] * P + [True] * n_think + [False] * n_forced + [True] * n_code
