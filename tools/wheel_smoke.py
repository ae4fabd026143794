#!/usr/bin/env python3
"""The pip user's path, proven on every `make test`. Builds a wheel from this checkout out of tree (nothing
is written into the checkout), installs it with pip into a fresh venv that holds only the pinned torch, and from a
directory outside the checkout imports every public module, runs `ugttt doctor`, a 1-epoch tiny `ugttt train` and
`ugttt report`; then installs the `notebooks` extra in the same venv and executes nbs/tutorials/01_one_group with
papermill, as a pip user runs the notebooks. Nothing comes from requirements.txt or the dev extras: pip resolves settings.ini's ranges as a user's
pip does, so the newest releases they admit are what is tested. The training's and the report's stderr must hold no
warning (a library deprecation printed on every run is a bug we fix at its source).

`--extras ray,trl,tensorboard` also installs `<wheel>[extra]`, each extra into a fresh venv of its own, and imports its
feature (`make slow`: about a minute or more each). Prints each phase's seconds; exits 1 on the first failure.
Usage: python tools/wheel_smoke.py [--extras ray,trl,tensorboard] [--keep]"""
import argparse, os, re, shutil, subprocess, sys, tempfile, time, zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"   # pinned exactly, first: see docs/install.md
# the smoke sizes of ugttt.reproduce.SMOKE with one epoch: every phase of an epoch (generate, verify, score, update,
# checkpoint) in seconds; K = 5 as in the tiny preset
TRAIN = ["--task", "cp26", "--method", "ugttt", "--preset", "tiny", "--epochs", "1", "--groups_per_epoch", "1",
         "--group_size", "4", "--decode_groups", "1", "--budget_s", "2", "--policy.max_new_tokens", "96",
         "--policy.code_budget", "64", "--quiet"]
# imports every public module (ugttt.* whose own name has no leading _), from the venv, and no dev tool came with them
IMPORT_ALL = """
import importlib, pkgutil, sys, ugttt
from importlib.resources import files
mods = [m.name for m in pkgutil.walk_packages(ugttt.__path__, "ugttt.") if not m.name.rsplit(".", 1)[-1].startswith("_")]
for m in mods: importlib.import_module(m)
assert ugttt.__file__.startswith(sys.prefix), f"ugttt imported from {ugttt.__file__}, not from the venv {sys.prefix}"
dev = sorted({"fastcore", "nbdev", "execnb", "papermill", "pytest", "hypothesis"} & {m.split(".")[0] for m in sys.modules})
assert not dev, f"importing ugttt imported dev tools: {dev}"
model = files("ugttt") / "assets" / "default_model"
missing = [f for f in ("config.json", "model.safetensors", "tokenizer.json") if not (model / f).is_file()]
assert not missing, f"the embedded default model lacks {missing} in the wheel"
print(f"imported {len(mods)} modules from {ugttt.__file__}")
"""
# per extra: what `import <feature>` means, run in that extra's venv
EXTRAS = {
    "ray": """
from ugttt.sandbox.ray import RaySandbox, _import_ray
from ugttt.trainer import check_extras
from ugttt.presets import make_config
ray = _import_ray()
check_extras(make_config("cp26", "ugttt", "tiny", **{"sandbox.executor": "ray"}))
print("ray", ray.__version__)
""",
    "trl": """
import trl
from trl import GRPOConfig, GRPOTrainer
from ugttt.trl_reward import lora_config, prompt_dataset, reward_function
ds = prompt_dataset("cp26", 2)
assert len(ds) == 2 and set(ds.column_names) == {"prompt", "parent"}, ds
print("trl", trl.__version__, "prompt_dataset", len(ds), "rows")
""",
    "tensorboard": """
from pathlib import Path
from ugttt.tracking import check_report_to, open_tracker
assert check_report_to("tensorboard") == ("tensorboard",)
d = Path("runs/tracking").resolve(); d.mkdir(parents=True)   # in the smoke's work folder, removed with it
t = open_tracker("tensorboard", d, "smoke", {"task": "cp26"})
t.log({"train/reward/exec/best": 1.0}, 0); t.close()
assert any((d / "tensorboard").iterdir()), "no event file written"
print("tensorboard: events in", d / "tensorboard")
""",
}


