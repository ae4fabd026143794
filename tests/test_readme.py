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


# The README's shape (issue 56): a newcomer reads it in five minutes, installs with pip from its first code block and
# runs the quick start from its second; `make` is for developers and sits in its own section near the end.
import re, subprocess, sys
import pytest

MAX_LINES = 250
QUICK_START = [
    "ugttt train --task cp26 --method ugttt --preset tiny --groups_per_epoch 4 --out runs/cp26-ugttt",
    "ugttt train --task cp26 --method baseline --preset tiny --groups_per_epoch 4 --out runs/cp26-baseline",
    "ugttt report runs/cp26-ugttt runs/cp26-baseline",
    "ugttt best runs/cp26-ugttt",
]


def code_blocks(text: str) -> list[tuple[str, str]]:
    "Every fenced block of a markdown text as (language, code), in order."
    return re.findall(r"^```(\w*)\n(.*?)^```", text, re.M | re.S)


def test_the_readme_is_short_and_starts_with_pip_then_the_quick_start():
    "At most 250 lines; the first code block is the pip install (torch pinned, then the clone, the notebooks extra), the second the quick start's four commands; make only under Developing."
    text = make_readme.render()
    assert len(text.splitlines()) <= MAX_LINES, f"README.md has {len(text.splitlines())} lines, more than {MAX_LINES}"
    blocks = code_blocks(text)
    install, quick = blocks[0][1].splitlines(), blocks[1][1].splitlines()
    commands = [l.split("#")[0].strip() for l in install]
    assert "pip install torch==2.13.0" in commands and "pip install ." in commands and 'pip install ".[notebooks]"' in commands, install
    assert commands.index("pip install torch==2.13.0") < commands.index("pip install ."), "torch is installed first"
    assert quick == QUICK_START, quick
    sections = re.findall(r"^## (.+)$", text, re.M)
    assert sections[:2] == ["Install", "Quick start"] and "Developing" in sections, sections
    before_developing = text.split("\n## Developing\n")[0]
    assert not re.search(r"^make \w", before_developing, re.M), "a make target appears before the Developing section"


def test_every_relative_link_of_the_readme_and_docs_exists():
    "A link or image of the README or a docs/ page that points into the repository names a file or folder that exists."
    pages = [("README.md", make_readme.render())] + [(p.relative_to(ROOT).as_posix(), p.read_text()) for p in sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for name, text in pages:
        text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)                       # code is not linked
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"): continue          # another site, or an anchor on the page
            path = (ROOT / name).parent / target.split("#")[0]
            if not path.exists(): broken.append(f"{name}: {target}")
    assert broken == []


def python_blocks() -> list:
    "The README's python blocks, each as a pytest param; one that loads the model or runs programs carries those marks."
    params = []
    for i, (lang, code) in enumerate(b for b in code_blocks(make_readme.render()) if b[0] == "python"):
        heavy = any(w in code for w in ("load_default_model", "LoRAEnsemble", ".evaluate("))
        params.append(pytest.param(code, id=f"python-block-{i + 1}", marks=[pytest.mark.model, pytest.mark.sandbox] if heavy else []))
    return params


@pytest.mark.parametrize("code", python_blocks())
def test_each_python_block_runs_alone(code, tmp_path):
    "Each python block of the README runs on its own in a fresh interpreter, from a folder outside the checkout, offline."
    env = {k: v for k, v in __import__("os").environ.items()} | {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
