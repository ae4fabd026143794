"""CI guard: the package stands on its own, so nothing a user reads cites a document that is not in the repository.

Scans the notebooks, the package, the README, docs/, bench/ and the build files for citations of the founding team's
private notes (their specs, design document, issue texts and the shared folder they lived in), and for the paper's
`\\MI` macro, which renders as an error in Jupyter (write `\\mathrm{MI}`). Cite the paper by section title, the public
reference repository by file path, or a document under docs/.
"""
import re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    'the shared folder': re.compile(r'\.\./shared|\bshared/(spec|paper|reference)'),
    'a private spec': re.compile(r'\bspec\s*§|\bspec/|reference-impl(\.md)?\b|fidelity-review|\becosystem\.md'),
    'a private benchmarks note': re.compile(r'(?<!docs/)\bbenchmarks\.md'),
    'the design document': re.compile(r'\bDESIGN(\.md)?\b'),
    'an issue text': re.compile(r'\b(the|this|that) issue\b|\bissue #?\d+\b', re.IGNORECASE),
    'the paper macro \\MI': re.compile(r'\\MI\b'),
}
GLOBS = ['nbs/**/*.ipynb', 'ugttt/**/*.py', 'README.md', 'docs/**/*.md', 'bench/*.py', 'Makefile', 'settings.ini', 'requirements.txt',
         'setup.py', 'reproduce/*.ipynb']


def problems() -> list:
    "Every (file, line number, what, line) that cites something a user does not have."
    found = []
    for pattern in GLOBS:
        for path in sorted(ROOT.glob(pattern)):
            for i, line in enumerate(path.read_text(errors='replace').splitlines(), 1):
                for what, rx in FORBIDDEN.items():
                    if rx.search(line): found.append((path.relative_to(ROOT).as_posix(), i, what, line.strip()[:160]))
    return found


def main() -> int:
    found = problems()
    for f, i, what, line in found: print(f'{f}:{i}: cites {what}: {line}')
    if found:
        print(f'check_citations: {len(found)} citation(s) of documents users do not have'); return 1
    print('check_citations: no citation of a document outside the repository')
    return 0


if __name__ == '__main__':
    sys.exit(main())
