"""The embedded default model: loading, the quality bars on a reduced sample, LoRA on q/k/v/o, and a fresh wheel install."""
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import pytest
import torch

from ugttt.tasks import COMPACT_PROGRAM_MARKER, TASK_NAMES, get_task
from ugttt.toy import CORPUS_VERSION, DEFAULT_MODEL_DIR, MODEL_FILES, load_default_model, quality_report

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def default_model():
    return load_default_model()


def test_default_model_loads_through_from_pretrained(default_model):
    model, tokenizer = default_model
    assert type(model).__name__ == "Qwen3ForCausalLM" and type(model).__module__.startswith("transformers.")
    assert model.dtype == torch.float32 and not model.training
    n_params = sum(p.numel() for p in model.parameters())
    assert 1e6 < n_params < 5e6                                        # "a few million parameters at most"
    assert tokenizer(COMPACT_PROGRAM_MARKER, add_special_tokens=False)["input_ids"] == [2]   # one token
    info = json.loads((DEFAULT_MODEL_DIR / "training_info.json").read_text())
    assert info["corpus_version"] == CORPUS_VERSION and info["n_params"] == n_params
    assert info["final_loss"] < info["loss_curve"][0][1]               # training really reduced the loss
    size = sum((DEFAULT_MODEL_DIR / f).stat().st_size for f in MODEL_FILES)
    assert size < 10 * 2**20, f"default model files are {size / 2**20:.1f} MB"


def test_quality_bars_on_a_reduced_sample(default_model):
    model, tokenizer = default_model
    report = quality_report(model, tokenizer, n=16, seed=123)
    for task, r in report.items():
        assert r["valid_frac"] >= 0.5, (task, r)
        assert r["n_families"] >= 3 and r["entropy_bits"] >= 1.0, (task, r)
        assert r["best_below_best_known"], (task, r)


def test_lora_on_qkvo_attaches_and_changes_the_logits(default_model):
    from peft import LoraConfig, get_peft_model
    from ugttt.toy import load_default_model
    model, tokenizer = load_default_model()                            # a fresh copy: peft edits the model in place
    t = get_task("ac1")
    enc = tokenizer(t.prompt(t.initial_state(), style="compact"), return_tensors="pt", add_special_tokens=False)
    with torch.no_grad(): before = model(**enc).logits
    torch.manual_seed(0)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                     init_lora_weights=False, lora_dropout=0.0)
    peft_model = get_peft_model(model, cfg)
    lora_modules = [n for n, _ in peft_model.named_modules() if n.endswith(("q_proj", "k_proj", "v_proj", "o_proj"))]
    assert len(lora_modules) == 4 * model.config.num_hidden_layers
    peft_model.eval()
    with torch.no_grad():
        after = peft_model(**enc).logits
        with peft_model.disable_adapter(): base = peft_model(**enc).logits
    assert after.shape == before.shape and not torch.allclose(after, before, atol=1e-4)
    assert torch.allclose(base, before, atol=1e-5)                     # disabling the adapter restores the base


def test_fresh_wheel_install_ships_and_loads_the_model(tmp_path):
    src = tmp_path / "src"                                              # build from a copy: no build/ in the repo
    src.mkdir()
    for name in ("setup.py", "settings.ini", "README.md", "MANIFEST.in"):
        if (ROOT / name).exists(): shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "ugttt", src / "ugttt", ignore=shutil.ignore_patterns("__pycache__"))
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
                    str(src)], check=True, cwd=tmp_path)
    (wheel,) = wheels.glob("ugttt-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for f in MODEL_FILES: assert f"ugttt/assets/default_model/{f}" in names, f
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, cwd=tmp_path)
    code = ("import ugttt.toy as t, torch; m, tok = t.load_default_model(); "
            "assert str(t.DEFAULT_MODEL_DIR).startswith(%r), t.DEFAULT_MODEL_DIR; "
            "print(type(m).__name__, m.dtype, len(tok))" % str(target))
    env = {**os.environ, "PYTHONPATH": str(target), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("Qwen3ForCausalLM torch.float32")
