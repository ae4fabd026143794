"""The documentation site, built and checked in a real browser (`make docs-test`).

`tools/build_docs.py` executes every notebook into _build/docs (only the notebooks whose source or package changed
since the last build; the first build takes most of 15 minutes on 2 cores) and renders the site; then headless
Chromium opens the index (the README), 10_uncertainty and the Table 1 page, takes screenshots into
_build/docs/screenshots, and the test asserts that the math rendered (MathJax's output elements, no MathJax error),
every figure loaded (naturalWidth > 0) and no relative link of any page of the site is broken. Skipped unless
UGTTT_DOCS=1 (make docs-test) or UGTTT_SLOW=1 (make slow): it takes minutes and needs the `docs` extra and chromium.
"""
import json, os, shutil, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import build_docs as B   # its pure parts are tested here in a second; the site itself only under UGTTT_DOCS (below)


def needs_site(test):
    "Mark a test of the site itself: minutes, the docs extra and chromium; skipped unless UGTTT_DOCS or UGTTT_SLOW."
    for mark in (pytest.mark.docs,
                 pytest.mark.skipif(not (os.environ.get("UGTTT_DOCS") or os.environ.get("UGTTT_SLOW")),
                                    reason="the site build takes minutes: UGTTT_DOCS=1 (make docs-test) or UGTTT_SLOW=1"),
                 pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium (Debian: apt-get install chromium)")):
        test = mark(test)
    return test

HTML = ROOT / "_build" / "docs" / "html"
SHOTS = ROOT / "_build" / "docs" / "screenshots"


def test_links_into_the_site_stay_and_others_go_to_the_repository():
    site = {"README.md", "docs/install.md", "docs/results/README.md", "nbs/10_uncertainty.ipynb"}
    git = "https://github.com/ugttt/ugttt/blob/main"
    text = ("[a](docs/install.md) [b](docs/results/) [c](Makefile) ![d](docs/results/x.png) [e](https://x.org) "
            "[f](#top) [g](nbs/10_uncertainty.ipynb#eq-2)")
    assert B.rewrite_links(text, "", site) == (f"[a](docs/install.md) [b](docs/results/README.md) [c]({git}/Makefile) "
                                               f"![d]({git}/docs/results/x.png) [e](https://x.org) [f](#top) "
                                               "[g](nbs/10_uncertainty.ipynb#eq-2)")
    assert B.rewrite_links("[g](../nbs/10_uncertainty.ipynb) [h](../Makefile)", "docs", site) == \
        f"[g](../nbs/10_uncertainty.ipynb) [h]({git}/Makefile)"


def test_notebooks_cited_by_name_become_links_to_their_pages():
    "A notebook cited as code (`10_uncertainty`) links to its page from any folder; fenced code, links and unknown names stay."
    site = {"nbs/10_uncertainty.ipynb", "nbs/tutorials/01_one_group.ipynb"}
    text = ("see `10_uncertainty` and `tutorials/01_one_group`, not `99_nowhere` nor `x_10`; "
            "[`10_uncertainty`](x.ipynb)\n```\n`10_uncertainty`\n```\n")
    assert B.link_citations(text, "nbs", site) == (
        "see [`10_uncertainty`](10_uncertainty.ipynb) and [`tutorials/01_one_group`](tutorials/01_one_group.ipynb), "
        "not `99_nowhere` nor `x_10`; [`10_uncertainty`](x.ipynb)\n```\n`10_uncertainty`\n```\n")
    assert B.link_citations("`10_uncertainty`", "docs", site) == "[`10_uncertainty`](../nbs/10_uncertainty.ipynb)"
    assert B.link_citations("`10_uncertainty`", "nbs/tutorials", site) == "[`10_uncertainty`](../10_uncertainty.ipynb)"


def test_the_api_page_documents_every_public_module():
    "The API reference names every public module once, each through autodoc, and no private one."
    mods = B.api_modules()
    assert {"ugttt.loss", "ugttt.trainer", "ugttt.best", "ugttt.sandbox.pool", "ugttt.tasks.core"} <= set(mods), mods
    assert not [m for m in mods if "._" in m or m == "ugttt._modidx"]
    page = B.api_page(mods)
    assert page.startswith("# API reference") and page.count(".. automodule::") == len(mods) == len(set(mods))


def test_a_results_page_says_how_it_is_regenerated():
    "Each results page names its notebook and make target; Table 1's also its reading and figure; the paper's tables come first."
    assert B.result_source("table1") == ("table1", "make table1")
    assert B.result_source("table4_firing") == ("table4", "make reproduce")
    assert B.result_source("mechanism_stable_b") == ("mechanism_stable_b", "make mechanism-stable-b")
    assert B.result_source("mechanism") == ("mechanism", "make mechanism") and B.result_source("README") is None
    pre = B.result_preamble("table1")
    assert "`make table1`" in pre and "![figure2](figure2.png)" in pre and "(../table1-on-a-laptop.md)" in pre
    pages = ["docs/results/mechanism.md", "docs/results/table2.md", "docs/results/mechanism_stable_b.md", "docs/results/table1.md"]
    assert sorted(pages, key=B._paper_first)[:2] == ["docs/results/table1.md", "docs/results/table2.md"]


def test_a_page_opens_with_its_title():
    "The title moves above the import cells before it; a note above them stays first; a page without code before it is unchanged."
    import nbformat
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = [md("> note"), code("import torch"), code("import numpy"), md("# Title\n\n> subtitle"), code("x = 1")]
    assert [c.source for c in B.title_first(cells)] == ["> note", "# Title\n\n> subtitle", "import torch", "import numpy", "x = 1"]
    plain = [md("# Title"), code("x = 1")]
    assert B.title_first(plain) == plain


def test_a_slow_cell_shows_its_cached_output_or_says_it_was_not_run(tmp_path, monkeypatch):
    import nbformat
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# T\n\n> t"),
                                         nbformat.v4.new_code_cell("#| slow\nprint(1)"),
                                         nbformat.v4.new_code_cell("#| hide\nx = 2")])
    monkeypatch.setattr(B, "ROOT", tmp_path); (tmp_path / "nbs").mkdir()
    nbformat.write(nb, tmp_path / "nbs" / "t.ipynb")
    page = B.page_from_notebook("t", tmp_path / "nbs" / "t.ipynb", {}, False, set(), lambda m: None, "reused")
    notes = [c.source for c in page.cells if c.cell_type == "markdown" and c.source.startswith("> ")]
    assert len(notes) == 1 and notes[0].startswith("> **Not run in this build.** The cell below is a `#| slow` cell"), notes
    code = [c for c in page.cells if c.cell_type == "code"]
    assert code[0].source == "print(1)" and code[1].metadata["tags"] == ["remove-cell"]     # directives gone, hidden cell dropped
    out = nbformat.v4.new_output("stream", name="stdout", text="1\n")
    cache = {B.cell_key("t", "#| slow\nprint(1)"): dict(outputs=[out], made="2026-11-27 23:00 UTC", seconds=61.0, commit="abc")}
    page = B.page_from_notebook("t", tmp_path / "nbs" / "t.ipynb", cache, False, set(), lambda m: None, "reused")
    notes = [c.source for c in page.cells if c.cell_type == "markdown" and c.source.startswith("> ")]
    assert notes[0].startswith("> **Cached output.**") and "2026-11-27 23:00 UTC" in notes[0] and "61.0 s" in notes[0], notes
    assert [c for c in page.cells if c.cell_type == "code"][0].outputs[0]["text"] == "1\n"
    page = B.page_from_notebook("t", None, {}, False, set(), lambda m: None, "FAILED")              # a notebook that failed
    assert page.cells[0].source.startswith("> **This notebook failed to execute in this build**")


