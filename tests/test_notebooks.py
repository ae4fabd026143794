"""Every notebook in nbs/ is a test: each one runs top to bottom and its assert cells must pass."""
import os
from pathlib import Path
import pytest
import nbdev.test as nbt   # not `from nbdev.test import test_nb`: pytest would collect test_nb itself

ROOT = Path(__file__).resolve().parents[1]
NBS = sorted((ROOT/'nbs').glob('[0-9]*.ipynb'))
# `#| slow` cells run only with UGTTT_SLOW=1 (make slow); `#| cuda` cells only where a GPU is present.
SKIP = ['notest'] + ([] if os.environ.get('UGTTT_SLOW') else ['slow'])


def _has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception: return False


def test_there_are_notebooks():
    assert len(NBS) >= 1, 'no notebook found under nbs/: nothing would be executed'


@pytest.mark.parametrize('nb', NBS, ids=lambda p: p.name)
def test_notebook(nb, monkeypatch):
    monkeypatch.chdir(nb.parent)
    skip = SKIP + ([] if _has_cuda() else ['cuda'])
    ok, secs = nbt.test_nb(nb, skip_flags=skip, basepath=ROOT)
    assert ok, f'{nb.name} failed'
