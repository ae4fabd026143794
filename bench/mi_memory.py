"""Peak extra memory and time of the chunked ensemble scoring kernel (ugttt.uncertainty.ensemble_token_scores).

Setting: K = 5 members, Qwen3's vocabulary V = 151,936, a small hidden size D = 64 (the LM-head matmul is not what
is measured; the (K, chunk, V) buffers are), chunk_size = 256 (paper App. D, "Implementation notes"), float32.

Method. Every measurement runs in a fresh Python subprocess, so that nothing allocated by an earlier measurement
(the allocator's cached pages, the previous high-water mark) can hide or inflate this one. In the child:
1. build the inputs (hidden states, LM-head weight, tokens) and run the kernel once on 2 positions, so that lazy
   library initialisation is not counted;
2. read the current resident set size (VmRSS in /proc/self/status) as the baseline, then reset the kernel's
   peak-RSS counter VmHWM to the current RSS by writing "5" to /proc/self/clear_refs (Linux >= 4.0);
3. run the kernel, timed with time.perf_counter, and read VmHWM: peak extra memory = VmHWM - baseline.
Where /proc/self/clear_refs cannot be written, the child falls back to resource.getrusage(RUSAGE_SELF).ru_maxrss
read before and after the call (its high-water mark from step 1 is small, since inputs are built in place).
RSS counts pages actually touched, which is what the kernel's float32 buffers do; CPU torch allocates large tensors
with mmap and returns them to the OS when freed, so the peak is the largest set of buffers alive at once.

The naive computation materialises (K, T, V) float32 logits; its size is computed, not allocated, for T = 8192
(about 25 GB). At T = 512, where it fits, naive and chunked are run side by side.

Usage: python bench/mi_memory.py [--T 1024 8192] [--naive-T 512] [--chunk 256] [--D 64]
The CPU is shared, so times are indicative; torch.set_num_threads(2) in every child.
"""
import argparse, json, os, resource, subprocess, sys, time
from peak_rss import reset_peak, status_kib   # bench/ is the script's directory, first on sys.path

K, V = 5, 151_936


def child(T: int, D: int, chunk: int, mode: str) -> dict:
    "One measurement in this (fresh) process: peak extra RSS and wall time of one scoring call."
    import torch
    import torch.nn.functional as F
    from ugttt.uncertainty import ensemble_token_scores, token_mutual_information
    torch.set_num_threads(2)
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(K, T, D, generator=g)                      # (K, T, D)
    weight = torch.randn(V, D, generator=g).mul_(D ** -0.5)         # (V, D)
    tokens = torch.randint(0, V, (T,), generator=g)                 # (T,)

    def naive():
        logits = F.linear(hidden, weight)                                               # (K, T, V) float32
        ell = logits.log_softmax(-1).gather(-1, tokens.expand(K, -1)[..., None])[..., 0]   # (K, T)
        return ell, token_mutual_information(logits)

    run = naive if mode == 'naive' else (lambda: ensemble_token_scores(hidden, weight, tokens, chunk_size=chunk))
    with torch.no_grad(): ensemble_token_scores(hidden[:, :2], weight, tokens[:2], chunk_size=chunk)   # warm-up
    base_kib, hwm = status_kib('VmRSS'), reset_peak()
    ru_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    out = run()
    secs = time.perf_counter() - t0
    if hwm: extra_kib, how = status_kib('VmHWM') - base_kib, 'VmHWM reset via clear_refs'
    else: extra_kib, how = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - ru_before, 'ru_maxrss growth'
    mi = out[1] if mode == 'naive' else out.token_mi
    return dict(T=T, mode=mode, extra_bytes=extra_kib * 1024, secs=secs, method=how, mi_mean=float(mi.mean()))


def measure(T: int, D: int, chunk: int, mode: str) -> dict:
    "Run `child` in a fresh interpreter and return its JSON result."
    env = dict(os.environ, OMP_NUM_THREADS='2', MKL_NUM_THREADS='2')
    cmd = [sys.executable, __file__, '--child', json.dumps(dict(T=T, D=D, chunk=chunk, mode=mode))]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode: raise RuntimeError(f'measurement {mode} T={T} failed:\n{res.stderr}')
    return json.loads(res.stdout.strip().splitlines()[-1])


def gb(b: float) -> str: return f'{b / 1e9:7.3f} GB'


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--T', type=int, nargs='+', default=[1024, 8192])
    ap.add_argument('--naive-T', type=int, default=512)
    ap.add_argument('--chunk', type=int, default=256)
    ap.add_argument('--D', type=int, default=64)
    ap.add_argument('--child')
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(**json.loads(a.child)))); return
    buf = 4 * K * a.chunk * V
    print(f'K={K}  V={V:,}  D={a.D}  chunk_size={a.chunk}  float32  torch threads=2')
    print(f'one (K, chunk, V) float32 buffer: {gb(buf)}   (the kernel keeps 2 + 2/K = {2 + 2 / K:.1f} of them alive at its peak)')
    print('\nchunked kernel (ensemble_token_scores): extra memory should not grow with T')
    print(f'{"T":>6} {"peak extra":>12} {"x buffer":>9} {"time":>9} {"naive (K,T,V) fp32 logits":>27}')
    for T in a.T:
        r = measure(T, a.D, a.chunk, 'chunked')
        print(f'{T:>6} {gb(r["extra_bytes"]):>12} {r["extra_bytes"] / buf:>9.2f} {r["secs"]:>8.1f}s {gb(4 * K * T * V):>27} (computed, not allocated)')
    T = a.naive_T
    print(f'\nside by side at T={T} (naive fits here): naive = F.linear logits (K,T,V) + log_softmax + token_mutual_information')
    n, c = measure(T, a.D, a.chunk, 'naive'), measure(T, a.D, a.chunk, 'chunked')
    for r in (n, c):
        print(f'{r["mode"]:>8}: peak extra {gb(r["extra_bytes"])}   time {r["secs"]:6.1f}s   mean MI {r["mi_mean"]:.6f}')
    print(f'   ratio naive/chunked: memory {n["extra_bytes"] / c["extra_bytes"]:.2f}x, time {n["secs"] / c["secs"]:.2f}x')
    print(f'\nmemory method: {c["method"]}, each measurement in a fresh subprocess')
    from report import record
    record('mi_memory.py', f'chunked MI kernel: peak extra memory, T={T}', c['extra_bytes'] / 2**20, 'MiB',
           'naive (K, T, V) logits', n['extra_bytes'] / 2**20)
    record('mi_memory.py', f'chunked MI kernel: time, T={T}', c['secs'], 's', 'naive (K, T, V) logits', n['secs'])


if __name__ == '__main__':
    main()
