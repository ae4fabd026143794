"""Peak memory and time of one update step (`ugttt.update.update_epoch`) of the K-LoRA ensemble on the embedded model,
`PolicyConfig.preset("tiny")`, for train_batch 1 vs 8 and chunk_size 16 vs 256.

Setting: one group of G rollouts of the CP26 compact root prompt (`generate_group`), scored by all K adapters with
base log-probs (`score_rollouts`), synthetic rewards (seeded, not constant: the verifier's scores do not change the
update's memory), `group_advantages` with `UpdateConfig()` (the paper's defaults: MI shaping, KL, NNM), one AdamW per
adapter (`make_optimizers`). The step is the epoch's sequential per-adapter forward/backward, the NNM backward and
the K optimiser steps. Step 1 is cold: it also creates AdamW's state (two fp32 copies of every adapter tensor) and
pays one-time library initialisation (autograd, checkpointing, kernels); step 2 and later are the steady state.

Method. Every configuration runs in a fresh process (multiprocessing, 'spawn'), so that the allocator's cached pages
and the high-water mark of an earlier configuration (or of the generation and scoring before the step) cannot hide
or inflate this one. In the child, right before each step: gc, glibc's malloc_trim(0) (free heap pages go back to the
OS, so memory cached by step 1 is counted again in step 2), read VmRSS (/proc/self/status) as the baseline, reset
the peak-RSS counter VmHWM to the current RSS by writing "5" to /proc/self/clear_refs (Linux >= 4.0); after the step:
peak extra RSS = VmHWM - baseline. Where clear_refs cannot be written, resource.getrusage's ru_maxrss growth over the
step is used (a lower bound when setup peaked higher; the method is printed). With CUDA available the ensemble runs
on the GPU and torch.cuda.max_memory_allocated over the step (after reset_peak_memory_stats) is printed as well.
The CPU may be shared: times are indicative.

Usage: python bench/update_memory.py [--quick] [--threads 1] [--K 3] [--G 8] [--train-batch 1 8] [--chunk 16 256]
"""
import argparse, ctypes, gc, itertools, multiprocessing as mp, os, resource, sys, time
from pathlib import Path
from peak_rss import reset_peak, status_kib   # bench/ is the script's directory, first on sys.path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
ROOT = str(Path(__file__).resolve().parents[1])
sys.path.insert(0, ROOT)


def _malloc_trim() -> None:
    "Hand the C heap's free pages back to the OS (glibc), so that pages cached by an earlier step cannot hide this one's peak."
    try: ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError): pass


def _measured_step(step, cuda: bool) -> dict:
    "Run step() once: wall seconds, peak extra RSS (MiB) and, on CUDA, peak extra allocated GPU memory (MiB)."
    import torch
    gc.collect(); _malloc_trim()
    if cuda: torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats(); gpu0 = torch.cuda.memory_allocated()
    base, hwm = status_kib("VmRSS"), reset_peak()
    ru0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    out = step()
    if cuda: torch.cuda.synchronize()
    secs = time.perf_counter() - t
    extra = (status_kib("VmHWM") - base) if hwm else (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - ru0)
    res = dict(secs=secs, rss_mib=extra / 1024, method="VmHWM reset via clear_refs" if hwm else "ru_maxrss growth",
               n_kept=out["n_kept"])
    if cuda: res["gpu_mib"] = (torch.cuda.max_memory_allocated() - gpu0) / 2**20
    return res