@pytest.fixture(scope="module")
def site():
    "The site, built by tools/build_docs.py as `make docs` builds it."
    pytest.importorskip("myst_nb", reason="the docs extra is not installed (make docs installs it)")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "build_docs.py")], cwd=ROOT, capture_output=True, text=True,
                          timeout=3600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return HTML


@needs_site
def test_pages_render_math_and_figures_in_chromium(site):
    from site_check import PAGES, inspect_pages
    if SHOTS.exists(): shutil.rmtree(SHOTS)
    info = inspect_pages(site, PAGES, SHOTS)
    print(json.dumps(info, indent=1))
    index, unc, table1 = (info[p] for p in PAGES)
    assert index["title"] == "ugttt" and unc["title"].startswith("Uncertainty") and table1["title"].startswith("Table 1"), info
    for page in ("index.html", "nbs/10_uncertainty.html"):
        i = info[page]
        assert i["math_sources"] > 0 and i["math_rendered"] == i["math_sources"], (page, i)   # every formula typeset
    assert unc["math_rendered"] >= 50, unc                                    # a page of equations, not one stray formula
    for page, i in info.items():
        assert i["math_errors"] == 0, (page, i)
        assert all(im["width"] > 0 for im in i["images"]), (page, i["images"])                # every figure loaded
    assert len(index["images"]) >= 2, index["images"]                         # the README's figures
    assert (site / "docs/results/table1.html").read_text().count("<tr") >= 10  # Table 1 as a table, a row per seed and mean
    for name in ("index.png", "nbs_10_uncertainty.png", "nbs_10_uncertainty-math.png", "docs_results_table1.png"):
        assert (SHOTS / name).stat().st_size > 10_000, name                   # a page was drawn, not a blank


