"""`ugttt.replay` on real runs: the default variant reproduces the logged gradient norms exactly (float equality), every
variant starts from the run's state and the run's groups, a baseline run (K = 1) replays too, a regenerated epoch that
differs from the log or a missing checkpoint is refused in one line, the run directory is never written, and the
`ugttt replay` verb does all of it from the command line."""
import json
from dataclasses import asdict

import pytest
from fastcore.test import test_eq
from safetensors.torch import load_file, save_file

from security_run import cli, copy_run, refused, tree   # tests/ is on sys.path under pytest
from ugttt.config import SandboxConfig
from ugttt.reproduce import RunSpec, ensure_runs, run_path
from ugttt.rundir import read_jsonl
from ugttt.replay import VARIANTS, ReplayError, replay
from ugttt.sandbox import Sandbox

pytestmark = pytest.mark.training   # trains a smoke run (the shared one, conftest's `finished`) and replays its epochs


@pytest.fixture(scope="module")
def sandbox():
    "One sandbox for the in-process replays (the command line's replay makes the run config's own)."
    with Sandbox(workers=2, budget_s=5.0) as sb: yield sb


def epoch_record(run, epoch: int) -> dict:
    "The run's logged record of one epoch."
    (rec,) = [r for r in read_jsonl(run / "metrics.jsonl")[0] if r.get("progress/epoch") == epoch]
    return rec


def rows_of(result: dict, variant: str) -> list[dict]:
    return [r for r in result["rows"] if r["variant"] == variant]


def test_as_trained_reproduces_the_logged_gradient_norms(finished, sandbox):
    "Epoch 0 from the run's seed and epoch 1 from epoch 0's checkpoint: the gradient norms are the logged floats, and nothing in the run changes."
    _, run = finished
    before = tree(run)
    for epoch in (0, 1):
        r = replay(run, epoch, sandbox=sandbox)
        rec = epoch_record(run, epoch)
        test_eq([x["grad_norm"] for x in rows_of(r, "as_trained")], [rec["adapter_0/grad_norm"], rec["adapter_1/grad_norm"]])
        test_eq((r["rollouts"], r["threads"]), (4, rec["torch/threads"]))
    test_eq(tree(run), before)


def test_every_variant_starts_from_the_same_state(finished, sandbox):
    "All variants: one KL before per member; lr_over_k has as_trained's gradient exactly (same state, same dropout draws) and a smaller step."
    _, run = finished
    epoch = next((e for e in (1, 0) if epoch_record(run, e)["train/num_rollouts"] > 0), None)   # an epoch with a gradient
    assert epoch is not None, "the smoke run kept no rollout in either epoch: no update to compare variants on"
    r = replay(run, epoch, ["lr_over_k", "all"], sandbox=sandbox)
    test_eq([x["variant"] for x in r["rows"]][::2], ["lr_over_k"] + [v for v in VARIANTS if v != "lr_over_k"])
    for k in (0, 1):
        mine = [x for x in r["rows"] if x["member"] == k]
        test_eq(len({x["kl_before"] for x in mine}), 1)
        by = {x["variant"]: x for x in mine}
        test_eq(by["lr_over_k"]["grad_norm"], by["as_trained"]["grad_norm"])
        assert by["lr_over_k"]["update_norm"] < by["as_trained"]["update_norm"], by
        assert by["dropout_off"]["grad_norm"] != by["as_trained"]["grad_norm"], by   # dropout really switched off
        assert by["as_trained"]["kl_after"] != by["as_trained"]["kl_before"], by
    # the row filters: negative_only trains on the kept rollouts the log gave a negative advantage, and only on them
    logged = [x for x in read_jsonl(run / "metrics.jsonl")[0] if x.get("rollout/epoch") == epoch]
    test_eq(rows_of(r, "negative_only")[0]["n_kept"], sum(x["rollout/kept"] and x["rollout/advantage"] < 0 for x in logged))
    test_eq(rows_of(r, "positive_only")[0]["n_kept"], sum(x["rollout/kept"] and x["rollout/advantage"] > 0 for x in logged))
    test_eq(rows_of(r, "as_trained")[0]["n_kept"], epoch_record(run, epoch)["train/num_rollouts"])


def test_a_baseline_run_replays(tmp_path, sandbox):
    "K = 1: as_trained reproduces the logged gradient norm; a variant gives one row."
    spec = RunSpec("cp26", "baseline", 0)
    ensure_runs([spec], tmp_path, smoke=True, workers=1, progress=False)
    run = run_path(tmp_path, spec, smoke=True)
    r = replay(run, 1, ["positive_only"], sandbox=sandbox)
    test_eq([x["variant"] for x in r["rows"]], ["positive_only", "as_trained"])
    test_eq(rows_of(r, "as_trained")[0]["grad_norm"], epoch_record(run, 1)["adapter_0/grad_norm"])


def test_a_run_that_does_not_regenerate_is_refused(finished, tmp_path, sandbox):
    "A checkpoint whose adapter was moved (a valid file, other numbers): the regenerated epoch differs from the log, in one line."
    _, run = finished
    moved = copy_run(run, tmp_path / "moved")
    f = moved / "checkpoints" / "epoch_0000" / "adapters" / "adapter_0" / "adapter_model.safetensors"
    save_file({n: t + 0.05 for n, t in load_file(f).items()}, f)
    with pytest.raises(ReplayError) as e: replay(moved, 1, sandbox=sandbox)
    assert "regenerating epoch 1 does not reproduce the run: group 0 rollout" in str(e.value) and "\n" not in str(e.value)


