"""Build the documentation site: execute every notebook into a build folder, then render the README (its source,
nbs/00_index, as the front page), every notebook with its outputs, docs/*.md and the tables and figures of
docs/results/ as a static HTML site.

    python tools/build_docs.py            # `make docs`: execute (reusing unchanged notebooks' outputs) and render
    python tools/build_docs.py --slow     # also run the `#| slow` cells, and store their outputs in docs/cache/
    python tools/build_docs.py --render   # render only, from the executed copies of the last build

The committed notebooks stay clean: the executed copies live in _build/docs/src (ignored by git), the site in
_build/docs/html; open _build/docs/html/index.html. Quarto (nbdev's docs pipeline) cannot be installed from PyPI
where GitHub is out of reach (its package downloads the binary from GitHub at install time), so the site is rendered
with Sphinx and MyST-NB, the renderer of Jupyter Book, and MathJax is served from the site itself (django-static-mathjax).

A cell flagged `#| slow` (minutes) is never run by a plain build and never skipped silently: its output comes from
docs/cache/slow_cells.json when that holds the cell's current source, with a note on the page saying so and when it
was made; otherwise the page says it was not run and how to run it. `#| cuda` cells are treated alike (no GPU here).
"""
import argparse, hashlib, json, os, re, shutil, subprocess, sys, time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build" / "docs"
SRC, HTML = BUILD / "src", BUILD / "html"
CACHE = ROOT / "docs" / "cache" / "slow_cells.json"
SKIP_FLAGS = ("slow", "cuda", "notest")      # nbdev's test flags (settings.ini tst_flags)
NB_TIMEOUT_S = 2400                          # per notebook; the slowest takes about 200 s on an idle 2-core machine, 20 min at load 30
RETRIES = 1                                  # a failed notebook is run once more before the build reports it


def directives(source: str) -> dict:
    "A code cell's nbdev directives (`#| slow`, `#| export`, ...) -> their arguments."
    out = {}
    for line in source.splitlines():
        m = re.match(r"\s*#\|\s*([\w-]+:?)\s*(.*)$", line)
        if m: out[m.group(1).rstrip(":")] = m.group(2).strip()
    return out


def cell_key(nb_name: str, source: str) -> str:
    "The cache key of a cell: its notebook and the SHA-256 of its source (an edited cell no longer matches)."
    return f"{nb_name}:{hashlib.sha256(source.encode()).hexdigest()[:16]}"


def package_digest() -> str:
    "A digest of the notebooks' inputs beyond themselves: the package source and the test data."
    h = hashlib.sha256()
    for p in sorted([*ROOT.glob("ugttt/**/*.py"), *ROOT.glob("tests/data/**/*")]):
        if p.is_file(): h.update(str(p.relative_to(ROOT)).encode()); h.update(p.read_bytes())
    return h.hexdigest()


# ---- 1. execution ---------------------------------------------------------------------------------------------------

def execute_one(nb_path: Path, out: Path, run_slow: bool) -> None:
    "Run one notebook as its test does (nbdev's test_nb), skipping flagged cells unless run_slow, and write it with outputs."
    sys.path.insert(0, str(ROOT))
    from execnb.nbio import read_nb, write_nb
    from execnb.shell import CaptureShell
    os.environ.setdefault("IN_TEST", "1")
    nb = read_nb(nb_path)   # as it is: nbdev's front-matter processor would turn the title cell into YAML
    skip = set(SKIP_FLAGS) - ({"slow"} if run_slow else set())
    try:
        import torch
        if torch.cuda.is_available(): skip.discard("cuda")
    except ImportError: pass
    timing = {}
    def preproc(cell):   # True: do not run
        if cell.cell_type != "code": return True
        if skip & set(directives(cell.source)): return True
        timing[cell.idx_] = time.perf_counter()
        return False
    def postproc(cell):
        if cell.idx_ in timing: cell.metadata["ugttt_seconds"] = round(time.perf_counter() - timing[cell.idx_], 1)
    shell = CaptureShell(nb_path)
    os.chdir(nb_path.parent)
    shell.run_all(nb, exc_stop=True, preproc=preproc, postproc=postproc)
    write_nb(nb, out)