def child(params: dict, queue) -> None:
    "One configuration in this fresh process: set up a scored group, then measure two update steps."
    sys.path.insert(0, ROOT)
    import torch
    from ugttt.policy import LoRAEnsemble, PolicyConfig
    from ugttt.generation import encode_prompt, generate_group
    from ugttt.scores import score_rollouts
    from ugttt.tasks import get_task
    from ugttt.update import GroupUpdate, UpdateConfig, group_advantages, make_optimizers, update_epoch
    torch.set_num_threads(params["threads"])
    torch.manual_seed(params["seed"])
    cuda = torch.cuda.is_available()
    cfg = PolicyConfig.preset("tiny", n_adapters=params["K"], seed=params["seed"], train_batch=params["train_batch"],
                              chunk_size=params["chunk"], device="cuda" if cuda else "cpu")
    ens = LoRAEnsemble.from_config(cfg)
    prompt = encode_prompt(ens, get_task("cp26").prompt(None, style="compact"))
    gen = torch.Generator(device=ens.device).manual_seed(params["seed"])
    rollouts = generate_group(ens, prompt, params["G"], generator=gen)
    scores = score_rollouts(ens, rollouts, base=True)
    ucfg = UpdateConfig()
    rewards = torch.rand(params["G"], generator=torch.Generator().manual_seed(params["seed"]))   # (G,) synthetic, not constant
    adv = group_advantages(rewards, scores.uncertainty, ucfg)
    groups = [GroupUpdate(rollouts, scores, adv["shaped"], adv["keep"])]
    opts = make_optimizers(ens, ucfg)
    steps = [_measured_step(lambda: update_epoch(ens, groups, opts, ucfg), cuda) for _ in range(params["steps"])]
    queue.put(dict(steps=steps, tokens=int(rollouts.attention_mask.sum()), width=rollouts.input_ids.shape[1],
                   threads=torch.get_num_threads(), cuda=cuda))


def measure(params: dict) -> dict:
    "Run `child` in a fresh spawned process and return its result."
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(params, q))
    p.start()
    res = q.get()
    p.join()
    if p.exitcode: raise RuntimeError(f"measurement {params} failed with exit code {p.exitcode}")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a short run: train_batch 8 with chunk_size 16 and 256, G = 4")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads in every child")
    ap.add_argument("--K", type=int, default=3, help="adapters (the tiny preset: 3)")
    ap.add_argument("--G", type=int, default=8, help="rollouts in the group")
    ap.add_argument("--train-batch", type=int, nargs="+", default=[1, 8], help="sequences per training forward")
    ap.add_argument("--chunk", type=int, nargs="+", default=[16, 256], help="LM-head positions per chunk")
    ap.add_argument("--steps", type=int, default=2, help="update steps measured per configuration (step 1 creates AdamW state)")
    ap.add_argument("--seed", type=int, default=0, help="seeds the adapters, sampling and the synthetic rewards")
    args = ap.parse_args()
    if args.quick: args.train_batch, args.G = [8], 4
    rows = []
    for tb, chunk in itertools.product(args.train_batch, args.chunk):
        r = measure(dict(threads=args.threads, K=args.K, G=args.G, train_batch=tb, chunk=chunk, steps=args.steps, seed=args.seed))
        rows.append((tb, chunk, r))
    r0 = rows[0][2]
    print(f"update memory bench: embedded model (preset tiny, float32, {'CUDA' if r0['cuda'] else 'CPU'}), threads = "
          f"{r0['threads']}, K = {args.K}, one group of G = {args.G} (the same rollouts in every configuration: "
          f"{r0['tokens']} tokens, padded width {r0['width']}), seed = {args.seed}")
    gpu = r0["cuda"]
    print(f"\n{'train_batch':>11} {'chunk_size':>10} {'step':>4} | {'peak extra RSS':>14} {'time':>8}"
          + (f" | {'peak extra GPU':>14}" if gpu else "") + " | kept")
    for tb, chunk, r in rows:
        for i, s in enumerate(r["steps"], 1):
            print(f"{tb:>11} {chunk:>10} {i:>4} | {s['rss_mib']:10.1f} MiB {s['secs']:7.2f}s"
                  + (f" | {s['gpu_mib']:10.1f} MiB" if gpu else "") + f" | {s['n_kept']}")
    print(f"\nmemory method: {r0['steps'][0]['method']}, each configuration in a fresh spawned process; "
          "step 1 is cold (AdamW state, one-time library initialisation); later steps are the steady state")
    from report import record
    by = {(tb, chunk): r for tb, chunk, r in rows}
    tb, lo, hi = min(args.train_batch), min(args.chunk), max(args.chunk)
    if lo != hi:   # the chunked LM head: peak memory of a steady-state step at a small chunk against a large one
        record("update_memory.py", f"update step: peak extra RSS, chunk_size {lo}, train_batch {tb}", by[tb, lo]["steps"][-1]["rss_mib"],
               "MiB", f"chunk_size {hi}", by[tb, hi]["steps"][-1]["rss_mib"])
    record("update_memory.py", f"update step: time, K={args.K}, G={args.G}, train_batch {tb}, chunk_size {hi}",
           by[tb, hi]["steps"][-1]["secs"], "s")


if __name__ == "__main__":
    main()
