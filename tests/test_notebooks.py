"""Every notebook in nbs/ is a test: each one runs top to bottom and its assert cells must pass."""
import os
from pathlib import Path
import pytest
import nbdev.test as nbt   # not `from nbdev.test import test_nb`: pytest would collect test_nb itself

ROOT = Path(__file__).resolve().parents[1]
# every numbered notebook, the tutorials in nbs/tutorials/ too, named by its path under nbs/ without .ipynb
NBS = sorted(p for p in (ROOT/'nbs').rglob('[0-9]*.ipynb') if '.ipynb_checkpoints' not in p.parts)
name = lambda nb: nb.relative_to(ROOT/'nbs').with_suffix('').as_posix()
# `#| slow` cells run only with UGTTT_SLOW=1 (make slow); `#| cuda` cells only where a GPU is present.
SKIP = ['notest'] + ([] if os.environ.get('UGTTT_SLOW') else ['slow'])
# Tiers (pytest.ini): test-fast runs only the notebooks listed here, those of argument checks, math, tasks, prompts,
# config (with its reference switches), run directories and analysis (no models, sandbox suites or training), by
# measured time (pytest --durations, nice -n 19, a 2-core machine at load 6): 0.1 to 17 s each, 25 to 30 s together.
# The next cheapest stay out to keep test-fast under 2 min: 50-56 and 58_sandbox_* (2 s, sandbox internals), 39_corpus
# (7 s), 13_ensemble (8 s), 62_tracking (3 s, W&B), 65_plan (9 s, LoRA models), 66_cli (6 s); the rest took 15 to
# 200 s. A notebook not listed, a new one too, is marked `notebook`.
FAST = {'60_checks', '31_scoring', '33_family_syntax', '34_families', '32_prompts', '30_tasks', '10_uncertainty',
        '11_advantage', '12_regularizer', 'tutorials/02_propositions', '15_streaming', '18_loss', '20_puct', '61_rundir',
        '21_config', '23_reference', '24_metrics', '64_analysis', '35_task_ac1', '36_task_ac2',
        '37_task_cp26', '38_task_erdos'}


def _has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception: return False


def test_there_are_notebooks():
    assert len(NBS) >= 1, 'no notebook found under nbs/: nothing would be executed'
    assert {'tutorials/01_one_group', 'tutorials/02_propositions', 'tutorials/03_your_problem'} <= {name(nb) for nb in NBS}
    assert FAST <= {name(nb) for nb in NBS}, f'FAST names notebooks that do not exist: {FAST - {name(nb) for nb in NBS}}'


@pytest.mark.parametrize('nb', [nb if name(nb) in FAST else pytest.param(nb, marks=pytest.mark.notebook) for nb in NBS],
                         ids=lambda p: p.relative_to(ROOT/'nbs').as_posix())
def test_notebook(nb, monkeypatch):
    monkeypatch.chdir(nb.parent)
    skip = SKIP + ([] if _has_cuda() else ['cuda'])
    ok, secs = nbt.test_nb(nb, skip_flags=skip, basepath=ROOT)
    assert ok, f'{nb.name} failed'
