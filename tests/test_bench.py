"""The benchmark harness: `bench/gpu_smoke.py` runs its whole code path (training on the device, the paper-vocabulary
scoring pass) on the CPU, records its figures through `bench/report.py`, and `bench/run_all.py` collects rows into one
table. Timings are printed, never asserted."""
import json, os, subprocess, sys
from pathlib import Path

from fastcore.test import test_eq

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def test_gpu_smoke_runs_on_cpu_and_records_its_figures(tmp_path):
    rows = tmp_path / "rows.jsonl"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_smoke.py"), "--device", "cpu", "--quick", "--T", "64"],
                       capture_output=True, text=True, env={**ENV, "UGTTT_BENCH_OUT": str(rows)}, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    recs = [json.loads(l) for l in rows.read_text().splitlines()]
    test_eq([r["unit"] for r in recs], ["s", "tokens/s", "positions/s"])
    assert all(r["value"] > 0 for r in recs)
    test_eq(recs[2]["anchor"], "the bare LM-head matmul")
    assert 0 < recs[2]["ratio"] < 10                                   # value / anchor, both measured in this run
    assert "epoch 1:" in p.stdout and "MI adds" in p.stdout


def test_run_all_prints_one_table(tmp_path):
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "run_all.py"), "--only", "gpu_smoke.py", "--out", str(tmp_path)],
                       capture_output=True, text=True, env=ENV, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    text = (tmp_path / "table.md").read_text()
    assert text.startswith("Machine: ") and "| script | figure | value | compared with | its value | ratio |" in text
    assert (tmp_path / "gpu_smoke.py.log").is_file()
    bad = subprocess.run([sys.executable, str(ROOT / "bench" / "run_all.py"), "--only", "nosuch.py"], capture_output=True, text=True)
    test_eq(bad.returncode, 2)
    assert "unknown script 'nosuch.py'" in bad.stderr


def test_record_ratio_and_rows(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from report import record
    finally: sys.path.remove(str(ROOT / "bench"))
    monkeypatch.setenv("UGTTT_BENCH_OUT", str(tmp_path / "rows.jsonl"))
    test_eq(record("x.py", "speed", 30.0, "items/s", "naive", 10.0)["ratio"], 3.0)
    test_eq(record("x.py", "speed", 30.0, "items/s")["ratio"], None)
    test_eq(len((tmp_path / "rows.jsonl").read_text().splitlines()), 2)
