"""The embedded default model: loading, the task line decides the task (no parent, root, parent near the best known),
the thinking phase comes first, LoRA on q/k/v/o. That a wheel ships the model, and loads and trains it in a bare venv,
is tools/wheel_smoke.py's job (`make test`)."""
import json
import warnings

import pytest
import torch

from ugttt.corpus import CORPUS_VERSION, evaluate_at_root, generate_programs
from ugttt.default_model import DEFAULT_MODEL_DIR, MODEL_FILES, load_default_model, sample_programs
from ugttt.tasks import COMPACT_PROGRAM_MARKER, TASK_NAMES, THINK_END, THINK_START, State, extract_program, get_task

pytestmark = pytest.mark.model   # not in test-fast (pytest.ini): samples from the embedded model

N = 16   # samples per prompt


@pytest.fixture(scope="module")
def default_model():
    torch.set_num_threads(2)
    return load_default_model()


def test_default_model_loads_through_from_pretrained(default_model):
    model, tokenizer = default_model
    assert type(model).__name__ == "Qwen3ForCausalLM" and type(model).__module__.startswith("transformers.")
    assert model.dtype == torch.float32 and not model.training
    n_params = sum(p.numel() for p in model.parameters())
    assert 1e6 < n_params < 5e6                                        # a few million parameters at most
    assert tokenizer(COMPACT_PROGRAM_MARKER, add_special_tokens=False)["input_ids"] == [2]   # one token
    for tag in (THINK_START, THINK_END):                              # one token each, kept when decoding
        ids = tokenizer(tag, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1 and tokenizer.decode(ids, skip_special_tokens=True) == tag, tag
    info = json.loads((DEFAULT_MODEL_DIR / "training_info.json").read_text())
    assert info["corpus_version"] == CORPUS_VERSION and info["n_params"] == n_params
    assert info["final_loss"] < info["loss_curve"][0][1]               # training really reduced the loss
    size = sum((DEFAULT_MODEL_DIR / f).stat().st_size for f in MODEL_FILES)
    assert size < 10 * 2**20, f"default model files are {size / 2**20:.1f} MB"


def _parents(name):
    "The three parents of the task-line test: none, the root state, and a program of the task scored near the best known."
    task = get_task(name)
    code = generate_programs(name, 1, seed=11)[0]["code"]
    near = task.best_known * (1.01 if task.direction == "min" else 0.99)
    before = task.best_known * (1.03 if task.direction == "min" else 0.97)
    return {"none": None, "root": task.initial_state(),
            "near_best": State(code=code, bound=near, reward=0.0, parent_bounds=[before])}


@pytest.mark.parametrize("name", TASK_NAMES)
def test_the_task_line_decides_the_task(default_model, name):
    model, tokenizer = default_model
    task = get_task(name)
    jobs, where = [], []
    for kind, parent in _parents(name).items():
        texts = sample_programs(model, tokenizer, task.prompt(parent, style="compact"), N, seed=1)
        jobs += [(name, t) for t in texts]
        where += [kind] * len(texts)
        thinking_first = sum(t.startswith(THINK_START) and THINK_END in t[:400] for t in texts)
        entry = sum(f"def {task.entry_point}(" in extract_program(t) for t in texts)
        assert thinking_first >= 12, (kind, thinking_first, texts[0][:300])
        assert entry >= 12, (kind, entry, texts[0][:300])
    evals = evaluate_at_root(jobs)
    for kind in ("none", "root", "near_best"):
        correct = sum(e.correct and e.reward > 0 for e, k in zip(evals, where) if k == kind)
        assert correct >= 9, (name, kind, correct, [e.error for e, k in zip(evals, where) if k == kind][:4])


def test_lora_on_qkvo_attaches_and_changes_the_logits():
    from peft import LoraConfig, get_peft_model
    model, tokenizer = load_default_model()                            # a fresh copy: peft edits the model in place
    t = get_task("ac1")
    enc = tokenizer(t.prompt(t.initial_state(), style="compact"), return_tensors="pt", add_special_tokens=False)
    with torch.no_grad(): before = model(**enc).logits
    torch.manual_seed(0)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                     init_lora_weights=False, lora_dropout=0.0)
    with warnings.catch_warnings():                                    # peft calls a transformers API deprecated in v5
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        peft_model = get_peft_model(model, cfg)
    lora_modules = [n for n, _ in peft_model.named_modules() if n.endswith(("q_proj", "k_proj", "v_proj", "o_proj"))]
    assert len(lora_modules) == 4 * model.config.num_hidden_layers
    peft_model.eval()
    with torch.no_grad():
        after = peft_model(**enc).logits
        with peft_model.disable_adapter(): base = peft_model(**enc).logits
    assert after.shape == before.shape and not torch.allclose(after, before, atol=1e-4)
    assert torch.allclose(base, before, atol=1e-5)                     # disabling the adapter restores the base
