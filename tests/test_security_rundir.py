"""Hostile run directories and hostile flags, each followed by a valid run on the same machinery.

Each test copies the finished smoke run that the `finished` fixture trains once per session (tests/security_run.py,
which says what every case checks) and damages the copy. tests/test_security_resume.py holds the cases of issue 32:
values in a checkpoint, configs and logs of bounded cost, and logs checked against their checkpoint.
"""
import json, os, shutil, subprocess, sys, textwrap
from pathlib import Path

import pytest
import torch
from fastcore.test import test_eq

from security_run import CFG, ENV, SPEC, cli, copy_run, make_partial, refused, resume_refused, rewards, tree   # tests/ is on sys.path
from ugttt.cli import main
from ugttt.config import config_to_dict
from ugttt.reproduce import ensure_runs, run_path
from ugttt.rundir import RunDirError, read_jsonl
from ugttt.tracking import run_name
from ugttt.trainer import train

pytestmark = pytest.mark.training   # not in test-fast (pytest.ini): a smoke run, and a valid run after each refusal


# ---- clear errors before anything is created ------------------------------------------------------------------------

BAD_FLAGS = [
    (["--budget_s", "inf"], "budget_s must be finite"),
    (["--puct_c", "inf"], "puct.c must be finite"),                 # the older flat flag: read as --puct.c
    (["--puct.c", "-1"], "c must be >= 0, got -1.0"),
    (["--update.lr", "inf"], "update.lr must be finite"),
    (["--update.mi_coef", "inf"], "update.mi_coef must be finite"),
    (["--policy.lora_alpha", "inf"], "policy.lora_alpha must be finite"),
    (["--puct_max_buffer", "1", "--groups_per_epoch", "2"], "puct.max_buffer (1) must be >= groups_per_epoch (2)"),
    (["--seed", str(2**63)], "seed must be an int in [0, 2**63)"),
    (["--policy.seed", str(2**64)], "policy.seed must be an int >= 0"),
    (["--policy.device", "cuda:99"], "policy.device 'cuda:99'"),
    (["--policy.temperature", "1e-300"], "policy.temperature must be >= 0.0001"),
    (["--config", "{bad_yaml}"], "is not valid YAML"),
]


def in_process(argv: list, capsys) -> subprocess.CompletedProcess:
    "`ugttt.cli.main(argv)` in this process (no interpreter start per case), its exit code and stderr as the console script's."
    try: code = main([str(a) for a in argv])
    except SystemExit as e: code = e.code      # argparse's own errors exit
    return subprocess.CompletedProcess(argv, code, "", capsys.readouterr().err)


def test_bad_flags_are_one_line_and_create_nothing(tmp_path, capsys):
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("task: [cp26\nepochs: 1\n")
    for i, (flags, words) in enumerate(BAD_FLAGS):
        out = tmp_path / "run"
        argv = ["train", "--out", out, "--quiet", *[f.format(bad_yaml=bad_yaml) for f in flags]]
        # the first through the console script as a user runs it, the others through its main in this process (the same
        # code, 1-2 s less each for `make test`'s 15 minutes)
        refused(cli(*argv) if i == 0 else in_process(argv, capsys), words)
        test_eq(out.exists(), False)
    test_eq(sorted(p.name for p in tmp_path.iterdir()), ["bad.yaml"])
    # the same command line with valid values trains
    proc = cli("train", "--out", tmp_path / "run", "--quiet", "--method", "baseline", "--epochs", "1", "--groups_per_epoch", "1",
               "--group_size", "2", "--policy.max_new_tokens", "96", "--policy.code_budget", "64", "--budget_s", "2")
    test_eq((proc.returncode, proc.stderr), (0, ""))
    test_eq((tmp_path / "run" / "checkpoints" / "epoch_0000" / "trainer_state.pt").is_file(), True)


# ---- resume never unpickles -------------------------------------------------------------------------------------------

class _Payload:
    "Pickled, it calls Path.touch on the marker when unpickled: what a replaced trainer_state.pt could do."
    def __init__(self, marker): self.marker = marker
    def __reduce__(self): return (Path.touch, (Path(self.marker),))


