"""The trainer end to end on the embedded model: a run killed with SIGKILL in the middle of an epoch and resumed equals an
uninterrupted one; Prop. 3 over the whole loop (identical adapters, no NNM: UG-TTT is the baseline, weight for weight);
every method on every task writes a complete, parseable run directory; the `ugttt` console script trains, reports and
refuses bad input with one line and exit code 2."""
import json, os, re, signal, subprocess, sys, time
from collections import Counter
from pathlib import Path

import pytest
import torch
from fastcore.test import test_eq
from safetensors.torch import load_file

from ugttt.best import read_best
from ugttt.checkpoint import check_run_dir
from ugttt.config import config_from_dict
from ugttt.presets import make_config
from ugttt.sandbox import Sandbox
from ugttt.trainer import DEFAULT_THREADS, read_jsonl, train

pytestmark = pytest.mark.training   # not in test-fast (pytest.ini): whole runs, killed and resumed

UGTTT = str(Path(sys.executable).parent / "ugttt")        # the console script of this environment
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
SMALL = dict(groups_per_epoch=2, group_size=4)             # the tiny preset cut down so that an epoch takes a few seconds


@pytest.fixture(scope="module")
def sandbox():
    "One sandbox shared by the in-process runs (train's own sandbox is exercised by the subprocess runs)."
    with Sandbox(workers=2, budget_s=5.0) as sb: yield sb


def adapters(run: Path, epoch: int, k: int) -> dict:
    "Adapter k's tensors as saved in the run's checkpoint of `epoch` (peft's safetensors file)."
    return load_file(run / "checkpoints" / f"epoch_{epoch:04d}" / "adapters" / f"adapter_{k}" / "adapter_model.safetensors")


def same_tensors(a: dict, b: dict) -> bool:
    "Same names and every tensor bit-identical."
    return a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)


def rewards(run: Path) -> list[float]:
    "reward_exec of every rollout in the order the run logged them."
    return [t["reward_exec"] for t in read_jsonl(run / "trajectories.jsonl")[0]]


def check_logs(run: Path, epochs: int, groups: int, G: int) -> None:
    "Both logs parse with no partial line, and hold each (epoch, group, rollout) and each epoch record exactly once."
    trajs, partial = read_jsonl(run / "trajectories.jsonl")
    test_eq(partial, 0)
    metrics, partial = read_jsonl(run / "metrics.jsonl")
    test_eq(partial, 0)
    every = sorted((e, j, i) for e in range(epochs) for j in range(groups) for i in range(G))
    test_eq(sorted((t["epoch"], t["group_idx"], t["rollout_idx"]) for t in trajs), every)
    test_eq(sorted((m["rollout/epoch"], m["rollout/group_idx"], m["rollout/idx"]) for m in metrics if "rollout/idx" in m), every)
    test_eq(sorted((m["rollout_group/epoch"], m["rollout_group/group_idx"]) for m in metrics if "rollout_group/group_idx" in m),
            sorted((e, j) for e in range(epochs) for j in range(groups)))
    test_eq([m["progress/epoch"] for m in metrics if "progress/epoch" in m], list(range(epochs)))


# ---- 1. SIGKILL in the middle of an epoch, then --resume ------------------------------------------------------------

