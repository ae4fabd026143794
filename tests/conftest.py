"""Suite-wide settings: hypothesis runs reproducibly (same examples every run, no timing deadline on a loaded 2-core
machine), fastcore's test helpers imported into a test module are not collected as tests themselves, and tests marked
`slow` run only with UGTTT_SLOW=1 (`make slow`), as the notebooks' `#| slow` cells do."""
import os
import fastcore.test
from hypothesis import settings

settings.register_profile('ugttt', derandomize=True, deadline=None, database=None, print_blob=True)
settings.load_profile('ugttt')

for _helper in (fastcore.test.test_eq, fastcore.test.test_close, fastcore.test.test_fail, fastcore.test.test_ne,
                fastcore.test.test_is, fastcore.test.test_eq_type, fastcore.test.test_warns, fastcore.test.test_stdout):
    _helper.__test__ = False   # pytest would collect `test_eq` & co. as tests wherever a module imports them


import pytest


def pytest_collection_modifyitems(config, items):
    "Skip the tests marked `slow` unless UGTTT_SLOW=1: `make test` stays within its 15 minutes (pytest.ini says why each is)."
    if os.environ.get("UGTTT_SLOW"): return
    skip = pytest.mark.skip(reason="slow: runs with UGTTT_SLOW=1 (make slow)")
    for item in items:
        if item.get_closest_marker("slow"): item.add_marker(skip)


@pytest.fixture(scope="session")
def finished(tmp_path_factory):
    "One finished smoke run shared by the security tests (tests/security_run.py): (its runs_dir, its directory)."
    from security_run import finished_run   # tests/ is on sys.path under pytest
    return finished_run(tmp_path_factory.mktemp("shared") / "runs")
