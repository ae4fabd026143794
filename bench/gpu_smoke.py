"""GPU smoke test and throughput: the tiny preset trained on the GPU, and one scoring pass at paper-scale vocabulary.

    python bench/gpu_smoke.py                 # on a machine with a CUDA GPU: two tiny epochs, then the scoring pass
    python bench/gpu_smoke.py --quick         # one epoch of two groups and a shorter scoring pass
    python bench/gpu_smoke.py --device cpu    # the same code path on the CPU (slow; what the test suite runs, --quick)

Without a CUDA device and without `--device cpu` it says so and exits 0 (`make bench` runs it everywhere).

1. Training: `make_config(task, "ugttt", "tiny")` with `policy.device` = the device, trained by `ugttt.trainer.train`
   for two epochs into a temporary run directory. Per epoch: seconds, and generated tokens per second of the
   generation phase (the epoch record's `train/gen/num_tokens` mean times its rollouts, over `time/rollout`).
2. Scoring at paper scale: `ugttt.uncertainty.ensemble_token_scores`, the chunked kernel the trainer uses, on K = 5
   members, Qwen3's vocabulary V = 151,936 and hidden size D = 4096 (Qwen3-8B), bfloat16 hidden states and LM head
   as on the paper's GPU, for T positions, timed after a warm-up, next to the bare LM-head matmul of the same positions
   (anchor). What MI adds over the matmul is the figure the paper's App. D bounds ("Chunked MI and base-logprob
   scoring"). On the CPU the hidden size is cut to 256 so that the pass takes seconds.
"""
import argparse, sys, tempfile, time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import record  # noqa: E402  (bench/ is this script's directory)

K, V = 5, 151_936


def sync(device: str) -> None:
    "Wait for the device's queued work (timings on CUDA are otherwise launch times)."
    if device.startswith("cuda"): torch.cuda.synchronize()


def train_epochs(device: str, task: str, epochs: int, groups: int) -> list[dict]:
    "Train the tiny UG-TTT preset on `device`; the per-epoch metric records."
    from ugttt.presets import make_config
    from ugttt.trainer import train
    cfg = make_config(task, "ugttt", "tiny", epochs=epochs, groups_per_epoch=groups, decode_groups=groups,
                      **{"policy.device": device})
    with tempfile.TemporaryDirectory() as tmp:
        return train(cfg, Path(tmp) / "run", progress=False)


def scoring_pass(device: str, T: int, D: int, chunk: int, reps: int) -> dict:
    "Median seconds of ensemble_token_scores and of the bare LM-head matmul over T positions, K members, vocabulary V."
    import torch.nn.functional as F
    from ugttt.uncertainty import ensemble_token_scores
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    g = torch.Generator(device=device).manual_seed(0)
    hidden = torch.randn(K, T, D, generator=g, device=device, dtype=dtype)                       # (K, T, D)
    weight = (torch.randn(V, D, generator=g, device=device, dtype=dtype) * D ** -0.5).to(dtype)  # (V, D)
    tokens = torch.randint(0, V, (T,), generator=g, device=device)                               # (T,)

    def matmul():
        with torch.no_grad():
            for s in range(0, T, chunk): F.linear(hidden[:, s:s + chunk], weight)                 # (K, c, V)

    def mi(): ensemble_token_scores(hidden, weight, tokens, chunk_size=chunk)

    out = {}
    for name, f in (("matmul", matmul), ("mi", mi)):
        f(); sync(device)                                                                        # warm-up
        times = []
        for _ in range(reps):
            t = time.perf_counter(); f(); sync(device); times.append(time.perf_counter() - t)
        out[name] = sorted(times)[len(times) // 2]
    if device.startswith("cuda"): out["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    ap.add_argument("--quick", action="store_true", help="one epoch of two groups; fewer scoring positions")
    ap.add_argument("--task", default="cp26", help="task of the training part (default cp26)")
    ap.add_argument("--T", type=int, default=None, help="scoring positions (default 8192 on CUDA, 512 on CPU; quick: a quarter)")
    ap.add_argument("--chunk", type=int, default=256, help="LM-head positions per chunk (paper App. D: 256)")
    a = ap.parse_args()
    device = a.device or ("cuda" if torch.cuda.is_available() else None)
    if device is None:
        print("gpu_smoke: no CUDA device here; nothing measured (run it on a GPU machine, or pass --device cpu)")
        return 0
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_smoke: --device cuda asked for, but torch sees no CUDA device", file=sys.stderr); return 2
    cuda = device.startswith("cuda")
    name = torch.cuda.get_device_name(0) if cuda else "CPU"
    epochs, groups = (1, 2) if a.quick else (2, 8)
    T = a.T or ((8192 if cuda else 512) // (4 if a.quick else 1))
    D = 4096 if cuda else 256
    print(f"gpu_smoke on {name} ({device}), torch {torch.__version__}")

    t = time.perf_counter()
    records = train_epochs(device, a.task, epochs, groups)
    print(f"\n1. tiny preset, ugttt on {a.task}, {groups} groups x 8 rollouts per epoch: {time.perf_counter() - t:.1f} s in all "
          "(model load and sandbox start included)")
    for r in records:
        tokens = r["train/gen/num_tokens/mean"] * r["train/num_rollouts_total"]
        tps = tokens / r["time/rollout"]
        print(f"   epoch {r['progress/epoch'] + 1}: {r['time/total']:.1f} s (generate {r['time/rollout']:.1f}, verify "
              f"{r['time/verify']:.1f}, score {r['time/score']:.1f}, update {r['time/train']:.1f}); {tps:.0f} generated "
              f"tokens/s; R_max {r['train/reward/exec/best']:.4f}, correct {r['train/correctness/rate']:.0%}")
    last = records[-1]
    record("gpu_smoke.py", f"tiny epoch on {name}, {groups} groups", last["time/total"], "s")
    record("gpu_smoke.py", f"tiny generation on {name}",
           last["train/gen/num_tokens/mean"] * last["train/num_rollouts_total"] / last["time/rollout"], "tokens/s")

    s = scoring_pass(device, T, D, a.chunk, reps=3 if a.quick else 5)
    print(f"\n2. scoring pass, K = {K}, V = {V:,}, D = {D}, T = {T}, chunk {a.chunk}, "
          f"{'bfloat16' if cuda else 'float32'}: ensemble_token_scores {s['mi'] * 1e3:.1f} ms "
          f"({T / s['mi']:,.0f} positions/s), bare LM-head matmul {s['matmul'] * 1e3:.1f} ms; MI adds "
          f"{100 * (s['mi'] / s['matmul'] - 1):.0f}% to the matmul" + (f"; peak {s['peak_gib']:.1f} GiB" if cuda else ""))
    record("gpu_smoke.py", f"MI scoring at V={V:,}, D={D}, K={K}, T={T} on {name}", T / s["mi"], "positions/s",
           "the bare LM-head matmul", T / s["matmul"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