def test_resume_does_not_unpickle_a_replaced_state(tmp_path, finished):
    run = copy_run(finished[1], tmp_path / "run")
    marker = tmp_path / "PWNED"
    torch.save({"epoch": 1, "x": _Payload(marker)}, run / "checkpoints" / "epoch_0001" / "trainer_state.pt")
    before = tree(tmp_path)
    with pytest.raises(RunDirError, match="trainer_state.pt does not load as a checkpoint with weights_only=True"):
        train(CFG, run, resume=True, progress=False)
    proc = cli("train", "--config", run / "config.json", "--resume", "--out", run, "--quiet")
    refused(proc, "trainer_state.pt does not load as a checkpoint with weights_only=True")
    test_eq(marker.exists(), False)
    test_eq(tree(tmp_path), before)


def test_genuine_state_loads_with_weights_only_and_has_no_cuda_state_on_cpu(finished):
    st = torch.load(finished[1] / "checkpoints" / "epoch_0001" / "trainer_state.pt", weights_only=True)
    test_eq(sorted(st), ["counter", "cuda_rng", "epoch", "optimizers", "sample_rng", "torch_rng"])
    test_eq((st["epoch"], len(st["optimizers"])), (1, 1 if CFG.policy.ensemble == "stacked" else CFG.n_adapters))   # one AdamW over the stacks
    if not torch.cuda.is_available(): test_eq(st["cuda_rng"], None)   # CUDA states only when this process used CUDA


def test_cuda_rng_state_is_left_aside_without_cuda(tmp_path, finished):
    "A checkpoint written on a GPU resumes on a CPU-only machine: the CPU states restored, the CUDA ones ignored (documented)."
    if torch.cuda.is_available(): pytest.skip("checks the CPU-only machine's behaviour")
    run = copy_run(finished[1], tmp_path / "run")
    path = run / "checkpoints" / "epoch_0001" / "trainer_state.pt"
    st = torch.load(path, weights_only=True)
    torch.save({**st, "cuda_rng": [torch.zeros(16, dtype=torch.uint8)]}, path)
    test_eq(train(CFG, run, resume=True, progress=False), [])          # finished: loads the checkpoint, trains nothing
    torch.save({**st, "cuda_rng": "not states"}, path)
    with pytest.raises(RunDirError, match="cuda_rng is not a list of RNG states"): train(CFG, run, resume=True, progress=False)


# ---- a run's config.json names no code to run ---------------------------------------------------------------------------

def test_resume_compares_config_before_resolving_its_task(tmp_path, finished):
    run = copy_run(finished[1], tmp_path / "run")
    d = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**d, "task": "faulthandler:_sigsegv"}))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(config_to_dict(CFG)))
    before = tree(run)
    proc = cli("train", "--config", good, "--resume", "--out", run, "--quiet")
    refused(proc, "differs in: task: 'faulthandler:_sigsegv' -> 'cp26'")          # not SIGSEGV (-11)
    test_eq(tree(run), before)


def test_reuse_never_imports_a_payload_next_to_the_runs(tmp_path, finished, monkeypatch):
    "A payload.py in a runs directory under the working directory, named by a run's config.json, is never imported."
    work = tmp_path / "work"
    runs = work / "runs"
    run = copy_run(finished[1], run_path(runs, SPEC, smoke=True))
    marker = tmp_path / "PWNED"
    (runs / "__init__.py").write_text("")
    (runs / "payload.py").write_text(f"from pathlib import Path\nPath({str(marker)!r}).touch()\n")
    d = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**d, "task": "runs.payload:task"}))
    monkeypatch.chdir(work); monkeypatch.syspath_prepend(str(work))   # the working directory importable, as in a notebook
    with pytest.raises(ValueError, match="different config .task: 'runs.payload:task' -> 'cp26'"):
        ensure_runs([SPEC], runs, smoke=True, workers=1, progress=False)
    test_eq(marker.exists(), False)
    test_eq("runs.payload" in sys.modules, False)


