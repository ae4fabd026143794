"""The K LoRA adapters as one batched module (`ugttt.ensemble.StackedLoRAEnsemble`) against today's peft ensemble, side
by side in one run: the time of one KV-cached decode step and one training step.

Models (float32, CPU): the embedded model (`ugttt.default_model`, 4 layers, width 256) and a randomly initialised
36-layer toy Qwen3 (Qwen3-8B's depth and its q/k/v/o targets at width 128, 4 heads of 32, 2 KV heads, vocabulary
2048), so that the per-layer overhead that grows with depth shows on a CPU. Adapters: K = 5, r = 16, alpha = 32 on
q/k/v/o (the paper's settings), B ~ N(0, 0.01^2).
- decode step: batch 8, a 32-token prefill, then `--steps` single-token steps with the KV cache; time per step, for
  (i) peft: the bare base model (no wrapper), one adapter (the active adapter, no `adapter_names`), 5 mixed
  adapters (`adapter_names` round robin, as `ugttt.generation.generate_groups` decodes); (ii) stacked: one adapter
  (index all 0), 5 mixed adapters (index round robin). Also the aten operators per step (a TorchDispatchMode
  counter), which is what dominates at this width.
- training step: K = 5 adapters x N = 8 rollouts of `--T` tokens, LoRA dropout 0.05 on, loss = mean realised-token
  log-prob per block: (i) peft sequential, one forward and backward per adapter (today's path); (ii) stacked
  sequential (the memory-saving option: paper Alg. 1 Stage 5, "Sequential per-adapter backward"); (iii) stacked batched, one forward of the K blocks
  and one backward.
  Also the activation memory a training step keeps for its backward: the bytes of the distinct storages autograd
  saves (`saved_tensors_hooks`), frozen weights excluded; for the sequential paths, the largest of the K backwards.
Every repetition runs every variant once, in an order that rotates between repetitions; printed are medians.
The CPU may be shared: read the ratios, not the absolutes.

Usage: python bench/ensemble_batched.py [--quick] [--threads 1] [--reps 5] [--steps 16] [--T 64]
"""
import argparse, os, statistics, sys, time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch
from torch.utils._python_dispatch import TorchDispatchMode

K, R, ALPHA, TARGETS, BATCH, PREFILL = 5, 16, 32.0, ("q_proj", "k_proj", "v_proj", "o_proj"), 8, 32


class OpCounter(TorchDispatchMode):
    "Counts the aten operators dispatched inside the block."
    def __init__(self): super().__init__(); self.n = 0
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def toy_qwen3(seed: int):
    "A random 36-layer Qwen3 causal LM of width 128, float32."
    from transformers import Qwen3Config, Qwen3ForCausalLM
    torch.manual_seed(seed)
    c = Qwen3Config(vocab_size=2048, hidden_size=128, intermediate_size=256, num_hidden_layers=36, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=32, max_position_embeddings=512, tie_word_embeddings=True)
    return Qwen3ForCausalLM(c).eval()


def peft_ensemble(model, seed: int):
    "Today's ensemble: K peft LoRA adapters named adapter_k, initialised as ugttt.policy.init_adapters does."
    from peft import LoraConfig, get_peft_model
    from ugttt.policy import peft_deprecation_silenced
    names = [f"adapter_{k}" for k in range(K)]
    lora = LoraConfig(r=R, lora_alpha=ALPHA, lora_dropout=0.05, target_modules=list(TARGETS), task_type="CAUSAL_LM")
    for p in model.parameters(): p.requires_grad_(False)
    with peft_deprecation_silenced(): pm = get_peft_model(model, lora, adapter_name=names[0])
    for n in names[1:]: pm.add_adapter(n, lora)
    with torch.no_grad():
        for m in pm.modules():
            if hasattr(m, "lora_B") and isinstance(getattr(m, "lora_B"), torch.nn.ModuleDict):
                for n in names: m.lora_B[n].weight.normal_(0.0, 0.01)
    return pm.eval(), names