class Failed(Exception): pass


def run(cmd, cwd=None, env=None, timeout=900, check=True) -> subprocess.CompletedProcess:
    "Run cmd, output captured; Failed with its tail when it exits non-zero (check)."
    p = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise Failed(f"`{' '.join(map(str, cmd))}` exited {p.returncode}:\n{(p.stdout + p.stderr)[-3000:]}")
    return p


def phase(name: str, times: dict):
    "A context that prints and records how long a phase took."
    class _P:
        def __enter__(self): self.t = time.perf_counter(); print(f"wheel smoke: {name} ...", flush=True)
        def __exit__(self, *exc):
            times[name] = time.perf_counter() - self.t
            if exc[0] is None: print(f"wheel smoke: {name} {times[name]:.1f} s", flush=True)
    return _P()


def sources(dst: Path) -> None:
    "Copy the checkout's files (tracked, and untracked ones git does not ignore) to dst: the build never writes here."
    ls = run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"]).stdout.split("\0")
    for rel in filter(None, ls):
        src = ROOT / rel
        if src.is_file() and not src.is_symlink():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)


def build_wheel(src: Path, out: Path) -> Path:
    "The wheel of src, built with this interpreter's setuptools (no download) where it has one, else pip's isolated build."
    import importlib.util
    local = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *local, "-w", out, src])
    wheels = list(out.glob("ugttt-*.whl"))
    if len(wheels) != 1: raise Failed(f"expected one ugttt wheel in {out}, found {wheels}")
    return wheels[0]