# ---- writes never follow planted links ----------------------------------------------------------------------------------

def test_resume_refuses_planted_links_and_writes_nothing(tmp_path, finished):
    victims = tmp_path / "victims"; victims.mkdir()
    for plant in ("metrics.jsonl.tmp", "trajectories.jsonl.tmp", "checkpoints/latest.json.tmp", "metrics.jsonl",
                  "checkpoints/epoch_0001.tmp", "puct"):
        run = copy_run(finished[1], tmp_path / plant.replace("/", "_"))
        target = victims / plant.replace("/", "_")
        target.write_text("keep")
        p = run / plant
        if p.is_dir(): shutil.rmtree(p)
        elif p.exists(): p.unlink()
        p.symlink_to(target)
        before = tree(tmp_path)
        with pytest.raises(RunDirError, match=f"{plant} is a symbolic link"): train(CFG, run, resume=True, progress=False)
        test_eq(tree(tmp_path), before)
        test_eq(target.read_text(), "keep")


def test_latest_json_cannot_lead_outside_the_run(tmp_path, finished):
    run = copy_run(finished[1], tmp_path / "run")
    outside = copy_run(run / "checkpoints" / "epoch_0001", tmp_path / "elsewhere" / "epoch_0001")
    for path in ("../../elsewhere/epoch_0001", str(outside), "epoch_0000"):
        (run / "checkpoints" / "latest.json").write_text(json.dumps(dict(epoch=1, path=path)))
        before = tree(tmp_path)
        proc = cli("train", "--config", run / "config.json", "--resume", "--out", run, "--quiet")
        refused(proc, "latest.json: path must be the epoch's directory 'epoch_0001'")
        test_eq(tree(tmp_path), before)


def test_reproduce_refuses_a_linked_job_config_then_resumes_exactly(tmp_path, finished):
    "A planted link at reproduce's hidden job config is refused; without it the partial run resumes to the uninterrupted one."
    runs = tmp_path / "runs"
    run = copy_run(finished[1], run_path(runs, SPEC, smoke=True))
    make_partial(run)
    victim = tmp_path / "victim.txt"; victim.write_text("keep")
    job = run.parent / f".{run.name}.config.json"
    job.unlink(missing_ok=True); job.symlink_to(victim)
    with pytest.raises(RunDirError, match=r"\.ugttt-s0\.config\.json is a symbolic link"):
        ensure_runs([SPEC], runs, smoke=True, workers=1, progress=False)
    test_eq(victim.read_text(), "keep")
    job.unlink()
    got = ensure_runs([SPEC], runs, smoke=True, workers=1, progress=False)[SPEC]   # resumes epoch 1 in a worker
    test_eq(got.n_epochs, 2)
    test_eq(rewards(run), rewards(finished[1]))                                    # the resumed run is the uninterrupted one
    test_eq(json.loads((run / "checkpoints" / "latest.json").read_text()), dict(epoch=1, path="epoch_0001"))


# ---- a corrupted run: one line naming the file, nothing overwritten ------------------------------------------------------

def _state(run, **changes):
    path = run / "checkpoints" / "epoch_0001" / "trainer_state.pt"
    st = torch.load(path, weights_only=True)
    torch.save({**st, **changes}, path)

def _replace(rel, data):
    def f(run):
        p = run / rel
        if p.is_dir(): shutil.rmtree(p)
        elif p.exists() or p.is_symlink(): p.unlink()
        if data is not None: p.write_bytes(data)
    return f

def _truncate(rel, n):
    def f(run): p = run / rel; p.write_bytes(p.read_bytes()[:n])
    return f

def _drop_epoch_1(run):
    for name in ("metrics.jsonl", "trajectories.jsonl"):
        recs = read_jsonl(run / name)[0]
        (run / name).write_text("".join(json.dumps(r) + "\n" for r in recs if 1 not in (r.get("epoch"), r.get("progress/epoch"),
                                                                                         r.get("rollout/epoch"), r.get("rollout_group/epoch"))))