# Both backends write one checkpoint format (a peft adapter per member; their save and load are tested against each other
# in test_ensemble.py) and share the trainer's kill-and-resume path: `make test` kills the stacked ensemble (the tiny
# preset's), `make slow` the peft one too (18 s on the idle machine; moved for `make test`'s 15 minutes).
@pytest.mark.parametrize("ensemble,train_mode", [pytest.param("peft", "per_adapter", marks=pytest.mark.slow), ("stacked", "batched")])
def test_sigkill_resume_equals_uninterrupted_run(tmp_path, ensemble, train_mode):
    flags = ["train", "--task", "cp26", "--method", "ugttt", "--preset", "tiny", "--epochs", "3", "--groups_per_epoch", "1",
             "--group_size", "4", "--policy.n_adapters", "3", "--policy.ensemble", ensemble, "--policy.train_mode", train_mode,
             "--quiet", "--out", str(tmp_path / "killed")]
    cfg = make_config("cp26", "ugttt", "tiny", epochs=3, groups_per_epoch=1, group_size=4,
                      **{"policy.n_adapters": 3, "policy.ensemble": ensemble, "policy.train_mode": train_mode})
    killed = tmp_path / "killed"
    proc = subprocess.Popen([UGTTT, *flags], env=ENV, start_new_session=True,   # its own process group: kill it whole
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # kill it as soon as epoch 1's trajectories are written: between its logs and its checkpoint, or early in epoch 2
    deadline = time.monotonic() + 300
    while b'{"epoch": 1,' not in ((killed / "trajectories.jsonl").read_bytes() if (killed / "trajectories.jsonl").exists() else b""):
        assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
        assert time.monotonic() < deadline, "epoch 1 never logged"
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(); proc.stderr.close()
    test_eq(proc.returncode, -signal.SIGKILL)
    at_kill = json.loads((killed / "checkpoints" / "latest.json").read_text())["epoch"]
    test_eq(at_kill in (0, 1), True)                              # the run was interrupted before its last epoch
    test_eq((killed / "checkpoints" / "epoch_0002").exists(), False)

    resumed = subprocess.run([UGTTT, "train", "--resume", "--out", str(killed), "--quiet"], env=ENV, capture_output=True,
                             text=True)                           # the run's own config.json: no flag typed again
    test_eq((resumed.returncode, resumed.stderr), (0, ""))
    threads = torch.get_num_threads()
    torch.set_num_threads(DEFAULT_THREADS)                        # as `ugttt train` runs: another count sums floats otherwise
    try: train(cfg, tmp_path / "whole", progress=False)           # the same config, never interrupted
    finally: torch.set_num_threads(threads)

    test_eq(config_from_dict(json.loads((killed / "config.json").read_text())), cfg)
    test_eq(rewards(killed), rewards(tmp_path / "whole"))
    test_eq(read_best(killed), read_best(tmp_path / "whole"))   # the best programs kept: what the resume dropped and kept again
    test_eq((killed / "best" / "best.json").read_text() if (killed / "best").exists() else None,
            (tmp_path / "whole" / "best" / "best.json").read_text() if (tmp_path / "whole" / "best").exists() else None)
    for k in range(3): test_eq(same_tensors(adapters(killed, 2, k), adapters(tmp_path / "whole", 2, k)), True)
    check_logs(killed, epochs=3, groups=1, G=4)
    kept = [m["rollout_group/kept"] for m in read_jsonl(killed / "metrics.jsonl")[0] if "rollout_group/kept" in m]
    test_eq(sum(kept[:2]) > 0, True)                              # the adapters did learn before the last epoch
    test_eq(sorted(p.name for p in (killed / "puct").iterdir()), [f"step_{e:06d}.json" for e in range(3)])
    test_eq(sorted(p.name for p in (killed / "checkpoints").iterdir()), ["epoch_0000", "epoch_0001", "epoch_0002", "latest.json"])


# ---- 2. Prop. 3 over the whole loop -----------------------------------------------------------------------------------

def test_prop3_identical_adapters_are_the_baseline(tmp_path, sandbox):
    # K identical adapters without NNM: every adapter samples, scores and is updated like the others (MI = 0, so U = 0
    # and the shaped advantage is the baseline's LOO advantage), and each follows the baseline's single adapter.
    # The UG-TTT objective divides by K (Eq. 8), so its gradients are the baseline's / K. AdamW's step m/(sqrt(v) + eps)
    # is scale-invariant only if eps scales too: with the same eps = 1e-8 the two runs differ by up to 4e-4 after two
    # steps at lr 1e-3 (entries whose gradient is about eps). With K = 4, a power of two, dividing by K is exact in
    # floating point, so giving the baseline eps·K makes every step of the two runs the same computation: bit-equal.
    # The adapters train one after another here: all K in one forward (the tiny preset's batched mode) cuts the LM head's
    # chunks at other positions than the baseline's one block, the same sums in another grouping, equal only to rounding
    # (the batched mode's gradients are checked against the sequential ones in tests/test_ensemble.py).
    K, common = 4, dict(epochs=2, seed=0, **SMALL)
    ug = make_config("cp26", "ugttt", "tiny", **{"policy.identical_init": True, "policy.n_adapters": K, "update.nnm_coef": 0.0,
                                                  "policy.lora_dropout": 0.0, "policy.train_mode": "per_adapter"}, **common)
    base = make_config("cp26", "baseline", "tiny", **{"policy.lora_dropout": 0.0, "update.adam_eps": ug.update.adam_eps * K},
                       **common)
    train(ug, tmp_path / "ugttt", progress=False, sandbox=sandbox)
    train(base, tmp_path / "baseline", progress=False, sandbox=sandbox)
    test_eq(rewards(tmp_path / "ugttt"), rewards(tmp_path / "baseline"))
    texts = lambda run: [t["generated_text"] for t in read_jsonl(run / "trajectories.jsonl")[0]]
    test_eq(texts(tmp_path / "ugttt"), texts(tmp_path / "baseline"))
    mi = [m["rollout/uncertainty_true_mi"] for m in read_jsonl(tmp_path / "ugttt" / "metrics.jsonl")[0] if "rollout/idx" in m]
    test_eq(set(mi), {0.0})
    kept = [m["rollout_group/kept"] for m in read_jsonl(tmp_path / "baseline" / "metrics.jsonl")[0] if "rollout_group/kept" in m]
    test_eq(sum(kept) > 0, True)                                  # the adapters were updated: the equality says something
    baseline = adapters(tmp_path / "baseline", 1, 0)
    for k in range(K): test_eq(same_tensors(adapters(tmp_path / "ugttt", 1, k), baseline), True)


# ---- 3. every method on every task ------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["ugttt", "baseline", "no_nnm"])
@pytest.mark.parametrize("task", ["ac1", "ac2", "cp26", "erdos"])
def test_two_epochs_write_a_complete_run(task, method, tmp_path, sandbox):
    over = {} if method == "baseline" else {"policy.n_adapters": 2}
    cfg = make_config(task, method, "tiny", epochs=2, groups_per_epoch=1, group_size=2, **over)
    run = tmp_path / "run"
    records = train(cfg, run, progress=False, sandbox=sandbox)
    test_eq([r["progress/epoch"] for r in records], [0, 1])
    test_eq(config_from_dict(json.loads((run / "config.json").read_text())), cfg)
    check_logs(run, epochs=2, groups=1, G=2)
    test_eq(sorted(p.name for p in (run / "puct").iterdir()), ["step_000000.json", "step_000001.json"])
    for f in ("puct/step_000000.json", "puct/step_000001.json", "checkpoints/epoch_0001/sampler.json",
              "checkpoints/epoch_0001/streaming.json"):
        json.loads((run / f).read_text())
    test_eq(json.loads((run / "checkpoints" / "latest.json").read_text()), dict(epoch=1, path="epoch_0001"))
    ck = run / "checkpoints" / "epoch_0001"
    test_eq(sorted(p.name for p in (ck / "adapters").iterdir() if p.is_dir()), [f"adapter_{k}" for k in range(cfg.n_adapters)])
    test_eq((ck / "trainer_state.pt").is_file(), True)
    for k in range(cfg.n_adapters): test_eq(len(adapters(run, 1, k)) > 0, True)


# ---- 4. the console script ----------------------------------------------------------------------------------------------

def test_cli_train_report_and_bad_value(tmp_path):
    run = tmp_path / "run"
    out = subprocess.run([UGTTT, "train", "--task", "cp26", "--method", "baseline", "--preset", "tiny", "--epochs", "1",
                          "--groups_per_epoch", "1", "--group_size", "2", "--out", str(run), "--quiet"],
                         env=ENV, capture_output=True, text=True)
    test_eq((out.returncode, out.stderr), (0, ""))
    r_max = [m for m in read_jsonl(run / "metrics.jsonl")[0] if "progress/epoch" in m][-1]["train/reward/exec/best"]
    rep = subprocess.run([UGTTT, "report", str(run)], env=ENV, capture_output=True, text=True)
    test_eq(rep.returncode, 0)
    table, legend = rep.stdout.split("\n\n")                        # one run: the table and the legend, nothing to compare
    header, row = table.splitlines()
    test_eq(header.split()[:6], ["run", "task", "method", "seed", "epochs", "R_max"])
    test_eq(row.split()[:6], [str(run), "cp26", "baseline", "0", "1", f"{r_max:.4f}"])
    assert legend.startswith("Legend:") and "  H_bits " in legend and "  logs " in legend, legend

    for bad, words in ((["--group_size", "1"], "group_size must be an int >= 2"),
                       (["--update.lr", "fast"], "--update.lr: cannot read 'fast' as float")):
        out = subprocess.run([UGTTT, "train", "--out", str(tmp_path / "bad"), *bad], env=ENV, capture_output=True, text=True)
        test_eq(out.returncode, 2)
        test_eq(out.stderr.count("\n"), 1)
        test_eq((words in out.stderr, "Traceback" in out.stderr), (True, False))
        test_eq((tmp_path / "bad").exists(), False)               # refused before anything was written


def test_generation_bar_advances_once_per_rollout_and_shows_tokens_per_second(tmp_path, sandbox, capfd):
    "Two groups of 3 in one batched decode (decode_groups=2): the bar still moves at every one of the 6 rollouts."
    cfg = make_config("cp26", "baseline", "tiny", epochs=1, groups_per_epoch=2, group_size=3, decode_groups=2)
    train(cfg, tmp_path / "run", progress=True, sandbox=sandbox)
    err = capfd.readouterr().err                                       # tqdm draws on stderr, one state per \r
    shown = [int(n) for n in re.findall(r"generate: *\d+%\|[^|]*\| *(\d)/6 ", err)]
    assert set(range(1, 7)) <= set(shown), shown                     # drawn at 1/6, 2/6, ..., 6/6: once per rollout
    assert re.search(r"generate: .*/6 .*[\d,]+ tok/s", err), err[-2000:]


# ---- 5. experiment tracking -------------------------------------------------------------------------------------------

def test_report_to_tensorboard_logs_the_epoch_records(tmp_path, sandbox):
    "report_to='tensorboard' writes the epoch record metrics.jsonl holds, read back with tensorboard's own event reader."
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from ugttt.tracking import scalars
    cfg = make_config("cp26", "ugttt", "tiny", epochs=1, groups_per_epoch=1, group_size=2, report_to="tensorboard",
                      **{"policy.n_adapters": 2})
    run = tmp_path / "run"
    train(cfg, run, progress=False, sandbox=sandbox)
    records, _ = read_jsonl(run / "metrics.jsonl")
    (epoch,) = [r for r in records if "progress/epoch" in r]          # the one epoch record
    expected = scalars(epoch)                                         # its finite numbers, nested counts flattened
    acc = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0}); acc.Reload()
    test_eq(set(acc.Tags()["scalars"]), set(expected))
    for name in ("progress/epoch", "train/correctness/rate", "families/entropy_bits", "mi/token_mean", "train/loss"):
        assert name in expected, name
    for name, value in expected.items():
        (ev,) = acc.Scalars(name)
        test_eq(ev.step, 0)
        assert abs(ev.value - value) <= 1e-6 * max(1.0, abs(value)), (name, ev.value, value)   # float32 in the event file