def decode_time(forward, steps: int, vocab: int, seed: int, count_ops: bool = False):
    "Seconds per decode step (batch 8, 32-token prefill, then `steps` steps with the KV cache) and ops per step."
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (BATCH, PREFILL), generator=g)
    nxt = torch.randint(3, vocab, (BATCH, steps), generator=g)
    with torch.no_grad():
        out = forward(ids, torch.ones(BATCH, PREFILL, dtype=torch.long), None)
        past, ops, t = out.past_key_values, 0, time.perf_counter()
        for s in range(steps):
            am = torch.ones(BATCH, PREFILL + s + 1, dtype=torch.long)
            if count_ops and s == steps - 1:
                with OpCounter() as c: out = forward(nxt[:, s:s + 1], am, past)
                ops = c.n
            else: out = forward(nxt[:, s:s + 1], am, past)
            past = out.past_key_values
        dt = time.perf_counter() - t
    return dt / steps, ops


def train_step(run, model, T: int, vocab: int, seed: int) -> float:
    "Seconds of one training step (K x N rollouts of T tokens) through `run`, gradients zeroed before."
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (BATCH, T), generator=g)
    model.zero_grad(set_to_none=True)
    t = time.perf_counter()
    run(ids)
    return time.perf_counter() - t


def saved_mib(loss_fn, frozen: set) -> float:
    "MiB of the distinct tensor storages autograd saves for the backward of loss_fn(), storages in `frozen` excluded."
    seen = {}
    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in frozen: seen[st.data_ptr()] = st.nbytes()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t): loss = loss_fn()
    loss.backward()
    return sum(seen.values()) / 2**20


def block_loss(logits, ids):
    "Minus the mean realised-token log-prob of a block of rows."
    return -torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None]).mean()


