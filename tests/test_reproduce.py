"""Every notebook in reproduce/ runs under papermill with smoke=True, and each output file it promises exists and parses.

table1 runs first and trains the shared smoke runs (4 tasks x 2 methods x 2 seeds); the other notebooks reuse them
and train only what they add (the no-NNM ablation, the forced-streaming runs).
"""
import ast, io, json, tokenize
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
REPRO = ROOT / "reproduce"
NOTEBOOKS = ["table1", "table2", "table3", "table4", "figure1", "figure2", "figure3"]   # table1 first: it trains the shared runs
TABLES = dict(table1=["table1"], table2=["table2"], table3=["table3"], table4=["table4_firing", "table4_paired", "table4_spearman"])
REQUIRED_PARAMETERS = {"preset", "epochs", "seeds", "runs_dir", "reuse", "smoke", "out_dir"}


def parameters_cell(name: str) -> str:
    "The source of the notebook's one cell tagged 'parameters'."
    nb = json.loads((REPRO / f"{name}.ipynb").read_text())
    cells = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"{name}: expected exactly one cell tagged 'parameters', found {len(cells)}"
    return "".join(cells[0]["source"])


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_parameters_are_commented_literals(name):
    src = parameters_cell(name)
    tree = ast.parse(src)
    names = set()
    for node in tree.body:
        assert isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name), \
            f"{name}: the parameters cell may hold only `name = literal` lines, got {ast.unparse(node)!r}"
        ast.literal_eval(node.value)   # raises on anything but a literal
        names.add(node.targets[0].id)
    commented = {t.start[0] for t in tokenize.generate_tokens(io.StringIO(src).readline) if t.type == tokenize.COMMENT}
    for node in tree.body:
        assert node.lineno in commented, f"{name}: parameter {node.targets[0].id!r} has no comment on its line"
    assert REQUIRED_PARAMETERS <= names, f"{name}: missing parameters {sorted(REQUIRED_PARAMETERS - names)}"


@pytest.fixture(scope="module")
def smoke_dirs(tmp_path_factory):
    "One runs directory and one output directory shared by every notebook of the module (runs are reused)."
    base = tmp_path_factory.mktemp("reproduce")
    return base / "runs", base / "out"


def check_outputs(out: Path, name: str) -> None:
    "Each promised output exists and parses: tables (CSV, LaTeX, Markdown), figures (PDF, PNG, CSV) and the JSON."
    import pandas as pd
    import matplotlib.pyplot as plt
    head = json.loads((out / f"{name}.json").read_text())          # strict JSON: NaN is written as null
    assert head["results"] and head["parameters"]["smoke"] is True
    assert head["versions"]["torch"] and head["machine"]["cores"] >= 1
    for stem in TABLES.get(name, []):
        df = pd.read_csv(out / f"{stem}.csv", index_col=0)
        assert len(df) >= 1 and len(df.columns) >= 1, f"{stem}.csv is empty"
        tex = (out / f"{stem}.tex").read_text()
        assert r"\begin{tabular}" in tex and tex.rstrip().endswith(r"\end{table}") and "SMOKE RUN" in tex
        assert (out / f"{stem}.md").read_text().startswith("|")
    if name.startswith("figure"):
        assert (out / f"{name}.pdf").read_bytes()[:4] == b"%PDF"
        assert plt.imread(out / f"{name}.png").ndim == 3
        assert len(pd.read_csv(out / f"{name}.csv")) >= 1


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_in_smoke_mode(name, smoke_dirs):
    import papermill as pm
    runs, out = smoke_dirs
    pm.execute_notebook(str(REPRO / f"{name}.ipynb"), str(out.parent / f"{name}.out.ipynb"), cwd=str(REPRO),
                        parameters=dict(smoke=True, seeds=[0, 1], runs_dir=str(runs), out_dir=str(out)),
                        progress_bar=False, log_output=False, stdout_file=None, stderr_file=None)
    check_outputs(out, name)