def test_cli_replay(finished, tmp_path):
    "`ugttt replay` prints the table and writes --json outside the run; bad input and a missing checkpoint are one line, exit 2."
    _, run = finished
    before = tree(run)
    out = tmp_path / "replay.json"
    proc = cli("replay", run, "--epoch", "1", "--variant", "dropout_off", "own", "--json", out, "--quiet")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert "as_trained reproduced the logged gradient norms exactly" in lines[0], lines[0]
    test_eq([l.split()[0] for l in lines[2:]], ["dropout_off", "dropout_off", "own", "own", "as_trained", "as_trained"])
    result = json.loads(out.read_text())
    test_eq(result["sandbox"], asdict(SandboxConfig()))                      # the defaults, not the run's section
    rec = epoch_record(run, 1)
    test_eq([x["grad_norm"] for x in rows_of(result, "as_trained")], [rec["adapter_0/grad_norm"], rec["adapter_1/grad_norm"]])
    test_eq(tree(run), before)
    refused(cli("replay", run, "--epoch", "1", "--variant", "sideways"), "unknown variant 'sideways'; known: as_trained")
    refused(cli("replay", run, "--epoch", "2"), "epoch 2 has no logged update to replay")
    refused(cli("replay", run, "--epoch", "1", "--json", run / "replay.json"), "lies inside the run directory")
    gone = copy_run(run, tmp_path / "gone")
    (gone / "checkpoints" / "epoch_0000" / "adapters" / "adapter_1" / "adapter_model.safetensors").unlink()
    refused(cli("replay", gone, "--epoch", "1"), "adapter_model.safetensors is missing: a run keeps every epoch's checkpoint")
    test_eq(tree(run), before)


def test_a_variant_that_does_not_apply_is_refused(finished, tmp_path):
    "A run trained on its own rollouts: 'drop' (which acts on other members' rollouts) is refused by name, before any model loads."
    _, run = finished
    own = copy_run(run, tmp_path / "own")
    cfg = json.loads((own / "config.json").read_text())
    cfg["update"]["train_on"] = "own"
    (own / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError) as e: replay(own, 1, ["drop"])
    assert "variant 'drop' does not apply to" in str(e.value) and "train_on='own'" in str(e.value), str(e.value)


# ---- the replay proves itself (issue 46, item 5) -------------------------------------------------------------------
DROP = dict(epochs=3, groups_per_epoch=1, group_size=5, decode_groups=1, budget_s=2.0, seed=0,
            **{"policy.n_adapters": 5, "policy.max_new_tokens": 96, "policy.code_budget": 64, "update.shared_negatives": "drop"})


@pytest.fixture(scope="module")
def drop_run(tmp_path_factory, sandbox):
    "ensemble_only, K = 5, shared_negatives='drop', tiny preset shrunk to 3 epochs of one group of 5 (about 20 s): its directory."
    from ugttt.presets import make_config
    from ugttt.trainer import train
    run = tmp_path_factory.mktemp("drop") / "run"
    train(make_config("cp26", "ensemble_only", "tiny", **DROP), run, progress=False, sandbox=sandbox)
    return run


def test_as_trained_gives_the_saved_checkpoint_byte_for_byte(drop_run, tmp_path, sandbox):
    """The last epoch of a K = 5 drop run, replayed from the previous checkpoint: the logged grad norms and pg_loss, and
    (checked by replay against checkpoints/epoch_0002) every adapter tensor and AdamW state byte for byte; a checkpoint
    moved by one ulp of one adapter entry, or in one AdamW moment, is refused, naming it."""
    import torch
    from ugttt.rundir import TRAINER_STATE, adapter_weights, checkpoint_path
    test_eq(sorted(p.name for p in (drop_run / "checkpoints").iterdir() if p.is_dir()), ["epoch_0000", "epoch_0001", "epoch_0002"])
    rec = epoch_record(drop_run, 2)
    assert rec["train/num_rollouts"] > 0 and len({rec[f"adapter_{k}/pg_loss"] for k in range(5)}) > 1, rec   # a real update, drop acting
    before = tree(drop_run)
    r = replay(drop_run, 2, sandbox=sandbox)                                  # raises unless as_trained gives epoch_0002's state
    mine = rows_of(r, "as_trained")
    test_eq([x["grad_norm"] for x in mine], [rec[f"adapter_{k}/grad_norm"] for k in range(5)])
    test_eq([x["pg_loss"] for x in mine], [rec[f"adapter_{k}/pg_loss"] for k in range(5)])
    test_eq(tree(drop_run), before)
    # the comparison is live: a copy whose epoch_0002 differs by one ulp of one adapter entry, or in one AdamW moment
    ulp = copy_run(drop_run, tmp_path / "ulp")
    f = adapter_weights(checkpoint_path(ulp, 2), "adapter_3")
    w = load_file(f); name = sorted(w)[0]; t = w[name].clone()
    t.view(-1)[0] = torch.nextafter(t.view(-1)[0], torch.tensor(float("inf"), dtype=t.dtype))
    save_file({**w, name: t}, f)
    with pytest.raises(ReplayError) as e: replay(ulp, 2, sandbox=sandbox)
    assert f"does not give the state the run saved: adapter 3's {name} differs from checkpoints/epoch_0002's" in str(e.value), str(e.value)
    moment = copy_run(drop_run, tmp_path / "moment")
    path = checkpoint_path(moment, 2) / TRAINER_STATE
    st = torch.load(path, weights_only=True)
    st["optimizers"][-1]["state"][0]["exp_avg"] *= 0.5                       # still a state AdamW could hold: only smaller
    torch.save(st, path)
    with pytest.raises(ReplayError) as e: replay(moment, 2, sandbox=sandbox)
    k = len(st["optimizers"]) - 1                                            # one optimiser over the stacks, or one per member
    assert f"optimiser {k}'s exp_avg of parameter 0 differs from checkpoints/epoch_0002's" in str(e.value), str(e.value)