def bench_model(label, make_model, args, record):
    "All variants on one model: a table and the headline records."
    from ugttt.ensemble import StackedLoRAEnsemble
    bare = make_model()
    pm, names = peft_ensemble(make_model(), args.seed)
    st = StackedLoRAEnsemble(make_model(), n_adapters=K, rank=R, alpha=ALPHA, target_modules=TARGETS, seed=args.seed)
    vocab = bare.config.vocab_size
    rr = torch.arange(BATCH) % K                                                 # round robin
    mixed = [names[k] for k in rr.tolist()]
    dec = {
        "peft base (bare model)": lambda x, am, past: bare(input_ids=x, attention_mask=am, past_key_values=past, use_cache=True),
        "peft 1 adapter": lambda x, am, past: pm(input_ids=x, attention_mask=am, past_key_values=past, use_cache=True),
        "peft 5 mixed": lambda x, am, past: pm(input_ids=x, attention_mask=am, past_key_values=past, use_cache=True,
                                               adapter_names=mixed),
        "stacked 1 adapter": lambda x, am, past: st(x, 0, attention_mask=am, past_key_values=past, use_cache=True),
        "stacked 5 mixed": lambda x, am, past: st(x, rr, attention_mask=am, past_key_values=past, use_cache=True),
    }

    def peft_seq(ids):
        pm.train()
        for n in names:
            pm.set_adapter(n)
            block_loss(pm(input_ids=ids).logits, ids).backward()
        pm.eval()

    def st_seq(ids):
        st.train()
        for k in range(K): block_loss(st(ids, k).logits, ids).backward()
        st.eval()

    def st_batched(ids):
        st.train()
        lg = st(ids.repeat(K, 1), torch.arange(K).repeat_interleave(BATCH)).logits.view(K, BATCH, ids.shape[1], -1)
        sum(block_loss(lg[k], ids) for k in range(K)).backward()
        st.eval()

    trn = {"peft sequential": (peft_seq, pm), "stacked sequential": (st_seq, st), "stacked batched": (st_batched, st)}
    ids = torch.randint(3, vocab, (BATCH, args.T), generator=torch.Generator().manual_seed(args.seed))
    frozen = {p.untyped_storage().data_ptr() for m in (pm, st) for p in m.parameters()}
    def peft_one(k):
        pm.set_adapter(names[k]); pm.train()
        return block_loss(pm(input_ids=ids).logits, ids)
    def st_all():
        st.train()
        lg = st(ids.repeat(K, 1), torch.arange(K).repeat_interleave(BATCH)).logits.view(K, BATCH, ids.shape[1], -1)
        return sum(block_loss(lg[k], ids) for k in range(K))
    def st_one(k):
        st.train()
        return block_loss(st(ids, k).logits, ids)
    mem = {"peft sequential": max(saved_mib(lambda: peft_one(k), frozen) for k in range(K)),
           "stacked sequential": max(saved_mib(lambda: st_one(k), frozen) for k in range(K)),
           "stacked batched": saved_mib(st_all, frozen)}
    pm.eval(); st.eval()
    ops = {k: decode_time(f, 2, vocab, args.seed, count_ops=True)[1] for k, f in dec.items()}   # warm-up + op count
    for f, m in trn.values(): train_step(f, m, 8, vocab, args.seed)                              # warm-up
    dt = {k: [] for k in dec}; tt = {k: [] for k in trn}
    for r in range(args.reps):
        order = list(dec); order = order[r % len(order):] + order[:r % len(order)]
        for k in order: dt[k].append(decode_time(dec[k], args.steps, vocab, args.seed + r)[0])
        order = list(trn); order = order[r % len(order):] + order[:r % len(order)]
        for k in order: tt[k].append(train_step(trn[k][0], trn[k][1], args.T, vocab, args.seed + r))
    d = {k: statistics.median(v) for k, v in dt.items()}
    t = {k: statistics.median(v) for k, v in tt.items()}

    print(f"\n{label}: decode step, batch {BATCH}, KV cache (median of {args.reps} x {args.steps} steps)")
    print(f"  {'variant':<24} {'ms/step':>8} {'ops/step':>9} {'vs peft 1 adapter':>18}")
    for k in dec: print(f"  {k:<24} {1e3 * d[k]:8.2f} {ops[k]:9d} {d[k] / d['peft 1 adapter']:18.2f}")
    print(f"  5 mixed / 1 adapter: peft {d['peft 5 mixed'] / d['peft 1 adapter']:.2f}, stacked "
          f"{d['stacked 5 mixed'] / d['stacked 1 adapter']:.2f}, stacked mixed / peft 1 adapter "
          f"{d['stacked 5 mixed'] / d['peft 1 adapter']:.2f} (target <= 1.3); stacked mixed / bare base "
          f"{d['stacked 5 mixed'] / d['peft base (bare model)']:.2f}")
    print(f"{label}: training step, K = {K} x N = {BATCH} rollouts of {args.T} tokens (median of {args.reps})")
    for k in trn: print(f"  {k:<24} {t[k]:8.3f} s   {t[k] / t['peft sequential']:.2f}x peft sequential   "
                        f"saved activations {mem[k]:7.1f} MiB")

    s = "ensemble_batched.py"
    record(s, f"{label}: decode step, 5 mixed adapters, stacked", 1e3 * d["stacked 5 mixed"], "ms",
           "1 adapter, stacked", 1e3 * d["stacked 1 adapter"])
    record(s, f"{label}: decode step, 5 mixed adapters, stacked", 1e3 * d["stacked 5 mixed"], "ms",
           "1 adapter, peft", 1e3 * d["peft 1 adapter"])
    record(s, f"{label}: decode step, 5 mixed adapters, peft", 1e3 * d["peft 5 mixed"], "ms",
           "1 adapter, peft", 1e3 * d["peft 1 adapter"])
    record(s, f"{label}: training step K=5 x N=8, stacked batched", t["stacked batched"], "s",
           "peft sequential", t["peft sequential"])
    record(s, f"{label}: training step K=5 x N=8, stacked sequential", t["stacked sequential"], "s",
           "peft sequential", t["peft sequential"])
    record(s, f"{label}: saved activations of a training step, stacked batched", mem["stacked batched"], "MiB",
           "stacked sequential (largest adapter)", mem["stacked sequential"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a short run: 2 repetitions, 8 steps, T = 32")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--reps", type=int, default=5, help="repetitions; medians are reported")
    ap.add_argument("--steps", type=int, default=16, help="timed decode steps per repetition")
    ap.add_argument("--T", type=int, default=64, help="tokens per rollout in the training step")
    ap.add_argument("--seed", type=int, default=0, help="adapters and inputs from this seed")
    ap.add_argument("--models", nargs="+", default=["embedded", "toy36"], choices=["embedded", "toy36"])
    args = ap.parse_args()
    if args.quick: args.reps, args.steps, args.T = 2, 8, 32
    torch.set_num_threads(args.threads)
    from report import record
    from ugttt.default_model import load_default_model
    print(f"ensemble batched bench: torch {torch.__version__}, threads = {torch.get_num_threads()}, K = {K}, r = {R}, "
          f"targets = {'/'.join(TARGETS)}, reps = {args.reps}, seed = {args.seed}")
    makers = dict(embedded=lambda: load_default_model()[0], toy36=lambda: toy_qwen3(args.seed))
    for m in args.models: bench_model(m, makers[m], args, record)


if __name__ == "__main__":
    main()
