"""The package's layering, read from its source: the config is a leaf, no private name crosses a module, the ensemble's
backend stays inside the policy, importing the policy leaves the sandbox out, the sandbox stands alone, and the names
the config checks against are the components' own."""
import ast, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "ugttt"
MODULES = sorted(p for p in PKG.rglob("*.py") if p.name != "_modidx.py")



def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _relative_imports(path: Path, top_level_only: bool = False) -> list[ast.ImportFrom]:
    nodes = _tree(path).body if top_level_only else ast.walk(_tree(path))
    return [n for n in nodes if isinstance(n, ast.ImportFrom) and n.level > 0]


def test_config_is_a_leaf():
    "ugttt/config.py imports only checks at its top; inside functions only the reference's switches, the moved file readers, the trackers' checks and a built-in task's defaults."
    assert {n.module for n in _relative_imports(PKG / "config.py", top_level_only=True)} == {"checks"}
    lazy = {(n.module, tuple(a.name for a in n.names)) for n in ast.walk(_tree(PKG / "config.py"))
            if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("ugttt")}
    assert lazy <= {("ugttt.reference", ("reference_overrides",)), ("ugttt", ("config_files",)),
                    ("ugttt.tasks", ("TASK_NAMES", "get_task")), ("ugttt.tracking", ("report_to_tuple",)),
                    ("ugttt.tracking", ("check_report_to",))}, lazy


def test_no_private_name_crosses_a_module():
    "No `from .x import _y` (nor `from ugttt.x import _y`) anywhere in the package, at any level of its code."
    found = {(str(p.relative_to(PKG)), n.lineno, a.name) for p in MODULES for n in ast.walk(_tree(p))
             if isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").startswith("ugttt"))
             for a in n.names if a.name.startswith("_")}
    assert not found, sorted(found)


def test_the_backend_stays_in_the_policy():
    "Only the policy and the stacked module touch `ens.stack`; update, scores and replay never ask which backend trains."
    for p in MODULES:
        nodes = [n for n in ast.walk(_tree(p)) if isinstance(n, ast.Attribute)]
        attrs = {n.attr for n in nodes if not (isinstance(n.value, ast.Name) and n.value.id in ("torch", "np"))}   # not torch.stack
        if p.name not in ("policy.py", "ensemble.py"): assert "stack" not in attrs, p.name
        if p.name in ("update.py", "scores.py", "replay.py"):
            assert "train_mode" not in attrs and "_active" not in attrs, p.name


def test_importing_the_policy_leaves_the_sandbox_and_the_tasks_out():
    "`import ugttt.policy` (the ensemble, its scores and training) loads no part of the sandbox or the tasks."
    code = "import sys, ugttt.policy; print(sorted(m for m in sys.modules if m.startswith(('ugttt.sandbox', 'ugttt.tasks'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(out) == [], out


def test_the_sandbox_stands_alone():
    "The sandbox's modules import only the standard library, numpy, `ugttt.checks`, each other and (its Ray backend) ray."
    outside = set()
    for p in sorted((PKG / "sandbox").glob("*.py")):
        for n in ast.walk(_tree(p)):
            names = ([a.name for a in n.names] if isinstance(n, ast.Import) else
                     ["." * n.level + (n.module or "")] if isinstance(n, ast.ImportFrom) else [])
            for name in names:
                if name.startswith("..") or name.startswith("ugttt."):
                    ok = name in ("..checks", "ugttt.checks") or name.startswith("ugttt.sandbox.")
                elif name.startswith("."): ok = True                                   # a sibling in the sandbox
                else: ok = name.split(".")[0] in sys.stdlib_module_names | {"numpy"} | ({"ray"} if p.name == "ray.py" else set())
                if not ok: outside.add((p.name, name))
    assert not outside, sorted(outside)
    code = "import sys, ugttt.sandbox; print(sorted(m for m in sys.modules if m.startswith('ugttt.') and not m.startswith(('ugttt.sandbox', 'ugttt.checks'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(out) == [], out


def test_no_module_is_over_500_lines():
    "Every module of the package is under 500 lines (nbdev's index, _modidx.py, is data)."
    sizes = {str(p.relative_to(PKG)): len(p.read_text().splitlines()) for p in MODULES}
    assert max(sizes.values()) <= 500, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]


def test_no_exported_cell_is_over_60_lines():
    "Every exported notebook cell holds at most 60 lines: one definition, readable at once."
    import json
    long = [(p.name, i, len(s.splitlines())) for p in sorted((ROOT / "nbs").rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts
            for i, c in enumerate(json.loads(p.read_text())["cells"])
            for s in ["".join(c["source"])] if c["cell_type"] == "code" and s.startswith(("#| export", "#| exporti"))
            if len(s.splitlines()) > 60]
    assert not long, long


def test_importing_the_config_loads_nothing_else():
    "`import ugttt.config` loads no other module of the package than checks."
    code = "import sys, ugttt.config; print(sorted(m for m in sys.modules if m.startswith('ugttt.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(out) == ["ugttt.checks", "ugttt.config"], out


@pytest.mark.parametrize("name, module, attr", [
    ("BUDGET_CLOCKS", "ugttt.sandbox.budget", "BUDGET_CLOCKS"),
    ("ISOLATION_MODES", "ugttt.sandbox.confine", "MODES"),
    ("PUCT_BACKUPS", "ugttt.puct", "BACKUPS"),
])
def test_the_config_checks_against_the_components_own_names(name, module, attr):
    "Each list of values the config accepts equals the list of the component that defines them."
    import importlib
    import ugttt.config as config
    assert tuple(getattr(config, name)) == tuple(getattr(importlib.import_module(module), attr))


def test_policy_dtypes_are_the_loaders():
    "The dtypes a PolicyConfig accepts by name are those load_base_model resolves."
    import ugttt.config as config
    import ugttt.policy as policy
    assert tuple(config.DTYPES) == tuple(policy._DTYPES)
