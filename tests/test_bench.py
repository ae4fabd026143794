"""The benchmark harness: `bench/gpu_smoke.py` runs its whole code path (training on the device, the paper-vocabulary
scoring pass) on the CPU, records its figures through `bench/report.py`, and `bench/run_all.py` collects rows into one
table; `bench/gpu_check.py --device cpu --smoke` runs every part of the first GPU run at toy shapes. Timings are
printed, never asserted."""
import json, os, subprocess, sys
from pathlib import Path

import pytest
import torch
from fastcore.test import test_eq

pytestmark = pytest.mark.training   # not in test-fast (pytest.ini): the scripts train and score on the CPU

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


def test_gpu_check_smoke_runs_every_part_on_cpu(tmp_path):
    out = tmp_path / "gpu_check.json"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--device", "cpu", "--smoke", "--out", str(out)],
                       capture_output=True, text=True, env={**ENV, "UGTTT_BENCH_OUT": str(tmp_path / "rows.jsonl")}, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    res = json.loads(out.read_text())
    test_eq((res["device"], res["smoke"]), ("cpu", True))
    rows = res["rows"]
    test_eq([p_ for p_ in ("setup", "decode", "scoring", "training", "e2e") if any(r["part"] == p_ for r in rows)],
            ["setup", "decode", "scoring", "training", "e2e"])
    test_eq(len([r for r in rows if r["part"] == "decode"]), 4)         # base, one adapter, 5 mixed at 64; the gate check
    test_eq(len([r for r in rows if r["part"] == "training"]), 3)       # 32 and 64 checkpointed, 32 without
    checks = [r for r in rows if "ok" in r]
    test_eq((len(checks), all(r["ok"] for r in checks)), (2, True))     # MI exactly 0 for identical adapters; float32 vs float64
    assert all(r["plan_gib"] > 0 for r in rows if r["part"] in ("decode", "training"))
    assert "peak GiB" in p.stdout and "plan GiB" in p.stdout
    assert not (tmp_path / "rows.jsonl").exists()                       # records nothing without a GPU


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the script measures instead")
def test_gpu_check_without_a_gpu_says_so():
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py")], capture_output=True, text=True, env=ENV, timeout=120)
    test_eq(p.returncode, 0)
    assert "no CUDA device" in p.stdout