def _other_adapter(run):
    from safetensors.torch import save_file
    save_file({"base_model.model.nothing.lora_A.weight": torch.zeros(2, 2)},
              str(run / "checkpoints" / "epoch_0001" / "adapters" / "adapter_1" / "adapter_model.safetensors"))

ADAPTER = "checkpoints/epoch_0001/adapters/adapter_1/adapter_model.safetensors"
STATE = "checkpoints/epoch_0001/trainer_state.pt"
CORRUPTIONS = {
    "config not json": (_replace("config.json", b'{"task": '), "config.json is not valid JSON"),
    "config a list": (_replace("config.json", b"[1, 2]"), "config.json: a stored config must be a JSON object"),
    "config a directory": (lambda run: (_replace("config.json", None)(run), (run / "config.json").mkdir()), "config.json is not a regular file (a directory)"),
    "latest missing": (_replace("checkpoints/latest.json", None), "latest.json is missing but"),
    "latest not json": (_replace("checkpoints/latest.json", b"\x00\x01"), "latest.json is not valid JSON"),
    "latest wrong shape": (_replace("checkpoints/latest.json", b'{"epoch": "1", "path": "epoch_0001"}'), "latest.json: epoch must be an int"),
    "checkpoint dir missing": (_replace("checkpoints/epoch_0001", None), "epoch_0001, which is not a checkpoint directory"),
    "adapter missing": (_replace("checkpoints/epoch_0001/adapters/adapter_1", None), f"{ADAPTER} is missing"),
    "adapter truncated": (_truncate(ADAPTER, 100), f"{ADAPTER} is not a safetensors file"),
    "adapter of another model": (_other_adapter, f"{ADAPTER} does not hold this run's adapter"),
    "state missing": (_replace(STATE, None), f"{STATE} is missing"),
    "state truncated": (_truncate(STATE, 200), f"{STATE} does not load as a checkpoint with weights_only=True"),
    "state of another epoch": (lambda run: _state(run, epoch=0), "holds epoch 0, latest.json names 1"),
    "state for other K": (lambda run: _state(run, optimizers=[]), "holds 0 optimiser states, the run has 1 optimiser(s)"),
    "state bad rng": (lambda run: _state(run, torch_rng=torch.zeros(3, dtype=torch.uint8)), "torch_rng is not a valid cpu RNG state"),
    "sampler not json": (_replace("checkpoints/epoch_0001/sampler.json", b"{"), "sampler.json is not valid JSON"),
    "sampler wrong shape": (_replace("checkpoints/epoch_0001/sampler.json", b"{}"), "sampler.json does not rebuild a PUCTSampler"),
    "streaming missing": (_replace("checkpoints/epoch_0001/streaming.json", None), "streaming.json is missing"),
    "metrics damaged line": (lambda run: (run / "metrics.jsonl").write_text('{"progress/epoch": 0}\n{oops\n' + (run / "metrics.jsonl").read_text()),
                             "metrics.jsonl line 2 is not valid JSON"),
    "logs lack a finished epoch": (_drop_epoch_1, "metrics.jsonl lacks epoch 1"),
    "metrics a FIFO": (lambda run: (_replace("metrics.jsonl", None)(run), os.mkfifo(run / "metrics.jsonl")), "metrics.jsonl is a FIFO"),
    "trajectories -> /dev/zero": (lambda run: (_replace("trajectories.jsonl", None)(run), (run / "trajectories.jsonl").symlink_to("/dev/zero")),
                                  "trajectories.jsonl is a symbolic link"),
}


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_corrupted_resume_is_one_line_naming_the_file(case, tmp_path, finished):
    damage, words = CORRUPTIONS[case]
    run = copy_run(finished[1], tmp_path / "run")
    damage(run)
    resume_refused(run, words, tmp_path)