# ---- 6. stage 4's update switches through the trainer --------------------------------------------------------------

STAGE4 = ("shared_negatives", "train_subsample", "max_grad_norm")


@pytest.mark.parametrize("ensemble,train_mode,negatives", [("peft", "per_adapter", "drop"), ("stacked", "batched", "tapered")])
def test_stage4_switches_train_and_an_old_run_reads_the_defaults(tmp_path, sandbox, ensemble, train_mode, negatives):
    "A run under shared_negatives, train_subsample and max_grad_norm trains and stores them; a config.json without them resumes as the paper's."
    over = {"policy.n_adapters": 2, "policy.ensemble": ensemble, "policy.train_mode": train_mode,
            "update.shared_negatives": negatives, "update.train_subsample": 2, "update.max_grad_norm": 1e-3}
    cfg = make_config("cp26", "ensemble_only", "tiny", epochs=2, **SMALL, **over)
    run = tmp_path / "run"
    records = train(cfg, run, progress=False, sandbox=sandbox)
    test_eq([r["progress/epoch"] for r in records], [0, 1])
    check_logs(run, epochs=2, groups=2, G=4)
    stored = json.loads((run / "config.json").read_text())
    test_eq(config_from_dict(stored), cfg)
    test_eq([stored["update"][f] for f in STAGE4], [negatives, 2, 1e-3])
    # the same directory as a run stored before these fields existed: it reads as the paper's algorithm
    (run / "config.json").write_text(json.dumps({**stored, "update": {k: v for k, v in stored["update"].items() if k not in STAGE4}}))
    paper = make_config("cp26", "ensemble_only", "tiny", epochs=2, **SMALL, **{k: v for k, v in over.items() if k.startswith("policy.")})
    check_run_dir(paper, run, resume=True)                                             # its config, as far as resume is concerned
    with pytest.raises(ValueError, match=f"update.shared_negatives: 'keep' -> '{negatives}'"): check_run_dir(cfg, run, resume=True)