def execute_all(names: list[str], run_slow: bool, log) -> dict:
    "Execute the notebooks one at a time in fresh processes, reusing a copy whose notebook and package are unchanged: name -> status."
    (BUILD / "executed").mkdir(parents=True, exist_ok=True)
    pkg, status = package_digest(), {}
    for name in names:
        src, out = ROOT / "nbs" / f"{name}.ipynb", BUILD / "executed" / f"{name}.ipynb"
        out.parent.mkdir(parents=True, exist_ok=True)   # a tutorial's copy goes to executed/tutorials/
        stamp = out.with_suffix(".stamp")
        want = hashlib.sha256(src.read_bytes() + pkg.encode() + str(run_slow).encode()).hexdigest()
        if out.exists() and stamp.exists() and stamp.read_text() == want:
            status[name] = "reused"; continue
        t0 = time.perf_counter()
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
        for attempt in range(1 + RETRIES):   # a notebook's timing checks can fail on a loaded machine, as its test can
            try:
                proc = subprocess.run([sys.executable, __file__, "--exec-one", str(src), str(out)] + (["--slow"] if run_slow else []),
                                      cwd=src.parent, env=env, capture_output=True, text=True, timeout=NB_TIMEOUT_S)
                ok, err = proc.returncode == 0, proc.stderr[-3000:]
            except subprocess.TimeoutExpired:
                ok, err = False, f"timed out after {NB_TIMEOUT_S} s"
            if ok: break
            if attempt < RETRIES: log(f"  {name}: failed, once more (the error: {err.strip().splitlines()[-1] if err.strip() else '?'})")
        secs = time.perf_counter() - t0
        if ok: stamp.write_text(want); status[name] = f"executed in {secs:.0f} s"
        else:
            stamp.unlink(missing_ok=True); out.unlink(missing_ok=True); status[name] = "FAILED"
            log(f"  {name}: FAILED after {secs:.0f} s\n{err}")
        log(f"  {name}: {status[name]}")
    return status


# ---- 2. pages -------------------------------------------------------------------------------------------------------

def load_cache() -> dict:
    return json.loads(CACHE.read_text()) if CACHE.exists() else {}


def note_cell(text: str):
    "A Markdown cell holding a note to the reader."
    import nbformat
    return nbformat.v4.new_markdown_cell(text)


def page_from_notebook(name: str, executed: Path | None, cache: dict, run_slow: bool, site: set, log, status: str | None,
                       where: str = "nbs"):
    "The page of one notebook: the executed copy, flagged cells from the cache (or a note), directives removed, links fixed."
    import nbformat
    src = ROOT / "nbs" / f"{name}.ipynb"
    nb = nbformat.read(executed if executed else src, as_version=4)
    cells = []
    if executed is None:
        cells.append(note_cell("> **This notebook failed to execute in this build**: the code below is shown without its "
                               "outputs. Run `make docs` again after fixing it (the build log names the error)."
                               if status == "FAILED" else "> **Not executed yet**: this build rendered the notebook without "
                               "outputs (no executed copy); a full `make docs` runs it."))
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    for c in nb.cells:
        if c.cell_type == "markdown":
            c.source = link_citations(rewrite_links(c.source, where, site), where, site); cells.append(c); continue
        d = directives(c.source)
        flagged = [f for f in SKIP_FLAGS if f in d]
        key = cell_key(name, c.source)
        if flagged and run_slow and c.outputs is not None and "ugttt_seconds" in c.metadata:   # it ran here: refresh the cache
            cache[key] = dict(outputs=[dict(o) for o in c.outputs], made=stamp, seconds=c.metadata["ugttt_seconds"],
                              commit=git_commit())
        note = None
        if flagged and "ugttt_seconds" not in c.metadata:
            hit = cache.get(key)
            why = {"slow": "a `#| slow` cell (it takes minutes)", "cuda": "a `#| cuda` cell (it needs a GPU)",
                   "notest": "a `#| notest` cell"}[flagged[0]]
            if hit:
                c.outputs = [nbformat.from_dict(o) for o in hit["outputs"]]
                note = (f"> **Cached output.** The cell below is {why}, so this build did not run it: its output is the "
                        f"one stored in `docs/cache/slow_cells.json` from the build of {hit['made']} (commit "
                        f"{(hit.get('commit') or 'unknown')[:10]}, {hit['seconds']} s). `make docs-slow` runs it again.")
            else:
                note = (f"> **Not run in this build.** The cell below is {why}; no cached output holds its current source, "
                        "so it has no output here. " + ("`make docs-slow` runs it and caches its output." if flagged[0] == "slow"
                        else "It runs where a CUDA GPU is present." if flagged[0] == "cuda" else ""))
            log(f"  {name}: {'cached' if hit else 'not run'}: {flagged[0]} cell {key}")
        if note: cells.append(note_cell(note))
        if "hide" in d: c.metadata.setdefault("tags", []).append("remove-cell")
        c.source = "\n".join(l for l in c.source.splitlines() if not re.match(r"\s*#\|", l)).strip("\n")
        c.metadata.pop("ugttt_seconds", None)
        if c.source or c.outputs: cells.append(c)
    nb.cells = title_first(cells)
    return nb


