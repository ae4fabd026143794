"""Run untrusted generated programs fast and safely: warm zygotes inside a confining isolation mode fork one confined process per program, and only plain data comes back."""
# Written by hand, not exported from a notebook (as ugttt/__init__.py): the public names of the submodules, each loaded
# on first use (PEP 562), so that importing one submodule (ugttt.sandbox.budget, say) does not load the others.
# tests/test_packaging.py checks that these names are exactly the union of the submodules' __all__.
import importlib

SUBMODULES = {   # submodule -> its public names (its __all__), in reading order (nbs/50_sandbox_protocol ... 59_sandbox_ray)
    'protocol': ('to_plain', 'send_msg', 'recv_msg'),
    'procs': ('descendants', 'others', 'kill_all', 'sweep', 'wipe', 'NCPU', 'TICK_S', 'MEMORY_POLL_S', 'MAX_FDS', 'socket_meter_works',
              'Meter'),
    'zygote': ('seccomp_filter', 'prctl'),
    'confine': ('MODES', 'CONFINING', 'IsolationUnavailable', 'UnconfinedWarning', 'python_dirs', 'isolation_command', 'probe',
                'detect_isolation', 'isolation_report'),
    'results': ('MAX_RESULT_VALUES', 'MAX_RESULT_DEPTH', 'MAX_RESULT_STRING_BYTES', 'RunResult', 'decode_result',
                'truncate_output', 'ProgramLimits', 'describe_outcome'),
    'cgroups': ('CONTROLLERS', 'UID_BASE', 'cgroup_bases', 'WorkerCgroups', 'take_uid', 'give_uid'),
    'worker': ('THREAD_VARS', 'BOOT', 'sandbox_command', 'zygote_source', 'WorkerLost', 'Worker'),
    'pool': ('DEFAULT_PRELOAD', 'remove_tree', 'Sandbox', 'default_sandbox'),
    'budget': ('BUDGET_CLOCKS', 'WALL_BACKSTOP', 'budget_limits', 'check_budget', 'ChildOutcome', 'run_in_child'),
    'ray': ('Executor', 'make_executor', 'RaySandbox'),
}
_WHERE = {name: mod for mod, names in SUBMODULES.items() for name in names}
__all__ = list(_WHERE)


def __getattr__(name: str):
    "A public name of a submodule (or a submodule itself), imported on first use."
    if name in _WHERE: return getattr(importlib.import_module(f'{__name__}.{_WHERE[name]}'), name)
    if name in SUBMODULES: return importlib.import_module(f'{__name__}.{name}')
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__() -> list:
    return sorted({*globals(), *__all__, *SUBMODULES})