# ---- 5. stopping at a target --------------------------------------------------------------------------------------------

def test_stop_at_ends_the_run_after_the_epoch_that_reaches_it_and_resume_says_complete(tmp_path, sandbox, capsys):
    "A target any R_max reaches stops a 3-epoch run after epoch 0; stopped.json says why; resume trains nothing."
    cfg = make_config("cp26", "baseline", "tiny", epochs=3, groups_per_epoch=1, group_size=2, stop_at=-1e9)
    run = tmp_path / "run"
    records = train(cfg, run, progress=True, sandbox=sandbox)
    r_max = records[-1]["train/reward/exec/best"]
    test_eq([r["progress/epoch"] for r in records], [0])
    test_eq(json.loads((run / "stopped.json").read_text()), dict(reason="stop_at", stop_at=-1e9, epoch=0, r_max=r_max))
    assert "reached stop_at" in capsys.readouterr().out
    test_eq(train(cfg, run, resume=True, progress=True, sandbox=sandbox), [])                # complete: nothing trained
    assert "is complete: it stopped after epoch 0 " in capsys.readouterr().out   # numbered from 0, as stopped.json
    (run / "stopped.json").unlink()                        # as if the process died between the checkpoint and stopped.json
    test_eq(train(cfg, run, resume=True, progress=False, sandbox=sandbox), [])
    test_eq(json.loads((run / "stopped.json").read_text())["epoch"], 0)
    test_eq(len([m for m in read_jsonl(run / "metrics.jsonl")[0] if "progress/epoch" in m]), 1)
    free = make_config("cp26", "baseline", "tiny", epochs=2, groups_per_epoch=1, group_size=2)   # no target: every epoch
    test_eq(len(train(free, tmp_path / "free", progress=False, sandbox=sandbox)), 2)
    test_eq((tmp_path / "free" / "stopped.json").exists(), False)