def title_first(cells: list) -> list:
    "The cells with the notebook's title (its first '# ' heading) moved above the code before it: a page opens with its title, not its imports."
    at = next((i for i, c in enumerate(cells) if c.cell_type == "markdown" and re.match(r"#\s", c.source)), None)
    if at is None: return cells
    first = next((i for i, c in enumerate(cells[:at]) if c.cell_type == "code"), None)
    if first is None: return cells
    return cells[:first] + [cells[at]] + cells[first:at] + cells[at + 1:]


def git_commit() -> str | None:
    r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return r.stdout.strip() or None


LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)(\))")

def _repo_url() -> str:
    "Where a file of the repository is read online: settings.ini's git_url and branch."
    from configparser import ConfigParser
    cfg = ConfigParser(); cfg.read(ROOT / "settings.ini")
    return f"{cfg['DEFAULT']['git_url']}/blob/{cfg['DEFAULT']['branch']}"

REPO_URL = _repo_url()

def rewrite_links(text: str, where: str, site: set) -> str:
    "Relative links of a Markdown text in folder `where`: kept when they point into the site, else to the repository online."
    base = REPO_URL
    def fix(m):
        target = m.group(2)
        if re.match(r"^(\w+:|#|/)", target): return m.group(0)
        path, _, frag = target.partition("#")
        rel = os.path.normpath(os.path.join(where, path)).replace(os.sep, "/")
        if rel.endswith("/") or (ROOT / rel).is_dir():                        # a folder: its README page, if it has one
            rel = rel.rstrip("/") + "/README.md"
            if rel in site: return m.group(1) + os.path.relpath(rel, where or ".") + (f"#{frag}" if frag else "") + m.group(3)
        if rel in site: return m.group(0)
        return m.group(1) + f"{base}/{rel}" + (f"#{frag}" if frag else "") + m.group(3)
    return LINK.sub(fix, text)


CITATION = re.compile(r"(?<!\[)`((?:tutorials/)?\d\d_[A-Za-z0-9_]+)`(?!\]\()")

def link_citations(text: str, where: str, site: set) -> str:
    "Notebooks cited by name as code (`14_policy`) become links to their pages, outside fenced code and existing links."
    def link(m):
        page = f"nbs/{m.group(1)}.ipynb"
        return f"[`{m.group(1)}`]({os.path.relpath(page, where or '.')})" if page in site else m.group(0)
    parts = re.split(r"(^```.*?^```)", text, flags=re.M | re.S)               # odd parts: fenced code, left alone
    return "".join(part if i % 2 else CITATION.sub(link, part) for i, part in enumerate(parts))