@needs_site
def test_no_broken_link(site):
    from site_check import broken_links
    bad = broken_links(site)
    assert not bad, bad[:20]


@needs_site
def test_notebook_pages_have_outputs_and_say_what_was_not_run(site):
    text = lambda p: (site / p).read_text()
    assert "cell_output" in text("nbs/66_cli.html") and "One seed per method" in text("nbs/66_cli.html")   # outputs shown
    assert "<img" in text("nbs/66_cli.html")                                  # the report's figure, produced at build time
    for page in ("nbs/tutorials/02_propositions.html", "nbs/40_default_model.html"):    # their `#| slow` cells: cached or said so
        assert "Cached output." in text(page) or "Not run in this build." in text(page), page
    for page in site.glob("nbs/**/*.html"):
        assert "failed to execute in this build" not in page.read_text(), page.name
        assert "Not executed yet" not in page.read_text(), page.name
    for nb in (ROOT / "nbs").rglob("*.ipynb"):                               # the committed notebooks stay clean
        cells = json.loads(nb.read_text())["cells"]
        assert not any(c.get("outputs") for c in cells), f"{nb.name} has outputs"


@needs_site
def test_every_method_notebook_and_a_dozen_pages_carry_figures(site):
    "Every method notebook from the token MI (10) to the trainer (25) shows a figure on its page, and at least 12 pages do."
    figures = {p.relative_to(site).as_posix() for p in site.rglob("*.html")
               if "_static" not in p.parts and "<img" in p.read_text(errors="replace")}
    method = sorted(p.stem for p in (ROOT / "nbs").glob("*.ipynb") if p.stem[:2].isdigit() and 10 <= int(p.stem[:2]) <= 25)
    assert len(method) == 16, method
    assert not [m for m in method if f"nbs/{m}.html" not in figures], sorted(figures)
    assert len(figures) >= 12, sorted(figures)


@needs_site
def test_notebooks_cited_on_the_site_are_links(site):
    "The trainer page cites the notebooks it wires by link, not as bare code."
    page = (site / "nbs" / "25_trainer.html").read_text()
    assert 'href="14_policy.html' in page and 'href="19_update.html' in page


@needs_site
def test_the_public_api_has_rendered_signatures(site):
    "The API page renders each public function's signature (Sphinx's sig-name) with its anchor, e.g. the token MI's."
    page = (site / "api.html").read_text()
    assert 'id="ugttt.uncertainty.token_mutual_information"' in page and page.count("sig-name") > 300
