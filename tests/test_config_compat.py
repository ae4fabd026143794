"""Configs written before the puct and sandbox sections existed still load: a run directory's stored config.json (flat
puct_* and sandbox fields, as ugttt wrote them until then), a YAML file with the flat names, and the flat flags."""
import json, shutil
from pathlib import Path

import pytest

from ugttt.cli import build_parser, config_from_args
from ugttt.config import PUCTConfig, SandboxConfig, config_from_dict, config_to_dict
from ugttt.presets import make_config
from ugttt.config_files import config_diff, load_config, stored_config_diff

DATA = Path(__file__).parent / "data" / "config_v1"
STORED = json.loads((DATA / "config.json").read_text())   # table 1's tiny ac1 ugttt seed-0 run, written by the flat-field ugttt
SAME = dict(epochs=6, groups_per_epoch=4)                  # what table 1 passed besides task, method, preset and seeds


def test_the_stored_file_is_the_flat_format():
    assert {"puct_c", "puct_max_buffer", "sandbox_workers", "executor"} <= set(STORED) and "puct" not in STORED


def test_a_flat_stored_config_reads_as_the_same_run():
    new = make_config("ac1", "ugttt", "tiny", **SAME)
    assert config_from_dict(STORED) == new
    assert config_diff(STORED, new) == []


def test_a_flat_run_directory_may_be_resumed_and_reused(tmp_path):
    run = tmp_path / "ugttt-s0"; run.mkdir(); shutil.copy(DATA / "config.json", run / "config.json")
    assert stored_config_diff(run, make_config("ac1", "ugttt", "tiny", **SAME)) == []
    assert stored_config_diff(run, make_config("ac1", "ugttt", "tiny", **SAME, **{"puct.c": 2.0})) == ["puct.c: 1.0 -> 2.0"]
    # how the run executes may differ, as before: the whole sandbox section is operational
    assert stored_config_diff(run, make_config("ac1", "ugttt", "tiny", **SAME, **{"sandbox.workers": 8})) == []


def test_a_new_config_json_has_the_sections():
    d = config_to_dict(make_config("ac1", "ugttt", "tiny"))
    assert d["puct"] == {"c": 1.0, "topk_children": 2, "max_buffer": 1000, "backup": "ttt_discover"}
    assert d["sandbox"] == {"workers": 2, "executor": "local", "isolation": "auto", "ray_address": None}
    assert not {"puct_c", "sandbox_workers", "executor"} & set(d)


def test_a_flat_yaml_file_loads():
    c = load_config(DATA / "run.yaml")
    assert (c.task, c.puct, c.sandbox.workers) == ("ac1", PUCTConfig(), 3)


@pytest.mark.parametrize("argv, want", [
    (["--puct_c", "0.5", "--sandbox_workers", "4"], (PUCTConfig(c=0.5), SandboxConfig(workers=4))),
    (["--puct.c", "0.5", "--sandbox.workers", "4"], (PUCTConfig(c=0.5), SandboxConfig(workers=4))),
    (["--sandbox_isolation", "mountns", "--puct_backup", "reference"],
     (PUCTConfig(backup="reference"), SandboxConfig(isolation="mountns"))),
])
def test_flat_and_dotted_flags_set_the_same_fields(argv, want):
    args = build_parser().parse_args(["train", "--out", "x", *argv])
    cfg = config_from_args(args)
    assert (cfg.puct, cfg.sandbox) == want


def test_a_flat_name_and_its_dotted_twin_must_agree():
    with pytest.raises(ValueError, match="puct_c \\(0.5\\) and puct.c \\(0.7\\) disagree"):
        config_from_dict({**STORED, "puct": {"c": 0.7}, "puct_c": 0.5})
