"""The README is generated from nbs/00_index.ipynb, and the counts of the tree it states hold (tools/make_readme.py)."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("make_readme", ROOT / "tools" / "make_readme.py")
make_readme = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(make_readme)


def test_the_readme_states_the_trees_counts():
    "Every present-tense count in the README (notebooks make docs executes, test files) equals the tree's."
    assert make_readme.stale_counts(make_readme.render()) == []


def test_a_stale_count_is_named():
    "A count that no longer matches the tree is caught and named with the true count; a past count is left alone."
    n = make_readme._site_notebooks()
    stale = make_readme.stale_counts(f"`make docs` executes the {n + 3} notebooks; when the site had 39 notebooks it took 4 min")
    assert stale == [f"README says 'executes the {n + 3} notebooks' but there are {n} notebooks `make docs` executes"]
    assert make_readme.stale_counts(f"`make docs` executes the {n} notebooks") == []