def reading_order() -> list[str]:
    "Every notebook's name (its path under nbs/ without .ipynb) in reading order: the index, the tutorials, then by number."
    nbs = ROOT / "nbs"
    found = [p.relative_to(nbs).with_suffix("").as_posix() for p in nbs.rglob("[0-9]*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    return sorted(found, key=lambda n: (n != "00_index", not n.startswith("tutorials/"), n))


def title_of(nb) -> str:
    "A notebook's title: its first Markdown heading."
    for c in nb.cells:
        if c.cell_type == "markdown":
            m = re.search(r"^#\s+(.+)$", c.source, re.M)
            if m: return m.group(1).strip()
    return "untitled"


def _paper_first(rel: str) -> tuple:
    "Results pages in reading order: the paper's tables first, then the mechanism study's stages."
    return (not Path(rel).stem.startswith("table"), rel)


def result_source(stem: str) -> tuple[str, str] | None:
    "The reproduce notebook a results page comes from, and the make target that regenerates it: ('table4', 'make reproduce')."
    nbs = sorted((p.stem for p in (ROOT / "reproduce").glob("*.ipynb")), key=len, reverse=True)
    nb = next((n for n in nbs if stem == n or stem.startswith(n + "_")), None)
    if nb is None: return None
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    return nb, f"make {nb.replace('_', '-')}" if nb.replace("_", "-") in targets else "make reproduce"


RESULT_FIGURES = {"table1": ("figure2", "Table 1 on a laptop", "../table1-on-a-laptop.md")}   # page -> (its figure, the docs page that reads it)

def result_preamble(stem: str) -> str:
    "What a results page says above its table: the command and notebook that regenerate it, its files, and its reading and figure where it has them."
    src = result_source(stem)
    if src is None: return ""
    nb, cmd = src
    text = (f"Regenerated by `{cmd}` from `reproduce/{nb}.ipynb` (papermill); every number, the parameters and the versions "
            f"are in `docs/results/{nb}.json` beside this page.\n\n")
    if stem in RESULT_FIGURES:
        fig, where, link = RESULT_FIGURES[stem]
        text += f"What it shows is read in [{where}]({link}).\n\n![{fig}]({fig}.png)\n\n"
    return text


def api_modules() -> list[str]:
    "The package's public modules, sorted by name: every module nbdev exported, private ones left out."
    from ugttt._modidx import d
    mods = {v[1] for syms in d["syms"].values() for v in syms.values()}   # 'ugttt/loss.py', 'ugttt/sandbox/pool.py', ...
    names = sorted({m[:-3].replace("/", ".").removesuffix(".__init__") for m in mods if m.endswith(".py")})
    return [n for n in names if not any(part.startswith("_") for part in n.split("."))]


def api_page(modules: list[str]) -> str:
    "The API reference: one section per module, its public names with their signatures and docstrings (Sphinx autodoc)."
    head = ("# API reference\n\nEvery public name of the package, module by module, with its signature and its one-line "
            "docstring; the notebook of each module explains and tests it.\n")
    return head + "".join(f"\n## `{m}`\n\n```{{eval-rst}}\n.. automodule:: {m}\n```\n" for m in modules)


def write_sources(names: list[str], status: dict, run_slow: bool, log) -> None:
    "The Sphinx source tree: index (README), notebooks, docs pages, results pages and figures, MathJax, conf.py."
    import nbformat
    if SRC.exists(): shutil.rmtree(SRC)
    (SRC / "nbs").mkdir(parents=True)
    docs = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))
    results = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs" / "results").glob("*.md"))
    pages = [f"nbs/{n}.ipynb" for n in names]
    site = set(pages) | set(docs) | set(results) | {"README.md"} | {
        p.relative_to(ROOT).as_posix() for p in (ROOT / "docs" / "results").glob("*.png")}
    cache = load_cache()
    pages_nb = {}
    for n in ["00_index"] + names:   # 00_index, the README's source, is the front page, with its outputs
        executed = BUILD / "executed" / f"{n}.ipynb"
        ran = status.get(n) != "FAILED" and executed.exists()
        pages_nb[n] = page_from_notebook(n, executed if ran else None, cache, run_slow, site, log, status.get(n),
                                         "" if n == "00_index" else os.path.dirname(f"nbs/{n}"))
        if n != "00_index":
            (SRC / "nbs" / n).parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(pages_nb[n], SRC / "nbs" / f"{n}.ipynb")
    if run_slow:
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        CACHE.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
    for rel in docs + results:
        (SRC / rel).parent.mkdir(parents=True, exist_ok=True)
        text = link_citations(rewrite_links((ROOT / rel).read_text(), os.path.dirname(rel), site), os.path.dirname(rel), site)
        if not text.startswith("# "):   # a results table has none: its name, "Table 1", "Table 4 firing", "Mechanism pilot"
            title = re.sub(r"table(\d)", r"Table \1", Path(rel).stem).replace("_", " ")
            text = f"# {title[0].upper() + title[1:]}\n\n{result_preamble(Path(rel).stem)}{text}"
        (SRC / rel).write_text(text)
    for p in (ROOT / "docs" / "results").glob("*.png"): shutil.copy(p, SRC / "docs" / "results" / p.name)
    figures = sorted((ROOT / "docs" / "results").glob("*.png"))
    (SRC / "docs" / "results" / "figures.md").write_text("# Figures of the results\n\nEvery figure in `docs/results/`, as the "
        "reproduce notebooks wrote it (each beside its CSV and JSON of plotted numbers).\n\n"
        + "\n\n".join(f"## {p.stem}\n\n![{p.stem}]({p.name})" for p in figures) + "\n")
    titles = {n: title_of(pages_nb[n]) for n in names}
    toc = lambda caption, entries: f"```{{toctree}}\n:caption: {caption}\n:hidden:\n\n" + "\n".join(entries) + "\n```"
    index = pages_nb["00_index"]
    index.cells += [note_cell(toc("Notebooks", [f"{titles[n]} <nbs/{n}>" for n in names])),
                    note_cell(toc("Guides", [d[:-3] for d in docs])),
                    note_cell(toc("Results", ["docs/results/README"] + [r[:-3] for r in sorted(results, key=_paper_first)
                                                                         if not r.endswith("README.md")]
                                  + ["docs/results/figures"])),
                    note_cell(toc("Reference", ["api"]))]
    (SRC / "api.md").write_text(api_page(api_modules()))
    nbformat.write(index, SRC / "index.ipynb")
    (SRC / "README.md").write_text("---\norphan: true\n---\n# README\n\nThe README is this site's [front page](index.ipynb).\n")
    mj = Path(__import__("mathjax").__file__).parent / "static" / "mathjax" / "es5"
    shutil.copytree(mj, SRC / "_static" / "mathjax", ignore=shutil.ignore_patterns("sre", "*-speech*", "*.map"))
    shutil.copy(ROOT / "tools" / "docs_conf.py", SRC / "conf.py")