def check_wheel(whl: Path, src: Path) -> None:
    "Every package file of the checkout is in the wheel (the embedded model included), with the console script; no dev requirement outside the dev extra."
    wheel = zipfile.ZipFile(whl)
    names = set(wheel.namelist())
    want = {str(p.relative_to(src)) for p in (src / "ugttt").rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    missing = sorted(want - names)
    if missing: raise Failed(f"{whl.name} lacks {len(missing)} package files, e.g. {missing[:5]} (setup.py package_data)")
    dist = next(n for n in names if n.endswith(".dist-info/METADATA"))
    reqs = [l.split(":", 1)[1].strip() for l in wheel.read(dist).decode().splitlines() if l.startswith("Requires-Dist:")]
    core = [r for r in reqs if "extra ==" not in r]
    dev = [r for r in core if re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() in ("fastcore", "nbdev", "execnb", "pytest")]
    if dev: raise Failed(f"dev tools are core requirements of the wheel: {dev}")
    eps = wheel.read(dist.replace("METADATA", "entry_points.txt")).decode()
    if "ugttt = ugttt.cli:main" not in eps: raise Failed(f"no `ugttt` console script in the wheel:\n{eps}")
    print(f"wheel smoke: {whl.name}: {len(names)} files, {len(want)} package files all present, {len(core)} requirements")


def venv(path: Path, spec: str, env: dict) -> Path:
    "A fresh venv at path with only the pinned torch, then spec installed by pip (no bytecode compiled at install); its python."
    run([sys.executable, "-m", "venv", path])
    py = path / "bin" / "python"
    pip = [py, "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check"]
    run([*pip, TORCH], env=env)
    run([*pip, spec], env=env)
    torch = run([py, "-c", "import torch; print(torch.__version__)"], env=env).stdout.strip()
    if not torch.startswith("2.13.0"): raise Failed(f"installing {spec} replaced the pinned torch with {torch}")
    run([py, "-m", "pip", "check"], env=env)
    return py


def warnings_in(text: str) -> list[str]:
    "Lines of stderr that are a warning (Python's or a library's log) rather than progress or our own messages."
    return [l for l in text.splitlines() if "Warning" in l or "deprecated" in l.lower()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--extras", default="", help="comma-separated extras to smoke too: " + ", ".join(EXTRAS))
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    args = ap.parse_args(argv)
    extras = [e for e in args.extras.split(",") if e]
    bad = [e for e in extras if e not in EXTRAS]
    if bad: ap.error(f"unknown extra {bad[0]!r}; choose from {', '.join(EXTRAS)}")
    tmp = Path(tempfile.mkdtemp(prefix="ugttt-wheel-smoke-"))
    # the user's environment: no PYTHONPATH into the checkout, no venv of ours, no Hugging Face settings (the package
    # never downloads: the embedded model loads from the package's files), transformers' log at its default level
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "TRANSFORMERS_VERBOSITY", "TOKENIZERS_PARALLELISM") and not k.startswith("HF_")}
    times, start = {}, time.perf_counter()
    try:
        with phase("build", times):
            (tmp / "src").mkdir(); sources(tmp / "src")
            whl = build_wheel(tmp / "src", tmp / "dist")
            check_wheel(whl, tmp / "src")
        with phase("install (fresh venv, torch, the wheel)", times):
            py = venv(tmp / "venv", str(whl), env)
        work = tmp / "work"; work.mkdir()                     # outside the checkout: `import ugttt` cannot find it there
        env_v = {**env, "PATH": f"{py.parent}{os.pathsep}{env.get('PATH', '')}"}
        ugttt = py.parent / "ugttt"
        with phase("import every public module", times):
            print(run([py, "-c", IMPORT_ALL], cwd=work, env=env_v).stdout.strip())
        with phase("ugttt doctor", times):
            print(run([ugttt, "doctor"], cwd=work, env=env_v).stdout.strip().splitlines()[-1])
        with phase("ugttt train (1 epoch, tiny, smoke sizes)", times):
            p = run([ugttt, "train", *TRAIN, "--out", "runs/smoke"], cwd=work, env=env_v)
            if warnings_in(p.stderr): raise Failed("ugttt train printed warnings:\n" + "\n".join(warnings_in(p.stderr)))
        with phase("ugttt report", times):
            p = run([ugttt, "report", "runs/smoke"], cwd=work, env=env_v)
            print(p.stdout.strip())
            if warnings_in(p.stderr): raise Failed("ugttt report printed warnings:\n" + "\n".join(warnings_in(p.stderr)))
            rows = [line.split() for line in p.stdout.splitlines() if line.startswith("runs/smoke")]   # the table's one run row
            if len(rows) != 1: raise Failed(f"expected one report row for runs/smoke, got {len(rows)}")
            if rows[0][1:5] != ["cp26", "ugttt", "0", "1"] or rows[0][-1] != "ok":   # task, method, seed, epochs ... logs
                raise Failed(f"unexpected report row {rows[0]}")
        with phase("extra [notebooks] in the same venv, tutorials/01_one_group under papermill", times):
            run([py, "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check", f"{whl}[notebooks]"], env=env)
            run([py, "-m", "pip", "check"], env=env)
            torch = run([py, "-c", "import torch; print(torch.__version__)"], env=env).stdout.strip()
            if not torch.startswith("2.13.0"): raise Failed(f"installing [notebooks] replaced the pinned torch with {torch}")
            # the tutorial as a reader runs it: from the checkout's copy, executed in the work folder on the venv's kernel
            run([py, "-m", "papermill", tmp / "src" / "nbs" / "tutorials" / "01_one_group.ipynb", work / "01_one_group.ipynb",
                 "--kernel", "python3", "--cwd", work, "--no-progress-bar"], cwd=work, env=env_v, timeout=1800)
        for e in extras:
            with phase(f"extra [{e}]: fresh venv, torch, the wheel[{e}], import", times):
                py_e = venv(tmp / f"venv-{e}", f"{whl}[{e}]", env)
                print(run([py_e, "-c", EXTRAS[e]], cwd=work, env=env).stdout.strip())
    except (Failed, subprocess.TimeoutExpired) as e:
        print(f"wheel smoke: FAILED: {e}", file=sys.stderr)
        print(f"wheel smoke: files kept in {tmp}", file=sys.stderr)
        return 1
    install = times["install (fresh venv, torch, the wheel)"]
    total = time.perf_counter() - start
    print(f"wheel smoke: passed in {total:.0f} s: build {times['build']:.0f} s, install {install:.0f} s, beyond the install "
          f"{total - install - times['build'] - sum(v for k, v in times.items() if k.startswith('extra')):.0f} s"
          + "".join(f", {k.split(':')[0]} {v:.0f} s" for k, v in times.items() if k.startswith("extra")), flush=True)
    if args.keep: print(f"wheel smoke: files kept in {tmp}")
    else: shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
