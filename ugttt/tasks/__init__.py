"""The benchmarks: the task core (`ugttt.tasks.core`, nbs/30_tasks) and one plug-in module per benchmark (ac1, ac2, cp26, erdos)."""
# Written by hand, not exported from a notebook (as ugttt/__init__.py). The core's names are imported here; TASK_NAMES
# (the benchmark modules on this package's __path__) and the names below that live in a benchmark or in the shared
# verifiers load on first use (PEP 562). tests/test_packaging.py checks that __all__ is the core's __all__ plus these.
import importlib

from .core import *   # noqa: F403  State, Evaluation, Task, get_task, check_task, task_names, extract_program, ...
from . import core

LAZY = {   # name -> the module it comes from
    'TASK_NAMES': None, 'MAX_ENTRIES': 'ugttt.scoring', 'Score': 'ugttt.scoring',
    'COMPACT_PROGRAM_MARKER': 'ugttt.prompts', 'STDOUT_TAIL_CHARS': 'ugttt.prompts', 'THINK_START': 'ugttt.prompts',
    'THINK_END': 'ugttt.prompts',
    'c1_upper_bound': 'ugttt.tasks.ac1', 'c2_lower_bound': 'ugttt.tasks.ac2',
}
__all__ = list(core.__all__) + list(LAZY)


def __getattr__(name: str):
    "TASK_NAMES (the benchmark modules found now), a re-exported name, or a benchmark module, loaded on first use."
    if name == 'TASK_NAMES': return task_names()   # noqa: F405
    if name in LAZY: return getattr(importlib.import_module(LAZY[name]), name)
    if name in task_names(): return importlib.import_module(f'{__name__}.{name}')   # noqa: F405
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__() -> list:
    return sorted({*globals(), *__all__})
