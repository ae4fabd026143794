"""The package's layering, read from its source: the config is a leaf, no import cycle, no private name crosses a module, the ensemble's
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


def _module_name(path: Path) -> str:
    "ugttt/tasks/core.py -> ugttt.tasks.core; a package's __init__.py -> the package."
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


NAMES = {_module_name(p): p for p in MODULES}


def _imported(path: Path) -> set[str]:
    "Every name `path` imports, at any level of its code: relative imports resolved, `from pkg import module` as the module."
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = set()
    for n in ast.walk(_tree(path)):
        if isinstance(n, ast.Import): out |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom):
            base = ".".join(package.split(".")[:len(package.split(".")) - n.level + 1]) if n.level else ""
            base = ".".join(x for x in (base, n.module) if x)
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in NAMES else base for a in n.names}
    return out


def _package_module(name: str) -> str | None:
    "The module of the package a dotted import name loads (its longest prefix that is one), or None outside the package."
    parts = name.split(".")
    return next((".".join(parts[:k]) for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in NAMES), None)


def test_config_is_a_leaf():
    "ugttt/config.py imports, at any level of its code (inside functions too), only ugttt.checks of the package and the standard library: no torch."
    names = _imported(PKG / "config.py")
    ours = {n for n in names if n.split(".")[0] == "ugttt"}
    others = {n for n in names - ours if n != "__future__" and n.split(".")[0] not in sys.stdlib_module_names}
    assert ours == {"ugttt.checks"} and not others, (sorted(ours), sorted(others))


def _import_graph() -> dict[str, set[str]]:
    "Module -> the package's modules it imports, from every Import and ImportFrom at every level of its code."
    return {me: {m for m in map(_package_module, _imported(p)) if m and m != me} for me, p in NAMES.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    "One cycle of the graph as a path that returns to its start, or None (an iterative depth-first search)."
    state = {}   # module -> 1 on the current path, 2 done
    for root in sorted(graph):
        if root in state: continue
        path, todo = [root], [iter(sorted(graph[root]))]
        state[root] = 1
        while todo:
            nxt = next(todo[-1], None)
            if nxt is None:
                state[path.pop()] = 2; todo.pop(); continue
            if state.get(nxt) == 1: return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                state[nxt] = 1; path.append(nxt); todo.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_the_import_graph_has_no_cycle():
    "No module of the package imports itself through others, counting imports inside functions (a package and the modules its __init__ imports aside)."
    graph = _import_graph()
    assert "ugttt.tasks.core" in graph["ugttt.tasks"] and "ugttt.checks" in graph["ugttt.config_files"]   # the graph is read
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_a_cycle_is_found_and_named():
    "The search itself: a planted cycle is reported as its path."
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


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


def test_device_types_are_torchs():
    "Each device type the config accepts is one torch.device parses, and the config reads a device string as torch does."
    import warnings
    import torch
    import ugttt.config as config
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # torch warns that mkldnn is deprecated as a device type
        for t in config.DEVICE_TYPES: torch.device(t)
    for d in ("cpu", "cuda", "cuda:0", "cuda:12", "cpu:0", "mps", "meta", "xpu:3", "cuda:01", "cuda:", "cuda:-1", "gpu", "CUDA",
              " cpu", "cuda:0:1", "cuda:x"):
        try: torch.device(d); ok = True
        except (RuntimeError, TypeError): ok = False
        assert bool(config._DEVICE.fullmatch(d)) == ok, d


def test_policy_dtypes_are_the_loaders():
    "The dtypes a PolicyConfig accepts by name are those load_base_model resolves."
    import ugttt.config as config
    import ugttt.policy as policy
    assert tuple(config.DTYPES) == tuple(policy._DTYPES)


def _parameters(f: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    "A function's parameters as a caller passes them: self and cls left out, *args and **kwargs counted once each."
    a = f.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs] + [x.arg for x in (a.vararg, a.kwarg) if x]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def test_no_function_takes_more_than_8_parameters():
    "No function of the package but a constructor takes more than 8 parameters (house 2): what travels together is grouped."
    wide = [(str(p.relative_to(PKG)), f.name, len(_parameters(f))) for p in MODULES for f in ast.walk(_tree(p))
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name not in ("__init__", "__new__")
            and len(_parameters(f)) > 8]
    assert not wide, wide


def test_a_wide_function_is_found():
    "The parameter count sees positional, keyword-only and starred parameters, and leaves self out."
    f = ast.parse("class C:\n def m(self, a, b, /, c, *d, e, f=1, **g): pass").body[0].body[0]
    assert _parameters(f) == ["a", "b", "c", "e", "f", "d", "g"]
