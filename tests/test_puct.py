"""PUCT sampler on random search trees: the backed-up statistics, lineage blocking, pruning and checkpoints against
counts kept independently of the sampler."""
import json
import math

from hypothesis import given, settings, strategies as st

from ugttt.puct import PUCTSampler, lineages, puct_scores, rank_prior, value_scale
from ugttt.tasks import State


def _child(value, tag):
    "A CP26 child worth `value` whose construction is identified by `tag` (equal tags are duplicates)."
    return State(code=f"# {tag}", construction=[[0.5, 0.5, 0.1], [float(tag), 0.0, 0.0]], bound=value, reward=value)


def _line(parent_of, i):
    "i and its ancestors, from the parent map kept by the test."
    out = [i]
    while parent_of.get(out[-1]) is not None: out.append(parent_of[out[-1]])
    return out


outcome = st.one_of(st.none(), st.integers(0, 6).map(float))   # small integers: ties between values are common


@settings(max_examples=40, deadline=None)
@given(backup=st.sampled_from(["ttt_discover", "reference"]), n_roots=st.integers(1, 3), G=st.integers(1, 4),
       k=st.integers(1, 4), max_buffer=st.integers(3, 8), data=st.data())
def test_random_search(backup, n_roots, G, k, max_buffer, data):
    sp = PUCTSampler("cp26", n_roots=n_roots, group_size=G, max_buffer=max_buffer, backup=backup)
    parent_of = {i: None for i in sp.initial_ids}
    groups = []                                         # (line, outcomes) of every update
    tag = 0
    for epoch in range(4):
        # the first parent has the highest score, recomputed here from the public pieces
        ids = [nd.id for nd in sp.nodes]
        values = [nd.value for nd in sp.nodes]
        visits = [sp.n.get(i, 0) for i in ids]
        best = [sp.m.get(nd.id, nd.value) for nd in sp.nodes]
        G_eff = 1 if backup == "reference" else G
        scores = puct_scores(values, visits, best, rank_prior(values),
                             value_scale(values, [i in sp.initial_ids for i in ids]), sp.T, 1.0, G_eff)
        picked = sp.sample(k)
        assert 1 <= len(picked) <= k
        assert math.isclose(sp.last_sample[0]["score"], max(scores))
        # pairwise unrelated, and nothing left unpicked that could have been taken
        lin = lineages({nd.id: [p["id"] for p in nd.parents] for nd in sp.nodes})
        for a in picked:
            for b in picked:
                if a is not b: assert b.id not in lin[a.id]
        if len(picked) < k:
            assert all(any(nd.id in lin[p.id] for p in picked) for nd in sp.nodes)
        for g, par in enumerate(picked):
            outs = data.draw(st.lists(outcome, min_size=G, max_size=G))
            kids = []
            for y in outs:
                dup = data.draw(st.booleans()) and tag > 0
                kids.append(None if y is None else _child(y, tag - 1 if dup else tag))
                tag += 0 if dup else 1
            admitted = sp.update(par, kids, [epoch * 1000 + g * G + j for j in range(G)])
            assert len(admitted) <= sp.topk_children
            for nd in admitted:
                parent_of[nd.id] = par.id
                assert [p["id"] for p in nd.parents] == _line(parent_of, par.id)
            groups.append((_line(parent_of, par.id), outs))
        snap = json.loads(json.dumps(sp.flush(epoch)))
        # pruning: roots kept, at most topk children per parent, cap respected
        kept = [s["id"] for s in snap["states"]]
        assert set(sp.initial_ids) <= set(kept) and len(kept) <= max(max_buffer, n_roots)
        firsts = [s["parents"][0]["id"] for s in snap["states"] if s["parents"]]
        assert all(firsts.count(p) <= sp.topk_children for p in set(firsts))
        keys = [json.dumps(s["construction"]) for s in snap["states"] if s["construction"]]
        assert len(keys) == len(set(keys))                               # no duplicate constructions
        # statistics against the counts kept here
        n, m, T = {}, {}, 0
        for line, outs in groups:
            ok = [y for y in outs if y is not None]
            count = len(outs) if backup == "ttt_discover" else len(outs) - len(ok) + (1 if ok else 0)
            T += count
            for a in line: n[a] = n.get(a, 0) + count
            for a in (line if backup == "ttt_discover" else line[:1]):
                if ok: m[a] = max(m.get(a, -math.inf), max(ok))
        assert (sp.n, sp.m, sp.T) == (n, m, T)
        # an exact checkpoint
        again = PUCTSampler.from_dict(json.loads(json.dumps(sp.to_dict())))
        assert again.to_dict() == sp.to_dict()
        assert [nd.id for nd in again.sample(k)] == [nd.id for nd in sp.sample(k)]
