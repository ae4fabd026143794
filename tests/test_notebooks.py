"""Every notebook in nbs/ is a test: each one runs top to bottom and its assert cells must pass."""
import os
from pathlib import Path
import pytest
import nbdev.test as nbt   # not `from nbdev.test import test_nb`: pytest would collect test_nb itself

ROOT = Path(__file__).resolve().parents[1]
NBS = sorted((ROOT/'nbs').glob('[0-9]*.ipynb'))
# `#| slow` cells run only with UGTTT_SLOW=1 (make slow); `#| cuda` cells only where a GPU is present.
SKIP = ['notest'] + ([] if os.environ.get('UGTTT_SLOW') else ['slow'])
# Tiers (pytest.ini): test-fast runs only the notebooks listed here, those of argument checks, math, tasks, prompts,
# config (with its reference switches), run directories and analysis (no models, sandbox suites or training), by
# measured time (pytest --durations, nice -n 19, a 2-core machine at load 6): 0.1 to 17 s each, 25 to 30 s together.
# The next cheapest stay out to keep test-fast under 2 min: 50-56 and 58_sandbox_* (2 s, sandbox internals), 09_corpus
# (7 s), 15_ensemble (8 s), 25_tracking (3 s, W&B), 32_plan (9 s, LoRA models), 33_cli (6 s); the rest took 15 to
# 200 s. A notebook not listed, a new one too, is marked `notebook`.
FAST = {'00_checks', '01_scoring', '04_family_syntax', '05_families', '06_prompts', '07_tasks', '11_uncertainty',
        '12_advantage', '13_regularizer', '14_propositions', '17_streaming', '20_loss', '23_puct', '24_rundir',
        '26_config', '27_reference', '29_metrics', '31_analysis', '41_task_ac1', '42_task_ac2',
        '43_task_cp26', '44_task_erdos'}


def _has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception: return False


def test_there_are_notebooks():
    assert len(NBS) >= 1, 'no notebook found under nbs/: nothing would be executed'


@pytest.mark.parametrize('nb', [nb if nb.stem in FAST else pytest.param(nb, marks=pytest.mark.notebook) for nb in NBS],
                         ids=lambda p: p.name)
def test_notebook(nb, monkeypatch):
    monkeypatch.chdir(nb.parent)
    skip = SKIP + ([] if _has_cuda() else ['cuda'])
    ok, secs = nbt.test_nb(nb, skip_flags=skip, basepath=ROOT)
    assert ok, f'{nb.name} failed'
