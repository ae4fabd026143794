"""One row per headline figure of a benchmark script, collected by `bench/run_all.py` (`make bench`) into one table.

A script calls `record(...)` for each figure it wants in the table: its value, its unit, and the anchor it is compared
with, measured side by side in the same run (a naive kernel, a fresh interpreter, one worker), so that the ratio
value / anchor is meaningful on any machine. Rows are printed as they come and, when the environment variable
UGTTT_BENCH_OUT names a file, appended to it as JSON lines.
"""
import json, math, os


def record(
    script: str,                      # the benchmark's file name, e.g. "sandbox_throughput.py"
    figure: str,                      # what was measured, in words, e.g. "programs per second, 2 workers"
    value: float,                     # the measured value
    unit: str,                        # its unit, e.g. "programs/s", "MiB", "s"
    anchor: str = "",                 # what it is compared with, in words ("" for none)
    anchor_value: float | None = None,  # the anchor's value, measured in the same run, same unit
) -> dict:
    "Print one benchmark figure and append it (with value / anchor) to $UGTTT_BENCH_OUT when that is set."
    value = float(value)
    ratio = value / anchor_value if anchor_value not in (None, 0) and math.isfinite(value) else None
    row = dict(script=script, figure=figure, value=value, unit=unit, anchor=anchor,
               anchor_value=None if anchor_value is None else float(anchor_value), ratio=ratio)
    print(f"[bench] {figure}: {value:.4g} {unit}" + (f"  ({ratio:.3g}x {anchor}: {anchor_value:.4g})" if ratio is not None else ""))
    path = os.environ.get("UGTTT_BENCH_OUT")
    if path:
        with open(path, "a") as f: f.write(json.dumps(row) + "\n")
    return row
