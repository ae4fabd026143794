"""Why ugttt.uncertainty works in place: on a CPU, writing into a fresh (K, chunk, V) float32 tensor costs more than
computing on one that already exists, because the operating system zero-fills every fresh page on first touch.

Setting: K = 5 members, a chunk of 256 positions, Qwen3's vocabulary V = 151,936 (paper App. D, "Chunked MI and
base-logprob scoring"): one (K, chunk, V) float32 tensor is 0.78 GB. Measured, best of --reps runs each:
1. `torch.exp(x)` into a fresh tensor, against `torch.exp(x, out=buf)` into a preallocated one;
2. `x.log_softmax(-1)` (allocates its result and temporaries), against the in-place `_log_softmax_(x, scratch)`.

Usage: python bench/inplace_buffers.py [--K 5] [--chunk 256] [--V 151936] [--reps 3] [--threads 2]
Peak memory is about four such tensors (3.1 GB at the default sizes); pass a smaller --V on a small machine.
The CPU is shared, so times are indicative.
"""
import argparse
import time

import torch


def best_of(reps: int, f) -> float:
    "The shortest wall time of `reps` calls of f(), in seconds."
    times = []
    for _ in range(reps):
        t0 = time.perf_counter(); f(); times.append(time.perf_counter() - t0)
    return min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--K", type=int, default=5, help="ensemble members")
    ap.add_argument("--chunk", type=int, default=256, help="positions per chunk")
    ap.add_argument("--V", type=int, default=151_936, help="vocabulary size")
    ap.add_argument("--reps", type=int, default=3, help="repetitions; the best is reported")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from ugttt.uncertainty import _log_softmax_

    shape = (args.K, args.chunk, args.V)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))      # (K, chunk, V) logits
    buf, scratch = torch.empty_like(x), torch.empty_like(x)                 # preallocated, touched once below
    buf.zero_(); scratch.zero_()
    gb = x.numel() * 4 / 1e9
    print(f"(K, chunk, V) = {shape}, float32: {gb:.2f} GB per tensor, {args.threads} threads, best of {args.reps}")

    fresh = best_of(args.reps, lambda: torch.exp(x))
    reused = best_of(args.reps, lambda: torch.exp(x, out=buf))
    print(f"exp into a fresh tensor        {fresh:7.3f} s")
    print(f"exp into a preallocated tensor {reused:7.3f} s   ({fresh / reused:.1f}x faster)")

    naive = best_of(args.reps, lambda: x.log_softmax(-1))
    inplace = best_of(args.reps, lambda: _log_softmax_(buf.copy_(x), scratch))
    print(f"log_softmax, allocating        {naive:7.3f} s")
    print(f"_log_softmax_, in place        {inplace:7.3f} s   (includes copying the logits into the buffer)")
    from report import record
    record("inplace_buffers.py", f"exp into a preallocated (K, chunk, V) buffer", reused, "s", "a fresh tensor", fresh)
    record("inplace_buffers.py", f"in-place log-softmax of (K, chunk, V)", inplace, "s", "torch log_softmax", naive)


if __name__ == "__main__":
    main()