def render(log) -> int:
    "Sphinx's html build of the source tree; its warnings go to the log."
    if HTML.exists(): shutil.rmtree(HTML)
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-j", "1", str(SRC), str(HTML)],
                          capture_output=True, text=True)
    (BUILD / "sphinx-warnings.log").write_text(proc.stderr)
    n = proc.stderr.count("WARNING")
    log(f"sphinx: exit {proc.returncode}, {n} warnings (_build/docs/sphinx-warnings.log)")
    if proc.returncode: log(proc.stderr[-3000:])
    return proc.returncode


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--slow", action="store_true", help="also run the `#| slow` cells and refresh docs/cache/slow_cells.json")
    p.add_argument("--render", action="store_true", help="render only, from the executed copies of the last build")
    p.add_argument("--only", nargs="*", help="execute only these notebooks (names without .ipynb); the others as last built")
    p.add_argument("--exec-one", nargs=2, metavar=("NB", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.exec_one:
        execute_one(Path(args.exec_one[0]), Path(args.exec_one[1]), args.slow); return 0
    t0 = time.perf_counter()
    BUILD.mkdir(parents=True, exist_ok=True)
    logf = open(BUILD / "build.log", "w")
    def log(msg):
        print(msg, flush=True); logf.write(msg + "\n"); logf.flush()
    names = [n for n in reading_order() if n != "00_index"]   # 00_index: the front page
    status = {n: "reused" for n in ["00_index"] + names}
    if not args.render:
        log(f"executing {len(args.only or names)} notebooks, one at a time")
        status.update(execute_all(args.only or ["00_index"] + names, args.slow, log))
    t1 = time.perf_counter()
    write_sources(names, status, args.slow, log)
    rc = render(log)
    failed = [n for n, s in status.items() if s == "FAILED"]
    log(f"done in {time.perf_counter() - t0:.0f} s (execution {t1 - t0:.0f} s, rendering {time.perf_counter() - t1:.0f} s): "
        f"open {HTML / 'index.html'}" + (f"; FAILED notebooks: {', '.join(failed)}" if failed else ""))
    return 1 if rc or failed else 0


if __name__ == "__main__":
    sys.exit(main())