def test_cli_stop_at_flag_reaches_the_config_and_a_bad_value_is_one_line(tmp_path):
    out = subprocess.run([UGTTT, "train", "--out", str(tmp_path / "bad"), "--stop_at", "high"], env=ENV, capture_output=True, text=True)
    test_eq(out.returncode, 2)
    test_eq(("--stop_at" in out.stderr, "Traceback" in out.stderr, out.stderr.count("\n")), (True, False, 1))
    from ugttt.cli import build_parser, config_from_args
    args = build_parser().parse_args(["train", "--task", "cp26", "--method", "baseline", "--stop_at", "2.6358", "--out", str(tmp_path / "r")])
    test_eq(config_from_args(args).stop_at, 2.6358)


# ---- 6. resuming from the run's own config, and one epoch numbering ----------------------------------------------------

def test_resume_out_alone_takes_the_runs_config_refuses_a_computing_flag_and_logs_an_operational_one(tmp_path):
    "The quick start's --stop_at run: --resume --out alone says it is complete; a flag that changes an epoch is refused in one line; --stop_at none goes on, logged; console, stopped.json, best.jsonl, metrics.jsonl and report number the epochs alike."
    from ugttt.report import report_figure, report_rows
    run = tmp_path / "stop"
    first = subprocess.run([UGTTT, "train", "--task", "cp26", "--method", "baseline", "--epochs", "3", "--groups_per_epoch", "1",
                            "--group_size", "2", "--stop_at=-1e9", "--out", str(run)], env=ENV, capture_output=True, text=True)
    test_eq(first.returncode, 0)
    stop = json.loads((run / "stopped.json").read_text())
    test_eq(stop["epoch"], 0)                                     # any R_max reaches -1e9: the run stops after its first epoch
    assert re.search(r"^epoch 0 of 0-2  R_max", first.stdout, re.M) and "stopped after epoch 0:" in first.stdout, first.stdout

    again = subprocess.run([UGTTT, "train", "--resume", "--out", str(run)], env=ENV, capture_output=True, text=True)
    test_eq((again.returncode, again.stderr), (0, ""))            # the run's own config.json: groups_per_epoch 1, not the preset's 8
    assert f"{run} is complete: it stopped after epoch 0 " in again.stdout, again.stdout

    before = sorted((p.relative_to(run), p.stat().st_mtime_ns) for p in run.rglob("*"))
    for flag, words in ((["--groups_per_epoch", "8"], "with --groups_per_epoch '8': it changes what an epoch computes (differs in: groups_per_epoch: 1 -> 8)"),
                        (["--method", "ugttt"], "with --method: it changes what an epoch computes (differs in: method: 'baseline' -> 'ugttt'"),
                        (["--preset", "tiny"], "with --preset: it changes what an epoch computes (differs in: epochs: 3 -> 6")):
        out = subprocess.run([UGTTT, "train", "--resume", "--out", str(run), *flag], env=ENV, capture_output=True, text=True)
        test_eq((out.returncode, out.stderr.count("\n"), "Traceback" in out.stderr), (2, 1, False))
        assert words in out.stderr, out.stderr
    test_eq(sorted((p.relative_to(run), p.stat().st_mtime_ns) for p in run.rglob("*")), before)   # refused: nothing written

    on = subprocess.run([UGTTT, "train", "--resume", "--out", str(run), "--stop_at", "none", "--threads", "1"], env=ENV,
                        capture_output=True, text=True)         # operational: the target is lifted, the run goes on
    test_eq((on.returncode, "Traceback" in on.stderr, "error" in on.stderr), (0, False, False))   # stderr: the progress bars
    assert f"resuming {run} at epoch 1: stop_at -1000000000.0 -> None (recorded in resumes.jsonl)" in on.stdout, on.stdout
    test_eq(re.findall(r"^epoch (\d+) of 0-2  R_max", first.stdout + on.stdout, re.M), ["0", "1", "2"])
    test_eq((run / "stopped.json").exists(), False)
    (line,) = read_jsonl(run / "resumes.jsonl")[0]
    test_eq((line["epoch"], line["changed"], line["stopped"]), (1, {"stop_at": [-1e9, None]}, stop))

    epochs = [m["progress/epoch"] for m in read_jsonl(run / "metrics.jsonl")[0] if "progress/epoch" in m]
    test_eq(epochs, [0, 1, 2])                                    # metrics.jsonl, as the console numbered them
    test_eq({t["epoch"] for t in read_jsonl(run / "trajectories.jsonl")[0]}, {0, 1, 2})
    assert {b["epoch"] for b in read_best(run)} <= set(epochs)   # best.jsonl (and `ugttt best`) name the same epochs
    (row,) = report_rows([run])
    test_eq(row["epochs"], 3)                                     # report's column counts them
    for ax in report_figure([row]).axes: test_eq(list(ax.lines[0].get_xdata()), epochs)   # its figure's x: epochs 0-2