def test_corrupted_resume_on_the_command_line_then_a_valid_resume(tmp_path, finished):
    run = copy_run(finished[1], tmp_path / "run")
    _truncate(ADAPTER, 100)(run)                                       # found only when the checkpoint is loaded
    before = tree(run)
    refused(cli("train", "--config", run / "config.json", "--resume", "--out", run, "--quiet"), f"{ADAPTER} is not a safetensors file")
    test_eq(tree(run), before)
    good = copy_run(finished[1], tmp_path / "good")
    proc = cli("train", "--config", good / "config.json", "--resume", "--out", good, "--quiet")
    test_eq((proc.returncode, proc.stderr), (0, ""))                   # finished: loads the checkpoint, trains nothing more


# ---- report reads regular files only --------------------------------------------------------------------------------------

def test_report_refuses_fifo_and_device_then_reports(tmp_path, finished):
    fifo = copy_run(finished[1], tmp_path / "fifo")
    (fifo / "metrics.jsonl").unlink(); os.mkfifo(fifo / "metrics.jsonl")
    refused(cli("report", fifo, timeout=120), "metrics.jsonl is not a regular file (a FIFO)")      # returns, never blocks
    zero = copy_run(finished[1], tmp_path / "zero")
    (zero / "metrics.jsonl").unlink(); (zero / "metrics.jsonl").symlink_to("/dev/zero")
    refused(cli("report", zero, timeout=120), "metrics.jsonl is a symbolic link")
    (zero / "metrics.jsonl").unlink(); (zero / "metrics.jsonl").write_text('{"progress/epoch": 0, "mi/token_mean": "x"}\n')
    proc = cli("report", zero, finished[1])
    test_eq(proc.returncode, 1)                                       # tabulated, but its logs were edited: flagged
    rows = proc.stdout.splitlines()
    test_eq(rows[1].split()[4:], ["1", "-", "-", "-", "-", "EDITED"])  # a damaged value shows as '-', not a crash
    test_eq((rows[2].split()[4], rows[2].split()[-1]), ("2", "ok"))
    assert "undefined (a value is missing)" in proc.stdout, proc.stdout   # compared with the other run: nothing to compare
    assert proc.stderr.startswith("ugttt: warning: ") and "metrics.jsonl holds" in proc.stderr, proc.stderr


# ---- reuse checks the logs against the checkpoint -------------------------------------------------------------------------

def test_reuse_refuses_logs_shorter_than_the_checkpoint_then_reuses(tmp_path, finished):
    runs = tmp_path / "runs"
    run = copy_run(finished[1], run_path(runs, SPEC, smoke=True))
    _drop_epoch_1(run)
    before = tree(runs)
    with pytest.raises(RunDirError, match="metrics.jsonl lacks epoch 1, which checkpoints/latest.json says is finished"):
        ensure_runs([SPEC], runs, smoke=True, workers=1, progress=False)
    test_eq(tree(runs), before)
    got = ensure_runs([SPEC], finished[0], smoke=True, workers=1, progress=False)[SPEC]   # the intact run is reused as it is
    test_eq((got.n_epochs, len(got.epochs)), (2, 2))


# ---- tracked runs are named uniquely --------------------------------------------------------------------------------------

def test_two_runs_of_one_name_stay_two_trackio_runs(tmp_path):
    "Two tasks' ugttt-s0 go to two Trackio runs, each holding only its own values."
    a, b = tmp_path / "runs" / "cp26" / "ugttt-s0", tmp_path / "runs" / "ac1" / "ugttt-s0"
    test_eq(run_name(a) != run_name(b), True)
    script = textwrap.dedent(f"""
        import json
        from ugttt.tracking import open_tracker, run_name
        for i, d in enumerate([{str(a)!r}, {str(b)!r}]):
            with open_tracker("trackio", d, run_name(d), {{}}) as tr: tr.log({{"x": float(i)}}, step=0)
        from trackio.sqlite_storage import SQLiteStorage
        print(json.dumps([[r["x"] for r in SQLiteStorage.get_logs("ugttt", run_name(d))] for d in [{str(a)!r}, {str(b)!r}]]))""")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={**ENV, "TRACKIO_DIR": str(tmp_path / "trackio")})
    line = next((l for l in out.stdout.splitlines() if l.startswith("[[")), None)
    assert line is not None, out.stderr[-2000:]
    test_eq(json.loads(line), [[0.0], [1.0]])
