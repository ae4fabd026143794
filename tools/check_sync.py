"""CI guard: the notebooks are the source, so `nbdev_export` and `nbdev_clean` must change nothing."""
import hashlib, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def snapshot() -> dict:
    "Content hash of every file the two commands may touch."
    files = [*ROOT.glob('nbs/**/*.ipynb'), *ROOT.glob('reproduce/*.ipynb'), *ROOT.glob('ugttt/**/*.py')]
    return {p.relative_to(ROOT).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files if '.ipynb_checkpoints' not in p.parts}


def main() -> int:
    nbs = sorted(p for p in ROOT.glob('nbs/**/[0-9]*.ipynb') if '.ipynb_checkpoints' not in p.parts)
    if not nbs:
        print('check_sync: no notebooks found under nbs/'); return 1
    before = snapshot()
    subprocess.run([str(BIN/'nbdev_export')], cwd=ROOT, check=True)
    subprocess.run([str(BIN/'nbdev_clean')], cwd=ROOT, check=True)
    for nb in sorted(ROOT.glob('reproduce/*.ipynb')):
        subprocess.run([str(BIN/'nbdev_clean'), '--fname', str(nb)], cwd=ROOT, check=True)
    after = snapshot()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        print('check_sync: nbdev_export/nbdev_clean changed these files (run them and commit):')
        for c in changed: print('  ', c)
        return 1
    print(f'check_sync: {len(nbs)} notebooks clean and in sync with the package')
    return 0


if __name__ == '__main__':
    sys.exit(main())
