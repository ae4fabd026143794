"""What `pip install ugttt` brings is enough to import the package. settings.ini's `requirements` is what a
plain install gets; the dev extras (nbdev, fastcore, pytest, ...) are not there. Every import that runs when a ugttt
module is imported (module level, class bodies included) must be the standard library, ugttt itself or a declared
requirement; an import inside a function may also come from an optional extra (the feature says which extra to
install) or from what those declare themselves. The check reads the source with `ast`, so it is fast and runs in
`make test-fast`; tools/wheel_smoke.py proves the same by installing the wheel into a bare venv."""
import ast
import importlib.metadata as md
import re
import shlex
import sys
from configparser import ConfigParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _norm(name: str) -> str: return re.sub(r"[-_.]+", "-", name).lower()
def _dist(req: str) -> str: return _norm(re.match(r"[A-Za-z0-9_.-]+", req.strip()).group(0))


def declared() -> tuple[set[str], set[str]]:
    "settings.ini's requirements and the union of its extras, as normalised distribution names."
    cfg = ConfigParser(delimiters=["="])
    cfg.read(ROOT / "settings.ini", encoding="utf-8")
    d = cfg["DEFAULT"]
    reqs = {_dist(r) for r in shlex.split(d.get("requirements", ""))}
    extras = {_dist(r) for k, v in d.items() if k.startswith("extras_") for r in shlex.split(v)}
    return reqs, extras


def closure(dists: set[str]) -> set[str]:
    "dists and everything they require (not their extras), by the installed metadata of this environment."
    seen, todo = set(), list(dists)
    while todo:
        name = todo.pop()
        if name in seen: continue
        seen.add(name)
        try: reqs = md.requires(name) or []
        except md.PackageNotFoundError: continue
        todo += [_dist(r) for r in reqs if "extra ==" not in r.split(";", 1)[-1]]
    return seen


def imports(tree: ast.Module) -> list[tuple[str, int, bool]]:
    "(top-level package, line, runs at import) of every absolute import; imports inside a function do not run at import."
    out = []
    def visit(node, at_import):
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, ast.Import): out.extend((a.name.split(".")[0], ch.lineno, at_import) for a in ch.names)
            elif isinstance(ch, ast.ImportFrom) and ch.level == 0: out.append((ch.module.split(".")[0], ch.lineno, at_import))
            visit(ch, at_import and not isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
    visit(tree, True)
    return out


def undeclared(src: str, where: str, reqs: set[str], optional: set[str], dists_of: dict) -> list[str]:
    "One line per import in src that a plain install (at import) or an install with the extras (in a function) lacks."
    bad = []
    for mod, line, at_import in imports(ast.parse(src)):
        if mod in sys.stdlib_module_names or mod == "ugttt" or mod == "__future__": continue
        dists = {_norm(d) for d in dists_of.get(mod, [mod])}
        allowed = reqs if at_import else optional
        if not dists & allowed:
            bad.append(f"{where}:{line}: `{mod}` ({', '.join(sorted(dists))}) is imported "
                       + ("at module level but is not in settings.ini `requirements`" if at_import else
                          "in a function but is neither a requirement, an extra, nor required by one of them"))
    return bad


def test_every_import_of_the_package_is_declared():
    reqs, extras = declared()
    dists_of = md.packages_distributions()
    optional = closure(reqs | extras)
    files = sorted((ROOT / "ugttt").rglob("*.py"))
    assert len(files) > 20, files
    bad = [b for p in files for b in undeclared(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)), reqs, optional, dists_of)]
    assert not bad, "\n".join(bad)


def test_the_check_finds_a_dev_only_import():
    "The check can fail: fastcore at module level (the bug this test was written for), an undeclared package in a function, a dev tool."
    reqs, extras = declared()
    dists_of = md.packages_distributions()
    src = ("from __future__ import annotations\nimport json, numpy as np\nfrom fastcore.basics import patch\n"
           "class A:\n    import pytest\n"
           "def f():\n    import ray, yaml\n    from no_such_package_anywhere import x\n")
    bad = undeclared(src, "m.py", reqs, closure(reqs | extras), dists_of)
    assert [b.split(":")[1] for b in bad] == ["3", "5", "8"], bad
    assert "`fastcore` (fastcore) is imported at module level" in bad[0], bad
    assert "no-such-package-anywhere" in bad[2], bad
    assert {"torch", "transformers", "pyyaml"} <= reqs and "fastcore" not in reqs and "nbdev" not in reqs, reqs


SANDBOX = ROOT / "ugttt" / "sandbox"


def test_sandbox_package_reexports_exactly_its_submodules_public_names():
    "ugttt.sandbox (hand-written, lazy) lists each submodule's __all__, and every name resolves to that submodule's object."
    import importlib
    import ugttt.sandbox as S
    assert set(S.SUBMODULES) == {p.stem for p in SANDBOX.glob("*.py") if p.stem != "__init__"}
    for name, names in S.SUBMODULES.items():
        mod = importlib.import_module(f"ugttt.sandbox.{name}")
        assert set(names) == set(mod.__all__), (name, set(names) ^ set(mod.__all__))
        for n in names: assert getattr(S, n) is getattr(mod, n), n
    assert len(S.__all__) == len(set(S.__all__)) == sum(len(v) for v in S.SUBMODULES.values())
    for n in ("Sandbox", "RunResult", "default_sandbox", "WALL_BACKSTOP", "budget_limits", "DEFAULT_PRELOAD"): assert n in S.__all__


def test_sandbox_bundle_and_launcher_import_only_the_standard_library():
    "The zygote's script (protocol, procs, zygote) and the mountns launcher (confine, run by path) import only the stdlib."
    from ugttt.sandbox.worker import zygote_source
    for name in ("protocol", "procs", "zygote", "confine"):
        tree = ast.parse((SANDBOX / f"{name}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree) if name != "confine" else tree.body:   # confine: module level only (isolation_report imports more)
            if isinstance(node, ast.Import): mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level: assert name != "confine" and node.level == 1 and node.module in ("protocol", "procs"), (name, node.lineno); continue
                mods = [node.module]
            else: continue
            for m in mods: assert m.split(".")[0] in sys.stdlib_module_names or m == "__future__", (name, node.lineno, m)
    src = zygote_source().decode()
    compile(src, "<ugttt-sandbox-zygote>", "exec")
    assert "from .p" not in src and src.count("from __future__") == 1


def test_tasks_package_reexports_the_core_and_its_lazy_names():
    "ugttt.tasks (hand-written) lists the core's __all__ plus its lazy names, and every name resolves to the object it names."
    import importlib
    import ugttt.tasks as T
    import ugttt.tasks.core as core
    assert T.__all__ == list(core.__all__) + list(T.LAZY)
    for n in core.__all__: assert getattr(T, n) is getattr(core, n), n
    for n, mod in T.LAZY.items():
        if mod is not None: assert getattr(T, n) is getattr(importlib.import_module(mod), n), n
    assert T.TASK_NAMES == core.task_names() == ("ac1", "ac2", "cp26", "erdos")
    for n in T.TASK_NAMES: assert getattr(T, n) is importlib.import_module(f"ugttt.tasks.{n}")
